"""KIP-558 active topics: the status topic folded into the ``active_topics`` Delta table.

Path of the feature: ``connect-status`` → :mod:`connect_state.formats.status` (parse) →
:mod:`connect_state.folds.active_topics` (fold per connector, in ``applyInPandasWithState``) → Delta tables
``active_topics`` (current set), ``active_topics_history`` (every change) and ``rejected_records`` → the API's
``GET /connectors/<name>/topics``.

Run continuously (processing-time trigger, ``trigger.interval``) or as a catch-up run that stops when it has read
everything (``--available-now``, for a scheduled job)::

    connect-state-active-topics [--available-now] [--conf-file F] [--set key=value ...]
    spark-submit --archives dist/connect-state-env.tar.gz#environment ... jobs/active_topics.py --available-now
"""

from __future__ import annotations

from connect_state.spark.active_topics import JOB
from connect_state.spark.streaming import job_arguments, job_main


def main(argv: list[str] | None = None) -> int:
    args = job_arguments(JOB.name, __doc__.split("\n\n")[0]).parse_args(argv)
    return job_main(JOB, args)


if __name__ == "__main__":
    raise SystemExit(main())
