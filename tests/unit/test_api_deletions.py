"""KIP-883 endpoints with Flask's test client: ``DELETE /connectors/<name>`` (api/connectors.py) and
``GET /connectors/<name>/deletions`` (api/deletions.py).

Tables are written with ``deltalake`` in the schemas of :mod:`connect_state.tables.schemas`; Kafka is an in-memory
writer that records every send.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.core.errors import KafkaWriteError
from connect_state.core.settings import Settings
from connect_state.tables.schemas import CONNECTOR_DELETIONS, CONNECTORS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTopics, RecordingWriter
from tests.unit.helpers import mirror_connectors, write_table

UTC = dt.UTC


def connector(name: str, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {name: None for name in CONNECTORS.column_names}
    row.update(
        name=name,
        type="source",
        config=json.dumps({"connector.class": "FileStreamSource", "name": name}),
        target_state="STARTED",
        task_count=1,
        inconsistent=False,
        tasks=[],
        deleted=False,
        config_offset=3,
    )
    row.update(fields)
    return row


def ts(seconds: int) -> dt.datetime:
    return dt.datetime(2025, 5, 1, 12, 0, seconds, 250_000, tzinfo=UTC)


def step_row(offset: int, step: str, status: str, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "connector": "gone",
        "deletion_offset": offset,
        "deleted_at": ts(offset % 60),
        "connector_type": "source",
        "config": json.dumps({"connector.class": "FileStreamSource", "file": "/tmp/in.txt"}),
        "step": step,
        "status": status,
        "attempts": 1 if status in ("succeeded", "failed") else 0,
        "detail": None,
        "error": None,
        "next_attempt_at": None,
        "updated_at": ts(59),
    }
    row.update(fields)
    return row


ROWS = [
    connector("live"),
    connector("deleted", deleted=True, config=None),
    connector("status-only", config=None, type="unknown"),
]


@pytest.fixture
def client(settings: Settings, make_client: MakeClient, kafka_log: InMemoryTopics) -> FlaskClient:
    """A client of an app whose ``connectors`` table knows ``live``, ``deleted`` and ``status-only``, and whose config
    topic has the records behind them (a DELETE decides on the config topic read to its end)."""
    write_table(settings.delta_root, CONNECTORS, ROWS)
    mirror_connectors(kafka_log, ROWS)
    return make_client()


# --- DELETE /connectors/<name> --------------------------------------------------------------------------------------


def test_delete_writes_connector_then_target_state_tombstones(client: FlaskClient, writer: RecordingWriter) -> None:
    response = client.delete("/connectors/live")
    assert response.status_code == 204
    assert response.get_data() == b""
    assert "Content-Type" not in response.headers
    assert writer.sends == [("connect-configs", [(b"connector-live", None), (b"target-state-live", None)], 30000)]


@pytest.mark.parametrize("name", ["nope", "deleted", "status-only"])
def test_delete_unknown_connector_is_404(client: FlaskClient, writer: RecordingWriter, name: str) -> None:
    response = client.delete(f"/connectors/{name}")
    assert response.status_code == 404
    assert response.get_json() == {"error_code": 404, "message": f"Connector {name} not found"}
    assert writer.sends == []


def test_delete_kafka_failure_is_500(settings: Settings, make_client: MakeClient, kafka_log: InMemoryTopics) -> None:
    write_table(settings.delta_root, CONNECTORS, [connector("live")])
    mirror_connectors(kafka_log, [connector("live")])
    client = make_client(writer=RecordingWriter(fail=KafkaWriteError("not acknowledged")))
    response = client.delete("/connectors/live")
    assert response.status_code == 500
    assert response.get_json() == {"error_code": 500, "message": "not acknowledged"}


def test_delete_needs_no_connectors_table(
    make_client: MakeClient, writer: RecordingWriter, kafka_log: InMemoryTopics
) -> None:
    """Decided on the config topic read to its end: no table, no job needed."""
    mirror_connectors(kafka_log, [connector("live")])
    assert make_client().delete("/connectors/live").status_code == 204
    assert make_client().delete("/connectors/live").status_code == 404
    assert writer.keys == [b"connector-live", b"target-state-live"]


# --- GET /connectors/<name>/deletions -------------------------------------------------------------------------------


def test_deletions_grouped_newest_first_with_steps_in_run_order(settings: Settings, client: FlaskClient) -> None:
    write_table(
        settings.delta_root,
        CONNECTOR_DELETIONS,
        [
            step_row(5, "hook:b", "succeeded", detail="hook returned"),
            step_row(5, "offsets", "skipped", detail="connector recreated at config offset 8"),
            step_row(5, "active_topics", "skipped", detail="connector recreated at config offset 8"),
            step_row(12, "hook:a", "failed", attempts=3, error="RuntimeError: down", next_attempt_at=ts(30)),
            step_row(12, "active_topics", "succeeded", detail="2 topic-status tombstones written to connect-status"),
            step_row(12, "offsets", "pending", detail="waiting for the deleted connector's tasks to stop"),
            step_row(20, "active_topics", "succeeded", connector="other"),
        ],
    )
    response = client.get("/connectors/gone/deletions")
    assert response.status_code == 200
    body = response.get_json()
    assert body["name"] == "gone"
    assert [(d["deletion_offset"], d["status"]) for d in body["deletions"]] == [(12, "failed"), (5, "complete")]
    newest = body["deletions"][0]
    assert newest["deleted_at"] == "2025-05-01T12:00:12.250Z"
    assert newest["type"] == "source"
    assert newest["config"] == {"connector.class": "FileStreamSource", "file": "/tmp/in.txt"}
    assert [s["step"] for s in newest["steps"]] == ["active_topics", "offsets", "hook:a"]
    assert newest["steps"][2] == {
        "step": "hook:a",
        "status": "failed",
        "attempts": 3,
        "detail": None,
        "error": "RuntimeError: down",
        "next_attempt_at": "2025-05-01T12:00:30.250Z",
        "updated_at": "2025-05-01T12:00:59.250Z",
    }
    assert list(body) == ["name", "deletions"]
    assert list(newest) == ["deletion_offset", "deleted_at", "type", "config", "status", "steps"]


@pytest.mark.parametrize(
    ("statuses", "overall"),
    [
        (["succeeded", "skipped"], "complete"),
        (["succeeded", "pending"], "pending"),
        (["pending", "failed"], "failed"),
    ],
)
def test_deletion_status(settings: Settings, client: FlaskClient, statuses: list[str], overall: str) -> None:
    rows = [step_row(1, f"hook:{i}", status) for i, status in enumerate(statuses)]
    write_table(settings.delta_root, CONNECTOR_DELETIONS, rows)
    assert client.get("/connectors/gone/deletions").get_json()["deletions"][0]["status"] == overall


def test_deletions_of_a_name_without_any_is_an_empty_list(settings: Settings, client: FlaskClient) -> None:
    write_table(settings.delta_root, CONNECTOR_DELETIONS, [])
    response = client.get("/connectors/live/deletions")
    assert (response.status_code, response.get_json()) == (200, {"name": "live", "deletions": []})


def test_deletions_without_table_is_503_naming_the_job(client: FlaskClient) -> None:
    response = client.get("/connectors/gone/deletions")
    assert response.status_code == 503
    assert "connect-state-cleanup" in response.get_json()["message"]
