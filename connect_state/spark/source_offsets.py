"""KIP-875 source offsets, the Spark pipeline: the offsets topics folded into the ``source_offsets`` Delta table.

``connect-offsets`` (``offset.storage.topic``) plus every connector-specific offsets topic (a connector config's
``offsets.storage.topic``, read from the ``connectors`` table, :mod:`connect_state.connect.offset_stores`) →
:func:`classify` (:mod:`connect_state.formats.offsets`: keys and values) → :func:`fold_group`
(:mod:`connect_state.folds.source_offsets`, per offsets topic and connector, ``KafkaOffsetBackingStore``'s ``data``
and ``connectorPartitions``, in ``applyInPandasWithState``) → :class:`SourceOffsetsWriter` (``foreachBatch``): Delta
tables ``source_offsets`` (one row per live key) and ``source_offsets_history`` (every record); malformed records go
to ``rejected_records`` with the reason. Part of the offsets job (:mod:`connect_state.spark.offsets`).

**Topics of the query.** The subscription is fixed when the query starts: the worker's offsets topic, the
``offsets.storage.topic`` of every config in the ``connectors`` table (when it exists), and every topic the
checkpoint has already read. Spark's Kafka source reads the partitions of a topic added to the subscription of an
existing checkpoint from their earliest offset (``getOffsetRangesFromResolvedOffsets``: "Partitions added"), so topics
are never dropped. A continuous run checks after every micro-batch whether a new topic appeared and then restarts the
query (:class:`SourceOffsetsTask`).

**A deleted offsets topic.** The query subscribes with a pattern matching exactly those topics (``subscribePattern``):
a topic that is deleted (a connector's own offsets topic, by an operator) simply stops matching, where ``subscribe``
would fail every micro-batch describing it. Its partitions leave the query's offsets ("... are gone", not fatal with
``failOnDataLoss=false``); the writer records the loss in ``data_loss`` and the reconcile pass removes the topic's
rows from ``source_offsets`` (:mod:`connect_state.spark.reconcile`). A topic created again under that name is read
from its start.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from connect_state.connect.offset_stores import offsets_topics
from connect_state.core.errors import RecordFormatError
from connect_state.core.settings import Settings
from connect_state.core.storage import Location
from connect_state.folds import source_offsets as source_fold
from connect_state.formats.offsets import parse_offset_key
from connect_state.progress.positions import topics_of
from connect_state.security.guards import permitted_offsets_topics
from connect_state.spark.checkpoint import latest_positions
from connect_state.spark.delta_io import table_exists
from connect_state.spark.foldjob import (
    RECORD_COLUMNS,
    FoldSpec,
    FoldWriter,
    RecordKind,
    column_frame,
    group_fold,
    nullable_values,
    rejected,
    start_fold,
)
from connect_state.spark.offsets_guard import offsets_records_topics
from connect_state.spark.streaming import QueryTask, job_logger, stop_between_batches
from connect_state.tables.merge_spec import (
    MergeSpec,
    matched_delete,
    matched_update,
    not_matched_insert,
    source_values,
)
from connect_state.tables.schemas import BOOLEAN, CONNECTORS, SOURCE_OFFSETS, SOURCE_OFFSETS_HISTORY, STRING

JOB_NAME = "source_offsets"
TOPIC_CHECK_SECONDS = 60.0

log = job_logger("offsets")

# ---------------------------------------------------------------------------------------------------------------------
# Which topics the query reads
# ---------------------------------------------------------------------------------------------------------------------


def configured_topics(spark: SparkSession, settings: Settings) -> set[str]:
    """The worker's offsets topic and the ``offsets.storage.topic`` of every connector config in the ``connectors``
    table (none when the table is missing), by :func:`connect_state.connect.offset_stores.offsets_topics`."""
    path = str(settings.delta_root / CONNECTORS.name)
    configs: list[dict | None] = []
    if table_exists(spark, path):
        for row in spark.read.format("delta").load(path).where("config IS NOT NULL").select("config").collect():
            try:
                config = json.loads(row.config)
            except ValueError:
                continue
            configs.append(config if isinstance(config, dict) else None)
    permitted = permitted_offsets_topics(offsets_topics(settings.offset_storage_topic, configs), settings)
    return offsets_records_topics(spark, settings, permitted)  # issue 13: their records must be offsets records


def checkpoint_topics(spark: SparkSession, checkpoint: Location) -> set[str]:
    """The topics in the newest entry of a checkpoint's offset log (``offsets/<batch>``: ``v1``, the batch metadata,
    then one JSON line per source, ``{"topic":{"partition":offset}}``); none for a new checkpoint.
    """
    return topics_of(latest_positions(spark, checkpoint) or {})


def source_topics(spark: SparkSession, settings: Settings) -> list[str]:
    """The query's subscription: worker topic, connector-specific topics, and the checkpoint's topics."""
    return sorted(configured_topics(spark, settings) | checkpoint_topics(spark, settings.checkpoint_path(JOB_NAME)))


# ---------------------------------------------------------------------------------------------------------------------
# Parse, fold, write
# ---------------------------------------------------------------------------------------------------------------------

PARSED_SCHEMA = pa.schema([("record_kind", STRING), ("offsets_topic", STRING), ("connector", STRING), *RECORD_COLUMNS])
OUTPUT_SCHEMA = pa.schema([
    ("record_kind", STRING), ("offsets_topic", STRING), ("connector", STRING), ("partition", STRING),
    ("offset", STRING), ("listed", BOOLEAN), ("change", STRING), *RECORD_COLUMNS,
])  # fmt: skip


def classify(key: bytes | None, value: bytes | None, kafka: dict) -> list[dict]:
    """One offsets-topic record: a record of its connector, or a rejected one.

    A key ``processPartitionKey`` ignores with a WARN is rejected (Connect still keeps its value in ``data``, where no
    lookup can reach it). A value that cannot be read as an offset is kept (it is in ``data`` and its map is listed)
    and also quarantined: ``GET /offsets`` leaves such a partition out.
    """
    try:
        parsed = parse_offset_key(key) if key is None else source_fold.parsed_key(bytes(key))
    except RecordFormatError as err:
        return [rejected(key, value, err.reason, kafka)]
    row = {
        "record_kind": RecordKind.RECORD,
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
    return [row, rejected(key, value, reason, kafka)]


def _offset_records(batch: pd.DataFrame) -> list[source_fold.OffsetRecord]:
    """The fold's records of a group's rows, a column at a time."""
    return [
        source_fold.OffsetRecord.from_kafka(topic, key, value, int(partition), int(offset), int(timestamp))
        for topic, key, value, partition, offset, timestamp in zip(
            batch["offsets_topic"].tolist(),
            nullable_values(batch["raw_key"]),
            nullable_values(batch["raw_value"]),
            batch["kafka_partition"].tolist(),
            batch["kafka_offset"].tolist(),
            batch["kafka_timestamp"].tolist(),
            strict=True,
        )
    ]


def _output_frame(
    offsets_topic: str, changes: list[source_fold.OffsetChange], rows: list[source_fold.CurrentRow]
) -> pd.DataFrame:
    """The fold's output: one history row per change, then one current-table row per row, built a column at a time."""
    n_changes, n = len(changes), len(changes) + len(rows)
    columns: dict[str, list[Any]] = {
        "record_kind": [str(RecordKind.HISTORY)] * n_changes + [str(RecordKind.CURRENT)] * len(rows),
        "offsets_topic": [c.offsets_topic for c in changes] + [r.offsets_topic for r in rows],
        "connector": [c.connector for c in changes] + [r.connector for r in rows],
        "partition": [c.partition for c in changes] + [r.partition for r in rows],
        "offset": [c.offset for c in changes] + [r.offset for r in rows],
        "listed": [None] * n_changes + [r.listed for r in rows],
        "change": [c.change for c in changes] + [r.op for r in rows],
        "raw_key": [c.key for c in changes] + [r.key for r in rows],
        "raw_value": [None] * n_changes + [r.value for r in rows],
        "kafka_topic": [offsets_topic] * n,
        "kafka_partition": [c.kafka_partition for c in changes] + [r.kafka_partition for r in rows],
        "kafka_offset": [c.kafka_offset for c in changes] + [r.kafka_offset for r in rows],
        "kafka_timestamp": [c.kafka_timestamp for c in changes] + [r.kafka_timestamp for r in rows],
    }
    return column_frame(columns, n, OUTPUT_SCHEMA)


def _fold(key: tuple, batch: pd.DataFrame, state_json: str | None) -> tuple[str, pd.DataFrame]:
    """An offsets topic's records of a connector folded (:func:`connect_state.folds.source_offsets.
    fold_connector_offsets`)."""
    _kind, offsets_topic, _connector = key
    current = source_fold.state_from_json(state_json) if state_json is not None else source_fold.OffsetsState()
    new_state, changes, rows = source_fold.fold_connector_offsets(current, _offset_records(batch))
    return source_fold.state_to_json(new_state), _output_frame(offsets_topic, changes, rows)


#: ``applyInPandasWithState`` body, per (group kind, offsets topic, connector).
fold_group = group_fold(OUTPUT_SCHEMA, _fold)


#: A batch's latest record of each (offsets topic, key) into ``source_offsets``: a tombstone deletes the row; a key
#: whose ``listed`` flag alone changed (another key of the same source partition took or gave up its listing) gets the
#: flag only.
CURRENT_MERGE = MergeSpec(
    "t.offsets_topic = s.offsets_topic AND t.key = s.key",
    (
        matched_delete(f"s.op = '{source_fold.DELETE}'"),
        matched_update({"listed": "s.listed", "updated_at": "s.updated_at"}, f"s.op = '{source_fold.LISTED}'"),
        matched_update(source_values(SOURCE_OFFSETS.column_names), f"s.op = '{source_fold.UPSERT}'"),
        not_matched_insert(source_values(SOURCE_OFFSETS.column_names), f"s.op = '{source_fold.UPSERT}'"),
    ),
)


def fold_spec(settings: Settings) -> FoldSpec:
    """Every record appended to ``source_offsets_history`` and the live keys merged into ``source_offsets``, from the
    offsets topics (subscribed by pattern); ``source_offsets`` rows whose exact key bytes have no record left in their
    offsets topic, or whose offsets topic is gone, are ghosts."""
    return FoldSpec(
        JOB_NAME,
        topics=lambda spark: source_topics(spark, settings),
        classify=classify,
        parsed=PARSED_SCHEMA,
        group_by=("group_kind", "offsets_topic", "connector"),
        fold=fold_group,
        output=OUTPUT_SCHEMA,
        history=SOURCE_OFFSETS_HISTORY,
        history_kind=RecordKind.HISTORY,
        current=SOURCE_OFFSETS,
        current_kind=RecordKind.CURRENT,
        merge=CURRENT_MERGE,
        summary="{history} offset records, {current} current rows changed",
        group_kind="connector",
        op="op",
        columns=lambda: {"key": F.col("raw_key"), "value": F.col("raw_value")},
        as_pattern=True,
    )


class SourceOffsetsWriter(FoldWriter):
    """:func:`fold_spec`'s ``foreachBatch`` sink, then a look for newly configured topics."""

    def __init__(self, settings: Settings, subscribed: list[str], watch_topics: bool) -> None:
        super().__init__(settings.delta_root, settings.checkpoint_path(JOB_NAME), fold_spec(settings))
        self.settings = settings
        self.subscribed = frozenset(subscribed)
        self.watch_topics = watch_topics
        self.new_topics: frozenset[str] = frozenset()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        super().__call__(batch, batch_id)
        if self.watch_topics:
            configured = configured_topics(batch.sparkSession, self.settings)
            new = frozenset(configured - self.subscribed)
            if new and new != self.new_topics:
                self.log.info("new connector offsets topics %s: the query restarts to read them", sorted(new))
            self.new_topics = new


def start_with_writer(
    spark: SparkSession,
    settings: Settings,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
) -> tuple[StreamingQuery, SourceOffsetsWriter]:
    """Create the tables if needed and start the query over the offsets topics; its writer says which newly configured
    topics it has seen (continuous runs)."""
    topics = source_topics(spark, settings)
    log.info("source offsets: reading %s", ", ".join(topics))
    writer = SourceOffsetsWriter(settings, topics, watch_topics=not available_now)
    query = start_fold(
        spark, settings, fold_spec(settings), available_now, max_offsets_per_trigger, topics=topics, writer=writer
    )
    return query, writer


def start(
    spark: SparkSession,
    settings: Settings,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
) -> StreamingQuery:
    """Create the tables if needed and start the query over the offsets topics."""
    return start_with_writer(spark, settings, available_now, max_offsets_per_trigger)[0]


class SourceOffsetsTask(QueryTask):
    """The source-offsets query under the supervisor; a continuous one is restarted when a new connector offsets
    topic is configured (seen after a micro-batch, or by reading the ``connectors`` table every
    ``topic_check_seconds``: a query over idle topics runs no micro-batch)."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        available_now: bool = False,
        max_offsets_per_trigger: int | None = None,
        topic_check_seconds: float = TOPIC_CHECK_SECONDS,
        poll_seconds: float = 5.0,
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.available_now = available_now
        self.max_offsets_per_trigger = max_offsets_per_trigger
        self.topic_check_seconds = topic_check_seconds
        query = self.start_query()
        self.next_topic_check = time.monotonic() + topic_check_seconds
        super().__init__(query, poll_seconds, restart=self.start_query)

    def start_query(self) -> StreamingQuery:
        """Start the query (again, after a failure or for new topics), with the subscription the tables and the
        checkpoint give now."""
        query, self.writer = start_with_writer(
            self.spark, self.settings, self.available_now, self.max_offsets_per_trigger
        )
        return query

    def new_topics(self, look_now: bool = False) -> frozenset[str]:
        """The connector offsets topics configured since the query started: what its last micro-batch saw, or, with
        ``look_now``, what the ``connectors`` table says now."""
        if look_now and not self.writer.new_topics:
            self.writer.new_topics = frozenset(configured_topics(self.spark, self.settings) - self.writer.subscribed)
        return self.writer.new_topics

    def after_poll(self) -> None:
        if self.available_now:
            return
        look_now = time.monotonic() >= self.next_topic_check
        if look_now:
            self.next_topic_check = time.monotonic() + self.topic_check_seconds
        new_topics = self.new_topics(look_now)
        if new_topics:
            log.info("restarting %s to subscribe to %s", self.name, sorted(new_topics))
            stop_between_batches(self.query)
            self.query = self.start_query()
