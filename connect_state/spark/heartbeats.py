"""KIP-910 heartbeats, the Spark pipeline: idle source partitions detected in the topics, their heartbeats sent.

``connect-configs`` + ``connect-status`` + ``connect-offsets`` → :func:`classify` (:mod:`connect_state.formats`) →
one ``applyInPandasWithState`` group per connector, without timeouts (:func:`connect_state.heartbeats.fold.fold`:
the connector-state fold plus each source partition's last offset and move time) → activity, removed and state rows
→ :class:`HeartbeatsWriter` (``foreachBatch``, on the driver): activity merged into ``source_partition_activity``,
the connectors' new states handed to the :class:`HeartbeatScheduler`. The scheduler (the job's timer, on the driver)
keeps the eligible connectors' states (:class:`connect_state.heartbeats.fold.HeartbeatSchedule`) and, every
:data:`TICK_S`, sends what is due through the :class:`HeartbeatSink`: which heartbeats are still due
(:func:`connect_state.heartbeats.fold.still_due`), sent by the emitter (:mod:`connect_state.heartbeats.emitter`: the
provider of the connector class, the heartbeat topic, the offsets topic), and recorded in the Delta tables
``heartbeats`` (every heartbeat) and ``source_partition_activity`` (``last_heartbeat_at``). The console script is
``connect-state-heartbeats`` (jobs/heartbeats.py).

Why a timer of the job's own and not Spark's processing-time timeouts: with those, Spark runs a micro-batch of the
query at every trigger, records or not, which was most of what an idle driver cost (``bench/steady_state.py``), and
a catch-up (``AvailableNow``) query never ends unless no-data batches are turned off. Without timeouts the query runs
only when records arrive, and in between a tick is a look at a dict.

* **When the query starts** (and starts again after a failure) the scheduler is rebuilt from the query's checkpoint
  (Spark's state data source: every connector's state of the last committed batch) and the heartbeats
  ``source_partition_activity`` records as sent, so a connector whose partitions went idle while no job ran gets its
  heartbeat, with or without new records; the timer waits until the query has read to the end of the topics
  (:class:`HeartbeatsQueryTask`).
* **A catch-up run** does not tick while its query runs, and ends with one tick: what is due by then is sent.

``source_partition_activity.last_heartbeat_at`` is the record of the last heartbeat: before sending, the sink checks
it. Delivery is at least once: a crash between sending and recording may send a heartbeat again (and a timer-mode
connector without partitions, whose heartbeats no table row records, may get one again when the job starts).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState

from connect_state.connect.plugins import HEARTBEAT_PROVIDERS_GROUP, load_keyed_plugins
from connect_state.core.clusters import cluster_label
from connect_state.core.errors import ConfigError, RecordFormatError
from connect_state.core.settings import Settings, interval_seconds
from connect_state.core.storage import deltalake_options
from connect_state.folds.connector_states import ConnectorRecord
from connect_state.formats.offsets import offset_key_connector
from connect_state.formats.offsets_arrow import match_key_connectors
from connect_state.heartbeats.emitter import EmittedHeartbeat, HeartbeatEmitter
from connect_state.heartbeats.fold import (
    DuePartition,
    HeartbeatDefaults,
    HeartbeatMode,
    HeartbeatSchedule,
    HeartbeatState,
    OffsetRecord,
    activity_rows,
    fold,
    heartbeat_state_from_json,
    heartbeat_state_to_json,
    parse_offset_record,
    still_due,
)
from connect_state.heartbeats.provider import HeartbeatProvider, as_provider
from connect_state.kafka import InternalTopicWriter, OffsetsTopicReader
from connect_state.leases.decisions import HEARTBEATS_LEASE, LeaseLost
from connect_state.progress.query_progress import records_behind
from connect_state.security.guards import Guards
from connect_state.spark import connector_states, storage
from connect_state.spark.delta_io import merge_rows, table_exists
from connect_state.spark.foldjob import (
    RECORD_COLUMNS,
    FastParse,
    FoldWriter,
    KindCounts,
    RecordKind,
    classify_records,
    column_frame,
    fold_groups,
    nullable_values,
    start_fold_query,
)
from connect_state.spark.kafka_source import read_internal_topic
from connect_state.spark.leases import LeasedTask, stop_query
from connect_state.spark.streaming import QueryTask, Run, job_logger
from connect_state.tables import small_writes
from connect_state.tables.lease_store import LeaseKeeper, keeper_for
from connect_state.tables.merge_spec import MergeSpec, matched_delete, matched_update, not_matched_insert, source_values
from connect_state.tables.schemas import (
    BIGINT,
    BINARY,
    BOOLEAN,
    HEARTBEATS,
    INT,
    SOURCE_PARTITION_ACTIVITY,
    STRING,
    TIMESTAMP,
    now_ms,
)
from connect_state.tables.small_writes import deltalake_writes

JOB_NAME = "heartbeats"
#: The query's checkpoint directory. Not ``heartbeats``: that checkpoint's state had Spark's timeouts (another state
#: schema), so a checkpoint of before the job's own timer is left alone and the query starts from the topics again.
CHECKPOINT_NAME = "heartbeats-v2"
#: How often the job's timer looks for due heartbeats (seconds): in memory, nothing when none is due.
TICK_S = 1.0
#: ``StreamingQuery.status["message"]`` until the query's first trigger (``MicroBatchExecution``).
SPARK_INITIALIZING = "Initializing sources"
#: After a tick that failed to send (Kafka or the tables unreachable), the wait before the next try (seconds).
RETRY_S = 10.0

# Rejected records are left to the connector-states job: no ``reason``.
PARSED_SCHEMA = pa.schema(
    [("record_kind", STRING), ("connector", STRING), *(c for c in RECORD_COLUMNS if c[0] != "reason")]
)
OUTPUT_SCHEMA = pa.schema([
    ("record_kind", STRING), ("connector", STRING), ("partition", STRING), ("key", BINARY), ("offset", STRING),
    ("connector_class", STRING), ("config", STRING), ("last_moved_at", BIGINT), ("last_heartbeat_at", BIGINT),
    ("idle_ms", BIGINT), ("heartbeat_interval_ms", BIGINT), ("heartbeat_topic", STRING), ("eligible", BOOLEAN),
    ("reason", STRING), ("kafka_partition", INT), ("kafka_offset", BIGINT), ("state", STRING),
    ("evaluated_at", BIGINT),
])  # fmt: skip
#: ``source_partition_activity``'s key, as the MERGEs into it match it.
_ACTIVITY_KEY = "t.connector = s.connector AND t.key = s.key"
#: The activity columns a batch sets (``last_heartbeat_at`` is the sink's: an update keeps it, an insert leaves
#: it null).
_ACTIVITY_VALUES = tuple(
    c for c in SOURCE_PARTITION_ACTIVITY.column_names if c not in ("connector", "key", "last_heartbeat_at")
)
#: A batch's activity rows into ``source_partition_activity``: a removed partition's row deleted, the others updated
#: or inserted.
ACTIVITY_MERGE = MergeSpec(
    _ACTIVITY_KEY,
    (
        matched_delete("s.removed"),
        matched_update(source_values(_ACTIVITY_VALUES)),
        not_matched_insert(source_values(("connector", "key", *_ACTIVITY_VALUES)), "NOT s.removed"),
    ),
)
#: The heartbeats sent, as each partition's ``last_heartbeat_at`` (a partition removed meanwhile has no row to set).
HEARTBEAT_MARKS_MERGE = MergeSpec(_ACTIVITY_KEY, (matched_update({"last_heartbeat_at": "s.last_heartbeat_at"}),))
_MARKS_SCHEMA = pa.schema(
    [SOURCE_PARTITION_ACTIVITY.schema.field(name) for name in ("connector", "key", "last_heartbeat_at")]
)

log = job_logger(JOB_NAME)


# ---------------------------------------------------------------------------------------------------------------------
# Parse and fold (Python workers)
# ---------------------------------------------------------------------------------------------------------------------


def classify(key: bytes | None, value: bytes | None, kafka: dict, config_topic: str, offsets_topic: str) -> list[dict]:
    """One record of the three topics: the connector it belongs to (its raw bytes kept), or nothing."""
    if kafka["kafka_topic"] == offsets_topic:
        if key is None:
            return []
        try:
            connector = offset_key_connector(bytes(key))  # the connector only: the fold parses the record
        except RecordFormatError:
            return []
        if connector is None:
            return []
        return [
            {
                "record_kind": RecordKind.OFFSET,
                "connector": connector,
                "raw_key": key,
                "raw_value": value,
                **kafka,
            }
        ]
    rows = connector_states.classify(key, value, kafka, config_topic)
    return [
        {k: v for k, v in row.items() if k != "reason"} for row in rows if row["record_kind"] != RecordKind.REJECTED
    ]


def fast_parser(offsets_topic: str) -> FastParse:
    """:func:`classify`'s bulk path (:data:`~connect_state.spark.foldjob.FastParse`): the offsets topic's records whose
    key names its connector in Connect's plain form (:func:`connect_state.formats.offsets_arrow.match_key_connectors`);
    the config and status topics' records, and the other keys, go through :func:`classify`."""

    def fast_parse(kafka: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.BooleanArray]:
        offsets = pc.equal(kafka.column(2), offsets_topic)
        found = match_key_connectors(pc.if_else(offsets, kafka.column(0), pa.scalar(None, pa.binary())))
        chosen = kafka.filter(found.matched)
        columns = [
            pa.array([str(RecordKind.OFFSET)] * chosen.num_rows, pa.string()),
            found.connector,
            chosen.column(2),
            chosen.column(3),
            chosen.column(4),
            chosen.column(5),
            chosen.column(0),
            chosen.column(1),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=PARSED_SCHEMA), found.matched

    return fast_parse


_INPUT_COLUMNS = ("record_kind", "raw_key", "raw_value", "kafka_partition", "kafka_offset", "kafka_timestamp")


def _records(connector: str, batch: pd.DataFrame) -> tuple[list[ConnectorRecord], list[OffsetRecord]]:
    """The group's records, read by column: offsets-topic records, and the rest (config, status, unreadable commit)
    as the connector-states job folds them."""
    connector_records: list[ConnectorRecord] = []
    offset_records: list[OffsetRecord] = []
    columns = [nullable_values(batch[name]) for name in _INPUT_COLUMNS]
    for kind, key, value, partition, offset, timestamp in zip(*columns, strict=True):
        if kind == RecordKind.OFFSET:
            try:
                record = parse_offset_record(key, value, int(partition), int(offset), int(timestamp))
            except RecordFormatError:  # a key Connect ignores (OffsetUtils.processPartitionKey)
                continue
            if record is not None:
                offset_records.append(record)
        else:
            connector_records.append(
                connector_states.record_of(connector, kind, key, value, partition, offset, timestamp)
            )
    return connector_records, offset_records


_ACTIVITY_COLUMNS = tuple(name for name in OUTPUT_SCHEMA.names if name not in ("record_kind", "evaluated_at"))


def _output_frame(
    connector: str, activity: list[dict[str, object]], removed: list[bytes], state_json: str, now: int
) -> pd.DataFrame:
    """The group's output, built by column: its activity rows, the keys of its removed partitions, its state."""
    n_activity, n_removed = len(activity), len(removed)
    rows = n_activity + n_removed + 1
    none = [None] * (n_removed + 1)
    columns: dict[str, list[Any]] = {name: [row.get(name) for row in activity] + none for name in _ACTIVITY_COLUMNS}
    columns["connector"] = [connector] * rows
    columns["key"] = [row["key"] for row in activity] + list(removed) + [None]
    columns["state"] = [None] * (rows - 1) + [state_json]
    columns["record_kind"] = [RecordKind.ACTIVITY] * n_activity + [RecordKind.REMOVED] * n_removed + [RecordKind.STATE]
    columns["evaluated_at"] = [now] * rows
    return column_frame(columns, rows, OUTPUT_SCHEMA)


def fold_function(defaults: HeartbeatDefaults):
    """The ``applyInPandasWithState`` body, per connector: fold its records, emit its activity, removed partitions and
    new state (for the job's :class:`~connect_state.heartbeats.fold.HeartbeatSchedule`)."""

    def fold_group(key: tuple, frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        (connector,) = key
        now = int(state.getCurrentProcessingTimeMs())
        current = heartbeat_state_from_json(state.get[0]) if state.exists else HeartbeatState.new(connector)
        connector_records, offset_records = _records(connector, pd.concat(list(frames), ignore_index=True))
        result = fold(current, connector_records, offset_records, defaults, now)
        state_json = heartbeat_state_to_json(result.state)
        state.update((state_json,))
        activity = activity_rows(result.state, result.policy, now)
        yield _output_frame(connector, activity, list(result.removed), state_json, now)

    return fold_group


def fold_stream(kafka_rows: DataFrame, settings: Settings, defaults: HeartbeatDefaults) -> DataFrame:
    """Kafka rows of the three topics → activity, removed and state rows, one group per connector."""
    config_topic, offsets_topic = settings.config_storage_topic, settings.offset_storage_topic
    parsed = classify_records(
        kafka_rows,
        lambda key, value, kafka: classify(key, value, kafka, config_topic, offsets_topic),
        PARSED_SCHEMA,
        fast_parser(offsets_topic),
    )
    return fold_groups(parsed.groupBy("connector"), fold_function(defaults), OUTPUT_SCHEMA)


# ---------------------------------------------------------------------------------------------------------------------
# Writing (driver)
# ---------------------------------------------------------------------------------------------------------------------


def load_providers(settings: Settings) -> dict[str, HeartbeatProvider]:
    """The providers by connector class: entry points of ``connect_state.heartbeat_providers``, then
    ``heartbeat.providers``."""
    plugins = load_keyed_plugins(settings.heartbeat_providers, HEARTBEAT_PROVIDERS_GROUP)
    return {connector_class: as_provider(plugin) for connector_class, plugin in plugins.items()}


def _epoch_ms_to_timestamps(values: list[int]) -> pa.Array:
    return pc.multiply(pa.array(values, pa.int64()), 1000).cast(TIMESTAMP)


def heartbeat_rows(emitted: list[EmittedHeartbeat]) -> pa.Table:
    """The ``heartbeats`` table's rows of ``emitted`` (its schema; the epoch-ms times as timestamps)."""
    times = {field.name for field in HEARTBEATS.schema if field.type == TIMESTAMP}  # epoch ms in the emitter's rows
    columns = {
        name: _epoch_ms_to_timestamps([getattr(e, name) for e in emitted])
        if name in times
        else pa.array([getattr(e, name) for e in emitted], HEARTBEATS.schema.field(name).type)
        for name in HEARTBEATS.column_names
    }
    return pa.table(columns, schema=HEARTBEATS.schema)


def heartbeat_marks(emitted: list[EmittedHeartbeat]) -> pa.Table:
    """``source_partition_activity``'s new ``last_heartbeat_at`` of each (connector, key) in ``emitted``: its latest
    heartbeat (:data:`HEARTBEAT_MARKS_MERGE`)."""
    latest: dict[tuple[str, bytes], int] = {}
    for e in emitted:
        key = (e.connector, e.source_key)
        latest[key] = max(latest.get(key, e.emitted_at), e.emitted_at)
    return pa.table(
        {
            "connector": pa.array([connector for connector, _ in latest], pa.string()),
            "key": pa.array([key for _, key in latest], pa.binary()),
            "last_heartbeat_at": _epoch_ms_to_timestamps(list(latest.values())),
        },
        schema=_MARKS_SCHEMA,
    )


def _marks_found(rows: pa.Table, keys: set[tuple[str, bytes]] | None) -> dict[tuple[str, bytes], int]:
    """``(connector, key) -> last_heartbeat_at`` (epoch ms) of ``rows`` (those columns, the time as a timestamp) that
    have one, the given keys only (all: None)."""
    rows = rows.filter(pc.is_valid(rows["last_heartbeat_at"]))
    millis = pc.divide(rows["last_heartbeat_at"].cast(pa.int64()), 1000)  # µs to ms (times after 1970: floored)
    found = {
        (connector, bytes(key)): int(at)
        for connector, key, at in zip(
            rows["connector"].to_pylist(), rows["key"].to_pylist(), millis.to_pylist(), strict=True
        )
    }
    return found if keys is None else {k: v for k, v in found.items() if k in keys}


class HeartbeatSink:
    """Sends due heartbeats and records them (for the :class:`HeartbeatScheduler`)."""

    def __init__(
        self,
        settings: Settings,
        emitter: HeartbeatEmitter | None = None,
        providers: Mapping[str, HeartbeatProvider] | None = None,
        lease: LeaseKeeper | None = None,
    ) -> None:
        self.settings = settings
        self.lease = lease  # when given: fenced before each batch of heartbeats, checked before each one
        self.activity_path = str(settings.delta_root / SOURCE_PARTITION_ACTIVITY.name)
        self.heartbeats_path = str(settings.delta_root / HEARTBEATS.name)
        self._emitter = emitter
        self.providers = providers

    @property
    def emitter(self) -> HeartbeatEmitter:
        if self._emitter is None:
            self._emitter = HeartbeatEmitter(
                self.providers if self.providers is not None else load_providers(self.settings),
                InternalTopicWriter(self.settings, client_id="connect-state-heartbeats"),
                InternalTopicWriter(self.settings, client_id="connect-state-heartbeat-offsets"),
                self.settings.offset_storage_topic,
                OffsetsTopicReader(self.settings),
                guards=Guards.from_settings(self.settings),
                provider_timeout_ms=self.settings.heartbeat_provider_timeout_ms,
            )
        return self._emitter

    def close(self) -> None:
        """Close the Kafka clients this sink created (idempotent)."""
        if self._emitter is not None:
            emitter = self._emitter
            for client in (emitter.heartbeat_sender, emitter.offset_sender, emitter.offset_reader):
                close = getattr(client, "close", None)
                if close is not None:
                    close()
            self._emitter = None

    def _emit(self, heartbeat: DuePartition, now: int) -> list[EmittedHeartbeat]:
        if self.lease is not None:
            self.lease.check()
        return self.emitter.emit(heartbeat, now)

    @cached_property
    def _deltalake(self) -> dict[str, str] | None:
        """``deltalake``'s storage options when this sink reads and writes its tables through it, as the jobs' small
        writes (:func:`~connect_state.tables.small_writes.deltalake_writes`, decided once): tens of milliseconds where
        Spark's read, append and MERGE took about ten seconds of the driver's CPU per heartbeat. None: Spark."""
        options = deltalake_options(self.settings)
        return options if deltalake_writes(self.settings.delta_root, options) else None

    def last_heartbeats(
        self, spark: SparkSession, keys: set[tuple[str, bytes]] | None = None
    ) -> dict[tuple[str, bytes], int]:
        """``last_heartbeat_at`` (epoch ms) of the (connector, key) rows of ``source_partition_activity`` that have
        one: the given ones, or all."""
        connectors = sorted({connector for connector, _ in keys}) if keys is not None else None
        columns = ["connector", "key", "last_heartbeat_at"]
        options = self._deltalake
        if options is not None:  # filtered here: a dataset filter on a string column fails over string_view stats
            return _marks_found(small_writes.read(self.activity_path, columns, options), keys)
        rows = spark.read.format("delta").load(self.activity_path).filter(F.col("last_heartbeat_at").isNotNull())
        if connectors is not None:
            rows = rows.filter(F.col("connector").isin(connectors))
        return _marks_found(rows.select(*columns).toArrow(), keys)

    def send(self, spark: SparkSession, due: list[DuePartition]) -> list[EmittedHeartbeat]:
        """Send the heartbeats still due by the table's ``last_heartbeat_at``; record them in both tables."""
        if not due:
            return []
        now = now_ms()
        recorded = self.last_heartbeats(spark, {(d.connector, d.key) for d in due})
        to_send, already_sent = still_due(due, recorded, now)
        for heartbeat, last in already_sent:
            log.info("heartbeat of %s %s already sent at %s", heartbeat.connector, heartbeat.partition, last)
        if self.lease is not None and to_send:
            self.lease.fence()  # raises LeaseLost: another instance holds the heartbeats lease now
        emitted: list[EmittedHeartbeat] = []
        try:
            for heartbeat in to_send:
                emitted.extend(self._emit(heartbeat, now))
        finally:  # what went out before a failure is recorded: a retry does not send it again
            if emitted:
                self._record(spark, emitted)
        return emitted

    def _record(self, spark: SparkSession, emitted: list[EmittedHeartbeat]) -> None:
        """The heartbeats in ``heartbeats``, their time in ``source_partition_activity.last_heartbeat_at``."""
        rows, marks = heartbeat_rows(emitted), heartbeat_marks(emitted)
        options = self._deltalake
        if options is not None:
            small_writes.append(rows, self.heartbeats_path, options)
            small_writes.merge_rows(marks, self.activity_path, HEARTBEAT_MARKS_MERGE, options)
        else:
            spark.createDataFrame(rows).write.format("delta").mode("append").save(self.heartbeats_path)
            merge_rows(spark.createDataFrame(marks), self.activity_path, HEARTBEAT_MARKS_MERGE)


class HeartbeatScheduler:
    """The heartbeats job's timer, on the driver: a :class:`~connect_state.heartbeats.fold.HeartbeatSchedule` that the
    writer feeds with the fold's new states (:meth:`apply`, the query's thread), rebuilt from the query's checkpoint
    when the query starts (:meth:`rebuild`), whose due heartbeats :meth:`tick` sends through the sink (every
    :data:`TICK_S` from the query's task, and as a catch-up run's last step). In place of Spark's processing-time
    timeouts, which made Spark run a batch of the query at every trigger, records or not."""

    def __init__(self, settings: Settings, sink: HeartbeatSink, defaults: HeartbeatDefaults) -> None:
        self.settings = settings
        self.sink = sink
        self.defaults = defaults
        self.schedule = HeartbeatSchedule(defaults)
        #: Held while the schedule changes and while heartbeats are sent and recorded; the writer holds it for its
        #: MERGE into ``source_partition_activity`` too, so the job's two writers of that table never race (Delta
        #: would fail one of two concurrent MERGEs of the same files).
        self.lock = threading.RLock()

    @property
    def checkpoint(self) -> str:
        return str(self.settings.checkpoint_path(CHECKPOINT_NAME))

    def rebuild(self, spark: SparkSession) -> int:
        """A new schedule: the heartbeats ``source_partition_activity`` records as sent (read before the query's start
        may empty the table for a new checkpoint), then the states of the query's last committed batch (Spark's state
        data source; none without a committed batch: the query folds from its start again). The number of connectors
        in it."""
        schedule = HeartbeatSchedule(self.defaults)
        if table_exists(spark, self.sink.activity_path):
            for (connector, key), sent_at in self.sink.last_heartbeats(spark).items():
                schedule.recorded(connector, key, sent_at)
        if any(name.isdigit() for name in storage.list_names(spark, f"{self.checkpoint}/commits")):
            # The state reader asks the driver's state store coordinator, which Spark sets up with the session's
            # streaming query manager: a driver that has started no query yet has none until that is created.
            spark.streams  # noqa: B018
            states = spark.read.format("statestore").load(self.checkpoint).select("value.groupState.state_json")
            for row in states.collect():
                schedule.update(heartbeat_state_from_json(row.state_json))
        with self.lock:
            self.schedule = schedule
        log.info("schedule: %d connectors, next heartbeat due at %s", len(schedule), schedule.next_due())
        return len(schedule)

    def apply(self, states: list[HeartbeatState]) -> None:
        """The fold's new states of a batch's connectors."""
        with self.lock:
            for state in states:
                self.schedule.update(state)

    def tick(self, spark: SparkSession) -> list[EmittedHeartbeat]:
        """Send the heartbeats due now (nothing when none is: no Spark, no Kafka). When sending fails the schedule is
        put back as it was, so the next tick sends them again."""
        with self.lock:
            now = now_ms()
            next_due = self.schedule.next_due()
            if next_due is None or now < next_due:
                return []
            saved = self.schedule.copy()
            due = self.schedule.due(now)
            try:
                emitted = self.sink.send(spark, due)
            except BaseException:
                self.schedule = saved
                raise
            for row in emitted:
                if row.committed_offset is not None:
                    self.schedule.committed(row.connector, row.source_key, json.loads(row.committed_offset))
        log.info("%d heartbeats due, %d heartbeat rows", len(due), len(emitted))
        return emitted


class HeartbeatsWriter(FoldWriter):
    """``foreachBatch`` sink: activity rows merged into ``source_partition_activity``, the connectors' new states handed
    to the :class:`HeartbeatScheduler` (which sends the heartbeats)."""

    job_name = JOB_NAME

    def __init__(self, settings: Settings, scheduler: HeartbeatScheduler) -> None:
        super().__init__(settings.delta_root, settings.checkpoint_path(CHECKPOINT_NAME))
        self.scheduler = scheduler

    def write(self, batch: DataFrame, batch_id: int, counts: KindCounts) -> str:
        activity = batch.filter(F.col("record_kind").isin(RecordKind.ACTIVITY, RecordKind.REMOVED))
        n_activity = counts.rows(RecordKind.ACTIVITY, RecordKind.REMOVED)
        states: list[HeartbeatState] = []
        if counts.rows(RecordKind.STATE):
            rows = batch.filter(F.col("record_kind") == RecordKind.STATE).select("state").collect()
            states = [heartbeat_state_from_json(row.state) for row in rows]
        with self.scheduler.lock:  # not while the timer sends and records heartbeats
            if n_activity:
                self.merge_current(_activity_source(activity), SOURCE_PARTITION_ACTIVITY, ACTIVITY_MERGE, batch_id,
                                   n_activity)  # fmt: skip
            self.scheduler.apply(states)
        return f"{n_activity} partition activity rows, {len(states)} connector states"


def _activity_source(activity: DataFrame) -> DataFrame:
    """A batch's activity and removed rows as :data:`ACTIVITY_MERGE`'s source."""
    return activity.select(
        "connector",
        "partition",
        "key",
        "offset",
        "connector_class",
        "config",
        F.timestamp_millis("last_moved_at").alias("last_moved_at"),
        "idle_ms",
        "heartbeat_interval_ms",
        "heartbeat_topic",
        "eligible",
        "reason",
        "kafka_partition",
        "kafka_offset",
        F.timestamp_millis("evaluated_at").alias("updated_at"),
        (F.col("record_kind") == RecordKind.REMOVED).alias("removed"),
    )


# ---------------------------------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------------------------------


def heartbeat_defaults(
    settings: Settings, providers: Mapping[str, HeartbeatProvider] | None = None
) -> HeartbeatDefaults:
    """The fold's defaults: the settings' interval, topic and mode, the worker's offsets topic, the classes with
    a provider (only those are eligible, as in KIP-910; ``providers`` default: loaded from the settings) and the
    configured connector types (``connector.class.types``)."""
    classes = frozenset(providers if providers is not None else load_providers(settings))
    try:
        mode = HeartbeatMode.parse(settings.heartbeat_mode)
    except ValueError:
        raise ConfigError(f"heartbeat.mode must be idle or timer, got {settings.heartbeat_mode!r}") from None
    return HeartbeatDefaults(
        settings.heartbeat_interval_ms,
        settings.heartbeat_records_topic,
        settings.offset_storage_topic,
        provider_classes=classes,
        mode=mode,
        class_types=settings.connector_class_types,
    )


def start(
    spark: SparkSession,
    settings: Settings,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
    *,
    scheduler: HeartbeatScheduler,
) -> StreamingQuery:
    """Create the tables if needed, rebuild ``scheduler`` from the query's checkpoint and start the query over the
    config, status and offsets topics (it only folds: ``scheduler.tick`` sends; :class:`HeartbeatsJob` runs both)."""
    topics = [settings.config_storage_topic, settings.status_storage_topic, settings.offset_storage_topic]
    rows = read_internal_topic(spark, settings, topics, max_offsets_per_trigger)
    writer = HeartbeatsWriter(settings, scheduler)
    folded = fold_stream(rows, settings, scheduler.defaults)
    scheduler.rebuild(spark)  # before the query starts: its batches' states come after
    return start_fold_query(
        spark, settings, JOB_NAME, folded, writer, (SOURCE_PARTITION_ACTIVITY, HEARTBEATS),
        (SOURCE_PARTITION_ACTIVITY,), available_now=available_now, trigger_interval=query_trigger(settings),
        checkpoint_name=CHECKPOINT_NAME,
    )  # fmt: skip


def query_trigger(settings: Settings) -> str:
    """The heartbeats query's trigger in a continuous run: the longer of ``trigger.interval`` and
    ``heartbeat.trigger.interval``. The query reads all three internal topics and only folds them (the timer sends,
    every :data:`TICK_S`), so a longer trigger gathers a trickle of offset commits into fewer batches, each costing
    about a second of the driver's CPU. The timer then decides on states up to one trigger old: the emitter reads a
    partition's offset before its heartbeat and skips one that moved meanwhile."""
    heartbeats = interval_seconds(settings.heartbeat_trigger_interval, "heartbeat.trigger.interval")
    if heartbeats > interval_seconds(settings.trigger_interval):
        return settings.heartbeat_trigger_interval
    return settings.trigger_interval


class HeartbeatsQueryTask(QueryTask):
    """The heartbeats query's task: between its polls (every :data:`TICK_S`), the scheduler's :meth:`tick
    <HeartbeatScheduler.tick>` (``ticking``: a continuous run; a catch-up run ticks once, at its end).

    Not before the query has caught up with the topics since it started (a batch that read up to their end, or a
    trigger that found nothing new, one trigger after the start): the schedule rebuilt from the checkpoint is as old as
    the checkpoint, and a connector deleted or paused meanwhile must not get a heartbeat. A tick that fails is logged
    and tried again after :data:`RETRY_S`; the query goes on. A lost lease stops the query."""

    def __init__(
        self,
        query: StreamingQuery,
        scheduler: HeartbeatScheduler,
        spark: SparkSession,
        ticking: bool = True,
        trigger_s: float = 0.0,
        cluster: str | None = None,
    ) -> None:
        super().__init__(query, poll_seconds=TICK_S, cluster=cluster)
        self.scheduler = scheduler
        self.spark = spark
        self.ticking = ticking
        self.trigger_s = trigger_s
        self.started_at = time.monotonic()
        self.caught_up = False
        self._behind_seen = False
        self._retry_at = 0.0

    def new_progress(self, last_batch: int) -> list[dict[str, Any]]:
        batches = super().new_progress(last_batch)
        for progress in batches:
            if records_behind(progress) in (0, None):
                self.caught_up = True
            else:
                self._behind_seen = True  # only a batch that reaches the end says so now
        return batches

    def _found_nothing_new(self) -> bool:
        """A trigger after the start found no records (no batch, so no progress to tell): one trigger has passed, the
        query's sources are initialized (Spark's status before its first trigger says neither data nor trigger), no
        trigger is running and none found data."""
        status = self.query.status
        return (
            not self._behind_seen
            and time.monotonic() - self.started_at >= self.trigger_s + TICK_S
            and status["message"] != SPARK_INITIALIZING
            and not status["isTriggerActive"]
            and not status["isDataAvailable"]
        )

    def after_poll(self) -> None:
        if not self.ticking or time.monotonic() < self._retry_at:
            return
        if not self.caught_up:
            if not self._found_nothing_new():
                return
            self.caught_up = True
        try:
            self.scheduler.tick(self.spark)
        except LeaseLost:
            stop_query(self)  # the next holder's query takes over the checkpoint
            raise
        except Exception:
            log.exception("sending the heartbeats due failed; trying again in %.0f s", RETRY_S)
            self._retry_at = time.monotonic() + RETRY_S


class HeartbeatsJob:
    """The heartbeats query and its timer (:class:`~connect_state.spark.streaming.Job`); a catch-up run ends with a
    tick of the timer.

    ``providers`` by connector class; loaded from the settings by :meth:`check` (or when the first heartbeat is sent)
    when not given.
    """

    name = JOB_NAME

    def __init__(self, providers: Mapping[str, HeartbeatProvider] | None = None) -> None:
        self.providers = providers

    def check(self, settings: Settings) -> None:
        """Load the providers and read the query's trigger: a bad ``heartbeat.providers`` or
        ``heartbeat.trigger.interval`` fails here (ConfigError)."""
        query_trigger(settings)
        if self.providers is None:
            self.providers = load_providers(settings)

    def start(self, spark: SparkSession, settings: Settings, available_now: bool, max_offsets: int | None) -> Run:
        """The query and its timer run only while this instance holds the ``heartbeats`` lease (:class:`LeasedTask`):
        a second instance waits; a lost lease stops the query at once. A failed query is started again by the
        supervisor (its schedule rebuilt from the checkpoint). A catch-up run ends with one tick: what fell due while
        no job ran is sent."""
        lease = keeper_for(settings, HEARTBEATS_LEASE)
        sink = HeartbeatSink(settings, providers=self.providers, lease=lease)
        scheduler = HeartbeatScheduler(settings, sink, heartbeat_defaults(settings, self.providers))
        trigger_s = interval_seconds(query_trigger(settings))

        def start_query() -> QueryTask:
            query = start(spark, settings, available_now, max_offsets, scheduler=scheduler)
            return HeartbeatsQueryTask(
                query, scheduler, spark, ticking=not available_now, trigger_s=trigger_s, cluster=cluster_label(settings)
            )

        task = LeasedTask(JOB_NAME, lease, start_query, once=available_now, on_lost=stop_query)
        catch_up = task.while_held(lambda: scheduler.tick(spark))
        return Run([task], catch_up=catch_up, closers=[sink.close, lease.release])
