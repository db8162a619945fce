"""Benchmark: the jobs' tables after many small commits, with and without their compaction (issue 34, target 4: "after
10,000 small commits to each table the compaction keeps its file count bounded and the API's first read after a commit
no slower than after 100").

Two variants in one run, each in its own directory: ``plain`` (no compaction) and ``compacted`` (the jobs'
maintenance, :func:`connect_state.tables.maintenance.compact_table` with ``--small-files`` and ``--file-bytes``,
checked every ``--check-every`` commits: the default 60 is ``table.compact.check.interval.ms``'s 60 s at a 1 s
trigger). Each variant makes ``--commits`` commits to two tables shaped as the active-topics job writes them, with
``deltalake`` directly (appends, a checkpoint every 10 versions as the jobs' small writes make):

* ``active_topics_history``: each commit appends a batch's ``--rows`` changes (one connector of 50 in turn, Kafka
  offsets in order): one small file a commit, as the jobs' history appends;
* ``active_topics``: each commit adds one new connector's row: the one small file a MERGE of a new key writes (so its
  rows grow from 100 to 10,000 with the commits; a MERGE of an existing key rewrites the file that holds it).

After ``--early`` commits and after ``--commits``, ``--repeat`` times: the API's reader
(:class:`connect_state.tables.reader.TableReader`, already loaded at the version before) sees one more commit per table
made as the jobs make it (:func:`connect_state.tables.small_writes.merge_once`: a MERGE changing an existing connector's
task; :func:`~connect_state.tables.small_writes.append_once`: a history batch), and its first read is timed:
``GET /connectors/<name>/topics``'s read of ``active_topics`` (``rows``, one connector), ``GET
/connectors/<name>/topics?at=``'s of ``active_topics_history`` (``scan`` + the connector's rows: an answer that grows
with the commits, a fiftieth of the history's rows) and, after one more history commit, a read of the history's last
minute (``kafka_timestamp`` bounded: a constant answer, the two batches just made). Each answer is checked against the
commits. Medians; printed last, per table and variant, the read after ``--commits`` over the read after
``--early``, and the data files then. Nothing here is a pass/fail threshold.

    .venv/bin/python bench/table_growth.py --commits 10000 --early 100 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from bench.common import BenchError, add_work_dir_argument, check_arguments, in_work_dir, load_average, machine_lines
from connect_state.spark.active_topics import CURRENT_MERGE
from connect_state.tables import small_writes
from connect_state.tables.history_reads import table_rows
from connect_state.tables.maintenance import CompactionPolicy, compact_table, file_sizes
from connect_state.tables.reader import TableReader
from connect_state.tables.schemas import ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, TABLE_PROPERTIES, timestamp

HISTORY_CONNECTORS = 50
T0 = 1_790_000_000_000
APP = "connect-state:active_topics:bench:"


def history_rows(commit: int, rows: int) -> pa.Table:
    at = timestamp(T0 + commit * 1000)
    return pa.Table.from_pylist(
        [
            {"connector": history_connector(commit), "topic": f"topic-{j}", "change": "added", "task": j,
             "discover_timestamp": T0 + commit, "changed_at": at, "kafka_partition": 0,
             "kafka_offset": commit * rows + j, "kafka_timestamp": at}
            for j in range(rows)
        ],
        schema=ACTIVE_TOPICS_HISTORY.schema,
    )  # fmt: skip


def history_connector(commit: int) -> str:
    return f"connector-{commit % HISTORY_CONNECTORS:05d}"


def current_rows(number: int, task: int, with_change: bool = False) -> pa.Table:
    row = {"connector": f"connector-{number:05d}", "topic": "orders", "task": task, "discover_timestamp": T0 + number,
           "updated_at": timestamp(T0 + number), "kafka_partition": 0, "kafka_offset": number}  # fmt: skip
    schema = ACTIVE_TOPICS.schema
    if with_change:
        row["change"] = "updated"
        schema = pa.schema([*schema, ("change", pa.string())])
    return pa.Table.from_pylist([row], schema=schema)


@dataclass
class Variant:
    name: str
    root: Path
    policy: CompactionPolicy | None
    commits: int = 0
    compactions: int = 0
    compaction_s: float = 0.0
    reads: dict[tuple[int, str], float] = field(default_factory=dict)
    files: dict[tuple[int, str], int] = field(default_factory=dict)

    def path(self, name: str) -> str:
        return str(self.root / name)

    def create(self) -> None:
        for spec in (ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY):
            small_writes.open_or_create(self.path(spec.name), spec, TABLE_PROPERTIES)
        self.reader = TableReader(self.root)

    def commit(self, path: str, rows: pa.Table) -> None:
        """One append with deltalake directly (the table kept open), a checkpoint every 10 versions."""
        with small_writes.commit_lock(path):
            table = small_writes.latest(path)
            write_deltalake(table, rows, mode="append")
            if table.version() % small_writes.CHECKPOINT_INTERVAL == 0:
                table.create_checkpoint()

    def grow(self, until: int, rows: int, check_every: int) -> None:
        while self.commits < until:
            n = self.commits
            self.commit(self.path(ACTIVE_TOPICS_HISTORY.name), history_rows(n, rows))
            self.commit(self.path(ACTIVE_TOPICS.name), current_rows(n, 0))
            self.commits += 1
            if self.policy is not None and self.commits % check_every == 0:
                started = time.perf_counter()
                for spec in (ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY):
                    if compact_table(self.path(spec.name), self.policy) is not None:
                        self.compactions += 1
                self.compaction_s += time.perf_counter() - started

    def measure(self, point: int, rows: int, repeat: int, batch: int) -> None:
        """``repeat`` commits per table as the jobs make them, the reader's first read after each timed."""
        current, history = self.path(ACTIVE_TOPICS.name), self.path(ACTIVE_TOPICS_HISTORY.name)
        times: dict[str, list[float]] = {"current": [], "history": [], "history, last minute": []}
        for r in range(repeat):
            number = (r * 37 + 11) % self.commits  # an existing connector
            name = f"connector-{number:05d}"
            self.reader.rows(ACTIVE_TOPICS, [("connector", "=", name)])  # the reader at the version before
            table_rows(self.reader.scan(ACTIVE_TOPICS_HISTORY), ACTIVE_TOPICS_HISTORY, [("connector", "=", name)])
            task = batch + r + 1
            small_writes.merge_once(current_rows(number, task, True), current, CURRENT_MERGE, APP + "c", task)
            started = time.perf_counter()
            got = self.reader.rows(ACTIVE_TOPICS, [("connector", "=", name)])
            times["current"].append((time.perf_counter() - started) * 1000)
            if [row["task"] for row in got] != [task]:
                raise BenchError(f"{self.name}: {name} read {got}, committed task {task}")
            commit = 1_000_000 + 200 * (batch + r)  # a history batch past every other, 200 s after the last
            small_writes.append_once(history_rows(commit, rows), history, APP + "h", task)
            asked = history_connector(commit)
            started = time.perf_counter()
            found = table_rows(
                self.reader.scan(ACTIVE_TOPICS_HISTORY), ACTIVE_TOPICS_HISTORY, [("connector", "=", asked)]
            )
            times["history"].append((time.perf_counter() - started) * 1000)
            if not any(row["kafka_offset"] == commit * rows for row in found):
                raise BenchError(f"{self.name}: the history batch {commit} is not read")
            # The same after the next commit, bounded by time: the last minute's changes (the two batches just made).
            commit += 1
            small_writes.append_once(history_rows(commit, rows), history, APP + "h2", task)
            recent = [("kafka_timestamp", ">=", timestamp(T0 + commit * 1000 - 60_000))]
            started = time.perf_counter()
            found = table_rows(self.reader.scan(ACTIVE_TOPICS_HISTORY), ACTIVE_TOPICS_HISTORY, recent)
            times["history, last minute"].append((time.perf_counter() - started) * 1000)
            if sorted(row["kafka_offset"] for row in found) != list(range((commit - 1) * rows, (commit + 1) * rows)):
                raise BenchError(f"{self.name}: the last minute's history reads {len(found)} rows")
        for table, path in (("current", current), ("history", history), ("history, last minute", history)):
            self.reads[(point, table)] = statistics.median(times[table])
            self.files[(point, table)] = len(file_sizes(DeltaTable(path)))
            on_disk = len(list(Path(path).glob("*.parquet")))
            print(
                f"  {self.name} after {point:,} commits: {table} first read after a commit median "
                f"{self.reads[(point, table)]:.1f} ms ({', '.join(f'{t:.1f}' for t in times[table])}); "
                f"{self.files[(point, table)]:,} data files ({on_disk:,} on disk)",
                flush=True,
            )


def measure(args: argparse.Namespace, work_dir: Path) -> None:
    for line in machine_lines(None, "none (no Spark: deltalake and the API's reader)"):
        print(line, flush=True)
    policy = CompactionPolicy(args.small_files, args.file_bytes)
    variants = [
        Variant(name, work_dir / name, policy if name == "compacted" else None)
        for name in ("plain", "compacted")
        if args.variant in (name, "both")
    ]
    for variant in variants:
        variant.root.mkdir()
        variant.create()
    points = sorted({args.early, *args.also, args.commits})
    for point in points:
        for variant in variants:
            started = time.perf_counter()
            variant.grow(point, args.rows, args.check_every)
            print(
                f"--- {variant.name}: {point:,} commits a table ({time.strftime('%H:%M:%S', time.gmtime())} UTC, "
                f"growing took {time.perf_counter() - started:.0f} s, {variant.compactions} compactions in "
                f"{variant.compaction_s:.1f} s; load average {load_average()})",
                flush=True,
            )
            variant.measure(point, args.rows, args.repeat, point * 10)
        if point != args.early:
            ratios(variants, args.early, point)


def ratios(variants: list[Variant], early: int, late: int) -> None:
    """Per variant and table: the first read after ``late`` commits over the one after ``early`` (the last lines of
    the run are the ratios at ``--commits``; those at ``--also`` points are printed as they are reached)."""
    for variant in variants:
        for table in ("current", "history", "history, last minute"):
            first, last = variant.reads[(early, table)], variant.reads[(late, table)]
            print(
                f"table growth: {variant.name} {table}: first read after a commit {first:.1f} ms after "
                f"{early:,} commits, {last:.1f} ms after {late:,}; data files "
                f"{variant.files[(early, table)]:,} -> {variant.files[(late, table)]:,}; ratio {last / first:.2f}",
                flush=True,
            )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/table_growth.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=10_000, help="commits to each table (10000)")
    parser.add_argument("--early", type=int, default=100, help="the early point measured (100)")
    parser.add_argument(
        "--also",
        type=lambda text: [int(x) for x in text.split(",") if x],
        default=[1_000, 2_500, 5_000],
        help="points measured between --early and --commits, comma-separated (1000,2500,5000)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="measured commits per point and table (3)")
    parser.add_argument("--rows", type=int, default=3, help="history rows a commit (3)")
    parser.add_argument("--small-files", type=int, default=50, help="table.compact.small.files (50)")
    parser.add_argument("--file-bytes", type=int, default=16 << 20, help="table.compact.file.bytes (16 MiB)")
    parser.add_argument("--check-every", type=int, default=60, help="commits between compaction checks (60)")
    parser.add_argument("--variant", choices=("both", "plain", "compacted"), default="both", help="(both)")
    add_work_dir_argument(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def run(work_dir: Path) -> None:
        check_arguments(
            (
                (0 < args.early < args.commits, "--early must be positive and below --commits"),
                (all(args.early < x < args.commits for x in args.also), "--also must be between --early and --commits"),
                (args.repeat > 0 and args.rows > 0, "--repeat and --rows must be positive"),
                (args.small_files > 0 and args.check_every > 0, "--small-files and --check-every must be positive"),
            )
        )
        measure(args, work_dir)

    return in_work_dir("bench/table_growth.py", args.work_dir, run)


if __name__ == "__main__":
    sys.exit(main())
