"""KIP-558 active topics: fold a connector's ``status-topic-<topic>:connector-<name>`` records into its topic set.

Pure Python, no Spark: spark/active_topics.py calls :func:`fold_connector_topics` once per connector and
micro-batch from ``applyInPandasWithState``; tests and the benchmark call it directly.

Rules, as ``KafkaStatusBackingStore`` applies them:

* a topic-status value adds the topic (or replaces its task / discover timestamp);
* a tombstone removes the topic from the connector's set;
* records are applied in Kafka order. One key always lives in one partition of the status topic, so per key the
  partition offset orders the records. A record at or below the offset already applied for its key is a replay and
  is skipped, which makes the fold idempotent. To remember that offset after a removal, a removed topic stays in
  the state as an inactive entry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from connect_state.core.errors import RecordFormatError
from connect_state.formats.status import TopicStatus, TopicStatusKey, parse_status_record

ADDED = "added"
UPDATED = "updated"
REMOVED = "removed"


@dataclass(frozen=True)
class TopicRecord:
    """One parsed status-topic record about (connector, topic); ``task``/``discover_timestamp`` None = tombstone."""

    connector: str
    topic: str
    task: int | None
    discover_timestamp: int | None
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp: int

    @property
    def is_tombstone(self) -> bool:
        return self.task is None

    @classmethod
    def from_kafka(
        cls, key: bytes | None, value: bytes | None, kafka_partition: int, kafka_offset: int, kafka_timestamp: int
    ) -> TopicRecord | None:
        """The record of one raw status-topic record, or None when it is no topic status (another status kind, or a
        record Connect discards: the job quarantines those, they change no topic set)."""
        try:
            record = parse_status_record(key, value)
        except RecordFormatError:
            return None
        if not isinstance(record.key, TopicStatusKey):
            return None
        status = record.value if isinstance(record.value, TopicStatus) else None
        return cls(
            connector=record.key.connector,
            topic=record.key.topic,
            task=status.task if status else None,
            discover_timestamp=status.discover_timestamp if status else None,
            kafka_partition=kafka_partition,
            kafka_offset=kafka_offset,
            kafka_timestamp=kafka_timestamp,
        )


@dataclass(frozen=True)
class TopicEntry:
    """What the state remembers for one topic of a connector."""

    task: int | None
    discover_timestamp: int | None
    kafka_partition: int
    kafka_offset: int
    active: bool


@dataclass(frozen=True)
class TopicChange:
    """One change of a connector's active-topic set, as written to the history table."""

    connector: str
    topic: str
    change: str
    task: int | None
    discover_timestamp: int | None
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp: int


ConnectorTopics = dict[str, TopicEntry]


def _is_replay(entry: TopicEntry | None, record: TopicRecord) -> bool:
    return (
        entry is not None
        and entry.kafka_partition == record.kafka_partition
        and record.kafka_offset <= entry.kafka_offset
    )


def apply_record(state: ConnectorTopics, record: TopicRecord) -> TopicChange | None:
    """Apply one record to ``state`` in place; return the change it makes to the active set, if any."""
    entry = state.get(record.topic)
    if _is_replay(entry, record):
        return None
    was_active = entry is not None and entry.active
    state[record.topic] = TopicEntry(
        task=record.task if not record.is_tombstone else (entry.task if entry else None),
        discover_timestamp=(
            record.discover_timestamp if not record.is_tombstone else (entry.discover_timestamp if entry else None)
        ),
        kafka_partition=record.kafka_partition,
        kafka_offset=record.kafka_offset,
        active=not record.is_tombstone,
    )
    if record.is_tombstone:
        kind = REMOVED if was_active else None
    elif not was_active:
        kind = ADDED
    elif entry is not None and (entry.task, entry.discover_timestamp) != (record.task, record.discover_timestamp):
        kind = UPDATED
    else:
        kind = None
    if kind is None:
        return None
    new = state[record.topic]
    return TopicChange(
        connector=record.connector,
        topic=record.topic,
        change=kind,
        task=new.task,
        discover_timestamp=new.discover_timestamp,
        kafka_partition=record.kafka_partition,
        kafka_offset=record.kafka_offset,
        kafka_timestamp=record.kafka_timestamp,
    )


def fold_connector_topics(
    state: ConnectorTopics, records: Iterable[TopicRecord]
) -> tuple[ConnectorTopics, list[TopicChange]]:
    """Fold records (any order; sorted here by partition and offset) into a copy of ``state``."""
    new_state = dict(state)
    changes = []
    for record in sorted(records, key=lambda r: (r.kafka_partition, r.kafka_offset)):
        change = apply_record(new_state, record)
        if change is not None:
            changes.append(change)
    return new_state, changes


def active_topics(state: ConnectorTopics) -> dict[str, TopicEntry]:
    """The topics currently in the connector's active set."""
    return {topic: entry for topic, entry in state.items() if entry.active}


def state_from_rows(rows: Iterable[Mapping[str, Any]]) -> ConnectorTopics:
    """A connector's state from its ``active_topics`` table rows (its active topics, each with the status-topic
    partition and offset of the record in effect, so records the table already holds are skipped as replays).

    Topics removed before the table's version are not in it: folding records from before that version over this state
    may add such a topic back until its tombstone is folded again, never lose an active one.
    """
    state: ConnectorTopics = {}
    for row in rows:
        partition, offset = row.get("kafka_partition"), row.get("kafka_offset")
        state[row["topic"]] = TopicEntry(
            task=row.get("task"),
            discover_timestamp=row.get("discover_timestamp"),
            kafka_partition=-1 if partition is None else int(partition),
            kafka_offset=-1 if offset is None else int(offset),
            active=True,
        )
    return state


def fold_all(records: Iterable[TopicRecord]) -> dict[str, ConnectorTopics]:
    """Fold a whole topic's worth of records, all connectors at once: the reference the job must agree with."""
    by_connector: dict[str, list[TopicRecord]] = {}
    for record in records:
        by_connector.setdefault(record.connector, []).append(record)
    return {name: fold_connector_topics({}, recs)[0] for name, recs in by_connector.items()}


def state_to_json(state: ConnectorTopics) -> str:
    """Serialize the state for the stateful operator's state row (one string column keeps the schema stable)."""
    return json.dumps({topic: _entry_fields(entry) for topic, entry in sorted(state.items())}, separators=(",", ":"))


def _entry_fields(entry: TopicEntry) -> dict[str, Any]:
    """``dataclasses.asdict(entry)``, field for field in the same order, without its recursive copy."""
    return {
        "task": entry.task,
        "discover_timestamp": entry.discover_timestamp,
        "kafka_partition": entry.kafka_partition,
        "kafka_offset": entry.kafka_offset,
        "active": entry.active,
    }


def state_from_json(text: str | None) -> ConnectorTopics:
    if not text:
        return {}
    return {topic: TopicEntry(**fields) for topic, fields in json.loads(text).items()}
