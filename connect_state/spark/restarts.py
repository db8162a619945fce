"""Auto-restart of FAILED connectors and tasks (issue 35), the I/O: the decisions are
:class:`connect_state.restarts.reconciler.RestartsReconciler`'s, the policy :mod:`connect_state.restarts.policy`'s.

A pass reads the ``connectors`` table (the connector-state job's: statuses, traces, target states, configs), the
``connector_restarts`` rows and the status changes of ``connector_events``, all through ``deltalake`` (small reads, no
Spark job); before a restart it reads the config topic to its end (:class:`connect_state.kafka.ConfigTopicTail`: the
target state now, not the table's), then writes the restart request through the herder
(:meth:`connect_state.herder.Herder.restart_connector` with onlyFailed and includeTasks: ``restart-connector-<name>``,
which Connect's leader executes) and merges the attempt into ``connector_restarts`` (``deltalake``). The job is the
table's only writer: a second instance waits for the ``restarts`` lease, and every request and record is fenced by it.
Where ``deltalake`` cannot commit (a Databricks volume or DBFS path) give ``delta.root`` as the cloud URI.

The job (:class:`RestartsJob`) runs a pass every ``trigger.interval``, or one for a catch-up run; with
``restart.auto.connectors`` empty (the default) it does nothing and takes no lease. Console script:
``connect-state-restarts`` (jobs/restarts.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError
from pyspark.sql import SparkSession

from connect_state.connect.offset_stores import ConnectorOffsetStores
from connect_state.core.errors import KafkaWriteError
from connect_state.core.settings import Settings, interval_seconds
from connect_state.core.storage import deltalake_options
from connect_state.folds.config_snapshot import ConnectorConfigView
from connect_state.folds.connector_states import STATUS_CHANGED, TASK_STATUS_CHANGED
from connect_state.herder import Herder
from connect_state.herder.errors import NotEstablishedError
from connect_state.kafka import ConfigTopicTail, InternalTopicWriter, TopicLogReader
from connect_state.leases.decisions import RESTARTS_LEASE
from connect_state.restarts.policy import RestartPolicy, policy_from_settings
from connect_state.restarts.reconciler import Attempt, RestartsReconciler, StatusChange, attempt_from_row
from connect_state.spark.leases import LeasedTask
from connect_state.spark.retention import maintained_passes
from connect_state.spark.streaming import PeriodicTask, Run, job_logger
from connect_state.tables import small_writes
from connect_state.tables.lease_store import keeper_for
from connect_state.tables.merge_spec import MergeSpec, matched_update, not_matched_insert, source_values
from connect_state.tables.scan import read_filtered
from connect_state.tables.schemas import (
    CONNECTOR_EVENTS,
    CONNECTOR_RESTARTS,
    CONNECTORS,
    TABLE_PROPERTIES,
    epoch_ms,
    now_ms,
    timestamp,
)

JOB_NAME = "restarts"
CLIENT_ID = "connect-state-restarts"
log = job_logger(JOB_NAME)

_ALL = source_values(CONNECTOR_RESTARTS.column_names)
RESTARTS_MERGE = MergeSpec(
    " AND ".join(f"t.{k} = s.{k}" for k in CONNECTOR_RESTARTS.key),
    (matched_update(_ALL), not_matched_insert(_ALL)),
)


class _JobHerderIO:
    """:class:`~connect_state.herder.io.HerderIO` for the restart request alone: the config topic read to its end,
    the ``connectors`` row the pass read, the job's Kafka writer."""

    def __init__(self, owner: RestartsJobIO) -> None:
        self.owner = owner

    def connector(self, name: str) -> ConnectorConfigView:
        return self.owner.config_view(name)

    def connector_row(self, name: str) -> Mapping[str, Any] | None:
        return self.owner.rows.get(name)

    def writer(self) -> Any:
        return self.owner.writer

    def active_topics(self, name: str) -> list[str]:
        raise NotImplementedError("the restarts job only restarts")

    def source_rows(self, name: str, stores: ConnectorOffsetStores) -> list[dict[str, Any]]:
        raise NotImplementedError("the restarts job only restarts")

    def committed_topics(self, group: str) -> set[str]:
        raise NotImplementedError("the restarts job only restarts")

    def connector_names(self) -> set[str]:
        return set(self.owner.rows)

    def admin(self) -> Any:
        raise NotImplementedError("the restarts job only restarts")


class RestartsJobIO:
    """:class:`connect_state.restarts.reconciler.RestartsIO` on ``deltalake`` and Kafka; ``fence`` (the lease's)
    runs before every restart request and every record."""

    def __init__(
        self,
        settings: Settings,
        *,
        fence: Callable[[], None] | None = None,
        writer: Any | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.settings = settings
        self.fence = fence or (lambda: None)
        self.clock = clock
        self._options = deltalake_options(settings)
        self._writer = writer
        self._owns_writer = writer is None
        self._tail: ConfigTopicTail | None = None
        self.rows: dict[str, Mapping[str, Any]] = {}
        self.herder = Herder(settings, _JobHerderIO(self))

    # --- resources -------------------------------------------------------------------------------------------------

    @property
    def writer(self) -> Any:
        if self._writer is None:
            self._writer = InternalTopicWriter(self.settings, client_id=CLIENT_ID)
        return self._writer

    def config_view(self, name: str) -> ConnectorConfigView:
        if self._tail is None:
            reader = TopicLogReader(self.settings, client_id=f"{CLIENT_ID}-config")
            self._tail = ConfigTopicTail(reader, self.settings.config_storage_topic)
        try:
            return self._tail.read_to_end(self.settings.api_fresh_read_timeout_ms, [name]).connector(name)
        except KafkaWriteError as err:
            raise NotEstablishedError(f"cannot read the config topic to its end: {err}") from err

    def close(self) -> None:
        if self._owns_writer and self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._tail is not None:
            self._tail.close()
            self._tail = None

    def _path(self, name: str) -> str:
        return str(self.settings.table_path(name))

    def _read(self, name: str, columns: list[str]) -> pa.Table | None:
        try:
            return small_writes.read(self._path(name), columns, self._options)
        except DeltaTableNotFoundError:
            return None

    # --- reads -----------------------------------------------------------------------------------------------------

    def connectors(self) -> list[Mapping[str, Any]]:
        table = self._read(CONNECTORS.name, CONNECTORS.column_names)  # the whole row: the herder's restart plan
        rows = table.to_pylist() if table is not None else []
        self.rows = {str(row["name"]): row for row in rows}
        return rows

    def attempts(self) -> list[Attempt]:
        table = self._read(CONNECTOR_RESTARTS.name, CONNECTOR_RESTARTS.column_names)
        return [attempt_from_row(row) for row in table.to_pylist()] if table is not None else []

    def status_changes(self, connectors: Iterable[str]) -> dict[str, list[StatusChange]]:
        names = sorted(set(connectors))
        if not names:
            return {}
        path = self._path(CONNECTOR_EVENTS.name)
        with small_writes.commit_lock(path):
            try:
                dataset = small_writes.latest(path, self._options).to_pyarrow_dataset()
            except DeltaTableNotFoundError:
                return {}
        wanted = [("connector", "in", names), ("event", "in", [STATUS_CHANGED, TASK_STATUS_CHANGED])]
        rows = read_filtered(dataset, ["connector", "details", "kafka_timestamp"], wanted).to_pylist()
        changes: dict[str, list[StatusChange]] = {}
        for row in rows:
            details = _json(row["details"])
            task = details.get("task")
            changes.setdefault(row["connector"], []).append(
                StatusChange(
                    epoch_ms(row["kafka_timestamp"]), int(task) if task is not None else None, details.get("to")
                )
            )
        for found in changes.values():
            found.sort(key=lambda change: change.at_ms)
        return changes

    def target_state(self, connector: str) -> str | None:
        view = self.config_view(connector)
        return str(view.target_state) if view.exists and view.target_state is not None else None

    # --- writes ----------------------------------------------------------------------------------------------------

    def restart(self, connector: str) -> None:
        self.fence()
        self.herder.restart_connector(connector, include_tasks=True, only_failed=True)

    def record(self, attempts: Sequence[Attempt]) -> None:
        self.fence()
        path = self._path(CONNECTOR_RESTARTS.name)
        small_writes.open_or_create(path, CONNECTOR_RESTARTS, TABLE_PROPERTIES, self._options)
        updated = timestamp(self.clock())
        rows = [
            {
                "connector": a.connector,
                "requested_at": timestamp(a.requested_at),
                "attempt": a.attempt,
                "reason": a.reason,
                "trace": a.trace,
                "failed_since": timestamp(a.failed_since),
                "outcome": str(a.outcome),
                "outcome_at": timestamp(a.outcome_at),
                "detail": a.detail,
                "updated_at": updated,
            }
            for a in attempts
        ]
        small_writes.merge_rows(
            pa.Table.from_pylist(rows, CONNECTOR_RESTARTS.schema), path, RESTARTS_MERGE, self._options
        )


def _json(text: object) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def restarts_reconciler(
    settings: Settings,
    *,
    policy: RestartPolicy | None = None,
    fence: Callable[[], None] | None = None,
    writer: Any | None = None,
    clock: Callable[[], int] = now_ms,
) -> tuple[RestartsReconciler, RestartsJobIO]:
    """The reconciler of the restarts job on the settings' policy (or ``policy``), and its I/O (close it)."""
    io = RestartsJobIO(settings, fence=fence, writer=writer, clock=clock)
    return RestartsReconciler(io, policy or policy_from_settings(settings), clock), io


class RestartsJob:
    """The auto-restart passes (:class:`~connect_state.spark.streaming.Job`): one every ``trigger.interval``, or one
    for a catch-up run, while this instance holds the ``restarts`` lease; none (and no lease) while
    ``restart.auto.connectors`` is empty."""

    name = JOB_NAME

    def check(self, settings: Settings) -> None:
        """The ``restart.auto.*`` settings and ``trigger.interval``: a bad one fails here (ConfigError)."""
        interval_seconds(settings.trigger_interval)
        policy = policy_from_settings(settings)
        if policy.enabled:
            log.info(
                "auto-restart of %s: backoff (n²+n) x %d ms up to %d ms, at most %d restarts, reset after %d ms",
                ", ".join(policy.connectors),
                policy.backoff_base_ms,
                policy.backoff_max_ms,
                policy.max_attempts,
                policy.reset_after_ms,
            )

    def start(self, spark: SparkSession, settings: Settings, available_now: bool, max_offsets: int | None) -> Run:
        self.check(settings)
        interval = interval_seconds(settings.trigger_interval)
        policy = policy_from_settings(settings)
        if not policy.enabled:
            log.info("auto-restart is off (restart.auto.connectors is empty)")
            return Run([PeriodicTask(JOB_NAME, lambda: None, interval, once=available_now, logger=log)])
        lease = keeper_for(settings, RESTARTS_LEASE)
        reconciler, io = restarts_reconciler(settings, policy=policy, fence=lease.fence)

        def passes() -> PeriodicTask:
            return maintained_passes(
                settings, JOB_NAME, reconciler.run_pass, interval, available_now, log, (CONNECTOR_RESTARTS,)
            )

        task = LeasedTask(JOB_NAME, lease, passes, once=available_now)
        return Run([task], closers=[io.close, lease.release])
