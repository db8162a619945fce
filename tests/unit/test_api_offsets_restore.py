"""``POST /connectors/<name>/offsets/restore`` (api/offsets.py) with Flask's test client over the fixtures of
test_api_offsets.py plus history tables in memory: the parameters' 400s before anything else, the dry run's answer,
the 400 for a time before the history kept, and the audit row naming the time restored to. The herder's decisions:
tests/unit/test_herder_restore.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.herder.restore import restore_before_history_message
from connect_state.tables.schemas import (
    CONNECTOR_EVENTS,
    CONNECTORS,
    SINK_OFFSETS,
    SOURCE_OFFSETS,
    SOURCE_OFFSETS_HISTORY,
)
from tests.unit.conftest import MakeClient
from tests.unit.fakes import FakeAdmin, InMemoryTables, RecordingWriter
from tests.unit.test_api_offsets import (
    CONNECTORS_ROWS,
    SINK_ROWS,
    SOURCE_ROWS,
    WORKER_TOPIC,
    admin,
    config_topic,
    settings,
)

__all__ = ["admin", "config_topic", "settings"]  # the fixtures of test_api_offsets.py

CREATED_MS = 1_000
AT_MS = 3_000


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def history_row(partition: str, offset: str, ms: int, kafka_offset: int) -> dict[str, Any]:
    return {
        "connector": "src",
        "offsets_topic": WORKER_TOPIC,
        "partition": partition,
        "key": f'["src",{partition}]'.encode(),
        "offset": offset,
        "change": "set",
        "kafka_partition": 0,
        "kafka_offset": kafka_offset,
        "kafka_timestamp": at(ms),
    }


@pytest.fixture
def client(make_client: MakeClient, admin: FakeAdmin) -> FlaskClient:
    tables = InMemoryTables(
        {
            CONNECTORS.name: CONNECTORS_ROWS,
            SOURCE_OFFSETS.name: SOURCE_ROWS,
            SINK_OFFSETS.name: SINK_ROWS,
            CONNECTOR_EVENTS.name: [
                {
                    "connector": "src",
                    "event": "created",
                    "source": "config",
                    "kafka_partition": 0,
                    "kafka_offset": 0,
                    "kafka_timestamp": at(CREATED_MS),
                }
            ],
            SOURCE_OFFSETS_HISTORY.name: [
                history_row('{"filename":"/tmp/in.txt"}', '{"position":4}', 2_000, 1),
                history_row('{"filename":"/tmp/in.txt"}', '{"position":42}', 4_000, 2),
            ],
        }
    )
    return make_client(tables=tables)


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ({}, "The at parameter is required"),
        ({"at": "soon"}, "Invalid at 'soon'"),
        ({"at": AT_MS, "apply": "yes"}, "Invalid apply 'yes'"),
    ],
)
def test_bad_parameters_are_400_and_write_nothing(client, writer: RecordingWriter, query, fragment) -> None:
    response = client.post("/connectors/src/offsets/restore", query_string=query)
    assert response.status_code == 400
    assert fragment in response.get_json()["message"]
    assert writer.sends == []


def test_a_dry_run_answers_the_difference(client, writer: RecordingWriter) -> None:
    response = client.post("/connectors/src/offsets/restore", query_string={"at": "1970-01-01T00:00:03Z"})
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["at"] == AT_MS and body["applied"] is False
    moved = {"partition": {"filename": "/tmp/in.txt"}, "current": {"position": 42}, "restored": {"position": 4}}
    assert {**moved, "change": "altered"} in body["offsets"]
    assert writer.sends == []


def test_a_time_before_the_history_is_400(client, writer: RecordingWriter) -> None:
    response = client.post("/connectors/src/offsets/restore", query_string={"at": CREATED_MS - 1, "apply": "true"})
    assert response.get_json() == {
        "error_code": 400,
        "message": restore_before_history_message("src", CREATED_MS - 1, CREATED_MS),
    }
    assert writer.sends == []
