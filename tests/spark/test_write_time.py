"""Write-time columns: a typed null in the plan, stamped by the write (``connect_state.spark.write_time``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from connect_state.spark.write_time import (
    WRITE_TIME,
    collect_stamped,
    stamp_table,
    stamped,
    write_time,
    write_time_columns,
)

SLACK = timedelta(milliseconds=1)  # Spark's clock is read in milliseconds


def frame(spark: SparkSession, stamp: Column) -> DataFrame:
    return spark.range(3).select(F.col("id"), F.col("id").cast("string").alias("name"), stamp)


def compilations(spark: SparkSession) -> int:
    """Java classes Spark has generated and compiled (Janino) in this JVM so far."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def test_collect_stamped_sets_every_row_to_the_time_of_the_write(spark):
    rows = frame(spark, write_time("recorded_at"))
    assert write_time_columns(rows) == ["recorded_at"]
    before = datetime.now(UTC)
    table = collect_stamped(rows)
    after = datetime.now(UTC)

    times = table.column("recorded_at").to_pylist()
    assert len(set(times)) == 1 and before <= times[0] <= after
    assert pa.types.is_timestamp(table.schema.field("recorded_at").type)
    assert not table.schema.field("recorded_at").metadata  # the marker does not reach the table
    assert table.column("name").to_pylist() == ["0", "1", "2"]


def test_stamped_sets_the_column_in_a_spark_write(spark):
    before = datetime.now(UTC)
    rows = stamped(frame(spark, write_time("updated_at"))).collect()
    after = datetime.now(UTC)

    times = {row.updated_at.replace(tzinfo=UTC) for row in rows}  # the session's time zone is UTC
    assert len(times) == 1 and before - SLACK <= times.pop() <= after + SLACK
    assert write_time_columns(stamped(frame(spark, write_time("updated_at")))) == []


def test_the_marker_survives_filters_and_selects_by_name(spark):
    rows = frame(spark, write_time("changed_at")).filter(F.col("id") > 0).select("changed_at", "id")
    assert write_time_columns(rows) == ["changed_at"]
    assert rows.schema["changed_at"].metadata == {WRITE_TIME: True}


@pytest.mark.parametrize(
    ("stamp", "new_code"),
    [
        pytest.param(lambda: write_time("at"), False, id="write_time: the same code every batch"),
        pytest.param(lambda: F.current_timestamp().alias("at"), True, id="current_timestamp: new code every batch"),
    ],
)
def test_a_batch_plan_with_write_time_reuses_its_generated_code(spark, stamp, new_code):
    """What the module is for: the second and later "batches" of the same writer plan compile no new Java code; with
    ``current_timestamp()`` (the time inlined as a literal) each one does (this case shows the check can fail)."""
    base = spark.range(5).withColumn("name", F.col("id").cast("string")).persist()
    try:
        base.count()
        collect_stamped(base.filter(F.col("id") > 1).select("id", "name", stamp()))  # the first batch compiles
        before = compilations(spark)
        for _ in range(3):
            collect_stamped(base.filter(F.col("id") > 1).select("id", "name", stamp()))
        assert (compilations(spark) > before) is new_code
    finally:
        base.unpersist()


def test_stamping_a_column_the_rows_lack_is_an_error():
    table = pa.table({"at": pa.array([None], pa.timestamp("us", tz="UTC")), "x": [1]})
    assert stamp_table(table, ["at"], datetime(2026, 1, 1, tzinfo=UTC)).column("at").to_pylist() == [
        datetime(2026, 1, 1, tzinfo=UTC)
    ]
    with pytest.raises(KeyError):
        stamp_table(table, ["missing"], datetime.now(UTC))
