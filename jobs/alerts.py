"""Alerts (issue 35): rules over the verdicts, cleanup failures, heartbeat failures and data loss, sent to webhooks,
Slack and Alertmanager, one notification when a condition starts and one when it resolves.

Path of the feature: the tables (``connector_verdicts``, ``connector_deletions``, ``heartbeats``, ``data_loss``) →
this job: each pass evaluates the rules (``alerts.rules.file``), records the alerts (``alerts``) and one delivery per
notification and channel (``alert_deliveries``) before sending it, retries what failed with backoff, and skips the
connectors an operator silenced (``alert_silences``, written by the API) → ``GET /alerts``, ``GET
/alerts/deliveries``.

Run continuously (a pass every ``alerts.evaluation.interval.ms``) or once, for a scheduled run::

    connect-state-alerts [--once | --available-now] [--conf-file F] [--set key=value ...]
"""

from __future__ import annotations

import argparse

from connect_state.core.settings import add_config_arguments
from connect_state.spark.alerts import AlertsJob
from connect_state.spark.streaming import job_main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="connect-state-alerts", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--once", dest="available_now", action="store_true", help="one pass, then exit (scheduled runs)"
    )
    parser.add_argument("--available-now", dest="available_now", action="store_true", help="alias of --once")
    add_config_arguments(parser)
    return job_main(AlertsJob(), parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
