"""connect_state/tables/reader.py with a scope: one cluster's partition of a table shared by the fleet (issue 37,
``docs/shared-tables.md``). What the reader answers is what a full read of the table, filtered to the cluster and
without the ``cluster`` column, gives; another cluster's commits leave its rows, and what is kept with them, alone."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

from connect_state.core.errors import ConfigError
from connect_state.tables.cluster_scope import CLUSTER_COLUMN, ClusterScope, shared_schema
from connect_state.tables.history_reads import table_rows
from connect_state.tables.merge_spec import MergeSpec, matched_update, not_matched_insert, source_values
from connect_state.tables.reader import TableReader, filter_expression
from connect_state.tables.schemas import ACTIVE_TOPICS
from connect_state.tables.small_writes import run_merge

BILLING, ORDERS = ClusterScope("billing"), ClusterScope("orders")
#: The shape of the active-topics fold's MERGE (``connect_state.spark.active_topics.CURRENT_MERGE``).
MERGE = MergeSpec(
    "t.connector = s.connector AND t.topic = s.topic",
    (
        matched_update(source_values(ACTIVE_TOPICS.column_names)),
        not_matched_insert(source_values(ACTIVE_TOPICS.column_names)),
    ),
)


def rows_of(pairs: list[tuple[str, str]], task: int) -> pa.Table:
    rows = [{"connector": c, "topic": t, "task": task, "discover_timestamp": task} for c, t in pairs]
    return pa.Table.from_pylist(rows, schema=ACTIVE_TOPICS.schema)


def shared_table(root: Path) -> Path:
    path = root / ACTIVE_TOPICS.name
    empty = shared_schema(ACTIVE_TOPICS).empty_table()
    write_deltalake(str(path), empty, partition_by=[CLUSTER_COLUMN])
    return path


def merge(path: Path, scope: ClusterScope, pairs: list[tuple[str, str]], step: int) -> None:
    run_merge(DeltaTable(str(path)), rows_of(pairs, step), scope.merge(MERGE), CommitProperties())


def full_read(path: Path, scope: ClusterScope, filters: list | None = None) -> list[dict]:
    """The oracle: the table's latest version read whole by deltalake, the cluster's rows, without the column."""
    data = DeltaTable(str(path)).to_pyarrow_table().filter(filter_expression([(CLUSTER_COLUMN, "=", scope.cluster_id)]))
    data = data.select(ACTIVE_TOPICS.column_names)
    if filters:
        data = data.filter(filter_expression(filters))
    return sorted(data.to_pylist(), key=repr)


def answer(reader: TableReader, filters: list | None = None) -> list[dict]:
    return sorted(reader.rows(ACTIVE_TOPICS, filters), key=repr)


def test_a_scoped_reader_answers_its_clusters_rows_only(tmp_path: Path) -> None:
    path = shared_table(tmp_path)
    merge(path, BILLING, [("sink", "invoices"), ("source", "payments")], 1)
    merge(path, ORDERS, [("sink", "orders")], 2)

    billing = TableReader(tmp_path, scope=BILLING)

    assert answer(billing) == full_read(path, BILLING)
    assert {row["topic"] for row in answer(billing, [("connector", "=", "sink")])} == {"invoices"}
    assert answer(TableReader(tmp_path, scope=ORDERS)) == full_read(path, ORDERS)
    assert list(billing.rows(ACTIVE_TOPICS)[0]) == ACTIVE_TOPICS.column_names  # no cluster column


def test_another_clusters_commit_keeps_the_rows_and_their_name(tmp_path: Path) -> None:
    path = shared_table(tmp_path)
    merge(path, BILLING, [("sink", "invoices")], 1)
    billing = TableReader(tmp_path, scope=BILLING)
    data, name = billing.snapshot(ACTIVE_TOPICS), billing.loaded_version(ACTIVE_TOPICS)
    kept = billing.rows(ACTIVE_TOPICS, [("connector", "=", "sink")])
    as_of = billing.rows_as_of(ACTIVE_TOPICS)

    merge(path, ORDERS, [("sink", "orders")], 2)

    assert billing.snapshot(ACTIVE_TOPICS) is data
    assert billing.loaded_version(ACTIVE_TOPICS) == name
    assert billing.rows(ACTIVE_TOPICS, [("connector", "=", "sink")]) == kept
    assert billing.rows_as_of(ACTIVE_TOPICS) == as_of  # what a follower folds over them is unchanged too
    late = TableReader(tmp_path, scope=BILLING)  # another process, opened after the orders commit
    late.snapshot(ACTIVE_TOPICS)
    assert late.loaded_version(ACTIVE_TOPICS) == name


def test_its_own_clusters_commit_changes_the_rows_and_their_name(tmp_path: Path) -> None:
    path = shared_table(tmp_path)
    merge(path, BILLING, [("sink", "invoices")], 1)
    billing = TableReader(tmp_path, scope=BILLING)
    data, name = billing.snapshot(ACTIVE_TOPICS), billing.loaded_version(ACTIVE_TOPICS)

    merge(path, BILLING, [("sink", "refunds")], 2)

    assert billing.snapshot(ACTIVE_TOPICS) is not data
    assert billing.loaded_version(ACTIVE_TOPICS) != name
    assert answer(billing) == full_read(path, BILLING)


def test_a_scoped_scan_reads_its_clusters_files_only(tmp_path: Path) -> None:
    """The history and audit reads (:class:`connect_state.tables.scan.DeltaFiles`): the partition's value is in no
    data file, so the files are picked by their add actions."""
    path = shared_table(tmp_path)
    merge(path, BILLING, [("sink", "invoices"), ("source", "payments")], 1)
    merge(path, ORDERS, [("sink", "orders"), ("other", "x")], 2)
    billing = TableReader(tmp_path, scope=BILLING)

    scan = billing.scan(ACTIVE_TOPICS)

    assert sorted(table_rows(scan, ACTIVE_TOPICS, []), key=repr) == full_read(path, BILLING)
    assert table_rows(scan, ACTIVE_TOPICS, [("connector", "=", "sink")]) == full_read(
        path, BILLING, [("connector", "=", "sink")]
    )
    assert scan.count([]) == 2
    assert all("cluster=billing" in name for name in scan.files_read)


def test_a_table_partitioned_by_more_than_the_cluster_is_refused(tmp_path: Path) -> None:
    """One cluster's rows would not be one partition's files: read whole, they would be every cluster's."""
    rows = BILLING.rows(rows_of([("sink", "invoices")], 1))
    write_deltalake(str(tmp_path / ACTIVE_TOPICS.name), rows, partition_by=[CLUSTER_COLUMN, "connector"])
    billing = TableReader(tmp_path, scope=BILLING)

    with pytest.raises(ConfigError, match="partitioned by cluster, connector; a table the clusters share"):
        billing.rows(ACTIVE_TOPICS)
    with pytest.raises(ConfigError, match="partitioned by cluster alone"):
        billing.scan(ACTIVE_TOPICS)


def test_a_table_that_is_not_partitioned_is_the_clusters_own(tmp_path: Path) -> None:
    """A one-cluster deployment's table, before any migration: the scope reads every row."""
    write_deltalake(str(tmp_path / ACTIVE_TOPICS.name), rows_of([("sink", "invoices")], 1))

    assert [row["topic"] for row in TableReader(tmp_path, scope=BILLING).rows(ACTIVE_TOPICS)] == ["invoices"]


pairs_st = st.lists(
    st.tuples(st.sampled_from("abc"), st.sampled_from(["t1", "t2"])), min_size=1, max_size=3, unique=True
)
op_st = st.tuples(st.sampled_from(["merge", "delete", "append"]), st.sampled_from([BILLING, ORDERS]), pairs_st)


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(op_st, min_size=1, max_size=6), asked=st.lists(st.sampled_from("abc"), max_size=3))
def test_the_rows_after_any_clusters_commits_are_a_full_reads(ops: list, asked: list[str]) -> None:
    with tempfile.TemporaryDirectory() as root:
        path = shared_table(Path(root))
        billing = TableReader(root, scope=BILLING)
        for step, (kind, scope, pairs) in enumerate(ops):
            if kind == "merge":
                merge(path, scope, pairs, step)
            elif kind == "delete":
                DeltaTable(str(path)).delete(scope.narrow(f"connector = '{pairs[0][0]}'"))
            else:
                write_deltalake(str(path), scope.rows(rows_of(pairs, step)), mode="append")
            assert answer(billing) == full_read(path, BILLING)
            for connector in asked:
                filters = [("connector", "=", connector)]
                assert answer(billing, filters) == full_read(path, BILLING, filters)
