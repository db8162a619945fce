"""The command line (``connect-state``) against the real stack: the API served for real (its own process,
tests/fixtures/api_server.py) on the session's broker, and the Connect worker as oracle.

The commands run in this process through click's runner and talk to the served API over HTTP; one runs as the
installed console script. A bulk pause chosen by a regular expression shows in Connect's own status, a stop then
``offsets get`` equals Connect's ``GET /offsets``, a patch moves Connect's offsets, a restart brings a FAILED task
back; not found, refused and unreachable exit with their codes and Connect's messages. The API's audit file (a row
for every write request that reaches it, allowed or not) shows that what the command line refuses itself (a regex
matching nothing, a declined confirmation) sends nothing.

The README's incident walk-through ("An incident on the command line") is run as written there: its fenced block's
commands, read from README.md (names and times mapped to the test's), against a bad deploy made through Connect's
REST; Connect's ``GET /offsets`` and the connectors' output topics show both connectors carry on where they were. Bad
input through the command line (an ``--at`` before any history, a restore of a name that exists, a regex matching
nothing) exits with its documented code and leaves the config topic's end offset where it was.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from connect_state.cli.errors import ExitCode
from connect_state.cli.main import cli
from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.dev.jvm_service import free_port
from connect_state.spark import source_offsets
from tests.fixtures.api_server import serving_api
from tests.fixtures.spark import await_query
from tests.integration.helpers import (
    connect_offsets,
    connector_state,
    delete_and_wait,
    job_settings,
    read_topic,
    run_connector_states,
    unique,
    wait_state,
)
from tests.integration.test_connector_restore_connect import config_topic_end

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]
WAIT_S = 60.0
Run = Callable[..., Result]


class Served:
    """The API served for real on the session's broker: its settings (for catch-up runs of the jobs), its URL, its
    audit file."""

    def __init__(self, settings: Settings, url: str, audit: Path) -> None:
        self.settings, self.url, self.audit = settings, url, audit

    def writes_seen(self) -> int:
        return len(self.audit.read_text().splitlines()) if self.audit.exists() else 0


@pytest.fixture(scope="module")
def served(
    connect_worker: object, stack_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("cli-api")
    settings = job_settings(stack_settings, base)
    audit = base / "audit.jsonl"
    props = {
        "bootstrap.servers": settings.bootstrap_servers,
        "delta.root": str(base / "delta"),
        "checkpoint.root": str(base / "checkpoints"),
        "api.host": "127.0.0.1",
        "api.audit.file": str(audit),
        "api.audit.table": "false",
    }
    with serving_api(props) as url:
        yield Served(settings, url, audit)


@pytest.fixture
def run(served: Served, tmp_path: Path) -> Run:
    """``connect-state ARGS`` in this process, with a contexts file whose current context is the served API."""
    config = tmp_path / "contexts.yaml"
    env = {"CONNECT_STATE_CLI_CONFIG": str(config)}
    assert CliRunner().invoke(cli, ["context", "set", "served", "--url", served.url], env=env).exit_code == 0

    def invoke(*args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(cli, list(args), input=input, env=env, prog_name="connect-state")

    return invoke


def connect_config(connect: ConnectRestClient, name: str) -> dict[str, str]:
    status, config = connect.get(connect.connector_path(name, "config"))
    assert status == 200, config
    return config


def error_line(result: Result) -> str:
    (line,) = result.stderr.strip().splitlines()[-1:]
    return line


@dataclass(frozen=True)
class Made:
    """The connectors every test of the module acts on, made once (one catch-up run of the connector-state job)."""

    matched: list[str]  # sources whose names match PREFIX-.*
    other: str  # a source that does not
    prefix: str
    source: str  # a source whose offset is committed
    source_file: Path
    broken: str  # a sink whose task FAILED

    @property
    def partition(self) -> dict[str, str]:
        return {"filename": str(self.source_file)}


@pytest.fixture(scope="module")
def made(spark, connect, served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    base = tmp_path_factory.mktemp("cli-files")
    prefix = unique("cli-bulk")
    made = Made(
        matched=[f"{prefix}-a", f"{prefix}-b"],
        other=f"{prefix}x-other",  # "-.*" must not match "x-other"
        prefix=prefix,
        source=unique("cli-source"),
        source_file=base / "in.txt",
        broken=unique("cli-broken"),
    )
    names = [*made.matched, made.other, made.source, made.broken]
    try:
        for name in [*made.matched, made.other]:
            append_lines(base / f"{name}.txt", ["one"])
            connect.create_connector(name, file_source_config(name, base / f"{name}.txt", unique("cli-topic")))
        append_lines(made.source_file, ["a", "b", "c"])
        connect.create_connector(made.source, file_source_config(made.source, made.source_file, unique("cli-topic")))
        # FileStreamSinkTask.start cannot create a file in a missing directory: the task FAILS.
        sink_file = base / "not-yet" / "out.txt"
        connect.create_connector(made.broken, file_sink_config(made.broken, sink_file, [unique("cli-topic")]))
        for name in [*made.matched, made.other]:
            wait_state(connect, name, "RUNNING", 1, WAIT_S)
        connect.wait_for(
            lambda: connect_offsets(connect, made.source) == [{"partition": made.partition, "offset": {"position": 6}}],
            WAIT_S,
            description="source offset committed",
        )
        connect.wait_for(
            lambda: connector_state(connect, made.broken) == ("RUNNING", ["FAILED"]), WAIT_S, description="failed"
        )
        run_connector_states(spark, served.settings)
        yield made
    finally:
        for name in names:
            connect.delete_connector(name, missing_ok=True)


def test_bulk_pause_by_regex_shows_in_connects_status(connect, served, made, run):
    matched, other, prefix = made.matched, made.other, made.prefix
    # The table agrees with Connect's own expansion.
    listed = run("get", "connectors", "-o", "json")
    assert listed.exit_code == 0, listed.output
    _, theirs = connect.get("/connectors?expand=status&expand=info")
    for name in [*matched, other]:
        state = json.loads(listed.stdout)[name]["status"]["connector"]["state"]
        assert state == theirs[name]["status"]["connector"]["state"] == "RUNNING"
    table = run("get", "connectors").stdout.splitlines()
    assert any(line.split()[:4] == [matched[0], "source", "RUNNING", "1/1"] for line in table), table

    # Refused by the command line itself: nothing reaches the API.
    before = served.writes_seen()
    assert run("pause", "connector", "-e", f"{prefix}-(", "--yes").exit_code == ExitCode.USAGE
    no_match = run("pause", "connector", "-e", f"{prefix}-nothing-.*", "--yes")
    assert no_match.exit_code == ExitCode.NOT_FOUND
    assert "no connector matches" in error_line(no_match)
    declined = run("pause", "connector", "-e", f"{prefix}-.*", input="n\n")
    assert declined.exit_code == ExitCode.ABORTED
    assert run("pause", "connector", "-e", f"{prefix}-.*", "--dry-run").stdout.split() == matched
    assert served.writes_seen() == before
    for name in [*matched, other]:
        assert connector_state(connect, name) == ("RUNNING", ["RUNNING"])

    paused = run("pause", "connector", "-e", f"{prefix}-.*", "--yes")
    assert paused.exit_code == 0, paused.output
    assert paused.stdout.splitlines() == [f"[{i}/2] {name}: pause requested" for i, name in enumerate(matched, 1)]
    assert served.writes_seen() == before + 2
    for name in matched:
        wait_state(connect, name, "PAUSED", 1, WAIT_S)
    assert connector_state(connect, other) == ("RUNNING", ["RUNNING"])

    # Not found, with Connect's own message for the same request.
    status, body = connect.put(connect.connector_path("no-such-connector", "pause"))
    missing = run("pause", "connector", "no-such-connector")
    assert (status, missing.exit_code) == (404, ExitCode.NOT_FOUND)
    assert error_line(missing) == f"Error: {body['message']}"
    resumed = run("resume", "connector", *matched, "no-such-connector", "--yes")  # a bulk with one failure
    assert resumed.exit_code == ExitCode.PARTIAL
    assert "1 of 3 connectors failed: no-such-connector (HTTP 404)" in error_line(resumed)
    for name in matched:
        wait_state(connect, name, "RUNNING", 1, WAIT_S)


def test_stop_then_offsets_match_connect(spark, connect, served, made, run):
    source = made.source
    patch = json.dumps({"offsets": [{"partition": made.partition, "offset": {"position": 2}}]})

    # Refused while it runs, with Connect's message for the same PATCH.
    status, body = connect.patch(connect.connector_path(source, "offsets"), json.loads(patch))
    refused = run("offsets", "patch", source, "-f", "-", input=patch)
    assert (status, refused.exit_code) == (400, ExitCode.REFUSED)
    assert error_line(refused) == f"Error: {body['message']}"

    stopped = run("stop", "connector", source)
    assert (stopped.exit_code, stopped.stdout.strip()) == (0, f"{source}: stop requested")
    wait_state(connect, source, "STOPPED", 0, WAIT_S)
    await_query(source_offsets.start(spark, served.settings, available_now=True))
    got = run("offsets", "get", source, "-o", "json")
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout) == connect.get(connect.connector_path(source, "offsets"))[1]

    patched = run("offsets", "patch", source, "-f", "-", input=patch)
    assert patched.exit_code == 0, patched.output
    connect.wait_for(
        lambda: connect_offsets(connect, source) == [{"partition": made.partition, "offset": {"position": 2}}],
        WAIT_S,
        description="Connect's GET /offsets shows the patched position",
    )
    info = json.loads(run("describe", "connector", source, "-o", "json").stdout)["info"]
    assert (info["config"], info["type"]) == (connect.get(connect.connector_path(source, "config"))[1], "source")


def test_restart_brings_a_failed_task_back(connect, made, run):
    Path(connect_config(connect, made.broken)["file"]).parent.mkdir()
    restarted = run("restart", "connector", made.broken, "--include-tasks", "--only-failed")
    assert (restarted.exit_code, restarted.stdout.strip()) == (0, f"{made.broken}: restarting 1 task")
    wait_state(connect, made.broken, "RUNNING", 1, WAIT_S)


def test_the_command_line_talks_to_a_cluster_by_its_id(connect, served, made, run):
    """Issue 37: ``--cluster <id>`` asks every path under /clusters/<id>; the default cluster answers as Connect does,
    and a write through it is honoured by the worker."""
    listed = run("clusters", "-o", "json")
    assert listed.exit_code == 0, listed.output
    [cluster] = json.loads(listed.stdout)
    got = run("--cluster", cluster["id"], "get", "connectors", "-o", "json")
    assert got.exit_code == 0, got.output
    _, theirs = connect.get("/connectors?expand=status&expand=info")
    for name in [*made.matched, made.other]:
        assert json.loads(got.stdout)[name]["info"] == theirs[name]["info"]
    unknown = run("--cluster", "no-such-cluster", "pause", "connector", made.other)
    assert unknown.exit_code == ExitCode.NOT_FOUND
    assert error_line(unknown) == "Error: Cluster no-such-cluster not found"
    assert connector_state(connect, made.other) == ("RUNNING", ["RUNNING"])
    paused = run("--cluster", cluster["id"], "pause", "connector", made.other)
    assert paused.exit_code == 0, paused.output
    wait_state(connect, made.other, "PAUSED", 1, WAIT_S)
    assert run("--cluster", cluster["id"], "resume", "connector", made.other).exit_code == 0
    wait_state(connect, made.other, "RUNNING", 1, WAIT_S)


def test_unreachable_api_from_the_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "connect-state"
    config = tmp_path / "contexts.yaml"
    env = {"CONNECT_STATE_CLI_CONFIG": str(config), "PATH": "/usr/bin:/bin"}
    url = f"http://127.0.0.1:{free_port()}"
    subprocess.run([script, "context", "set", "gone", "--url", url], env=env, check=True, capture_output=True)
    before = config.read_bytes()
    result = subprocess.run(
        [script, "pause", "connector", "-e", ".*", "--yes"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == ExitCode.UNREACHABLE
    assert result.stderr == f"Error: cannot reach {url} (context gone): Connection refused\n"
    assert result.stdout == ""
    assert config.read_bytes() == before


# --- the README's incident walk-through -----------------------------------------------------------------------------

README = Path(__file__).resolve().parents[2] / "README.md"
WALK_THROUGH = "### An incident on the command line"
README_TIMES = {"since": "2026-11-22T09:00:00Z", "before": "2026-11-22T09:30:00Z"}
README_NAMES = ("orders-audit-source", "orders-source")  # the longer first: one is the other's prefix


def walk_through_commands() -> list[str]:
    """The ``connect-state`` commands of the README's incident walk-through, as written (comments dropped)."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(WALK_THROUGH) :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, "the walk-through has no fenced bash block"
    lines = [" ".join(shlex.split(line, comments=True)) for line in block.group(1).splitlines()]
    return [line for line in lines if line]


def iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


def test_the_readmes_incident_walk_through(spark, connect, served, run, tmp_path):
    commands = walk_through_commands()
    written = " ".join(commands)
    assert all(name in written for name in README_NAMES) and all(t in written for t in README_TIMES.values())
    moved, deleted = unique("cli-orders"), unique("cli-orders-audit")
    names = dict(zip(README_NAMES, (deleted, moved), strict=True))
    files = {name: tmp_path / f"{name}.txt" for name in (moved, deleted)}
    topics = {name: unique("cli-orders-topic") for name in (moved, deleted)}
    partition = {name: {"filename": str(file)} for name, file in files.items()}

    def at_position(name: str, position: int) -> None:
        expected = [{"partition": partition[name], "offset": {"position": position}}]
        connect.wait_for(
            lambda: connect_offsets(connect, name) == expected, WAIT_S, description=f"{name} at {position}"
        )

    since = int(time.time() * 1000)
    for name in (moved, deleted):
        append_lines(files[name], ["a", "b", "c"])
        connect.create_connector(name, file_source_config(name, files[name], topics[name]))
    for name in (moved, deleted):
        at_position(name, 6)
    before = int(time.time() * 1000)
    time.sleep(1.0)  # the deploy's records get later Kafka timestamps

    # The bad deploy, through Connect's own REST: one stopped and moved back to the start; the other stopped, its
    # offsets reset (tombstoned), deleted.
    for name in (moved, deleted):
        assert connect.put(connect.connector_path(name, "stop"))[0] == 204
    for name in (moved, deleted):
        wait_state(connect, name, "STOPPED", 0, WAIT_S)
    patch = {"offsets": [{"partition": partition[moved], "offset": {"position": 0}}]}
    assert connect.patch(connect.connector_path(moved, "offsets"), patch)[0] == 200
    assert connect.delete(connect.connector_path(deleted, "offsets"))[0] == 200
    delete_and_wait(connect, deleted)
    for name in (moved, deleted):
        append_lines(files[name], ["d", "e"])
    run_connector_states(spark, served.settings)
    await_query(source_offsets.start(spark, served.settings, available_now=True), 240.0)

    # Bad input first: each exits with its documented code and writes nothing.
    end = config_topic_end(served.settings)
    early = run("offsets", "restore", moved, "--at", "1", "--apply")
    assert early.exit_code == ExitCode.REFUSED and "the history kept for it starts at" in error_line(early)
    early = run("restore", "connector", deleted, "--offsets", "--at", "1")
    assert early.exit_code == ExitCode.REFUSED and "its first config kept is of" in error_line(early)
    exists = run("restore", "connector", moved, "--offsets")
    assert exists.exit_code == ExitCode.REFUSED
    assert error_line(exists) == f"Error: Connector {moved} already exists"
    nothing = run("resume", "connector", "-e", "cli-orders-nothing-.*", "--yes")
    assert nothing.exit_code == ExitCode.NOT_FOUND and "no connector matches" in error_line(nothing)
    assert config_topic_end(served.settings) == end

    # The walk-through, command by command as the README has it.
    times = {README_TIMES["since"]: iso(since), README_TIMES["before"]: iso(before)}
    for command in commands:
        args = shlex.split(command)[1:]
        args = [names.get(arg, times.get(arg, arg)) for arg in args]
        result = run(*args)
        assert result.exit_code == 0, (command, result.output)
        if args[:2] == ["offsets", "get"]:
            assert (
                json.loads(run(*args, "-o", "json").stdout) == connect.get(connect.connector_path(moved, "offsets"))[1]
            )
        if args[:2] == ["offsets", "restore"]:
            assert "altered" in result.stdout  # position 0 now, 6 then
            at_position(moved, 6 if "--apply" in args else 0)
        if args[:2] == ["restore", "connector"]:
            rows = [line.split() for line in result.stdout.splitlines()]
            assert ["restored"] in [row[-1:] for row in rows[1:]], result.stdout  # none now (reset), 6 then
            wait_state(connect, deleted, "STOPPED", 0, WAIT_S)
            at_position(deleted, 6)  # Connect's own view of the offsets written
    assert connect.get(connect.connector_path(moved, "config"))[0] == 200

    # Both carry on where they were: d and e after a, b, c, nothing sent twice.
    for name in (moved, deleted):
        wait_state(connect, name, "RUNNING", 1, WAIT_S)
        at_position(name, 10)
        assert [r.value.decode() for r in read_topic(served.settings.bootstrap_servers, topics[name])] == list("abcde")
    for name in (moved, deleted):
        connect.delete_connector(name)
