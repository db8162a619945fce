"""KIP-910 heartbeats for idle source partitions: detect them in the topics, call the providers, commit offsets.

Path of the feature: ``connect-configs`` + ``connect-status`` + ``connect-offsets`` → parsed
(:mod:`connect_state.formats`) → one ``applyInPandasWithState`` group per connector, without timeouts
(:mod:`connect_state.heartbeats.fold`) → the connectors' new states → the ``foreachBatch`` writer, on the driver:
``source_partition_activity`` (idle age per partition) and the job's schedule → the job's timer, on the driver: the
provider of the connector class (:mod:`connect_state.heartbeats.provider`), records to the heartbeat topic and offsets
to the offsets topic (:mod:`connect_state.heartbeats.emitter`) → Delta table ``heartbeats`` (every heartbeat) → the
API's ``GET /connectors/<name>/heartbeats``. The pipeline, its trigger and the timer:
:mod:`connect_state.spark.heartbeats`.

* **continuous** (default): an idle partition gets its heartbeat within a second of its due time, once the query
  has folded its last record;
* **catch-up** (``--available-now``): the query folds what the topics hold and ends, then the timer sends what is
  due: partitions that went idle while no job ran get their heartbeat.

Delivery is at least once: a crash between sending and recording may send a heartbeat again. A second instance on
the same tables (a continuous one and a scheduled catch-up run, say) waits for the ``heartbeats`` lease instead of
sending heartbeats too. Records a worker would discard are skipped here; the connector-states and offsets jobs
quarantine them::

    connect-state-heartbeats [--available-now] [--conf-file F] [--set key=value ...]
"""

from __future__ import annotations

from connect_state.spark.heartbeats import HeartbeatsJob
from connect_state.spark.streaming import job_arguments, job_main


def main(argv: list[str] | None = None) -> int:
    job = HeartbeatsJob()
    description = __doc__.split("\n\n")[0]
    args = job_arguments(job.name, description, "catch up with the topics, send the heartbeats due, then stop")
    return job_main(job, args.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
