"""No confused deputy (connect_state/security/guards.py, issue 13): names from a connector's config are checked before
we act on them, purely, and at each call site: PATCH/DELETE offsets (groups, offsets topics), the heartbeat emitter, the
offsets job's topics."""

from __future__ import annotations

import json
from typing import Any

import pytest

import connect_state.api.resources as api_resources
from connect_state.connect.offset_stores import ConnectorOffsetStores
from connect_state.core.errors import TopicNotFoundError
from connect_state.core.settings import Settings
from connect_state.heartbeats.emitter import HeartbeatEmitter, HeartbeatOutcome
from connect_state.heartbeats.fold import DuePartition
from connect_state.heartbeats.provider import HeartbeatRecord
from connect_state.kafka import RecordPosition
from connect_state.security.guards import (
    GuardRefusal,
    Guards,
    InternalTopics,
    check_consumer_group,
    check_heartbeat_topic,
    check_offsets_records,
    check_offsets_topic,
    checked_stores,
    permitted_offsets_topics,
    sample_keys,
    sampled_offsets_topics,
)
from connect_state.tables.schemas import ACTIVE_TOPICS, CONNECTORS, SINK_OFFSETS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables, InMemoryTopics, RecordingWriter
from tests.unit.helpers import mirror_connectors

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


CONFIG_GROUPS = {"snk-payments": "payments", "snk-steal": "connect-snk-ok", "snk-new": "fresh"}
SINK_BODY = {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 1}}]}
SOURCE_BODY = {"offsets": [{"partition": {"filename": "/in"}, "offset": {"position": 1}}]}


GROUP_ROWS = [
    stopped("snk-victim", {"connector.class": SINK, "topics": "victim", "consumer.override.group.id": "payments"}),
    stopped("snk-steal", {"connector.class": SINK, "topics": "t", "consumer.override.group.id": "connect-snk-ok"}),
    stopped("snk-new", {"connector.class": SINK, "topics": "t", "consumer.override.group.id": "fresh"}),
]


def active(connector: str, topic: str) -> dict[str, Any]:
    return {"connector": connector, "topic": topic, "task": 0, "discover_timestamp": 1, "updated_at": None}


def committed(group: str, topic: str) -> dict[str, Any]:
    return {"group_id": group, "topic": topic, "partition": 0, "offset": 5}


@pytest.fixture
def groups_client(make_client: MakeClient, kafka_log: InMemoryTopics, admin: list[tuple[str, str]]) -> Any:
    """snk-ok overrides its group to connect-shared, which has committed offsets only for "t", a topic snk-ok's
    tasks consume; snk-payments overrides it to "payments", another application's group with offsets for "victim"
    (snk-victim consumes it: that is not snk-payments' business)."""
    rows = [*ROWS, *GROUP_ROWS]
    mirror_connectors(kafka_log, rows)
    tables = {
        CONNECTORS.name: rows,
        SINK_OFFSETS.name: [committed("connect-shared", "t"), committed("payments", "victim"), committed("x", "t")],
        ACTIVE_TOPICS.name: [active("snk-ok", "t"), active("snk-payments", "t"), active("snk-victim", "victim")],
    }
    return make_client(tables=InMemoryTables(tables))


REFUSALS = {
    "snk-payments": "it has committed offsets for topics snk-payments does not consume (victim)",
    "snk-steal": "it is the default consumer group of connector snk-ok",
    "snk-new": "it has no committed offsets (sink_offsets table)",
}


@pytest.mark.parametrize("method", ["patch", "delete"])
@pytest.mark.parametrize("connector", sorted(REFUSALS))
def test_offsets_of_a_group_that_is_not_the_connectors_are_refused(
    groups_client: Any, admin: list[tuple[str, str]], method: str, connector: str
) -> None:
    response = getattr(groups_client, method)(
        f"/connectors/{connector}/offsets", json=SINK_BODY if method == "patch" else None
    )
    assert response.status_code == 400 and admin == [], "refused before the group is touched"
    message = response.get_json()["message"]
    assert message.startswith(
        f"consumer.override.group.id {CONFIG_GROUPS[connector]!r} of connector {connector} is not "
    )
    assert REFUSALS[connector] in message and "api.allowed.groups" in message


@pytest.mark.parametrize("method", ["patch", "delete"])
def test_an_override_the_connectors_tasks_committed_to_is_allowed(
    groups_client: Any, admin: list[tuple[str, str]], method: str
) -> None:
    ok = getattr(groups_client, method)("/connectors/snk-ok/offsets", json=SINK_BODY if method == "patch" else None)
    assert ok.status_code == 200 and {group for _, group in admin} == {"connect-shared"}


def test_allowed_groups_is_an_extra_allow_list(
    make_client: MakeClient, kafka_log: InMemoryTopics, admin: list[tuple[str, str]]
) -> None:
    mirror_connectors(kafka_log, ROWS)
    client = make_client(tables=InMemoryTables({CONNECTORS.name: ROWS}), overrides={"api.allowed.groups": "pay*"})
    assert client.delete("/connectors/snk-payments/offsets").status_code == 200
    assert {group for _, group in admin} == {"payments"}


@pytest.mark.parametrize("method", ["patch", "delete"])
def test_the_workers_group_is_never_altered_whatever_the_allow_list(
    make_client: MakeClient, kafka_log: InMemoryTopics, admin: list[tuple[str, str]], method: str
) -> None:
    rows = [stopped("snk-w", {"connector.class": SINK, "topics": "t", "consumer.override.group.id": "connect-cluster"})]
    mirror_connectors(kafka_log, rows)
    client = make_client(tables=InMemoryTables({CONNECTORS.name: rows}), overrides={"api.allowed.groups": "*"})
    response = getattr(client, method)("/connectors/snk-w/offsets", json=SINK_BODY if method == "patch" else None)
    assert response.status_code == 400 and admin == []
    assert "is the Connect workers' group (connect.group.id)" in response.get_json()["message"]


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
        guards=Guards.from_settings(settings.with_overrides(**{"heartbeat.allowed.topics": "*"})),
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


class SendingProvider:
    def produce_heartbeat_records(self, connector: str, config: Any, partition: Any, last: Any) -> list[Any]:
        return [HeartbeatRecord(value="beat", source_offset={"p": 2})]


class TopicSender:
    """A heartbeat sender over a broker that has only ``existing`` topics (none is created behind our back)."""

    def __init__(self, existing: set[str]) -> None:
        self.existing = existing
        self.created: list[str] = []
        self.sent: list[str] = []

    def ensure_topic(self, topic: str) -> None:
        self.created.append(topic)
        self.existing.add(topic)

    def send_messages(self, topic: str, messages: Any) -> Any:
        if topic not in self.existing:
            raise TopicNotFoundError(f"topic {topic} does not exist")
        self.sent.append(topic)
        return [RecordPosition(topic, 0, i) for i in range(len(messages))]


def heartbeat_due(topic: str, config: dict[str, str] | None = None) -> DuePartition:
    return DuePartition(
        connector="c", connector_class="X", config=config or {}, partition={"f": "x"}, key=b"k", offset={"p": 1},
        last_moved_at=0, records_topic=topic, interval_ms=1000, idle_ms=5000, due_at=0, kafka_partition=None,
        kafka_offset=None,
    )  # fmt: skip


def test_heartbeat_topics_outside_the_allow_list_are_refused_and_none_is_created(settings: Settings) -> None:
    offsets, sender = RecordingWriter(), TopicSender({"connect-heartbeats"})
    guards = Guards.from_settings(settings.with_overrides(**{"heartbeat.allowed.topics": "team-a.*"}))
    emitter = HeartbeatEmitter({"X": SendingProvider()}, sender, offsets, settings.offset_storage_topic, guards=guards)
    (row,) = emitter.emit(heartbeat_due("payments"), 1)  # a connector's own heartbeat.records.topic
    assert row.outcome == HeartbeatOutcome.FAILED
    assert row.error == (
        "heartbeat.records.topic 'payments' is neither connect-state's heartbeat.records.topic nor matches "
        "heartbeat.allowed.topics: heartbeats are not written there"
    )
    (row,) = emitter.emit(heartbeat_due("team-a.beats"), 2)  # allowed, but missing: not created by default
    assert row.outcome == HeartbeatOutcome.FAILED and "does not exist" in (row.error or "")
    (row,) = emitter.emit(heartbeat_due("connect-heartbeats"), 3)  # the setting's own topic, existing
    assert row.outcome == HeartbeatOutcome.PRODUCED
    assert (sender.created, sender.sent) == ([], ["connect-heartbeats"])
    assert [topic for topic, _ in offsets.batches] == [settings.offset_storage_topic]

    created = Guards.from_settings(settings.with_overrides(**{"heartbeat.topics.create": "true"}))
    emitter = HeartbeatEmitter({"X": SendingProvider()}, sender, offsets, settings.offset_storage_topic, guards=created)
    sender.existing.discard("connect-heartbeats")
    assert [row.outcome for row in emitter.emit(heartbeat_due("connect-heartbeats"), 4)] == [HeartbeatOutcome.PRODUCED]
    assert sender.created == ["connect-heartbeats"]


@pytest.mark.parametrize(
    ("own_topic", "allowed"),
    [("connect-status", "*"), ("connect-configs", "*"), ("__consumer_offsets", "*"), ("own-offsets", "mm2-*")],
)
def test_heartbeat_offsets_go_only_to_offsets_topics_the_api_may_write(
    settings: Settings, own_topic: str, allowed: str
) -> None:
    offsets, sender = RecordingWriter(), TopicSender({"connect-heartbeats"})
    guards = Guards.from_settings(settings.with_overrides(**{"api.allowed.offsets.topics": allowed}))
    emitter = HeartbeatEmitter({"X": SendingProvider()}, sender, offsets, settings.offset_storage_topic, guards=guards)
    (row,) = emitter.emit(heartbeat_due("connect-heartbeats", {"offsets.storage.topic": own_topic}), 1)
    assert row.outcome == HeartbeatOutcome.FAILED and f"offsets.storage.topic {own_topic!r}" in (row.error or "")
    assert offsets.sends == [] and sender.sent == []  # nothing produced whose offset could not be committed


def test_the_jobs_guards_come_from_the_settings(settings: Settings) -> None:
    guards = Guards.from_settings(
        settings.with_overrides(
            **{"cleanup.allowed.groups": "team-a.*, x", "heartbeat.allowed.topics": "hb-*", "connect.group.id": "w"}
        )
    )
    assert (guards.allowed_groups, guards.reserved_groups) == (("team-a.*", "x"), frozenset({"w"}))
    assert guards.heartbeat_topics == (settings.heartbeat_records_topic, "hb-*")
    assert guards.allowed_offsets_topics == ("*",) and guards.create_heartbeat_topics is False
    assert guards.cleanup_group("c", "team-a.sink", ()) == "team-a.sink"
    with pytest.raises(GuardRefusal, match=r"cleanup\.allowed\.groups"):
        guards.cleanup_group("c", "payments", ())
    with pytest.raises(GuardRefusal, match=r"Connect workers' group \(connect.group.id\)"):
        guards.cleanup_group("w", "w", ())  # even a connector whose default group it would be


# --- offsets topics must hold offsets records (the offsets job's sample, connect_state/spark/offsets_guard.py) -----


def offsets_key(connector: str) -> bytes:
    return json.dumps([connector, {"filename": "/in"}]).encode()


def test_offsets_records_check() -> None:
    assert check_offsets_records("t", []) == "t"  # empty: a new offsets topic
    assert check_offsets_records("t", [b"payload", offsets_key("c"), None]) == "t"  # one offsets record suffices
    for keys in ([b"order-1", b"order-2"], [None], [b'["c"]'], [b'{"connector": "c"}']):
        with pytest.raises(GuardRefusal, match=r"'t' is not an offsets topic: none of its \d+ newest records"):
            check_offsets_records("t", keys)


def test_sampled_offsets_topics(kafka_log: InMemoryTopics, settings: Settings) -> None:
    worker = settings.offset_storage_topic
    kafka_log.create("payments", 3)
    for i in range(50):
        kafka_log.append("payments", i % 3, f"order-{i}".encode(), b"{}")
    kafka_log.create("own-offsets", 2)
    kafka_log.append("own-offsets", 0, b"junk", b"{}")  # old junk, then offsets
    kafka_log.append("own-offsets", 1, offsets_key("c"), b'{"position": 1}')
    kafka_log.create("new-offsets", 1)
    kafka_log.append(worker, 0, b"not a key", b"{}")  # the worker's own topic is never sampled
    kept, refused, unsampled = sampled_offsets_topics(
        ["payments", "own-offsets", "new-offsets", "missing", worker], worker, kafka_log, 1000
    )
    assert kept == {"own-offsets", "new-offsets", "missing", worker}  # missing: read (and waited for) as configured
    assert unsampled == {"missing"}  # and checked again next time
    assert list(refused) == ["payments"] and "none of its 50 newest records" in refused["payments"]


def test_sample_reads_only_the_newest_records(kafka_log: InMemoryTopics) -> None:
    kafka_log.create("t", 1)
    for i in range(30):
        kafka_log.append("t", 0, offsets_key("c") if i < 15 else b"data", b"{}")
    assert sample_keys(kafka_log, "t", 1000, per_partition=10) == [b"data"] * 10
    with pytest.raises(GuardRefusal):
        check_offsets_records("t", sample_keys(kafka_log, "t", 1000, per_partition=10))


def test_offsets_job_leaves_out_and_records_refused_topics(
    kafka_log: InMemoryTopics, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """connect_state/spark/offsets_guard.py: the offsets job's subscription without the refused topics, each
    recorded once per look (Spark's insert is tested under the integration lock), sampled again only later."""
    from connect_state.spark import offsets_guard

    kafka_log.create("payments", 1)
    kafka_log.append("payments", 0, b"order-1", b"{}")
    kafka_log.create("own", 1)
    kafka_log.append("own", 0, offsets_key("c"), b"{}")
    readers: list[str] = []

    class Reader:
        def __init__(self, _settings: Settings, *, client_id: str) -> None:
            readers.append(client_id)

        def offsets(self, topics: Any, timeout_ms: int) -> Any:
            return kafka_log.offsets(topics, timeout_ms)

        def read(self, ranges: Any, timeout_ms: int) -> Any:
            return kafka_log.read(ranges, timeout_ms)

        def close(self) -> None:
            pass

    recorded: list[dict[str, str]] = []
    monkeypatch.setattr(offsets_guard, "TopicLogReader", Reader)
    monkeypatch.setattr(offsets_guard, "record_refusals", lambda _spark, _settings, refused: recorded.append(refused))
    monkeypatch.setattr(offsets_guard, "_accepted", {})
    monkeypatch.setattr(offsets_guard, "_refused", {})
    topics = {"payments", "own", settings.offset_storage_topic}
    assert offsets_guard.offsets_records_topics(None, settings, set(topics)) == topics - {"payments"}  # type: ignore[arg-type]
    assert [list(r) for r in recorded] == [["payments"]] and len(readers) == 1
    assert offsets_guard.offsets_records_topics(None, settings, set(topics)) == topics - {"payments"}  # type: ignore[arg-type]
    assert len(readers) == 1, "accepted topics are not sampled again, refused ones only after RECHECK_SECONDS"
    with_missing = topics | {"missing"}  # cannot be sampled: read as configured, and looked at again each time
    for looks in (2, 3):
        assert offsets_guard.offsets_records_topics(None, settings, set(with_missing)) == with_missing - {"payments"}  # type: ignore[arg-type]
        assert len(readers) == looks
    # Another cluster (its own tables; the topic names may be others' on its Kafka): what it has is sampled for it.
    other = settings.with_overrides(**{"delta.root": str(settings.delta_root / "clusters" / "b")})
    assert offsets_guard.offsets_records_topics(None, other, set(topics)) == topics - {"payments"}  # type: ignore[arg-type]
    assert len(readers) == 4 and [list(r) for r in recorded] == [["payments"], ["payments"]]
