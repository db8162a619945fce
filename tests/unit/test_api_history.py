"""History endpoints (api/history.py) and their pure parts (connect_state/tables/history.py,
connect_state/security/redaction.py)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.security.redaction import REDACTED, compile_patterns, redact_config
from connect_state.tables.history import parse_time
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables
from tests.unit.helpers import assert_connect_error
from tests.unit.test_api_connectors import connector


def ts(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def event(name: str, kind: str, offset: int, ms: int, source: str = "config", **details: Any) -> dict[str, Any]:
    return {
        "connector": name,
        "event": kind,
        "details": json.dumps(details),
        "source": source,
        "kafka_partition": 0,
        "kafka_offset": offset,
        "kafka_timestamp": ts(ms),
    }


CONFIG_1 = {"name": "src", "connector.class": "X", "connection.password": "pw", "topic": "a"}
CONFIG_2 = {"name": "src", "connector.class": "X", "connection.password": "pw2", "topic": "b", "batch": "5"}
EVENTS = [
    event("src", "created", 1, 1000, connector_class="X", target_state="STARTED", config=CONFIG_1),
    event("src", "tasks_committed", 2, 1100, task_count=1, previous_task_count=0, consistent=True),
    event("src", "status_changed", 5, 1200, source="status", to="RUNNING"),
    event(
        "src",
        "reconfigured",
        3,
        2000,
        connector_class="X",
        changed_keys=["batch", "connection.password", "topic"],
        config=CONFIG_2,
    ),
    event("src", "deleted", 4, 3000, connector_class="X", config=CONFIG_2, connector_type="source"),
]


def topic_change(name: str, topic: str, change: str, offset: int, ms: int) -> dict[str, Any]:
    return {
        "connector": name,
        "topic": topic,
        "change": change,
        "kafka_partition": 0,
        "kafka_offset": offset,
        "kafka_timestamp": ts(ms),
    }


def source_offset(offset: int, ms: int, position: int | None, partition: str = '{"filename":"f"}') -> dict[str, Any]:
    return {
        "connector": "src",
        "offsets_topic": "connect-offsets",
        "partition": partition,
        "key": b"k" + partition.encode(),
        "offset": json.dumps({"position": position}) if position is not None else None,
        "change": "set" if position is not None else "removed",
        "kafka_partition": 0,
        "kafka_offset": offset,
        "kafka_timestamp": ts(ms),
    }


def sink_offset(offset: int, ms: int, value: int | None, partition: int = 0) -> dict[str, Any]:
    return {
        "group_id": "connect-snk",
        "topic": "t",
        "partition": partition,
        "offset": value,
        "change": "set" if value is not None else "removed",
        "kafka_partition": 0,
        "kafka_offset": offset,
        "kafka_timestamp": ts(ms),
    }


TABLES = {
    "connectors": [connector("src", deleted=True, config=None, type="unknown"), connector("snk", type="sink")],
    "connector_events": EVENTS,
    "active_topics_history": [
        topic_change("src", "a", "added", 1, 1000),
        topic_change("src", "b", "added", 2, 2000),
        topic_change("src", "a", "removed", 3, 2500),
        topic_change("snk", "a", "added", 4, 1500),
    ],
    "active_topics": [{"connector": "snk", "topic": "a"}],
    "source_offsets_history": [
        source_offset(1, 1000, 5),
        source_offset(2, 2000, 9),
        source_offset(3, 2100, 1, partition='{"filename":"g"}'),
        source_offset(4, 2500, None, partition='{"filename":"g"}'),
    ],
    "sink_offsets_history": [sink_offset(1, 1000, 3), sink_offset(2, 2000, 7), sink_offset(3, 1500, 1, partition=1)],
    "rejected_records": [
        {
            "topic": "connect-configs",
            "partition": 0,
            "offset": 9,
            "key": b"bad",
            "value": None,
            "reason": "r",
            "seen_at": ts(5000),
        },
        {
            "topic": "connect-status",
            "partition": 1,
            "offset": 2,
            "key": None,
            "value": b"v",
            "reason": "s",
            "seen_at": ts(5000),
        },
    ],
}


#: The rows above are of 1970: kept for ever here (times before the retention: tests/unit/test_retention_api.py).
KEEP = {"history.retention.ms": "-1"}


@pytest.fixture
def client(make_client: MakeClient) -> FlaskClient:
    return make_client(tables=InMemoryTables(TABLES), overrides=KEEP)


def test_events_timeline_paged_and_filtered(client: FlaskClient) -> None:
    body = client.get("/connectors/src/events").get_json()
    assert body["total"] == 5 and body["next_offset"] is None
    assert [e["event"] for e in body["events"]] == [
        "created",
        "tasks_committed",
        "status_changed",
        "reconfigured",
        "deleted",
    ]
    assert body["events"][0]["kafka_timestamp"] == 1000
    assert body["events"][0]["details"]["config"]["connection.password"] == REDACTED
    page = client.get("/connectors/src/events?limit=2&offset=1").get_json()
    assert [e["kafka_offset"] for e in page["events"]] == [2, 5] and page["next_offset"] == 3
    kinds = client.get("/connectors/src/events?kind=created&kind=deleted").get_json()
    assert [e["event"] for e in kinds["events"]] == ["created", "deleted"]
    timed = client.get("/connectors/src/events?since=1100&until=1970-01-01T00:00:02Z").get_json()
    assert [e["kafka_timestamp"] for e in timed["events"]] == [1100, 1200, 2000]


@pytest.mark.parametrize("query", ["kind=nope", "since=yesterday", "limit=0", "limit=1001", "offset=-1", "limit=x"])
def test_events_bad_parameters(client: FlaskClient, query: str) -> None:
    response = client.get(f"/connectors/src/events?{query}")
    assert response.status_code == 400
    assert list(response.get_json()) == ["error_code", "message"]


@pytest.mark.parametrize(
    "path", ["events", "history/topics", "history/offsets", "history/configs", "history/offsets/partition"]
)
def test_unknown_connector(client: FlaskClient, path: str) -> None:
    assert_connect_error(client.get(f"/connectors/nope/{path}"), 404, "Connector nope not found")


def test_topics_as_of(client: FlaskClient) -> None:
    assert client.get("/connectors/src/history/topics?at=1500").get_json()["topics"] == ["a"]
    assert client.get("/connectors/src/history/topics?at=2200").get_json()["topics"] == ["a", "b"]
    assert client.get("/connectors/src/history/topics").get_json()["topics"] == ["b"]
    assert client.get("/connectors/src/history/topics?at=10").get_json()["topics"] == []


def test_source_offsets_as_of(client: FlaskClient) -> None:
    # A deleted source: its type comes from its deletion event.
    body = client.get("/connectors/src/history/offsets?at=1500").get_json()
    assert [(o["partition"], o["offset"]) for o in body["offsets"]] == [({"filename": "f"}, {"position": 5})]
    later = client.get("/connectors/src/history/offsets?at=2200").get_json()["offsets"]
    assert [(o["partition"], o["offset"]) for o in later] == [
        ({"filename": "f"}, {"position": 9}),
        ({"filename": "g"}, {"position": 1}),
    ]
    now = client.get("/connectors/src/history/offsets").get_json()["offsets"]
    assert [o["partition"] for o in now] == [{"filename": "f"}]


def test_sink_offsets_as_of(client: FlaskClient) -> None:
    body = client.get("/connectors/snk/history/offsets?at=1600").get_json()
    assert [(o["partition"], o["offset"]) for o in body["offsets"]] == [
        ({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 3}),
        ({"kafka_topic": "t", "kafka_partition": 1}, {"kafka_offset": 1}),
    ]


def test_partition_history(client: FlaskClient) -> None:
    body = client.get('/connectors/src/history/offsets/partition?partition={"filename":"g"}').get_json()
    assert body["history"] == [
        {"change": "set", "offset": {"position": 1}, "kafka_timestamp": 2100},
        {"change": "removed", "offset": None, "kafka_timestamp": 2500},
    ]
    sink = client.get('/connectors/snk/history/offsets/partition?partition={"kafka_topic":"t","kafka_partition":0}')
    assert [h["offset"] for h in sink.get_json()["history"]] == [{"kafka_offset": 3}, {"kafka_offset": 7}]
    assert client.get("/connectors/snk/history/offsets/partition?partition=[1]").status_code == 400
    assert client.get('/connectors/snk/history/offsets/partition?partition={"kafka_topic":1}').status_code == 400


def test_config_versions_redacted_with_diffs(client: FlaskClient, make_client: MakeClient) -> None:
    versions = client.get("/connectors/src/history/configs").get_json()["versions"]
    assert [(v["version"], v["event"]) for v in versions] == [(1, "created"), (2, "reconfigured"), (3, "deleted")]
    assert versions[0]["config"]["connection.password"] == REDACTED
    assert versions[1]["changes"] == {
        "added": {"batch": "5"},
        "removed": {},
        "changed": {"topic": {"from": "a", "to": "b"}},
    }
    assert versions[1]["changed_keys"] == ["batch", "connection.password", "topic"]
    assert versions[2]["config"] is None and versions[2]["kafka_timestamp"] == 3000
    other = make_client(tables=InMemoryTables(TABLES), overrides={**KEEP, "api.redact.patterns": "^topic$"})
    redacted = other.get("/connectors/src/history/configs").get_json()["versions"][0]["config"]
    # the patterns replaced, the PASSWORD keys of the ConfigDefs still hidden (Debezium JDBC's connection.password)
    assert redacted["topic"] == REDACTED and redacted["connection.password"] == REDACTED


def test_topic_reverse_lookup(client: FlaskClient) -> None:
    assert client.get("/topics/a/connectors").get_json() == {
        "topic": "a",
        "connectors": [
            {"connector": "snk", "first_seen": 1500, "last_seen": 1500, "active": True},
            {"connector": "src", "first_seen": 1000, "last_seen": 2500, "active": False},
        ],
    }
    assert client.get("/topics/zzz/connectors").get_json()["connectors"] == []


def test_rejected_records(client: FlaskClient) -> None:
    body = client.get("/rejected-records").get_json()
    assert body["total"] == 2
    assert body["records"][0] == {
        "topic": "connect-configs",
        "partition": 0,
        "offset": 9,
        "key": base64.b64encode(b"bad").decode(),
        "value": None,
        "reason": "r",
        "seen_at": 5000,
        "redacted": False,  # the open API's anonymous principal is admin (tests/unit/test_redaction.py: others)
    }
    assert client.get("/rejected-records?topic=connect-status").get_json()["total"] == 1
    assert client.get("/rejected-records?limit=1").get_json()["next_offset"] == 1


def test_missing_table_answers_503(make_client: MakeClient) -> None:
    client = make_client(tables=InMemoryTables({"connectors": TABLES["connectors"]}))
    assert client.get("/connectors/src/events").status_code == 503


def test_redaction_and_time_parsing() -> None:
    config = {
        "ssl.keystore.password": "x",
        "sasl.jaas.config": "y",
        "key.converter": "k",
        "api.key": "z",
        "n": None,
        "client.secret": "s",
        "ssl.key.password": None,
    }
    assert redact_config(config) == {
        "ssl.keystore.password": REDACTED,
        "sasl.jaas.config": REDACTED,
        "key.converter": "k",
        "api.key": REDACTED,
        "n": None,
        "client.secret": REDACTED,
        "ssl.key.password": None,
    }
    assert redact_config(None) is None
    assert redact_config({"a": "1"}, compile_patterns("a")) == {"a": REDACTED}
    assert parse_time("1000") == 1000
    assert parse_time("1970-01-01T00:00:01") == 1000
    assert parse_time("1970-01-01T00:00:01+00:00") == 1000
    with pytest.raises(ValueError):
        parse_time("soon")
