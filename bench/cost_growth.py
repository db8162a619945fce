"""Benchmark: does a batch that changes one connector cost more as the state grows? (issue 11 §4, cost growth).

For ``--job active_topics`` (state: connectors and their active topics, up to 20 topics a connector) or
``--job source_offsets`` (state: source-offset keys, up to 10 source partitions a connector), in one run on one
broker, :mod:`bench.small_batch` runs twice: with ``--small`` and then ``--large`` connectors
(``--records-per-connector`` records each, caught up in the job's first batch), each time measuring ``--batches``
micro-batches of one record that changes one existing connector. Printed last: the large state's median
``triggerExecution`` over the small state's (issue 11 §4 asks ≤ 2.0 from 1,000 to 100,000 connectors, and from
10,000 to 1,000,000 source-offset keys). Nothing here is a pass/fail threshold.

    .venv/bin/python bench/cost_growth.py --job active_topics --small 1000 --large 100000
    .venv/bin/python bench/cost_growth.py --job source_offsets --small 1000 --large 100000
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import small_batch
from bench.common import add_cluster_arguments, bench_main, check_arguments
from connect_state.core.settings import Settings, add_config_arguments


def measure(args: argparse.Namespace, cluster: Settings, work_dir: Path, topics: list[str]) -> None:
    medians: dict[int, float] = {}
    for connectors in (args.small, args.large):
        run = copy.copy(args)
        run.connectors = connectors
        run.records = connectors * args.records_per_connector
        run.batch_records = 1
        run.idle = 0.0
        print(f"--- {connectors:,} connectors, {run.records:,} records", flush=True)
        state_dir = work_dir / f"state-{connectors}"
        state_dir.mkdir()
        result = small_batch.measure(run, cluster, state_dir, topics)
        medians[connectors] = result.trigger_median_s
    print(
        f"{args.job}: a one-record batch's median triggerExecution {medians[args.small]:.2f} s at {args.small:,} "
        f"connectors, {medians[args.large]:.2f} s at {args.large:,}; ratio "
        f"{medians[args.large] / medians[args.small]:.2f}",
        flush=True,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/cost_growth.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--job", choices=sorted(small_batch.JOBS), default="active_topics")
    parser.add_argument("--small", type=int, default=1_000, help="connectors of the small state (1000)")
    parser.add_argument("--large", type=int, default=100_000, help="connectors of the large state (100000)")
    parser.add_argument(
        "--records-per-connector", type=int, default=3, help="records per connector before the job starts (3)"
    )
    parser.add_argument("--batches", type=int, default=5, help="one-record batches measured per state (5)")
    parser.add_argument("--trigger", default="1 second", help="trigger.interval of the job (1 second)")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between batches (1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stages", action="store_true", help="print each batch's Spark jobs and stages")
    add_cluster_arguments(parser)
    add_config_arguments(parser)
    return parser


def validate(args: argparse.Namespace) -> None:
    check_arguments(
        (
            (0 < args.small < args.large, "--small must be positive and below --large"),
            (args.records_per_connector > 0 and args.batches > 0, "--records-per-connector, --batches: positive"),
        )
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return bench_main("bench/cost_growth.py", args, measure, validate)


if __name__ == "__main__":
    sys.exit(main())
