"""Issue 14 against the real Connect worker: every read endpoint of Connect's API answers as Connect does, and a
restart written through our API (KIP-745 request on the config topic) brings a FAILED task back to RUNNING."""

from __future__ import annotations

from typing import Any

import pytest

from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from tests.integration.helpers import (
    api_client,
    connector_state,
    create_topic,
    job_settings,
    run_connector_states,
    unique,
    wait_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]
WAIT_S = 60.0


def test_read_api_and_restart_match_connect(spark, connect, stack_settings, tmp_path):
    settings = job_settings(stack_settings, tmp_path)
    api = api_client(settings)
    source, sink, broken = unique("read-source"), unique("read-sink"), unique("read-broken")
    topic = unique("read-topic")
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["one", "two"])
    create_topic(settings, topic, 2)
    missing_dir = tmp_path / "not-yet"
    connect.create_connector(source, file_source_config(source, source_file, topic))
    connect.create_connector(sink, file_sink_config(sink, tmp_path / "out.txt", [topic]))
    # FileStreamSinkTask.start cannot create a file in a missing directory: the task FAILS, reliably.
    connect.create_connector(broken, file_sink_config(broken, missing_dir / "out.txt", [topic]))
    wait_state(connect, source, "RUNNING", 1, WAIT_S)
    wait_state(connect, sink, "RUNNING", 1, WAIT_S)
    connect.wait_for(
        lambda: connector_state(connect, broken) == ("RUNNING", ["FAILED"]), WAIT_S, description=f"{broken} failed"
    )

    names = [source, sink, broken]
    paths = [
        f"/connectors/{name}{suffix}"
        for name in [*names, "no-such-connector"]
        for suffix in ("", "/config", "/tasks", "/status", "/tasks/0/status", "/tasks/7/status")
    ]

    def ours_and_theirs() -> tuple[list[Any], list[Any]]:
        run_connector_states(spark, settings)
        ours = [(r.status_code, r.get_json()) for r in (api.get(p) for p in paths)]
        theirs = [connect.get(p) for p in paths]
        expanded_ours = api.get("/connectors?expand=status&expand=info").get_json()
        _, expanded_theirs = connect.get("/connectors?expand=status&expand=info")
        ours.append({n: expanded_ours.get(n) for n in names})
        theirs.append({n: expanded_theirs.get(n) for n in names})
        return ours, theirs

    for _ in range(3):  # a status record may land between our catch-up run and Connect's answer
        ours, theirs = ours_and_theirs()
        if ours == theirs:
            break
    for path, mine, connects in zip([*paths, "expand"], ours, theirs, strict=True):
        assert mine == connects, path

    _, root = connect.get("/")
    mine = api.get("/").get_json()
    assert mine["version"] == root["version"]
    assert mine["kafka_cluster_id"] == root["kafka_cluster_id"]

    # Restart through our API, once the cause is gone: Connect honours the config-topic request.
    missing_dir.mkdir()
    response = api.post(f"/connectors/{broken}/restart?includeTasks=true&onlyFailed=true")
    assert response.status_code == 202, response.get_data(as_text=True)
    body = response.get_json()
    assert body["connector"]["state"] == "RUNNING"
    assert [t["state"] for t in body["tasks"]] == ["RESTARTING"]
    wait_state(connect, broken, "RUNNING", 1, WAIT_S)

    assert api.post(f"/connectors/{sink}/restart").status_code == 204
    assert api.post(f"/connectors/{sink}/tasks/0/restart").status_code == 501
    status, error = connect.post("/connectors/no-such-connector/restart?includeTasks=true")
    response = api.post("/connectors/no-such-connector/restart?includeTasks=true")
    assert (response.status_code, response.get_json()) == (status, error)

    # History of the same records: the task's FAILED then RUNNING, the config as created.
    run_connector_states(spark, settings)
    events = api.get(f"/connectors/{broken}/events?kind=task_status_changed").get_json()["events"]
    states = [event["details"]["to"] for event in events]
    assert "FAILED" in states and states[-1] == "RUNNING", states
    versions = api.get(f"/connectors/{broken}/history/configs").get_json()["versions"]
    assert versions[0]["event"] == "created"
    assert versions[0]["config"]["file"] == str(missing_dir / "out.txt")
    for name in names:
        connect.delete_connector(name)
