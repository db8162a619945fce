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
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    BenchError,
    check_arguments,
    cpu_seconds,
    in_work_dir,
    load_average,
    machine_lines,
    process_tree,
)
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.demo import DEMO_SINK, JOB_MODULES, create_demo_connectors, start_child, stop_child
from connect_state.dev.filestream import append_lines
from connect_state.dev.local_stack import LocalStack, free_ports
from connect_state.settings import Settings, add_config_arguments, settings_from_args


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


class Trickle:
    """One step of the trickle: a line for the demo source; every fifth step, pause or resume the sink."""

    def __init__(self, connect: ConnectRestClient, source_file: Path) -> None:
        self.connect = connect
        self.source_file = source_file
        self.steps = 0
        self.paused = False

    def __call__(self) -> None:
        self.steps += 1
        append_lines(self.source_file, [f"trickle line {self.steps} at {time.strftime('%H:%M:%S')}"])
        if self.steps % 5 == 0:
            action = "resume" if self.paused else "pause"
            status, _ = self.connect.put(self.connect.connector_path(DEMO_SINK, action))
            if status != 202:
                raise BenchError(f"{action} {DEMO_SINK}: Connect answered {status}")
            self.paused = not self.paused


def run_settings(args: argparse.Namespace, work_dir: Path) -> tuple[Settings, list[str]]:
    """The run's settings (fresh ports and directories) and the same as ``--set`` flags for the jobs' child."""
    broker, controller, connect = free_ports(3)
    overrides = {
        "local.data.dir": str(work_dir / "local"),
        "local.broker.port": str(broker),
        "local.controller.port": str(controller),
        "local.connect.port": str(connect),
        "bootstrap.servers": f"127.0.0.1:{broker}",
        "connect.rest.url": f"http://127.0.0.1:{connect}",
        "delta.root": str(work_dir / "delta"),
        "checkpoint.root": str(work_dir / "checkpoints"),
        "trigger.interval": args.trigger,
        "jobs.metrics.port": "0",
    }
    settings = settings_from_args(args).with_overrides(**overrides)
    flags = (["--conf-file", args.conf_file] if args.conf_file else []) + [
        item
        for key, value in {**overrides, **dict(o.split("=", 1) for o in args.overrides)}.items()
        for item in ("--set", f"{key}={value}")
    ]
    return settings, flags


def measure(args: argparse.Namespace, work_dir: Path) -> None:
    settings, flags = run_settings(args, work_dir)
    for line in machine_lines(None, "local[2], in the jobs' own process"):
        print(line, flush=True)
    stack = LocalStack(settings)
    jobs: subprocess.Popen[bytes] | None = None
    try:
        stack.start()
        connect = ConnectRestClient(stack.connect_url)
        create_demo_connectors(connect, work_dir / "demo")
        (module,) = JOB_MODULES  # the demo's one driver of every job
        jobs = start_child(module, flags, work_dir / "jobs.log")
        print(f"jobs started (log {work_dir / 'jobs.log'}); warming up for {args.warmup:g} s", flush=True)
        time.sleep(args.warmup)
        if jobs.poll() is not None:
            raise BenchError(f"the jobs exited with {jobs.returncode}; see {work_dir / 'jobs.log'}")
        idle = share(jobs.pid, args.idle)
        print(f"idle {args.idle:g} s: {100 * idle:.1f}% of one core (load average {load_average()})", flush=True)
        trickle = Trickle(connect, work_dir / "demo" / "input.txt")
        busy = share(jobs.pid, args.trickle, trickle, args.trickle_interval)
        print(
            f"trickle {args.trickle:g} s ({trickle.steps} lines, {trickle.steps // 5} pauses/resumes): "
            f"{100 * busy:.1f}% of one core (load average {load_average()})",
            flush=True,
        )
        if jobs.poll() is not None:
            raise BenchError(f"the jobs exited with {jobs.returncode}; see {work_dir / 'jobs.log'}")
        print(f"jobs' driver: idle {100 * idle:.1f}% of one core, under the trickle {100 * busy:.1f}%", flush=True)
    finally:
        if jobs is not None:
            stop_child(jobs)
        stack.stop()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/steady_state.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--trigger", default="1 second", help="trigger.interval of every job (1 second)")
    parser.add_argument("--warmup", type=float, default=120.0, help="seconds before measuring (120)")
    parser.add_argument("--idle", type=float, default=600.0, help="seconds of the idle measure (600)")
    parser.add_argument("--trickle", type=float, default=600.0, help="seconds of the trickle measure (600)")
    parser.add_argument("--trickle-interval", type=float, default=2.0, help="seconds between trickle steps (2)")
    parser.add_argument("--work-dir", type=Path, help="parent of the run's temporary directory (default: system temp)")
    parser.add_argument("--keep", action="store_true", help="keep the run's directory (the jobs' log, the tables)")
    add_config_arguments(parser)
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
