"""connect_state.folds.source_offsets: KafkaOffsetBackingStore's ``data`` and ``connectorPartitions``.

The expected outcomes follow ``KafkaOffsetBackingStore``'s consume callback and ``OffsetUtils.processPartitionKey``
(``KafkaOffsetBackingStoreTest``, ``OffsetUtilsTest``): values kept under exact key bytes, partition maps added and
removed by equality.
"""

from __future__ import annotations

import pytest

from connect_state.folds.source_offsets import (
    DELETE,
    LISTED,
    REMOVED,
    SET,
    UPSERT,
    CurrentRow,
    OffsetRecord,
    OffsetsState,
    fold_all,
    fold_connector_offsets,
    partition_identity,
    read_offset,
    state_from_json,
    state_to_json,
)
from connect_state.formats.offsets import offset_key_bytes
from connect_state.spark.source_offsets import classify as classify_source

TOPIC = "connect-offsets"
# A two-key partition: written by a Python task in document order, and as Connect re-serialises it (HashMap order).
DOC_ORDER = b'["c",{"kafka_topic":"t","kafka_partition":0}]'
HASHMAP_ORDER = offset_key_bytes("c", {"kafka_topic": "t", "kafka_partition": 0})
PARTITION_JSON = '{"kafka_partition":0,"kafka_topic":"t"}'


def test_the_two_orders_are_different_keys() -> None:
    assert HASHMAP_ORDER == b'["c",{"kafka_partition":0,"kafka_topic":"t"}]' != DOC_ORDER


class Topic:
    """Records of one offsets topic, numbered in order (one Kafka partition unless given)."""

    def __init__(self) -> None:
        self.n = 0

    def record(self, key: bytes, value: bytes | None, kafka_partition: int = 0, ts: int | None = None) -> OffsetRecord:
        self.n += 1
        return OffsetRecord.from_kafka(TOPIC, key, value, kafka_partition, self.n, ts if ts is not None else self.n)


def rows_by_key(rows: list[CurrentRow]) -> dict[bytes, CurrentRow]:
    by_key = {row.key: row for row in rows}
    assert len(by_key) == len(rows), "one current row per key and batch"
    return by_key


def apply_rows(table: dict[bytes, CurrentRow], rows: list[CurrentRow]) -> None:
    """What the job's MERGE does to the current table."""
    for row in rows:
        if row.op == DELETE:
            table.pop(row.key, None)
        elif row.op == LISTED:
            old = table[row.key]
            table[row.key] = CurrentRow(**{**old.__dict__, "listed": row.listed})
        else:
            table[row.key] = row


def connect_get_offsets(table: dict[bytes, CurrentRow], connector: str) -> list[tuple[str, str | None]]:
    """``GET /connectors/<c>/offsets`` from the table: every listed map, looked up under its HashMap-order key."""
    import json

    listed = {row.partition: row for row in table.values() if row.connector == connector and row.listed}
    out = []
    for partition_json in listed:
        hit = table.get(offset_key_bytes(connector, json.loads(partition_json)))
        out.append((partition_json, hit.offset if hit else None))
    return sorted(out)


def test_hashmap_order_vs_document_order() -> None:
    t = Topic()
    state, history, rows = fold_connector_offsets(OffsetsState(), [t.record(DOC_ORDER, b'{"offset":1}')])
    table: dict[bytes, CurrentRow] = {}
    apply_rows(table, rows)
    assert rows_by_key(rows)[DOC_ORDER].listed
    assert table[DOC_ORDER].partition == PARTITION_JSON
    # Connect lists the map but its lookup under the HashMap-order key misses: "offset": null.
    assert connect_get_offsets(table, "c") == [(PARTITION_JSON, None)]

    state, history, rows = fold_connector_offsets(state, [t.record(HASHMAP_ORDER, b'{"offset":2}')])
    apply_rows(table, rows)
    assert set(table) == {DOC_ORDER, HASHMAP_ORDER} and all(row.listed for row in table.values())
    assert connect_get_offsets(table, "c") == [(PARTITION_JSON, '{"offset":2}')]
    assert [(c.change, c.offset) for c in history] == [(SET, '{"offset":2}')]


@pytest.mark.parametrize("same_batch", [True, False])
def test_tombstone_under_an_equal_map_in_another_order(same_batch: bool) -> None:
    """The tombstone removes the map from connectorPartitions, but not the first record from data."""
    t = Topic()
    batches = [[t.record(DOC_ORDER, b'{"offset":1}')], [t.record(HASHMAP_ORDER, None)]]
    if same_batch:
        batches = [batches[0] + batches[1]]
    state, table = OffsetsState(), {}
    for batch in batches:
        state, _history, rows = fold_connector_offsets(state, batch)
        apply_rows(table, rows)
    assert list(table) == [DOC_ORDER]
    assert not table[DOC_ORDER].listed
    assert state.listed == set() and list(state.keys) == [DOC_ORDER]
    assert connect_get_offsets(table, "c") == []
    if not same_batch:
        # The tombstone's own key was never live; the first key stays, no longer listed.
        assert rows == [
            CurrentRow(DELETE, "c", TOPIC, HASHMAP_ORDER),
            CurrentRow(LISTED, "c", TOPIC, DOC_ORDER, listed=False),
        ]


def test_tombstone_of_one_order_unlists_the_other_key() -> None:
    t = Topic()
    state, _, _ = fold_connector_offsets(
        OffsetsState(), [t.record(DOC_ORDER, b'{"offset":1}'), t.record(HASHMAP_ORDER, b'{"offset":2}')]
    )
    state, history, rows = fold_connector_offsets(state, [t.record(DOC_ORDER, None)])
    assert rows_by_key(rows) == {
        DOC_ORDER: CurrentRow(DELETE, "c", TOPIC, DOC_ORDER),
        HASHMAP_ORDER: CurrentRow(LISTED, "c", TOPIC, HASHMAP_ORDER, listed=False),
    }
    assert [c.change for c in history] == [REMOVED]
    # Writing the map again lists it again, and the untouched key follows.
    state, _, rows = fold_connector_offsets(state, [t.record(DOC_ORDER, b'{"offset":3}')])
    assert rows_by_key(rows)[HASHMAP_ORDER] == CurrentRow(LISTED, "c", TOPIC, HASHMAP_ORDER, listed=True)
    assert rows_by_key(rows)[DOC_ORDER].listed


def test_null_partition_is_kept_in_data_but_never_listed() -> None:
    t = Topic()
    key = b'["c",null]'
    state, _history, rows = fold_connector_offsets(OffsetsState(), [t.record(key, b'{"offset":1}')])
    assert rows == [CurrentRow(UPSERT, "c", TOPIC, key, None, '{"offset":1}', b'{"offset":1}', False, 0, 1, 1)]
    assert state.listed == set() and state.keys == {key: None}


def test_equality_is_javas() -> None:
    """``1`` (Long), ``1.0`` (Double) and ``true`` are different partitions; key order and whitespace are not."""
    assert partition_identity({"a": 1, "b": "x"}) == partition_identity({"b": "x", "a": 1})
    identities = {partition_identity({"p": v}) for v in (1, 1.0, True, "1", None, 0.0, -0.0)}
    assert len(identities) == 7
    t = Topic()
    state, _, _ = fold_connector_offsets(
        OffsetsState(),
        [t.record(b'["c",{"p":1}]', b"{}"), t.record(b'["c", {"p" : 1.0}]', b"{}"), t.record(b'["c",{"p":1}]', None)],
    )
    assert state.listed == {partition_identity({"p": 1.0})}


@pytest.mark.parametrize(
    ("value", "offset", "error"),
    [
        (b'{"position":42}', '{"position":42}', None),
        (b'{"b":1,"a":2.5,"kafka_offset":7}', '{"a":2.5,"b":1,"kafka_offset":7}', None),  # HashMap order
        (b"null", "null", None),  # reads as null: GET shows "offset": null
        (b"", "null", None),
        (None, None, None),
        (b"not json", None, "invalid JSON"),
        (b'{"pos":{"nested":1}}', None, "field pos contains MAP"),
        (b"[1]", None, "Offsets must be specified as a Map"),
    ],
)
def test_read_offset(value: bytes | None, offset: str | None, error: str | None) -> None:
    got_offset, got_error = read_offset(value)
    assert got_offset == offset
    assert (got_error is None) == (error is None) and (error is None or error in got_error)


def test_unreadable_value_keeps_the_row_and_the_listing() -> None:
    t = Topic()
    _state, history, rows = fold_connector_offsets(OffsetsState(), [t.record(b'["c",{"f":"x"}]', b"garbage")])
    (row,) = rows
    assert (row.op, row.offset, row.value, row.listed) == (UPSERT, None, b"garbage", True)
    assert [(c.change, c.offset) for c in history] == [(SET, None)]


def test_partitions_merge_by_timestamp_each_in_offset_order() -> None:
    """Two keys of one map in two Kafka partitions: the later record (by timestamp) decides the listing."""
    t = Topic()
    later_tombstone = t.record(HASHMAP_ORDER, None, kafka_partition=3, ts=200)
    earlier_put = t.record(DOC_ORDER, b'{"offset":1}', kafka_partition=1, ts=100)
    state, history, _ = fold_connector_offsets(OffsetsState(), [later_tombstone, earlier_put])
    assert [c.kafka_partition for c in history] == [1, 3]
    assert state.listed == set()


def test_fold_all_and_state_round_trip() -> None:
    t = Topic()
    records = [
        t.record(DOC_ORDER, b'{"offset":1}'),
        t.record(b'["d",{"f":"x"}]', b'{"offset":9}'),
        t.record(b'["d",{"f":"y"}]', b'{"offset":8}'),
        t.record(b'["d",{"f":"y"}]', None),
    ]
    states = fold_all(records)
    assert set(states) == {(TOPIC, "c"), (TOPIC, "d")}
    d = states[(TOPIC, "d")]
    assert list(d.keys) == [b'["d",{"f":"x"}]'] and d.listed == {partition_identity({"f": "x"})}
    assert state_from_json(state_to_json(d)) == d
    assert state_from_json(None) == OffsetsState()


_FORMAT = "Ignoring offset partition key with an unexpected format"


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        (b"not json", "Ignoring offset partition key with unknown serialization. Expected json."),
        (b"", f"{_FORMAT}. Expected type: java.util.List, actual type: null"),
        (b'{"c":1}', f"{_FORMAT}. Expected type: java.util.List, actual type: java.util.HashMap"),
        (b'["c"]', "unexpected number of elements. Expected: 2, actual: 1"),
        (b'["c",{},1]', "unexpected number of elements. Expected: 2, actual: 3"),
        (b'[1,{"f":"x"}]', "for the first element in the partition key list. Expected type: java.lang.String"),
        (b'["c",[1]]', "for the second element in the partition key list. Expected type: java.util.Map"),
        (b'["c","x"]', "for the second element in the partition key list. Expected type: java.util.Map"),
    ],
)
def test_malformed_keys_are_rejected_with_connects_warning(key: bytes, reason: str) -> None:
    kafka = {"kafka_topic": TOPIC, "kafka_partition": 0, "kafka_offset": 5, "kafka_timestamp": 1}
    (row,) = classify_source(key, b'{"offset":1}', kafka)
    assert row["record_kind"] == "rejected" and reason in row["reason"]
    assert (row["raw_key"], row["raw_value"]) == (key, b'{"offset":1}')


def test_classify_keeps_null_partitions_and_quarantines_unreadable_values() -> None:
    kafka = {"kafka_topic": "my-offsets", "kafka_partition": 0, "kafka_offset": 5, "kafka_timestamp": 1}
    (row,) = classify_source(b'["c",null]', b'{"offset":1}', kafka)
    assert (row["record_kind"], row["offsets_topic"], row["connector"]) == ("record", "my-offsets", "c")
    kept, rejected = classify_source(b'["c",{"f":"x"}]', b"{bad", kafka)
    assert kept["record_kind"] == "record"
    assert rejected["record_kind"] == "rejected" and "Failed to deserialize offset data" in rejected["reason"]
