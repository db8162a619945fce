"""KIP-875 sink offsets: fold a consumer group's offset commits from ``__consumer_offsets`` into its committed offsets.

Pure Python, no Spark: spark/sink_offsets.py calls :func:`fold_group_offsets` once per group and micro-batch
from ``applyInPandasWithState``; tests call it directly.

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
from collections.abc import Iterable
from dataclasses import dataclass

from connect_state.formats.consumer_offsets import OffsetCommitValue

SET = "set"
REMOVED = "removed"
UPSERT = "upsert"
DELETE = "delete"

TopicPartitionKey = tuple[str, int]
GroupOffsets = dict[TopicPartitionKey, int]
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
    offset the group does not have changes nothing).
    """
    new_state = dict(state)
    history: list[SinkOffsetChange] = []
    last: dict[TopicPartitionKey, SinkOffsetChange] = {}
    for record in sorted(records, key=lambda r: (r.kafka_partition, r.kafka_offset)):
        key = (record.topic, record.partition)
        present = key in new_state
        if record.commit is None:
            new_state.pop(key, None)
        else:
            new_state[key] = record.kafka_offset
        change = SinkOffsetChange(
            record.group_id,
            record.topic,
            record.partition,
            SET if record.commit is not None else REMOVED,
            record.commit,
            record.kafka_partition,
            record.kafka_offset,
            record.kafka_timestamp,
        )
        history.append(change)
        if record.commit is not None or present or key in last:
            last[key] = change
    current = [
        SinkOffsetChange(
            c.group_id,
            c.topic,
            c.partition,
            UPSERT if c.commit is not None else DELETE,
            c.commit,
            c.kafka_partition,
            c.kafka_offset,
            c.kafka_timestamp,
        )
        for c in last.values()
    ]
    return new_state, history, current


def committed_offsets(records: Iterable[OffsetCommitRecord]) -> dict[str, dict[TopicPartitionKey, int]]:
    """Every group's committed offsets after the whole topic: the reference the job must agree with."""
    result: dict[str, dict[TopicPartitionKey, int]] = {}
    for record in sorted(records, key=lambda r: (r.kafka_partition, r.kafka_offset)):
        group = result.setdefault(record.group_id, {})
        if record.commit is None:
            group.pop((record.topic, record.partition), None)
        else:
            group[(record.topic, record.partition)] = record.commit.offset
    return {group: offsets for group, offsets in result.items() if offsets}


def state_to_json(state: GroupOffsets) -> str:
    """The state as one string: ``[[topic, partition, record offset], ...]`` sorted."""
    return json.dumps(sorted([topic, partition, offset] for (topic, partition), offset in state.items()))


def state_from_json(text: str | None) -> GroupOffsets:
    if not text:
        return {}
    return {(topic, partition): offset for topic, partition, offset in json.loads(text)}
