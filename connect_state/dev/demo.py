"""``make run``: the whole thing on the embedded default, until Ctrl-C.

Starts the local broker and Connect worker, creates the demo FileStream connectors (a source writing a file into a
topic, a sink writing that topic into another file, and a quiet source whose file never grows, for heartbeats and
cleanup) and brings them to RUNNING (one an earlier run left STOPPED or PAUSED, as the README's walk-through leaves
``demo-source`` to a reader who quits before its resume step, is resumed through Connect's REST; one still not RUNNING
after a minute is named, and the demo starts anyway), keeps appending lines to the first source's file, starts the
jobs and the API as child processes, prints where everything is, and on Ctrl-C / SIGTERM stops it all in reverse
order.

The demo turns on both operator features (:data:`DEMO_SETTINGS`, given to every child before the user's ``--set``
flags, which win): the quiet source's config asks for KIP-910 heartbeats every 30 s (``heartbeat.interval.ms``) and
for KIP-883 offset cleanup on deletion (``cleanup.offsets.on.delete``); the FileStream heartbeat provider and a
logging deletion hook are registered, and the heartbeat topic is created on the first heartbeat
(``heartbeat.topics.create``).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from connect_state.connect.filestream import FILE_SOURCE_CLASS
from connect_state.core.errors import ConnectStateError
from connect_state.core.settings import Settings, add_config_arguments, settings_from_args
from connect_state.core.vocabulary import State
from connect_state.dev.connect_rest import ConnectRestClient, ConnectRestError
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.dev.local_stack import LocalStack

DEMO_SOURCE = "demo-source"
DEMO_SINK = "demo-sink"
DEMO_QUIET_SOURCE = "demo-quiet-source"
DEMO_TOPIC = "demo-lines"
DEMO_QUIET_TOPIC = "demo-quiet-lines"
FEED_INTERVAL_S = 5.0
# One driver runs every job (jobs/all.py): five drivers would keep a small machine busy.
JOB_MODULES = ("connect_state.jobs.all",)
DEMO_SETTINGS = {
    "heartbeat.providers": f"{FILE_SOURCE_CLASS}=connect_state.dev.demo_heartbeats:provider",
    "heartbeat.topics.create": "true",  # the local broker has no connect-heartbeats topic until the first heartbeat
    "cleanup.hooks": "connect_state.dev.demo_hooks:log_deletion",
    "jobs.metrics.port": "8091",  # the jobs driver's Prometheus endpoint
}
# Per-connector overrides in the quiet source's own config (connect-state reads them from the config topic).
QUIET_SOURCE_EXTRAS = {"heartbeat.interval.ms": "30000", "cleanup.offsets.on.delete": "true"}
API_MODULE = "connect_state.api.server"
STEPS = 5
DEMO_CONNECTORS = (DEMO_SOURCE, DEMO_SINK, DEMO_QUIET_SOURCE)
RUNNING_TIMEOUT_S = 60.0
# A state the worker has assigned the connector to (not UNASSIGNED, RESTARTING, nor the last run's status unread).
SETTLED_STATES = frozenset({State.RUNNING, State.PAUSED, State.STOPPED, State.FAILED})
RESUMABLE_STATES = frozenset({State.PAUSED, State.STOPPED})


class _Stop(Exception):
    pass


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop


@dataclass
class DemoConnectors:
    """What :func:`create_demo_connectors` found and did: the connectors it resumed, with the state each was left in
    by an earlier run (the walk-through stops ``demo-source``), and those not RUNNING in the end, with what Connect
    reports of them (:func:`describe_status`)."""

    resumed: dict[str, State] = field(default_factory=dict)
    not_running: dict[str, str] = field(default_factory=dict)

    def report(self) -> list[str]:
        """One line per connector resumed or not running, as the demo prints them."""
        lines = [
            f"      {name} was {state} (left so by an earlier run): resumed through Connect's PUT .../resume"
            for name, state in self.resumed.items()
        ]
        lines += [
            f"      {name} is not RUNNING ({status}): the demo starts anyway"
            for name, status in self.not_running.items()
        ]
        return lines


def describe_status(connect: ConnectRestClient, name: str) -> str:
    """What Connect reports of the connector, in a few words: ``connector RUNNING, task 0 FAILED``."""
    try:
        status = connect.connector_status(name)
    except ConnectRestError as err:
        return str(err)
    if status is None:
        return "no status"
    tasks = [f"task {task.get('id')} {task.get('state')}" for task in status.get("tasks", [])]
    return ", ".join([f"connector {status.get('connector', {}).get('state')}", *tasks])


def connector_state(connect: ConnectRestClient, name: str) -> State | None:
    """The connector's state as Connect reports it (``GET /connectors/<name>/status``), None without one."""
    status = connect.connector_status(name) or {}
    state = status.get("connector", {}).get("state")
    return State(state) if state in State.__members__ else None


def _settled_state(connect: ConnectRestClient, name: str, timeout: float) -> State | None:
    """The connector's state once the worker has assigned it (:data:`SETTLED_STATES`); None if not within timeout."""
    try:
        return connect.wait_for(
            lambda: state if (state := connector_state(connect, name)) in SETTLED_STATES else None,
            timeout,
            description=f"connector {name!r} assigned",
        )
    except ConnectRestError:
        return None


def _resume(connect: ConnectRestClient, name: str, timeout: float) -> bool:
    """Connect's ``PUT /connectors/<name>/resume``, asked again while Connect refuses it (a 409 while the worker
    rebalances); False if it was not accepted within ``timeout`` (the connector is then reported as not RUNNING)."""

    def resumed() -> bool:
        connect.resume_connector(name)
        return True

    try:
        return connect.wait_for(resumed, timeout, description=f"connector {name!r} resumed")
    except ConnectRestError:
        return False


def bring_up(connect: ConnectRestClient, names: tuple[str, ...], timeout: float = RUNNING_TIMEOUT_S) -> DemoConnectors:
    """Resume (Connect's ``PUT /connectors/<name>/resume``) each of ``names`` that Connect reports STOPPED or PAUSED,
    then wait, at most ``timeout`` seconds in all, for every one to be RUNNING; says which are not."""
    outcome = DemoConnectors()
    deadline = time.monotonic() + timeout
    for name in names:
        state = _settled_state(connect, name, max(0.0, deadline - time.monotonic()))
        if state in RESUMABLE_STATES and _resume(connect, name, max(0.0, deadline - time.monotonic())):
            outcome.resumed[name] = state
    for name in names:
        try:
            connect.wait_until_running(name, max(0.0, deadline - time.monotonic()))
        except ConnectRestError:
            outcome.not_running[name] = describe_status(connect, name)
    return outcome


def create_demo_connectors(
    connect: ConnectRestClient, demo_dir: Path, timeout: float = RUNNING_TIMEOUT_S
) -> DemoConnectors:
    """Create (or update) the demo connectors, and bring them to RUNNING within ``timeout``: :func:`bring_up`."""
    demo_dir.mkdir(parents=True, exist_ok=True)
    source_file = demo_dir / "input.txt"
    source_file.touch()
    connect.create_connector(DEMO_SOURCE, file_source_config(DEMO_SOURCE, source_file, DEMO_TOPIC))
    connect.create_connector(DEMO_SINK, file_sink_config(DEMO_SINK, demo_dir / "output.txt", [DEMO_TOPIC]))
    quiet_file = demo_dir / "quiet.txt"
    if not quiet_file.exists():
        append_lines(quiet_file, ["a quiet file: its source gets heartbeats instead of data"])
    quiet_config = {**file_source_config(DEMO_QUIET_SOURCE, quiet_file, DEMO_QUIET_TOPIC), **QUIET_SOURCE_EXTRAS}
    connect.create_connector(DEMO_QUIET_SOURCE, quiet_config)
    return bring_up(connect, DEMO_CONNECTORS, timeout)


def feed(source_file: Path, stop: threading.Event) -> None:
    """Append a line to the demo source's file every few seconds, so offsets and topics keep moving."""
    n = 0
    while not stop.wait(FEED_INTERVAL_S):
        n += 1
        append_lines(source_file, [f"demo line {n} at {time.strftime('%H:%M:%S')}"])


def start_child(module: str, args: list[str], log_file: Path) -> subprocess.Popen[bytes]:
    log_file.parent.mkdir(parents=True, exist_ok=True)
    out = log_file.open("ab")
    # A session of its own: Ctrl-C reaches only us, and we stop the children in order.
    return subprocess.Popen(
        [sys.executable, "-m", module, *args], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )


def stop_child(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def step(number: int, text: str) -> None:
    """One start-up step, as ``[2/5] creating the demo connectors...``."""
    print(f"[{number}/{STEPS}] {text}", flush=True)


def wait_for_api(url: str, children: list[subprocess.Popen[bytes]], timeout_s: float = 120.0) -> bool:
    """Wait until the API answers ``GET /health`` (any status: it is serving); False if it did not in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and all(child.poll() is None for child in children):
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=15):
                return True
        except urllib.error.HTTPError:
            return True  # 503 while the jobs fold their first batches: serving
        except OSError:
            time.sleep(0.5)
    return False


def banner(settings: Settings, stack: LocalStack, logs: Path) -> str:
    api = f"http://{settings.api_host}:{settings.api_port}"
    jobs_metrics_port = settings.jobs_metrics_port or DEMO_SETTINGS["jobs.metrics.port"]  # the user's --set wins
    return "\n".join(
        [
            "",
            "connect-state demo is up:",
            f"  Kafka broker    {stack.bootstrap_servers}",
            f"  Connect worker  {stack.connect_url}   (connectors: {DEMO_SOURCE}, {DEMO_SINK}, {DEMO_QUIET_SOURCE})",
            f"  connect-state   {api}",
            f"  dashboard       {api}/ui",
            f"  health, metrics {api}/health   {api}/metrics",
            f"  jobs' metrics   http://127.0.0.1:{jobs_metrics_port}/metrics",
            f"  Delta tables    {settings.delta_root}",
            f"  logs            {logs}/ and {settings.local_data_dir}/",
            "",
            "Try (the first job batch takes ~30 s):",
            f"  curl -s {api}/connectors/{DEMO_SINK}/topics",
            f"  curl -s {stack.connect_url}/connectors/{DEMO_SINK}/topics   # Connect's own answer",
            f"  curl -s -X PUT {api}/connectors/{DEMO_SINK}/topics/reset -w '%{{http_code}}\\n'",
            f"  curl -s {api}/connectors/{DEMO_SOURCE}/offsets     # same as {stack.connect_url}/connectors/...",
            f"  curl -s {api}/connectors/{DEMO_SINK}/offsets",
            f"  curl -s {api}/connectors/{DEMO_QUIET_SOURCE}/heartbeats   # idle age, heartbeats (every 30 s)",
            f"  curl -s -X DELETE {api}/connectors/{DEMO_QUIET_SOURCE} -w '%{{http_code}}\\n'   # then:",
            f"  curl -s {api}/connectors/{DEMO_QUIET_SOURCE}/deletions    # cleanup steps and the demo hook",
            "",
            "Press Ctrl-C to stop everything.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="connect-state-demo", description=__doc__.split("\n\n")[0])
    add_config_arguments(parser)
    args = parser.parse_args(argv)
    settings = settings_from_args(args)
    demo_overrides = [f"{key}={value}" for key, value in DEMO_SETTINGS.items()]
    passthrough = (["--conf-file", args.conf_file] if args.conf_file else []) + [
        item for override in (*demo_overrides, *args.overrides) for item in ("--set", override)
    ]
    var = settings.local_data_dir.parent
    logs, demo_dir = var / "logs", var / "demo"
    stack = LocalStack(settings)
    children: list[subprocess.Popen[bytes]] = []
    stop_feeding = threading.Event()
    # Explicit handlers: a SIGINT inherited as ignored (e.g. started in the background) must still stop us.
    previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        step(1, f"starting the Kafka broker and the Connect worker (logs in {settings.local_data_dir}/)...")
        stack.start()
        step(2, f"creating the demo connectors {DEMO_SOURCE}, {DEMO_SINK}, {DEMO_QUIET_SOURCE}...")
        demo_connectors = create_demo_connectors(ConnectRestClient(stack.connect_url), demo_dir)
        for line in demo_connectors.report():
            print(line, flush=True)
        threading.Thread(target=feed, args=(demo_dir / "input.txt", stop_feeding), daemon=True).start()
        step(3, f"starting the jobs (one Spark driver; log {logs}/all.log)...")
        for module in JOB_MODULES:
            children.append(start_child(module, passthrough, logs / f"{module.split('.')[-1]}.log"))
        step(4, f"starting the API (log {logs}/api.log)...")
        children.append(start_child(API_MODULE, passthrough, logs / "api.log"))
        api_url = f"http://{settings.api_host}:{settings.api_port}"
        step(5, f"waiting for the API to answer at {api_url}...")
        if not wait_for_api(api_url, children):
            print(f"the API did not answer at {api_url}; see {logs}/api.log", file=sys.stderr)
        print(banner(settings, stack, logs), flush=True)
        while all(child.poll() is None for child in children) and stack.dead_service() is None:
            time.sleep(1.0)
        print("a process exited unexpectedly; see the logs. Stopping.", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, _Stop):
        print("\nstopping...", flush=True)
        return 0
    except ConnectStateError as err:
        print(f"connect-state-demo: {err}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_feeding.set()
        for child in reversed(children):
            stop_child(child)
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
