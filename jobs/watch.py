"""Verdicts (issue 35): a reconcile job in the driver that judges every connector and keeps ``connector_verdicts``
and ``verdict_history`` up to date.

Path of the feature: the tables of the other jobs (``connectors``, ``connector_events``, ``sink_offsets``,
``source_offsets``, ``active_topics``, ``heartbeats``) and the topics' log ends → this job's pass every
``verdict.trigger.interval`` (:mod:`connect_state.spark.watch` gathers, :mod:`connect_state.verdicts.judge` decides)
→ the Delta tables ``connector_verdicts`` and ``verdict_history`` → the API's ``GET /connectors/<name>/verdict``,
``GET /verdicts`` and the ``connect_state_connector_verdict`` gauge.

Run continuously (a pass every ``verdict.trigger.interval``) or once, for a scheduled run::

    connect-state-watch [--once | --available-now] [--conf-file F] [--set key=value ...]
"""

from __future__ import annotations

import argparse

from connect_state.core.settings import add_config_arguments
from connect_state.spark.streaming import job_main
from connect_state.spark.watch import WatchJob


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="connect-state-watch", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--once", dest="available_now", action="store_true", help="one pass, then exit (scheduled runs)"
    )
    parser.add_argument("--available-now", dest="available_now", action="store_true", help="alias of --once")
    add_config_arguments(parser)
    return job_main(WatchJob(), parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
