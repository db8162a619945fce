"""Benchmark: a history read over files a retention pass rewrote through delta-rs, against the same rows in plain files.

delta-rs's MERGE (the retention pass's delete, ``connect_state.tables.retention_io.clean_table``) writes the files it
rewrites with their strings as ``string_view``, which Arrow cannot compare as it reads a file; the API's scans then
read such a file in the table's types and filter it after (:func:`connect_state.tables.scan.read_filtered`), and
filter the others as they are read. In one run, a ``connector_events`` table of ``--files`` files of
``--rows-per-file`` rows (``--connectors`` connectors, each in every file) is written as the jobs append it, and the
real retention pass runs at a cutoff after three quarters of the files' days: it deletes every connector's older
status changes but the newest before the cutoff, rewriting the files that held them. The baseline is a copy of the
table with the same rows in the same files, written plain. On each, with one
:class:`~connect_state.tables.reader.TableReader` as the API keeps it, ``--repeat`` reads of one connector's events
(:func:`connect_state.tables.history_reads.table_rows`, a filter on ``connector``) are timed: (a) the copy, (b) the
cleaned table. Every answer is checked against a full read of the table by deltalake. Printed last: the median of (b)
over (a). Nothing here is a pass/fail threshold.

    .venv/bin/python bench/rewritten_reads.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from bench.common import add_work_dir_argument, check_arguments, in_work_dir, load_average, machine_lines
from connect_state.core.storage import Location
from connect_state.tables.history_reads import table_rows
from connect_state.tables.reader import TableReader
from connect_state.tables.retention import POLICIES
from connect_state.tables.retention_io import clean_table
from connect_state.tables.schemas import CONNECTOR_EVENTS

DAY_MS = 86_400_000
T0_MS = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
POLICY = next(policy for policy in POLICIES if policy.name == CONNECTOR_EVENTS.name)


def events(file: int, rows: int, connectors: int, files: int) -> pa.Table:
    """File ``file``'s rows: every connector's status changes, a day of them per file, in Kafka order."""
    numbers = np.arange(file * rows, (file + 1) * rows)
    at_us = (T0_MS + (file * DAY_MS * 40) // files + numbers % DAY_MS) * 1000
    columns = {
        "connector": [f"connector-{n % connectors}" for n in numbers],
        "event": ["status_changed"] * rows,
        "details": ['{"from": "RUNNING", "to": "FAILED", "trace": "org.apache.kafka.connect.errors..."}'] * rows,
        "source": ["status"] * rows,
        "kafka_partition": pa.array(numbers % 5, pa.int32()),
        "kafka_offset": pa.array(numbers, pa.int64()),
        "kafka_timestamp": pa.array(at_us, pa.int64()).cast(CONNECTOR_EVENTS.schema.field("kafka_timestamp").type),
    }
    full = {name: columns.get(name, pa.nulls(rows, field.type)) for name, field in zip(
        CONNECTOR_EVENTS.schema.names, CONNECTOR_EVENTS.schema, strict=True)}  # fmt: skip
    return pa.table(full, schema=CONNECTOR_EVENTS.schema)


def oracle(path: str, connector: str) -> int:
    data = DeltaTable(path).to_pyarrow_table(columns=["connector"])
    return int(pc.sum(pc.equal(data.column("connector"), connector)).as_py() or 0)


def timed_reads(root: Path, connectors: list[str], path: str) -> list[float]:
    reader = TableReader(root)
    times = []
    for connector in connectors:
        started = time.perf_counter()
        rows = table_rows(reader.scan(CONNECTOR_EVENTS), CONNECTOR_EVENTS, [("connector", "=", connector)])
        times.append(time.perf_counter() - started)
        if len(rows) != oracle(path, connector):
            raise SystemExit(f"check failed: {connector}: {len(rows)} rows, a full read has {oracle(path, connector)}")
    return times


def measure(args: argparse.Namespace, work_dir: Path) -> None:
    for line in machine_lines(None, "none"):
        print(line)
    path = str(work_dir / CONNECTOR_EVENTS.name)
    for file in range(args.files):
        write_deltalake(path, events(file, args.rows_per_file, args.connectors, args.files), mode="append")
    total = args.files * args.rows_per_file
    print(f"table: {total:,} rows in {args.files} files, {args.connectors} connectors; load {load_average()}")
    cutoff = T0_MS + 30 * DAY_MS  # three quarters of the files' days are before it
    started = time.perf_counter()
    cleaned = clean_table(Location.parse(str(work_dir)), POLICY, cutoff)  # the real pass: its own delete MERGE
    print(f"retention: {cleaned.line()} in {time.perf_counter() - started:.2f} s")
    uris = DeltaTable(path).file_uris()
    kinds = [str(pq.read_schema(uri).field("connector").type) for uri in uris]
    print(f"files after it: {kinds.count('string_view')} rewritten (string_view), {kinds.count('string')} plain")

    plain_root = work_dir / "plain"
    plain = str(plain_root / CONNECTOR_EVENTS.name)
    for uri in uris:  # the same rows in the same files, strings stored plain
        write_deltalake(plain, pq.read_table(uri).cast(CONNECTOR_EVENTS.schema), mode="append")
    asked = [f"connector-{(i * 7) % args.connectors}" for i in range(args.repeat)]
    baseline = timed_reads(plain_root, asked, plain)
    rewritten = timed_reads(work_dir, asked, path)

    a, b = statistics.median(baseline), statistics.median(rewritten)
    print(f"(a) one connector's events, the same rows in plain files, median of {len(baseline)}: {a * 1000:.1f} ms")
    print(f"(b) after the retention pass rewrote files, median of {len(rewritten)}: {b * 1000:.1f} ms")
    print(f"ratio b/a: {b / a:.2f}", flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/rewritten_reads.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20, help="data files of the table (default 20)")
    parser.add_argument("--rows-per-file", type=int, default=20_000, help="rows a file (default 20000)")
    parser.add_argument("--connectors", type=int, default=200, help="connectors (default 200)")
    parser.add_argument("--repeat", type=int, default=20, help="reads timed per phase (default 20)")
    add_work_dir_argument(parser)
    parser.add_argument("--keep-dir", action="store_true", help="keep the temporary directory")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_arguments(
        [
            (args.files > 0 and args.rows_per_file > 0 and args.connectors > 0, "sizes must be positive"),
            (args.repeat > 0, "--repeat must be positive"),
        ]
    )
    return in_work_dir("bench/rewritten_reads.py", args.work_dir, lambda d: measure(args, d), keep=args.keep_dir)


if __name__ == "__main__":
    sys.exit(main())
