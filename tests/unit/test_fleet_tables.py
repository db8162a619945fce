"""connect_state/tables/fleet_tables.py: a fleet table's partitions list each cluster's table's data files (issue 37).

The oracle is each cluster's own table as deltalake reads it (``to_pyarrow_table``): the fleet table, read by delta-rs's
DataFusion reader (``QueryBuilder``, which follows absolute paths), answers every cluster's rows, each with its id,
after every kind of change the jobs make to their tables (appends, a MERGE's rewrite, a compaction). Spark's reading of
the same tables is ``tests/spark/test_fleet.py``'s."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from connect_state.core.errors import ConfigError
from connect_state.core.storage import Location
from connect_state.tables import small_writes
from connect_state.tables.fleet_tables import (
    CLUSTER_COLUMN,
    absolute_file,
    file_stats,
    fleet_schema,
    forget_cluster,
    partition_files,
    sync_partition,
)
from connect_state.tables.merge_spec import MergeSpec, matched_update, not_matched_insert, source_values
from connect_state.tables.schemas import ACTIVE_TOPICS, TABLE_PROPERTIES

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


def cluster_table(root: Location) -> str:
    path = str(root / ACTIVE_TOPICS.name)
    small_writes.open_or_create(path, ACTIVE_TOPICS, TABLE_PROPERTIES)
    return path


def own_rows(path: str) -> list[tuple]:
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted((row["connector"], row["topic"], row["task"]) for row in rows)


def fleet_rows(fleet: Location, where: str = "") -> list[tuple]:
    table = DeltaTable(str(fleet / ACTIVE_TOPICS.name))
    sql = f"SELECT cluster, connector, topic, task FROM t {where}"
    rows = pa.table(QueryBuilder().register("t", table).execute(sql).read_all()).to_pylist()
    return sorted((row["cluster"], row["connector"], row["topic"], row["task"]) for row in rows)


def expected(**tables: str) -> list[tuple]:
    return sorted((cluster, *row) for cluster, path in tables.items() for row in own_rows(path))


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Location, Location, Location]:
    base = tmp_path / "a root with a space"
    return (
        Location(str(base / "delta")),
        Location(str(base / "delta" / "clusters" / "billing")),
        Location(str(base / "delta" / "fleet")),
    )


def test_two_clusters_with_a_connector_of_the_same_name(roots: tuple[Location, Location, Location]) -> None:
    default, billing, fleet = roots
    own, theirs = cluster_table(default), cluster_table(billing)
    small_writes.append(rows_of([("orders", "t1"), ("shared-name", "t2")], 0), own)
    small_writes.append(rows_of([("shared-name", "t9")], 3), theirs)

    first = sync_partition(default, fleet, ACTIVE_TOPICS, "main")
    second = sync_partition(billing, fleet, ACTIVE_TOPICS, "billing")

    assert first is not None and (first.added, first.removed) == (1, 0)
    assert second is not None and (second.added, second.removed) == (1, 0)
    assert fleet_rows(fleet) == expected(main=own, billing=theirs)
    assert fleet_rows(fleet, "WHERE cluster = 'billing'") == [("billing", "shared-name", "t9", 3)]
    # Nothing changed since: nothing committed.
    version = DeltaTable(str(fleet / ACTIVE_TOPICS.name)).version()
    assert sync_partition(default, fleet, ACTIVE_TOPICS, "main") is None
    assert DeltaTable(str(fleet / ACTIVE_TOPICS.name)).version() == version


def test_a_merge_rewrite_and_a_compaction_of_a_clusters_table_follow(
    roots: tuple[Location, Location, Location],
) -> None:
    default, billing, fleet = roots
    own, theirs = cluster_table(default), cluster_table(billing)
    small_writes.append(rows_of([("a", "t1"), ("b", "t2")], 0), own)
    small_writes.append(rows_of([("a", "t1")], 5), theirs)
    sync_partition(default, fleet, ACTIVE_TOPICS, "main")
    sync_partition(billing, fleet, ACTIVE_TOPICS, "billing")

    small_writes.merge_rows(rows_of([("a", "t1")], 1), own, MERGE)  # rewrites the file that had ("a", "t1", 0)
    small_writes.append(rows_of([("c", "t3")], 2), own)
    synced = sync_partition(default, fleet, ACTIVE_TOPICS, "main")
    assert synced is not None and synced.removed == 1
    assert fleet_rows(fleet) == expected(main=own, billing=theirs)
    assert ("main", "a", "t1", 0) not in fleet_rows(fleet)

    DeltaTable(own).optimize.compact()
    synced = sync_partition(default, fleet, ACTIVE_TOPICS, "main")
    assert synced is not None and synced.added == 1 and synced.removed >= 2
    assert fleet_rows(fleet) == expected(main=own, billing=theirs)
    assert len(partition_files(DeltaTable(str(fleet / ACTIVE_TOPICS.name)), "main")) == 1


def test_the_fleet_table_lists_files_in_place_and_vacuuming_it_keeps_them(
    roots: tuple[Location, Location, Location],
) -> None:
    default, _, fleet = roots
    own = cluster_table(default)
    small_writes.append(rows_of([("a", "t1")], 0), own)
    sync_partition(default, fleet, ACTIVE_TOPICS, "main")

    fleet_table = DeltaTable(str(fleet / ACTIVE_TOPICS.name))
    listed = list(partition_files(fleet_table, "main"))
    assert [Path(path.removeprefix("file://")).parent for path in listed] == [Path(own)]
    assert not [name for name in os.listdir(fleet / ACTIVE_TOPICS.name) if name != "_delta_log"]
    small_writes.merge_rows(rows_of([("a", "t1")], 1), own, MERGE)  # the fleet table removes the first file
    sync_partition(default, fleet, ACTIVE_TOPICS, "main")

    fleet_table = DeltaTable(str(fleet / ACTIVE_TOPICS.name))
    fleet_table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    fleet_table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True)

    first = DeltaTable(own, version=1)  # the file the fleet table removed is the cluster's, and still there
    assert first.to_pyarrow_table().to_pylist()[0]["task"] == 0
    assert own_rows(own) == [("a", "t1", 1)]
    assert fleet_rows(fleet) == [("main", "a", "t1", 1)]


def test_forgetting_a_cluster_removes_its_partition_only(roots: tuple[Location, Location, Location]) -> None:
    default, billing, fleet = roots
    own, theirs = cluster_table(default), cluster_table(billing)
    small_writes.append(rows_of([("a", "t1")], 0), own)
    small_writes.append(rows_of([("a", "t1")], 1), theirs)
    sync_partition(default, fleet, ACTIVE_TOPICS, "main")
    sync_partition(billing, fleet, ACTIVE_TOPICS, "billing")

    removed = forget_cluster(fleet, "billing")

    assert removed[ACTIVE_TOPICS.name] == 1
    assert fleet_rows(fleet) == [("main", "a", "t1", 0)]
    assert own_rows(theirs) == [("a", "t1", 1)]  # its own table is left as it is
    # Synced again (the cluster watched once more), its partition comes back.
    sync_partition(billing, fleet, ACTIVE_TOPICS, "billing")
    assert fleet_rows(fleet) == expected(main=own, billing=theirs)


def test_a_cluster_without_the_table_yet_commits_nothing(roots: tuple[Location, Location, Location]) -> None:
    default, _, fleet = roots
    assert sync_partition(default, fleet, ACTIVE_TOPICS, "main") is None
    assert not (Path(fleet.uri) / ACTIVE_TOPICS.name).exists()


def test_a_table_that_is_no_fleet_table_is_refused(roots: tuple[Location, Location, Location]) -> None:
    default, _, fleet = roots
    own = cluster_table(default)
    small_writes.append(rows_of([("a", "t1")], 0), own)
    cluster_table(fleet)  # an unpartitioned table where the fleet's should be: fleet.delta.root = delta.root?
    with pytest.raises(ConfigError, match="not a fleet table"):
        sync_partition(default, fleet, ACTIVE_TOPICS, "main")


@pytest.mark.parametrize(
    ("root", "path", "uri"),
    [
        ("/data/delta/connectors", "part-1.parquet", "file:///data/delta/connectors/part-1.parquet"),
        ("/data/a b/connectors", "part-1.parquet", "file:///data/a b/connectors/part-1.parquet"),
        ("s3a://bucket/delta/connectors", "part-1.parquet", "s3a://bucket/delta/connectors/part-1.parquet"),
        ("/data/delta/connectors", "s3a://elsewhere/part-1.parquet", "s3a://elsewhere/part-1.parquet"),
    ],
)
def test_absolute_file(root: str, path: str, uri: str) -> None:
    assert absolute_file(Location(root), path) == uri


def test_a_column_the_table_gained_is_added_to_the_fleet_table(roots: tuple[Location, Location, Location]) -> None:
    default, _, fleet = roots
    own = cluster_table(default)
    small_writes.append(rows_of([("a", "t1")], 0), own)
    older = replace(ACTIVE_TOPICS, schema=ACTIVE_TOPICS.schema.remove(ACTIVE_TOPICS.schema.get_field_index("task")))
    sync_partition(default, fleet, older, "main")  # the fleet table of an older release, without `task`
    assert "task" not in DeltaTable(str(fleet / ACTIVE_TOPICS.name)).schema().to_arrow().names

    small_writes.append(rows_of([("b", "t2")], 7), own)
    sync_partition(default, fleet, ACTIVE_TOPICS, "main")  # this release's

    assert fleet_rows(fleet) == expected(main=own)


def test_the_fleet_schema_puts_a_non_null_cluster_first() -> None:
    schema = fleet_schema(ACTIVE_TOPICS)

    assert schema.names == [CLUSTER_COLUMN, *ACTIVE_TOPICS.schema.names]
    assert not schema.field(CLUSTER_COLUMN).nullable


@pytest.mark.parametrize("cluster_id", ["", "a' OR '1' = '1", "-x", "a b", "a/b", "x" * 129])
def test_an_id_that_is_not_plain_text_is_refused(roots: tuple[Location, Location, Location], cluster_id: str) -> None:
    default, _, fleet = roots
    with pytest.raises(ConfigError, match="a cluster id is 1 to 128"):
        sync_partition(default, fleet, ACTIVE_TOPICS, cluster_id)
    with pytest.raises(ConfigError, match="a cluster id is 1 to 128"):
        forget_cluster(fleet, cluster_id)


def test_the_files_statistics_are_the_clusters_tables(roots: tuple[Location, Location, Location]) -> None:
    """The row counts and the string and integer bounds of the cluster's table's files: a filter on the fleet table
    skips the files they rule out, and answers what the cluster's own table does."""
    default, billing, fleet = roots
    own, theirs = cluster_table(default), cluster_table(billing)
    for task in range(4):  # four files, each of its own connectors
        small_writes.append(rows_of([(f"c{task}-{n}", "t") for n in range(3)], task), own)
    small_writes.append(rows_of([("c1-0", "t")], 9), theirs)
    sync_partition(default, fleet, ACTIVE_TOPICS, "main")
    sync_partition(billing, fleet, ACTIVE_TOPICS, "billing")

    def bounds(path: str, where: str = "") -> list[tuple]:
        actions = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
        columns = ("num_records", "min.connector", "max.connector", "min.task", "max.task", "null_count.topic")
        return sorted(tuple(row[c] for c in columns) for row in actions if row.get("partition.cluster", where) == where)

    assert bounds(str(fleet / ACTIVE_TOPICS.name), "main") == bounds(own)
    assert bounds(str(fleet / ACTIVE_TOPICS.name), "billing") == bounds(theirs)
    for where in ("connector = 'c1-0'", "task >= 2", "connector > 'c2' AND task < 3"):
        assert fleet_rows(fleet, f"WHERE {where}") == sorted(
            row for row in expected(main=own, billing=theirs) if matches(where, row)
        ), where


def matches(where: str, row: tuple) -> bool:
    _, connector, _, task = row
    return {
        "connector = 'c1-0'": connector == "c1-0",
        "task >= 2": task >= 2,
        "connector > 'c2' AND task < 3": connector > "c2" and task < 3,
    }[where]


def test_file_stats_leave_out_what_they_cannot_give_exactly() -> None:
    low = {"name": "a", "task_count": 1, "inconsistent": False, "updated_at": object(), "tasks": {"id": 0}}
    high = {"name": "z", "task_count": 3, "inconsistent": True, "updated_at": object(), "tasks": None}
    stats = json.loads(file_stats(7, low, high, {"name": 0, "tasks": None}))
    assert stats == {
        "numRecords": 7,
        "minValues": {"name": "a", "task_count": 1},
        "maxValues": {"name": "z", "task_count": 3},
        "nullCount": {"name": 0},
    }
    assert json.loads(file_stats(None, None, None, None)) == {}
