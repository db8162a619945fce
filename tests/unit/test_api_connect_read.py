"""Connect's read API (api/connect_read.py) and KIP-745 restart (api/restart.py) with Flask's test client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.connect.rest import MIRRORED_CONNECT_VERSION, restart_state_info
from connect_state.core.settings import Settings
from connect_state.formats.config import RestartRequest, restart_request_key, serialize_restart_request
from connect_state.tables.schemas import CONNECTORS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTopics, RecordingWriter
from tests.unit.helpers import assert_connect_error, assert_no_content, mirror_connectors, write_table
from tests.unit.test_api_connectors import ROWS, connector, task

TASK_CONFIGS = {"0": {"task.class": "T", "file": "/a"}, "1": {"task.class": "T", "file": "/b"}}
READ_ROWS = [
    {**ROWS[0], "task_configs": json.dumps(TASK_CONFIGS)},
    *ROWS[1:],
    connector("broken", task_count=2, inconsistent=True, task_configs=json.dumps({"0": {"x": "y"}})),
]


@pytest.fixture
def client(make_client: MakeClient, settings: Settings, kafka_log: InMemoryTopics) -> FlaskClient:
    write_table(settings.delta_root, CONNECTORS, READ_ROWS)
    mirror_connectors(kafka_log, READ_ROWS)
    return make_client(overrides={"api.kafka.cluster.id": "cluster-1"})


def test_root(client: FlaskClient, make_client: MakeClient) -> None:
    body = client.get("/").get_json()
    assert body == {"version": MIRRORED_CONNECT_VERSION, "commit": "unknown", "kafka_cluster_id": "cluster-1"}
    assert list(body) == ["version", "commit", "kafka_cluster_id"]
    other = make_client(overrides={"api.kafka.cluster.id": "k", "api.connect.version": "3.9.0"})
    assert other.get("/").get_json()["version"] == "3.9.0"


def test_connector_info(client: FlaskClient) -> None:
    response = client.get("/connectors/foo-source")
    assert response.status_code == 200
    body = response.get_json()
    assert list(body) == ["name", "config", "tasks", "type"]
    assert body == {
        "name": "foo-source",
        "config": {"connector.class": "FileStreamSource", "name": "foo-source"},
        "tasks": [{"connector": "foo-source", "task": 0}, {"connector": "foo-source", "task": 1}],
        "type": "source",
    }
    # Inconsistent: ClusterConfigState.tasks lists none.
    assert client.get("/connectors/broken").get_json()["tasks"] == []


@pytest.mark.parametrize("path", ["", "/config", "/tasks"])
@pytest.mark.parametrize("name", ["nope", "status-only", "deleted-with-status"])
def test_not_found(client: FlaskClient, path: str, name: str) -> None:
    assert_connect_error(client.get(f"/connectors/{name}{path}"), 404, f"Connector {name} not found")


def test_config(client: FlaskClient) -> None:
    assert client.get("/connectors/bar-sink/config").get_json() == {
        "connector.class": "FileStreamSource",
        "name": "bar-sink",
    }


def test_tasks(client: FlaskClient) -> None:
    assert client.get("/connectors/foo-source/tasks").get_json() == [
        {"id": {"connector": "foo-source", "task": 0}, "config": TASK_CONFIGS["0"]},
        {"id": {"connector": "foo-source", "task": 1}, "config": TASK_CONFIGS["1"]},
    ]
    # taskConfigs loops over the committed count even when inconsistent; rawTaskConfig is null when absent.
    assert client.get("/connectors/broken/tasks").get_json() == [
        {"id": {"connector": "broken", "task": 0}, "config": {"x": "y"}},
        {"id": {"connector": "broken", "task": 1}, "config": None},
    ]
    assert client.get("/connectors/stopped/tasks").get_json() == []


def test_task_status(client: FlaskClient) -> None:
    body = client.get("/connectors/foo-source/tasks/1/status").get_json()
    assert body == {
        "id": 1,
        "state": "FAILED",
        "worker_id": "w1:8083",
        "version": "4.3.1",
        "trace": "org.apache.kafka.connect.errors.ConnectException: boom",
    }
    assert client.get("/connectors/bar-sink/tasks/0/status").get_json() == {
        "id": 0,
        "state": "RUNNING",
        "worker_id": "w1:8083",
        "version": None,
    }
    # Status store only: a deleted connector's statuses still answer.
    assert_connect_error(
        client.get("/connectors/foo-source/tasks/5/status"), 404, "No status found for task foo-source-5"
    )
    assert_connect_error(client.get("/connectors/nope/tasks/-1/status"), 404, "No status found for task nope--1")
    assert_connect_error(client.get("/connectors/nope/tasks/x/status"), 404, "HTTP 404 Not Found")


def test_expand(client: FlaskClient) -> None:
    both = client.get("/connectors?expand=status&expand=info").get_json()
    # no-status has no connector status: left out, as Connect's NotFoundException is caught per connector.
    assert sorted(both) == ["bar-sink", "broken", "foo-source", "stopped"]
    assert both["foo-source"]["info"] == client.get("/connectors/foo-source").get_json()
    assert both["foo-source"]["status"] == client.get("/connectors/foo-source/status").get_json()
    info = client.get("/connectors?expand=info").get_json()
    assert sorted(info) == ["bar-sink", "broken", "foo-source", "no-status", "stopped"]
    assert list(info["stopped"]) == ["info"]
    assert client.get("/connectors?expand=bogus").get_json()["stopped"] == {}
    assert client.get("/connectors").get_json() == ["bar-sink", "broken", "foo-source", "no-status", "stopped"]


# --- restart --------------------------------------------------------------------------------------------------------


def restart_record(name: str, include_tasks: bool, only_failed: bool) -> list[tuple[bytes, bytes | None]]:
    value = serialize_restart_request(RestartRequest(include_tasks=include_tasks, only_failed=only_failed))
    return [(restart_request_key(name).encode(), value)]


def sent(writer: RecordingWriter) -> list[Any]:
    return [(topic, list(records)) for topic, records, *_ in writer.sends]


def test_restart_connector_only(client: FlaskClient, writer: RecordingWriter) -> None:
    assert_no_content(client.post("/connectors/foo-source/restart"), 204)
    assert sent(writer) == [("connect-configs", restart_record("foo-source", False, False))]


@pytest.mark.parametrize(
    ("query", "include", "only", "connector_state", "task_states"),
    [
        ("includeTasks=true", True, False, "RESTARTING", ["RESTARTING", "RESTARTING"]),
        ("includeTasks=TRUE&onlyFailed=true", True, True, "RUNNING", ["RUNNING", "RESTARTING"]),
        ("onlyFailed=true", False, True, "RUNNING", ["RUNNING", "FAILED"]),
        ("onlyFailed=true&includeTasks=yes", False, True, "RUNNING", ["RUNNING", "FAILED"]),
    ],
)
def test_restart_with_flags(
    client: FlaskClient,
    writer: RecordingWriter,
    query: str,
    include: bool,
    only: bool,
    connector_state: str,
    task_states: list[str],
) -> None:
    response = client.post(f"/connectors/foo-source/restart?{query}")
    assert response.status_code == 202
    body = response.get_json()
    assert body["connector"]["state"] == connector_state
    assert [t["state"] for t in body["tasks"]] == task_states
    assert sent(writer) == [("connect-configs", restart_record("foo-source", include, only))]


def test_restart_failed_connector_only_failed(client: FlaskClient) -> None:
    body = client.post("/connectors/bar-sink/restart?onlyFailed=true").get_json()
    assert body["connector"]["state"] == "RESTARTING"


def test_restart_unknown(client: FlaskClient, writer: RecordingWriter) -> None:
    assert_connect_error(client.post("/connectors/nope/restart"), 404, "Unknown connector: nope")
    assert_connect_error(
        client.post("/connectors/deleted-gone/restart?includeTasks=true"), 404, "Unknown connector: deleted-gone"
    )
    assert writer.sends == []


def test_restart_without_status(client: FlaskClient, writer: RecordingWriter) -> None:
    response = client.post("/connectors/no-status/restart?includeTasks=true")
    assert_connect_error(response, 404, "Status for connector no-status not found")
    assert sent(writer) == [("connect-configs", restart_record("no-status", True, False))]


def test_restart_task_is_refused_with_what_to_do(client: FlaskClient, writer: RecordingWriter) -> None:
    response = client.post("/connectors/foo-source/tasks/0/restart")
    assert response.status_code == 501
    assert "includeTasks=true&onlyFailed=true" in response.get_json()["message"]
    assert_connect_error(client.post("/connectors/nope/tasks/0/restart"), 404, "Unknown connector: nope")
    assert writer.sends == []


def test_restart_state_info_pure() -> None:
    row = connector("c", tasks=[task(0, "FAILED"), task(1)])
    assert restart_state_info(connector("c", connector_state=None), True, False) is None
    info = restart_state_info(row, include_tasks=True, only_failed=True)
    assert info is not None
    assert [t["state"] for t in info["tasks"]] == ["RESTARTING", "RUNNING"]  # type: ignore[index]
