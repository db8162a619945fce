"""KIP-558 active topics, the Spark pipeline: the status topic folded into the ``active_topics`` Delta table.

``connect-status`` → :func:`classify` (:mod:`connect_state.formats.status`) → :func:`fold_group`
(:mod:`connect_state.folds.active_topics`, per connector, in ``applyInPandasWithState``) → :class:`ActiveTopicsWriter`
(``foreachBatch``): Delta tables ``active_topics`` (current set), ``active_topics_history`` (every change) and
``rejected_records``. The console script is ``connect-state-active-topics`` (jobs/active_topics.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from connect_state.errors import RecordFormatError
from connect_state.faults import FaultPoint, fault_point
from connect_state.folds.active_topics import (
    REMOVED,
    TopicChange,
    TopicRecord,
    fold_connector_topics,
    state_from_json,
    state_to_json,
)
from connect_state.formats.status import TopicStatus, TopicStatusKey, parse_status_record
from connect_state.settings import Settings
from connect_state.spark.delta_io import delta_transaction
from connect_state.spark.foldjob import (
    RECORD_COLUMNS_DDL,
    FoldJob,
    FoldWriter,
    RecordKind,
    classify_records,
    fold_reconciler,
    pandas_frame,
    passed_through,
    rejected,
    start_fold_query,
)
from connect_state.spark.kafka_source import read_internal_topic
from connect_state.spark.reconcile import Reconciler
from connect_state.tables import ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY

JOB_NAME = "active_topics"

# One row per status-topic record that matters here: a topic status (or its tombstone), or a rejected record.
PARSED_SCHEMA = (
    "record_kind STRING, connector STRING, topic STRING, task INT, discover_timestamp BIGINT, " + RECORD_COLUMNS_DDL
)
# The fold's output: changes of active-topic sets, and rejected records passed through.
OUTPUT_SCHEMA = (
    "record_kind STRING, connector STRING, topic STRING, change STRING, seq INT, task INT, "
    "discover_timestamp BIGINT, " + RECORD_COLUMNS_DDL
)
STATE_SCHEMA = "topics_json STRING"


def classify(key: bytes | None, value: bytes | None, kafka: dict) -> list[dict]:
    """One status-topic record: a topic-status row, a rejected row, or nothing for records of other kinds."""
    try:
        record = parse_status_record(key, value)
    except RecordFormatError as err:
        return [rejected(key, value, err.reason, kafka)]
    if not isinstance(record.key, TopicStatusKey):
        return []
    status = record.value if isinstance(record.value, TopicStatus) else None
    return [
        {
            "record_kind": RecordKind.TOPIC,
            "connector": record.key.connector,
            "topic": record.key.topic,
            "task": status.task if status else None,
            "discover_timestamp": status.discover_timestamp if status else None,
            **kafka,
        }
    ]


def _change_row(change: TopicChange, seq: int) -> dict:
    return {
        "record_kind": RecordKind.CHANGE,
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


def _topic_record(row: Any) -> TopicRecord:
    """A fold record from a row of ``itertuples`` (attribute access by column name)."""
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
    if record_kind == RecordKind.REJECTED:
        yield passed_through(batch, OUTPUT_SCHEMA)
        return
    current = state_from_json(state.get[0]) if state.exists else {}
    records = [_topic_record(row) for row in batch.itertuples(index=False)]
    new_state, changes = fold_connector_topics(current, records)
    state.update((state_to_json(new_state),))
    yield pandas_frame((_change_row(c, i) for i, c in enumerate(changes)), OUTPUT_SCHEMA)


def fold_stream(kafka_rows: DataFrame) -> DataFrame:
    """Kafka source rows → the fold's output rows (changes and rejected records)."""
    parsed = classify_records(kafka_rows, classify, PARSED_SCHEMA)
    return parsed.groupBy("record_kind", "connector").applyInPandasWithState(
        fold_group, OUTPUT_SCHEMA, STATE_SCHEMA, "update", GroupStateTimeout.NoTimeout
    )


class ActiveTopicsWriter(FoldWriter):
    """``foreachBatch`` sink: the changes appended to the history and merged into the current sets, once per batch."""

    job_name = JOB_NAME

    def write(self, changes: DataFrame, batch_id: int) -> str:
        n_changes = changes.count()
        if n_changes:
            self._write_history(changes, batch_id)
            fault_point(FaultPoint.AFTER_HISTORY_WRITE)
            self._merge_current(changes, batch_id)
        return f"{n_changes} active-topic changes"

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
        self.insert_history(rows, ACTIVE_TOPICS_HISTORY, batch_id)

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
        values: dict[str, str | Column] = {name: f"s.{name}" for name in ACTIVE_TOPICS.column_names}
        table = DeltaTable.forPath(changes.sparkSession, self.path(ACTIVE_TOPICS))
        with delta_transaction(changes.sparkSession, self.app_id(ACTIVE_TOPICS), batch_id):
            (
                table.alias("t")
                .merge(latest.alias("s"), "t.connector = s.connector AND t.topic = s.topic")
                .whenMatchedDelete(f"s.change = '{REMOVED}'")
                .whenMatchedUpdate(set=values)
                .whenNotMatchedInsert(condition=f"s.change != '{REMOVED}'", values=values)
                .execute()
            )


def start(
    spark: SparkSession,
    settings: Settings,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
) -> StreamingQuery:
    """Create the tables if needed and start the query (it runs until stopped, or until caught up)."""
    rows = read_internal_topic(spark, settings, settings.status_storage_topic, max_offsets_per_trigger)
    writer = ActiveTopicsWriter(settings.delta_root, settings.checkpoint_path(JOB_NAME))
    return start_fold_query(
        spark,
        settings,
        JOB_NAME,
        fold_stream(rows),
        writer,
        tables=(ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY),
        current_tables=(ACTIVE_TOPICS,),
        available_now=available_now,
        reconciler=reconciler(settings),
    )


def reconciler(settings: Settings) -> Reconciler:
    """``active_topics`` rows whose (connector, topic) has no record left in the status topic are ghosts."""
    return fold_reconciler(
        settings,
        ACTIVE_TOPICS,
        lambda _spark: [settings.status_storage_topic],
        classify,
        PARSED_SCHEMA,
        [RecordKind.TOPIC],
        ["connector", "topic"],
    )


JOB = FoldJob(JOB_NAME, start)
