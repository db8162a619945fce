"""KIP-875 connector states: the config and status topics folded into the ``connectors`` Delta table.

Path of the feature: ``connect-configs`` + ``connect-status`` → :mod:`connect_state.formats.config` /
:mod:`connect_state.formats.status` (parse) → :mod:`connect_state.folds.connector_states` (fold per connector, in
``applyInPandasWithState``) → Delta tables ``connectors`` (one row per connector, deleted ones flagged) and
``connector_events`` (every transition) → the API's ``GET /connectors``, ``GET /connectors/<name>/status``.

Run continuously or as a catch-up run (``--available-now``)::

    connect-state-connector-states [--available-now] [--conf-file F] [--set key=value ...]
"""

from __future__ import annotations

from connect_state.spark.connector_states import JOB
from connect_state.spark.streaming import job_arguments, job_main


def main(argv: list[str] | None = None) -> int:
    args = job_arguments(JOB.name, __doc__.split("\n\n")[0]).parse_args(argv)
    return job_main(JOB, args)


if __name__ == "__main__":
    raise SystemExit(main())
