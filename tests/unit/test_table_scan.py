"""Bounded reads of Delta tables (connect_state/tables/scan.py, issue 33 finding 7): the files a query reads are those
its filters and page need, found from the Delta log's statistics, never the whole table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connect_state.tables.audit_table import AuditQuery, AuditTable, to_table_rows
from connect_state.tables.reader import TableReader
from connect_state.tables.scan import (
    WHOLE_FILE_ROWS,
    ArrowFiles,
    DataFile,
    FileCounts,
    FileRows,
    FileStats,
    TableScan,
    all_match,
    filter_expression,
    filter_rows,
    may_match,
)
from connect_state.tables.schemas import AUDIT, HEARTBEATS
from tests.unit.helpers import write_table

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FILES, PER_FILE = 10, 50


def audit_row(n: int) -> dict[str, Any]:
    at = T0 + timedelta(seconds=n)
    return {
        "id": f"id-{n:06d}",
        "time": at.isoformat().replace("+00:00", "Z"),
        "principal": "alice" if n % 2 else "bob",
        "connector": f"c{n % 5}",
        "method": "PUT",
        "path": f"/connectors/c{n % 5}/stop",
        "status": 204,
        "outcome": "succeeded" if n % 7 else "failed",
        "body": {"n": n},
        "written": [],
    }


@pytest.fixture
def delta_root(tmp_path: Path) -> Path:
    """An audit table of FILES appends (one data file each, as the spool's flushes write it), in time order."""
    root = tmp_path / "delta"
    for f in range(FILES):
        from deltalake import write_deltalake

        rows = [audit_row(f * PER_FILE + i) for i in range(PER_FILE)]
        write_deltalake(root / AUDIT.name, to_table_rows(rows), mode="append")
    return root


def every_row() -> list[dict[str, Any]]:
    return [audit_row(n) for n in range(FILES * PER_FILE)]


def expected(query: AuditQuery) -> tuple[int, list[str]]:
    matching = [row for row in every_row() if query.matches(row)]
    return len(matching), [row["id"] for row in matching[-query.limit :]]


def test_the_newest_page_reads_the_newest_file_only(delta_root: Path) -> None:
    scan = TableReader(delta_root).scan(AUDIT)
    assert len(scan.source.stats()) == FILES
    newest = scan.newest("time", [], 20, ["id"])
    assert sorted(newest.column("id").to_pylist()) == [f"id-{n:06d}" for n in range(480, 500)]
    assert len(scan.files_read) == 1  # the newest of ten
    assert scan.count([]) == FILES * PER_FILE and len(scan.files_read) == 1  # counted from the statistics


def test_a_page_across_files_reads_no_more_than_it_needs(delta_root: Path) -> None:
    scan = TableReader(delta_root).scan(AUDIT)
    newest = scan.newest("time", [], PER_FILE + 1, ["id"])
    assert newest.num_rows == PER_FILE + 1
    assert len(scan.files_read) == 2  # the page spans the newest two files: the stretch holding 51 rows is in them


def test_time_filters_prune_files(delta_root: Path) -> None:
    scan = TableReader(delta_root).scan(AUDIT)
    since = [("time", ">=", T0 + timedelta(seconds=120)), ("time", "<", T0 + timedelta(seconds=180))]
    assert scan.count(since) == 60
    assert len(scan.files_read) == 2  # the two files straddling a bound; the one inside counted from statistics
    rows = scan.rows(since, ["id"])
    assert rows.num_rows == 60 and len(scan.files_read) == 2 + 2  # files 2 and 3 only (100..149 and 150..199)


def test_equality_filters_read_only_their_columns_of_partial_files(delta_root: Path) -> None:
    scan = TableReader(delta_root).scan(AUDIT)
    assert scan.count([("connector", "=", "c3")]) == FILES * PER_FILE // 5
    assert scan.count([("connector", "=", "zz")]) == 0  # beyond every file's maximum: nothing read
    assert len(scan.files_read) == FILES


@pytest.mark.parametrize(
    "query",
    [
        AuditQuery(),
        AuditQuery(limit=1),
        AuditQuery(limit=PER_FILE * 3 + 7),
        AuditQuery(connector="c2", limit=13),
        AuditQuery(principal="alice", outcome="failed", limit=5),
        AuditQuery(since=int((T0 + timedelta(seconds=100)).timestamp() * 1000), limit=1000),
        AuditQuery(until=int((T0 + timedelta(seconds=260)).timestamp() * 1000), limit=30),
        AuditQuery(connector="nobody"),
    ],
)
def test_audit_pages_answer_as_a_full_read_does(delta_root: Path, tmp_path: Path, query: AuditQuery) -> None:
    from connect_state.core.settings import load_settings

    settings = load_settings(overrides={"delta.root": str(delta_root)}, environ={})
    table = AuditTable(settings, tmp_path / "spool.jsonl")
    total, rows = table.page(query)
    assert (total, [row["id"] for row in rows]) == expected(query)


def test_heartbeats_newest_with_ties_across_files(tmp_path: Path) -> None:
    """Rows tied on the order column across files all come back (the caller breaks the tie)."""
    same = T0 + timedelta(minutes=5)
    for batch in range(3):
        rows = [
            {"connector": "s", "emitted_at": same if batch else T0, "record_index": i + 10 * batch} for i in range(4)
        ]
        write_table(tmp_path, HEARTBEATS, rows)
    scan = TableReader(tmp_path).scan(HEARTBEATS)
    newest = scan.newest("emitted_at", [("connector", "=", "s")], 2, ["record_index"])
    assert sorted(newest.column("record_index").to_pylist()) == [10, 11, 12, 13, 20, 21, 22, 23]
    assert len(scan.files_read) == 2  # the two files at the tied time; the oldest one, before it, never opened


def test_statistics_decide_conservatively() -> None:
    stats = FileStats(
        pa.table(
            {
                "path": ["f", "nulls", "unknown"],
                "size_bytes": [1, 1, 1],
                "num_records": [10, 10, 10],
                "min.a": pa.array([1, None, None], pa.int32()),
                "max.a": pa.array([5, None, None], pa.int32()),
                "null_count.a": [0, 10, None],
                "min.t": pa.array([T0, None, None], pa.timestamp("us", tz="UTC")),
                "max.t": pa.array([T0, None, None], pa.timestamp("us", tz="UTC")),
                "null_count.t": [0, 10, None],
            }
        )
    )
    assert may_match(stats, [("a", "=", 3)]).tolist() == [True, False, True]  # null everywhere; no statistics
    assert may_match(stats, [("a", "=", 6)]).tolist() == [False, False, True]
    assert may_match(stats, [("a", "in", [0, 6])]).tolist() == [False, False, True]
    assert may_match(stats, [("t", ">", T0 + timedelta(microseconds=500))]).tolist()[0]  # Spark's ms statistics
    assert not may_match(stats, [("t", ">=", T0 + timedelta(milliseconds=2))]).tolist()[0]
    assert may_match(stats, [("b", "=", 1)]).all()  # a column without statistics: read
    assert may_match(stats, [("a", "=", "text")]).tolist() == [True, False, True]  # another type: read
    assert all_match(stats, [("a", ">=", 1), ("a", "<=", 5)]).tolist() == [True, False, False]
    assert not all_match(stats, [("a", "<", 5)]).any()
    assert not all_match(stats, [("b", "=", 1)]).any()


def test_arrow_files_scan_like_a_table() -> None:
    data = pa.table({"n": list(range(10)), "k": ["x", "y"] * 5})
    scan = TableScan(ArrowFiles(data, 3))
    assert sorted(scan.newest("n", [("k", "=", "x")], 2, ["n"]).column("n").to_pylist()) == [6, 8]
    assert scan.count([("k", "=", "y")]) == 5


def test_newest_by_stretch_reads_on_until_the_page_is_complete() -> None:
    """A small file read whole brings old rows; the page is only complete once ``limit`` rows are at or after the
    stretch read so far: here the big file's older matches must still be read."""
    big = [{"n": 2 * i, "k": "x" if i % 100 == 0 else "y"} for i in range(20_000)]
    small = [{"n": 39_999 if i == 0 else 1 + 10 * i, "k": "x"} for i in range(50)]  # one new row, 49 old ones
    data = pa.Table.from_pylist(big + small)
    scan = TableScan(ArrowFiles(data, 20_000))
    newest = scan.newest("n", [("k", "=", "x")], 20, ["n"])
    matching = sorted(row["n"] for row in big + small if row["k"] == "x")
    assert sorted(newest.column("n").to_pylist())[-20:] == matching[-20:]  # each row once: stretches do not overlap
    assert scan.files_read.count("part-00001") == 1  # the small file spans every stretch: read once, then kept


@pytest.mark.parametrize("old_in_newest_file", [False, True])
def test_rows_without_an_order_do_not_complete_a_page(old_in_newest_file: bool) -> None:
    """Files without statistics of ``order`` (every value null) are read first; their rows rank nowhere, so the
    stretches go on until ``limit`` rows with an order are found (a review's random check found the page cut short)."""
    unordered = [(None, "x"), (None, "x"), (None, "x"), (None, "a")]
    if old_in_newest_file:
        ordered = [(10, "x"), (1, "x"), (9, "y"), (8, "a"), (7, "y"), (6, "a"), (5, "y"), (2, "a")]
    else:
        ordered = [(10, "x"), (9, "y"), (8, "a"), (7, "y"), (6, "a"), (5, "y"), (1, "x"), (0, "y")]
    rows = unordered + ordered
    data = pa.table({"o": pa.array([o for o, _ in rows], pa.int64()), "k": [k for _, k in rows]})
    newest = TableScan(ArrowFiles(data, 2)).newest("o", [("k", "=", "x")], 2, [])
    assert sorted(value for value in newest.column("o").to_pylist() if value is not None) == [1, 10]


def test_filtered_totals_come_from_per_file_value_counts_read_once(delta_root: Path) -> None:
    """A total filtered by connector, principal or outcome (no statistics can prune them: every file holds every
    value) reads each data file once per process; later totals, other values, and the next versions add up the kept
    counts, reading only files not seen before."""
    reader = TableReader(delta_root)
    scan = reader.scan(AUDIT)
    assert scan.count([("connector", "=", "c3")]) == FILES * PER_FILE // 5
    assert len(scan.files_read) == FILES  # counts of every file, read once
    by_principal = [("principal", "=", "alice"), ("outcome", "=", "failed")]
    assert scan.count(by_principal) == expected(AuditQuery(principal="alice", outcome="failed"))[0]
    assert scan.count([("connector", "in", ["c1", "c4"])]) == 2 * FILES * PER_FILE // 5
    assert len(scan.files_read) == FILES  # nothing read again
    from deltalake import write_deltalake

    write_deltalake(delta_root / AUDIT.name, to_table_rows([audit_row(FILES * PER_FILE)]), mode="append")
    newer = reader.scan(AUDIT)
    assert newer is not scan
    assert newer.count([("connector", "=", f"c{FILES * PER_FILE % 5}")]) == FILES * PER_FILE // 5 + 1
    assert len(newer.files_read) == 1  # the new file only
    since = T0 + timedelta(seconds=120)
    mixed = [("connector", "=", "c0"), ("time", ">=", since), ("time", "<", since + timedelta(seconds=60))]
    assert newer.count(mixed) == sum(1 for n in range(120, 180) if n % 5 == 0)
    assert len(newer.files_read) == 1  # the files straddling a bound: kept whole since the first count (ten files
    # are few enough); the one inside from its counts


@given(
    connector=st.sampled_from([None, "c0", "c4", "nobody"]),
    principal=st.sampled_from([None, "alice", "bob"]),
    outcome=st.sampled_from([None, "failed", "succeeded"]),
    since=st.one_of(st.none(), st.integers(0, FILES * PER_FILE)),
    width=st.integers(0, FILES * PER_FILE),
    file_rows=st.integers(1, 2 * PER_FILE),
)
@settings(max_examples=60, deadline=None)
def test_counts_equal_a_count_of_the_filtered_rows(
    connector: str | None, principal: str | None, outcome: str | None, since: int | None, width: int, file_rows: int
) -> None:
    data = to_table_rows(every_row())
    query = AuditQuery(
        connector=connector,
        principal=principal,
        outcome=outcome,
        since=None if since is None else int((T0 + timedelta(seconds=since)).timestamp() * 1000),
        until=None if since is None else int((T0 + timedelta(seconds=since + width)).timestamp() * 1000),
    )
    filters = query.table_filters()
    scan = TableScan(ArrowFiles(data, file_rows), FileCounts(AUDIT.counted))
    assert scan.count(filters) == expected(query)[0]
    assert scan.count(filters) == TableScan(ArrowFiles(data, file_rows)).count(filters)


def test_a_page_decodes_each_small_file_once_per_process(delta_root: Path) -> None:
    """The files a page reads (the newest) are kept decoded by path across versions: the next page, on this version
    or on the one a new flush commits, reads only the new file from storage, and answers what a full read does."""
    reader = TableReader(delta_root)
    by_connector = [("connector", "=", "c3")]

    def page(scan: TableScan) -> list[str]:
        return sorted(scan.newest("time", by_connector, 30, ["id"]).column("id").to_pylist())[-30:]

    first = reader.scan(AUDIT)
    assert page(first) == expected(AuditQuery(connector="c3", limit=30))[1]
    read_first = len(first.files_read)
    assert read_first >= 3  # 10 matching rows a file: the newest page of 30 spans three files or more
    assert page(first) == expected(AuditQuery(connector="c3", limit=30))[1]
    assert len(first.files_read) == read_first  # the same version: nothing read again
    from deltalake import write_deltalake

    n = FILES * PER_FILE + 3  # connector c3
    write_deltalake(delta_root / AUDIT.name, to_table_rows([audit_row(n)]), mode="append")
    newer = reader.scan(AUDIT)
    assert newer is not first
    assert page(newer)[-1] == f"id-{n:06d}" and page(newer)[0] == expected(AuditQuery(connector="c3", limit=29))[1][0]
    added = set(newer.source.stats().paths) - set(first.source.stats().paths)
    assert newer.files_read == list(added)  # the new flush only


def test_kept_rows_stay_within_their_budget() -> None:
    rows = pa.table({"n": pa.array(range(1_000), pa.int64())})  # 8,000 bytes
    kept = FileRows(max_bytes=3 * rows.nbytes)
    for name in ("a", "b", "c"):
        kept.put(name, rows)
    assert kept.get("a") is rows  # now the most recently used
    kept.put("d", rows)
    assert kept.get("b") is None and kept.get("a") is rows and kept.get("d") is rows
    assert kept.kept_bytes == 3 * rows.nbytes
    kept.put("huge", pa.concat_tables([rows] * 4))  # larger than the whole budget: never kept
    assert kept.get("huge") is None and kept.kept_bytes == 3 * rows.nbytes
    assert not kept.keeps(DataFile("big", 1, WHOLE_FILE_ROWS + 1)) and not kept.keeps(DataFile("unknown", 1))


def test_a_compacted_file_is_kept_by_the_row_groups_a_page_reads(tmp_path: Path) -> None:
    """A file too large to keep whole (a compaction's) is read by the row groups the page's stretch may need; those
    are kept, so the same page again reads nothing, and the answers are a full read's."""
    from deltalake import WriterProperties, write_deltalake

    rows = [audit_row(n) for n in range(WHOLE_FILE_ROWS + 2_000)]
    write_deltalake(
        tmp_path / AUDIT.name, to_table_rows(rows), writer_properties=WriterProperties(max_row_group_size=2_000)
    )
    scan = TableReader(tmp_path).scan(AUDIT)
    assert len(scan.source.stats()) == 1
    by_connector = [("connector", "=", "c2")]
    newest = sorted(scan.newest("time", by_connector, 50, ["id"]).column("id").to_pylist())[-50:]
    assert newest == [row["id"] for row in rows if row["connector"] == "c2"][-50:]
    first_reads = len(scan.files_read)
    assert 1 <= first_reads < 6  # the newest row groups of six, not all of them
    again = sorted(scan.newest("time", by_connector, 50, ["id"]).column("id").to_pylist())[-50:]
    assert again == newest and len(scan.files_read) == first_reads  # kept: nothing read again


@pytest.mark.parametrize(
    "filters",
    [
        [("time", ">=", T0 + timedelta(seconds=5_000))],
        [("time", "<", T0 + timedelta(seconds=1_500)), ("connector", "=", "c2")],
        [("time", ">=", T0 + timedelta(seconds=3_999)), ("time", "<", T0 + timedelta(seconds=4_001))],
        [("id", "in", ["id-000007", "id-007007"])],
        [("principal", "=", "nobody")],
        [("status", ">", 204)],
        [("written", "=", "[]")],
    ],
)
def test_a_large_files_row_groups_are_those_pyarrows_own_statistics_allow(
    tmp_path: Path, filters: list[tuple[str, str, Any]]
) -> None:
    """The row groups a compacted file's page reads are chosen from its footer's statistics kept as arrays; pyarrow's
    own pruning of the same file by the same filter is the oracle (the written rows sorted by time, as a compaction
    writes them, so each group holds a stretch of time)."""
    import pyarrow.dataset as pads
    import pyarrow.fs
    from deltalake import WriterProperties, write_deltalake

    from connect_state.tables.scan import filter_expression

    rows = [audit_row(n) for n in range(8_000)]
    write_deltalake(
        tmp_path / AUDIT.name, to_table_rows(rows), writer_properties=WriterProperties(max_row_group_size=1_000)
    )
    scan = TableReader(tmp_path).scan(AUDIT)
    file = scan.source.stats().file(0)
    ours = [name.rsplit("#", 1)[1] for name, _read in scan.source.row_groups(file, filters)]
    fragment = pads.ParquetFileFormat().make_fragment(
        str(tmp_path / AUDIT.name / file.path), filesystem=pyarrow.fs.LocalFileSystem()
    )
    theirs = [
        str(group.row_groups[0].id)
        for group in fragment.split_by_row_group(filter_expression(filters), schema=scan.schema)
    ]
    assert ours == theirs
    read = [r for _name, read_group in scan.source.row_groups(file, filters) for r in read_group().to_pylist()]
    matching = scan.rows(filters, ["id"]).column("id").to_pylist()
    assert set(matching) <= {row["id"] for row in read}


def test_a_large_files_footer_is_read_once_across_versions(tmp_path: Path) -> None:
    """A page on each new version asks the compacted file for its row groups again; its footer is read the first
    time only (the file never changes)."""
    from deltalake import WriterProperties, write_deltalake

    rows = [audit_row(n) for n in range(WHOLE_FILE_ROWS + 2_000)]
    write_deltalake(
        tmp_path / AUDIT.name, to_table_rows(rows), writer_properties=WriterProperties(max_row_group_size=2_000)
    )
    reader = TableReader(tmp_path)
    opened: list[str] = []
    for n in range(3):
        scan = reader.scan(AUDIT)
        big = next(
            scan.source.stats().file(i)
            for i in range(len(scan.source.stats()))
            if scan.source.stats().rows[i] > WHOLE_FILE_ROWS
        )
        real_get = scan.source.footers.get

        def counting_get(path: str, make: Any, real_get: Any = real_get) -> Any:
            return real_get(path, lambda: (opened.append(path), make())[1])

        scan.source.footers.get = counting_get  # type: ignore[method-assign]
        assert scan.newest("time", [("connector", "=", "c1")], 10, ["id"]).num_rows >= 10
        write_deltalake(tmp_path / AUDIT.name, to_table_rows([audit_row(50_000 + n)]), mode="append")
    assert opened == [big.path]


@pytest.mark.parametrize(
    ("filters", "groups_read"),
    [
        ([("time", ">=", T0 + timedelta(seconds=5_500))], 1),  # cuts group 5; groups 6-11 counted
        ([("time", ">=", T0 + timedelta(seconds=2_500)), ("time", "<", T0 + timedelta(seconds=6_001))], 2),
        ([("time", ">=", T0 + timedelta(seconds=3_000)), ("connector", "=", "c2")], 9),  # c2 in every group
        ([("principal", "=", "nobody")], 0),
    ],
)
def test_a_count_in_a_large_file_reads_only_the_row_groups_at_its_edges(
    tmp_path: Path, filters: list[tuple[str, str, Any]], groups_read: int
) -> None:
    """A count of a stretch of time in a compacted file counts the row groups inside the stretch from their
    statistics and reads only those its edges cut, kept (the same count again reads nothing); a count of the full
    read's rows is the oracle."""
    from deltalake import WriterProperties, write_deltalake

    from connect_state.tables.scan import filter_expression

    rows = [audit_row(n) for n in range(WHOLE_FILE_ROWS + 2_000)]  # 12 groups of 1,000 rows, one a second
    write_deltalake(
        tmp_path / AUDIT.name, to_table_rows(rows), writer_properties=WriterProperties(max_row_group_size=1_000)
    )
    scan = TableReader(tmp_path).scan(AUDIT)
    expected = to_table_rows(rows).filter(filter_expression(filters)).num_rows
    assert scan.count(filters) == expected
    assert len(scan.files_read) == groups_read  # one read a row group
    assert scan.count(filters) == expected and len(scan.files_read) == groups_read  # kept


@pytest.mark.parametrize(
    "filters",
    [
        [],
        [("connector", "=", "c2")],
        [("connector", "!=", "c2"), ("time", ">=", T0 + timedelta(seconds=30))],
        [("time", "<", T0 + timedelta(seconds=12)), ("status", ">", 204)],
        [("status", "<=", 204)],
        [("principal", "in", ["alice", "nobody"])],
        [("principal", "not in", ["alice"]), ("connector", "==", "c1")],
    ],
)
def test_rows_filtered_in_memory_are_those_pyarrows_expression_selects(filters: list[tuple[str, str, Any]]) -> None:
    """:func:`filter_rows` (a mask, column by column) against pyarrow's evaluation of :func:`filter_expression` (the
    oracle) on a table of many pieces, as a page's kept files are, nulls included."""
    rows = [audit_row(n) for n in range(60)]
    for row in rows[::5]:
        row["status"] = 500
    for row in rows[::7]:
        row["status"] = None  # a refusal written before any answer: no status
    for row in rows[::11]:
        row["principal"] = None
    table = to_table_rows(rows)
    pieces = pa.concat_tables([table.slice(start, 4) for start in range(0, 60, 4)])  # 15 chunks
    expression = filter_expression(filters)
    expected = pieces.filter(expression) if expression is not None else pieces
    assert filter_rows(pieces, filters).to_pylist() == expected.to_pylist()
    assert 0 < expected.num_rows < 60 or not filters
