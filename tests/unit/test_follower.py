"""The API's follower of the status and offsets topics (connect_state.kafka.follower), fed without a broker."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kafka import TopicPartition

from connect_state.core.settings import Settings
from connect_state.kafka.follower import TopicFollower

TOPIC = "connect-status"
RECORD_BYTES = 3 + 1 + 100  # key "a/1", value "v", the per-record overhead


def connector_of(topic: str, key: bytes | None) -> str | None:
    return key.decode().split("/")[0] if key else None


def polled(partition: int, first: int, keys: list[str]) -> dict[TopicPartition, list[SimpleNamespace]]:
    records = [
        SimpleNamespace(offset=first + i, timestamp=1000 + i, key=key.encode(), value=b"v")
        for i, key in enumerate(keys)
    ]
    return {TopicPartition(TOPIC, partition): records}


@pytest.fixture
def follower(settings: Settings) -> TopicFollower:
    follower = TopicFollower(settings, [TOPIC], connector_of, max_bytes=6 * RECORD_BYTES)
    follower.follow_from({(TOPIC, 0): 10, (TOPIC, 1): 0})
    return follower


def offsets(records: list | None) -> list[tuple[int, int]] | None:
    return None if records is None else [(r.partition, r.offset) for r in records]


def test_one_connectors_records_past_the_starts_in_offset_order(follower: TopicFollower) -> None:
    follower.take(polled(0, 10, ["a/1", "b/1", "a/2"]), {(TOPIC, 0): 13, (TOPIC, 1): 0})
    follower.take(polled(1, 0, ["a/3"]), {(TOPIC, 0): 13, (TOPIC, 1): 1})
    assert offsets(follower.records_since({(TOPIC, 0): 10, (TOPIC, 1): 0}, "a")) == [(0, 10), (0, 12), (1, 0)]
    assert offsets(follower.records_since({(TOPIC, 0): 11, (TOPIC, 1): 1}, "a")) == [(0, 12)]
    assert offsets(follower.records_since({(TOPIC, 0): 13}, "a")) == []
    assert follower.positions() == {(TOPIC, 0): 13, (TOPIC, 1): 1}


def test_none_for_a_start_before_what_it_holds_or_a_partition_it_does_not_follow(follower: TopicFollower) -> None:
    follower.take(polled(0, 10, ["a/1"]), {})
    assert follower.records_since({(TOPIC, 0): 9}, "a") is None  # it started at 10
    assert follower.records_since({(TOPIC, 2): 0}, "a") is None
    assert follower.following(TOPIC) and not follower.following("other")


def test_past_max_bytes_the_oldest_half_goes_and_so_does_the_coverage(follower: TopicFollower) -> None:
    follower.take(polled(0, 10, [f"a/{i}" for i in range(7)]), {})  # 7 records > 6: the oldest 4 go
    assert follower.records_since({(TOPIC, 0): 10}, "a") is None
    assert offsets(follower.records_since({(TOPIC, 0): 14}, "a")) == [(0, 14), (0, 15), (0, 16)]


def test_the_position_moves_past_what_read_committed_skips(follower: TopicFollower) -> None:
    follower.take(polled(0, 10, ["a/1"]), {(TOPIC, 0): 13})  # a transaction marker at 11, an aborted record at 12
    assert follower.positions()[(TOPIC, 0)] == 13


def test_caught_up_only_moves_forward_and_a_restart_forgets_it(follower: TopicFollower) -> None:
    assert follower.caught_up_as_of() is None
    follower.caught_up(20.0)
    follower.caught_up(10.0)
    assert follower.caught_up_as_of() == 20.0
    follower.follow_from({(TOPIC, 0): 50})
    assert follower.caught_up_as_of() is None
    assert follower.records_since({(TOPIC, 0): 10}, "a") is None
