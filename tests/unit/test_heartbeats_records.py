"""KIP-910 heartbeat records and providers: the documented format, provider loading and matching, and the emitter
(provider call, heartbeat topic, offset commit, history rows) with in-memory Kafka stand-ins (unit tests only)."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from connect_state.connect.filestream import FILE_SOURCE_CLASS
from connect_state.connect.plugins import HEARTBEAT_PROVIDERS_GROUP, load_keyed_plugins
from connect_state.core.errors import KafkaWriteError
from connect_state.dev.demo_heartbeats import FileStreamHeartbeatProvider
from connect_state.dev.demo_heartbeats import provider as demo_provider
from connect_state.formats.offsets import offset_key_bytes
from connect_state.heartbeats.emitter import HeartbeatEmitter, HeartbeatOutcome
from connect_state.heartbeats.fold import DuePartition
from connect_state.heartbeats.provider import (
    CONNECTOR_HEADER,
    DEFAULT_PROVIDER,
    PARTITION_HEADER,
    HeartbeatProvider,
    HeartbeatRecord,
    HeartbeatRecordError,
    as_provider,
    provider_for,
    record_headers,
    serialize_payload,
)
from connect_state.kafka import RecordPosition
from connect_state.security.guards import Guards, InternalTopics
from connect_state.spark.heartbeats import heartbeat_rows
from tests.unit.fakes import RecordingWriter

# --- record format --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (None, None),
        (b"\x00raw", b"\x00raw"),
        ("héllo", "héllo".encode()),
        ({"b": 1, "a": [True, None]}, b'{"b":1,"a":[true,null]}'),
        ({"name": "é"}, '{"name":"é"}'.encode()),
        (42, b"42"),
    ],
)
def test_serialize_payload(payload, expected):
    assert serialize_payload(payload) == expected


def test_headers_name_the_connector_and_the_partition_in_hashmap_order():
    record = HeartbeatRecord(headers=[("trace", "abc"), ("raw", b"\x01"), ("none", None)])
    assert record_headers("c", {"kafka_topic": "t", "kafka_partition": 0}, record) == [
        (CONNECTOR_HEADER, b"c"),
        (PARTITION_HEADER, b'{"kafka_partition":0,"kafka_topic":"t"}'),
        ("trace", b"abc"),
        ("raw", b"\x01"),
        ("none", None),
    ]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (HeartbeatRecord(headers=[(CONNECTOR_HEADER, "x")]), "reserved"),
        (HeartbeatRecord(headers=[("h", 5)]), "bytes, str or None"),
        (HeartbeatRecord(headers=["h"]), "a header must be a"),
        (HeartbeatRecord(value={1, 2}), "not serialisable"),
        (HeartbeatRecord(value=float("nan")), "not serialisable"),
        (HeartbeatRecord(source_offset={"position": {"nested": 1}}), "primitive types"),
        (HeartbeatRecord(source_offset={"p": 1}, source_partition={"f": [1]}), "source partition"),
    ],
)
def test_invalid_records_are_refused(record, message):
    with pytest.raises(HeartbeatRecordError, match=message):
        record.validate()


# --- providers ------------------------------------------------------------------------------------------------------


def test_default_provider_returns_no_records_like_the_kips_default_method():
    assert HeartbeatProvider().produce_heartbeat_records("c", {}, {"f": 1}, {"p": 1}) == []


class CountingProvider(HeartbeatProvider):
    def produce_heartbeat_records(self, connector, config, partition, last_offset):
        return [HeartbeatRecord(key=connector, value={"partition": dict(partition)})]


def plain_function(connector, config, partition, last_offset):
    return [HeartbeatRecord(value="f")]


def test_as_provider_accepts_instances_classes_and_functions():
    instance = CountingProvider()
    assert as_provider(instance) is instance
    assert isinstance(as_provider(CountingProvider), CountingProvider)
    assert as_provider(plain_function).produce_heartbeat_records("c", {}, {}, None) == [HeartbeatRecord(value="f")]
    with pytest.raises(TypeError):
        as_provider(42)


@pytest.mark.parametrize(
    ("registered", "connector_class", "found"),
    [
        (FILE_SOURCE_CLASS, FILE_SOURCE_CLASS, True),
        (FILE_SOURCE_CLASS, "FileStreamSource", True),  # the connector's config uses an alias
        (FILE_SOURCE_CLASS, "FileStreamSourceConnector", True),
        ("FileStreamSource", FILE_SOURCE_CLASS, True),  # the provider is registered under an alias
        (FILE_SOURCE_CLASS, "org.example.OtherConnector", False),
        (FILE_SOURCE_CLASS, None, False),
    ],
)
def test_provider_for_matches_connect_aliases(registered, connector_class, found):
    provider = CountingProvider()
    chosen = provider_for({registered: provider}, connector_class)
    assert (chosen is provider) is found
    if not found:
        assert chosen is DEFAULT_PROVIDER


def test_providers_load_from_settings_paths():
    plugins = load_keyed_plugins(
        {FILE_SOURCE_CLASS: "connect_state.dev.demo_heartbeats:provider"}, HEARTBEAT_PROVIDERS_GROUP
    )
    assert plugins[FILE_SOURCE_CLASS] is demo_provider


def test_demo_provider_names_the_file_and_commits_the_same_offset():
    records = demo_provider.produce_heartbeat_records("demo", {}, {"filename": "/in.txt"}, {"position": 12})
    assert records == [
        HeartbeatRecord(
            key="/in.txt",
            value={"connector": "demo", "filename": "/in.txt", "position": 12},
            source_offset={"position": 12},
        )
    ]
    assert serialize_payload(records[0].value) == b'{"connector":"demo","filename":"/in.txt","position":12}'
    assert FileStreamHeartbeatProvider().produce_heartbeat_records("d", {}, {"other": 1}, None) == []


# --- the emitter ----------------------------------------------------------------------------------------------------


class FakeHeartbeatSender:
    def __init__(self, fail: Exception | None = None) -> None:
        self.topics: list[str] = []
        self.sent: list[tuple[str, list]] = []
        self.fail = fail

    def ensure_topic(self, topic: str) -> None:
        self.topics.append(topic)

    def send_messages(self, topic: str, messages: Sequence) -> list[RecordPosition]:
        if self.fail is not None:
            raise self.fail
        self.sent.append((topic, list(messages)))
        return [RecordPosition(topic, 0, 100 + i) for i in range(len(messages))]


PARTITION = {"filename": "/in.txt"}


def due(connector_class: str | None = FILE_SOURCE_CLASS, topic: str = "hb") -> DuePartition:
    return DuePartition(
        "src", connector_class, {"connector.class": str(connector_class)}, PARTITION,
        offset_key_bytes("src", PARTITION), {"position": 7}, 1000, 5000, 2000, topic, 3000,
    )  # fmt: skip


#: The guards with the heartbeat topic ``hb`` allowed and created when missing.
GUARDS = Guards(
    InternalTopics("connect-configs", "connect-offsets", "connect-status"),
    allowed_offsets_topics=("*",),
    heartbeat_topics=("hb",),
    create_heartbeat_topics=True,
)


def emitter(provider: object, heartbeat_sender=None, offset_sender=None, timeout_ms: int = 10_000) -> HeartbeatEmitter:
    return HeartbeatEmitter(
        {FILE_SOURCE_CLASS: as_provider(provider)},
        heartbeat_sender or FakeHeartbeatSender(),
        offset_sender or RecordingWriter(),
        "connect-offsets",
        guards=GUARDS,
        provider_timeout_ms=timeout_ms,
    )


def test_emitter_sends_records_and_commits_their_offset_with_connects_key_bytes():
    hb, offs = FakeHeartbeatSender(), RecordingWriter()
    rows = emitter(demo_provider, hb, offs).emit(due(), now=6000)
    assert hb.topics == ["hb"]
    ((topic, messages),) = hb.sent
    assert topic == "hb"
    assert messages == [
        (
            b"/in.txt",
            b'{"connector":"src","filename":"/in.txt","position":7}',
            [(CONNECTOR_HEADER, b"src"), (PARTITION_HEADER, b'{"filename":"/in.txt"}')],
        )
    ]
    assert offs.batches == [("connect-offsets", [(b'["src",{"filename":"/in.txt"}]', b'{"position":7}')])]
    (row,) = rows
    assert (row.outcome, row.record_index, row.record_partition, row.record_offset) == (
        HeartbeatOutcome.PRODUCED,
        0,
        0,
        100,
    )
    assert (row.committed_offset, row.idle_ms, row.due_at, row.emitted_at) == ('{"position":7}', 5000, 3000, 6000)
    assert row.source_key == b'["src",{"filename":"/in.txt"}]' and row.partition == '{"filename":"/in.txt"}'


def test_emitter_commits_the_last_offset_per_partition_and_honours_source_partition():
    other = {"filename": "/other.txt"}

    def provider(connector, config, partition, last_offset):
        return [
            HeartbeatRecord(value="a", source_offset={"position": 8}),
            HeartbeatRecord(value="b"),
            HeartbeatRecord(value="c", source_offset={"position": 9}),
            HeartbeatRecord(value="d", source_offset={"position": 1}, source_partition=other),
        ]

    offs = RecordingWriter()
    rows = emitter(provider, offset_sender=offs).emit(due(), now=6000)
    assert offs.batches == [
        (
            "connect-offsets",
            [
                (offset_key_bytes("src", PARTITION), b'{"position":9}'),
                (offset_key_bytes("src", other), b'{"position":1}'),
            ],
        )
    ]
    assert [(r.record_index, r.record_value, r.committed_offset) for r in rows] == [
        (0, b"a", '{"position":8}'),
        (1, b"b", None),
        (2, b"c", '{"position":9}'),
        (3, b"d", '{"position":1}'),
    ]


def test_no_provider_means_no_records_and_nothing_sent():
    hb, offs = FakeHeartbeatSender(), RecordingWriter()
    (row,) = emitter(demo_provider, hb, offs).emit(due("org.example.Unknown"), now=6000)
    assert row.outcome == HeartbeatOutcome.NO_RECORDS and row.record_key is None and row.error is None
    assert hb.sent == [] and offs.sends == [] and hb.topics == []


def raising(connector, config, partition, last_offset):
    raise RuntimeError("database unreachable")


@pytest.mark.parametrize(
    ("provider", "heartbeat_fail", "offset_fail", "error"),
    [
        (raising, None, None, "RuntimeError: database unreachable"),
        (lambda *args: ["not a record"], None, None, "HeartbeatRecordError"),
        (lambda *args: [HeartbeatRecord(source_offset={"p": [1]})], None, None, "primitive types"),
        (demo_provider, KafkaWriteError("broker down"), None, "broker down"),
        (demo_provider, None, KafkaWriteError("offsets down"), "offset not committed: offsets down"),
    ],
)
def test_failures_are_recorded_not_raised(provider, heartbeat_fail, offset_fail, error):
    rows = emitter(provider, FakeHeartbeatSender(heartbeat_fail), RecordingWriter(offset_fail)).emit(due(), 6000)
    assert [r.outcome for r in rows] == [HeartbeatOutcome.FAILED]
    assert error in rows[0].error
    assert rows[0].committed_offset is None


def test_emitted_rows_are_the_heartbeats_tables_rows():
    (row,) = emitter(demo_provider).emit(due(), now=6000)
    assert json.loads(row.partition) == PARTITION
    (table_row,) = heartbeat_rows([row]).to_pylist()
    assert table_row == {
        **dataclasses.asdict(row),
        "outcome": "produced",
        "due_at": datetime.fromtimestamp(row.due_at / 1000, UTC),
        "emitted_at": datetime(1970, 1, 1, 0, 0, 6, tzinfo=UTC),
    }


class FakeOffsetReader:
    def __init__(self, found: bool, value: bytes | None) -> None:
        self.answer = (found, value)
        self.calls: list[tuple[bytes, int, int]] = []

    def latest_offset(self, key: bytes, kafka_partition: int, after_offset: int) -> tuple[bool, bytes | None]:
        self.calls.append((key, kafka_partition, after_offset))
        return self.answer


@pytest.mark.parametrize(
    ("found", "value", "outcome"),
    [
        (False, None, HeartbeatOutcome.PRODUCED),  # nothing newer than the fold's view
        (True, b'{"position":7}', HeartbeatOutcome.PRODUCED),  # the same offset again (e.g. our own last heartbeat)
        (
            True,
            b'{"position":9}',
            HeartbeatOutcome.SKIPPED,
        ),  # the task committed meanwhile: not idle, and 7 would move it back
        (True, None, HeartbeatOutcome.SKIPPED),  # reset meanwhile
    ],
)
def test_emitter_skips_partitions_whose_offset_moved_since_the_folds_view(found, value, outcome):
    reader, offs = FakeOffsetReader(found, value), RecordingWriter()
    heartbeat = dataclasses.replace(due(), kafka_partition=4, kafka_offset=99)
    sender = HeartbeatEmitter(
        {FILE_SOURCE_CLASS: demo_provider}, FakeHeartbeatSender(), offs, "connect-offsets", reader, guards=GUARDS
    )
    (row,) = sender.emit(heartbeat, now=6000)
    assert reader.calls == [(offset_key_bytes("src", PARTITION), 4, 99)]
    assert row.outcome == outcome
    assert bool(offs.sends) is (outcome == HeartbeatOutcome.PRODUCED)


# --- a provider has a deadline (heartbeat.provider.timeout.ms; issue 33, finding 8) ---------------------------------


class SleepingProvider:
    """Sleeps in either form until released (a provider waiting on a hung service)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def produce_heartbeat_records(self, connector, config, partition, last_offset) -> list[HeartbeatRecord]:
        self.calls += 1
        self.release.wait(10)
        return [HeartbeatRecord(value="late", source_offset={"position": 8})]


def test_a_provider_past_its_deadline_has_its_turn_skipped_and_the_others_go_on():
    sleeping, offs, hb = SleepingProvider(), RecordingWriter(), FakeHeartbeatSender()
    other = "org.example.OtherSource"
    sender = HeartbeatEmitter(
        {FILE_SOURCE_CLASS: sleeping, other: demo_provider}, hb, offs, "connect-offsets",
        guards=GUARDS, provider_timeout_ms=50,
    )  # fmt: skip
    started = time.monotonic()
    (row,) = sender.emit(due(), now=6000)
    assert time.monotonic() - started < 5  # not the provider's 10 s
    assert (row.outcome, row.committed_offset) == (HeartbeatOutcome.TIMED_OUT, None)
    assert row.error == (
        "heartbeat provider tests.unit.test_heartbeats_records:SleepingProvider did not return within 50 ms "
        "(heartbeat.provider.timeout.ms)"
    )
    # its next turn, while that call still runs: skipped at once, no second call
    (again,) = sender.emit(due(), now=7000)
    assert again.outcome == HeartbeatOutcome.TIMED_OUT and "an earlier call" in (again.error or "")
    assert sleeping.calls == 1
    # another class's provider goes on
    (ok,) = sender.emit(dataclasses.replace(due(), connector_class=other), now=7000)
    assert ok.outcome == HeartbeatOutcome.PRODUCED
    assert hb.sent and all(topic == "hb" for topic, _ in hb.sent) and len(hb.sent) == 1
    assert [batch for batch in offs.batches if b"late" in repr(batch).encode()] == []
    sleeping.release.set()


def test_the_offsets_update_form_has_the_same_deadline():
    release = threading.Event()

    class Stuck(HeartbeatProvider):
        def update_offsets(self, connector, config, offsets):
            release.wait(10)
            return [(PARTITION, {"position": 99})]

    offs = RecordingWriter()
    (row,) = emitter(Stuck(), offset_sender=offs, timeout_ms=50).emit(due(), now=6000)
    release.set()
    assert row.outcome == HeartbeatOutcome.TIMED_OUT and "Stuck did not return within 50 ms" in (row.error or "")
    assert offs.sends == []
