"""KIP-883 cleanup on connector deletion, the I/O: Delta tables and topics read with Spark, tombstones and group
deletions sent through the Kafka layer; the decisions are :class:`connect_state.cleanup.reconciler.CleanupReconciler`'s.

A pass reads the ``deleted`` / ``created`` events of ``connector_events`` (the connector-state job's, with the
connector's last config), the ``connector_deletions`` rows already written, the ``connectors`` row of a name (is it
recreated? are its tasks still running?), the ``active_topics`` / ``source_offsets`` rows of a name and what a batch
read of the status, offsets and config topics shows live; it writes tombstones (status topic, offsets topics), deletes
a sink's consumer group (:class:`connect_state.kafka.ConsumerGroupAdmin`), and merges each outcome into the Delta
table ``connector_deletions`` right after the step ran. The job is the table's only writer: a second instance waits
for the ``cleanup`` lease (:mod:`connect_state.tables.lease_store`), and every side effect is fenced by it.

The job (:class:`CleanupJob`) runs a pass every ``trigger.interval`` when one is needed (the deletion events or the
recorded outcomes changed, or a step is due: :meth:`~connect_state.cleanup.reconciler.CleanupReconciler.pass_needed`),
or a single one for a catch-up run. The console script is ``connect-state-cleanup`` (jobs/cleanup.py).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from delta.tables import DeltaTable
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from connect_state.cleanup.reconciler import (
    CleanupReconciler,
    Deletion,
    DeletionHook,
    StepOutcome,
    StepStatus,
    load_class_hooks,
    load_deletion_hooks,
)
from connect_state.core.errors import TopicNotFoundError
from connect_state.core.settings import Settings, interval_seconds
from connect_state.core.storage import deltalake_options
from connect_state.folds.active_topics import REMOVED
from connect_state.folds.connector_states import CONFIG, CREATED, DELETED
from connect_state.kafka import InternalTopicWriter
from connect_state.leases.decisions import CLEANUP_LEASE
from connect_state.security.guards import Guards
from connect_state.spark.delta_io import ensure_table, schema_of, table_exists
from connect_state.spark.kafka_source import read_topic_batch
from connect_state.spark.leases import LeasedTask
from connect_state.spark.streaming import PeriodicTask, Run, job_logger
from connect_state.tables import small_writes
from connect_state.tables.lease_store import keeper_for
from connect_state.tables.schemas import (
    ACTIVE_TOPICS,
    ACTIVE_TOPICS_HISTORY,
    CONNECTOR_DELETIONS,
    CONNECTOR_EVENTS,
    CONNECTORS,
    SINK_OFFSETS,
    SOURCE_OFFSETS,
    TableSpec,
    now_ms,
    timestamp,
)

JOB_NAME = "cleanup"
#: The ``connector_events`` a pass plans deletions from, with ``source`` :data:`CONFIG`
#: (:meth:`SparkCleanupIO.deletion_events`).
_LIFECYCLE_EVENTS = pa.array([CREATED, DELETED])
CLIENT_ID = "connect-state-cleanup"
log = job_logger(JOB_NAME)

GroupAdminFactory = Callable[[Settings], Any]
"""``settings -> admin`` with ``delete_group(group_id) -> bool`` (True: deleted, False: there was no such group)."""


def default_group_admin(settings: Settings) -> Any:
    """:class:`connect_state.kafka.ConsumerGroupAdmin` (imported when a sink's group is first deleted)."""
    from connect_state.kafka import ConsumerGroupAdmin

    return ConsumerGroupAdmin(settings)


class SparkCleanupIO:
    """:class:`connect_state.cleanup.reconciler.CleanupIO` on Spark, Delta and Kafka.

    ``writer`` sends tombstones (default: an :class:`~connect_state.kafka.InternalTopicWriter` created on first use
    and closed by :meth:`close`); ``group_admin_factory`` gives the consumer-group admin for sinks; ``clock`` (epoch
    ms) stamps a row that has no ``updated_at``.
    """

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        *,
        writer: Any | None = None,
        group_admin_factory: GroupAdminFactory = default_group_admin,
        clock: Callable[[], int] = now_ms,
        fence: Callable[[], None] | None = None,
    ) -> None:
        self.spark = spark
        self.fence = fence or (lambda: None)  # before every write: raises LeaseLost once the cleanup lease is lost
        self.settings = settings
        self._writer = writer
        self._owns_writer = writer is None
        self.group_admin_factory = group_admin_factory
        self.clock = clock
        self._schema = schema_of(CONNECTOR_DELETIONS)
        self._options = deltalake_options(settings)
        self._marks_readable = True  # deltalake reads the cleanup tables: False when the first check failed
        self._marks_read = False  # a check has succeeded
        # connector_events' files read by _lifecycle_events, the creations and deletions found in them (connector,
        # event, Kafka position), how many times that set grew or was emptied, and the table's version then
        self._events_files: set[str] = set()
        self._lifecycle: set[tuple[str, str, int, int]] = set()
        self._lifecycle_changes = 0
        self._events_version = -1

    # --- resources -----------------------------------------------------------------------------------------------

    @property
    def writer(self) -> Any:
        if self._writer is None:
            self._writer = InternalTopicWriter(self.settings, client_id=CLIENT_ID)
        return self._writer

    def close(self) -> None:
        if self._owns_writer and self._writer is not None:
            self._writer.close()
            self._writer = None

    def _path(self, spec: TableSpec) -> str:
        return str(self.settings.table_path(spec.name))

    def _table(self, spec: TableSpec) -> DataFrame | None:
        path = self._path(spec)
        if not table_exists(self.spark, path):
            return None
        return self.spark.read.format("delta").load(path)

    # --- the outcomes --------------------------------------------------------------------------------------------

    def begin_pass(self) -> None:
        ensure_table(self.spark, self.settings.delta_root, CONNECTOR_DELETIONS)

    def input_marks(self) -> tuple[int, int] | None:
        """Through ``deltalake``, no Spark job: a count that grows with each creation and deletion in
        ``connector_events`` (:meth:`_lifecycle_events`) and the version of ``connector_deletions`` (a listing of its
        log). Where deltalake cannot read ``delta_root`` at the first check (no credentials in the driver's
        environment, say), None from then on: every pass runs, and reads the tables through Spark, which reports what
        is wrong. A later failure (a store's passing error) is None for this check only."""
        if not self._marks_readable:
            return None
        try:
            marks = (self._lifecycle_events(), self._version(CONNECTOR_DELETIONS))
        except Exception as err:
            if self._marks_read:
                log.info("deltalake could not read the cleanup tables this time (%s): a pass runs", err)
            else:
                log.info("deltalake cannot read the cleanup tables (%s): a pass runs at every trigger", err)
                self._marks_readable = False
            return None
        self._marks_read = True
        return marks

    def _lifecycle_events(self) -> int:
        """A count that grows whenever ``connector_events`` shows a connector creation or deletion (config events,
        what :meth:`deletion_events` reads) not seen before (-1: no table yet). At a new version of the table only its
        files not read before are read (the table is a history: its files are added, or rewritten with the same
        rows), so the pauses, resumes and task changes that make up most of its commits cost a listing of its files
        and a read of their own small file, not a pass."""
        path = self._path(CONNECTOR_EVENTS)
        with small_writes.commit_lock(path):
            try:
                table = small_writes.latest(path, self._options)
            except DeltaTableNotFoundError:
                return -1
            version = table.version()
            if version == self._events_version:
                return self._lifecycle_changes
            if version < self._events_version:  # the table was made again: read it afresh
                self._events_files.clear()
                self._lifecycle.clear()
                self._lifecycle_changes += 1
            dataset = table.to_pyarrow_dataset()
        for fragment in dataset.get_fragments():
            if fragment.path in self._events_files:
                continue
            # In the table's types: a file delta-rs's MERGE rewrote (retention) stores strings as string_view, which
            # Arrow's comparisons do not take.
            columns = ["connector", "event", "source", "kafka_partition", "kafka_offset"]
            rows = fragment.to_table(schema=dataset.schema, columns=columns)
            lifecycle = pc.and_(pc.is_in(rows["event"], _LIFECYCLE_EVENTS), pc.equal(rows["source"], CONFIG))
            for row in rows.filter(lifecycle).to_pylist():
                event = (row["connector"], row["event"], row["kafka_partition"], row["kafka_offset"])
                if event not in self._lifecycle:
                    self._lifecycle.add(event)
                    self._lifecycle_changes += 1
            self._events_files.add(fragment.path)
        self._events_version = version
        return self._lifecycle_changes

    def _version(self, spec: TableSpec) -> int:
        path = self._path(spec)
        with small_writes.commit_lock(path):
            try:
                return small_writes.latest(path, self._options).version()
            except DeltaTableNotFoundError:
                return -1

    def deletion_events(self) -> list[Mapping[str, object]] | None:
        events = self._table(CONNECTOR_EVENTS)
        if events is None:
            return None
        rows = (
            events.filter(F.col("event").isin(CREATED, DELETED) & (F.col("source") == CONFIG))
            .select(
                "connector",
                "event",
                "details",
                "source",
                "kafka_offset",
                F.unix_millis("kafka_timestamp").alias("kafka_timestamp"),
            )
            .collect()
        )
        return [row.asDict() for row in rows]

    def read_outcomes(self) -> dict[tuple[str, int], dict[str, StepOutcome]]:
        table = self._table(CONNECTOR_DELETIONS)
        known: dict[tuple[str, int], dict[str, StepOutcome]] = {}
        if table is None:
            return known
        times = [F.unix_millis(name).alias(name) for name in ("next_attempt_at", "updated_at")]
        for row in table.select(
            "connector", "deletion_offset", "step", "status", "attempts", "detail", "error", *times
        ).collect():
            outcome = StepOutcome(
                row.step,
                StepStatus(row.status),
                row.attempts or 0,
                row.detail,
                row.error,
                row.next_attempt_at,
                row.updated_at,
            )
            known.setdefault((row.connector, row.deletion_offset), {})[row.step] = outcome
        return known

    def record_outcomes(self, rows: Sequence[tuple[Deletion, StepOutcome]], insert_only: bool) -> None:
        self.fence()
        data = [
            (
                d.connector,
                d.deletion_offset,
                timestamp(d.deleted_at),
                d.connector_type,
                json.dumps(d.config, sort_keys=True, separators=(",", ":")) if d.config is not None else None,
                o.step,
                str(o.status),
                o.attempts,
                o.detail,
                o.error,
                timestamp(o.next_attempt_at),
                timestamp(o.updated_at if o.updated_at is not None else self.clock()),
            )
            for d, o in rows
        ]
        source = self.spark.createDataFrame(data, self._schema)
        condition = " AND ".join(f"t.{k} = s.{k}" for k in CONNECTOR_DELETIONS.key)
        merge = (
            DeltaTable.forPath(self.spark, self._path(CONNECTOR_DELETIONS))
            .alias("t")
            .merge(source.alias("s"), condition)
        )
        if not insert_only:
            merge = merge.whenMatchedUpdateAll()
        merge.whenNotMatchedInsertAll().execute()

    # --- what the steps read -------------------------------------------------------------------------------------

    def connector_row(self, name: str) -> Mapping[str, object] | None:
        table = self._table(CONNECTORS)
        if table is None:
            return None
        rows = table.filter(F.col("name") == name).collect()
        return rows[0].asDict(recursive=True) if rows else None

    def config_records(self) -> list[tuple[bytes, bytes | None, int]]:
        rows = (
            read_topic_batch(self.spark, self.settings, self.settings.config_storage_topic)
            .select("key", "value", "offset")
            .collect()
        )
        return [(bytes(r.key), bytes(r.value) if r.value is not None else None, int(r.offset)) for r in rows]

    def active_topics(self, connector: str) -> list[str]:
        table = self._table(ACTIVE_TOPICS)
        if table is None:
            return []
        return [row.topic for row in table.filter(F.col("connector") == connector).select("topic").collect()]

    def source_offsets_keys(self, connector: str) -> list[tuple[str, bytes]]:
        table = self._table(SOURCE_OFFSETS)
        if table is None:
            return []
        rows = table.filter(F.col("connector") == connector).select("offsets_topic", "key").collect()
        return [(row.offsets_topic, bytes(row.key)) for row in rows]

    def source_offset_rows(self, connector: str) -> list[Mapping[str, object]]:
        table = self._table(SOURCE_OFFSETS)
        if table is None:
            return []
        columns = ("offsets_topic", "key", "value", "listed")
        return [row.asDict() for row in table.filter(F.col("connector") == connector).select(*columns).collect()]

    def active_topics_at(self, connector: str, at_ms: int) -> list[str]:
        table = self._table(ACTIVE_TOPICS_HISTORY)
        if table is None:
            return []
        changes = (
            table.filter((F.col("connector") == connector) & (F.unix_millis("kafka_timestamp") <= at_ms))
            .groupBy("topic")
            .agg(F.max_by("change", F.struct("kafka_timestamp", "kafka_offset")).alias("last"))
            .collect()
        )
        return sorted(row.topic for row in changes if row.last != REMOVED)  # added or updated: still in use

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        table = self._table(SINK_OFFSETS)
        if table is None:
            return {}
        rows = table.filter(F.col("group_id") == group).select("topic", "partition", "offset").collect()
        return {(row.topic, int(row.partition)): int(row.offset) for row in rows if row.offset is not None}

    def live_keys(self, topic: str, *, contains: str | None = None) -> list[bytes]:
        frame = read_topic_batch(self.spark, self.settings, topic).filter(F.col("key").isNotNull())
        text: Column = F.col("key").cast("string")
        if contains is not None:
            frame = frame.filter(text.contains(contains))
        latest = frame.groupBy("partition", "key").agg(F.max_by(F.col("value").isNull(), F.col("offset")).alias("gone"))
        return [bytes(row.key) for row in latest.filter(~F.col("gone")).select("key").collect()]

    def topic_exists(self, topic: str) -> bool:
        try:
            self.writer.partition_count(topic)
        except TopicNotFoundError:
            return False
        return True

    # --- what the steps write ------------------------------------------------------------------------------------

    def write_tombstones(self, topic: str, keys: Sequence[bytes]) -> None:
        self.fence()
        self.writer.send(topic, [(key, None) for key in keys], self.settings.api_kafka_write_timeout_ms)

    def delete_group(self, group: str) -> bool:
        self.fence()
        admin = self.group_admin_factory(self.settings)
        try:
            return bool(admin.delete_group(group))
        finally:
            close = getattr(admin, "close", None)
            if callable(close):
                close()


def cleanup_reconciler(
    spark: SparkSession,
    settings: Settings,
    hooks: Mapping[str, DeletionHook],
    *,
    hook_classes: Mapping[str, Collection[str]] | None = None,
    writer: Any | None = None,
    group_admin_factory: GroupAdminFactory = default_group_admin,
    clock: Callable[[], int] = now_ms,
    fence: Callable[[], None] | None = None,
) -> CleanupReconciler:
    """The reconciler of the cleanup job: :class:`SparkCleanupIO` and the settings' topics, default and backoff.

    ``fence`` (the cleanup lease's :meth:`~connect_state.tables.lease_store.LeaseKeeper.fence`) runs before every hook
    call, tombstone write, group deletion and outcome record: once the lease is lost, the pass stops there."""
    io = SparkCleanupIO(
        spark, settings, writer=writer, group_admin_factory=group_admin_factory, clock=clock, fence=fence
    )
    if fence is not None:
        hooks = {name: fenced_hook(hook, fence) for name, hook in hooks.items()}
    return CleanupReconciler(
        io,
        hooks,
        status_topic=settings.status_storage_topic,
        offsets_topic=settings.offset_storage_topic,
        offsets_on_delete=settings.cleanup_offsets_on_delete,
        backoff_ms=settings.cleanup_retry_backoff_ms,
        backoff_max_ms=settings.cleanup_retry_backoff_max_ms,
        clock=clock,
        guards=Guards.from_settings(settings),
        log=log,
        hook_classes=hook_classes,
        hook_timeout_ms=settings.cleanup_hook_timeout_ms,
        class_types=settings.connector_class_types,
    )


def fenced_hook(hook: DeletionHook, fence: Callable[[], None]) -> DeletionHook:
    """``hook``, called only after ``fence`` passed (LeaseLost otherwise: the step fails and its record is refused).
    Keeps the hook's signature (``functools.wraps``), so a hook taking ``context`` still gets it."""

    @functools.wraps(hook)
    def call(connector: str, config: Mapping[str, str], *, is_deleted: bool, **kwargs: Any) -> None:
        fence()
        hook(connector, config, is_deleted=is_deleted, **kwargs)

    return call


class CleanupJob:
    """The cleanup passes (:class:`~connect_state.spark.streaming.Job`): one every ``trigger.interval``, or a single
    one for a catch-up run (a failing single pass fails the run; a failing continuous pass is retried at the next).

    ``hooks``: the deletion hooks; loaded from the settings (``cleanup.hooks`` and entry points) by :meth:`check`,
    once, when not given.
    """

    name = JOB_NAME

    def __init__(
        self,
        hooks: Mapping[str, DeletionHook] | None = None,
        hook_classes: Mapping[str, Collection[str]] | None = None,
    ) -> None:
        self.hooks = dict(hooks) if hooks is not None else None
        self.hook_classes: Mapping[str, Collection[str]] = dict(hook_classes or {})

    def check(self, settings: Settings) -> None:
        """Load the hooks and read ``trigger.interval``: a bad setting fails here (ConfigError)."""
        interval_seconds(settings.trigger_interval)
        if self.hooks is None:
            self.hooks = load_deletion_hooks(settings.cleanup_hooks)
            class_hooks, self.hook_classes = load_class_hooks(settings.cleanup_hooks_by_class)
            self.hooks.update(class_hooks)
            log.info(
                "deletion hooks: %s",
                ", ".join(f"{name} ({', '.join(sorted(self.hook_classes.get(name, ['*'])))})" for name in self.hooks)
                or "none",
            )

    def start(self, spark: SparkSession, settings: Settings, available_now: bool, max_offsets: int | None) -> Run:
        """The passes run only while this instance holds the ``cleanup`` lease (:class:`LeasedTask`): a second
        instance waits; every side effect of a pass is fenced by the lease."""
        self.check(settings)
        lease = keeper_for(settings, CLEANUP_LEASE)
        reconciler = cleanup_reconciler(
            spark, settings, self.hooks or {}, hook_classes=self.hook_classes, fence=lease.fence
        )
        interval = interval_seconds(settings.trigger_interval)

        def passes() -> PeriodicTask:
            return PeriodicTask(JOB_NAME, reconciler.run_pass, interval, once=available_now, logger=log)

        task = LeasedTask(JOB_NAME, lease, passes, once=available_now)
        return Run([task], closers=[reconciler.close, lease.release])
