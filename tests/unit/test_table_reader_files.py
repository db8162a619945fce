"""connect_state/tables/reader.py: a table version's rows are read file by file, and a new version reads only the files
it added (issue 11 §4); what the reader answers after any sequence of commits is what a full read of the table gives."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

import connect_state.tables.reader as tables_module
from connect_state.tables.reader import TableReader, filter_expression
from connect_state.tables.schemas import ACTIVE_TOPICS

CONNECTORS = ["a", "b", "c", "d"]


def rows_of(pairs: list[tuple[str, str]], task: int) -> pa.Table:
    rows = [{"connector": c, "topic": t, "task": task, "discover_timestamp": task} for c, t in pairs]
    return pa.Table.from_pylist(rows, schema=ACTIVE_TOPICS.schema)


def full_read(path: Path, filters: list | None = None) -> list[dict]:
    """The oracle: every row of the table's latest version, read whole by deltalake."""
    data = DeltaTable(str(path)).to_pyarrow_table(columns=ACTIVE_TOPICS.column_names)
    if filters:
        data = data.filter(filter_expression(filters))
    return sorted(data.to_pylist(), key=repr)


def answer(reader: TableReader, filters: list | None = None) -> list[dict]:
    return sorted(reader.rows(ACTIVE_TOPICS, filters), key=repr)


def commit(path: Path, op: tuple, step: int) -> None:
    """One commit of the kinds the jobs make: an append, a MERGE (update, insert, delete), a delete, an overwrite."""
    kind, pairs = op
    source = rows_of(pairs, step)
    if kind == "append":
        write_deltalake(str(path), source, mode="append")
    elif kind == "overwrite":
        write_deltalake(str(path), source, mode="overwrite")
    elif kind == "merge":
        (
            DeltaTable(str(path))
            .merge(source, "t.connector = s.connector AND t.topic = s.topic", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
    elif kind == "delete" and pairs:
        DeltaTable(str(path)).delete(f"connector = '{pairs[0][0]}'")


pairs_st = st.lists(st.tuples(st.sampled_from(CONNECTORS), st.sampled_from(["t1", "t2", "t3"])), max_size=4).map(
    lambda pairs: sorted(set(pairs))
)
ops_st = st.lists(st.tuples(st.sampled_from(["append", "merge", "merge", "delete", "overwrite"]), pairs_st), max_size=6)


@settings(max_examples=40, deadline=None)
@given(first=pairs_st, ops=ops_st, asked=st.lists(st.sampled_from([*CONNECTORS, "absent"]), max_size=4))
def test_the_rows_after_any_commits_are_a_full_reads(first: list, ops: list, asked: list[str]) -> None:
    with tempfile.TemporaryDirectory() as root:
        path = Path(root, ACTIVE_TOPICS.name)
        write_deltalake(str(path), rows_of(first, 0), mode="append")
        reader = TableReader(root)
        for step, op in enumerate([None, *ops]):
            if op is not None:
                commit(path, op, step)
            assert answer(reader) == full_read(path)
            for name in asked:  # the kept dicts of these values are carried to the next version, or dropped
                filters = [("connector", "=", name)]
                assert answer(reader, filters) == full_read(path, filters)
                more = [*filters, ("task", ">=", 1)]
                assert answer(reader, more) == full_read(path, more)


def test_a_commit_reads_only_the_files_it_added(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / ACTIVE_TOPICS.name
    for connector in CONNECTORS:  # four files, one a connector
        write_deltalake(str(path), rows_of([(connector, "t1"), (connector, "t2")], 0), mode="append")
    reader = TableReader(tmp_path)
    assert len(answer(reader)) == 8
    before = dict(reader._snapshots[ACTIVE_TOPICS.name].files.by_path)  # type: ignore[union-attr]
    for name in CONNECTORS:
        reader.rows(ACTIVE_TOPICS, [("connector", "=", name)])  # kept as dicts, indexed per file

    read: list[str] = []
    original = tables_module.file_rows

    def counting(dataset, fragment, columns):  # type: ignore[no-untyped-def]
        read.append(fragment.path)
        return original(dataset, fragment, columns)

    monkeypatch.setattr(tables_module, "file_rows", counting)
    DeltaTable(str(path)).merge(
        rows_of([("b", "t2")], 9), "t.connector = s.connector AND t.topic = s.topic", source_alias="s", target_alias="t"
    ).when_matched_update_all().execute()
    assert answer(reader, [("connector", "=", "b")]) == full_read(path, [("connector", "=", "b")])
    assert len(read) == 1 and read[0] not in before  # the file the MERGE wrote, no other
    after = reader._snapshots[ACTIVE_TOPICS.name].files.by_path  # type: ignore[union-attr]
    kept = [p for p in after if p in before]
    assert len(kept) == 3 and all(after[p] is before[p] for p in kept)
    kept_values = reader._value_rows[(ACTIVE_TOPICS.name, "connector")].rows
    assert sorted(kept_values) == ["a", "b", "c", "d"]  # "b" read again, the others carried over
    assert answer(reader) == full_read(path)


def test_a_table_with_another_layout_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / ACTIVE_TOPICS.name
    write_deltalake(str(path), rows_of([("a", "t1")], 0), mode="append")
    reader = TableReader(tmp_path)
    assert answer(reader, [("connector", "=", "a")]) == full_read(path, [("connector", "=", "a")])
    widened = pa.schema([*ACTIVE_TOPICS.schema, ("extra", pa.string())])
    extra = pa.Table.from_pylist(
        [{"connector": "a", "topic": "t2", "task": 1, "discover_timestamp": 1, "extra": "x"}], schema=widened
    )
    write_deltalake(str(path), extra, mode="append", schema_mode="merge")
    assert answer(reader, [("connector", "=", "a")]) == full_read(path, [("connector", "=", "a")])
    assert answer(reader) == full_read(path)


def test_a_partitioned_table_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / ACTIVE_TOPICS.name
    write_deltalake(str(path), rows_of([("a", "t1"), ("b", "t2")], 0), mode="append", partition_by=["connector"])
    reader = TableReader(tmp_path)
    assert answer(reader) == full_read(path)
    assert reader._snapshots[ACTIVE_TOPICS.name].files is None
    write_deltalake(str(path), rows_of([("c", "t1")], 1), mode="append", partition_by=["connector"])
    assert answer(reader, [("connector", "=", "c")]) == full_read(path, [("connector", "=", "c")])


def test_files_read_under_another_layout_are_not_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table recreated under the same path (another id), or whose schema changed, reads every file again: the rows
    kept from the earlier layout may have other columns or types."""
    path = tmp_path / ACTIVE_TOPICS.name
    write_deltalake(str(path), rows_of([("a", "t1")], 0), mode="append")
    table = DeltaTable(str(path))
    first = tables_module.read_by_file(table, ACTIVE_TOPICS.column_names, None)
    assert first is not None
    read: list[str] = []
    original = tables_module.file_rows
    monkeypatch.setattr(tables_module, "file_rows", lambda *args: read.append("read") or original(*args))
    again = tables_module.read_by_file(table, ACTIVE_TOPICS.column_names, first)
    assert read == [] and again is not None and again.data.to_pylist() == first.data.to_pylist()
    elsewhere = tables_module._Files(first.data, first.parts, ("another table id", first.layout[1]))
    tables_module.read_by_file(table, ACTIVE_TOPICS.column_names, elsewhere)
    assert read == ["read"]


def test_threads_converting_the_same_connector_count_its_rows_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_deltalake(str(tmp_path / ACTIVE_TOPICS.name), rows_of([("a", "t1"), ("a", "t2")], 0), mode="append")
    reader = TableReader(tmp_path)
    reader.snapshot(ACTIVE_TOPICS)
    both_missed = threading.Barrier(2, timeout=10)
    take = reader._take

    def slow_take(*args):  # type: ignore[no-untyped-def]
        both_missed.wait()  # each thread has missed the cache before either converts
        return take(*args)

    monkeypatch.setattr(reader, "_take", slow_take)
    threads = [threading.Thread(target=reader.rows, args=(ACTIVE_TOPICS, [("connector", "=", "a")])) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    kept = reader._value_rows[(ACTIVE_TOPICS.name, "connector")]
    assert list(kept.rows) == ["a"] and kept.total == [2]


def test_a_read_of_an_older_snapshot_neither_replaces_the_latest_caches_nor_reads_wrong(tmp_path: Path) -> None:
    path = tmp_path / ACTIVE_TOPICS.name
    write_deltalake(str(path), rows_of([("a", "t1"), ("b", "t1")], 0), mode="append")
    reader = TableReader(tmp_path)
    older = reader.snapshot(ACTIVE_TOPICS)  # what a slow request holds
    write_deltalake(str(path), rows_of([("a", "t2")], 1), mode="append")
    assert len(answer(reader, [("connector", "=", "a")])) == 2  # loads the new version, keeps "a"
    where = (ACTIVE_TOPICS.name, "connector")
    kept, index = reader._value_rows[where], reader._indexes[where]
    for name, expected in (("a", 1), ("b", 1), ("absent", 0)):
        filters = [("connector", "=", name)]
        assert len(reader._kept_rows(ACTIVE_TOPICS, older, filters) or []) == expected
        assert reader._filtered(ACTIVE_TOPICS, older, filters).num_rows == expected
    assert reader._value_rows[where] is kept
    assert reader._indexes[where] is index


def test_a_failed_reload_is_tried_again_at_the_next_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / ACTIVE_TOPICS.name
    write_deltalake(str(path), rows_of([("a", "t1")], 0), mode="append")
    reader = TableReader(tmp_path)
    assert len(answer(reader)) == 1
    write_deltalake(str(path), rows_of([("b", "t1")], 1), mode="append")
    original = tables_module.read_by_file
    failures = [OSError("a transient read error")]

    def failing_once(*args):  # type: ignore[no-untyped-def]
        if failures:
            raise failures.pop()
        return original(*args)

    monkeypatch.setattr(tables_module, "read_by_file", failing_once)
    with pytest.raises(OSError):
        reader.rows(ACTIVE_TOPICS)
    assert answer(reader) == full_read(path)
