"""A catch-up's first batch into a current table the query created or emptied is an append of the rows the MERGE
would insert (:func:`connect_state.spark.delta_io.inserted_rows`, :meth:`connect_state.spark.foldjob.FoldWriter.
merge_current`): Delta's own MERGE into an empty table is the oracle, for every job's MERGE and every kind of row its
batches carry (inserts, and deletes or flag updates that find no row)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BooleanType, StringType, StructField, StructType

from connect_state.core.storage import Location
from connect_state.folds import active_topics as active_fold
from connect_state.folds import sink_offsets as sink_fold
from connect_state.folds import source_offsets as source_fold
from connect_state.spark import active_topics, connector_states, heartbeats, sink_offsets, source_offsets
from connect_state.spark.delta_io import append_once, ensure_table, inserted_rows, merge_once, schema_of
from connect_state.tables.merge_spec import MergeSpec, not_matched_insert
from connect_state.tables.schemas import (
    ACTIVE_TOPICS,
    CONNECTORS,
    SINK_OFFSETS,
    SOURCE_OFFSETS,
    SOURCE_PARTITION_ACTIVITY,
    TableSpec,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def value_of(field: pa.Field, i: int) -> object:
    """A value of ``field``'s type that differs from row to row (so that every row has its own key)."""
    if pa.types.is_string(field.type):
        return f"{field.name}-{i}"
    if pa.types.is_integer(field.type):
        return i
    if pa.types.is_boolean(field.type):
        return i % 2 == 0
    if pa.types.is_timestamp(field.type):
        return datetime(2026, 11, 25, 0, 0, i, tzinfo=UTC)
    if pa.types.is_binary(field.type):
        return f"{field.name}-{i}".encode()
    if pa.types.is_list(field.type):
        return None
    raise TypeError(f"no test value for {field}")


def batch(spark: SparkSession, spec: TableSpec, flag: tuple[str, object], flags: list[object]) -> DataFrame:
    """One source row per value of ``flags``, in the table's columns plus the MERGE's flag column ``flag`` (its name
    and Spark type)."""
    name, flag_type = flag
    rows = [(*(value_of(field, i) for field in spec.schema), value) for i, value in enumerate(flags)]
    return spark.createDataFrame(rows, StructType([*schema_of(spec).fields, StructField(name, flag_type)]))


CASES = {
    "active_topics": (ACTIVE_TOPICS, active_topics.CURRENT_MERGE, ("change", StringType()),
                      ["added", active_fold.REMOVED, "added"], 2),
    "source_offsets": (SOURCE_OFFSETS, source_offsets.CURRENT_MERGE, ("op", StringType()),
                       [source_fold.UPSERT, source_fold.DELETE, source_fold.LISTED, source_fold.UPSERT], 2),
    "sink_offsets": (SINK_OFFSETS, sink_offsets.CURRENT_MERGE, ("op", StringType()),
                     [sink_fold.UPSERT, sink_fold.DELETE, sink_fold.UPSERT], 2),
    "connectors": (CONNECTORS, connector_states.CURRENT_MERGE, ("unused", StringType()), ["x", None], 2),
    "source_partition_activity": (SOURCE_PARTITION_ACTIVITY, heartbeats.ACTIVITY_MERGE, ("removed", BooleanType()),
                                  [False, True, None, False], 2),
    # Two insert clauses: a row goes through the first whose predicate holds; the second sets what the first does not.
    "two_inserts": (SINK_OFFSETS, MergeSpec("t.group_id = s.group_id", (
        not_matched_insert({"group_id": "s.group_id", "offset": "s.offset"}, "s.op = 'a'"),
        not_matched_insert({"group_id": "s.group_id", "topic": "'second'"}),
    )), ("op", StringType()), ["a", "b", None], 3),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_an_append_of_the_inserted_rows_leaves_an_empty_table_as_the_merge_does(
    spark: SparkSession, tmp_path: Path, case: str
) -> None:
    spec, merge, flag, flags, inserted = CASES[case]
    source = batch(spark, spec, flag, flags)
    tables = []
    for engine in ("merge", "append"):
        path = ensure_table(spark, Location.parse(str(tmp_path / engine)), spec)
        if engine == "merge":
            merge_once(source, path, merge, "app", 0)
        else:
            append_once(inserted_rows(source, merge, spec), path, "app", 0)
        tables.append(sorted(tuple(r) for r in spark.read.format("delta").load(path).collect()))
    merged, appended = tables
    assert appended == merged
    assert len(merged) == inserted
