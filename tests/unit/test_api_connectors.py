"""The KIP-875 lifecycle endpoints (api/connectors.py) with Flask's test client.

The ``connectors`` table is created with ``deltalake`` under ``tmp_path`` in the schema of
:data:`connect_state.tables.schemas.CONNECTORS` (the Spark job writes the same); Kafka is replaced by an in-memory
writer that records every send, so the exact records, their order and the topic can be checked.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.connect.rest import connector_state_info as status_response_from_row
from connect_state.core.errors import KafkaWriteError
from connect_state.core.settings import Settings
from connect_state.formats.config import pause_records, resume_records, stop_records
from connect_state.tables.reader import TableReader
from connect_state.tables.schemas import CONNECTORS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTopics, RecordingWriter
from tests.unit.helpers import assert_connect_error, assert_no_content, mirror_connectors, write_table

# --- helpers and fixtures -------------------------------------------------------------------------------------------


def task(
    task_id: int, state: str = "RUNNING", trace: str | None = None, version: str | None = "4.3.1"
) -> dict[str, Any]:
    return {"id": task_id, "state": state, "worker_id": "w1:8083", "trace": trace, "generation": 3, "version": version}


def connector(name: str, **fields: Any) -> dict[str, Any]:
    """A ``connectors`` row: a configured, RUNNING source connector with no tasks, overridden by ``fields``."""
    row: dict[str, Any] = {
        "name": name,
        "type": "source",
        "connector_class": "FileStreamSource",
        "config": json.dumps({"connector.class": "FileStreamSource", "name": name}, sort_keys=True),
        "target_state": "STARTED",
        "task_count": 0,
        "inconsistent": False,
        "connector_state": "RUNNING",
        "connector_worker_id": "w1:8083",
        "connector_trace": None,
        "connector_generation": 3,
        "connector_version": "4.3.1",
        "tasks": [],
        "deleted": False,
        "deleted_at": None,
        "config_offset": 7,
        "updated_at": dt.datetime(2025, 5, 1, tzinfo=dt.UTC),
    }
    row.update(fields)
    return row


ROWS = [
    connector(
        "foo-source",
        task_count=2,
        tasks=[task(1, "FAILED", trace="org.apache.kafka.connect.errors.ConnectException: boom"), task(0)],
    ),
    connector(
        "bar-sink",
        type="sink",
        connector_state="FAILED",
        connector_trace="java.lang.RuntimeException: oops",
        connector_version="undefined",
        tasks=[task(0, trace="", version=None)],
    ),
    connector("stopped", target_state="STOPPED", connector_state="STOPPED"),
    connector("no-status", connector_state=None, connector_worker_id=None, connector_version=None, tasks=None),
    # Only status records: the status topic knows it, the config topic does not.
    connector("status-only", config=None, connector_class=None, type="unknown", target_state=None, config_offset=None),
    # Deleted, its statuses not tombstoned yet.
    connector("deleted-with-status", deleted=True, deleted_at=1_746_009_337_985, config=None),
    # Deleted, statuses tombstoned.
    connector(
        "deleted-gone",
        deleted=True,
        config=None,
        connector_state=None,
        connector_worker_id=None,
        connector_version=None,
        tasks=[],
    ),
]


@pytest.fixture
def client(make_client: MakeClient, settings: Settings, kafka_log: InMemoryTopics) -> FlaskClient:
    """A client of an app whose ``connectors`` table holds :data:`ROWS`, and whose config topic has the records behind
    them (the writes decide on the config topic read to its end)."""
    write_table(settings.delta_root, CONNECTORS, ROWS)
    mirror_connectors(kafka_log, ROWS)
    return make_client()


def encoded(records: Sequence[tuple[str, bytes | None]]) -> list[tuple[bytes, bytes | None]]:
    return [(key.encode("utf-8"), value) for key, value in records]


# --- the table ------------------------------------------------------------------------------------------------------


def test_rows_read_back_as_plain_python(settings: Settings) -> None:
    write_table(settings.delta_root, CONNECTORS, ROWS)
    [row] = TableReader(settings.delta_root).rows(CONNECTORS, [("name", "=", "foo-source")])
    assert row["tasks"] == ROWS[0]["tasks"]
    assert type(row["tasks"]) is list
    assert type(row["tasks"][0]) is dict
    assert row["deleted"] is False
    assert row["inconsistent"] is False
    assert list(row) == CONNECTORS.column_names


# --- GET /connectors ------------------------------------------------------------------------------------------------


def test_list_connectors_only_configured_and_not_deleted(client: FlaskClient) -> None:
    response = client.get("/connectors")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.get_json() == ["bar-sink", "foo-source", "no-status", "stopped"]


def test_list_connectors_empty_table(settings: Settings, make_client: MakeClient) -> None:
    write_table(settings.delta_root, CONNECTORS, [])
    assert make_client().get("/connectors").get_json() == []


def test_list_connectors_sees_new_commits(settings: Settings, client: FlaskClient) -> None:
    write_table(settings.delta_root, CONNECTORS, [connector("zeta")])
    assert client.get("/connectors").get_json()[-1] == "zeta"


def test_list_connectors_missing_table_is_503(make_client: MakeClient) -> None:
    response = make_client().get("/connectors")
    assert response.status_code == 503
    assert "connectors" in response.get_json()["message"]


# --- GET /connectors/<name>/status ----------------------------------------------------------------------------------


def test_status_body_shape_task_order_and_trace(client: FlaskClient) -> None:
    response = client.get("/connectors/foo-source/status")
    assert response.status_code == 200
    body = response.get_json()
    assert body == {
        "name": "foo-source",
        "connector": {"state": "RUNNING", "worker_id": "w1:8083", "version": "4.3.1"},
        "tasks": [
            {"id": 0, "state": "RUNNING", "worker_id": "w1:8083", "version": "4.3.1"},
            {
                "id": 1,
                "state": "FAILED",
                "worker_id": "w1:8083",
                "version": "4.3.1",
                "trace": "org.apache.kafka.connect.errors.ConnectException: boom",
            },
        ],
        "type": "source",
    }
    # Connect's key order, not sorted keys.
    assert list(body) == ["name", "connector", "tasks", "type"]
    assert list(body["tasks"][1]) == ["id", "state", "worker_id", "version", "trace"]
    assert body == status_response_from_row(ROWS[0])


def test_status_connector_trace_empty_trace_and_versions(client: FlaskClient) -> None:
    body = client.get("/connectors/bar-sink/status").get_json()
    # "undefined" version is left out, a null one written; an empty trace is left out (NON_EMPTY).
    assert body == {
        "name": "bar-sink",
        "connector": {"state": "FAILED", "worker_id": "w1:8083", "trace": "java.lang.RuntimeException: oops"},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w1:8083", "version": None}],
        "type": "sink",
    }


def test_status_stopped_has_no_tasks(client: FlaskClient) -> None:
    body = client.get("/connectors/stopped/status").get_json()
    assert body["connector"]["state"] == "STOPPED"
    assert body["tasks"] == []


@pytest.mark.parametrize(
    ("name", "state"),
    [
        ("status-only", "RUNNING"),  # no config check: the status store alone answers
        ("deleted-with-status", "RUNNING"),  # before the leader tombstones the statuses
    ],
)
def test_status_comes_from_the_status_store_only(client: FlaskClient, name: str, state: str) -> None:
    response = client.get(f"/connectors/{name}/status")
    assert response.status_code == 200
    assert response.get_json()["connector"]["state"] == state


@pytest.mark.parametrize("name", ["unknown", "no-status", "deleted-gone"])
def test_status_not_found(client: FlaskClient, name: str) -> None:
    assert_connect_error(client.get(f"/connectors/{name}/status"), 404, f"No status found for connector {name}")


# --- PUT /connectors/<name>/stop, pause, resume ---------------------------------------------------------------------

LIFECYCLE = [
    ("stop", stop_records, 204),
    ("pause", pause_records, 202),
    ("resume", resume_records, 202),
]


@pytest.mark.parametrize(("action", "records_for", "status"), LIFECYCLE, ids=[a for a, _, _ in LIFECYCLE])
def test_lifecycle_writes_herder_records_to_config_topic(
    settings: Settings,
    client: FlaskClient,
    writer: RecordingWriter,
    action: str,
    records_for: Callable[[str], list[tuple[str, bytes | None]]],
    status: int,
) -> None:
    assert_no_content(client.put(f"/connectors/foo-source/{action}"), status)
    [(topic, records, timeout_ms)] = writer.sends
    assert topic == settings.config_storage_topic
    assert timeout_ms == settings.api_kafka_write_timeout_ms
    assert records == encoded(records_for("foo-source"))


def test_stop_writes_empty_commit_before_target_state(client: FlaskClient, writer: RecordingWriter) -> None:
    assert_no_content(client.put("/connectors/foo-source/stop"), 204)
    [(_, records, _)] = writer.sends
    assert records == [
        (b"commit-foo-source", b'{"tasks":0}'),
        (b"target-state-foo-source", b'{"state":"PAUSED","state.v2":"STOPPED"}'),
    ]


def test_pause_and_resume_write_only_the_target_state(client: FlaskClient, writer: RecordingWriter) -> None:
    assert_no_content(client.put("/connectors/stopped/pause"), 202)
    assert_no_content(client.put("/connectors/stopped/resume"), 202)
    assert [records for _, records, _ in writer.sends] == [
        [(b"target-state-stopped", b'{"state":"PAUSED","state.v2":"PAUSED"}')],
        [(b"target-state-stopped", b'{"state":"STARTED","state.v2":"STARTED"}')],
    ]


def test_lifecycle_is_idempotent_and_ordered(client: FlaskClient, writer: RecordingWriter) -> None:
    for action in ("stop", "stop", "resume", "pause"):
        assert client.put(f"/connectors/bar-sink/{action}").status_code in (202, 204)
    assert [records for _, records, _ in writer.sends] == [
        encoded(stop_records("bar-sink")),
        encoded(stop_records("bar-sink")),
        encoded(resume_records("bar-sink")),
        encoded(pause_records("bar-sink")),
    ]


@pytest.mark.parametrize("action", ["stop", "pause", "resume"])
@pytest.mark.parametrize("name", ["unknown", "status-only", "deleted-with-status", "deleted-gone"])
def test_lifecycle_unknown_connector(client: FlaskClient, writer: RecordingWriter, action: str, name: str) -> None:
    assert_connect_error(client.put(f"/connectors/{name}/{action}"), 404, f"Unknown connector {name}")
    assert writer.sends == []


@pytest.mark.parametrize("action", ["stop", "pause", "resume"])
def test_lifecycle_without_status_still_writes(client: FlaskClient, writer: RecordingWriter, action: str) -> None:
    """The check is on the config snapshot only: a configured connector without status is known."""
    assert client.put(f"/connectors/no-status/{action}").status_code in (202, 204)
    assert len(writer.sends) == 1


def test_lifecycle_kafka_failure_is_500(settings: Settings, make_client: MakeClient, kafka_log: InMemoryTopics) -> None:
    write_table(settings.delta_root, CONNECTORS, ROWS)
    mirror_connectors(kafka_log, ROWS)
    failing = RecordingWriter(fail=KafkaWriteError("Timed out after 30000 ms"))
    assert_connect_error(
        make_client(writer=failing).put("/connectors/foo-source/stop"), 500, "Timed out after 30000 ms"
    )


@pytest.mark.parametrize(("method", "path"), [("get", "/connectors/foo-source/stop"), ("post", "/connectors/x/pause")])
def test_lifecycle_wrong_method_is_405(client: FlaskClient, method: str, path: str) -> None:
    assert_connect_error(getattr(client, method)(path), 405, "HTTP 405 Method Not Allowed")
