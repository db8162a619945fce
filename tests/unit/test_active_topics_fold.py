"""The KIP-558 fold without Spark: add, update, remove, replays, ordering, state round trip."""

from __future__ import annotations

import random

import pytest

from connect_state.folds.active_topics import (
    ADDED,
    REMOVED,
    UPDATED,
    TopicRecord,
    active_topics,
    fold_all,
    fold_connector_topics,
    state_from_json,
    state_to_json,
)


def put(
    topic: str, offset: int, task: int = 0, ts: int = 1000, partition: int = 0, connector: str = "c"
) -> TopicRecord:
    return TopicRecord(connector, topic, task, ts, partition, offset, ts + offset)


def tombstone(topic: str, offset: int, partition: int = 0, connector: str = "c") -> TopicRecord:
    return TopicRecord(connector, topic, None, None, partition, offset, 5000 + offset)


def test_first_sighting_adds_topic():
    state, changes = fold_connector_topics({}, [put("t1", 0, task=2, ts=77)])
    assert set(active_topics(state)) == {"t1"}
    assert [(c.topic, c.change, c.task, c.discover_timestamp) for c in changes] == [("t1", ADDED, 2, 77)]


def test_tombstone_removes_topic_and_reports_last_values():
    state, _ = fold_connector_topics({}, [put("t1", 0, task=1, ts=10), put("t2", 1)])
    state, changes = fold_connector_topics(state, [tombstone("t1", 2)])
    assert set(active_topics(state)) == {"t2"}
    assert [(c.topic, c.change, c.task, c.discover_timestamp) for c in changes] == [("t1", REMOVED, 1, 10)]


def test_tombstone_for_unknown_topic_changes_nothing():
    state, changes = fold_connector_topics({}, [tombstone("never", 3)])
    assert active_topics(state) == {}
    assert changes == []


def test_rediscovery_after_reset_is_added_again():
    records = [put("t1", 0, ts=1), tombstone("t1", 1), put("t1", 2, ts=3)]
    state, changes = fold_connector_topics({}, records)
    assert [c.change for c in changes] == [ADDED, REMOVED, ADDED]
    assert active_topics(state)["t1"].discover_timestamp == 3


def test_new_task_or_timestamp_is_an_update_and_identical_value_is_not():
    state, _ = fold_connector_topics({}, [put("t1", 0, task=0, ts=1)])
    state, changes = fold_connector_topics(state, [put("t1", 1, task=0, ts=1), put("t1", 2, task=3, ts=1)])
    assert [(c.change, c.task) for c in changes] == [(UPDATED, 3)]


@pytest.mark.parametrize("replayed", [0, 1])
def test_records_at_or_below_applied_offset_are_replays(replayed: int):
    state, _ = fold_connector_topics({}, [put("t1", 0), tombstone("t1", 1)])
    state, changes = fold_connector_topics(state, [put("t1", replayed)])
    assert changes == []
    assert active_topics(state) == {}


def test_input_order_does_not_matter_within_a_batch():
    records = [put("t1", 0), tombstone("t1", 4), put("t2", 1, partition=1), put("t1", 7)]
    shuffled = records[:]
    random.Random(7).shuffle(shuffled)
    assert fold_connector_topics({}, shuffled) == fold_connector_topics({}, records)


def test_folding_in_batches_equals_folding_at_once():
    rng = random.Random(11)
    records = []
    for offset in range(300):
        topic = f"t{rng.randrange(12)}"
        partition = int(topic[1:]) % 3
        records.append(
            tombstone(topic, offset, partition) if rng.random() < 0.3 else put(topic, offset, 0, offset, partition)
        )
    whole, _ = fold_connector_topics({}, records)
    state = {}
    for start in range(0, len(records), 37):
        state, _ = fold_connector_topics(state_from_json(state_to_json(state)), records[start : start + 37])
    assert state == whole


def test_fold_all_groups_by_connector():
    result = fold_all([put("t1", 0, connector="a"), put("t2", 1, connector="b"), tombstone("t1", 2, connector="a")])
    assert {name: set(active_topics(s)) for name, s in result.items()} == {"a": set(), "b": {"t2"}}


def test_state_json_round_trip_keeps_removed_markers():
    state, _ = fold_connector_topics({}, [put("t1", 0), put("t2", 1), tombstone("t2", 2)])
    assert state_from_json(state_to_json(state)) == state
    assert state_from_json(None) == {}
