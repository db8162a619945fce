"""Auto-restart of FAILED connectors and tasks (issue 35): a reconcile job in the driver that keeps
``connector_restarts`` up to date.

Path of the feature: the status topic → the connector-state job's ``connectors`` and ``connector_events`` (FAILED,
the trace, the target state) → this job: each pass judges what came of its earlier restarts and, for every connector
``restart.auto.connectors`` opts in whose connector or tasks are FAILED while its target state is STARTED, writes
the restart request Connect's leader executes (``restart-connector-<name>``, onlyFailed, includeTasks) once its
backoff has passed (:mod:`connect_state.restarts.policy`: Strimzi's n²+n, a maximum, a reset), and records the attempt
(this job is the table's only writer: a second instance waits for the ``restarts`` lease) → the API's ``GET
/connectors/<name>/restarts`` and ``GET /restarts``, and the dashboard.

Run continuously (a pass every ``trigger.interval``) or once, for a scheduled run::

    connect-state-restarts [--once | --available-now] [--conf-file F] [--set key=value ...]
"""

from __future__ import annotations

import argparse

from connect_state.core.settings import add_config_arguments
from connect_state.spark.restarts import RestartsJob
from connect_state.spark.streaming import job_main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="connect-state-restarts", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--once", dest="available_now", action="store_true", help="one pass, then exit (scheduled runs)"
    )
    parser.add_argument("--available-now", dest="available_now", action="store_true", help="alias of --once")
    add_config_arguments(parser)
    return job_main(RestartsJob(), parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
