"""Benchmark: what keeping the fleet's tables costs, and what a query over them costs, against the clusters' own tables.

``--clusters`` clusters each have a ``connectors`` table (a MERGE per round, as the connector-states fold writes it)
and a ``connector_events`` table (an append per round), written through ``deltalake`` as the jobs' small batches are.
After each of ``--rounds`` rounds, each cluster's pass of the ``fleet_tables`` job
(:class:`connect_state.tables.fleet_tables.ClusterPartition`) is timed, (b), against the baseline (a): bringing the
same cluster's tables up to date and listing their files (``update_incremental`` and ``get_add_actions``), which any
reader of those tables does to know what they hold. Then the query "which connectors are PAUSED, anywhere" runs
``--repeat`` times through delta-rs's DataFusion reader (``QueryBuilder``): (c) over the fleet's ``connectors`` table,
(d) over each cluster's own table, the answers put together. Every answer of (c) is checked against (d), and the
fleet's rows against each cluster's own table. Printed: the medians, b/a, b over (w) the round's own writes (what
the cluster's jobs committed to the two tables), c/d, and what a pass costs at ``fleet.sync.interval.ms`` (10 s) as a
share of one core. Nothing here is a pass/fail threshold.

    .venv/bin/python bench/fleet_tables.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder

from bench.common import BenchError, add_work_dir_argument, check_arguments, in_work_dir, load_average, machine_lines
from connect_state.core.storage import Location
from connect_state.tables import small_writes
from connect_state.tables.fleet_tables import ClusterPartition
from connect_state.tables.merge_spec import MergeSpec, matched_update, not_matched_insert, source_values
from connect_state.tables.schemas import CONNECTOR_EVENTS, CONNECTORS, TABLE_PROPERTIES

TABLES = (CONNECTORS, CONNECTOR_EVENTS)
STATE_MERGE = MergeSpec(
    "t.name = s.name",
    (
        matched_update(source_values(["connector_state", "target_state"])),
        not_matched_insert(source_values(["name", "connector_state", "target_state"])),
    ),
)
PAUSED_SQL = "SELECT {cluster}name FROM t WHERE connector_state = 'PAUSED'"
INTERVAL_S = 10.0


def cluster_ids(count: int) -> list[str]:
    return [f"cluster-{n}" for n in range(count)]


def write_round(root: Location, round_no: int, connectors: int, events: int) -> None:
    """One round of a cluster's jobs: a few connectors change state (a MERGE) and their events are appended."""
    changed = [f"connector-{(round_no * 7 + i) % connectors}" for i in range(5)]
    state = "PAUSED" if round_no % 2 else "RUNNING"
    rows = [{"name": name, "connector_state": state, "target_state": state} for name in changed]
    source = pa.Table.from_pylist(rows, schema=pa.schema([("name", pa.string()), ("connector_state", pa.string()),
                                                          ("target_state", pa.string())]))  # fmt: skip
    small_writes.merge_rows(source, str(root / CONNECTORS.name), STATE_MERGE)
    event_rows = [
        {
            "connector": changed[i % len(changed)],
            "event": "status_changed",
            "source": "status",
            "kafka_partition": 0,
            "kafka_offset": round_no * events + i,
        }
        for i in range(events)
    ]
    small_writes.append(
        pa.Table.from_pylist(event_rows, schema=CONNECTOR_EVENTS.schema), str(root / CONNECTOR_EVENTS.name)
    )


def list_files(tables: dict[str, DeltaTable]) -> int:
    files = 0
    for table in tables.values():
        table.update_incremental()
        files += pa.table(table.get_add_actions(flatten=True)).num_rows
    return files


def paused(table: DeltaTable, with_cluster: bool) -> list[tuple[str, str]]:
    sql = PAUSED_SQL.format(cluster="cluster, " if with_cluster else "")
    rows = pa.table(QueryBuilder().register("t", table).execute(sql).read_all()).to_pylist()
    return [(row.get("cluster", ""), row["name"]) for row in rows]


def measure(args: argparse.Namespace, work_dir: Path) -> None:
    for line in machine_lines(None, "none"):
        print(line)
    ids = cluster_ids(args.clusters)
    roots = {cluster: Location(str(work_dir / "delta" / "clusters" / cluster)) for cluster in ids}
    fleet_root = Location(str(work_dir / "delta" / "fleet"))
    for root in roots.values():
        for spec in TABLES:
            small_writes.open_or_create(str(root / spec.name), spec, TABLE_PROPERTIES)
    partitions = {c: ClusterPartition(roots[c], fleet_root, c, tables=TABLES) for c in ids}
    readers = {c: {spec.name: DeltaTable(str(roots[c] / spec.name)) for spec in TABLES} for c in ids}
    baseline: list[float] = []
    writes: list[float] = []
    synced: list[float] = []
    for round_no in range(args.rounds):
        for cluster in ids:
            started = time.perf_counter()
            write_round(roots[cluster], round_no, args.connectors, args.events)
            writes.append(time.perf_counter() - started)
        for cluster in ids:
            started = time.perf_counter()
            list_files(readers[cluster])
            baseline.append(time.perf_counter() - started)
            started = time.perf_counter()
            partitions[cluster].sync()
            synced.append(time.perf_counter() - started)
    files = sum(list_files(readers[c]) for c in ids)
    print(f"{args.clusters} clusters, {args.rounds} rounds: {files} data files in their tables; load {load_average()}")

    fleet = DeltaTable(str(fleet_root / CONNECTORS.name))
    own = {c: DeltaTable(str(roots[c] / CONNECTORS.name)) for c in ids}
    fleet_times, own_times = [], []
    for _ in range(args.repeat):
        started = time.perf_counter()
        fleet.update_incremental()
        from_fleet = sorted(paused(fleet, True))
        fleet_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        together = []
        for cluster, table in own.items():
            table.update_incremental()
            together += [(cluster, name) for _, name in paused(table, False)]
        own_times.append(time.perf_counter() - started)
        if from_fleet != sorted(together):
            raise BenchError(f"check failed: the fleet says {from_fleet}, the clusters' tables {sorted(together)}")
    for cluster in ids:  # every row of the fleet's partition is the cluster's own
        mine = sorted(
            pa.table(
                QueryBuilder().register("t", own[cluster]).execute("SELECT name, connector_state FROM t").read_all()
            ).to_pylist(),
            key=repr,
        )
        sql = f"SELECT name, connector_state FROM t WHERE cluster = '{cluster}'"
        listed = sorted(pa.table(QueryBuilder().register("t", fleet).execute(sql).read_all()).to_pylist(), key=repr)
        if listed != mine:
            raise BenchError(f"check failed: the fleet's {cluster} partition differs from its own table")

    a, b = statistics.median(baseline), statistics.median(synced)
    c, d = statistics.median(fleet_times), statistics.median(own_times)
    print(f"(a) a cluster's tables brought up to date and listed, median of {len(baseline)}: {a * 1000:.1f} ms")
    print(f"(b) a cluster's fleet_tables pass (the same, and its commits), median of {len(synced)}: {b * 1000:.1f} ms"
          f" (max {max(synced) * 1000:.1f} ms)")  # fmt: skip
    print(f"ratio b/a: {b / a:.2f}")
    w = statistics.median(writes)
    print(f"(w) the round's own writes of a cluster's jobs (a MERGE and an append), median: {w * 1000:.1f} ms")
    print(f"ratio b/w: {b / w:.2f}")
    print(f"a pass every {INTERVAL_S:.0f} s: {b / INTERVAL_S * 100:.2f} % of one core per cluster")
    print(f"(c) PAUSED anywhere, over the fleet's table, median of {len(fleet_times)}: {c * 1000:.1f} ms")
    print(f"(d) the same over each cluster's own table, put together: {d * 1000:.1f} ms")
    print(f"ratio c/d: {c / d:.2f}", flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/fleet_tables.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=2, help="clusters (default 2)")
    parser.add_argument("--rounds", type=int, default=100, help="rounds of writes and passes (default 100)")
    parser.add_argument("--connectors", type=int, default=500, help="connectors per cluster (default 500)")
    parser.add_argument("--events", type=int, default=50, help="events appended per round and cluster (default 50)")
    parser.add_argument("--repeat", type=int, default=20, help="fleet queries timed (default 20)")
    add_work_dir_argument(parser)
    parser.add_argument("--keep-dir", action="store_true", help="keep the temporary directory")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_arguments(
        [
            (args.clusters > 0 and args.rounds > 0 and args.connectors > 0, "sizes must be positive"),
            (args.events > 0 and args.repeat > 0, "--events and --repeat must be positive"),
        ]
    )
    return in_work_dir("bench/fleet_tables.py", args.work_dir, lambda d: measure(args, d), keep=args.keep_dir)


if __name__ == "__main__":
    sys.exit(main())
