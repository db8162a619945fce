"""The audit table's compaction by its flusher (connect_state/tables/compaction.py, issue 33 finding 7): the small
files of past flushes rewritten as few files sorted by time, each over its own stretch of time; rows, their order
and every page unchanged; readers opened before it keep working."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from connect_state.api.audit import AuditTrail, select_rows
from connect_state.core.settings import Settings, load_settings
from connect_state.tables.audit_table import AuditQuery, AuditTable, iso_time, to_table_rows
from connect_state.tables.compaction import NEWEST_KEPT, plan
from connect_state.tables.reader import TableReader
from connect_state.tables.scan import FileStats
from connect_state.tables.schemas import AUDIT

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FLUSHES, PER_FLUSH = 60, 7
BIG = 1 << 30  # a target file size no compaction reaches: one file


def audit_row(n: int) -> dict[str, Any]:
    return {
        "id": f"id-{n:06d}",
        "time": iso_time(T0 + timedelta(seconds=n)),
        "principal": ("alice", "bob", "ci")[n % 3],
        "connector": f"c{n % 5}",
        "method": "PUT",
        "path": f"/connectors/c{n % 5}/config",
        "status": 200 if n % 4 else 409,
        "outcome": "succeeded" if n % 4 else "failed",
        "body": {"n": n, "pad": "x" * (n % 40)},
        "written": [],
    }


def settings_for(root: Path, **overrides: str) -> Settings:
    return load_settings(overrides={"delta.root": str(root), **overrides}, environ={})


def flush(root: Path, numbers: list[int]) -> None:
    """One spool flush: one append, one data file."""
    write_deltalake(root / AUDIT.name, to_table_rows([audit_row(n) for n in numbers]), mode="append")


@pytest.fixture
def table(tmp_path: Path) -> AuditTable:
    """FLUSHES flushes of PER_FLUSH rows, in time order, but for two out of order (a slow process's lines)."""
    root = tmp_path / "delta"
    numbers = list(range(FLUSHES * PER_FLUSH))
    numbers[100], numbers[205] = numbers[205], numbers[100]
    for f in range(FLUSHES):
        flush(root, numbers[f * PER_FLUSH : (f + 1) * PER_FLUSH])
    return AuditTable(settings_for(root), tmp_path / "spool.jsonl")


def add_actions(table: AuditTable) -> pa.Table:
    return pa.table(DeltaTable(table.location).get_add_actions(flatten=True)).sort_by("min.time")


QUERIES = [
    AuditQuery(),
    AuditQuery(limit=250),
    AuditQuery(connector="c3"),
    AuditQuery(connector="c3", limit=5),
    AuditQuery(principal="bob", outcome="failed", limit=30),
    AuditQuery(since=int((T0 + timedelta(seconds=50)).timestamp() * 1000), limit=1000),
    AuditQuery(until=int((T0 + timedelta(seconds=300)).timestamp() * 1000), limit=17),
    AuditQuery(connector="nobody"),
]


def test_compaction_keeps_every_row_in_order_and_every_page(table: AuditTable) -> None:
    rows, pages = table.rows(), [table.page(query) for query in QUERIES]
    assert [row["id"] for row in rows] == [f"id-{n:06d}" for n in range(FLUSHES * PER_FLUSH)]
    done = table.compact(10, 40_000)  # flushes of ~5.5 kB; files of about 40 kB: several, each over its own stretch
    assert done is not None and done.files_before == FLUSHES
    assert done.rows == (FLUSHES - NEWEST_KEPT) * PER_FLUSH
    assert table.rows() == rows
    assert [table.page(query) for query in QUERIES] == pages
    assert [select_rows(rows, **vars(query)) for query in QUERIES] == pages


def test_compacted_files_are_few_and_cover_disjoint_stretches_of_time(table: AuditTable) -> None:
    table.compact(10, 40_000)
    files = add_actions(table)
    compacted = files.num_rows - NEWEST_KEPT
    assert 1 < compacted < (FLUSHES - NEWEST_KEPT) // 4  # a handful of larger files, not one per flush
    lows, highs = files.column("min.time").to_pylist(), files.column("max.time").to_pylist()
    assert all(highs[i] < lows[i + 1] for i in range(files.num_rows - 1))
    assert sum(files.column("num_records").to_pylist()) == FLUSHES * PER_FLUSH


def test_one_file_when_the_size_allows_it_and_not_again_until_due(table: AuditTable) -> None:
    assert table.compact(10, BIG) is not None
    assert add_actions(table).num_rows == NEWEST_KEPT + 1
    assert table.compact(10, BIG) is None  # no small file left outside the newest
    assert table.compact(0, BIG) is None


def test_the_file_count_stays_bounded_as_flushes_go_on(tmp_path: Path) -> None:
    root = tmp_path / "delta"
    table = AuditTable(settings_for(root), tmp_path / "spool.jsonl")
    for f in range(150):
        flush(root, [f * 3, f * 3 + 1, f * 3 + 2])
        table.compact(20, BIG)
        assert len(DeltaTable(table.location).get_add_actions(flatten=True)) <= NEWEST_KEPT + 20 + 1
    assert [row["id"] for row in table.rows()] == [f"id-{n:06d}" for n in range(450)]


def test_readers_opened_before_keep_working(table: AuditTable) -> None:
    reader = TableReader(table.reader.delta_root)
    before_rows = reader.rows(AUDIT)
    before_c2 = reader.rows(AUDIT, [("connector", "=", "c2")])  # builds the per-file index
    held = reader.scan(AUDIT)  # a request still holding the version before
    held_rows = held.rows([], ["id"]).num_rows
    table.compact(10, BIG)
    assert by_id(reader.rows(AUDIT, [("connector", "=", "c2")])) == by_id(before_c2)  # no index of a removed file
    assert by_id(reader.rows(AUDIT)) == by_id(before_rows)
    assert held.rows([], ["id"]).num_rows == held_rows  # the old version's files are kept until the vacuum's 7 days
    assert reader.scan(AUDIT) is not held


def by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: row["id"])


def test_the_plan_leaves_the_newest_files_and_waits_for_enough_small_ones() -> None:
    times = [T0 + timedelta(seconds=10 * i) for i in range(30)]
    stats = FileStats(
        pa.table(
            {
                "path": [f"f{i}" for i in range(30)],
                "size_bytes": [100] * 30,
                "num_records": [10] * 30,
                "min.time": pa.array(times, pa.timestamp("us", tz="UTC")),
                "max.time": pa.array([t + timedelta(seconds=9) for t in times], pa.timestamp("us", tz="UTC")),
                "null_count.time": [0] * 30,
            }
        )
    )
    stretch = plan(stats, "time", 19, 1_000)
    assert stretch is not None
    assert (stretch.start, stretch.end) == (_micros(times[0]), _micros(times[30 - NEWEST_KEPT]))
    assert plan(stats, "time", 20, 1_000) is None  # 20 small files older than the newest 10: not more than 20
    assert plan(stats, "time", 19, 200) is None  # 100 bytes is not under half of 200
    assert plan(stats, "time", 0, 1_000) is None


def _micros(at: datetime) -> int:
    return int(at.timestamp()) * 1_000_000


def test_the_flusher_compacts_per_its_settings(tmp_path: Path) -> None:
    root = tmp_path / "delta"
    spool = tmp_path / "audit.jsonl"
    for f in range(40):
        flush(root, [f])
    settings = settings_for(root, **{"api.audit.file": str(spool), "api.audit.compact.small.files": "25"})
    AuditTrail(settings).compact()
    assert len(DeltaTable(str(root / AUDIT.name)).get_add_actions(flatten=True)) == NEWEST_KEPT + 1
    for f in range(40, 80):
        flush(root, [f])
    off = settings_for(root, **{"api.audit.file": str(spool), "api.audit.compact.small.files": "0"})
    AuditTrail(off).compact()
    assert len(DeltaTable(str(root / AUDIT.name)).get_add_actions(flatten=True)) == NEWEST_KEPT + 1 + 40


def test_shuffled_flushes_still_compact_in_time_order(tmp_path: Path) -> None:
    root = tmp_path / "delta"
    order = list(range(40))
    random.Random(7).shuffle(order)
    for f in order:
        flush(root, [f * 5 + i for i in range(5)])
    table = AuditTable(settings_for(root), tmp_path / "spool.jsonl")
    rows = table.rows()
    assert table.compact(5, 30_000) is not None
    assert table.rows() == rows
    files = add_actions(table)
    compacted = [i for i in range(files.num_rows) if files.column("num_records")[i].as_py() > 5]
    lows, highs = files.column("min.time").to_pylist(), files.column("max.time").to_pylist()
    assert len(compacted) > 1
    assert all(highs[a] < lows[b] for a, b in itertools.pairwise(compacted))
