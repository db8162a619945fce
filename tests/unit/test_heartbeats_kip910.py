"""KIP-910 as written, beside connect-state's idle heartbeats: only classes with a provider take part, the timer mode,
the offsets-update form (offsets committed, nothing produced) and commits to a connector's own offsets topic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from connect_state.connect.filestream import FILE_SOURCE_CLASS
from connect_state.formats.offsets import offset_key_bytes
from connect_state.heartbeats.emitter import HeartbeatEmitter, HeartbeatOutcome
from connect_state.heartbeats.fold import (
    NO_PARTITION_KEY,
    DuePartition,
    HeartbeatDefaults,
    HeartbeatMode,
    HeartbeatState,
    heartbeat_state_from_json,
    heartbeat_state_to_json,
    still_due,
)
from connect_state.heartbeats.provider import (
    HeartbeatProvider,
    HeartbeatRecord,
    as_provider,
    implements_heartbeat_records,
    implements_update_offsets,
)
from tests.unit.fakes import RecordingWriter
from tests.unit.test_heartbeats_fold import FILE, config, fold, offset, source_config, status
from tests.unit.test_heartbeats_records import GUARDS, FakeHeartbeatSender

WITH_PROVIDER = HeartbeatDefaults(2000, "hb", "connect-offsets", provider_classes=frozenset({"FileStreamSource"}))
TIMER = HeartbeatDefaults(
    2000, "hb", "connect-offsets", provider_classes=frozenset({FILE_SOURCE_CLASS}), mode=HeartbeatMode.TIMER
)


def running(**extra: str) -> list:
    return [config(source_config(**extra)), status("RUNNING")]


# --- eligibility -----------------------------------------------------------------------------------------------------


def test_only_connectors_whose_class_has_a_provider_are_eligible() -> None:
    assert fold(running(), [], 0, WITH_PROVIDER).policy.eligible
    debezium = [config({"connector.class": "io.debezium.connector.mysql.MySqlConnector", "heartbeat.interval.ms": "1"})]
    result = fold([*debezium, status("RUNNING")], [], 0, WITH_PROVIDER)
    assert result.policy.reason == (
        "no heartbeat provider for class io.debezium.connector.mysql.MySqlConnector (heartbeat.providers)"
    )


def test_own_offsets_topic_is_eligible_when_the_workers_topic_is_known() -> None:
    assert fold(running(**{"offsets.storage.topic": "own"}), [], 0, WITH_PROVIDER).policy.eligible


def test_mode_per_connector_and_bad_mode() -> None:
    assert fold(running(**{"heartbeat.mode": "timer"}), [], 0, WITH_PROVIDER).policy.mode == HeartbeatMode.TIMER
    bad = fold(running(**{"heartbeat.mode": "sometimes"}), [], 0, WITH_PROVIDER).policy
    assert not bad.eligible and "heartbeat.mode" in (bad.reason or "")


# --- timer mode ------------------------------------------------------------------------------------------------------


def test_timer_fires_every_interval_before_any_offset_and_whether_offsets_move() -> None:
    first = fold(running(), [], 1000, TIMER)
    assert first.due == [] and first.state.timer_next_at == 3000 and first.timeout_at == 3000
    fired = fold([], [], 3000, TIMER, first.state)
    (due,) = fired.due
    assert (due.partition, due.key, due.offset, due.due_at) == ({}, NO_PARTITION_KEY, {}, 3000)
    assert fired.state.timer_next_at == 5000  # reset whether or not anything comes back
    # an offset that keeps moving does not hold the timer back (idle mode would never beat it)
    moving = fold([], [offset(10, 4900)], 4950, TIMER, fired.state)
    assert moving.due == []
    beat = fold([], [offset(11, 5000)], 5000, TIMER, moving.state)
    assert [d.partition for d in beat.due] == [FILE] and beat.state.timer_next_at == 7000
    send, _sent = still_due(beat.due, {("src", beat.due[0].key): 3000}, 5000)
    assert send == beat.due  # the sink's last-heartbeat check agrees with the timer
    assert heartbeat_state_from_json(heartbeat_state_to_json(beat.state)).timer_next_at == 7000


def test_idle_mode_is_unchanged() -> None:
    result = fold(running(), [offset(10, 0)], 1000, WITH_PROVIDER)
    assert result.due == [] and result.state.timer_next_at is None
    assert [d.partition for d in fold([], [], 2000, WITH_PROVIDER, result.state).due] == [FILE]


# --- the offsets-update form -----------------------------------------------------------------------------------------


class Advancing(HeartbeatProvider):
    """Offsets-update form: moves each partition's position by 1; for no partition, starts one at 0."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def update_offsets(self, connector: str, config: Mapping[str, object], offsets: Sequence[Any]) -> list[Any]:
        self.calls.append(list(offsets))
        if not offsets:
            return [({"filename": "/new.txt"}, {"position": 0})]
        return [(dict(p), {"position": int(o["position"]) + 1}) for p, o in offsets]


class Both(Advancing):
    def produce_heartbeat_records(self, connector, config, partition, last_offset) -> list[HeartbeatRecord]:
        return [HeartbeatRecord(key="k", value="v")]


def _due(partition: dict[str, object], offset: dict[str, object], config: dict[str, str] | None = None) -> DuePartition:
    key = offset_key_bytes("src", partition) if partition else NO_PARTITION_KEY
    return DuePartition(
        "src", FILE_SOURCE_CLASS, config or {"connector.class": FILE_SOURCE_CLASS}, partition, key, offset,
        1000, 5000, 2000, "hb", 3000,
    )  # fmt: skip


def _emitter(provider: object, hb: FakeHeartbeatSender, offs: RecordingWriter) -> HeartbeatEmitter:
    return HeartbeatEmitter({FILE_SOURCE_CLASS: as_provider(provider)}, hb, offs, "connect-offsets", guards=GUARDS)


def test_offsets_update_form_commits_without_producing() -> None:
    hb, offs, provider = FakeHeartbeatSender(), RecordingWriter(), Advancing()
    (row,) = _emitter(provider, hb, offs).emit(_due(FILE, {"position": 7}), now=6000)
    assert provider.calls == [[(FILE, {"position": 7})]]
    assert hb.sent == [] and hb.topics == []
    assert offs.batches == [("connect-offsets", [(b'["src",{"filename":"/data/in.txt"}]', b'{"position":8}')])]
    assert (row.outcome, row.committed_offset, row.record_index) == (
        HeartbeatOutcome.OFFSETS_COMMITTED,
        '{"position":8}',
        None,
    )


def test_offsets_update_form_without_partitions_and_to_the_connectors_own_topic_in_connects_order() -> None:
    hb, offs = FakeHeartbeatSender(), RecordingWriter()
    own = {"connector.class": FILE_SOURCE_CLASS, "offsets.storage.topic": "own-offsets"}
    (row,) = _emitter(Advancing(), hb, offs).emit(_due({}, {}, own), now=6000)
    key = b'["src",{"filename":"/new.txt"}]'
    # ConnectorOffsetBackingStore.set: the connector's store (primary), then the worker's (secondary)
    assert offs.batches == [
        ("own-offsets", [(key, b'{"position":0}')]),
        ("connect-offsets", [(key, b'{"position":0}')]),
    ]
    assert row.partition == '{"filename":"/new.txt"}' and row.source_key == key


def test_both_forms_and_provider_detection() -> None:
    hb, offs = FakeHeartbeatSender(), RecordingWriter()
    rows = _emitter(Both(), hb, offs).emit(_due(FILE, {"position": 1}), now=6000)
    assert [r.outcome for r in rows] == [HeartbeatOutcome.OFFSETS_COMMITTED, HeartbeatOutcome.PRODUCED]
    assert implements_update_offsets(as_provider(Advancing())) and not implements_heartbeat_records(Advancing())
    assert implements_heartbeat_records(HeartbeatProvider()) and not implements_update_offsets(HeartbeatProvider())

    class Duck:
        def update_offsets(self, connector, config, offsets):
            return None

    duck = as_provider(Duck())
    assert implements_update_offsets(duck) and not implements_heartbeat_records(duck)
    (row,) = _emitter(Duck(), hb, offs).emit(_due(FILE, {"position": 1}), now=6000)
    assert row.outcome == HeartbeatOutcome.NO_RECORDS


@pytest.mark.parametrize("bad", [{"a": 1}, [("not a map", {})], [({"p": object()}, {"o": 1})]])
def test_bad_updates_fail_the_heartbeat(bad: object) -> None:
    class Bad(HeartbeatProvider):
        def update_offsets(self, connector, config, offsets):
            return bad

    (row,) = _emitter(Bad(), FakeHeartbeatSender(), RecordingWriter()).emit(_due(FILE, {"position": 1}), now=1)
    assert row.outcome == HeartbeatOutcome.FAILED


def test_heartbeat_state_without_timer_field_still_loads() -> None:
    text = heartbeat_state_to_json(HeartbeatState.new("src")).replace(',"timer_next_at":null', "")
    assert heartbeat_state_from_json(text).timer_next_at is None
