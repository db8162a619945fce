"""KIP-875 offsets endpoints (api/offsets.py) with Flask's test client, fake tables, a recording writer, a fake admin.

Connect's checks in Connect's order (``Worker.modifySourceConnectorOffsets``, ``SinkUtils``), its messages
(OffsetsApiIntegrationTest), the GET shapes for source and sink connectors (``ConnectorOffsets``), the records
written for source connectors and the admin calls made for sinks.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient
from kafka import errors as kafka_errors

import connect_state.api.resources as api_resources
from connect_state.connect.filestream import FILE_SINK_CLASS as FILE_STREAM_SINK_CLASS
from connect_state.connect.filestream import FILE_SOURCE_CLASS as FILE_STREAM_SOURCE_CLASS
from connect_state.connect.rest import (
    connector_not_found_message,
    not_stopped_message,
    offsets_success_message,
    sink_alter_failed_message,
    sink_alter_zombie_message,
    sink_list_failed_message,
    sink_reset_failed_message,
    sink_reset_zombie_message,
    source_modify_failed_message,
    source_modify_timeout_message,
)
from connect_state.core.errors import KafkaWriteError, KafkaWriteTimeout
from connect_state.core.settings import Settings
from connect_state.formats.offsets import offset_key_bytes
from connect_state.herder import source_timeout_message
from connect_state.kafka import ConsumerGroupAdminError, ConsumerGroupAdminTimeout, GroupNotEmptyError
from connect_state.tables.schemas import CONNECTORS, SINK_OFFSETS, SOURCE_OFFSETS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import FakeAdmin, InMemoryTables, InMemoryTopics, RecordingWriter
from tests.unit.helpers import mirror_connectors

WORKER_TOPIC = "connect-offsets"
EMPTY = "Partitions / offsets need to be provided for an alter offsets request"
ALTERED_SHORT = "The offsets for this connector have been altered successfully"
RESET_SHORT = "The offsets for this connector have been reset successfully"
ALTERED_LONG = offsets_success_message("altered", False)
RESET_LONG = offsets_success_message("reset", False)

# --- rows -----------------------------------------------------------------------------------------------------------


def connector(name: str, kind: str = "source", target_state: str = "STOPPED", task_count: int = 0, **fields: Any):
    """A ``connectors`` row: a configured FileStream connector (source by default), STOPPED with 0 tasks."""
    config = fields.pop("config", None)
    if config is None:
        config = {"connector.class": FILE_STREAM_SOURCE_CLASS if kind == "source" else FILE_STREAM_SINK_CLASS}
        config.update(
            {"file": "/tmp/in.txt", "topic": "t"} if kind == "source" else {"file": "/tmp/out", "topics": "t"}
        )
    row = {
        "name": name,
        "type": kind,
        "connector_class": config.get("connector.class"),
        "config": json.dumps({"name": name, **config}),
        "target_state": target_state,
        "task_count": task_count,
        "deleted": False,
    }
    row.update(fields)
    return row


def source_row(name: str, partition_json: str, value: bytes | None, topic: str = WORKER_TOPIC, listed: bool = True):
    """A ``source_offsets`` row whose key is ``[name, <partition_json>]`` byte for byte (any key order)."""
    key = f'["{name}",{partition_json}]'.encode()
    return {
        "connector": name,
        "offsets_topic": topic,
        "partition": partition_json,
        "key": key,
        "offset": value.decode() if value is not None else None,
        "value": value,
        "listed": listed,
    }


def sink_row(group: str, topic: str, partition: int, offset: int) -> dict[str, Any]:
    return {"group_id": group, "topic": topic, "partition": partition, "offset": offset}


CONNECTORS_ROWS = [
    connector("src"),
    connector("src-running", target_state="STARTED", task_count=1),
    connector("src-paused", target_state="PAUSED", task_count=1),
    connector("src-stopping", target_state="STOPPED", task_count=1),
    connector("src-deleted", deleted=True, config=None),
    connector("src-nofile", config={"connector.class": FILE_STREAM_SOURCE_CLASS, "topic": "t"}),
    connector("src-blankfile", config={"connector.class": FILE_STREAM_SOURCE_CLASS, "file": "  ", "topic": "t"}),
    connector("src-other", config={"connector.class": "com.example.MySourceConnector"}),
    connector("src-own", config={"connector.class": "FileStreamSource", "file": "/x", "offsets.storage.topic": "own"}),
    connector("snk", kind="sink"),
    connector("snk-running", kind="sink", target_state="STARTED", task_count=1),
    connector("snk-other", kind="sink", config={"connector.class": "com.example.MySinkConnector", "topics": "t"}),
    connector(
        "snk-group",
        kind="sink",
        config={"connector.class": FILE_STREAM_SINK_CLASS, "topics": "t", "consumer.override.group.id": "custom"},
    ),
]
SOURCE_ROWS = [
    source_row("src", '{"filename":"/tmp/in.txt"}', b'{"position":42}'),
    # Written with its keys in document order, not HashMap order: Connect's lookup misses it.
    source_row("src", '{"b":"2","a":"1"}', b'{"position":7}'),
    source_row("src", '{"a":"3","b":"4"}', b'{"position":8}'),  # HashMap order of {"a","b"} is a, b
    source_row("src", '{"filename":"/gone"}', b'{"position":1}', listed=False),
    source_row("src", '{"filename":"/bad"}', b'{"position":{"nested":1}}'),  # Connect cannot read it: left out
    source_row("src-own", '{"filename":"/both"}', b'{"position":1}', topic=WORKER_TOPIC),
    source_row("src-own", '{"filename":"/both"}', b'{"position":2}', topic="own"),
    source_row("src-own", '{"filename":"/worker-only"}', b'{"position":3}', topic=WORKER_TOPIC),
    source_row("src-own", '{"filename":"/elsewhere"}', b'{"position":4}', topic="another-topic"),
]
SINK_ROWS = [
    sink_row("connect-snk", "t", 2, 30),
    sink_row("connect-snk", "t", 0, 10),
    sink_row("connect-snk", "a", 1, 5),
    sink_row("custom", "t", 0, 99),
    sink_row("connect-snk-group", "t", 0, 1),
]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The shared settings with the worker's offsets topic named by this module."""
    return settings.with_overrides(**{"offset.storage.topic": WORKER_TOPIC})


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> FakeAdmin:
    fake = FakeAdmin(groups={"connect-snk", "custom"})
    monkeypatch.setattr(api_resources, "create_admin", lambda _settings: fake)
    return fake


@pytest.fixture
def tables() -> InMemoryTables:
    """The app's tables: :data:`CONNECTORS_ROWS`, :data:`SOURCE_ROWS` and :data:`SINK_ROWS` (in memory)."""
    return InMemoryTables(
        {CONNECTORS.name: CONNECTORS_ROWS, SOURCE_OFFSETS.name: SOURCE_ROWS, SINK_OFFSETS.name: SINK_ROWS}
    )


@pytest.fixture(autouse=True)
def config_topic(kafka_log: InMemoryTopics) -> InMemoryTopics:
    """The config topic behind :data:`CONNECTORS_ROWS`: the writes decide on it, read to its end (issue 10)."""
    mirror_connectors(kafka_log, CONNECTORS_ROWS)
    return kafka_log


@pytest.fixture
def client(make_client: MakeClient, tables: InMemoryTables, admin: FakeAdmin) -> FlaskClient:
    return make_client(tables=tables)


def patch(client: FlaskClient, name: str, body: object) -> tuple[int, Any]:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    response = client.patch(f"/connectors/{name}/offsets", data=data, content_type="application/json")
    return response.status_code, response.get_json()


def error(status: int, message: str) -> dict[str, Any]:
    return {"error_code": status, "message": message}


# --- body problems (OffsetsApiIntegrationTest): Connect's message, our 400 where Connect answers 500 ----------------

SOURCE_INVALID_BODIES = [
    # (body, Connect's status, fragment of Connect's message)
    ("[]", 500, "Cannot deserialize value"),
    ("{}", 400, EMPTY),
    ('{"key": []}', 500, "Unrecognized field"),
    ('{"offsets": []}', 400, EMPTY),
    ('{"offsets": {}}', 500, "Cannot deserialize value"),
    ('{"offsets": [123]}', 500, "Cannot construct instance"),
    ('{"offsets": [{"key": "val"}]}', 500, "Unrecognized field"),
    ('{"offsets": [{"partition": []}]}', 500, "Cannot deserialize value"),
    ('{"offsets": [null]}', 500, 'because "offset" is null'),
    ('{"offsets": null}', 400, EMPTY),
    ("null", 400, EMPTY),
    ("", 400, EMPTY),
]


@pytest.mark.parametrize(("body", "connect_status", "fragment"), SOURCE_INVALID_BODIES)
def test_invalid_bodies_source(client, writer, body, connect_status, fragment):
    status, answer = patch(client, "src", body)
    assert status == 400  # Connect: connect_status (Jackson's errors are 500s there; ours are 400s on purpose)
    assert answer["error_code"] == 400
    assert fragment in answer["message"]
    assert writer.sends == []


SINK_INVALID_BODIES = [
    ({}, EMPTY),
    ({"offsets": []}, EMPTY),
    ({"offsets": [{}]}, "The partition for a sink connector offset cannot be null or missing"),
    ({"offsets": [{"partition": None, "offset": None}]}, "The partition for a sink connector offset cannot be null"),
    (
        {"offsets": [{"partition": {}, "offset": None}]},
        "The partition for a sink connector offset must contain the keys 'kafka_topic' and 'kafka_partition'",
    ),
    (
        {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": "not a number"}, "offset": None}]},
        "Partition values for sink connectors need to be integers",
    ),
    (
        {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {}}]},
        "The offset for a sink connector should either be null or contain the key 'kafka_offset'",
    ),
    (
        {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": "x"}}]},
        "Offset values for sink connectors need to be integers",
    ),
    (
        {"offsets": [{"partition": {"kafka_topic": None, "kafka_partition": 0}, "offset": None}]},
        "Kafka topic names must be valid strings and may not be null",
    ),
]


@pytest.mark.parametrize(("body", "fragment"), SINK_INVALID_BODIES)
def test_invalid_bodies_sink(client, admin, body, fragment):
    status, answer = patch(client, "snk", body)
    assert (status, answer["error_code"]) == (400, 400)
    assert fragment in answer["message"]
    assert admin.calls == []


def test_invalid_json_is_a_400_saying_so(client):
    status, answer = patch(client, "src", '{"offsets": [')
    assert status == 400
    assert answer["message"].startswith("Request body is not valid JSON")
    status, answer = patch(client, "src", '{"offsets": [{"partition": {"a": NaN}, "offset": null}]}')
    assert status == 400
    assert "NaN" in answer["message"]


# --- check order ----------------------------------------------------------------------------------------------------

VALID_SOURCE_BODY = {"offsets": [{"partition": {"filename": "/tmp/in.txt"}, "offset": {"position": 5}}]}
VALID_SINK_BODY = {
    "offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]
}


@pytest.mark.parametrize(
    ("name", "body", "expected"),
    [
        # The empty-body 400 comes before the existence check, body-binding errors too.
        ("nope", {}, error(400, EMPTY)),
        ("nope", {"offsets": []}, error(400, EMPTY)),
        ("nope", '{"offsets": {}}', None),
        # Then 404 (a deleted connector is unknown), before the STOPPED check.
        ("nope", {"offsets": [{"partition": {}, "offset": {}}]}, error(404, connector_not_found_message("nope"))),
        ("src-deleted", VALID_SOURCE_BODY, error(404, connector_not_found_message("src-deleted"))),
        # Then the STOPPED check, before any connector-type check.
        ("src-running", VALID_SOURCE_BODY, error(400, not_stopped_message("src-running"))),
        ("src-paused", VALID_SOURCE_BODY, error(400, not_stopped_message("src-paused"))),
        ("src-stopping", VALID_SOURCE_BODY, error(400, not_stopped_message("src-stopping"))),
        (
            "src-running",
            {"offsets": [{"partition": {"a": [1]}, "offset": None}]},
            error(400, not_stopped_message("src-running")),
        ),
        ("snk-running", {"offsets": [{}]}, error(400, not_stopped_message("snk-running"))),
    ],
)
def test_patch_check_order(client, writer, admin, name, body, expected):
    status, answer = patch(client, name, body)
    if expected is None:
        assert status == 400 and "Cannot deserialize value" in answer["message"]
    else:
        assert (status, answer) == (expected["error_code"], expected)
    assert writer.sends == [] and admin.calls == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nope", error(404, connector_not_found_message("nope"))),
        ("src-deleted", error(404, connector_not_found_message("src-deleted"))),
        ("src-running", error(400, not_stopped_message("src-running"))),
        ("src-paused", error(400, not_stopped_message("src-paused"))),
        ("snk-running", error(400, not_stopped_message("snk-running"))),
    ],
)
def test_delete_check_order(client, writer, admin, name, expected):
    response = client.delete(f"/connectors/{name}/offsets")
    assert (response.status_code, response.get_json()) == (expected["error_code"], expected)
    assert writer.sends == [] and admin.calls == []


def test_not_stopped_message_is_connects():
    assert not_stopped_message("c") == (
        "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the "
        "specified connector by issuing a 'PUT' request to the '/connectors/c/stop' endpoint"
    )


# --- GET ------------------------------------------------------------------------------------------------------------


def test_get_source_offsets(client):
    response = client.get("/connectors/src/offsets")
    assert response.status_code == 200
    assert response.get_json() == {
        "offsets": [
            {"partition": {"a": "1", "b": "2"}, "offset": None},  # written as {"b","a"}: Connect's lookup misses
            {"partition": {"a": "3", "b": "4"}, "offset": {"position": 8}},
            {"partition": {"filename": "/tmp/in.txt"}, "offset": {"position": 42}},
        ]
    }
    # Partition before offset, partition keys in HashMap order, compact Jackson bytes.
    assert response.get_data().startswith(b'{"offsets":[{"partition":{"a":"1","b":"2"},"offset":null},')


def test_get_source_offsets_follows_the_rows_not_an_earlier_answer(client, tables: InMemoryTables):
    """The answer kept for the same rows (issue 11 §5) is never served once the rows changed."""
    first = client.get("/connectors/src/offsets").get_json()
    assert client.get("/connectors/src/offsets").get_json() == first
    tables.tables[SOURCE_OFFSETS.name] = [
        source_row("src", '{"filename":"/tmp/in.txt"}', b'{"position":43}'),
        source_row("src", '{"filename":"/new"}', b'{"position":1}'),
    ]
    assert client.get("/connectors/src/offsets").get_json() == {
        "offsets": [
            {"partition": {"filename": "/new"}, "offset": {"position": 1}},
            {"partition": {"filename": "/tmp/in.txt"}, "offset": {"position": 43}},
        ]
    }
    tables.tables[SOURCE_OFFSETS.name] = SOURCE_ROWS
    assert client.get("/connectors/src/offsets").get_json() == first


def test_an_unreadable_offset_is_logged_on_every_get(client, caplog: pytest.LogCaptureFixture):
    """As Connect logs it on every read, also when the answer was kept from the previous GET."""
    for _ in range(2):
        client.get("/connectors/src/offsets")
    logged = [r.getMessage() for r in caplog.records if "Failed to deserialize offset data" in r.getMessage()]
    assert len(logged) == 2 and all("/bad" in message for message in logged)


def test_get_source_offsets_with_a_connector_specific_topic(client):
    """Partitions from both topics; values from the connector's topic only (4.3.1's ConnectorOffsetBackingStore)."""
    response = client.get("/connectors/src-own/offsets")
    assert response.get_json() == {
        "offsets": [
            {"partition": {"filename": "/both"}, "offset": {"position": 2}},
            {"partition": {"filename": "/worker-only"}, "offset": None},
        ]
    }


def test_get_sink_offsets(client):
    response = client.get("/connectors/snk/offsets")
    assert response.status_code == 200
    assert response.get_data() == (
        b'{"offsets":['
        b'{"partition":{"kafka_partition":1,"kafka_topic":"a"},"offset":{"kafka_offset":5}},'
        b'{"partition":{"kafka_partition":0,"kafka_topic":"t"},"offset":{"kafka_offset":10}},'
        b'{"partition":{"kafka_partition":2,"kafka_topic":"t"},"offset":{"kafka_offset":30}}]}'
    )


def test_get_sink_offsets_of_an_overridden_group(client):
    response = client.get("/connectors/snk-group/offsets")
    assert response.get_json() == {
        "offsets": [{"partition": {"kafka_partition": 0, "kafka_topic": "t"}, "offset": {"kafka_offset": 99}}]
    }


def test_get_works_while_running_and_without_offsets(client):
    assert client.get("/connectors/src-running/offsets").get_json() == {"offsets": []}
    assert client.get("/connectors/snk-running/offsets").get_json() == {"offsets": []}


@pytest.mark.parametrize("name", ["nope", "src-deleted"])
def test_get_unknown_connector(client, name):
    response = client.get(f"/connectors/{name}/offsets")
    assert (response.status_code, response.get_json()) == (404, error(404, f"Connector {name} not found"))


def test_get_without_the_offsets_table_is_a_503(make_client, admin):
    client = make_client(tables=InMemoryTables({CONNECTORS.name: CONNECTORS_ROWS}))
    assert client.get("/connectors/src/offsets").status_code == 503
    assert client.get("/connectors/snk/offsets").status_code == 503


# --- source PATCH / DELETE ------------------------------------------------------------------------------------------


def test_patch_source_writes_connects_records(client, writer):
    body = {
        "offsets": [
            {"partition": {"line": 1, "filename": "/f"}, "offset": {"position": 5}},
            {"partition": {"filename": "/tmp/in.txt"}, "offset": None},
            {"partition": {"filename": "/tmp/other"}, "offset": {"position": 0}},
        ]
    }
    status, answer = patch(client, "src", body)
    assert (status, answer) == (200, {"message": ALTERED_SHORT})
    assert writer.batches == [
        (
            WORKER_TOPIC,
            [
                (b'["src",{"filename":"/f","line":1}]', b'{"position":5}'),  # HashMap order, as Connect writes
                (b'["src",{"filename":"/tmp/in.txt"}]', None),
                (b'["src",{"filename":"/tmp/other"}]', b'{"position":0}'),
            ],
        )
    ]


def test_patch_source_of_another_class_gets_the_long_message(client, writer):
    body = {"offsets": [{"partition": {"any": 1}, "offset": {"whatever": [1]}}]}
    status, answer = patch(client, "src-other", body)
    assert (status, answer) == (
        500,
        error(500, "Offsets may only contain primitive types as values, but field whatever contains ARRAY"),
    )
    status, answer = patch(client, "src-other", {"offsets": [{"partition": {"any": 1}, "offset": {"n": 1.5}}]})
    assert (status, answer) == (200, {"message": ALTERED_LONG})
    assert writer.batches == [(WORKER_TOPIC, [(b'["src-other",{"any":1}]', b'{"n":1.5}')])]


def test_patch_source_with_a_connector_specific_topic(client, writer):
    body = {
        "offsets": [
            {"partition": {"filename": "/a"}, "offset": {"position": 1}},
            {"partition": {"filename": "/b"}, "offset": None},
        ]
    }
    status, answer = patch(client, "src-own", body)
    assert (status, answer) == (200, {"message": ALTERED_SHORT})
    a, b = b'["src-own",{"filename":"/a"}]', b'["src-own",{"filename":"/b"}]'
    assert writer.batches == [
        (WORKER_TOPIC, [(b, None)]),  # tombstones to the worker's topic first
        ("own", [(a, b'{"position":1}'), (b, None)]),  # everything to the connector's topic
        (WORKER_TOPIC, [(a, b'{"position":1}')]),  # then the regular offsets to the worker's topic
    ]


@pytest.mark.parametrize(
    ("name", "entry", "message"),
    [
        (
            "src-nofile",
            {"partition": {"filename": "/a"}, "offset": None},
            "Offsets cannot be modified if the 'file' configuration is unspecified. This is because stdin is used "
            "for input and offsets are not tracked.",
        ),
        (
            "src-blankfile",
            {"partition": {"filename": "/a"}, "offset": None},
            "Offsets cannot be modified if the 'file' configuration is unspecified. This is because stdin is used "
            "for input and offsets are not tracked.",
        ),
        (
            "src",
            {"partition": {"filename": "/a"}, "offset": {}},
            "Offset objects should either be null or contain the key 'position'",
        ),
        (
            "src",
            {"partition": {"filename": "/a"}, "offset": {"position": "5"}},
            "The value for the 'position' key in the offset is expected to be a Long value",
        ),
        (
            "src",
            {"partition": {"filename": "/a"}, "offset": {"position": 5.0}},
            "The value for the 'position' key in the offset is expected to be a Long value",
        ),
        (
            "src",
            {"partition": {"filename": "/a"}, "offset": {"position": -1}},
            "The value for the 'position' key in the offset should be a non-negative value",
        ),
        ("src", {"offset": {"position": 1}}, "Partition objects cannot be null"),
        (
            "src",
            {"partition": {"file": "/a"}, "offset": {"position": 1}},
            "Partition objects should contain the key 'filename'",
        ),
        (
            "src",
            {"partition": {"filename": {"x": 1}}, "offset": None},
            "Offsets may only contain primitive types as values, but field filename contains MAP",
        ),
    ],
)
def test_patch_source_connector_checks_are_500s(client, writer, name, entry, message):
    status, answer = patch(client, name, {"offsets": [entry]})
    assert (status, answer) == (500, error(500, message))
    assert writer.sends == []


def test_patch_source_tolerates_a_tombstone_for_anything(client, writer):
    status, answer = patch(client, "src", {"offsets": [{"offset": None}]})
    assert (status, answer) == (200, {"message": ALTERED_SHORT})
    assert writer.batches == [(WORKER_TOPIC, [(b'["src",null]', None)])]


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (KafkaWriteTimeout("timed out after 30000 ms waiting for Kafka"), "TIMEOUT"),
        (KafkaWriteError("write to topic 'connect-offsets' failed: boom"), source_modify_failed_message("src")),
    ],
)
def test_source_write_failures(make_client, tables, admin, failure, message):
    """A timed-out write answers Connect's message, then ours: the outcome is unknown, how to find out."""
    client = make_client(tables=tables, writer=RecordingWriter(fail=failure))
    patch_message = source_timeout_message("src", "PATCH /connectors/src/offsets") if message == "TIMEOUT" else message
    assert patch(client, "src", VALID_SOURCE_BODY) == (500, error(500, patch_message))
    response = client.delete("/connectors/src/offsets")
    delete_message = (
        source_timeout_message("src", "DELETE /connectors/src/offsets") if message == "TIMEOUT" else message
    )
    assert (response.status_code, response.get_json()) == (500, error(500, delete_message))
    if message == "TIMEOUT":
        assert delete_message.startswith(source_modify_timeout_message("src") + ". The outcome is unknown")
        assert "GET /connectors/src/offsets" in delete_message


def test_secondary_write_failure_is_only_logged(make_client, tables, admin):
    writer = RecordingWriter(fail=lambda topic: KafkaWriteError("boom") if topic == WORKER_TOPIC else None)
    client = make_client(tables=tables, writer=writer)
    status, answer = patch(client, "src-own", VALID_SOURCE_BODY)
    assert (status, answer) == (200, {"message": ALTERED_SHORT})
    assert [topic for topic, _ in writer.batches] == ["own"]


def test_delete_source_tombstones_every_listed_partition(client, writer):
    first = client.delete("/connectors/src/offsets")
    assert (first.status_code, first.get_json()) == (200, {"message": RESET_SHORT})
    assert writer.batches == [
        (
            WORKER_TOPIC,
            [
                # the HashMap-ordered key, as Connect writes it: the {"b","a"} record itself survives
                (offset_key_bytes("src", {"a": "1", "b": "2"}), None),
                (b'["src",{"a":"3","b":"4"}]', None),
                (b'["src",{"filename":"/bad"}]', None),
                (b'["src",{"filename":"/tmp/in.txt"}]', None),
            ],
        )
    ]


def test_delete_source_with_a_connector_specific_topic(client, writer):
    response = client.delete("/connectors/src-own/offsets")
    assert response.get_json() == {"message": RESET_SHORT}
    keys = [b'["src-own",{"filename":"/both"}]', b'["src-own",{"filename":"/worker-only"}]']
    assert writer.batches == [(WORKER_TOPIC, [(k, None) for k in keys]), ("own", [(k, None) for k in keys])]


def test_delete_source_without_partitions_succeeds_without_writing(client, writer):
    for _ in range(2):
        response = client.delete("/connectors/src-other/offsets")
        assert (response.status_code, response.get_json()) == (200, {"message": RESET_LONG})
    assert writer.sends == []
    response = client.delete("/connectors/src-nofile/offsets")  # FileStreamSource.alterOffsets still checks 'file'
    assert response.status_code == 500
    assert response.get_json()["message"].startswith("Offsets cannot be modified if the 'file' configuration")


# --- sink PATCH / DELETE --------------------------------------------------------------------------------------------


def test_patch_sink_alters_and_deletes(client, admin):
    body = {
        "offsets": [
            {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": None},
            {"partition": {"kafka_topic": "t", "kafka_partition": "1"}, "offset": {"kafka_offset": 5}},
            {"partition": {"kafka_topic": "t", "kafka_partition": 2}, "offset": {"kafka_offset": "5"}},
        ]
    }
    status, answer = patch(client, "snk", body)
    assert (status, answer) == (200, {"message": ALTERED_SHORT})
    assert admin.calls == [
        ("alter_group_offsets", "connect-snk", {("t", 1): 5, ("t", 2): 5}),
        ("delete_group_offsets", "connect-snk", [("t", 0)]),
    ]


def test_patch_sink_of_another_class_and_group_override(make_client, tables, admin):
    # the group allow-list: connect_state.security.guards
    client = make_client(tables=tables, overrides={"api.allowed.groups": "connect-*,custom"})
    assert patch(client, "snk-other", VALID_SINK_BODY) == (200, {"message": ALTERED_LONG})
    assert patch(client, "snk-group", VALID_SINK_BODY) == (200, {"message": ALTERED_SHORT})
    assert [call[1] for call in admin.calls] == ["connect-snk-other", "custom"]


@pytest.mark.parametrize(
    ("method", "failure", "message"),
    [
        ("alter_group_offsets", GroupNotEmptyError("members"), sink_alter_zombie_message("snk")),
        ("alter_group_offsets", ConsumerGroupAdminTimeout("slow"), sink_alter_failed_message("snk")),
        ("alter_group_offsets", ConsumerGroupAdminError("boom"), sink_alter_failed_message("snk")),
    ],
)
def test_patch_sink_failures(client, admin, method, failure, message):
    admin.errors[method] = failure
    assert patch(client, "snk", VALID_SINK_BODY) == (500, error(500, message))


def test_patch_sink_zombie_on_delete_offsets(client, admin):
    admin.errors["delete_group_offsets"] = GroupNotEmptyError("subscribed")
    body = {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": None}]}
    assert patch(client, "snk", body) == (500, error(500, sink_alter_zombie_message("snk")))


def test_zombie_messages_are_connects():
    assert "zombie sink task" in sink_alter_zombie_message("s")
    assert sink_reset_zombie_message("s").startswith("Failed to reset consumer group offsets for connector s either")
    assert sink_alter_zombie_message("s").endswith(
        "If the connector is in a stopped state, this operation can be safely retried. If it doesn't eventually "
        "succeed, the Connect cluster may need to be restarted to get rid of the zombie sink tasks."
    )


def test_delete_sink_deletes_the_group_idempotently(client, admin):
    for _ in range(2):
        response = client.delete("/connectors/snk/offsets")
        assert (response.status_code, response.get_json()) == (200, {"message": RESET_SHORT})
    assert admin.calls == [
        ("list_group_offsets", "connect-snk", None),
        ("delete_group", "connect-snk", None),
        ("list_group_offsets", "connect-snk", None),
        ("delete_group", "connect-snk", None),
    ]
    assert client.delete("/connectors/snk-other/offsets").get_json() == {"message": RESET_LONG}


@pytest.mark.parametrize(
    ("method", "failure", "message"),
    [
        ("list_group_offsets", ConsumerGroupAdminTimeout("slow"), sink_list_failed_message("snk")),
        ("delete_group", GroupNotEmptyError("members"), sink_reset_zombie_message("snk")),
        ("delete_group", ConsumerGroupAdminError("boom"), sink_reset_failed_message("snk")),
    ],
)
def test_delete_sink_failures(client, admin, method, failure, message):
    admin.errors[method] = failure
    response = client.delete("/connectors/snk/offsets")
    assert (response.status_code, response.get_json()) == (500, error(500, message))


# --- the real ConsumerGroupAdmin's error mapping, with a stubbed kafka-python client --------------------------------


class StubKafkaAdmin:
    def __init__(self, **answers: Any) -> None:
        self.answers = answers

    def __getattr__(self, name: str) -> Callable[..., Any]:
        answer = self.answers[name]

        def call(*args: Any, **kwargs: Any) -> Any:
            if isinstance(answer, BaseException):
                raise answer
            return answer(*args) if callable(answer) else answer

        return call

    def close(self) -> None:
        pass


def group_admin(settings: Settings, **answers: Any):
    from connect_state.kafka import ConsumerGroupAdmin

    admin = ConsumerGroupAdmin(settings, timeout_ms=300)
    admin._admin = StubKafkaAdmin(**answers)  # type: ignore[assignment]
    return admin


def test_group_admin_delete_group(settings):
    assert group_admin(settings, delete_groups={"g": "OK"}).delete_group("g") is True
    assert group_admin(settings, delete_groups={"g": "GroupIdNotFoundError"}).delete_group("g") is False
    with pytest.raises(GroupNotEmptyError):
        group_admin(settings, delete_groups={"g": "NonEmptyGroupError"}).delete_group("g")
    with pytest.raises(ConsumerGroupAdminError):
        group_admin(settings, delete_groups={"g": "GroupAuthorizationFailedError"}).delete_group("g")
    with pytest.raises(ConsumerGroupAdminTimeout):  # retriable until the deadline
        group_admin(settings, delete_groups=kafka_errors.CoordinatorNotAvailableError()).delete_group("g")


def test_group_admin_offsets(settings):
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata

    listed = {"g": {TopicPartition("t", 0): OffsetAndMetadata(5, "", None)}}
    assert group_admin(settings, list_group_offsets=listed).list_group_offsets("g") == {("t", 0): 5}
    assert group_admin(settings, list_group_offsets=kafka_errors.GroupIdNotFoundError()).list_group_offsets("g") == {}
    members = {TopicPartition("t", 0): kafka_errors.UnknownMemberIdError}
    with pytest.raises(GroupNotEmptyError):
        group_admin(settings, alter_group_offsets=members).alter_group_offsets("g", {("t", 0): 1})
    subscribed = {TopicPartition("t", 0): kafka_errors.GroupSubscribedToTopicError}
    with pytest.raises(GroupNotEmptyError):
        group_admin(settings, delete_group_offsets=subscribed).delete_group_offsets("g", [("t", 0)])
    ok = {TopicPartition("t", 0): kafka_errors.NoError}
    group_admin(settings, alter_group_offsets=ok).alter_group_offsets("g", {("t", 0): 1})
    with pytest.raises(ConsumerGroupAdminError):
        group_admin(settings, delete_group_offsets=kafka_errors.GroupIdNotFoundError()).delete_group_offsets(
            "g", [("t", 0)]
        )


# --- an alterOffsets rule has a deadline (offsets.alter.timeout.ms; issue 33, finding 8) ------------------------------

#: released by the test that made :func:`sleeping_rule` hang
RELEASE = threading.Event()


def sleeping_rule(config: Any, offsets: Any) -> bool:
    """A third-party ``alterOffsets`` rule waiting on a service that does not answer."""
    RELEASE.wait(10)
    return True


def test_a_rule_past_its_deadline_is_connects_500_naming_the_rule_and_nothing_is_written(make_client, tables, writer):
    rules = {
        "offsets.alter.rules": "com.example.MySourceConnector=tests.unit.test_api_offsets:sleeping_rule",
        "offsets.alter.timeout.ms": "50",
    }
    client = make_client(tables=tables, overrides=rules)
    body = {"offsets": [{"partition": {"any": 1}, "offset": {"position": 1}}]}
    RELEASE.clear()
    try:
        started = time.monotonic()
        status, answer = patch(client, "src-other", body)
        assert time.monotonic() - started < 5  # not the rule's 10 s
        assert (status, answer) == (
            500,
            {
                "error_code": 500,
                "message": "Failed to modify offsets for source connector src-other: the alterOffsets rule "
                "tests.unit.test_api_offsets:sleeping_rule of class com.example.MySourceConnector did not return "
                "within 50 ms (offsets.alter.timeout.ms)",
            },
        )
        # while that call still runs, the rule is not called again: the next request fails at once
        status, answer = patch(client, "src-other", body)
        assert status == 500 and "an earlier call that missed its deadline of 50 ms" in answer["message"]
        assert writer.sends == []
    finally:
        RELEASE.set()
