"""KIP-875 source offsets: fold an offsets topic's records of one connector the way ``KafkaOffsetBackingStore`` does.

Pure Python, no Spark: spark/source_offsets.py calls :func:`fold_connector_offsets` once per (offsets topic,
connector) and micro-batch from ``applyInPandasWithState``; tests call it directly.

Connect keeps two structures per offsets topic (``KafkaOffsetBackingStore``:
``connect/runtime/src/main/java/org/apache/kafka/connect/storage/KafkaOffsetBackingStore.java``):

* ``data``: raw key bytes -> raw value bytes; a record with a value puts, a tombstone removes. Every key counts,
  whatever its shape; lookups are by exact bytes.
* ``connectorPartitions``: connector -> set of partition maps, kept by ``OffsetUtils.processPartitionKey``: the
  parsed map is added for a record with a value and removed for a tombstone, by map **equality**
  (``HashMap.equals``: the order of the keys in the JSON does not matter, ``1``, ``1.0`` and ``true`` differ). So a
  tombstone written under the same map in another key order empties the set while the first record stays in
  ``data``; and two keys of one map both stay in ``data``. Malformed keys are left out of the set (the job
  quarantines them); a key whose partition is JSON ``null`` is left out silently but kept in ``data``.

``GET /connectors/<name>/offsets`` lists the maps of ``connectorPartitions`` and looks each one up in ``data`` under
its re-serialised key (Java ``HashMap`` order, :func:`connect_state.formats.offsets.offset_key_bytes`). The fold's
rows are ``data`` (one per exact key bytes) with ``listed`` = "its parsed map is in ``connectorPartitions``", so a
reader can answer like Connect.

Records of one key always live in one partition of the topic; the partitions are merged by Kafka timestamp (each in
offset order), as for the status topic.
"""

from __future__ import annotations

import base64
import heapq
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from connect_state.core.errors import RecordFormatError
from connect_state.formats import jsonconv
from connect_state.formats.javalang import java_equality_key, java_hashmap_ordered
from connect_state.formats.offsets import parse_offset_key, parse_offset_value

SET = "set"
REMOVED = "removed"

UPSERT = "upsert"
DELETE = "delete"
LISTED = "listed"


def partition_identity(partition: Mapping[str, object]) -> str:
    """A string equal for two partition maps exactly when Java's ``Map.equals`` says they are equal."""
    return _canonical(java_equality_key(partition))


def _canonical(key: object) -> str:
    """Stable text of an equality key (frozensets sorted), for the state row."""

    def plain(item: object) -> object:
        if isinstance(item, frozenset):
            return sorted((plain(x) for x in item), key=lambda x: json.dumps(x))
        if isinstance(item, tuple):
            return [plain(x) for x in item]
        if isinstance(item, bytes):
            return item.hex()
        return item

    return json.dumps(plain(key), separators=(",", ":"), ensure_ascii=False)


def connect_json(value: object) -> str:
    """A value as Connect's REST shows what it parsed (``HashMap`` order at every depth, Jackson's number text)."""
    return jsonconv.dumps(java_hashmap_ordered(value)).decode("utf-8")


@dataclass(frozen=True)
class OffsetRecord:
    """One record of an offsets topic whose key names ``connector`` (``[connector, partition-or-null]``).

    Build it with :meth:`from_kafka`, which parses the key (and raises ``RecordFormatError`` for a key
    ``processPartitionKey`` would ignore with a WARN).
    """

    offsets_topic: str
    connector: str
    key: bytes
    value: bytes | None
    partition: dict[str, object] | None = field(hash=False)
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp: int

    @classmethod
    def from_kafka(
        cls,
        offsets_topic: str,
        key: bytes | None,
        value: bytes | None,
        kafka_partition: int,
        kafka_offset: int,
        kafka_timestamp: int,
    ) -> OffsetRecord:
        if key is None:
            parse_offset_key(key)  # raises
        assert key is not None
        raw_key = bytes(key)
        parsed = parsed_key(raw_key)
        record = cls(
            offsets_topic,
            parsed.connector,
            raw_key,
            None if value is None else bytes(value),
            parsed.partition,
            kafka_partition,
            kafka_offset,
            kafka_timestamp,
        )
        # The key's derived texts, computed once per distinct key (see :func:`parsed_key`).
        record.__dict__["identity"] = parsed.identity
        record.__dict__["partition_json"] = parsed.partition_json
        return record

    @cached_property
    def identity(self) -> str | None:
        """The partition map's equality identity; ``None`` for a JSON-null partition (never in the set). Cached: the
        fold asks for it several times per record."""
        return None if self.partition is None else partition_identity(self.partition)

    @cached_property
    def partition_json(self) -> str | None:
        return None if self.partition is None else connect_json(self.partition)


@dataclass(frozen=True)
class ParsedKey:
    """What the fold derives from an offsets-topic key: :func:`parse_offset_key`'s connector and partition map, the
    map's equality identity and its JSON as Connect shows it."""

    connector: str
    partition: dict[str, object] | None = field(hash=False)
    identity: str | None = field(hash=False)
    partition_json: str | None = field(hash=False)


@lru_cache(maxsize=65536)
def parsed_key(key: bytes) -> ParsedKey:
    """:func:`parse_offset_key` and the texts derived from its partition map, once per distinct key bytes (a source
    partition's key repeats with every offset commit). Raises ``RecordFormatError`` like :func:`parse_offset_key`
    (not cached). The partition map is shared by every record of the key: never modify it."""
    parsed = parse_offset_key(key)
    if parsed.partition is None:
        return ParsedKey(parsed.connector, None, None, None)
    return ParsedKey(
        parsed.connector, parsed.partition, partition_identity(parsed.partition), connect_json(parsed.partition)
    )


# A single-entry offset map with a plain name and a long value, compact: e.g. {"position":1234} (FileStream sources),
# {"kafka_offset":5}. Connect renders it back byte for byte (a one-entry HashMap has one order), so :func:`read_offset`
# takes its bytes as they are (the unit tests check that against the exact reading).
_SIMPLE_OFFSET = re.compile(rb'\{"[A-Za-z0-9_.\-]{1,64}":(?:0|-?[1-9][0-9]{0,17})\}')


def read_offset(value: bytes | None) -> tuple[str | None, str | None]:
    """``(offset JSON, error)`` of a value as ``OffsetStorageReaderImpl.offsets`` reads it.

    The JSON is Connect's rendering of the offset map; ``"null"`` for a value that reads as null (the bytes ``null``
    or empty bytes: ``GET /offsets`` shows ``"offset":null``). A value that fails (not JSON, not a map of primitives)
    gives ``(None, reason)``: Connect logs ``CRITICAL: Failed to deserialize offset data`` and leaves the partition
    out of ``GET /offsets``. A tombstone gives ``(None, None)``.
    """
    if value is not None and _SIMPLE_OFFSET.fullmatch(value):  # the fast path: already Connect's rendering
        return bytes(value).decode("ascii"), None
    return read_offset_exact(value)


def read_offset_exact(value: bytes | None) -> tuple[str | None, str | None]:
    """:func:`read_offset` without its fast path for one-entry maps of a number (the oracle of its tests)."""
    if value is None:
        return None, None
    try:
        offset = parse_offset_value(value)
    except RecordFormatError as err:
        return None, err.reason
    return ("null" if offset is None else connect_json(offset)), None


@dataclass
class OffsetsState:
    """What the fold remembers for one (offsets topic, connector).

    ``listed``: the identities of ``connectorPartitions``; ``keys``: the live keys of ``data`` (non-null value) and
    their partition identity (``None`` for a JSON-null partition).
    """

    listed: set[str] = field(default_factory=set)
    keys: dict[bytes, str | None] = field(default_factory=dict)

    def copy(self) -> OffsetsState:
        return OffsetsState(set(self.listed), dict(self.keys))


@dataclass(frozen=True)
class OffsetChange:
    """One record as the history shows it: ``change`` ``set`` or ``removed`` (a tombstone)."""

    connector: str
    offsets_topic: str
    partition: str | None
    key: bytes
    offset: str | None
    change: str
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp: int


@dataclass(frozen=True)
class CurrentRow:
    """What a batch does to one row of the current table (key ``(offsets_topic, key)``).

    ``op``: ``upsert`` (the row as given), ``delete`` (a tombstone removed the key from ``data``) or ``listed`` (only
    ``listed`` changed, because a record under an equal map in another key added or removed the map).
    """

    op: str
    connector: str
    offsets_topic: str
    key: bytes
    partition: str | None = None
    offset: str | None = None
    value: bytes | None = None
    listed: bool = False
    kafka_partition: int | None = None
    kafka_offset: int | None = None
    kafka_timestamp: int | None = None


def apply_record(state: OffsetsState, record: OffsetRecord) -> None:
    """``KafkaOffsetBackingStore``'s consume callback for one record, in place: ``data`` then
    ``processPartitionKey``."""
    identity = record.identity
    if record.value is None:
        state.keys.pop(record.key, None)
        if identity is not None:
            state.listed.discard(identity)
    else:
        state.keys[record.key] = identity
        if identity is not None:
            state.listed.add(identity)


def apply_order(records: Iterable[OffsetRecord]) -> list[OffsetRecord]:
    """Each topic partition in offset order, the partitions merged by Kafka timestamp."""
    partitions: dict[int, list[OffsetRecord]] = {}
    for record in records:
        partitions.setdefault(record.kafka_partition, []).append(record)
    ordered = [sorted(recs, key=lambda r: r.kafka_offset) for _, recs in sorted(partitions.items())]
    return list(heapq.merge(*ordered, key=lambda r: (r.kafka_timestamp, r.kafka_partition)))


def fold_connector_offsets(
    state: OffsetsState, records: Iterable[OffsetRecord]
) -> tuple[OffsetsState, list[OffsetChange], list[CurrentRow]]:
    """Fold one batch of records of one (offsets topic, connector) into a copy of ``state``.

    Returns the new state, one history change per record (in the order applied) and one current-table row per key
    the batch touched: the key's last record (``upsert`` or ``delete``), or a ``listed`` update for a live key whose
    map entered or left ``connectorPartitions`` because of another key.
    """
    before = state
    new_state = state.copy()
    changes: list[OffsetChange] = []
    last: dict[bytes, OffsetRecord] = {}
    touched: set[str] = set()
    for record in apply_order(records):
        apply_record(new_state, record)
        last[record.key] = record
        if record.identity is not None:
            touched.add(record.identity)
        offset, _error = read_offset(record.value)
        changes.append(
            OffsetChange(
                record.connector,
                record.offsets_topic,
                record.partition_json,
                record.key,
                offset,
                REMOVED if record.value is None else SET,
                record.kafka_partition,
                record.kafka_offset,
                record.kafka_timestamp,
            )
        )
    rows: list[CurrentRow] = []
    for key, record in last.items():
        if record.value is None:
            rows.append(CurrentRow(DELETE, record.connector, record.offsets_topic, key))
            continue
        identity = record.identity
        rows.append(
            CurrentRow(
                UPSERT,
                record.connector,
                record.offsets_topic,
                key,
                record.partition_json,
                read_offset(record.value)[0],
                record.value,
                identity is not None and identity in new_state.listed,
                record.kafka_partition,
                record.kafka_offset,
                record.kafka_timestamp,
            )
        )
    if touched and last:
        any_record = next(iter(last.values()))
        for key, identity in new_state.keys.items():
            if key in last or identity not in touched:
                continue
            listed_now = identity in new_state.listed
            if listed_now != (identity in before.listed):
                rows.append(CurrentRow(LISTED, any_record.connector, any_record.offsets_topic, key, listed=listed_now))
    return new_state, changes, rows


def state_from_rows(rows: Iterable[Mapping[str, Any]]) -> OffsetsState:
    """The state of one (offsets topic, connector) from its ``source_offsets`` table rows.

    Exact: every row is a live key of ``data``, and every map of ``connectorPartitions`` has a live key (the record
    that last added a map is live until a tombstone, which removes the map too), flagged ``listed``. Rows whose key
    does not parse are left out (the job never writes them).
    """
    state = OffsetsState()
    for row in rows:
        key = row.get("key")
        if key is None:
            continue
        try:
            parsed = parse_offset_key(bytes(key))
        except RecordFormatError:
            continue
        identity = None if parsed.partition is None else partition_identity(parsed.partition)
        state.keys[bytes(key)] = identity
        if row.get("listed") and identity is not None:
            state.listed.add(identity)
    return state


def apply_current_rows(rows: Iterable[Mapping[str, Any]], changes: Iterable[CurrentRow]) -> list[dict[str, Any]]:
    """The ``source_offsets`` rows after a fold's current-table changes, as the job's merge applies them (by
    ``(offsets_topic, key)``: ``upsert`` replaces or inserts, ``delete`` removes, ``listed`` updates the flag)."""
    merged: dict[tuple[str, bytes], dict[str, Any]] = {
        (row["offsets_topic"], bytes(row["key"])): dict(row) for row in rows if row.get("key") is not None
    }
    for change in changes:
        where = (change.offsets_topic, change.key)
        if change.op == DELETE:
            merged.pop(where, None)
        elif change.op == LISTED:
            if where in merged:
                merged[where]["listed"] = change.listed
        else:
            merged[where] = {
                "connector": change.connector,
                "offsets_topic": change.offsets_topic,
                "partition": change.partition,
                "key": change.key,
                "offset": change.offset,
                "value": change.value,
                "listed": change.listed,
                "kafka_partition": change.kafka_partition,
                "kafka_offset": change.kafka_offset,
            }
    return list(merged.values())


def fold_past_rows(
    rows: Iterable[Mapping[str, Any]], records_by_topic: Mapping[str, Sequence[OffsetRecord]]
) -> list[dict[str, Any]]:
    """One connector's ``source_offsets`` rows with its records past the table's watermark folded over them, per
    offsets topic (as :func:`apply_current_rows` gives them: rows without a key are left out)."""
    by_topic: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_topic.setdefault(str(row.get("offsets_topic")), []).append(row)
    result: list[dict[str, Any]] = []
    for topic in dict.fromkeys([*by_topic, *records_by_topic]):
        current = by_topic.get(topic, [])
        records = records_by_topic.get(topic, [])
        if not records:
            result.extend(apply_current_rows(current, []))
            continue
        _state, _history, changes = fold_connector_offsets(state_from_rows(current), records)
        result.extend(apply_current_rows(current, changes))
    return result


def fold_all(records: Iterable[OffsetRecord]) -> dict[tuple[str, str], OffsetsState]:
    """Fold whole topics at once, per (offsets topic, connector): the reference the job must agree with."""
    groups: dict[tuple[str, str], list[OffsetRecord]] = {}
    for record in records:
        groups.setdefault((record.offsets_topic, record.connector), []).append(record)
    return {group: fold_connector_offsets(OffsetsState(), recs)[0] for group, recs in groups.items()}


def state_to_json(state: OffsetsState) -> str:
    """The state as one string for the stateful operator's state row (keys base64, sorted for stable output)."""
    return json.dumps(
        {
            "listed": sorted(state.listed),
            "keys": {base64.b64encode(key).decode("ascii"): identity for key, identity in sorted(state.keys.items())},
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


def state_from_json(text: str | None) -> OffsetsState:
    if not text:
        return OffsetsState()
    raw = json.loads(text)
    return OffsetsState(set(raw["listed"]), {base64.b64decode(key): identity for key, identity in raw["keys"].items()})
