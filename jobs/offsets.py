"""KIP-875 offsets: source offsets from the offsets topics, sink offsets from ``__consumer_offsets``, as Delta tables.

Two queries in one SparkSession, each with its own checkpoint:

* ``source_offsets``: ``connect-offsets`` (``offset.storage.topic``) plus every connector-specific offsets topic
  (a connector config's ``offsets.storage.topic``, read from the ``connectors`` table of the connector-states job)
  → Delta tables ``source_offsets`` (one row per live key) and ``source_offsets_history`` (every record) → the API's
  ``GET /connectors/<name>/offsets`` of a source connector. A continuous run restarts the query when a connector's
  own offsets topic appears (:mod:`connect_state.spark.source_offsets`).
* ``sink_offsets``: ``__consumer_offsets`` (``consumer.offsets.topic``) → Delta tables ``sink_offsets`` (committed
  offsets of every group) and ``sink_offsets_history`` → the API's ``GET /connectors/<name>/offsets`` of a sink
  connector (group ``connect-<name>`` or ``consumer.override.group.id``; :mod:`connect_state.spark.sink_offsets`).

Malformed records of either topic go to ``rejected_records`` with the reason.

Run continuously or as a catch-up run (``--available-now``)::

    connect-state-offsets [--available-now] [--max-offsets-per-trigger N] [--conf-file F] [--set key=value ...]
"""

from __future__ import annotations

from connect_state.spark.offsets import JOB
from connect_state.spark.streaming import job_arguments, job_main


def main(argv: list[str] | None = None) -> int:
    args = job_arguments(JOB.name, __doc__.split("\n\n")[0]).parse_args(argv)
    return job_main(JOB, args)


if __name__ == "__main__":
    raise SystemExit(main())
