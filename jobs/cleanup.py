"""KIP-883 cleanup on connector deletion: a reconcile job in the driver that keeps ``connector_deletions`` up to date.

Path of the feature: ``connect-configs`` → the connector-state job's ``deleted`` events (``connector_events``, with the
connector's last config) → this job: each pass plans the steps of every deletion it has not seen yet, runs the steps
that are due (:mod:`connect_state.cleanup.reconciler` decides what and when; :mod:`connect_state.spark.cleanup` reads
and writes), and merges each outcome into the Delta table ``connector_deletions`` right after the step ran (this job is
the table's only writer: a second instance waits for the ``cleanup`` lease) → the API's ``GET
/connectors/<name>/deletions``.

The steps act on the topics, like a worker would: tombstones for the connector's ``status-topic-*`` keys (status
topic), tombstones with the exact key bytes of its source offsets (offsets topics), deletion of a sink's consumer
group (:class:`connect_state.kafka.ConsumerGroupAdmin`), and the deletion hooks. The keys to tombstone are the
union of what the ``active_topics`` / ``source_offsets`` tables list and what a batch read of the topic itself shows
live, so a step does not depend on how far the other jobs have got. A recreation of the name is looked up in
``connector_events`` and in the config topic itself.

Run continuously (a pass every ``trigger.interval``) or once, for a scheduled run::

    connect-state-cleanup [--once | --available-now] [--conf-file F] [--set key=value ...]
"""

from __future__ import annotations

import argparse

from connect_state.core.settings import add_config_arguments
from connect_state.spark.cleanup import CleanupJob
from connect_state.spark.streaming import job_main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="connect-state-cleanup", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--once", dest="available_now", action="store_true", help="one pass, then exit (scheduled runs)"
    )
    parser.add_argument("--available-now", dest="available_now", action="store_true", help="alias of --once")
    add_config_arguments(parser)
    return job_main(CleanupJob(), parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
