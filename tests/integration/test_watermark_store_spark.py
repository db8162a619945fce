"""A ``watermarks`` table an earlier version wrote with Spark (a write tagged with the query's transaction id) is
carried on by :class:`~connect_state.spark.watermarks.DeltaWatermarkStore` (deltalake): the batches Spark recorded
are not recorded again, the next one is, and Spark reads the result. Where deltalake cannot commit, Spark writes the
same rows (:class:`~connect_state.spark.watermarks.SparkWatermarkStore`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from connect_state.spark.delta_io import delta_transaction, ensure_table, schema_of
from connect_state.spark.watermarks import DeltaWatermarkStore, SparkWatermarkStore
from connect_state.storage import Location
from connect_state.tables import WATERMARKS

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
