"""Benchmark: what one page of ``GET /audit`` costs as the audit table grows (issue 33, finding 7: every history and
audit query bounded by its filters and page before it reads).

In one run, an audit table of ``--small`` and one of ``--large`` rows are written as the API's spool flusher writes
them (:class:`connect_state.tables.audit_table.AuditTable`: appends in time order, ``--rows-per-file`` rows per data
file, i.e. per flush), each row shaped like a real one (a JSON body of a few hundred bytes, 50 connectors, 3
principals). Then, on each table, with one :class:`AuditTable` as an API process keeps it, ``--repeat`` times per
query below: one more flush is committed (one row), and the API's page (:meth:`AuditTable.page`: the newest 100 rows
matching and the total) is timed right after that commit and again on the same version; the baseline of the same run
is the full read the API did before (every row loaded, converted and sorted in Python, :meth:`AuditTable.rows`, then
:func:`connect_state.api.audit.select_rows`). Each page is checked against the full read's answer on the small
table. Each table is measured twice: as the flusher wrote it, then after the flusher's compaction
(:meth:`AuditTable.compact` with the default ``api.audit.compact.*``: more than 100 small files older than the newest
10 rewritten sorted by time as files of about 100 MiB; timed; pages checked again on the small table). Printed last,
per phase and query: the median at ``--large`` over the median at ``--small`` (the target: about 1), and ours over the
full read at ``--large``. The filtered queries run twice: with 100-row pages (the small table fills only 20 and 33 of
them) and with 20-row pages, which both tables fill. Nothing here is a pass/fail threshold.

    .venv/bin/python bench/audit_page.py --small 1000 --large 1000000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import pyarrow as pa
from deltalake import write_deltalake

from bench.common import check_arguments, in_work_dir, load_average, machine_lines
from connect_state.api.audit import select_rows
from connect_state.core.settings import load_settings
from connect_state.tables.audit_table import AuditQuery, AuditTable
from connect_state.tables.schemas import AUDIT

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CONNECTORS, PRINCIPALS = 50, ("alice", "bob", "ci-bot")


def audit_rows(first: int, count: int) -> pa.Table:
    """Rows ``first`` .. ``first + count - 1`` of the table, one a second, as the API writes them."""
    numbers = np.arange(first, first + count)
    times = pa.array((T0.timestamp() * 1_000_000 + numbers * 1_000_000).astype("int64")).cast(
        AUDIT.schema.field("time").type
    )
    connectors = [f"orders-{n % CONNECTORS}" for n in numbers]
    body = '{"connector.class":"io.confluent.connect.jdbc.JdbcSinkConnector","tasks.max":"4","topics":"orders",' + (
        '"connection.url":"jdbc:postgresql://db:5432/shop","connection.password":"[hidden]"}'
    )
    columns: dict[str, Any] = {name: pa.nulls(count, AUDIT.schema.field(name).type) for name in AUDIT.column_names}
    columns.update(
        id=pa.array([f"{n:032x}" for n in numbers]),
        time=times,
        principal=pa.array([PRINCIPALS[n % 3] for n in numbers]),
        auth=pa.array(["basic"] * count),
        remote_addr=pa.array(["10.0.0.7"] * count),
        method=pa.array(["PUT"] * count),
        path=pa.array([f"/connectors/{c}/config" for c in connectors]),
        query=pa.array([""] * count),
        endpoint=pa.array(["connectors.put_connector_config"] * count),
        connector=pa.array(connectors),
        role=pa.array(["operate"] * count),
        body=pa.array([body] * count),
        status=pa.array([200 if n % 10 else 409 for n in numbers], pa.int32()),
        outcome=pa.array(["succeeded" if n % 10 else "failed" for n in numbers]),
        written=pa.array([f'[{{"topic":"connect-configs","partition":0,"offset":{n},"key":"x"}}]' for n in numbers]),
        target_state_before=pa.array(["STARTED"] * count),
        connector_state_before=pa.array(["RUNNING"] * count),
    )
    return pa.table(columns, schema=AUDIT.schema)


def write_table(delta_root: Path, rows: int, per_file: int) -> float:
    """The table of ``rows`` rows, one append (one data file) per ``per_file`` rows, in time order; seconds taken."""
    started = time.perf_counter()
    chunk = max(per_file, 100_000 // per_file * per_file)  # rows built at once
    for first in range(0, rows, chunk):
        data = audit_rows(first, min(chunk, rows - first))
        for start in range(0, data.num_rows, per_file):
            write_deltalake(delta_root / AUDIT.name, data.slice(start, per_file), mode="append")
    return time.perf_counter() - started


QUERIES: dict[str, Callable[[int], AuditQuery]] = {
    "newest 100": lambda rows: AuditQuery(limit=100),
    "since 1 h ago": lambda rows: AuditQuery(since=_ms(rows - 3600), limit=100),
    "connector=orders-7": lambda rows: AuditQuery(connector="orders-7", limit=100),
    "principal+outcome": lambda rows: AuditQuery(principal="bob", outcome="failed", limit=100),
    # The same filters with pages the small table fills too (it holds 20 rows of a connector, 33 of bob's failures):
    # a 100-row page against a 20-row one costs the 80 rows more, whatever the table's size.
    "connector=orders-7, 20": lambda rows: AuditQuery(connector="orders-7", limit=20),
    "principal+outcome, 20": lambda rows: AuditQuery(principal="bob", outcome="failed", limit=20),
}


PHASES = ("flushed", "compacted")
"""Each table is measured as the flusher wrote it, then after the flusher's compaction (``AuditTable.compact``)."""


def _ms(second: int) -> int:
    return int((T0 + timedelta(seconds=max(0, second))).timestamp() * 1000)


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def append_flush(root: Path, number: int) -> None:
    """One more flush of the spool: one row, the newest (a commit of one data file)."""
    write_deltalake(root / AUDIT.name, audit_rows(number, 1), mode="append")


def measure(args: argparse.Namespace, work_dir: Path) -> None:
    for line in machine_lines(None, "none"):
        print(line, flush=True)
    medians: dict[tuple[str, int, str], float] = {}
    warm_up = work_dir / "delta-warm-up"  # the process's first deltalake and pyarrow calls, charged to neither size
    write_table(warm_up, 2_000, args.rows_per_file)
    AuditTable(load_settings(overrides={"delta.root": str(warm_up)}, environ={}), work_dir / "w.jsonl").page(
        AuditQuery()
    )
    for rows in (args.small, args.large):
        root = work_dir / f"delta-{rows}"
        seconds = write_table(root, rows, args.rows_per_file)
        print(f"--- {rows:,} rows in {-(-rows // args.rows_per_file):,} files (written in {seconds:.1f} s)", flush=True)
        settings = load_settings(overrides={"delta.root": str(root)}, environ={})
        spool = work_dir / f"spool-{rows}.jsonl"
        table = AuditTable(settings, spool)  # the API process's: its reader lives as long as the process
        took, _ = timed(lambda table=table: table.page(AuditQuery()))
        print(f"{'open (log replay)':>20}: {took * 1000:7.1f} ms, once per API process", flush=True)
        took, _ = timed(lambda table=table, rows=rows: table.page(QUERIES["connector=orders-7"](rows)))
        print(
            f"{'first filtered total':>20}: {took * 1000:7.1f} ms, once per API process (every file's value counts)",
            flush=True,
        )
        if rows == args.small:
            full_rows = table.rows()
            for name, make in QUERIES.items():
                assert table.page(make(rows)) == select_rows(full_rows, **vars(make(rows))), name
            print("check: every page equals the full read's answer", flush=True)
        added = rows
        for phase in PHASES:
            if phase == "compacted":
                file_bytes = settings.api_audit_compact_file_bytes
                took, done = timed(lambda table=table, size=file_bytes: table.compact(args.compact_small_files, size))
                print(
                    f"--- compaction ({done.line() if done is not None else 'not due'}) in {took * 1000:.1f} ms",
                    flush=True,
                )
                took, _ = timed(lambda table=table, rows=rows: table.page(QUERIES["connector=orders-7"](rows)))
                print(
                    f"{'first filtered total':>20}: {took * 1000:7.1f} ms after the compaction (new files' counts)",
                    flush=True,
                )
                if rows == args.small:
                    full_rows = table.rows()
                    for name, make in QUERIES.items():
                        assert table.page(make(rows)) == select_rows(full_rows, **vars(make(rows))), name
            for name, make in QUERIES.items():
                query = make(rows)
                after_commit, again = [], []
                for _ in range(args.repeat):
                    append_flush(root, added)
                    added += 1
                    took, answer = timed(lambda query=query, table=table: table.page(query))
                    after_commit.append(took)
                    table.reader.scan(AUDIT).files_read.clear()
                    took, same = timed(lambda query=query, table=table: table.page(query))
                    again.append(took)
                    assert same == answer
                read = len(table.reader.scan(AUDIT).files_read)
                files = len(table.reader.scan(AUDIT).source.stats())
                medians[(name, rows, "cold", phase)] = statistics.median(after_commit)
                medians[(name, rows, "warm", phase)] = statistics.median(again)
                print(
                    f"{phase:>9} {name:>20}: total {answer[0]:>9,}, {len(answer[1])} rows; median "
                    f"{statistics.median(after_commit) * 1000:7.1f} ms after a commit, "
                    f"{statistics.median(again) * 1000:7.1f} ms again; {read} file reads (count and page) of "
                    f"{files:,} files",
                    flush=True,
                )
        full = []
        for _ in range(1 if rows == args.large else min(args.repeat, 3)):
            fresh = AuditTable(settings, spool)
            took, answer = timed(lambda fresh=fresh: select_rows(fresh.rows(), limit=100))
            full.append(took)
        medians[("full read", rows, "cold", "flushed")] = statistics.median(full)
        print(
            f"{'baseline full read':>20}: total {answer[0]:>9,}; median {statistics.median(full) * 1000:7.1f} ms",
            flush=True,
        )
    print(f"load average {load_average()}", flush=True)
    full_large = medians[("full read", args.large, "cold", "flushed")]
    for phase in PHASES:
        for name in QUERIES:
            for when in ("cold", "warm"):
                small, large = medians[(name, args.small, when, phase)], medians[(name, args.large, when, phase)]
                print(
                    f"{phase}: {name} ({'after a commit' if when == 'cold' else 'again'}): {small * 1000:.1f} ms at "
                    f"{args.small:,} rows, {large * 1000:.1f} ms at {args.large:,}; ratio large/small "
                    f"{large / small:.2f}; ours / full read at {args.large:,}: {large / full_large:.4f}",
                    flush=True,
                )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/audit_page.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1_000, help="rows of the small table (1000)")
    parser.add_argument("--large", type=int, default=1_000_000, help="rows of the large table (1000000)")
    parser.add_argument("--rows-per-file", type=int, default=1_000, help="rows per data file, i.e. per flush (1000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed pages per query and table (5)")
    parser.add_argument(
        "--compact-small-files",
        type=int,
        default=100,
        help="api.audit.compact.small.files for the compaction between the two measures (100, the default)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_arguments(
        (
            (0 < args.small < args.large, "--small must be positive and below --large"),
            (args.rows_per_file > 0 and args.repeat > 0, "--rows-per-file and --repeat must be positive"),
        )
    )
    return in_work_dir("bench/audit_page.py", None, lambda work_dir: measure(args, work_dir), keep=args.keep)


if __name__ == "__main__":
    sys.exit(main())
