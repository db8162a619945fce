"""connect_state.folds.sink_offsets: a consumer group's committed offsets as the group coordinator replays them, and
the job's classification of ``__consumer_offsets`` records."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connect_state.folds.sink_offsets import (
    DELETE,
    REMOVED,
    SET,
    UPSERT,
    OffsetCommitRecord,
    committed_offsets,
    fold_group_offsets,
    fold_past_rows,
    state_from_json,
    state_to_json,
)
from connect_state.formats.connector_keys import record_connector
from connect_state.formats.consumer_offsets import (
    OffsetCommitValue,
    serialize_offset_commit_key,
    serialize_offset_commit_value,
)
from connect_state.spark.sink_offsets import classify as classify_sink

GROUP = "connect-file-sink"


def commit(topic: str, partition: int, offset: int | None, kafka_offset: int) -> OffsetCommitRecord:
    value = None if offset is None else OffsetCommitValue(offset, "", 1_700_000_000_000 + kafka_offset, 3)
    return OffsetCommitRecord(GROUP, topic, partition, value, 7, kafka_offset, 1_700_000_000_000 + kafka_offset)


def summary(changes) -> list[tuple]:
    return [(c.topic, c.partition, c.change, c.commit.offset if c.commit else None) for c in changes]


def test_latest_commit_per_partition_wins_in_offset_order() -> None:
    records = [commit("t", 0, 5, 10), commit("t", 1, 3, 11), commit("t", 0, 9, 12)]
    state, history, current = fold_group_offsets({}, reversed(records))  # any input order
    assert summary(history) == [("t", 0, SET, 5), ("t", 1, SET, 3), ("t", 0, SET, 9)]
    assert sorted(summary(current)) == [("t", 0, UPSERT, 9), ("t", 1, UPSERT, 3)]
    assert state == {("t", 0): 12, ("t", 1): 11}


def test_tombstone_removes_the_offset() -> None:
    state, _, _ = fold_group_offsets({}, [commit("t", 0, 5, 10), commit("t", 1, 3, 11)])
    state, history, current = fold_group_offsets(state, [commit("t", 0, None, 20)])
    assert summary(history) == [("t", 0, REMOVED, None)]
    assert summary(current) == [("t", 0, DELETE, None)]
    assert state == {("t", 1): 11}


def test_set_then_removed_in_one_batch_deletes_and_removed_then_set_upserts() -> None:
    _, _, current = fold_group_offsets({}, [commit("t", 0, 5, 10), commit("t", 0, None, 11)])
    assert summary(current) == [("t", 0, DELETE, None)]
    _, _, current = fold_group_offsets({("t", 0): 3}, [commit("t", 0, None, 10), commit("t", 0, 8, 11)])
    assert summary(current) == [("t", 0, UPSERT, 8)]


def test_tombstone_for_an_absent_offset_changes_nothing_current() -> None:
    state, history, current = fold_group_offsets({}, [commit("t", 0, None, 10)])
    assert state == {} and current == [] and summary(history) == [("t", 0, REMOVED, None)]


def test_committed_offsets_reference_and_state_round_trip() -> None:
    records = [commit("a", 0, 1, 1), commit("a", 0, None, 2), commit("b", 2, 4, 3)]
    assert committed_offsets(records) == {GROUP: {("b", 2): 4}}
    state = {("b", 2): 3, ("a", 1): 9}
    assert state_from_json(state_to_json(state)) == state
    assert state_from_json(None) == {}


KAFKA = {"kafka_topic": "__consumer_offsets", "kafka_partition": 7, "kafka_offset": 42, "kafka_timestamp": 5}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_classify_commit_of_every_value_version(version: int) -> None:
    key = serialize_offset_commit_key(GROUP, "orders", 2)
    value = serialize_offset_commit_value(OffsetCommitValue(10, "meta", 99, 4 if version >= 3 else -1), version)
    (row,) = classify_sink(key, value, KAFKA)
    assert {k: row[k] for k in ("record_kind", "group_id", "topic", "partition", "offset", "change")} == {
        "record_kind": "record",
        "group_id": GROUP,
        "topic": "orders",
        "partition": 2,
        "offset": 10,
        "change": SET,
    }
    assert (row["metadata"], row["commit_timestamp"], row["leader_epoch"]) == ("meta", 99, 4 if version >= 3 else -1)


def test_classify_tombstone_ignores_group_records_and_rejects_unreadable_ones() -> None:
    (row,) = classify_sink(serialize_offset_commit_key(GROUP, "orders", 2), None, KAFKA)
    assert (row["change"], row["offset"]) == (REMOVED, None)
    assert classify_sink(bytes.fromhex("0002000c636f6e6e6563742d73696e6b"), b"\x00\x03", KAFKA) == []
    assert classify_sink(bytes.fromhex("0002000c636f6e6e6563742d73696e6b"), None, KAFKA) == []  # group deleted
    (rejected,) = classify_sink(bytes.fromhex("0009"), b"x", KAFKA)
    assert rejected["record_kind"] == "rejected" and rejected["reason"].startswith("Unknown record type 9")
    assert (rejected["raw_key"], rejected["raw_value"]) == (bytes.fromhex("0009"), b"x")


records_st = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), st.one_of(st.none(), st.integers(0, 10**6))), max_size=20
)


@settings(max_examples=300, deadline=None)
@given(records=records_st, data=st.data())
def test_rows_with_the_records_past_them_fold_as_the_whole_topic(records: list, data: st.DataObject) -> None:
    """What the API answers for a sink (the table's rows, then the followed records past the watermark folded over
    them) is the group's committed offsets after every record, as the coordinator replays them: also when records
    the rows already reflect are folded again (the watermark is older than the rows)."""
    all_records = [commit(topic, partition, offset, 100 + i) for i, (topic, partition, offset) in enumerate(records)]
    folded_into_rows = data.draw(st.integers(0, len(all_records)), label="records the table reflects")
    watermark = data.draw(st.integers(0, folded_into_rows), label="the watermark")
    rows = [
        {"topic": topic, "partition": partition, "offset": offset}
        for (topic, partition), offset in committed_offsets(all_records[:folded_into_rows]).get(GROUP, {}).items()
    ]
    expected = committed_offsets(all_records).get(GROUP, {})
    got = fold_past_rows(rows, all_records[watermark:])
    assert {(r["topic"], r["partition"]): r["offset"] for r in got} == expected
    assert [(r["topic"], r["partition"]) for r in got] == sorted(expected)


def test_the_follower_files_offset_commits_by_group() -> None:
    connector_of = record_connector("connect-status", "connect-offsets", "__consumer_offsets")
    assert connector_of("__consumer_offsets", serialize_offset_commit_key(GROUP, "t", 3)) == GROUP
    assert connector_of("__consumer_offsets", b"\x00\x02\x00\x01g") is None  # group metadata: no offsets
    assert connector_of("__consumer_offsets", b"\x00") is None  # unreadable: the job quarantines it
    assert connector_of("__consumer_offsets", None) is None
    without = record_connector("connect-status", "connect-offsets")
    assert without("__consumer_offsets", serialize_offset_commit_key(GROUP, "t", 3)) is None
