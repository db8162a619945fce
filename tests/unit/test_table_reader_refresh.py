"""connect_state/tables/reader.py: a local table's snapshot (and scan) is kept while its log has no new commit (two
stats), and reloaded as soon as it has one, or when the table was removed and written again (same version numbers,
other files)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connect_state.tables.reader import TableReader, filter_expression
from connect_state.tables.schemas import ACTIVE_TOPICS
from tests.unit.helpers import write_table


def row(topic: str) -> dict:
    return {"connector": "c", "topic": topic, "task": 0, "discover_timestamp": 1}


def topics(reader: TableReader) -> list[str]:
    return sorted(r["topic"] for r in reader.rows(ACTIVE_TOPICS))


def test_every_commit_is_seen_and_an_unchanged_log_is_not_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    write_table(tmp_path, ACTIVE_TOPICS, [row("a")])
    reader = TableReader(tmp_path)
    assert topics(reader) == ["a"]
    snapshot = reader._snapshots[ACTIVE_TOPICS.name]
    asked: list[int] = []
    update = type(snapshot.table).update_incremental
    monkeypatch.setattr(type(snapshot.table), "update_incremental", lambda t: asked.append(1) or update(t))
    for _ in range(3):
        assert topics(reader) == ["a"]
    assert asked == []  # nothing new: served without asking the log
    write_table(tmp_path, ACTIVE_TOPICS, [row("b")])
    assert topics(reader) == ["a", "b"]
    assert asked == [1]
    write_table(tmp_path, ACTIVE_TOPICS, [row("c")], mode="overwrite")
    assert topics(reader) == ["c"]


def test_a_table_written_again_under_the_same_version_numbers_is_reloaded(tmp_path: Path):
    write_table(tmp_path, ACTIVE_TOPICS, [row("a")])
    reader = TableReader(tmp_path)
    assert topics(reader) == ["a"]
    shutil.rmtree(tmp_path / ACTIVE_TOPICS.name)
    write_table(tmp_path, ACTIVE_TOPICS, [row("z")])  # version 0 again
    assert topics(reader) == ["z"]


def scanned_topics(reader: TableReader) -> list[str]:
    return sorted(reader.scan(ACTIVE_TOPICS).rows([], ["topic"]).column("topic").to_pylist())


def test_a_scan_asks_the_log_only_after_a_commit_and_sees_a_table_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_table(tmp_path, ACTIVE_TOPICS, [row("a")])
    reader = TableReader(tmp_path)
    assert scanned_topics(reader) == ["a"]
    table = reader._scans[ACTIVE_TOPICS.name][0]
    asked: list[int] = []
    update = type(table).update_incremental
    monkeypatch.setattr(type(table), "update_incremental", lambda t: asked.append(1) or update(t))
    held = reader.scan(ACTIVE_TOPICS)
    for _ in range(3):
        assert reader.scan(ACTIVE_TOPICS) is held
    assert asked == []  # nothing new: the kept scan, without listing the log
    write_table(tmp_path, ACTIVE_TOPICS, [row("b")])
    assert scanned_topics(reader) == ["a", "b"] and asked == [1]
    shutil.rmtree(tmp_path / ACTIVE_TOPICS.name)
    write_table(tmp_path, ACTIVE_TOPICS, [row("z")])
    write_table(tmp_path, ACTIVE_TOPICS, [row("y")])  # version 1 again, another file
    assert scanned_topics(reader) == ["y", "z"]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(["a", "b", "c"])), st.integers(0, 3)), max_size=12),
    st.sampled_from(["a", "b", "z"]),
    st.booleans(),
)
def test_the_equality_index_selects_what_a_scan_selects(rows: list, name: str, more: bool) -> None:
    reader = TableReader("/nonexistent")
    data = pa.table({"connector": [c for c, _ in rows], "task": [t for _, t in rows]})
    filters: list = [("connector", "=", name)] + ([("task", ">=", 1)] if more else [])
    for _ in range(2):  # the index is built, then reused
        got = reader._filtered(ACTIVE_TOPICS, data, filters)
        assert got.to_pylist() == data.filter(filter_expression(filters)).to_pylist()


def arrow_rows(reader: TableReader, filters: list | None, columns: list[str] | None) -> list[dict]:
    """The same read through Arrow only (no kept dicts): the oracle of the row cache."""
    data = reader.snapshot(ACTIVE_TOPICS)
    if filters:
        data = data.filter(filter_expression(filters))
    return data.select(columns or ACTIVE_TOPICS.column_names).to_pylist()


@pytest.mark.parametrize(
    ("filters", "columns"),
    [
        (None, None),
        (None, ["topic"]),
        ([("connector", "=", "c")], None),
        ([("connector", "=", "c")], ["task", "topic"]),
        ([("connector", "=", "absent")], None),
        ([("connector", "=", "c"), ("task", ">=", 1)], None),  # two filters: read through Arrow
        ([("task", "=", 0)], None),  # not a string column: read through Arrow
    ],
)
def test_kept_rows_equal_an_arrow_read_before_and_after_a_commit(tmp_path: Path, filters, columns) -> None:
    reader = TableReader(tmp_path)
    write_table(tmp_path, ACTIVE_TOPICS, [row("a"), {**row("b"), "task": 1}, {**row("x"), "connector": "d"}])
    for _ in range(2):  # built, then served from what was kept
        assert reader.rows(ACTIVE_TOPICS, filters, columns) == arrow_rows(reader, filters, columns)
    write_table(tmp_path, ACTIVE_TOPICS, [{**row("c"), "task": 2}])  # a new version drops what was kept
    assert reader.rows(ACTIVE_TOPICS, filters, columns) == arrow_rows(reader, filters, columns)
    assert reader.snapshot(ACTIVE_TOPICS).num_rows == 4  # the commit was seen


def test_a_caller_changing_its_rows_does_not_change_the_next_answer(tmp_path: Path) -> None:
    write_table(tmp_path, ACTIVE_TOPICS, [row("a")])
    reader = TableReader(tmp_path)
    for filters in (None, [("connector", "=", "c")]):
        expected = arrow_rows(reader, filters, None)
        first = reader.rows(ACTIVE_TOPICS, filters)
        first[0]["topic"] = "changed"
        first.append({"topic": "added"})
        assert reader.rows(ACTIVE_TOPICS, filters) == expected
        assert expected[0]["topic"] == "a"


def test_large_tables_and_values_are_read_through_arrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import connect_state.tables.reader as tables_module

    monkeypatch.setattr(tables_module, "ROW_CACHE_MAX_ROWS", 1)
    monkeypatch.setattr(tables_module, "VALUE_CACHE_MAX_ROWS", 1)
    monkeypatch.setattr(tables_module, "VALUE_CACHE_MAX_TOTAL_ROWS", 1)
    rows = [row("a"), {**row("b"), "connector": "d"}, {**row("x"), "connector": "d"}, {**row("e"), "connector": "e"}]
    write_table(tmp_path, ACTIVE_TOPICS, rows)
    reader = TableReader(tmp_path)
    assert reader.rows(ACTIVE_TOPICS) == arrow_rows(reader, None, None)
    assert ACTIVE_TOPICS.name not in reader._all_rows  # four rows > 1: not kept
    for name in ("c", "d", "e", "absent", "c", "d", "e", "absent"):
        assert reader.rows(ACTIVE_TOPICS, [("connector", "=", name)]) == arrow_rows(
            reader, [("connector", "=", name)], None
        )
    # "c" kept (1 row); "d" has 2 rows > 1; "e" would pass the total of 1; "absent" has none
    assert list(reader._value_rows[(ACTIVE_TOPICS.name, "connector")].rows) == ["c"]


def test_derived_is_built_once_per_table_version(tmp_path: Path) -> None:
    built: list[int] = []

    def topic_set(rows: list[dict]) -> frozenset[str]:
        built.append(len(rows))
        return frozenset(r["topic"] for r in rows)

    write_table(tmp_path, ACTIVE_TOPICS, [row("a")])
    reader = TableReader(tmp_path)
    assert [reader.derived(ACTIVE_TOPICS, topic_set) for _ in range(3)] == [frozenset({"a"})] * 3
    assert built == [1]
    write_table(tmp_path, ACTIVE_TOPICS, [row("b")])
    assert reader.derived(ACTIVE_TOPICS, topic_set) == frozenset({"a", "b"})
    assert built == [1, 2]
