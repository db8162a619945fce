"""KIP-875 offsets: source offsets from the offsets topics, sink offsets from ``__consumer_offsets``, as Delta tables.

Two queries in one SparkSession, each with its own checkpoint:

* ``source_offsets``: ``connect-offsets`` (``offset.storage.topic``) plus every connector-specific offsets topic
  (a connector config's ``offsets.storage.topic``, read from the ``connectors`` table of jobs/connector_states.py)
  → :mod:`connect_state.formats.offsets` (parse keys and values) → :mod:`connect_state.folds.source_offsets` (fold per
  offsets topic and connector, ``KafkaOffsetBackingStore``'s ``data`` and ``connectorPartitions``, in
  ``applyInPandasWithState``) → Delta tables ``source_offsets`` (one row per live key) and
  ``source_offsets_history`` (every record) → the API's ``GET /connectors/<name>/offsets`` of a source connector.
* ``sink_offsets``: ``__consumer_offsets`` (``consumer.offsets.topic``) → :mod:`connect_state.formats.consumer_offsets`
  (the group coordinator's records) → :mod:`connect_state.folds.sink_offsets` (fold per consumer group) → Delta tables
  ``sink_offsets`` (committed offsets of every group) and ``sink_offsets_history`` → the API's
  ``GET /connectors/<name>/offsets`` of a sink connector (group ``connect-<name>`` or ``consumer.override.group.id``).

Malformed records of either topic go to ``rejected_records`` with the reason.

Run continuously or as a catch-up run (``--available-now``)::

    connect-state-offsets [--available-now] [--max-offsets-per-trigger N] [--conf-file F] [--set key=value ...]

**Topics of the source query.** The subscription is fixed when the query starts: the worker's offsets topic, the
``offsets.storage.topic`` of every config in the ``connectors`` table (when it exists), and every topic the
checkpoint has already read. Spark's Kafka source reads the partitions of a topic added to the subscription of an
existing checkpoint from their earliest offset (``getOffsetRangesFromResolvedOffsets``: "Partitions added"), but
fails with "... are gone" (``failOnDataLoss``) when a topic of the checkpoint leaves it, so topics are never dropped.
A continuous run checks after every micro-batch whether a new topic appeared and then restarts the source query.

**Reading ``__consumer_offsets``.** Spark's default (Admin-based) offset fetching drops internal topics
(``ConsumerStrategy.retrieveAllPartitions`` filters ``isInternal``), so the sink query is started with
``spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true`` (consumer-based fetching, which subscribes by name);
the stream captures the setting at start, and the session's previous value is restored right after.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from connect_state.errors import RecordFormatError
from connect_state.folds import sink_offsets as sink_fold
from connect_state.folds import source_offsets as source_fold
from connect_state.formats.consumer_offsets import OffsetCommitKey, OffsetCommitValue, parse_consumer_offsets_record
from connect_state.formats.offsets import parse_offset_key
from connect_state.settings import Settings
from connect_state.spark.delta_io import append_once, delta_transaction
from connect_state.spark.foldjob import (
    RECORD_COLUMNS_DDL,
    REJECTED,
    FoldWriter,
    classify_records,
    pandas_frame,
    parse_job_arguments,
    start_fold_query,
)
from connect_state.spark.kafka_source import read_internal_topic
from connect_state.spark.session import build_session
from connect_state.spark.streaming import restore_signals, stop_on_signals
from connect_state.tables import (
    CONNECTORS,
    SINK_OFFSETS,
    SINK_OFFSETS_HISTORY,
    SOURCE_OFFSETS,
    SOURCE_OFFSETS_HISTORY,
)

SOURCE_JOB = "source_offsets"
SINK_JOB = "sink_offsets"
OFFSETS_TOPIC_CONFIG = "offsets.storage.topic"
DEPRECATED_OFFSET_FETCHING = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"

RECORD, HISTORY, CURRENT = "record", "history", "current"

log = logging.getLogger("connect_state.jobs.offsets")

# ---------------------------------------------------------------------------------------------------------------------
# Which topics the source query reads
# ---------------------------------------------------------------------------------------------------------------------


def connector_offsets_topics(spark: SparkSession, settings: Settings) -> set[str]:
    """The ``offsets.storage.topic`` of every connector config in the ``connectors`` table (none if it is missing).

    Connect trims the value (``ConfigDef`` type STRING); a blank one means the worker's topic.
    """
    path = str(settings.delta_root / CONNECTORS.name)
    if not DeltaTable.isDeltaTable(spark, path):
        return set()
    topics = set()
    for row in spark.read.format("delta").load(path).where("config IS NOT NULL").select("config").collect():
        try:
            config = json.loads(row.config)
        except ValueError:
            continue
        topic = config.get(OFFSETS_TOPIC_CONFIG) if isinstance(config, dict) else None
        if isinstance(topic, str) and topic.strip():
            topics.add(topic.strip())
    return topics


def checkpoint_topics(checkpoint: Path) -> set[str]:
    """The topics in the newest entry of a checkpoint's offset log (``offsets/<batch>``: ``v1``, the batch metadata,
    then one JSON line per source, ``{"topic":{"partition":offset}}``); none for a new checkpoint.
    """
    offsets_dir = checkpoint / "offsets"
    batches = [int(p.name) for p in offsets_dir.glob("*") if p.name.isdigit()] if offsets_dir.is_dir() else []
    if not batches:
        return set()
    lines = (offsets_dir / str(max(batches))).read_text(encoding="utf-8").splitlines()
    topics: set[str] = set()
    for line in lines[2:]:
        try:
            offsets = json.loads(line)
        except ValueError:
            log.warning("cannot read the offset log line %r of %s", line, checkpoint)
            continue
        if isinstance(offsets, dict):
            topics.update(offsets)
    return topics


def source_topics(spark: SparkSession, settings: Settings) -> list[str]:
    """The source query's subscription: worker topic, connector-specific topics, and the checkpoint's topics."""
    topics = {settings.offset_storage_topic}
    topics |= connector_offsets_topics(spark, settings)
    topics |= checkpoint_topics(settings.checkpoint_path(SOURCE_JOB))
    return sorted(topics)


# ---------------------------------------------------------------------------------------------------------------------
# Source offsets
# ---------------------------------------------------------------------------------------------------------------------

SOURCE_PARSED_SCHEMA = "record_kind STRING, offsets_topic STRING, connector STRING, " + RECORD_COLUMNS_DDL
SOURCE_OUTPUT_SCHEMA = (
    "record_kind STRING, offsets_topic STRING, connector STRING, partition STRING, offset STRING, listed BOOLEAN, "
    "change STRING, " + RECORD_COLUMNS_DDL
)
SOURCE_STATE_SCHEMA = "state_json STRING"


def classify_source(key: bytes | None, value: bytes | None, kafka: dict) -> list[dict]:
    """One offsets-topic record: a record of its connector, or a rejected one.

    A key ``processPartitionKey`` ignores with a WARN is rejected (Connect still keeps its value in ``data``, where no
    lookup can reach it). A value that cannot be read as an offset is kept (it is in ``data`` and its map is listed)
    and also quarantined: ``GET /offsets`` leaves such a partition out.
    """
    try:
        parsed = parse_offset_key(key)
    except RecordFormatError as err:
        return [{"record_kind": REJECTED, "raw_key": key, "raw_value": value, "reason": err.reason, **kafka}]
    row = {
        "record_kind": RECORD,
        "offsets_topic": kafka["kafka_topic"],
        "connector": parsed.connector,
        "raw_key": key,
        "raw_value": value,
        **kafka,
    }
    _offset, error = source_fold.read_offset(value)
    if error is None:
        return [row]
    reason = (
        f"CRITICAL: Failed to deserialize offset data for namespace {parsed.connector}: {error} (GET /offsets leaves "
        "the partition out)"
    )
    return [row, {"record_kind": REJECTED, "raw_key": key, "raw_value": value, "reason": reason, **kafka}]


def _offset_record(row) -> source_fold.OffsetRecord:
    return source_fold.OffsetRecord.from_kafka(
        row.offsets_topic,
        row.raw_key,
        row.raw_value,
        int(row.kafka_partition),
        int(row.kafka_offset),
        int(row.kafka_timestamp),
    )


def fold_source_group(key: tuple, frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
    """``applyInPandasWithState`` body, per (group kind, offsets topic, connector)."""
    group_kind, offsets_topic, _connector = key
    batch = pd.concat(list(frames), ignore_index=True)
    if group_kind == REJECTED:
        yield pandas_frame(batch.to_dict("records"), SOURCE_OUTPUT_SCHEMA)
        return
    current = source_fold.state_from_json(state.get[0]) if state.exists else source_fold.OffsetsState()
    records = [_offset_record(row) for row in batch.itertuples(index=False)]
    new_state, changes, rows = source_fold.fold_connector_offsets(current, records)
    state.update((source_fold.state_to_json(new_state),))
    out = [
        {
            "record_kind": HISTORY,
            "offsets_topic": c.offsets_topic,
            "connector": c.connector,
            "partition": c.partition,
            "offset": c.offset,
            "change": c.change,
            "raw_key": c.key,
            "kafka_topic": offsets_topic,
            "kafka_partition": c.kafka_partition,
            "kafka_offset": c.kafka_offset,
            "kafka_timestamp": c.kafka_timestamp,
        }
        for c in changes
    ]
    out += [
        {
            "record_kind": CURRENT,
            "offsets_topic": r.offsets_topic,
            "connector": r.connector,
            "partition": r.partition,
            "offset": r.offset,
            "listed": r.listed,
            "change": r.op,
            "raw_key": r.key,
            "raw_value": r.value,
            "kafka_topic": offsets_topic,
            "kafka_partition": r.kafka_partition,
            "kafka_offset": r.kafka_offset,
            "kafka_timestamp": r.kafka_timestamp,
        }
        for r in rows
    ]
    yield pandas_frame(out, SOURCE_OUTPUT_SCHEMA)


def source_fold_stream(kafka_rows: DataFrame) -> DataFrame:
    """Kafka rows of the offsets topics → history rows, current-table rows and rejected records."""
    parsed = classify_records(kafka_rows, classify_source, SOURCE_PARSED_SCHEMA)
    grouped = parsed.withColumn(
        "group_kind", F.when(F.col("record_kind") == REJECTED, F.lit(REJECTED)).otherwise(F.lit("connector"))
    )
    return grouped.groupBy("group_kind", "offsets_topic", "connector").applyInPandasWithState(
        fold_source_group, SOURCE_OUTPUT_SCHEMA, SOURCE_STATE_SCHEMA, "update", GroupStateTimeout.NoTimeout
    )


class SourceOffsetsWriter(FoldWriter):
    """``foreachBatch`` sink: history appended, current rows merged; then a look for newly configured topics."""

    job_name = SOURCE_JOB

    def __init__(self, settings: Settings, subscribed: list[str], watch_topics: bool) -> None:
        super().__init__(settings.delta_root, settings.checkpoint_path(SOURCE_JOB))
        self.settings = settings
        self.subscribed = frozenset(subscribed)
        self.watch_topics = watch_topics
        self.new_topics: frozenset[str] = frozenset()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        super().__call__(batch, batch_id)
        if self.watch_topics:
            configured = connector_offsets_topics(batch.sparkSession, self.settings)
            new = frozenset(configured - self.subscribed)
            if new and new != self.new_topics:
                self.log.info("new connector offsets topics %s: the query restarts to read them", sorted(new))
            self.new_topics = new

    def write(self, batch: DataFrame, batch_id: int) -> str:
        history = batch.filter(F.col("record_kind") == HISTORY)
        current = batch.filter(F.col("record_kind") == CURRENT)
        n_history, n_current = history.count(), current.count()
        if n_history:
            rows = history.select(
                "connector",
                "offsets_topic",
                "partition",
                F.col("raw_key").alias("key"),
                "offset",
                "change",
                "kafka_partition",
                "kafka_offset",
                F.timestamp_millis("kafka_timestamp").alias("kafka_timestamp"),
                F.current_timestamp().alias("recorded_at"),
            )
            append_once(rows, self.path(SOURCE_OFFSETS_HISTORY), self.app_id(SOURCE_OFFSETS_HISTORY), batch_id)
        if n_current:
            self._merge_current(current, batch_id)
        return f"{n_history} offset records, {n_current} current rows changed"

    def _merge_current(self, current: DataFrame, batch_id: int) -> None:
        source = current.select(
            "connector",
            "offsets_topic",
            "partition",
            F.col("raw_key").alias("key"),
            "offset",
            F.col("raw_value").alias("value"),
            "listed",
            "kafka_partition",
            "kafka_offset",
            F.timestamp_millis("kafka_timestamp").alias("kafka_timestamp"),
            F.current_timestamp().alias("updated_at"),
            F.col("change").alias("op"),
        )
        values = {name: f"s.`{name}`" for name in SOURCE_OFFSETS.column_names}
        table = DeltaTable.forPath(current.sparkSession, self.path(SOURCE_OFFSETS))
        with delta_transaction(current.sparkSession, self.app_id(SOURCE_OFFSETS), batch_id):
            (
                table.alias("t")
                .merge(source.alias("s"), "t.offsets_topic = s.offsets_topic AND t.key = s.key")
                .whenMatchedDelete(f"s.op = '{source_fold.DELETE}'")
                .whenMatchedUpdate(
                    f"s.op = '{source_fold.LISTED}'", set={"listed": "s.listed", "updated_at": "s.updated_at"}
                )
                .whenMatchedUpdate(f"s.op = '{source_fold.UPSERT}'", set=values)
                .whenNotMatchedInsert(f"s.op = '{source_fold.UPSERT}'", values=values)
                .execute()
            )


_SOURCE_WRITERS: dict[str, SourceOffsetsWriter] = {}


def start_source(
    spark: SparkSession,
    settings: Settings,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
) -> StreamingQuery:
    """Create the tables if needed and start the source-offsets query over the offsets topics."""
    topics = source_topics(spark, settings)
    log.info("source offsets: reading %s", ", ".join(topics))
    rows = read_internal_topic(spark, settings, topics, max_offsets_per_trigger)
    writer = SourceOffsetsWriter(settings, topics, watch_topics=not available_now)
    query = start_fold_query(
        spark,
        settings,
        SOURCE_JOB,
        source_fold_stream(rows),
        writer,
        tables=(SOURCE_OFFSETS, SOURCE_OFFSETS_HISTORY),
        current_tables=(SOURCE_OFFSETS,),
        available_now=available_now,
    )
    _SOURCE_WRITERS[query.id] = writer
    return query


def source_topics_changed(
    query: StreamingQuery, spark: SparkSession | None = None, settings: Settings | None = None
) -> frozenset[str]:
    """The connector offsets topics configured since ``query`` (a continuous :func:`start_source`) started.

    Without ``spark`` and ``settings``, what the query's last micro-batch saw; with them, the ``connectors`` table is
    read now (a query over idle topics runs no micro-batch).
    """
    writer = _SOURCE_WRITERS.get(query.id)
    if writer is None:
        return frozenset()
    if spark is not None and settings is not None and not writer.new_topics:
        writer.new_topics = frozenset(connector_offsets_topics(spark, settings) - writer.subscribed)
    return writer.new_topics


# ---------------------------------------------------------------------------------------------------------------------
# Sink offsets
# ---------------------------------------------------------------------------------------------------------------------

SINK_PARSED_SCHEMA = (
    "record_kind STRING, group_id STRING, topic STRING, partition INT, offset BIGINT, leader_epoch INT, "
    "metadata STRING, commit_timestamp BIGINT, change STRING, " + RECORD_COLUMNS_DDL
)
SINK_OUTPUT_SCHEMA = SINK_PARSED_SCHEMA
SINK_STATE_SCHEMA = "state_json STRING"


def classify_sink(key: bytes | None, value: bytes | None, kafka: dict) -> list[dict]:
    """One ``__consumer_offsets`` record: an offset commit (or its tombstone), nothing for the group coordinator's
    other records, or a rejected record.
    """
    try:
        record = parse_consumer_offsets_record(key, value)
    except RecordFormatError as err:
        return [{"record_kind": REJECTED, "raw_key": key, "raw_value": value, "reason": err.reason, **kafka}]
    if not isinstance(record.key, OffsetCommitKey):
        return []
    commit = record.value
    return [
        {
            "record_kind": RECORD,
            "group_id": record.key.group,
            "topic": record.key.topic,
            "partition": record.key.partition,
            "offset": commit.offset if commit else None,
            "leader_epoch": commit.leader_epoch if commit else None,
            "metadata": commit.metadata if commit else None,
            "commit_timestamp": commit.commit_timestamp if commit else None,
            "change": sink_fold.SET if commit else sink_fold.REMOVED,
            **kafka,
        }
    ]


def _commit_record(row) -> sink_fold.OffsetCommitRecord:
    commit = None
    if row.change == sink_fold.SET:
        commit = OffsetCommitValue(
            offset=int(row.offset),
            metadata=row.metadata,
            commit_timestamp=int(row.commit_timestamp),
            leader_epoch=int(row.leader_epoch),
        )
    return sink_fold.OffsetCommitRecord(
        row.group_id,
        row.topic,
        int(row.partition),
        commit,
        int(row.kafka_partition),
        int(row.kafka_offset),
        int(row.kafka_timestamp),
    )


def _sink_row(kind: str, change: sink_fold.SinkOffsetChange, kafka_topic: str) -> dict:
    commit = change.commit
    return {
        "record_kind": kind,
        "group_id": change.group_id,
        "topic": change.topic,
        "partition": change.partition,
        "offset": commit.offset if commit else None,
        "leader_epoch": commit.leader_epoch if commit else None,
        "metadata": commit.metadata if commit else None,
        "commit_timestamp": commit.commit_timestamp if commit else None,
        "change": change.change,
        "kafka_topic": kafka_topic,
        "kafka_partition": change.kafka_partition,
        "kafka_offset": change.kafka_offset,
        "kafka_timestamp": change.kafka_timestamp,
    }


def fold_sink_group(key: tuple, frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
    """``applyInPandasWithState`` body, per (group kind, consumer group)."""
    group_kind, _group = key
    batch = pd.concat(list(frames), ignore_index=True)
    if group_kind == REJECTED:
        yield pandas_frame(batch.to_dict("records"), SINK_OUTPUT_SCHEMA)
        return
    kafka_topic = batch["kafka_topic"].iloc[0]
    current = sink_fold.state_from_json(state.get[0]) if state.exists else {}
    records = [_commit_record(row) for row in batch.itertuples(index=False)]
    new_state, history, rows = sink_fold.fold_group_offsets(current, records)
    state.update((sink_fold.state_to_json(new_state),))
    out = [_sink_row(HISTORY, c, kafka_topic) for c in history] + [_sink_row(CURRENT, r, kafka_topic) for r in rows]
    yield pandas_frame(out, SINK_OUTPUT_SCHEMA)


def sink_fold_stream(kafka_rows: DataFrame) -> DataFrame:
    """Kafka rows of ``__consumer_offsets`` → history rows, current-table rows and rejected records."""
    parsed = classify_records(kafka_rows, classify_sink, SINK_PARSED_SCHEMA)
    grouped = parsed.withColumn(
        "group_kind", F.when(F.col("record_kind") == REJECTED, F.lit(REJECTED)).otherwise(F.lit("group"))
    )
    return grouped.groupBy("group_kind", "group_id").applyInPandasWithState(
        fold_sink_group, SINK_OUTPUT_SCHEMA, SINK_STATE_SCHEMA, "update", GroupStateTimeout.NoTimeout
    )


class SinkOffsetsWriter(FoldWriter):
    """``foreachBatch`` sink: history appended, committed offsets merged into ``sink_offsets``."""

    job_name = SINK_JOB

    def write(self, batch: DataFrame, batch_id: int) -> str:
        history = batch.filter(F.col("record_kind") == HISTORY)
        current = batch.filter(F.col("record_kind") == CURRENT)
        n_history, n_current = history.count(), current.count()
        if n_history:
            rows = history.select(
                "group_id",
                "topic",
                "partition",
                "offset",
                "change",
                "commit_timestamp",
                "kafka_partition",
                "kafka_offset",
                F.timestamp_millis("kafka_timestamp").alias("kafka_timestamp"),
                F.current_timestamp().alias("recorded_at"),
            )
            append_once(rows, self.path(SINK_OFFSETS_HISTORY), self.app_id(SINK_OFFSETS_HISTORY), batch_id)
        if n_current:
            self._merge_current(current, batch_id)
        return f"{n_history} offset commits, {n_current} committed offsets changed"

    def _merge_current(self, current: DataFrame, batch_id: int) -> None:
        source = current.select(
            "group_id",
            "topic",
            "partition",
            "offset",
            "leader_epoch",
            "metadata",
            "commit_timestamp",
            "kafka_partition",
            "kafka_offset",
            F.timestamp_millis("kafka_timestamp").alias("kafka_timestamp"),
            F.current_timestamp().alias("updated_at"),
            F.col("change").alias("op"),
        )
        values = {name: f"s.`{name}`" for name in SINK_OFFSETS.column_names}
        table = DeltaTable.forPath(current.sparkSession, self.path(SINK_OFFSETS))
        condition = "t.group_id = s.group_id AND t.topic = s.topic AND t.`partition` = s.`partition`"
        with delta_transaction(current.sparkSession, self.app_id(SINK_OFFSETS), batch_id):
            (
                table.alias("t")
                .merge(source.alias("s"), condition)
                .whenMatchedDelete(f"s.op = '{sink_fold.DELETE}'")
                .whenMatchedUpdate(set=values)
                .whenNotMatchedInsert(f"s.op = '{sink_fold.UPSERT}'", values=values)
                .execute()
            )


def start_sink(
    spark: SparkSession,
    settings: Settings,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
) -> StreamingQuery:
    """Create the tables if needed and start the sink-offsets query over ``__consumer_offsets``."""
    previous = spark.conf.get(DEPRECATED_OFFSET_FETCHING, None)
    spark.conf.set(DEPRECATED_OFFSET_FETCHING, "true")
    try:
        rows = read_internal_topic(spark, settings, settings.consumer_offsets_topic, max_offsets_per_trigger)
        writer = SinkOffsetsWriter(settings.delta_root, settings.checkpoint_path(SINK_JOB))
        return start_fold_query(
            spark,
            settings,
            SINK_JOB,
            sink_fold_stream(rows),
            writer,
            tables=(SINK_OFFSETS, SINK_OFFSETS_HISTORY),
            current_tables=(SINK_OFFSETS,),
            available_now=available_now,
        )
    finally:
        if previous is None:
            spark.conf.unset(DEPRECATED_OFFSET_FETCHING)
        else:
            spark.conf.set(DEPRECATED_OFFSET_FETCHING, previous)


# ---------------------------------------------------------------------------------------------------------------------
# Running both
# ---------------------------------------------------------------------------------------------------------------------


def stop_between_batches(query: StreamingQuery, timeout_s: float = 120.0) -> None:
    """Stop ``query`` once its current micro-batch (if any) has finished, so no batch is interrupted halfway (the
    writes are idempotent either way); waits at most ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()


def run_offsets_queries(
    spark: SparkSession,
    settings: Settings,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
    poll_seconds: float = 5.0,
    topic_check_seconds: float = 60.0,
    stop: threading.Event | None = None,
) -> int:
    """Run both queries until they end (catch-up runs) or until SIGINT/SIGTERM (or ``stop`` is set: then the caller
    handles signals); a continuous source query is restarted when a new connector offsets topic is configured (seen
    after a micro-batch, or by reading the ``connectors`` table every ``topic_check_seconds``). Returns 0, or 1 if a
    query failed.
    """
    starts = {SOURCE_JOB: start_source, SINK_JOB: start_sink}
    queries = {name: start(spark, settings, available_now, max_offsets_per_trigger) for name, start in starts.items()}
    stop_requested = stop if stop is not None else threading.Event()
    previous = stop_on_signals(stop_requested, "the offsets queries") if stop is None else {}
    last_batch = {name: -1 for name in queries}
    next_topic_check = time.monotonic() + topic_check_seconds
    try:
        while any(q.isActive for q in queries.values()) and not stop_requested.is_set():
            for name, query in list(queries.items()):
                query.awaitTermination(poll_seconds / len(queries))
                progress = query.lastProgress
                if progress and progress["batchId"] != last_batch[name]:
                    last_batch[name] = progress["batchId"]
                    log.info("%s batch %d: %d input rows", name, last_batch[name], progress["numInputRows"])
                if not query.isActive and query.exception() is not None:
                    stop_requested.set()  # one query failed: stop the other one too, and report it
                    break
                if name != SOURCE_JOB or available_now or not query.isActive:
                    continue
                new_topics = source_topics_changed(query)
                if not new_topics and time.monotonic() >= next_topic_check:
                    next_topic_check = time.monotonic() + topic_check_seconds
                    new_topics = source_topics_changed(query, spark, settings)
                if new_topics:
                    log.info("restarting %s to subscribe to %s", name, sorted(new_topics))
                    stop_between_batches(query)
                    _SOURCE_WRITERS.pop(query.id, None)
                    queries[name] = start_source(spark, settings, available_now, max_offsets_per_trigger)
        failed = False
        for name, query in queries.items():
            if query.isActive:
                query.stop()
            error = query.exception()
            if error is not None:
                log.error("query %s failed: %s", name, error)
                failed = True
        return 1 if failed else 0
    finally:
        restore_signals(previous)


def main(argv: list[str] | None = None) -> int:
    """The console script ``connect-state-offsets``."""
    args, settings = parse_job_arguments("offsets", __doc__.split("\n\n")[0], argv)
    spark = build_session("connect-state-offsets", settings.spark_master)
    return run_offsets_queries(spark, settings, args.available_now, args.max_offsets_per_trigger)


if __name__ == "__main__":
    raise SystemExit(main())
