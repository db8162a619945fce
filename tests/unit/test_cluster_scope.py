"""A shared table's writes narrowed to one cluster's partition (:mod:`connect_state.tables.cluster_scope`), run by
delta-rs through the jobs' own MERGE runner (:func:`connect_state.tables.small_writes.run_merge`): two clusters'
connectors of one name stay apart, and two clusters' writers committing at once do not conflict."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from connect_state.core.errors import ConfigError
from connect_state.tables.cluster_scope import CLUSTER_COLUMN, ClusterScope, shared_schema
from connect_state.tables.merge_spec import MergeSpec, matched_update, not_matched_insert, source_values
from connect_state.tables.schemas import CONNECTORS, TableSpec
from connect_state.tables.small_writes import run_merge

SPEC = TableSpec("connectors", pa.schema([("name", pa.string()), ("target_state", pa.string())]), ("name",), "test")
#: The shape of the connectors fold's MERGE (``connect_state.spark.connector_states.CURRENT_MERGE``).
MERGE = MergeSpec(
    "t.name = s.name",
    (matched_update(source_values(SPEC.column_names)), not_matched_insert(source_values(SPEC.column_names))),
)
BILLING, ORDERS = ClusterScope("billing"), ClusterScope("orders-eu.2")


def shared_table(tmp_path: Path, rows: list[dict[str, str]]) -> str:
    path = str(tmp_path / SPEC.name)
    write_deltalake(path, pa.Table.from_pylist(rows, schema=shared_schema(SPEC)), partition_by=[CLUSTER_COLUMN])
    return path


def batch(*rows: tuple[str, str]) -> pa.Table:
    return pa.Table.from_pylist([{"name": n, "target_state": s} for n, s in rows], schema=SPEC.schema)


def rows_of(path: str) -> list[tuple[str, str, str]]:
    table = DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted((r[CLUSTER_COLUMN], r["name"], r["target_state"]) for r in table)


def test_a_merge_reaches_only_its_clusters_connector_of_a_shared_name(tmp_path: Path) -> None:
    path = shared_table(
        tmp_path,
        [
            {"cluster": "billing", "name": "sink", "target_state": "STARTED"},
            {"cluster": "orders-eu.2", "name": "sink", "target_state": "STARTED"},
        ],
    )

    run_merge(DeltaTable(path), batch(("sink", "PAUSED"), ("new", "STOPPED")), BILLING.merge(MERGE), CommitProperties())

    assert rows_of(path) == [
        ("billing", "new", "STOPPED"),
        ("billing", "sink", "PAUSED"),
        ("orders-eu.2", "sink", "STARTED"),
    ]


def test_the_same_merge_unscoped_would_update_the_other_clusters_connector(tmp_path: Path) -> None:
    """The control: what the rule prevents (the key alone matches every cluster's row of the name)."""
    path = shared_table(
        tmp_path,
        [
            {"cluster": "billing", "name": "sink", "target_state": "STARTED"},
            {"cluster": "orders-eu.2", "name": "sink", "target_state": "STARTED"},
        ],
    )

    run_merge(DeltaTable(path), batch(("sink", "PAUSED")), MERGE, CommitProperties())

    assert rows_of(path) == [("billing", "sink", "PAUSED"), ("orders-eu.2", "sink", "PAUSED")]


def test_two_clusters_writers_committing_at_once_do_not_conflict(tmp_path: Path) -> None:
    """The orders cluster's writer commits between the billing writer's read and its commit (another driver, or
    another query of this one): the billing MERGE, narrowed to its partition, commits over it."""
    path = shared_table(tmp_path, [{"cluster": "billing", "name": "a", "target_state": "STARTED"}])
    billing_writer = DeltaTable(path)

    run_merge(DeltaTable(path), batch(("a", "STOPPED")), ORDERS.merge(MERGE), CommitProperties())
    run_merge(billing_writer, batch(("a", "PAUSED")), BILLING.merge(MERGE), CommitProperties())

    assert rows_of(path) == [("billing", "a", "PAUSED"), ("orders-eu.2", "a", "STOPPED")]
    assert DeltaTable(path).version() == 2


def test_without_the_partition_literal_the_same_writers_conflict(tmp_path: Path) -> None:
    """The control: the billing MERGE without its narrowed condition reads every partition's rows of the name."""
    path = shared_table(tmp_path, [{"cluster": "billing", "name": "a", "target_state": "STARTED"}])
    billing_writer = DeltaTable(path)
    not_narrowed = MergeSpec(MERGE.condition, BILLING.merge(MERGE).clauses)

    run_merge(DeltaTable(path), batch(("a", "STOPPED")), ORDERS.merge(MERGE), CommitProperties())
    with pytest.raises(CommitFailedError, match="concurrent"):
        run_merge(billing_writer, batch(("a", "PAUSED")), not_narrowed, CommitProperties())


def test_a_delete_narrowed_to_a_partition_keeps_the_other_clusters_rows(tmp_path: Path) -> None:
    path = shared_table(
        tmp_path,
        [
            {"cluster": "billing", "name": "gone", "target_state": "STOPPED"},
            {"cluster": "orders-eu.2", "name": "gone", "target_state": "STOPPED"},
        ],
    )

    DeltaTable(path).delete(BILLING.narrow("name = 'gone'"))

    assert rows_of(path) == [("orders-eu.2", "gone", "STOPPED")]


def test_appended_rows_carry_their_cluster(tmp_path: Path) -> None:
    path = shared_table(tmp_path, [{"cluster": "billing", "name": "a", "target_state": "STARTED"}])

    write_deltalake(path, ORDERS.rows(batch(("b", "RUNNING"))), mode="append")

    assert rows_of(path) == [("billing", "a", "STARTED"), ("orders-eu.2", "b", "RUNNING")]


def test_the_shared_schema_puts_a_non_null_cluster_first() -> None:
    schema = shared_schema(CONNECTORS)

    assert schema.names == [CLUSTER_COLUMN, *CONNECTORS.schema.names]
    assert not schema.field(CLUSTER_COLUMN).nullable


@pytest.mark.parametrize("cluster_id", ["", "a' OR '1' = '1", "-x", "a b", "x" * 129])
def test_an_id_that_is_not_plain_text_in_sql_is_refused(cluster_id: str) -> None:
    with pytest.raises(ConfigError, match="a cluster id is 1 to 128"):
        ClusterScope(cluster_id)


def test_a_clause_or_rows_that_set_the_cluster_themselves_are_refused() -> None:
    with pytest.raises(ValueError, match="sets 'cluster' itself"):
        BILLING.merge(MergeSpec("t.name = s.name", (not_matched_insert({"cluster": "s.name"}),)))
    with pytest.raises(ValueError, match="already have a 'cluster' column"):
        BILLING.rows(ORDERS.rows(batch(("a", "RUNNING"))))
