"""Benchmark: what the API's first read after a commit that changes one connector costs as the table grows (issue 11
§4, the API's side: "the API reloads only what changed, not the whole table per commit").

For ``--small`` and then ``--large`` connectors, in one run, a ``connectors`` table shaped as the connector-states job
leaves it after a catch-up (one row a connector with its config and four task statuses, in ``--files`` data files: the
job's Spark write gives one file per shuffle partition, two by default) is read by the API's
:class:`connect_state.tables.reader.TableReader`; then ``--commits`` times, one connector's row is changed by a
``deltalake`` MERGE (the jobs' small writes, :mod:`connect_state.tables.small_writes`) and the first ``GET``-shaped read
of that connector (``rows(connectors, name = ...)``) is timed: that read loads the new version. The baseline of the same
run is a full read of the same version (``DeltaTable.to_pyarrow_table``: what every reload cost before). Each answer is
checked against the change made. Printed last: ours at the large size over ours at the small (issue 11 §4 asks ≤ 2.0
from 1,000 to 100,000 connectors), and ours over the full read at the large size. Nothing here is a pass/fail threshold.

    .venv/bin/python bench/api_reload.py --small 1000 --large 100000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from bench.common import BenchError, add_work_dir_argument, check_arguments, in_work_dir, load_average, machine_lines
from connect_state.tables.reader import TableReader
from connect_state.tables.schemas import CONNECTORS

WORKER = "127.0.0.1:8083"


def connector_rows(first: int, count: int, state: str = "RUNNING") -> pa.Table:
    """``count`` rows of ``connectors`` from connector number ``first``: FileStream sources of four running tasks."""
    config = json.dumps(
        {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "4",
            "file": f"/var/data/input-{first}.txt",
            "topic": "lines",
        }
    )
    rows: list[dict[str, Any]] = []
    for number in range(first, first + count):
        tasks = [
            {"id": t, "state": state, "worker_id": WORKER, "trace": None, "generation": 3, "version": "4.3.1"}
            for t in range(4)
        ]
        rows.append(
            {
                "name": connector_name(number),
                "type": "source",
                "connector_class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "config": config,
                "target_state": "STARTED",
                "task_count": 4,
                "task_configs": "{}",
                "inconsistent": False,
                "connector_state": state,
                "connector_worker_id": WORKER,
                "connector_generation": 3,
                "connector_version": "4.3.1",
                "tasks": tasks,
                "deleted": False,
                "config_offset": number,
            }
        )
    return pa.Table.from_pylist(rows, schema=CONNECTORS.schema)


def connector_name(number: int) -> str:
    return f"connector-{number:07d}"


def measure_size(root: Path, connectors: int, files: int, commits: int) -> tuple[float, float]:
    """(median ms of our first read after a one-connector commit, median ms of a full read of the same versions)."""
    path = root / CONNECTORS.name
    per_file = -(-connectors // files)
    for first in range(0, connectors, per_file):
        write_deltalake(str(path), connector_rows(first, min(per_file, connectors - first)), mode="append")
    reader = TableReader(root)
    started = time.perf_counter()
    reader.rows(CONNECTORS, [("name", "=", connector_name(0))])
    print(f"  first load: {(time.perf_counter() - started) * 1000:.1f} ms", flush=True)
    ours: list[float] = []
    full: list[float] = []
    for commit in range(commits):
        number = (commit * 7919 + 1) % connectors
        state = "PAUSED" if commit % 2 == 0 else "RUNNING"
        merge = DeltaTable(str(path)).merge(
            connector_rows(number, 1, state), "t.name = s.name", source_alias="s", target_alias="t"
        )
        merge.when_matched_update_all().execute()
        started = time.perf_counter()
        [row] = reader.rows(CONNECTORS, [("name", "=", connector_name(number))])
        ours.append((time.perf_counter() - started) * 1000)
        if row["connector_state"] != state:
            raise BenchError(f"{connector_name(number)}: read {row['connector_state']}, committed {state}")
        started = time.perf_counter()
        DeltaTable(str(path)).to_pyarrow_table(columns=CONNECTORS.column_names)
        full.append((time.perf_counter() - started) * 1000)
    print(
        f"  first read after a one-connector commit: median {statistics.median(ours):.1f} ms "
        f"(min {min(ours):.1f}, max {max(ours):.1f}); full read of the same versions: median "
        f"{statistics.median(full):.1f} ms; {len(DeltaTable(str(path)).file_uris())} data files",
        flush=True,
    )
    return statistics.median(ours), statistics.median(full)


def measure(args: argparse.Namespace, work_dir: Path) -> None:
    for line in machine_lines(None, "none (no Spark: the API's reader)"):
        print(line, flush=True)
    results: dict[int, tuple[float, float]] = {}
    for connectors in (args.small, args.large):
        print(f"--- {connectors:,} connectors in {args.files} files (load average {load_average()})", flush=True)
        root = work_dir / f"delta-{connectors}"
        root.mkdir()
        results[connectors] = measure_size(root, connectors, args.files, args.commits)
    small, large = results[args.small][0], results[args.large][0]
    print(
        f"api reload: first read after a one-connector commit {small:.1f} ms at {args.small:,} connectors, "
        f"{large:.1f} ms at {args.large:,}; ratio {large / small:.2f}; "
        f"ours/full read at {args.large:,}: {large / results[args.large][1]:.2f}",
        flush=True,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/api_reload.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--small", type=int, default=1_000, help="connectors of the small table (1000)")
    parser.add_argument("--large", type=int, default=100_000, help="connectors of the large table (100000)")
    parser.add_argument("--files", type=int, default=2, help="data files the table starts with (2)")
    parser.add_argument("--commits", type=int, default=9, help="one-connector commits measured per size (9)")
    add_work_dir_argument(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def run(work_dir: Path) -> None:
        check_arguments(
            (
                (0 < args.small < args.large, "--small must be positive and below --large"),
                (args.files > 0 and args.commits > 0, "--files and --commits must be positive"),
            )
        )
        measure(args, work_dir)

    return in_work_dir("bench/api_reload.py", args.work_dir, run)


if __name__ == "__main__":
    sys.exit(main())
