"""No confused deputy (connect_state/guards.py, issue 13): names from a connector's config are checked before we act
on them, purely, and at each call site: PATCH/DELETE offsets (groups, offsets topics), the heartbeat emitter, the
offsets job's topics."""

from __future__ import annotations

import json
from typing import Any

import pytest

import connect_state.api.resources as api_resources
from connect_state.connect.offset_stores import ConnectorOffsetStores
from connect_state.folds.heartbeats import DuePartition
from connect_state.guards import (
    GuardRefusal,
    InternalTopics,
    check_consumer_group,
    check_heartbeat_topic,
    check_offsets_topic,
    checked_stores,
    permitted_offsets_topics,
)
from connect_state.heartbeat_emitter import HeartbeatEmitter, HeartbeatOutcome
from connect_state.settings import Settings
from connect_state.tables import CONNECTORS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables, InMemoryTopics, RecordingWriter
from tests.unit.helpers import assert_connect_error, mirror_connectors

INTERNAL = InternalTopics("connect-configs", "connect-offsets", "connect-status")


@pytest.mark.parametrize(
    ("topic", "refused"),
    [
        ("connect-heartbeats", False),
        ("my-heartbeats", False),
        ("connect-configs", True),
        ("connect-offsets", True),
        ("connect-status", True),
        ("__consumer_offsets", True),
        ("__transaction_state", True),
        ("_single-underscore", False),
    ],
)
def test_heartbeat_topic(topic: str, refused: bool) -> None:
    if refused:
        with pytest.raises(GuardRefusal, match=r"heartbeat\.records\.topic"):
            check_heartbeat_topic(topic, INTERNAL)
    else:
        assert check_heartbeat_topic(topic, INTERNAL) == topic


@pytest.mark.parametrize(
    ("group", "allowed", "refused"),
    [
        ("connect-c", "", False),  # the connector's default group, always
        ("connect-other", "connect-*", False),
        ("team-a.c", "connect-*,team-a.*", False),
        ("custom", "connect-*", True),
        ("connect-other", "", True),
        ("payments-consumer", "connect-*", True),
    ],
)
def test_consumer_group(group: str, allowed: str, refused: bool) -> None:
    if refused:
        with pytest.raises(GuardRefusal, match=r"api\.allowed\.groups"):
            check_consumer_group("c", group, allowed)
    else:
        assert check_consumer_group("c", group, allowed) == group


@pytest.mark.parametrize(
    ("topic", "allowed", "refused"),
    [
        ("connect-offsets", "", False),  # the worker's
        ("own-offsets", "*", False),
        ("own-offsets", "mm2-*", True),
        ("connect-configs", "*", True),
        ("connect-status", "*", True),
        ("__consumer_offsets", "*", True),
    ],
)
def test_offsets_topic(topic: str, allowed: str, refused: bool) -> None:
    if refused:
        with pytest.raises(GuardRefusal, match=r"offsets\.storage\.topic"):
            check_offsets_topic(topic, INTERNAL, allowed)
    else:
        assert check_offsets_topic(topic, INTERNAL, allowed) == topic


def test_stores_and_job_topics(settings: Settings) -> None:
    assert checked_stores(ConnectorOffsetStores("own", "connect-offsets"), settings).primary_topic == "own"
    with pytest.raises(GuardRefusal):
        checked_stores(ConnectorOffsetStores("connect-configs", "connect-offsets"), settings)
    topics = {"connect-offsets", "own", "connect-configs", "__consumer_offsets", "connect-status"}
    assert permitted_offsets_topics(topics, settings) == {"connect-offsets", "own"}


# --- at the API's call sites: refused before anything is written ---------------------------------------------------


def stopped(name: str, config: dict[str, str], kind: str = "sink") -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "connector_class": config["connector.class"],
        "config": json.dumps(config),
        "target_state": "STOPPED",
        "task_count": 0,
        "deleted": False,
    }


SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
ROWS = [
    stopped("snk-payments", {"connector.class": SINK, "topics": "t", "consumer.override.group.id": "payments"}),
    stopped("snk-ok", {"connector.class": SINK, "topics": "t", "consumer.override.group.id": "connect-shared"}),
    stopped(
        "src-configs",
        {"connector.class": SOURCE, "file": "/in", "topic": "t", "offsets.storage.topic": "connect-configs"},
        "source",
    ),
]


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []

    class Admin:
        def __getattr__(self, name: str) -> Any:
            def call(*args: Any) -> Any:
                if args:
                    calls.append((name, args[0]))
                return {} if name == "list_group_offsets" else True

            return call

    monkeypatch.setattr(api_resources, "create_admin", lambda _settings: Admin())
    return calls


@pytest.fixture
def guarded(make_client: MakeClient, kafka_log: InMemoryTopics, admin: list[tuple[str, str]]) -> Any:
    mirror_connectors(kafka_log, ROWS)
    return make_client(tables=InMemoryTables({CONNECTORS.name: ROWS}))


SINK_BODY = {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 1}}]}
SOURCE_BODY = {"offsets": [{"partition": {"filename": "/in"}, "offset": {"position": 1}}]}


@pytest.mark.parametrize("method", ["patch", "delete"])
def test_offsets_of_a_group_outside_the_pattern_are_refused(
    guarded: Any, admin: list[tuple[str, str]], method: str
) -> None:
    response = getattr(guarded, method)(
        "/connectors/snk-payments/offsets", json=SINK_BODY if method == "patch" else None
    )
    assert_connect_error(
        response,
        400,
        "consumer.override.group.id 'payments' of connector snk-payments is not an allowed consumer group: "
        "connect-state alters or deletes only connect-snk-payments and groups matching api.allowed.groups",
    )
    assert admin == []
    ok = getattr(guarded, method)("/connectors/snk-ok/offsets", json=SINK_BODY if method == "patch" else None)
    assert ok.status_code == 200 and {group for _, group in admin} == {"connect-shared"}


@pytest.mark.parametrize("method", ["patch", "delete"])
def test_offsets_topic_naming_an_internal_topic_is_refused(guarded: Any, writer: RecordingWriter, method: str) -> None:
    response = getattr(guarded, method)(
        "/connectors/src-configs/offsets", json=SOURCE_BODY if method == "patch" else None
    )
    assert response.status_code == 400
    assert "offsets.storage.topic 'connect-configs'" in response.get_json()["message"]
    assert writer.sends == []


# --- the heartbeat emitter -----------------------------------------------------------------------------------------


class Provider:
    def produce_heartbeat_records(self, *args: Any) -> list[Any]:
        raise AssertionError("never asked: the topic is refused first")


def test_heartbeat_emitter_refuses_internal_topics(settings: Settings) -> None:
    sender = RecordingWriter()

    class Sender:
        def ensure_topic(self, topic: str) -> None:
            raise AssertionError("never created")

        def send_messages(self, topic: str, messages: Any) -> Any:
            raise AssertionError("never sent")

    emitter = HeartbeatEmitter(
        {"X": Provider()},  # type: ignore[dict-item]
        Sender(),  # type: ignore[arg-type]
        sender,
        settings.offset_storage_topic,
        internal_topics=(settings.config_storage_topic, settings.status_storage_topic),
    )
    for topic in ("connect-configs", "connect-status", "connect-offsets", "__consumer_offsets"):
        due = DuePartition(
            connector="c",
            connector_class="X",
            config={},
            partition={"f": "x"},
            key=b"k",
            offset={"p": 1},
            last_moved_at=0,
            records_topic=topic,
            interval_ms=1000,
            idle_ms=5000,
            due_at=0,
            kafka_partition=None,
            kafka_offset=None,
        )
        (row,) = emitter.emit(due, 1)
        assert row.outcome == HeartbeatOutcome.FAILED and "heartbeat.records.topic" in (row.error or "")
    assert sender.sends == []
