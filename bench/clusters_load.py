"""Benchmark: our API against the real Connect worker under concurrent clients (issue 11 §5's load), with the jobs and
the API following one Connect cluster or several (issue 37).

On a real local broker and Connect worker with the demo connectors (:mod:`bench.live_stack`), the jobs' one driver
runs every job and the API serves beside it, both started as ``make run`` starts them, with the run's ``--set``
settings (e.g. a second cluster). After ``--warmup`` seconds, our answers of ``GET /connectors/<name>/status``,
``/topics`` and ``/offsets`` for every demo connector are compared with the worker's (the oracle; ``--cluster``: ours
under ``/clusters/<CLUSTER>``), then for each ``--clients`` count that many client processes
(:mod:`bench.http_load`) send keep-alive GETs over those paths in a closed loop for ``--load-seconds``: (a) to the
worker, (b) to our API (under ``/clusters/<CLUSTER>`` with ``--cluster``). The jobs keep running meanwhile, as in
production: the two servers share the 2 cores with them. Printed: requests per second and p50/p99 of each, and last
the ratios (b)/(a) of requests per second. Nothing here is a pass/fail threshold.

    .venv/bin/python bench/clusters_load.py                                   # one cluster
    .venv/bin/python bench/clusters_load.py --set clusters=shadow \\
        --set clusters.shadow.connect.group.id=connect-shadow --cluster shadow  # two: the second's paths
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from pathlib import Path

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import BenchError, check_arguments, in_work_dir, load_average, machine_lines
from bench.http_load import HTTP_TIMEOUT_S, LoadResult, run_load
from bench.live_stack import LiveRun, add_live_arguments, live_run
from connect_state.dev.demo import DEMO_CONNECTORS

KINDS = ("status", "topics", "offsets")


def answer(url: str) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def check_like_connect(run: LiveRun, prefix: str) -> None:
    """Our answers on every path equal the worker's (a status's worker id and trace included)."""
    for name in DEMO_CONNECTORS:
        for kind in KINDS:
            path = f"/connectors/{name}/{kind}"
            ours, theirs = answer(run.api_url + prefix + path), answer(run.connect.base_url + path)
            if ours != theirs:
                raise BenchError(f"check failed: {prefix}{path}: ours {ours}, Connect's {theirs}")


def line(label: str, result: LoadResult) -> str:
    return (
        f"{label}: {result.rate:,.0f} req/s, p50 {result.percentile_ms(50):.2f} ms, "
        f"p99 {result.percentile_ms(99):.2f} ms ({result.requests} requests, {result.failures} not 200)"
    )


def measure(args: argparse.Namespace, work_dir: Path) -> None:
    for text in machine_lines(None, "local[2], in the jobs' own process"):
        print(text, flush=True)
    prefix = f"/clusters/{args.cluster}" if args.cluster else ""
    paths = [f"/connectors/{name}/{kind}" for name in DEMO_CONNECTORS for kind in KINDS]
    ratios = []
    with live_run(args, work_dir, with_api=True) as run:
        check_like_connect(run, prefix)
        print(f"check: OK ({len(paths)} paths, ours{' under ' + prefix if prefix else ''} as Connect's)", flush=True)
        for clients in args.clients:
            theirs = run_load("connect", run.connect.base_url, paths, clients, args.load_seconds, 20)
            ours = run_load("ours", run.api_url, [prefix + path for path in paths], clients, args.load_seconds, 20)
            for result in (theirs, ours):
                if result.failures:
                    raise BenchError(f"{result.label}: {result.failures} answers were not 200: {result.statuses}")
            print(line(f"(a) Connect, {clients} clients", theirs), flush=True)
            print(line(f"(b) ours{' ' + prefix if prefix else ''}, {clients} clients", ours), flush=True)
            ratios.append(f"{clients} clients {ours.rate / theirs.rate:.2f}")
        run.check_alive()
        print(f"load average {load_average()}")
    print("requests per second, ours over Connect's: " + ", ".join(ratios), flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/clusters_load.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--clients", type=lambda text: [int(n) for n in text.split(",")], default=[4, 8], help="client counts (4,8)"
    )
    parser.add_argument("--load-seconds", type=float, default=10.0, help="seconds per round (10)")
    parser.add_argument("--cluster", help="ask our API under /clusters/<CLUSTER> (default: Connect's plain paths)")
    add_live_arguments(parser)
    parser.set_defaults(warmup=60.0)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def run(work_dir: Path) -> None:
        check_arguments(
            (
                (all(n > 0 for n in args.clients), "--clients must be positive"),
                (args.load_seconds > 0 and args.warmup >= 0, "--load-seconds must be positive, --warmup not negative"),
            )
        )
        measure(args, work_dir)

    return in_work_dir("bench/clusters_load.py", args.work_dir, run, keep=args.keep)


if __name__ == "__main__":
    sys.exit(main())
