"""Benchmark: what one page of ``GET /audit`` costs as the audit table grows (issue 33, finding 7: every history and
audit query bounded by its filters and page before it reads).

In one run, an audit table of ``--small`` and one of ``--large`` rows are written as the API's spool flusher writes
them (:class:`connect_state.tables.audit_table.AuditTable`: appends in time order, ``--rows-per-file`` rows per data
file, i.e. per flush), each row shaped like a real one (a JSON body of a few hundred bytes, 50 connectors, 3
principals). Then, on each table, ``--repeat`` times: the API's page (:meth:`AuditTable.page`: the newest 100 rows and
the total) for each query below, timed from a fresh :class:`~connect_state.tables.reader.TableReader` (the first read
of a version, the table's log replayed: what a request after a commit costs) and again warm; and the baseline of the
same run, the full read the API did before (every row of the table loaded, converted and sorted in Python,
:meth:`AuditTable.rows`). Each page is checked against the full read's answer on the small table. Printed last, per
query: the median at ``--large`` over the median at ``--small`` (the target: about 1), and ours over the full read at
``--large``. Nothing here is a pass/fail threshold.

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
}


def _ms(second: int) -> int:
    return int((T0 + timedelta(seconds=max(0, second))).timestamp() * 1000)


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


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
        full_rows: list[dict[str, Any]] | None = None
        for name, make in QUERIES.items():
            query = make(rows)
            cold, warm = [], []
            for _ in range(args.repeat):
                table = AuditTable(settings, spool)  # a fresh reader: the log replayed, nothing kept
                took, answer = timed(lambda table=table, query=query: table.page(query))
                cold.append(took)
                took, again = timed(lambda table=table, query=query: table.page(query))
                warm.append(took)
                assert again == answer
            files = len(AuditTable(settings, spool).reader.scan(AUDIT).source.files())
            read = _files_read(settings, spool, query)
            if rows == args.small:
                full_rows = full_rows if full_rows is not None else AuditTable(settings, spool).rows()
                check = select_rows(full_rows, **vars(query))
                assert answer == check, name
            medians[(name, rows, "cold")] = statistics.median(cold)
            medians[(name, rows, "warm")] = statistics.median(warm)
            print(
                f"{name:>20}: total {answer[0]:>9,}, {len(answer[1])} rows; median "
                f"{statistics.median(cold) * 1000:7.1f} ms first read, {statistics.median(warm) * 1000:7.1f} ms again; "
                f"{read} file reads (count and page) of {files:,} files",
                flush=True,
            )
        full = []
        for _ in range(1 if rows == args.large else min(args.repeat, 3)):
            table = AuditTable(settings, spool)
            took, answer = timed(lambda table=table: select_rows(table.rows(), limit=100))
            full.append(took)
        medians[("full read", rows, "cold")] = statistics.median(full)
        print(
            f"{'baseline full read':>20}: total {answer[0]:>9,}; median {statistics.median(full) * 1000:7.1f} ms",
            flush=True,
        )
    print(f"load average {load_average()}", flush=True)
    for name in QUERIES:
        for when in ("cold", "warm"):
            small, large = medians[(name, args.small, when)], medians[(name, args.large, when)]
            print(
                f"{name} ({'first read' if when == 'cold' else 'again'}): {small * 1000:.1f} ms at {args.small:,} "
                "rows, "
                f"{large * 1000:.1f} ms at {args.large:,}; ratio large/small {large / small:.2f}; ours / full read at "
                f"{args.large:,}: {large / medians[('full read', args.large, 'cold')]:.3f}",
                flush=True,
            )


def _files_read(settings: Any, spool: Path, query: AuditQuery) -> int:
    table = AuditTable(settings, spool)
    table.page(query)
    return len(table.reader.scan(AUDIT).files_read)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/audit_page.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1_000, help="rows of the small table (1000)")
    parser.add_argument("--large", type=int, default=1_000_000, help="rows of the large table (1000000)")
    parser.add_argument("--rows-per-file", type=int, default=1_000, help="rows per data file, i.e. per flush (1000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed pages per query and table (5)")
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
