"""``GET /connectors/<name>/heartbeats`` (api/heartbeats.py) on Delta tables written with ``deltalake`` in the schemas
of :data:`connect_state.tables.schemas.SOURCE_PARTITION_ACTIVITY` and
:data:`connect_state.tables.schemas.HEARTBEATS`."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.core.settings import Settings
from connect_state.tables.schemas import HEARTBEATS, SOURCE_PARTITION_ACTIVITY
from tests.unit.conftest import MakeClient
from tests.unit.helpers import write_table

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
T0_MS = int(T0.timestamp() * 1000)


def at(ms: int) -> dt.datetime:
    return T0 + dt.timedelta(milliseconds=ms)


def activity(connector: str, filename: str, **fields: Any) -> dict[str, Any]:
    row = {
        "connector": connector,
        "partition": f'{{"filename":"{filename}"}}',
        "key": f'["{connector}",{{"filename":"{filename}"}}]'.encode(),
        "offset": '{"position":42}',
        "connector_class": "FileStreamSource",
        "config": "{}",
        "last_moved_at": at(0),
        "last_heartbeat_at": at(60_000),
        "idle_ms": 60_000,
        "heartbeat_interval_ms": 60_000,
        "heartbeat_topic": "connect-heartbeats",
        "eligible": True,
        "reason": None,
        "kafka_partition": 3,
        "kafka_offset": 9,
        "updated_at": at(60_000),
    }
    row.update(fields)
    return row


def heartbeat(connector: str, emitted_ms: int, **fields: Any) -> dict[str, Any]:
    row = {
        "connector": connector,
        "partition": '{"filename":"/a"}',
        "source_key": b"k",
        "heartbeat_topic": "connect-heartbeats",
        "record_index": 0,
        "record_key": b"/a",
        "record_value": b'{"position":42}',
        "record_partition": 0,
        "record_offset": emitted_ms // 1000,
        "committed_offset": '{"position":42}',
        "outcome": "produced",
        "error": None,
        "idle_ms": 60_000,
        "heartbeat_interval_ms": 60_000,
        "due_at": at(emitted_ms),
        "emitted_at": at(emitted_ms),
    }
    row.update(fields)
    return row


@pytest.fixture
def client(settings: Settings, make_client: MakeClient) -> FlaskClient:
    write_table(
        settings.delta_root,
        SOURCE_PARTITION_ACTIVITY,
        [
            activity("src", "/b"),
            activity("src", "/a", last_heartbeat_at=None),
            activity("paused", "/p", eligible=False, reason="target state PAUSED"),
        ],
    )
    write_table(
        settings.delta_root,
        HEARTBEATS,
        [heartbeat("src", 60_000), heartbeat("src", 120_000, record_value=b"\xff"), heartbeat("other", 1)],
    )
    return make_client()


def test_partitions_with_live_idle_age_and_recent_heartbeats_newest_first(client):
    before = int(time.time() * 1000)
    body = client.get("/connectors/src/heartbeats").get_json()
    after = int(time.time() * 1000)
    assert body["name"] == "src"
    first, second = body["partitions"]
    assert first["partition"] == {"filename": "/a"} and second["partition"] == {"filename": "/b"}
    assert first["offset"] == {"position": 42}
    assert first["last_moved_at"] == T0_MS
    assert before - T0_MS <= first["idle_ms"] <= after - T0_MS  # computed now, not the stored value
    assert first["last_heartbeat_at"] is None and first["next_heartbeat_at"] == T0_MS + 60_000
    assert second["last_heartbeat_at"] == T0_MS + 60_000 and second["next_heartbeat_at"] == T0_MS + 120_000
    assert first["eligible"] is True and first["reason"] is None
    assert [h["emitted_at"] for h in body["heartbeats"]] == [T0_MS + 120_000, T0_MS + 60_000]
    newest = body["heartbeats"][0]
    assert newest["value"] == "\ufffd" and newest["key"] == "/a"
    assert newest["committed_offset"] == {"position": 42} and newest["outcome"] == "produced"
    assert newest["topic"] == "connect-heartbeats" and newest["kafka_offset"] == 120


def test_not_eligible_connector_says_why(client):
    (partition,) = client.get("/connectors/paused/heartbeats").get_json()["partitions"]
    assert partition["eligible"] is False and partition["reason"] == "target state PAUSED"
    assert partition["next_heartbeat_at"] is None


def test_unknown_connector_has_empty_lists(client):
    assert client.get("/connectors/nope/heartbeats").get_json() == {"name": "nope", "partitions": [], "heartbeats": []}


@pytest.mark.parametrize(("limit", "status", "count"), [("1", 200, 1), ("1000", 200, 2), ("0", 400, 0), ("x", 400, 0)])
def test_limit(client, limit, status, count):
    response = client.get(f"/connectors/src/heartbeats?limit={limit}")
    assert response.status_code == status
    if status == 200:
        assert len(response.get_json()["heartbeats"]) == count
    else:
        assert response.get_json()["error_code"] == 400 and "limit" in response.get_json()["message"]


def test_missing_tables_answer_503_naming_the_job(make_client):
    response = make_client().get("/connectors/src/heartbeats")
    assert response.status_code == 503
    assert "connect-state-heartbeats" in response.get_json()["message"]
