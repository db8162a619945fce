"""The alerts job: a pass every ``alerts.evaluation.interval.ms`` evaluates the rules over the tables
(:mod:`connect_state.alerts.reconciler`), records the alerts and their deliveries, and sends what is due.

It reads and writes through ``deltalake`` (:mod:`connect_state.alerts.store`) and sends with requests
(:mod:`connect_state.alerts.delivery`); Spark is not used, the job only shares the jobs' supervisor, so it runs in
``connect-state-jobs`` beside the others or alone as ``connect-state-alerts``. A second instance waits for the
``alerts`` lease, and every write of a pass is fenced by it: two instances never notify twice.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import SparkSession

from connect_state.alerts.channels import Backoff, Channel, parse_channels
from connect_state.alerts.delivery import HttpSender
from connect_state.alerts.reconciler import AlertsReconciler
from connect_state.alerts.rules import Rule, load_rules
from connect_state.alerts.store import DeltaAlertsIO
from connect_state.core.clusters import cluster_label
from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings
from connect_state.spark.leases import LeasedTask
from connect_state.spark.retention import maintained_passes
from connect_state.spark.streaming import PeriodicTask, Run, job_logger
from connect_state.tables.lease_store import keeper_for
from connect_state.tables.schemas import ALERT_DELIVERIES, ALERT_SILENCES, ALERTS, now_ms

JOB_NAME = "alerts"
ALERTS_LEASE = "alerts"
log = job_logger(JOB_NAME)


def backoff_of(settings: Settings) -> Backoff:
    return Backoff(
        settings.alerts_retry_backoff_ms, settings.alerts_retry_backoff_max_ms, settings.alerts_retry_max_attempts
    )


def generator_url(settings: Settings) -> str:
    return settings.alerts_generator_url or f"http://{settings.api_host}:{settings.api_port}"


def check_settings(settings: Settings) -> tuple[list[Rule], list[Channel]]:
    """The rules and channels of the settings; a bad one is a ConfigError naming the key (or file and line)."""
    for key, value in (
        ("alerts.evaluation.interval.ms", settings.alerts_evaluation_interval_ms),
        ("alerts.delivery.timeout.ms", settings.alerts_delivery_timeout_ms),
        ("alerts.alertmanager.resend.interval.ms", settings.alerts_alertmanager_resend_interval_ms),
    ):
        if value <= 0:
            raise ConfigError(f"{key}: expected milliseconds above 0, got {value}")
    backoff_of(settings)
    return load_rules(settings.alerts_rules_file), parse_channels(settings.alerts_channels)


def alerts_reconciler(
    settings: Settings, *, sender: HttpSender | None = None, fence: Callable[[], None] | None = None
) -> AlertsReconciler:
    rules, channels = check_settings(settings)
    io = DeltaAlertsIO(settings, sender or HttpSender(settings.alerts_delivery_timeout_ms))
    return AlertsReconciler(
        io,
        rules,
        channels,
        backoff_of(settings),
        generator_url=generator_url(settings),
        resend_ms=settings.alerts_alertmanager_resend_interval_ms,
        clock=now_ms,
        log=log,
        fence=fence,
        cluster=cluster_label(settings),
    )


class AlertsJob:
    """The alerts passes (:class:`~connect_state.spark.streaming.Job`): one every ``alerts.evaluation.interval.ms``,
    or a single one for a catch-up run."""

    name = JOB_NAME

    def check(self, settings: Settings) -> None:
        rules, channels = check_settings(settings)
        log.info(
            "%d alert rules (%s); channels: %s",
            len(rules),
            settings.alerts_rules_file or "the shipped rules.yml",
            ", ".join(f"{c.name} ({c.kind})" for c in channels) or "none (alerts are recorded, not sent)",
        )

    def start(self, spark: SparkSession, settings: Settings, available_now: bool, max_offsets: int | None) -> Run:
        lease = keeper_for(settings, ALERTS_LEASE)
        sender = HttpSender(settings.alerts_delivery_timeout_ms)
        interval = settings.alerts_evaluation_interval_ms / 1000

        def passes() -> PeriodicTask:  # a new reconciler per lease taken: it reads the tables' state afresh
            reconciler = alerts_reconciler(settings, sender=sender, fence=lease.fence)
            return maintained_passes(
                settings,
                JOB_NAME,
                reconciler.run_pass,
                interval,
                available_now,
                log,
                (ALERTS, ALERT_DELIVERIES, ALERT_SILENCES),
            )

        task = LeasedTask(JOB_NAME, lease, passes, once=available_now)
        return Run([task], closers=[sender.close, lease.release])
