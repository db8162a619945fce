"""api/tables.py: a local table's snapshot is kept while its log has no new commit (two stats), and reloaded as soon
as it has one, or when the table was removed and written again (same version numbers, other files)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.tables import TableReader, filter_expression
from connect_state.tables import ACTIVE_TOPICS
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
