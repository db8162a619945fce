"""``POST /connectors/<name>/restore`` (api/revive.py) with Flask's test client over history tables in memory: the
parameters' 400s before anything else, the 201 with the records written (target state, then the config with its
secrets) and an answer without the config, the hooks read from ``connector_deletions``, then a 409 writing nothing;
with ``offsets=true`` the offsets as of the deletion read from ``source_offsets_history`` and written after the
config. The herder's decisions: tests/unit/test_herder_revive.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.formats.config import connector_config_key, serialize_connector_config, target_state_key
from connect_state.formats.offsets import offset_key_bytes, serialize_offset_value
from connect_state.tables.schemas import CONNECTOR_DELETIONS, CONNECTOR_EVENTS, SOURCE_OFFSETS_HISTORY
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables, RecordingWriter

CONFIG = {"connector.class": "FileStreamSource", "file": "/tmp/in", "topic": "t", "db.password": "s3cret"}


def event(kind: str, offset: int, ms: int, config: dict[str, str] | None) -> dict[str, Any]:
    details = {"connector_class": "FileStreamSource", **({"config": config} if config is not None else {})}
    return {
        "connector": "src",
        "event": kind,
        "details": json.dumps(details),
        "source": "config",
        "kafka_partition": 0,
        "kafka_offset": offset,
        "kafka_timestamp": datetime.fromtimestamp(ms / 1000, UTC),
    }


def offsets_row(position: int, ms: int, kafka_offset: int) -> dict[str, Any]:
    return {
        "connector": "src",
        "offsets_topic": "connect-offsets",
        "partition": '{"filename":"/tmp/in"}',
        "key": b'["src",{"filename":"/tmp/in"}]',
        "offset": json.dumps({"position": position}),
        "change": "set",
        "kafka_partition": 0,
        "kafka_offset": kafka_offset,
        "kafka_timestamp": datetime.fromtimestamp(ms / 1000, UTC),
    }


def tables(with_deletions: bool) -> InMemoryTables:
    content: dict[str, list[dict[str, Any]]] = {
        CONNECTOR_EVENTS.name: [event("created", 0, 1_000, CONFIG), event("deleted", 4, 2_000, CONFIG)]
    }
    content[SOURCE_OFFSETS_HISTORY.name] = [offsets_row(4, 1_500, 1), offsets_row(9, 2_500, 2)]  # 9: after the deletion
    if with_deletions:
        content[CONNECTOR_DELETIONS.name] = [
            {"connector": "src", "deletion_offset": 4, "step": "hook:drop-table", "status": "succeeded"}
        ]
    return InMemoryTables(content)


@pytest.fixture
def client(make_client: MakeClient) -> FlaskClient:
    return make_client(tables=tables(with_deletions=True))


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ({"at": "soon"}, "Invalid at 'soon'"),
        ({"initial_state": "GONE"}, "Invalid initial_state 'GONE'"),
        ({"offsets": "yes"}, "Invalid offsets 'yes'"),
    ],
)
def test_bad_parameters_are_400_and_write_nothing(client, writer: RecordingWriter, query, fragment) -> None:
    response = client.post("/connectors/src/restore", query_string=query)
    assert response.status_code == 400
    assert fragment in response.get_json()["message"]
    assert writer.sends == []


def test_restored_then_409(client: FlaskClient, writer: RecordingWriter) -> None:
    response = client.post("/connectors/src/restore", query_string={"initial_state": "paused"})
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    assert "s3cret" not in response.get_data(as_text=True)
    assert body["initial_state"] == "PAUSED" and body["cleanup_hooks_ran"] == ["drop-table"]
    assert body["config_offset"] == 0 and body["deletion_offset"] == 4 and body["deleted_at"] == 2_000
    [(_, records, _)] = writer.sends
    assert [key for key, _ in records] == [target_state_key("src").encode(), connector_config_key("src").encode()]
    assert records[1][1] == serialize_connector_config(CONFIG)
    again = client.post("/connectors/src/restore")
    assert again.status_code == 409
    assert again.get_json() == {"error_code": 409, "message": "Connector src already exists"}
    assert len(writer.sends) == 1


def test_without_the_cleanup_table_no_hook_ran(make_client: MakeClient, writer: RecordingWriter) -> None:
    response = make_client(tables=tables(with_deletions=False)).post("/connectors/src/restore")
    assert response.status_code == 201 and response.get_json()["cleanup_hooks_ran"] == []
    assert response.get_json()["initial_state"] == "STOPPED"


def test_an_unknown_name_is_404(client: FlaskClient, writer: RecordingWriter) -> None:
    response = client.post("/connectors/other/restore")
    assert response.status_code == 404 and writer.sends == []


def test_with_its_offsets_as_of_the_deletion_after_the_config(client: FlaskClient, writer: RecordingWriter) -> None:
    response = client.post("/connectors/src/restore", query_string={"offsets": "true"})
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    assert body["offsets_at"] == 2_000
    partition = {"filename": "/tmp/in"}
    assert body["offsets"] == [
        {"partition": partition, "current": None, "restored": {"position": 4}, "change": "restored"}
    ]
    keys = [(topic, key) for topic, records, _ in writer.sends for key, _ in records]
    assert [topic for topic, _ in keys] == ["connect-configs", "connect-configs", "connect-offsets"]
    assert keys[2][1] == offset_key_bytes("src", partition)
    assert writer.sends[-1][1][0][1] == serialize_offset_value({"position": 4})


def test_offsets_with_a_running_state_are_400(client: FlaskClient, writer: RecordingWriter) -> None:
    response = client.post("/connectors/src/restore", query_string={"offsets": "TRUE", "initial_state": "running"})
    assert response.status_code == 400 and "STOPPED connectors only" in response.get_json()["message"]
    assert writer.sends == []
