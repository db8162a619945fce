"""Availability (``GET /connectors/<name>/availability``, ``GET /availability``, ``connect-state availability``)
against the real worker, with the test's own wall clock as oracle: it runs a FileStreamSink, pauses it for a measured
time, makes its task fail (reconfigured to a file in a missing directory: ``FileStreamSinkTask.start`` cannot open
it) and restarts the task once the directory exists, noting when Connect's own ``GET /status`` first shows each
state (polled every 0.1 s). Then one catch-up run of the connector-state job, and the answer is compared with those
times.

Tolerance: Connect writes a status record to its status topic (the record's Kafka timestamp, what the answer is
computed from) before its REST answer shows it; our poll sees it up to an interval and a REST round trip later. A
duration measured between two observations is off by the difference of two such delays: :data:`TOLERANCE_MS`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from connect_state.cli.main import cli
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import file_sink_config
from tests.fixtures.api_server import serving_api
from tests.integration.helpers import (
    api_client,
    connector_state,
    create_topic,
    job_settings,
    run_connector_states,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]  # a catch-up run of the job
WAIT_S = 60.0
TOLERANCE_MS = 1500
PAUSED_S, FAILED_S = 5.0, 4.0


def now_ms() -> int:
    return int(time.time() * 1000)


def first_seen(connect: ConnectRestClient, name: str, expected: tuple[str, list[str]]) -> int:
    """The wall-clock time Connect's ``GET /status`` first shows ``expected`` (connector state, task states)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if connector_state(connect, name) == expected:
            return now_ms()
        time.sleep(0.1)
    raise AssertionError(f"{name}: never {expected}; last {connector_state(connect, name)}")


def near(actual: int, expected: int) -> bool:
    return abs(actual - expected) <= TOLERANCE_MS


@pytest.fixture(scope="module")
def observed(spark, connect, stack_settings, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """The sink's life, as the test saw it through Connect's REST, and the settings the job folded it with."""
    base = tmp_path_factory.mktemp("availability")
    settings = job_settings(stack_settings, base)
    name, topic = unique("avail-sink"), unique("avail-topic")
    create_topic(settings, topic, 1)
    seen: dict[str, Any] = {"name": name, "settings": settings, "base": base, "since": now_ms()}
    time.sleep(1.0)
    try:
        seen["created"] = now_ms()
        connect.create_connector(name, file_sink_config(name, base / "out.txt", [topic]))
        seen["running"] = first_seen(connect, name, ("RUNNING", ["RUNNING"]))
        time.sleep(2.0)
        assert connect.put(connect.connector_path(name, "pause"))[0] == 202
        seen["paused"] = first_seen(connect, name, ("PAUSED", ["PAUSED"]))
        time.sleep(PAUSED_S)
        assert connect.put(connect.connector_path(name, "resume"))[0] == 202
        seen["resumed"] = first_seen(connect, name, ("RUNNING", ["RUNNING"]))
        time.sleep(2.0)
        missing = base / "missing" / "out.txt"
        assert connect.put(connect.connector_path(name, "config"), file_sink_config(name, missing, [topic]))[0] == 200
        seen["failed"] = first_seen(connect, name, ("RUNNING", ["FAILED"]))
        time.sleep(FAILED_S)
        missing.parent.mkdir()
        restart = connect.post(connect.connector_path(name, "restart") + "?includeTasks=true&onlyFailed=true")
        assert restart[0] == 202, restart
        seen["recovered"] = first_seen(connect, name, ("RUNNING", ["RUNNING"]))
        time.sleep(2.0)
        seen["until"] = now_ms()
        run_connector_states(spark, settings)
        yield seen
    finally:
        connect.delete_connector(name, missing_ok=True)


def settled_states(segments: list[dict[str, Any]]) -> list[str]:
    """The timeline's states, less a brief ``degraded`` right after ``running``: a pause or a failure writes the
    connector's and its task's statuses at instants apart, so the few milliseconds between are rightly degraded, or
    absent when both land in one batch."""
    states: list[str] = []
    for segment in segments:
        brief = segment["end"] - segment["start"] < TOLERANCE_MS
        if segment["state"] == "degraded" and brief and states and states[-1] == "running":
            continue
        if not states or states[-1] != segment["state"]:
            states.append(segment["state"])
    return states


def test_a_connector_s_availability_matches_what_connect_showed(observed: dict[str, Any]) -> None:
    api = api_client(observed["settings"])
    name, since, until = observed["name"], observed["since"], observed["until"]
    response = api.get(f"/connectors/{name}/availability?since={since}&until={until}")
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    durations, unknown = body["durations_ms"], body["unknown_ms"]

    assert abs(sum(body["shares"].values()) - 1) < 1e-9
    assert near(unknown["not_existing"], observed["created"] - since), body
    assert unknown["before_history"] == unknown["records_lost"] == unknown["jobs_behind"] == unknown["future"] == 0
    assert near(durations["paused"], observed["resumed"] - observed["paused"]), body
    assert durations["stopped"] == 0
    assert body["failures"] == 1, body
    assert body["recovery"]["count"] == 1 and body["recovery"]["unrecovered"] == 0
    recovered_in = observed["recovered"] - observed["failed"]
    assert (
        near(body["recovery"]["mean_ms"], recovered_in) and body["recovery"]["worst_ms"] == body["recovery"]["mean_ms"]
    )
    assert body["restarts"] == 1, body  # the failed task's RESTARTING
    running = (
        (observed["paused"] - observed["running"])
        + (observed["failed"] - observed["resumed"])
        + (until - observed["recovered"])
    )
    # Running, less the reconfiguration's few hundred milliseconds of stopping and starting the task (degraded).
    assert running - 2 * TOLERANCE_MS <= durations["running"] <= running + TOLERANCE_MS, body
    states = settled_states(body["segments"])
    events = api.get(f"/connectors/{name}/events?limit=1000").get_json()["events"]
    trail = [(e["kafka_timestamp"], e["event"], e["details"].get("task"), e["details"].get("to")) for e in events]
    assert states[:4] == ["unknown", "degraded", "running", "paused"], (body["segments"], trail, observed)
    assert "failed" in states and states[-1] == "running", states


def test_every_connector_includes_it_and_the_command_line_prints_it(observed: dict[str, Any], tmp_path: Path) -> None:
    name, since, until = observed["name"], observed["since"], observed["until"]
    api = api_client(observed["settings"])
    fleet = api.get(f"/availability?since={since}&until={until}").get_json()
    mine = next(c for c in fleet["connectors"] if c["connector"] == name)
    one = api.get(f"/connectors/{name}/availability?since={since}&until={until}").get_json()
    assert mine["durations_ms"] == one["durations_ms"] and mine["failures"] == 1
    assert fleet["failures"] >= 1 and fleet["connector_count"] >= 1

    settings = observed["settings"]
    props = {
        "bootstrap.servers": settings.bootstrap_servers,
        "delta.root": str(settings.delta_root),
        "checkpoint.root": str(settings.checkpoint_root),
        "api.host": "127.0.0.1",
    }
    run: Callable[..., Any]
    with serving_api(props) as url:
        config = str(tmp_path / "contexts.yaml")

        def run(*args: str) -> Any:
            return CliRunner().invoke(cli, ["--config", config, *args], prog_name="connect-state")

        assert run("context", "set", "stack", "--url", url).exit_code == 0
        printed = run("availability", name, "--since", str(since), "--until", str(until), "-o", "json")
        assert printed.exit_code == 0, printed.output
        assert json.loads(printed.stdout) == one
        table = run("availability", name, "--since", str(since), "--until", str(until))
        assert table.exit_code == 0 and "failed" in table.stdout, table.output
        assert run("availability", unique("nope")).exit_code == 3
        assert run("availability", name, "--since", str(until), "--until", str(since)).exit_code == 4
