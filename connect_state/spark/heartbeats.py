"""KIP-910 heartbeats, the Spark pipeline: idle source partitions detected in the topics, their heartbeats sent.

``connect-configs`` + ``connect-status`` + ``connect-offsets`` → :func:`classify` (:mod:`connect_state.formats`) →
one ``applyInPandasWithState`` group per connector with ``GroupStateTimeout.ProcessingTimeTimeout``
(:func:`connect_state.folds.heartbeats.step`: the connector-state fold plus each source partition's last offset and
move time; the timeout is armed for the earliest due time) → ``due`` rows → :class:`HeartbeatsWriter`
(``foreachBatch``, on the driver): activity merged into ``source_partition_activity``, then :class:`HeartbeatSink`:
which heartbeats are still due (:func:`connect_state.folds.heartbeats.still_due`), sent by the emitter
(:mod:`connect_state.heartbeat_emitter`: the provider of the connector class, the heartbeat topic, the offsets topic),
and recorded in the Delta tables ``heartbeats`` (every heartbeat) and ``source_partition_activity``
(``last_heartbeat_at``). The console script is ``connect-state-heartbeats`` (jobs/heartbeats.py).

Timeouts and triggers (../shared/spec/spark-delta-stack.md §3.3):

* **continuous** (:func:`query_trigger`: the longer of ``trigger.interval`` and ``heartbeat.trigger.interval``): Spark
  runs no-data micro-batches that fire the timeouts, so an idle partition gets its heartbeat within one interval plus
  one trigger;
* **catch-up**: a query with processing-time timeouts never finishes under ``AvailableNow`` unless
  ``spark.sql.streaming.noDataMicroBatches.enabled=false``, which :func:`start` sets on the session for the start of
  its query only (the query keeps the value it started with; the session gets its own back). Timeouts then fire only
  in batches that have data, so the job's catch-up step **sweeps** ``source_partition_activity`` with the same due
  computation (:func:`connect_state.folds.heartbeats.is_due`): partitions that went idle while no job ran get their
  heartbeat.

``source_partition_activity.last_heartbeat_at`` is the record of the last heartbeat: before sending, the writer and the
sweep check it, so a heartbeat the sweep sent is not sent again by the next run's timeouts. Delivery is at least once:
a crash between sending and recording may send a heartbeat again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

import pandas as pd
import pyarrow as pa
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from connect_state.errors import ConfigError, RecordFormatError
from connect_state.folds.connector_states import ConnectorRecord
from connect_state.folds.heartbeats import (
    DuePartition,
    HeartbeatDefaults,
    HeartbeatMode,
    HeartbeatState,
    OffsetRecord,
    activity_rows,
    due_partition_from_row,
    heartbeat_state_from_json,
    heartbeat_state_to_json,
    is_due,
    parse_offset_record,
    step,
    still_due,
)
from connect_state.guards import internal_topics
from connect_state.heartbeat_emitter import EmittedHeartbeat, HeartbeatEmitter
from connect_state.heartbeats import HeartbeatProvider, as_provider
from connect_state.kafka import InternalTopicWriter, OffsetsTopicReader
from connect_state.leases import HEARTBEATS_LEASE
from connect_state.plugins import HEARTBEAT_PROVIDERS_GROUP, load_keyed_plugins
from connect_state.settings import Settings, interval_seconds
from connect_state.spark import connector_states
from connect_state.spark.delta_io import append_once, delta_transaction, ensure_table, spark_schema
from connect_state.spark.foldjob import (
    FoldWriter,
    KindCounts,
    RecordKind,
    classify_records,
    pandas_frame,
    start_fold_query,
)
from connect_state.spark.kafka_source import read_internal_topic
from connect_state.spark.leases import LeasedTask, LeaseKeeper, keeper_for, stop_query
from connect_state.spark.streaming import QueryTask, Run, job_logger
from connect_state.tables import HEARTBEATS, SOURCE_PARTITION_ACTIVITY

JOB_NAME = "heartbeats"
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"

PARSED_SCHEMA = (
    "record_kind STRING, connector STRING, kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, "
    "kafka_timestamp BIGINT, raw_key BINARY, raw_value BINARY"
)
OUTPUT_SCHEMA = (
    "record_kind STRING, connector STRING, partition STRING, key BINARY, offset STRING, connector_class STRING, "
    "config STRING, last_moved_at BIGINT, last_heartbeat_at BIGINT, idle_ms BIGINT, heartbeat_interval_ms BIGINT, "
    "heartbeat_topic STRING, eligible BOOLEAN, reason STRING, kafka_partition INT, kafka_offset BIGINT, "
    "due_at BIGINT, evaluated_at BIGINT"
)
STATE_SCHEMA = "state_json STRING"
# The heartbeats table with epoch-ms longs for its timestamps (converted when written).
_HEARTBEAT_ROWS_SCHEMA = spark_schema(
    pa.schema([f.with_type(pa.int64()) if f.name in ("due_at", "emitted_at") else f for f in HEARTBEATS.schema])
)

log = job_logger(JOB_NAME)


# ---------------------------------------------------------------------------------------------------------------------
# Parse and fold (Python workers)
# ---------------------------------------------------------------------------------------------------------------------


def classify(key: bytes | None, value: bytes | None, kafka: dict, config_topic: str, offsets_topic: str) -> list[dict]:
    """One record of the three topics: the connector it belongs to (its raw bytes kept), or nothing."""
    if kafka["kafka_topic"] == offsets_topic:
        try:
            record = parse_offset_record(key, value, 0, 0, 0)
        except RecordFormatError:
            return []
        if record is None:
            return []
        return [
            {
                "record_kind": RecordKind.OFFSET,
                "connector": record.connector,
                "raw_key": key,
                "raw_value": value,
                **kafka,
            }
        ]
    rows = connector_states.classify(key, value, kafka, config_topic)
    return [
        {k: v for k, v in row.items() if k != "reason"} for row in rows if row["record_kind"] != RecordKind.REJECTED
    ]


def _records(batch: pd.DataFrame) -> tuple[list[ConnectorRecord], list[OffsetRecord]]:
    connector_records: list[ConnectorRecord] = []
    offset_records: list[OffsetRecord] = []
    row: Any
    for row in batch.itertuples(index=False):
        coordinates = (int(row.kafka_partition), int(row.kafka_offset), int(row.kafka_timestamp))
        if row.record_kind == RecordKind.OFFSET:
            record = parse_offset_record(row.raw_key, row.raw_value, *coordinates)
            if record is not None:
                offset_records.append(record)
        else:  # config, status, unreadable commit: as the connector-state job folds them
            connector_records.append(connector_states.connector_record(row))
    return connector_records, offset_records


def _due_row(due: DuePartition, now: int) -> dict:
    return {
        "record_kind": RecordKind.DUE,
        "connector": due.connector,
        "partition": json.dumps(due.partition, separators=(",", ":")),
        "key": due.key,
        "offset": json.dumps(due.offset, separators=(",", ":")),
        "connector_class": due.connector_class,
        "config": json.dumps(due.config, sort_keys=True, separators=(",", ":")),
        "last_moved_at": due.last_moved_at,
        "idle_ms": due.idle_ms,
        "heartbeat_interval_ms": due.interval_ms,
        "heartbeat_topic": due.records_topic,
        "eligible": True,
        "due_at": due.due_at,
        "kafka_partition": due.kafka_partition,
        "kafka_offset": due.kafka_offset,
        "evaluated_at": now,
    }


def fold_function(defaults: HeartbeatDefaults):
    """The ``applyInPandasWithState`` body, per connector: fold, emit due/activity rows, re-arm the timeout."""

    def fold_group(key: tuple, frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        (connector,) = key
        now = int(state.getCurrentProcessingTimeMs())
        current = heartbeat_state_from_json(state.get[0]) if state.exists else HeartbeatState.new(connector)
        connector_records: list[ConnectorRecord]
        offset_records: list[OffsetRecord]
        if state.hasTimedOut:
            connector_records, offset_records = [], []
        else:
            batch = pd.concat(list(frames), ignore_index=True)
            connector_records, offset_records = _records(batch)
        result = step(current, connector_records, offset_records, defaults, now)
        state.update((heartbeat_state_to_json(result.state),))
        if result.timeout_at is not None:
            state.setTimeoutDuration(max(result.timeout_at - now, 1))
        rows = [_due_row(due, now) for due in result.due]
        rows += [
            {"record_kind": RecordKind.ACTIVITY, "evaluated_at": now, **row}
            for row in activity_rows(result.state, result.policy, now)
        ]
        rows += [
            {"record_kind": RecordKind.REMOVED, "connector": connector, "key": key, "evaluated_at": now}
            for key in result.removed
        ]
        yield pandas_frame(rows, OUTPUT_SCHEMA)

    return fold_group


def fold_stream(kafka_rows: DataFrame, settings: Settings, defaults: HeartbeatDefaults) -> DataFrame:
    """Kafka rows of the three topics → due, activity and removed rows, one group per connector."""
    config_topic, offsets_topic = settings.config_storage_topic, settings.offset_storage_topic
    parsed = classify_records(
        kafka_rows, lambda key, value, kafka: classify(key, value, kafka, config_topic, offsets_topic), PARSED_SCHEMA
    )
    return parsed.groupBy("connector").applyInPandasWithState(
        fold_function(defaults), OUTPUT_SCHEMA, STATE_SCHEMA, "update", GroupStateTimeout.ProcessingTimeTimeout
    )


# ---------------------------------------------------------------------------------------------------------------------
# Writing (driver)
# ---------------------------------------------------------------------------------------------------------------------


def load_providers(settings: Settings) -> dict[str, HeartbeatProvider]:
    """The providers by connector class: entry points of ``connect_state.heartbeat_providers``, then
    ``heartbeat.providers``."""
    plugins = load_keyed_plugins(settings.heartbeat_providers, HEARTBEAT_PROVIDERS_GROUP)
    return {connector_class: as_provider(plugin) for connector_class, plugin in plugins.items()}


def now_ms() -> int:
    return int(time.time() * 1000)


def _heartbeats_frame(spark: SparkSession, emitted: list[EmittedHeartbeat]) -> DataFrame:
    rows = spark.createDataFrame([e.row() for e in emitted], _HEARTBEAT_ROWS_SCHEMA)
    return (
        rows.withColumn("due_at", F.timestamp_millis("due_at"))
        .withColumn("emitted_at", F.timestamp_millis("emitted_at"))
        .select(*HEARTBEATS.column_names)
    )


def _last_heartbeats(spark: SparkSession, path: str, keys: set[tuple[str, bytes]]) -> dict[tuple[str, bytes], int]:
    """``last_heartbeat_at`` (epoch ms) of the given (connector, key) rows of ``source_partition_activity``."""
    connectors = sorted({connector for connector, _ in keys})
    rows = (
        spark.read.format("delta")
        .load(path)
        .filter(F.col("connector").isin(connectors) & F.col("last_heartbeat_at").isNotNull())
        .select("connector", "key", F.unix_millis("last_heartbeat_at").alias("last_heartbeat_at"))
        .collect()
    )
    return {(r.connector, bytes(r.key)): r.last_heartbeat_at for r in rows if (r.connector, bytes(r.key)) in keys}


class HeartbeatSink:
    """Sends due heartbeats and records them: shared by the ``foreachBatch`` writer and the catch-up sweep."""

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
                internal_topics(self.settings).names,
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

    def send(
        self, spark: SparkSession, due: list[DuePartition], txn: tuple[str, int] | None = None
    ) -> list[EmittedHeartbeat]:
        """Send the heartbeats still due by the table's ``last_heartbeat_at``; record them in both tables."""
        if not due:
            return []
        now = now_ms()
        recorded = _last_heartbeats(spark, self.activity_path, {(d.connector, d.key) for d in due})
        to_send, already_sent = still_due(due, recorded, now)
        for heartbeat, last in already_sent:
            log.info("heartbeat of %s %s already sent at %s", heartbeat.connector, heartbeat.partition, last)
        if self.lease is not None and to_send:
            self.lease.fence()  # raises LeaseLost: another instance holds the heartbeats lease now
        emitted = [row for heartbeat in to_send for row in self._emit(heartbeat, now)]
        if not emitted:
            return []
        frame = _heartbeats_frame(spark, emitted)
        if txn is not None:
            append_once(frame, self.heartbeats_path, f"{txn[0]}:{HEARTBEATS.name}", txn[1])
        else:
            frame.write.format("delta").mode("append").save(self.heartbeats_path)
        marks = frame.select(
            "connector", F.col("source_key").alias("key"), F.col("emitted_at").alias("last_heartbeat_at")
        ).dropDuplicates(["connector", "key"])
        merge = (
            DeltaTable.forPath(spark, self.activity_path)
            .alias("t")
            .merge(marks.alias("s"), "t.connector = s.connector AND t.key = s.key")
            .whenMatchedUpdate(set={"last_heartbeat_at": "s.last_heartbeat_at"})
        )
        if txn is not None:
            with delta_transaction(spark, f"{txn[0]}:{SOURCE_PARTITION_ACTIVITY.name}:marks", txn[1]):
                merge.execute()
        else:
            merge.execute()
        return emitted


class HeartbeatsWriter(FoldWriter):
    """``foreachBatch`` sink: activity rows merged into ``source_partition_activity``, then the due heartbeats sent
    and recorded (:class:`HeartbeatSink`)."""

    job_name = JOB_NAME

    def __init__(self, settings: Settings, sink: HeartbeatSink | None = None) -> None:
        super().__init__(settings.delta_root, settings.checkpoint_path(JOB_NAME))
        self.sink = sink if sink is not None else HeartbeatSink(settings)

    def write(self, batch: DataFrame, batch_id: int, counts: KindCounts) -> str:
        spark = batch.sparkSession
        activity = batch.filter(F.col("record_kind").isin(RecordKind.ACTIVITY, RecordKind.REMOVED))
        n_activity = counts.rows(RecordKind.ACTIVITY, RecordKind.REMOVED)
        if n_activity:
            self._merge_activity(activity, batch_id)
        due_rows = batch.filter(F.col("record_kind") == RecordKind.DUE).collect()
        due = [due_partition_from_row(row.asDict(), int(row.evaluated_at), int(row.due_at)) for row in due_rows]
        emitted = self.sink.send(spark, due, (self.app_id(HEARTBEATS), batch_id))
        return f"{n_activity} partition activity rows, {len(due)} due, {len(emitted)} heartbeat rows"

    def _merge_activity(self, activity: DataFrame, batch_id: int) -> None:
        source = activity.select(
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
        columns = [c for c in SOURCE_PARTITION_ACTIVITY.column_names if c not in ("connector", "key")]
        updates: dict[str, str | Column] = {c: f"s.{c}" for c in columns if c != "last_heartbeat_at"}
        inserts: dict[str, str | Column] = {
            **{c: f"s.{c}" for c in columns if c != "last_heartbeat_at"},
            "connector": "s.connector",
            "key": "s.key",
        }
        table = DeltaTable.forPath(activity.sparkSession, self.path(SOURCE_PARTITION_ACTIVITY))
        with delta_transaction(activity.sparkSession, self.app_id(SOURCE_PARTITION_ACTIVITY), batch_id):
            (
                table.alias("t")
                .merge(source.alias("s"), "t.connector = s.connector AND t.key = s.key")
                .whenMatchedDelete("s.removed")
                .whenMatchedUpdate(set=updates)
                .whenNotMatchedInsert(condition="NOT s.removed", values=inserts)
                .execute()
            )


# ---------------------------------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------------------------------


def heartbeat_defaults(
    settings: Settings, providers: Mapping[str, HeartbeatProvider] | None = None
) -> HeartbeatDefaults:
    """The fold's defaults: the settings' interval, topic and mode, the worker's offsets topic, and the classes with
    a provider (only those are eligible, as in KIP-910; ``providers`` default: loaded from the settings)."""
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
    )


@contextmanager
def no_data_batches_disabled(spark: SparkSession) -> Iterator[None]:
    """``spark.sql.streaming.noDataMicroBatches.enabled=false`` for the queries started inside the block.

    ``MicroBatchExecution`` reads the setting when the query is created (``start()``), so the session's own value
    can be put back as soon as the query has started; other queries of the session keep theirs.
    """
    previous = spark.conf.get(NO_DATA_BATCHES, None)
    spark.conf.set(NO_DATA_BATCHES, "false")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(NO_DATA_BATCHES)
        else:
            spark.conf.set(NO_DATA_BATCHES, previous)


def start(
    spark: SparkSession,
    settings: Settings,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
    sink: HeartbeatSink | None = None,
) -> StreamingQuery:
    """Create the tables if needed and start the query over the config, status and offsets topics.

    With ``available_now`` the query runs without no-data batches (it would never finish otherwise); follow it with
    :func:`sweep` (the catch-up step of :class:`HeartbeatsJob`).
    """
    topics = [settings.config_storage_topic, settings.status_storage_topic, settings.offset_storage_topic]
    rows = read_internal_topic(spark, settings, topics, max_offsets_per_trigger)
    writer = HeartbeatsWriter(settings, sink)
    folded = fold_stream(rows, settings, heartbeat_defaults(settings, sink.providers if sink is not None else None))
    with no_data_batches_disabled(spark) if available_now else nullcontext():
        return start_fold_query(
            spark, settings, JOB_NAME, folded, writer, (SOURCE_PARTITION_ACTIVITY, HEARTBEATS),
            (SOURCE_PARTITION_ACTIVITY,), available_now=available_now, trigger_interval=query_trigger(settings),
        )  # fmt: skip


def query_trigger(settings: Settings) -> str:
    """The heartbeats query's trigger in a continuous run: the longer of ``trigger.interval`` and
    ``heartbeat.trigger.interval``. With processing-time timeouts Spark runs a micro-batch at every trigger, records
    or not (each a stateful pass over every connector's state and the writer's checks): at a 1 s trigger, with the
    cleanup pass at every trigger too, the jobs' driver used 1.4 cores of a quiet 2-core machine
    (``bench/steady_state.py``)."""
    heartbeats = interval_seconds(settings.heartbeat_trigger_interval, "heartbeat.trigger.interval")
    if heartbeats > interval_seconds(settings.trigger_interval):
        return settings.heartbeat_trigger_interval
    return settings.trigger_interval


def sweep(spark: SparkSession, settings: Settings, sink: HeartbeatSink | None = None) -> list[EmittedHeartbeat]:
    """Send the heartbeats due now by ``source_partition_activity`` (after a catch-up run): the same due rule as the
    stateful fold, on the table's ``last_moved_at`` / ``last_heartbeat_at`` / interval / eligibility."""
    own_sink = sink is None
    sink = sink if sink is not None else HeartbeatSink(settings)
    ensure_table(spark, settings.delta_root, SOURCE_PARTITION_ACTIVITY)
    ensure_table(spark, settings.delta_root, HEARTBEATS)
    now = now_ms()
    rows = (
        spark.read.format("delta")
        .load(sink.activity_path)
        .filter(F.col("eligible"))
        .withColumn("last_moved_at", F.unix_millis("last_moved_at"))
        .withColumn("last_heartbeat_at", F.unix_millis("last_heartbeat_at"))
        .collect()
    )
    due = [
        due_partition_from_row(row.asDict(), now)
        for row in rows
        if is_due(row.last_moved_at, row.last_heartbeat_at, row.heartbeat_interval_ms, bool(row.eligible), now)
    ]
    try:
        emitted = sink.send(spark, due)
    finally:
        if own_sink:
            sink.close()
    log.info("sweep: %d partitions due, %d heartbeat rows", len(due), len(emitted))
    return emitted


class HeartbeatsJob:
    """The heartbeats query (:class:`~connect_state.spark.streaming.Job`); a catch-up run ends with :func:`sweep`.

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
        """The query runs only while this instance holds the ``heartbeats`` lease (:class:`LeasedTask`): a second
        instance waits; a lost lease stops the query at once. A failed query is started again by the supervisor."""
        lease = keeper_for(settings, HEARTBEATS_LEASE)
        sink = HeartbeatSink(settings, providers=self.providers, lease=lease)

        def start_query() -> QueryTask:
            return QueryTask(start(spark, settings, available_now, max_offsets, sink))

        task = LeasedTask(JOB_NAME, lease, start_query, once=available_now, on_lost=stop_query)
        catch_up = task.while_held(lambda: sweep(spark, settings, sink))
        return Run([task], catch_up=catch_up, closers=[sink.close, lease.release])
