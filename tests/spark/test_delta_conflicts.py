"""A real Delta commit conflict between two writers of one table is retried by
:func:`connect_state.spark.delta_io.retry_on_conflict` (delta-spark's typed exception, converted from the JVM); an
unrelated error is raised at once. Two clusters' writers of a shared table, each narrowed to its partition, do not
conflict at all."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake
from pyspark.errors import PythonException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from connect_state.spark import delta_io
from connect_state.tables.cluster_scope import CLUSTER_COLUMN, ClusterScope, shared_schema
from connect_state.tables.merge_spec import MergeSpec, matched_update, not_matched_insert, source_values
from connect_state.tables.schemas import TableSpec
from connect_state.tables.small_writes import run_merge

pytestmark = pytest.mark.spark


def table_with_two_rows(tmp_path: Path) -> str:
    path = str(tmp_path / "table")
    write_deltalake(path, pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}))
    return path


def first_time(done: Path) -> bool:
    """True at the first call for ``done`` in any process (a Python worker evaluates a source more than once)."""
    try:
        os.close(os.open(done, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def source_that_commits_first(spark: SparkSession, path: str, done: Path) -> DataFrame:
    """One new row, whose evaluation (inside the MERGE's transaction, in a Python worker) first has another writer
    (delta-rs) delete row 2 of the table, once: the MERGE then loses its commit to that writer's."""

    @F.udf("bigint")
    def after_a_concurrent_commit(value: int) -> int:
        if first_time(done):
            DeltaTable(path).delete("id = 2")
        return value

    return spark.createDataFrame([(3, "c")], "id BIGINT, name STRING").withColumn("id", after_a_concurrent_commit("id"))


class Recorded:
    """``action`` counting its calls and keeping what each raised."""

    def __init__(self, action) -> None:
        self.action = action
        self.errors: list[Exception] = []
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        try:
            self.action()
        except Exception as err:
            self.errors.append(err)
            raise


def test_a_write_that_lost_to_a_concurrent_commit_is_retried(spark: SparkSession, tmp_path: Path) -> None:
    path = table_with_two_rows(tmp_path)
    source = source_that_commits_first(spark, path, tmp_path / "committed")
    write = Recorded(lambda: delta_io.insert_new_once(source, path, ("id",), "conflict-test", 1))

    delta_io.retry_on_conflict(write, "table")

    assert write.calls == 2 and len(write.errors) == 1
    assert isinstance(write.errors[0], delta_io.CONFLICTS), repr(write.errors[0])
    assert sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "a"},
        {"id": 3, "name": "c"},
    ]
    assert DeltaTable(path).transaction_version("conflict-test") == 1


def test_an_unrelated_error_is_not_retried(spark: SparkSession, tmp_path: Path) -> None:
    path = table_with_two_rows(tmp_path)

    @F.udf("bigint")
    def broken(value: int) -> int:
        raise ValueError("not a conflict")

    source = spark.createDataFrame([(3, "c")], "id BIGINT, name STRING").withColumn("id", broken("id"))
    write = Recorded(lambda: delta_io.insert_new_once(source, path, ("id",), "conflict-test", 1))

    with pytest.raises(PythonException, match="not a conflict"):
        delta_io.retry_on_conflict(write, "table")

    assert write.calls == 1
    assert DeltaTable(path).version() == 0


# Issue 37's shared layout: two clusters' writers of one table partitioned by cluster
# (connect_state.tables.cluster_scope). delta-spark reads a MERGE's partitions from the literal predicates of its
# condition only, so without them it takes another partition's commit for a conflict.

SHARED = TableSpec("connectors", pa.schema([("name", pa.string()), ("target_state", pa.string())]), ("name",), "test")
CONNECTORS_MERGE = MergeSpec(
    "t.name = s.name",
    (matched_update(source_values(SHARED.column_names)), not_matched_insert(source_values(SHARED.column_names))),
)
BILLING, ORDERS = ClusterScope("billing"), ClusterScope("orders")


def shared_table(tmp_path: Path) -> str:
    path = str(tmp_path / "shared")
    rows = [{"cluster": "billing", "name": "a", "target_state": "STARTED"}]
    write_deltalake(path, pa.Table.from_pylist(rows, schema=shared_schema(SHARED)), partition_by=[CLUSTER_COLUMN])
    return path


def billing_batch_after_an_orders_commit(spark: SparkSession, path: str, done: Path) -> DataFrame:
    """Billing's batch, whose evaluation inside Spark's MERGE first has the orders cluster's writer (delta-rs, another
    process) commit its own MERGE of a connector of the same name into the table, once."""

    @F.udf("string")
    def after_orders_committed(name: str) -> str:
        if first_time(done):
            orders_rows = pa.Table.from_pylist([{"name": "a", "target_state": "STOPPED"}], schema=SHARED.schema)
            run_merge(DeltaTable(path), orders_rows, ORDERS.merge(CONNECTORS_MERGE), CommitProperties())
        return name

    rows = spark.createDataFrame([("a", "PAUSED")], "name STRING, target_state STRING")
    return rows.withColumn("name", after_orders_committed("name"))


def test_a_spark_merge_narrowed_to_its_cluster_commits_over_another_clusters_commit(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = shared_table(tmp_path)
    source = billing_batch_after_an_orders_commit(spark, path, tmp_path / "committed")

    delta_io.merge_once(source, path, BILLING.merge(CONNECTORS_MERGE), "billing/connector-states", 1)

    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert sorted((r["cluster"], r["name"], r["target_state"]) for r in rows) == [
        ("billing", "a", "PAUSED"),
        ("orders", "a", "STOPPED"),
    ]
    assert DeltaTable(path).version() == 2  # the orders commit, then billing's: no retry in between


def test_without_the_partition_literal_the_spark_merge_loses_to_the_other_clusters_commit(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = shared_table(tmp_path)
    source = billing_batch_after_an_orders_commit(spark, path, tmp_path / "committed")
    not_narrowed = MergeSpec(CONNECTORS_MERGE.condition, BILLING.merge(CONNECTORS_MERGE).clauses)

    with pytest.raises(delta_io.CONFLICTS):
        delta_io.merge_once(source, path, not_narrowed, "billing/connector-states", 1)
