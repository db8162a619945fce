"""What the live benchmarks share: a real local broker and Connect worker with the demo connectors, the jobs' one
driver (and the API) as child processes started exactly as ``make run`` starts them, and the trickle of changes.

Used by ``bench/steady_state.py`` (the driver's CPU) and ``bench/freshness.py`` (how soon the API answers a change).
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.common import BenchError
from connect_state.core.settings import Settings, add_config_arguments, settings_from_args
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.demo import (
    API_MODULE,
    DEMO_SINK,
    JOB_MODULES,
    create_demo_connectors,
    start_child,
    stop_child,
    wait_for_api,
)
from connect_state.dev.filestream import append_lines
from connect_state.dev.jvm_service import free_ports
from connect_state.dev.local_stack import LocalStack


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    """The trigger, warm-up, trickle and work-directory flags, and the config flags (``--set``) passed to the jobs."""
    parser.add_argument("--trigger", default="1 second", help="trigger.interval of every job (1 second)")
    parser.add_argument("--warmup", type=float, default=120.0, help="seconds before measuring (120)")
    parser.add_argument("--trickle-interval", type=float, default=2.0, help="seconds between trickle steps (2)")
    parser.add_argument("--work-dir", type=Path, help="parent of the run's temporary directory (default: system temp)")
    parser.add_argument("--keep", action="store_true", help="keep the run's directory (the logs, the tables)")
    add_config_arguments(parser)


def run_settings(args: argparse.Namespace, work_dir: Path) -> tuple[Settings, list[str]]:
    """The run's settings (fresh ports and directories) and the same as ``--set`` flags for the children."""
    broker, controller, connect, api = free_ports(4)
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
        "api.host": "127.0.0.1",
        "api.port": str(api),
    }
    settings = settings_from_args(args).with_overrides(**overrides)
    flags = (["--conf-file", args.conf_file] if args.conf_file else []) + [
        item
        for key, value in {**overrides, **dict(o.split("=", 1) for o in args.overrides)}.items()
        for item in ("--set", f"{key}={value}")
    ]
    return settings, flags


@dataclass
class LiveRun:
    """A started run: its settings, Connect's REST client, the jobs' child (and the API's), the demo's directory."""

    settings: Settings
    connect: ConnectRestClient
    jobs: subprocess.Popen[bytes]
    api: subprocess.Popen[bytes] | None
    work_dir: Path

    @property
    def api_url(self) -> str:
        return f"http://{self.settings.api_host}:{self.settings.api_port}"

    @property
    def source_file(self) -> Path:
        return self.work_dir / "demo" / "input.txt"

    def check_alive(self) -> None:
        for name, child in (("jobs", self.jobs), ("api", self.api)):
            if child is not None and child.poll() is not None:
                raise BenchError(f"the {name} exited with {child.returncode}; see {self.work_dir / (name + '.log')}")


@contextlib.contextmanager
def live_run(args: argparse.Namespace, work_dir: Path, *, with_api: bool = False) -> Iterator[LiveRun]:
    """Broker, worker and demo connectors, then the jobs' driver (and the API); warmed up for ``args.warmup`` s."""
    settings, flags = run_settings(args, work_dir)
    stack = LocalStack(settings)
    children: list[subprocess.Popen[bytes]] = []
    try:
        stack.start()
        connect = ConnectRestClient(stack.connect_url)
        create_demo_connectors(connect, work_dir / "demo")
        (module,) = JOB_MODULES  # the demo's one driver of every job
        children.append(start_child(module, flags, work_dir / "jobs.log"))
        api = None
        if with_api:
            api = start_child(API_MODULE, flags, work_dir / "api.log")
            children.append(api)
        run = LiveRun(settings, connect, children[0], api, work_dir)
        if api is not None and not wait_for_api(run.api_url, children):
            raise BenchError(f"the API did not answer at {run.api_url}; see {work_dir / 'api.log'}")
        print(f"jobs started (logs in {work_dir}); warming up for {args.warmup:g} s", flush=True)
        time.sleep(args.warmup)
        run.check_alive()
        yield run
        run.check_alive()
    finally:
        for child in reversed(children):
            stop_child(child)
        stack.stop()


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
