"""KIP-875 sink offsets: fold a consumer group's offset commits from ``__consumer_offsets`` into its committed offsets.

Pure Python, no Spark: spark/sink_offsets.py calls :func:`fold_group_columns` once per group and micro-batch
from ``applyInPandasWithState``, on the batch's columns; :func:`fold_group_offsets` is the same fold over records.

Rules, as the group coordinator replays the topic (``OffsetMetadataManager.replay``):

* an offset commit sets the group's committed offset of (topic, partition);
* a tombstone on an offset-commit key removes it (``DELETE /offsets`` of a sink connector deletes the group's
  offsets, ``deleteGroups`` tombstones every offset of the group, expired offsets are tombstoned too);
* all records of a group live in one partition of ``__consumer_offsets``, so offset order is the coordinator's
  order; for a key, the record with the highest offset wins (``recordOffset``: a transactional commit only applies
  if it is newer than the current one; the job reads with ``read_committed``, so aborted commits never arrive).

``GET /connectors/<name>/offsets`` of a sink connector lists the committed offsets of its group
(``SinkUtils.consumerGroupOffsetsToConnectorOffsets``); every group is kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from connect_state.core.errors import RecordFormatError
from connect_state.core.partitions import Partition
from connect_state.formats.consumer_offsets import OffsetCommitKey, OffsetCommitValue, parse_consumer_offsets_record

SET = "set"
REMOVED = "removed"
UPSERT = "upsert"
DELETE = "delete"

GroupOffsets = dict[Partition, int]
"""The state of one group: (topic, partition) -> the ``__consumer_offsets`` offset of its current commit."""


@dataclass(frozen=True)
class OffsetCommitRecord:
    """One offset-commit record of ``group_id`` (``commit`` ``None`` for a tombstone)."""

    group_id: str
    topic: str
    partition: int
    commit: OffsetCommitValue | None
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp: int

    @classmethod
    def from_kafka(
        cls, key: bytes | None, value: bytes | None, kafka_partition: int, kafka_offset: int, kafka_timestamp: int
    ) -> OffsetCommitRecord | None:
        """The record of one raw ``__consumer_offsets`` record, or None when it is no offset commit (another
        coordinator record, or one the coordinator's loader skips: the job quarantines those)."""
        try:
            record = parse_consumer_offsets_record(key, value)
        except RecordFormatError:
            return None
        if not isinstance(record.key, OffsetCommitKey):
            return None
        return cls(
            record.key.group,
            record.key.topic,
            record.key.partition,
            record.value,
            kafka_partition,
            kafka_offset,
            kafka_timestamp,
        )


@dataclass(frozen=True)
class SinkOffsetChange:
    """A history row, or (``op`` ``upsert``/``delete``) what a batch does to one current row."""

    group_id: str
    topic: str
    partition: int
    change: str
    commit: OffsetCommitValue | None
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp: int


def fold_group_offsets(
    state: GroupOffsets, records: Iterable[OffsetCommitRecord]
) -> tuple[GroupOffsets, list[SinkOffsetChange], list[SinkOffsetChange]]:
    """Fold one batch of a group's records (any order; applied by offset) into a copy of ``state``.

    Returns the new state, the history (one ``set``/``removed`` per record applied) and the current-table rows
    (one ``upsert`` or ``delete`` per (topic, partition) whose committed offset the batch changed; a tombstone for an
    offset the group does not have changes nothing). The rules are :func:`fold_group_columns`'.
    """
    ordered = sorted(records, key=lambda r: (r.kafka_partition, r.kafka_offset))
    new_state, changed = fold_group_columns(
        state,
        [(r.topic, r.partition) for r in ordered],
        [r.commit is not None for r in ordered],
        [r.kafka_offset for r in ordered],
    )
    history = [_change(r, SET if r.commit is not None else REMOVED) for r in ordered]
    current = [_change(ordered[index], op) for index, op in changed]
    return new_state, history, current


def fold_group_columns(
    state: GroupOffsets,
    keys: Sequence[Partition],
    commits: Sequence[bool],
    kafka_offsets: Sequence[int],
) -> tuple[GroupOffsets, list[tuple[int, str]]]:
    """The fold over a batch given by column, already in (Kafka partition, offset) order: each record's (topic,
    partition), whether it is a commit (else a tombstone), and its ``__consumer_offsets`` offset.

    Returns the new state (a copy) and, for each (topic, partition) whose committed offset the batch changed, in the
    order the batch first changed them, the index of its last record and ``upsert`` or ``delete``. A key the batch
    only tombstones, absent from ``state``, changes nothing.
    """
    new_state = dict(state)
    last: dict[Partition, int] = {}
    for index, (key, commit, kafka_offset) in enumerate(zip(keys, commits, kafka_offsets, strict=True)):
        present = key in new_state
        if commit:
            new_state[key] = kafka_offset
        else:
            new_state.pop(key, None)
        if commit or present or key in last:
            last[key] = index
    return new_state, [(index, UPSERT if commits[index] else DELETE) for index in last.values()]


def _change(record: OffsetCommitRecord, change: str) -> SinkOffsetChange:
    return SinkOffsetChange(
        record.group_id,
        record.topic,
        record.partition,
        change,
        record.commit,
        record.kafka_partition,
        record.kafka_offset,
        record.kafka_timestamp,
    )


def committed_offsets(records: Iterable[OffsetCommitRecord]) -> dict[str, dict[Partition, int]]:
    """Every group's committed offsets after the whole topic: the reference the job must agree with."""
    result: dict[str, dict[Partition, int]] = {}
    for record in sorted(records, key=lambda r: (r.kafka_partition, r.kafka_offset)):
        group = result.setdefault(record.group_id, {})
        if record.commit is None:
            group.pop((record.topic, record.partition), None)
        else:
            group[(record.topic, record.partition)] = record.commit.offset
    return {group: offsets for group, offsets in result.items() if offsets}


def fold_past_rows(rows: Iterable[Mapping[str, Any]], records: Iterable[OffsetCommitRecord]) -> list[dict[str, Any]]:
    """One group's ``sink_offsets`` rows (``topic``, ``partition``, ``offset``: its committed offsets as the table has
    them) with ``records`` of that group folded over them by the job's rules (:func:`fold_group_columns`); the rows
    that result, by (topic, partition).

    The API answers ``GET /offsets`` of a sink connector with this over the records its follower read past the
    table's watermark (:mod:`connect_state.api.live`). Records the rows already reflect may be among them: folding
    a key's last record again leaves it as it is."""
    offsets = {(row["topic"], row["partition"]): row["offset"] for row in rows}
    ordered = sorted(records, key=lambda r: (r.kafka_partition, r.kafka_offset))
    keys = [(r.topic, r.partition) for r in ordered]
    _state, changed = fold_group_columns(
        dict.fromkeys(offsets, -1), keys, [r.commit is not None for r in ordered], [r.kafka_offset for r in ordered]
    )
    for index, op in changed:
        commit = ordered[index].commit
        if op == UPSERT and commit is not None:
            offsets[keys[index]] = commit.offset
        else:
            offsets.pop(keys[index], None)
    return [
        {"topic": topic, "partition": partition, "offset": offsets[(topic, partition)]}
        for topic, partition in sorted(offsets)
    ]


def state_to_json(state: GroupOffsets) -> str:
    """The state as one string: ``[[topic, partition, record offset], ...]`` sorted."""
    return json.dumps(sorted([topic, partition, offset] for (topic, partition), offset in state.items()))


def state_from_json(text: str | None) -> GroupOffsets:
    if not text:
        return {}
    return {(topic, partition): offset for topic, partition, offset in json.loads(text)}
