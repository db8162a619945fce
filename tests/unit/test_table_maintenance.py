"""The jobs' tables compacted between batches (connect_state/tables/maintenance.py, issue 34 target 4): due past a
count of small files, rows unchanged, the batches' transaction ids still honoured, old versions still readable, and the
API's reader answering across a compaction as a full read does. Real deltalake tables in temporary directories."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

from connect_state.core.errors import ConfigError
from connect_state.core.settings import load_settings
from connect_state.spark.active_topics import CURRENT_MERGE
from connect_state.spark.retention import RetentionPass
from connect_state.tables import small_writes
from connect_state.tables.maintenance import CompactionPolicy, compact_table, file_sizes
from connect_state.tables.reader import TableReader
from connect_state.tables.schemas import ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, TABLE_PROPERTIES, timestamp

MIB = 1 << 20
APP = "connect-state:active_topics:q:"


def history_rows(batch: int, n: int = 3) -> pa.Table:
    """A batch's ``active_topics_history`` rows: ``n`` topics of connector ``c<batch % 7>`` at offsets in order."""
    at = timestamp(1_790_000_000_000 + batch * 1000)
    rows = [
        {"connector": f"c{batch % 7}", "topic": f"t{j}", "change": "added", "task": 0, "discover_timestamp": batch,
         "changed_at": at, "kafka_partition": 0, "kafka_offset": batch * n + j, "kafka_timestamp": at}
        for j in range(n)
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=ACTIVE_TOPICS_HISTORY.schema)


def current_rows(batch: int, connectors: list[str], change: str = "added") -> pa.Table:
    """A batch's MERGE source for ``active_topics``: topic ``t`` of each connector, at task ``batch``."""
    rows = [
        {"connector": c, "topic": "t", "task": batch, "discover_timestamp": batch, "updated_at": timestamp(batch),
         "kafka_partition": 0, "kafka_offset": batch, "change": change}
        for c in connectors
    ]  # fmt: skip
    schema = pa.schema([*ACTIVE_TOPICS.schema, ("change", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema)


def history_table(root: Path, batches: int) -> str:
    path = str(root / ACTIVE_TOPICS_HISTORY.name)
    small_writes.open_or_create(path, ACTIVE_TOPICS_HISTORY, TABLE_PROPERTIES)
    for batch in range(batches):
        assert small_writes.append_once(history_rows(batch), path, APP + "h", batch)
    return path


def merge(path: str, batch: int, connectors: list[str], change: str = "added") -> bool:
    return small_writes.merge_once(current_rows(batch, connectors, change), path, CURRENT_MERGE, APP + "c", batch)


def current_table(root: Path, batches: int) -> str:
    path = str(root / ACTIVE_TOPICS.name)
    small_writes.open_or_create(path, ACTIVE_TOPICS, TABLE_PROPERTIES)
    for batch in range(batches):
        assert merge(path, batch, [f"c{batch}"])
    return path


def every_row(path: str, spec=ACTIVE_TOPICS_HISTORY) -> list[dict]:  # type: ignore[no-untyped-def]
    return sorted(DeltaTable(path).to_pyarrow_table(columns=spec.column_names).to_pylist(), key=repr)


def test_a_table_is_compacted_only_past_its_count_of_small_files(tmp_path: Path) -> None:
    path = history_table(tmp_path, 12)
    rows = every_row(path)
    assert compact_table(path, CompactionPolicy(12, MIB)) is None  # 12 small files: not more than 12
    assert compact_table(path, CompactionPolicy(0, MIB)) is None  # 0: never
    assert len(file_sizes(DeltaTable(path))) == 12
    done = compact_table(path, CompactionPolicy(11, MIB))
    assert done is not None and (done.files_before, done.files_after, done.rows) == (12, 1, 36)
    assert every_row(path) == rows
    assert compact_table(path, CompactionPolicy(11, MIB)) is None  # nothing small left to count


def test_files_of_at_least_half_the_target_size_are_not_small(tmp_path: Path) -> None:
    path = history_table(tmp_path, 12)
    largest = int(file_sizes(DeltaTable(path)).max())
    assert compact_table(path, CompactionPolicy(1, MIB)) is not None
    path2 = history_table(tmp_path / "again", 12)
    # Every file is at least half of a target twice the largest file: not small, never due.
    assert not CompactionPolicy(1, 2 * largest).due(file_sizes(DeltaTable(path2)))
    assert CompactionPolicy(1, 2 * largest + 2).due(file_sizes(DeltaTable(path2)))


def test_a_batch_replayed_after_a_compaction_is_still_skipped(tmp_path: Path) -> None:
    history = history_table(tmp_path, 6)
    current = current_table(tmp_path, 6)
    assert compact_table(history, CompactionPolicy(1, MIB)) is not None
    assert compact_table(current, CompactionPolicy(1, MIB)) is not None
    assert DeltaTable(history).history(1)[0]["operation"] == "OPTIMIZE"
    # The batches' transaction ids survive the OPTIMIZE commit: a replay writes nothing, the next batch writes.
    assert not small_writes.append_once(history_rows(5), history, APP + "h", 5)
    assert not merge(current, 5, ["c-replayed"])
    assert small_writes.append_once(history_rows(6), history, APP + "h", 6)
    assert merge(current, 6, ["c6"])
    assert len(every_row(history)) == 7 * 3
    assert [r["connector"] for r in every_row(current, ACTIVE_TOPICS)] == [f"c{i}" for i in range(7)]


def test_an_older_version_stays_readable_after_the_vacuum(tmp_path: Path) -> None:
    path = history_table(tmp_path, 8)
    version = DeltaTable(path).version()
    before = every_row(path)
    assert compact_table(path, CompactionPolicy(1, MIB)) is not None
    assert len(list(Path(path).glob("*.parquet"))) == 9  # the 8 small files stay: within the retention (7 days)
    old = DeltaTable(path, version=version).to_pyarrow_table(columns=ACTIVE_TOPICS_HISTORY.column_names)
    assert sorted(old.to_pylist(), key=repr) == before


def test_the_api_reader_answers_across_a_compaction(tmp_path: Path) -> None:
    current = current_table(tmp_path, 10)
    history = history_table(tmp_path, 10)
    reader = TableReader(tmp_path)
    asked = [("connector", "=", "c3")]
    assert len(reader.rows(ACTIVE_TOPICS)) == 10
    assert reader.rows(ACTIVE_TOPICS, asked)[0]["task"] == 3  # kept as dicts, indexed per file
    assert reader.scan(ACTIVE_TOPICS_HISTORY).count([("connector", "=", "c3")]) == 3  # batch 3's

    assert compact_table(current, CompactionPolicy(1, MIB)) is not None
    assert compact_table(history, CompactionPolicy(1, MIB)) is not None
    assert merge(current, 10, ["c3"])  # a change after the compaction, in the compacted file's rows
    assert merge(current, 11, ["c4"], "removed")
    small_writes.append_once(history_rows(10), history, APP + "h", 10)

    want = every_row(current, ACTIVE_TOPICS)
    assert sorted(reader.rows(ACTIVE_TOPICS), key=repr) == want
    assert reader.rows(ACTIVE_TOPICS, asked) == [r for r in want if r["connector"] == "c3"]
    assert reader.rows(ACTIVE_TOPICS, asked)[0]["task"] == 10
    assert reader.rows(ACTIVE_TOPICS, [("connector", "=", "c4")]) == []
    scan = reader.scan(ACTIVE_TOPICS_HISTORY)
    assert scan.count([("connector", "=", "c3")]) == 2 * 3  # batch 3's, in the compacted file, and batch 10's
    assert len(scan.source.stats()) == 2  # the compacted file and the new batch's


@settings(max_examples=25, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["merge", "merge", "remove", "compact"]), st.lists(st.integers(0, 5), max_size=3)),
        max_size=8,
    ),
    asked=st.lists(st.integers(0, 5), max_size=3),
)
def test_the_reader_across_any_merges_and_compactions_is_a_full_read(ops: list, asked: list[int]) -> None:
    with tempfile.TemporaryDirectory() as root:
        path = current_table(Path(root), 3)
        reader = TableReader(root)
        for batch, (kind, numbers) in enumerate(ops, start=3):
            names = sorted({f"c{n}" for n in numbers})
            if kind == "compact":
                compact_table(path, CompactionPolicy(1, MIB))
            elif names:
                merge(path, batch, names, "removed" if kind == "remove" else "added")
            assert sorted(reader.rows(ACTIVE_TOPICS), key=repr) == every_row(path, ACTIVE_TOPICS)
            for n in asked:
                filters = [("connector", "=", f"c{n}")]
                expected = [r for r in every_row(path, ACTIVE_TOPICS) if r["connector"] == f"c{n}"]
                assert reader.rows(ACTIVE_TOPICS, filters) == expected


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_owning_job_checks_its_tables_every_interval(tmp_path: Path) -> None:
    current = current_table(tmp_path, 4)
    history = history_table(tmp_path, 4)
    overrides = {
        "delta.root": str(tmp_path),
        "table.compact.small.files": "3",
        "table.compact.check.interval.ms": "60000",
        "history.retention.ms": "-1",
    }
    clock = Clock()
    maintenance = RetentionPass(
        load_settings(overrides=overrides, environ={}), "active_topics", True, monotonic=clock,
        tables=(ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY),
    )  # fmt: skip
    done = maintenance.maybe_compact(None)  # type: ignore[arg-type]  # deltalake: no Spark needed
    assert sorted(done) == ["active_topics", "active_topics_history"]
    assert (done["active_topics"].files_before, done["active_topics"].files_after) == (4, 1)
    for batch in range(4, 9):
        small_writes.append_once(history_rows(batch), history, APP + "h", batch)
    clock.now = 59.0
    assert maintenance.maybe_compact(None) == {}  # type: ignore[arg-type]  # not yet: an interval after the last
    clock.now = 60.0
    done = maintenance.maybe_compact(None)  # type: ignore[arg-type]
    assert sorted(done) == ["active_topics_history"] and done["active_topics_history"].files_before == 6
    assert len(file_sizes(DeltaTable(current))) == 1


def test_zero_small_files_turns_the_compaction_off(tmp_path: Path) -> None:
    history_table(tmp_path, 4)
    off = load_settings(overrides={"delta.root": str(tmp_path), "table.compact.small.files": "0"}, environ={})
    maintenance = RetentionPass(off, "active_topics", True, tables=(ACTIVE_TOPICS_HISTORY,))
    assert not maintenance.compaction_due()
    assert maintenance.maybe_compact(None) == {}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("table.compact.small.files", "-1"),
        ("table.compact.file.bytes", "1000"),
        ("table.compact.check.interval.ms", "0"),
        ("table.compact.small.files", "many"),
    ],
)
def test_a_bad_compaction_setting_is_refused(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        load_settings(overrides={key: value}, environ={})
