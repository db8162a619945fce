"""A real Delta commit conflict between two writers of one table is retried by
:func:`connect_state.spark.delta_io.retry_on_conflict` (delta-spark's typed exception, converted from the JVM); an
unrelated error is raised at once."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.errors import PythonException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from connect_state.spark import delta_io

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
