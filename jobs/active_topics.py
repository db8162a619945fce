"""KIP-558 active topics: the status topic folded into the ``active_topics`` Delta table.

Path of the feature: ``connect-status`` → :mod:`connect_state.formats.status` (parse) →
:mod:`connect_state.folds.active_topics` (fold per connector, in ``applyInPandasWithState``) → Delta tables
``active_topics`` (current set), ``active_topics_history`` (every change) and ``rejected_records`` → the API's
``GET /connectors/<name>/topics``.

Run continuously (processing-time trigger, ``trigger.interval``) or as a catch-up run that stops when it has read
everything (``--available-now``, for a scheduled job)::

    connect-state-active-topics [--available-now] [--conf-file F] [--set key=value ...]
    spark-submit --jars "$(connect-state-jars)" jobs/active_topics.py --available-now
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from connect_state.config import Settings, add_config_arguments, settings_from_args
from connect_state.errors import RecordFormatError
from connect_state.folds.active_topics import (
    REMOVED,
    TopicChange,
    TopicRecord,
    fold_connector_topics,
    state_from_json,
    state_to_json,
)
from connect_state.formats.status import TopicStatus, TopicStatusKey, parse_status_record
from connect_state.spark.delta_io import append_once, delta_transaction, ensure_table, insert_new_once
from connect_state.spark.kafka_source import read_internal_topic
from connect_state.spark.session import build_session
from connect_state.spark.streaming import checkpoint_query_id, run_query
from connect_state.tables import ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, REJECTED_RECORDS

JOB_NAME = "active_topics"
log = logging.getLogger(f"connect_state.jobs.{JOB_NAME}")

TOPIC = "topic"
REJECTED = "rejected"
CHANGE = "change"

# One row per status-topic record that matters here: a topic status (or its tombstone), or a rejected record.
PARSED_SCHEMA = (
    "record_kind STRING, connector STRING, topic STRING, task INT, discover_timestamp BIGINT, "
    "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, kafka_timestamp BIGINT, "
    "raw_key BINARY, raw_value BINARY, reason STRING"
)
# The fold's output: changes of active-topic sets, and rejected records passed through.
OUTPUT_SCHEMA = (
    "record_kind STRING, connector STRING, topic STRING, change STRING, seq INT, task INT, "
    "discover_timestamp BIGINT, kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, "
    "kafka_timestamp BIGINT, raw_key BINARY, raw_value BINARY, reason STRING"
)
STATE_SCHEMA = "topics_json STRING"
_PARSED_COLUMNS = [c.strip().split(" ")[0] for c in PARSED_SCHEMA.split(",")]
_OUTPUT_COLUMNS = [c.strip().split(" ")[0] for c in OUTPUT_SCHEMA.split(",")]
_NULLABLE_INTS = {"task": "Int32", "kafka_partition": "Int32", "seq": "Int32"}
_NULLABLE_LONGS = ("discover_timestamp", "kafka_offset", "kafka_timestamp")


def _frame(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    """A pandas frame that keeps None as null: object columns (an all-None column would otherwise become float NaN,
    which Arrow cannot turn into strings or bytes) and nullable integer columns."""
    frame = pd.DataFrame(rows, columns=columns, dtype=object)
    for name in columns:
        if name in _NULLABLE_INTS:
            frame[name] = frame[name].astype(_NULLABLE_INTS[name])
        elif name in _NULLABLE_LONGS:
            frame[name] = frame[name].astype("Int64")
    return frame


def parse_status_row(key: bytes | None, value: bytes | None, kafka: dict) -> dict | None:
    """Classify one status-topic record: a topic-status row, a rejected row, or None for records of other kinds."""
    try:
        record = parse_status_record(key, value)
    except RecordFormatError as err:
        return {"record_kind": REJECTED, "raw_key": key, "raw_value": value, "reason": err.reason, **kafka}
    if not isinstance(record.key, TopicStatusKey):
        return None
    status = record.value if isinstance(record.value, TopicStatus) else None
    return {
        "record_kind": TOPIC,
        "connector": record.key.connector,
        "topic": record.key.topic,
        "task": status.task if status else None,
        "discover_timestamp": status.discover_timestamp if status else None,
        **kafka,
    }


def parse_status_frames(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """``mapInPandas`` body: Kafka rows → parsed rows (see PARSED_SCHEMA)."""
    for frame in frames:
        rows = []
        for key, value, topic, partition, offset, timestamp in frame.itertuples(index=False, name=None):
            kafka = {
                "kafka_topic": topic,
                "kafka_partition": partition,
                "kafka_offset": offset,
                "kafka_timestamp": timestamp,
            }
            row = parse_status_row(key, value, kafka)
            if row is not None:
                rows.append(row)
        yield _frame(rows, _PARSED_COLUMNS)


def _change_row(change: TopicChange, seq: int) -> dict:
    return {
        "record_kind": CHANGE,
        "connector": change.connector,
        "topic": change.topic,
        "change": change.change,
        "seq": seq,
        "task": change.task,
        "discover_timestamp": change.discover_timestamp,
        "kafka_partition": change.kafka_partition,
        "kafka_offset": change.kafka_offset,
        "kafka_timestamp": change.kafka_timestamp,
    }


def _topic_record(row: pd.Series) -> TopicRecord:
    return TopicRecord(
        connector=row.connector,
        topic=row.topic,
        task=None if pd.isna(row.task) else int(row.task),
        discover_timestamp=None if pd.isna(row.discover_timestamp) else int(row.discover_timestamp),
        kafka_partition=int(row.kafka_partition),
        kafka_offset=int(row.kafka_offset),
        kafka_timestamp=int(row.kafka_timestamp),
    )


def fold_group(key: tuple, frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
    """``applyInPandasWithState`` body, per (record_kind, connector): fold topic records, pass rejected through."""
    record_kind, _connector = key
    batch = pd.concat(list(frames), ignore_index=True)
    if record_kind == REJECTED:
        yield batch.reindex(columns=_OUTPUT_COLUMNS).pipe(lambda f: _frame(f.to_dict("records"), _OUTPUT_COLUMNS))
        return
    current = state_from_json(state.get[0]) if state.exists else {}
    records = [_topic_record(row) for row in batch.itertuples(index=False)]
    new_state, changes = fold_connector_topics(current, records)
    state.update((state_to_json(new_state),))
    yield _frame([_change_row(c, i) for i, c in enumerate(changes)], _OUTPUT_COLUMNS)


def fold_stream(kafka_rows: DataFrame) -> DataFrame:
    """Kafka source rows → the fold's output rows (changes and rejected records)."""
    parsed = kafka_rows.selectExpr(
        "key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS timestamp"
    ).mapInPandas(parse_status_frames, PARSED_SCHEMA)
    return parsed.groupBy("record_kind", "connector").applyInPandasWithState(
        fold_group, OUTPUT_SCHEMA, STATE_SCHEMA, "update", GroupStateTimeout.NoTimeout
    )


class ActiveTopicsWriter:
    """``foreachBatch`` sink: history append, current-set MERGE and rejected inserts, each once per batch."""

    def __init__(self, delta_root: Path, checkpoint: Path) -> None:
        self.current = str(delta_root / ACTIVE_TOPICS.name)
        self.history = str(delta_root / ACTIVE_TOPICS_HISTORY.name)
        self.rejected = str(delta_root / REJECTED_RECORDS.name)
        self.checkpoint = str(checkpoint)
        self._app_id: str | None = None

    @property
    def app_id(self) -> str:
        """Delta transaction id of this query: its checkpoint's query id, so a new checkpoint never collides with
        the batch ids an earlier one recorded."""
        if self._app_id is None:
            raise RuntimeError("app_id is known once the first batch arrives")
        return self._app_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self._app_id is None:
            self._app_id = f"connect-state:{JOB_NAME}:{checkpoint_query_id(batch.sparkSession, self.checkpoint)}"
        batch.persist()
        try:
            changes = batch.filter(F.col("record_kind") == CHANGE)
            rejected = batch.filter(F.col("record_kind") == REJECTED)
            n_changes, n_rejected = changes.count(), rejected.count()
            if n_changes:
                self._write_history(changes, batch_id)
                self._merge_current(changes, batch_id)
            if n_rejected:
                self._write_rejected(rejected, batch_id)
            log.info("batch %d: %d active-topic changes, %d rejected records", batch_id, n_changes, n_rejected)
        finally:
            batch.unpersist()

    def _write_history(self, changes: DataFrame, batch_id: int) -> None:
        rows = changes.select(
            "connector",
            "topic",
            "change",
            "task",
            "discover_timestamp",
            F.current_timestamp().alias("changed_at"),
            "kafka_partition",
            "kafka_offset",
            F.timestamp_millis("kafka_timestamp").alias("kafka_timestamp"),
        )
        append_once(rows, self.history, f"{self.app_id}:{ACTIVE_TOPICS_HISTORY.name}", batch_id)

    def _merge_current(self, changes: DataFrame, batch_id: int) -> None:
        latest = (
            changes.withColumn(
                "_rank", F.row_number().over(Window.partitionBy("connector", "topic").orderBy(F.desc("seq")))
            )
            .filter("_rank = 1")
            .select(
                "connector",
                "topic",
                "change",
                "task",
                "discover_timestamp",
                F.current_timestamp().alias("updated_at"),
                "kafka_partition",
                "kafka_offset",
            )
        )
        values = {name: f"s.{name}" for name in ACTIVE_TOPICS.column_names}
        table = DeltaTable.forPath(changes.sparkSession, self.current)
        with delta_transaction(changes.sparkSession, f"{self.app_id}:{ACTIVE_TOPICS.name}", batch_id):
            (
                table.alias("t")
                .merge(latest.alias("s"), "t.connector = s.connector AND t.topic = s.topic")
                .whenMatchedDelete(f"s.change = '{REMOVED}'")
                .whenMatchedUpdate(set=values)
                .whenNotMatchedInsert(condition=f"s.change != '{REMOVED}'", values=values)
                .execute()
            )

    def _write_rejected(self, rejected: DataFrame, batch_id: int) -> None:
        rows = rejected.select(
            F.col("kafka_topic").alias("topic"),
            F.col("kafka_partition").alias("partition"),
            F.col("kafka_offset").alias("offset"),
            F.col("raw_key").alias("key"),
            F.col("raw_value").alias("value"),
            "reason",
            F.current_timestamp().alias("seen_at"),
        )
        insert_new_once(rows, self.rejected, REJECTED_RECORDS.key, f"{self.app_id}:{REJECTED_RECORDS.name}", batch_id)


def start(
    spark: SparkSession,
    settings: Settings,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
) -> StreamingQuery:
    """Create the tables if needed and start the query (it runs until stopped, or until caught up)."""
    for spec in (ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, REJECTED_RECORDS):
        ensure_table(spark, settings.delta_root, spec)
    checkpoint = settings.checkpoint_path(JOB_NAME)
    if not checkpoint.exists():
        # A new checkpoint folds the topic from its first record: start the current set from empty too, or rows
        # whose tombstones were compacted away would linger. History is kept.
        log.info("no checkpoint at %s: rebuilding %s from the beginning of the topic", checkpoint, ACTIVE_TOPICS.name)
        DeltaTable.forPath(spark, str(settings.delta_root / ACTIVE_TOPICS.name)).delete()
    rows = read_internal_topic(spark, settings, settings.status_storage_topic, max_offsets_per_trigger)
    writer = ActiveTopicsWriter(settings.delta_root, checkpoint)
    stream = (
        fold_stream(rows)
        .writeStream.queryName(JOB_NAME)
        .outputMode("update")
        .foreachBatch(writer)
        .option("checkpointLocation", str(checkpoint))
    )
    stream = (
        stream.trigger(availableNow=True) if available_now else stream.trigger(processingTime=settings.trigger_interval)
    )
    return stream.start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="connect-state-active-topics", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--available-now", action="store_true", help="catch up with the topic, then stop (for scheduled runs)"
    )
    parser.add_argument("--max-offsets-per-trigger", type=int, help="bound the records read per micro-batch")
    add_config_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_from_args(args)
    spark = build_session(f"connect-state-{JOB_NAME}", settings.spark_master)
    query = start(spark, settings, args.available_now, args.max_offsets_per_trigger)
    return run_query(query)


if __name__ == "__main__":
    raise SystemExit(main())
