"""Benchmark: what the jobs' one driver costs when the cluster is quiet, and under a trickle (issue 11 §3).

On a real local broker and Connect worker (:mod:`connect_state.dev.local_stack`, fresh data directory and ports) with
the demo connectors of ``make run`` (a FileStream source, a sink, a quiet source), ``connect_state.jobs.all`` runs every
job in one driver at ``--trigger`` (1 s) as a child process, exactly as ``make run`` starts it. After ``--warmup``
seconds (the catch-up of the demo's records), the CPU time of the driver, its Spark JVM and its Python workers (from
/proc) is measured:

1. **idle** for ``--idle`` seconds: nothing writes to Connect's topics;
2. **trickle** for ``--trickle`` seconds: every ``--trickle-interval`` seconds a line is appended to the demo source's
   file (the worker commits its offset within a second), and every fifth step the sink is paused or resumed through
   Connect's REST API (status and target-state records).

Printed last: both shares of one core (issue 11 §3 asks ≤ 10% idle and ≤ 50% under the trickle, over 10 minutes each).
Nothing here is a pass/fail threshold.

    .venv/bin/python bench/steady_state.py --idle 600 --trickle 600
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    check_arguments,
    cpu_seconds,
    in_work_dir,
    load_average,
    machine_lines,
    process_tree,
)
from bench.live_stack import Trickle, add_live_arguments, live_run


def share(root: int, seconds: float, step: Callable[[], None] | None = None, every: float = 1.0) -> float:
    """The share of one core the process tree of ``root`` used over ``seconds``, calling ``step()`` every ``every``
    seconds meanwhile (if given)."""
    pids = process_tree(root)
    before, started = cpu_seconds(pids), time.perf_counter()
    deadline = started + seconds
    while (now := time.perf_counter()) < deadline:
        if step is not None:
            step()
        time.sleep(max(0.0, min(every, deadline - now)))
    pids = sorted(set(pids) | set(process_tree(root)))  # Python workers started meanwhile count from their start
    return (cpu_seconds(pids) - before) / (time.perf_counter() - started)


def measure(args: argparse.Namespace, work_dir: Path) -> None:
    for line in machine_lines(None, "local[2], in the jobs' own process"):
        print(line, flush=True)
    with live_run(args, work_dir) as run:
        idle = share(run.jobs.pid, args.idle)
        print(f"idle {args.idle:g} s: {100 * idle:.1f}% of one core (load average {load_average()})", flush=True)
        trickle = Trickle(run.connect, run.source_file)
        busy = share(run.jobs.pid, args.trickle, trickle, args.trickle_interval)
        print(
            f"trickle {args.trickle:g} s ({trickle.steps} lines, {trickle.steps // 5} pauses/resumes): "
            f"{100 * busy:.1f}% of one core (load average {load_average()})",
            flush=True,
        )
        run.check_alive()
        print(f"jobs' driver: idle {100 * idle:.1f}% of one core, under the trickle {100 * busy:.1f}%", flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/steady_state.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--idle", type=float, default=600.0, help="seconds of the idle measure (600)")
    parser.add_argument("--trickle", type=float, default=600.0, help="seconds of the trickle measure (600)")
    add_live_arguments(parser)
    return parser


def validate(args: argparse.Namespace) -> None:
    check_arguments(
        (
            (args.warmup >= 0 and args.idle > 0 and args.trickle > 0, "--idle and --trickle must be positive"),
            (args.trickle_interval > 0, "--trickle-interval must be positive"),
        )
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def run(work_dir: Path) -> None:
        validate(args)
        measure(args, work_dir)

    return in_work_dir("bench/steady_state.py", args.work_dir, run, keep=args.keep)


if __name__ == "__main__":
    sys.exit(main())
