"""KIP-910 idle detection without Spark: the fold of config, status and offsets records, eligibility, the due rule and
the timeout, with ``now`` injected (epoch ms).

Records are written with the real serializers (``formats.config``, ``formats.status``, ``formats.offsets``) and read
back with the real parsers, so the fold sees what the job passes it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest

from connect_state.connect.filestream import FILE_SINK_CLASS, FILE_SOURCE_CLASS
from connect_state.folds.connector_states import ConnectorRecord
from connect_state.formats.config import (
    delete_records,
    parse_config_record,
    pause_records,
    resume_records,
    serialize_connector_config,
    stop_records,
)
from connect_state.formats.offsets import offset_key_bytes, serialize_offset_value
from connect_state.formats.status import Status, parse_status_record, serialize_status
from connect_state.heartbeats.fold import (
    HeartbeatDefaults,
    HeartbeatState,
    OffsetRecord,
    activity_rows,
    due_at,
    heartbeat_policy,
    heartbeat_state_from_json,
    heartbeat_state_to_json,
    idle_ms,
    is_due,
    parse_offset_record,
    step,
    still_due,
)

NAME = "src"
FILE = {"filename": "/data/in.txt"}
DEFAULTS = HeartbeatDefaults(interval_ms=2000, records_topic="connect-heartbeats")
OFF = HeartbeatDefaults(interval_ms=0, records_topic="connect-heartbeats")
_offsets = itertools.count()


def config(properties: dict[str, str] | None, ts: int = 0, name: str = NAME) -> ConnectorRecord:
    value = serialize_connector_config(properties) if properties is not None else None
    record = parse_config_record(f"connector-{name}".encode(), value)
    return ConnectorRecord.from_config(record, 0, next(_offsets), ts)


def config_writes(writes: list[tuple[str, bytes | None]], ts: int = 0) -> list[ConnectorRecord]:
    return [
        ConnectorRecord.from_config(parse_config_record(key.encode(), value), 0, next(_offsets), ts)
        for key, value in writes
    ]


def status(state: str | None, ts: int = 0, name: str = NAME) -> ConnectorRecord:
    value = serialize_status(Status(state, None, "w:8083", 1)) if state is not None else None
    record = parse_status_record(f"status-connector-{name}".encode(), value)
    return ConnectorRecord.from_status(record, 1, next(_offsets), ts)


def offset(
    position: int | None, ts: int, partition: dict = FILE, kafka_partition: int = 3, name: str = NAME
) -> OffsetRecord:
    value = serialize_offset_value({"position": position}) if position is not None else None
    record = parse_offset_record(offset_key_bytes(name, partition), value, kafka_partition, next(_offsets), ts)
    assert record is not None
    return record


def source_config(**extra: str) -> dict[str, str]:
    return {"connector.class": FILE_SOURCE_CLASS, "file": "/data/in.txt", "topic": "t", "tasks.max": "1", **extra}


def running_source(**extra: str) -> list[ConnectorRecord]:
    return [config(source_config(**extra)), status("RUNNING")]


def fold(records, offsets, now: int, defaults: HeartbeatDefaults = DEFAULTS, state: HeartbeatState | None = None):
    return step(state or HeartbeatState.new(NAME), records, offsets, defaults, now)


# --- the due rule ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("last_moved", "last_heartbeat", "interval", "eligible", "now", "expected_due_at", "due"),
    [
        (1000, None, 2000, True, 2999, 3000, False),
        (1000, None, 2000, True, 3000, 3000, True),
        (1000, 3000, 2000, True, 4999, 5000, False),  # the timer restarts at the heartbeat
        (1000, 3000, 2000, True, 5000, 5000, True),
        (6000, 3000, 2000, True, 7000, 8000, False),  # the offset moved after the heartbeat
        (1000, None, 0, True, 10**12, None, False),  # 0 = off
        (1000, None, 2000, False, 10**12, 3000, False),  # not eligible
    ],
)
def test_due_rule(last_moved, last_heartbeat, interval, eligible, now, expected_due_at, due):
    assert due_at(last_moved, last_heartbeat, interval) == expected_due_at
    assert is_due(last_moved, last_heartbeat, interval, eligible, now) is due


def test_idle_age_is_clamped_when_the_worker_clock_is_ahead():
    assert idle_ms(5000, 4000) == 0
    assert idle_ms(1000, 4000) == 3000


# --- the stateful step ----------------------------------------------------------------------------------------------


def test_idle_partition_is_due_after_one_interval_then_every_interval():
    first = fold(running_source(), [offset(42, ts=1000)], now=1500)
    assert first.due == [] and first.policy.eligible
    assert first.timeout_at == 3000  # the job arms the group's timeout for this

    early = step(first.state, [], [], DEFAULTS, now=2999)
    assert early.due == [] and early.timeout_at == 3000

    fired = step(early.state, [], [], DEFAULTS, now=3000)  # what a timed-out call does
    assert [(d.partition, d.offset, d.idle_ms, d.interval_ms, d.due_at) for d in fired.due] == [
        (FILE, {"position": 42}, 2000, 2000, 3000)
    ]
    due = fired.due[0]
    assert due.key == offset_key_bytes(NAME, FILE)
    assert due.connector_class == FILE_SOURCE_CLASS and due.config["file"] == "/data/in.txt"
    assert due.records_topic == "connect-heartbeats"
    assert fired.timeout_at == 5000  # currentTimeMs + heartbeatIntervalMs

    assert step(fired.state, [], [], DEFAULTS, now=4999).due == []
    assert len(step(fired.state, [], [], DEFAULTS, now=5000).due) == 1


def test_a_moving_offset_is_never_due_and_a_repeated_value_does_not_move_it():
    result = fold(running_source(), [offset(1, ts=1000)], now=1000)
    result = step(result.state, [], [offset(2, ts=2500)], DEFAULTS, now=2900)
    assert result.due == [] and result.timeout_at == 4500
    assert result.state.partitions[offset_key_bytes(NAME, FILE)].last_moved_at == 2500
    # The same value again (e.g. a heartbeat committing the same offset) is not a move.
    result = step(result.state, [], [offset(2, ts=4000)], DEFAULTS, now=4000)
    assert result.state.partitions[offset_key_bytes(NAME, FILE)].last_moved_at == 2500
    assert len(step(result.state, [], [], DEFAULTS, now=4500).due) == 1


def test_data_in_the_batch_does_not_hide_a_due_partition():
    """A group with data is not timed out (SPARK-38320): the step still reports what is due at ``now``."""
    other = {"filename": "/data/other.txt"}
    result = fold(running_source(), [offset(1, ts=1000), offset(5, ts=1000, partition=other)], now=1000)
    result = step(result.state, [status("RUNNING", ts=3500)], [offset(6, ts=3500, partition=other)], DEFAULTS, 3500)
    assert [d.partition for d in result.due] == [FILE]
    assert result.timeout_at == 5500  # the other file moved at 3500; FILE heartbeat at 3500 -> 5500


def test_tombstone_removes_the_partition():
    result = fold(running_source(), [offset(1, ts=1000)], now=1000)
    result = step(result.state, [], [offset(None, ts=2000)], DEFAULTS, now=10_000)
    assert result.due == [] and result.state.partitions == {} and result.timeout_at is None
    assert result.removed == [offset_key_bytes(NAME, FILE)]


def test_replayed_offset_records_are_skipped():
    record = offset(7, ts=1000)
    result = fold(running_source(), [record], now=1000)
    later = step(result.state, [], [offset(8, ts=2000)], DEFAULTS, now=2000)
    replay = step(later.state, [], [record], DEFAULTS, now=2100)
    assert replay.state.partitions[offset_key_bytes(NAME, FILE)].offset == {"position": 8}


def test_partitions_are_keyed_by_connects_lookup_bytes():
    """A multi-key partition written in another key order is the same partition (Connect re-serialises in HashMap
    order)."""
    partition = {"kafka_topic": "t", "kafka_partition": 0}
    reordered = b'["src",{"kafka_topic":"t","kafka_partition":0}]'
    record = parse_offset_record(reordered, b'{"offset":1}', 0, next(_offsets), 1000)
    assert record is not None and record.key == b'["src",{"kafka_partition":0,"kafka_topic":"t"}]'
    result = fold(running_source(), [record], now=1000)
    assert list(result.state.partitions) == [offset_key_bytes(NAME, partition)]


def test_null_partition_keys_are_ignored_and_bad_values_remove_the_offset():
    assert parse_offset_record(b'["src",null]', b'{"position":1}', 0, 0, 0) is None
    bad = parse_offset_record(offset_key_bytes(NAME, FILE), b'{"position":{"nested":1}}', 0, 5, 0)
    assert bad is not None and bad.offset is None


# --- eligibility ----------------------------------------------------------------------------------------------------


def _sink() -> list[ConnectorRecord]:
    return [config({"connector.class": FILE_SINK_CLASS, "topics": "t", "file": "/out"}), status("RUNNING")]


@pytest.mark.parametrize(
    ("case", "records", "defaults", "reason"),
    [
        ("disabled globally", running_source(), OFF, "heartbeats disabled"),
        ("disabled by the connector", running_source(**{"heartbeat.interval.ms": "0"}), DEFAULTS, "disabled"),
        ("paused", running_source() + config_writes(pause_records(NAME)) + [status("PAUSED")], DEFAULTS, "PAUSED"),
        ("paused, status lagging", running_source() + config_writes(pause_records(NAME)), DEFAULTS, "target state"),
        ("stopped", running_source() + config_writes(stop_records(NAME)) + [status("STOPPED")], DEFAULTS, "STOPPED"),
        ("deleted", running_source() + config_writes(delete_records(NAME)), DEFAULTS, "deleted"),
        ("sink connector", _sink(), DEFAULTS, "not a source connector (sink)"),
        ("failed", [config(source_config()), status("FAILED")], DEFAULTS, "connector status FAILED"),
        ("no status yet", [config(source_config())], DEFAULTS, "no connector status"),
        ("never configured", [status("RUNNING")], DEFAULTS, "no config"),
        ("bad override", running_source(**{"heartbeat.interval.ms": "soon"}), DEFAULTS, "invalid heartbeat.interval"),
        ("negative override", running_source(**{"heartbeat.interval.ms": "-5"}), DEFAULTS, "invalid"),
        ("own offsets topic", running_source(**{"offsets.storage.topic": "my-offsets"}), DEFAULTS, "offsets.storage"),
    ],
)
def test_not_eligible(case, records, defaults, reason):
    result = fold(records, [offset(1, ts=0)], now=10**12, defaults=defaults)
    assert result.due == [], case
    assert result.timeout_at is None, case
    assert not result.policy.eligible and reason in result.policy.reason, (case, result.policy.reason)
    (row,) = activity_rows(result.state, result.policy, 10**12)
    assert row["eligible"] is False and row["idle_ms"] == 10**12


@pytest.mark.parametrize(
    ("class_types", "reason"),
    [
        ({}, "not a source connector (sink)"),  # a "topics" key: guessed to be a sink, as Connect's REST would not
        ({"com.example.QueueSource": "source"}, None),  # connector.class.types knows better
        ({"com.example.QueueSource": "sink"}, "not a source connector (sink)"),
    ],
)
def test_configured_connector_types_decide_eligibility(class_types, reason):
    source = {"connector.class": "com.example.QueueSource", "topics": "in", "tasks.max": "1"}
    defaults = HeartbeatDefaults(2000, "connect-heartbeats", class_types=class_types)
    result = fold([config(source), status("RUNNING")], [offset(1, ts=0)], now=10**12, defaults=defaults)
    assert result.policy.reason == reason


def test_resumed_connector_is_eligible_again():
    records = running_source() + config_writes(pause_records(NAME)) + [status("PAUSED")]
    result = fold(records, [offset(1, ts=0)], now=100)
    assert result.timeout_at is None
    result = step(result.state, [status("RUNNING", ts=200)], [], DEFAULTS, now=200)
    assert not result.policy.eligible  # the target state is still PAUSED
    result = step(result.state, config_writes(resume_records(NAME)), [], DEFAULTS, now=3000)
    assert result.policy.eligible and [d.partition for d in result.due] == [FILE]


@pytest.mark.parametrize(
    ("global_ms", "connector_value", "expected_interval"),
    [
        (0, "2000", 2000),  # enabled by the connector only
        (60_000, "2000", 2000),  # the connector's value beats the global one
        (2000, None, 2000),
        (2000, "", 2000),  # empty: the global value (KIP: "empty or not specified")
        (2000, " 5000 ", 5000),  # Connect trims int values
    ],
)
def test_connector_interval_overrides_the_global_one(global_ms, connector_value, expected_interval):
    extra = {"heartbeat.interval.ms": connector_value} if connector_value is not None else {}
    defaults = HeartbeatDefaults(global_ms, "connect-heartbeats")
    result = fold(running_source(**extra), [offset(1, ts=1000)], now=1000, defaults=defaults)
    assert result.policy.eligible and result.policy.interval_ms == expected_interval
    assert result.timeout_at == 1000 + expected_interval


@pytest.mark.parametrize(
    ("connector_topic", "expected"), [(None, "connect-heartbeats"), ("", "connect-heartbeats"), ("mine", "mine")]
)
def test_connector_topic_overrides_the_global_one(connector_topic, expected):
    extra = {"heartbeat.records.topic": connector_topic} if connector_topic is not None else {}
    result = fold(running_source(**extra), [offset(1, ts=0)], now=5000)
    assert result.policy.records_topic == expected
    assert [d.records_topic for d in result.due] == [expected]


def test_policy_of_a_fresh_state():
    policy = heartbeat_policy(HeartbeatState.new(NAME).connector, DEFAULTS)
    assert policy.reason == "no config" and policy.interval_ms == 2000


# --- outputs and state ----------------------------------------------------------------------------------------------


def test_activity_rows():
    result = fold(running_source(), [offset(42, ts=1000, kafka_partition=9)], now=3500)
    (row,) = activity_rows(result.state, result.policy, 3500)
    assert row == {
        "connector": NAME,
        "partition": '{"filename":"/data/in.txt"}',
        "key": offset_key_bytes(NAME, FILE),
        "offset": '{"position":42}',
        "connector_class": FILE_SOURCE_CLASS,
        "config": json.dumps(source_config(), sort_keys=True, separators=(",", ":")),
        "last_moved_at": 1000,
        "last_heartbeat_at": 3500,
        "idle_ms": 2500,
        "heartbeat_interval_ms": 2000,
        "heartbeat_topic": "connect-heartbeats",
        "eligible": True,
        "reason": None,
        "kafka_partition": 9,
        "kafka_offset": row["kafka_offset"],
    }


def test_state_round_trips_through_json():
    result = fold(running_source(), [offset(42, ts=1000), offset(3, ts=900, partition={"filename": "é"})], now=3500)
    text = heartbeat_state_to_json(result.state)
    assert text.isascii()
    restored = heartbeat_state_from_json(text)
    assert restored == result.state
    assert step(restored, [], [], DEFAULTS, 5500).due == step(result.state, [], [], DEFAULTS, 5500).due


# --- still due? (right before sending) ------------------------------------------------------------------------------


def test_still_due_by_the_recorded_last_heartbeat():
    result = fold(running_source(), [offset(1, 1000)], now=5000)
    (due,) = result.due
    other = dataclasses.replace(due, connector="other")
    send, sent = still_due([due, other], {(NAME, due.key): 4000}, now=5000)
    assert send == [other]  # nothing recorded for it: due by its own last move
    assert sent == [(due, 4000)]  # sent at 4000 (e.g. by an earlier run): due again at 6000
    assert still_due([due], {(NAME, due.key): 4000}, now=6000) == ([due], [])
