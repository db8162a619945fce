"""Spark and ``deltalake`` writing the same tables (:mod:`connect_state.tables.small_writes`) honour each other's
transactions.

A ``watermarks`` table an earlier version wrote with Spark (a write tagged with the query's transaction id) is
carried on by :class:`~connect_state.spark.watermarks.DeltaWatermarkStore` (deltalake): the batches Spark recorded
are not recorded again, the next one is, and Spark reads the result. Where deltalake cannot commit, Spark writes the
same rows (:class:`~connect_state.spark.watermarks.SparkWatermarkStore`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StringType, StructField, StructType

from connect_state.core.storage import Location
from connect_state.folds import source_offsets as source_fold
from connect_state.heartbeats.emitter import EmittedHeartbeat, HeartbeatOutcome
from connect_state.spark import heartbeats, source_offsets
from connect_state.spark.delta_io import (
    delta_transaction,
    ensure_table,
    insert_new_once,
    merge_once,
    merge_rows,
    schema_of,
)
from connect_state.spark.watermarks import DeltaWatermarkStore, SparkWatermarkStore
from connect_state.tables import small_writes
from connect_state.tables.schemas import (
    ACTIVE_TOPICS_HISTORY,
    HEARTBEATS,
    SOURCE_OFFSETS,
    SOURCE_PARTITION_ACTIVITY,
    WATERMARKS,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]

APP_ID = "connect-state:active_topics:q1:watermarks"


def test_a_table_spark_wrote_is_carried_on_once_per_batch(spark: SparkSession, tmp_path: Path) -> None:
    root = Location.parse(str(tmp_path / "delta"))
    path = ensure_table(spark, root, WATERMARKS)
    earlier = spark.createDataFrame(
        [("active_topics", "s", 0, 10, 4), ("sink_offsets", "o", 0, 3, 9)], StructType(schema_of(WATERMARKS).fields[:5])
    ).withColumn("committed_at", F.current_timestamp())
    with delta_transaction(spark, APP_ID, 4):  # as the Spark MERGE of earlier versions tagged batch 4
        earlier.write.format("delta").mode("append").save(path)

    store = DeltaWatermarkStore(root)
    assert not store.record("active_topics", {("s", 0): 99}, 4, APP_ID)  # batch 4 replayed: Spark recorded it
    assert store.record("active_topics", {("s", 0): 12, ("s", 1): 1}, 5, APP_ID)

    got = spark.read.format("delta").load(path).orderBy("query", "topic", "partition")
    assert [tuple(r)[:5] for r in got.collect()] == [
        ("active_topics", "s", 0, 12, 5),
        ("active_topics", "s", 1, 1, 5),
        ("sink_offsets", "o", 0, 3, 9),
    ]
    assert got.where(F.col("committed_at").isNull()).count() == 0


def test_where_deltalake_cannot_commit_spark_writes_the_same_rows_once_per_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = Location.parse(str(tmp_path / "delta"))
    store = SparkWatermarkStore(spark, root)
    store.record("active_topics", {("s", 0): 10, ("s", 1): 4}, 0, APP_ID)
    store.record("sink_offsets", {("o", 0): 3}, 2, "connect-state:sink_offsets:q1:watermarks")
    store.record("active_topics", {("s", 0): 12}, 1, APP_ID)  # ("s", 1) is no longer read
    store.record("active_topics", {("s", 0): 99}, 1, APP_ID)  # batch 1 replayed: Delta skips it

    def rows() -> list[tuple]:
        table = spark.read.format("delta").load(store.path).orderBy("query", "topic", "partition")
        return [tuple(r)[:5] for r in table.collect()]

    assert rows() == [("active_topics", "s", 0, 12, 1), ("sink_offsets", "o", 0, 3, 2)]
    store.forget("active_topics")
    assert rows() == [("sink_offsets", "o", 0, 3, 2)]


def test_a_history_batch_deltalake_appended_is_skipped_by_sparks_insert_of_the_same_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = Location.parse(str(tmp_path / "delta"))
    path = ensure_table(spark, root, ACTIVE_TOPICS_HISTORY)
    app_id = "connect-state:active_topics:q1:active_topics_history"
    batch = spark.createDataFrame(
        [("c1", "t1", "added", 0, 1_000, None, 0, 41, None), ("c1", "t2", "added", 0, 1_001, None, 0, 42, None)],
        schema_of(ACTIVE_TOPICS_HISTORY),
    ).withColumn("changed_at", F.current_timestamp())
    assert small_writes.append_once(small_writes.as_table_rows(batch.toArrow(), ACTIVE_TOPICS_HISTORY), path, app_id, 3)
    assert not small_writes.append_once(
        small_writes.as_table_rows(batch.toArrow(), ACTIVE_TOPICS_HISTORY), path, app_id, 3
    )  # the same batch again: its transaction is in the table
    # A restarted run's version 3 (rows it would insert: the MERGE alone would add them): Delta skips it.
    unseen = batch.withColumn("kafka_offset", F.col("kafka_offset") + 100)
    insert_new_once(unseen, path, ACTIVE_TOPICS_HISTORY.key, app_id, 3)
    got = spark.read.format("delta").load(path)
    assert sorted((r.topic, r.kafka_offset) for r in got.collect()) == [("t1", 41), ("t2", 42)]
    assert got.where(F.col("changed_at").isNull()).count() == 0


def source_offsets_row(key: str, offset: int, listed: bool = True, op: str | None = None) -> tuple:
    row = ("c1", "offsets", f'{{"p":"{key}"}}', f'["c1",{{"p":"{key}"}}]'.encode(), f'{{"o":{offset}}}',
           f'{{"o":{offset}}}'.encode(), listed, 0, offset, datetime(2026, 11, 24, tzinfo=UTC),
           datetime(2026, 11, 24, 0, 0, offset, tzinfo=UTC))  # fmt: skip
    return row if op is None else (*row, op)


def test_a_small_batchs_merge_through_deltalake_equals_sparks_merge_of_the_same_spec(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The source offsets MERGE (delete, flag-only update, update, insert, and rows that match no clause), run by Spark
    into one copy of a table and by deltalake into another: the same rows."""
    table_schema = schema_of(SOURCE_OFFSETS)
    before = [source_offsets_row(k, i, listed=k != "d") for i, k in enumerate("abcd")]
    batch = [
        source_offsets_row("a", 10, op=source_fold.DELETE),
        source_offsets_row("b", 11, listed=False, op=source_fold.LISTED),
        source_offsets_row("c", 12, op=source_fold.UPSERT),
        source_offsets_row("e", 13, op=source_fold.UPSERT),
        source_offsets_row("f", 14, op=source_fold.DELETE),  # no row: nothing to delete
        source_offsets_row("g", 15, op=source_fold.LISTED),  # no row: not inserted
    ]
    source = spark.createDataFrame(batch, StructType([*table_schema.fields, StructField("op", StringType())]))
    results = []
    for engine in ("spark", "deltalake"):
        path = ensure_table(spark, Location.parse(str(tmp_path / engine)), SOURCE_OFFSETS)
        spark.createDataFrame(before, table_schema).write.format("delta").mode("append").save(path)
        if engine == "spark":
            merge_once(source, path, source_offsets.CURRENT_MERGE, "app", 0)
        else:
            rows = small_writes.merge_source_rows(source.toArrow(), SOURCE_OFFSETS)
            assert small_writes.merge_once(rows, path, source_offsets.CURRENT_MERGE, "app", 0)
        results.append(sorted(tuple(r) for r in spark.read.format("delta").load(path).collect()))
    assert results[0] == results[1]
    assert [(r[2], r[6], r[8]) for r in results[1]] == [('{"p":"b"}', False, 1), ('{"p":"c"}', True, 12),
                                                        ('{"p":"d"}', False, 3), ('{"p":"e"}', True, 13)]  # fmt: skip


def activity_row(key: str, offset: int, heartbeat_s: int | None = None) -> tuple:
    at = datetime(2026, 11, 25, 0, 0, offset, tzinfo=UTC)
    heartbeat = None if heartbeat_s is None else datetime(2026, 11, 25, 0, 1, heartbeat_s, tzinfo=UTC)
    return ("src", f'{{"f":"{key}"}}', f'["src",{{"f":"{key}"}}]'.encode(), f'{{"p":{offset}}}', "Cls", "{}", at,
            heartbeat, 1000, 30000, "hb", True, None, 0, offset, at)  # fmt: skip


def emitted(key: str, at_ms: int) -> EmittedHeartbeat:
    return EmittedHeartbeat("src", f'{{"f":"{key}"}}', f'["src",{{"f":"{key}"}}]'.encode(), "hb", None, None, None,
                            None, None, None, HeartbeatOutcome.NO_RECORDS, None, 1000, 30000, at_ms, at_ms)  # fmt: skip


def test_the_heartbeats_merges_through_deltalake_equal_sparks(spark: SparkSession, tmp_path: Path) -> None:
    """The heartbeats job's two MERGEs into ``source_partition_activity``, run by Spark into one copy of a table and
    by deltalake into another: a batch's activity (a removed partition's row deleted, one updated keeping its
    ``last_heartbeat_at``, one inserted, a removal of a partition without a row ignored), then the heartbeats' marks
    (a partition removed meanwhile has no row to set). The same rows."""
    table_schema = schema_of(SOURCE_PARTITION_ACTIVITY)
    before = [activity_row("a", 1), activity_row("b", 2, heartbeat_s=5), activity_row("c", 3)]
    batch = [
        (*activity_row("a", 10), True),
        (*activity_row("b", 11), False),
        (*activity_row("d", 12), False),
        (*activity_row("e", 13), True),
    ]
    source = spark.createDataFrame(batch, StructType([*table_schema.fields, StructField("removed", BooleanType())]))
    marks = heartbeats.heartbeat_marks([emitted("c", 1_764_028_860_123), emitted("z", 1_764_028_860_456)])
    results, heartbeat_times = [], []
    for engine in ("spark", "deltalake"):
        path = ensure_table(spark, Location.parse(str(tmp_path / engine)), SOURCE_PARTITION_ACTIVITY)
        spark.createDataFrame(before, table_schema).write.format("delta").mode("append").save(path)
        if engine == "spark":
            merge_once(source, path, heartbeats.ACTIVITY_MERGE, "app", 0)
            merge_rows(spark.createDataFrame(marks), path, heartbeats.HEARTBEAT_MARKS_MERGE)
        else:
            rows = small_writes.merge_source_rows(source.toArrow(), SOURCE_PARTITION_ACTIVITY)
            assert small_writes.merge_once(rows, path, heartbeats.ACTIVITY_MERGE, "app", 0)
            small_writes.merge_rows(marks, path, heartbeats.HEARTBEAT_MARKS_MERGE)
        table = spark.read.format("delta").load(path)
        results.append(sorted(tuple(r) for r in table.collect()))
        times = table.select("partition", "offset", F.unix_millis("last_heartbeat_at")).orderBy("partition")
        heartbeat_times.append([tuple(r) for r in times.collect()])
    assert results[0] == results[1]
    assert (
        heartbeat_times[0]
        == heartbeat_times[1]
        == [
            ('{"f":"b"}', '{"p":11}', int(datetime(2026, 11, 25, 0, 1, 5, tzinfo=UTC).timestamp() * 1000)),
            ('{"f":"c"}', '{"p":3}', 1_764_028_860_123),
            ('{"f":"d"}', '{"p":12}', None),
        ]
    )


def test_heartbeat_rows_appended_by_either_engine_read_the_same(spark: SparkSession, tmp_path: Path) -> None:
    """The heartbeats sink's rows (:func:`~connect_state.spark.heartbeats.heartbeat_rows`), appended by Spark (where
    deltalake cannot commit) and by deltalake: the same rows, the times to the millisecond."""
    rows = heartbeats.heartbeat_rows([emitted("a", 1_764_028_860_123), emitted("b", 1_764_028_861_001)])
    results = []
    for engine in ("spark", "deltalake"):
        path = ensure_table(spark, Location.parse(str(tmp_path / engine)), HEARTBEATS)
        if engine == "spark":
            spark.createDataFrame(rows).write.format("delta").mode("append").save(path)
        else:
            small_writes.append(rows, path)
        table = spark.read.format("delta").load(path)
        results.append(sorted(tuple(r) for r in table.select("*", F.unix_millis("emitted_at")).collect()))
    assert results[0] == results[1]
    assert [(r[1], r[-1]) for r in results[1]] == [('{"f":"a"}', 1_764_028_860_123), ('{"f":"b"}', 1_764_028_861_001)]
