"""Where a connector's offsets live: its offset stores, after Connect's ``ConnectorOffsetBackingStore``.

**Source connectors** (Kafka 4.3.1 ``Worker.offsetStoreForRegularSourceConnector`` / ``...ExactlyOnceSourceConnector``
and the task variants, ``ConnectorOffsetBackingStore``:
``connect/runtime/src/main/java/org/apache/kafka/connect/storage/ConnectorOffsetBackingStore.java``;
``docs/connect-4.3-notes.md``). A distributed worker permits connector-specific offsets topics, so a connector's
stores depend on its ``offsets.storage.topic`` (``SourceConnectorConfig.OFFSETS_TOPIC_CONFIG``; trimmed, as
``ConfigDef`` trims a STRING; a blank value is none):

* **no own topic**: ``withOnlyWorkerStore``, the worker's offsets topic (``offset.storage.topic``) alone;
* **an own topic equal to the worker's**: ``withOnlyConnectorStore`` on that topic (``sameOffsetTopicAsWorker``):
  one store, the worker's topic, read and written alone, exactly as without an own topic. *This is the one answer
  everywhere*: the API reads and writes that topic alone, cleanup tombstones it once, the offsets job subscribes to it
  once and heartbeats treat the connector like one without an own topic;
* **another own topic**: ``withConnectorAndWorkerStores``: the connector's topic is the *primary* store, the worker's
  the *secondary*.

  - Reading (``connectorPartitions``, ``get``): a connector's partitions are the union of both stores'; every value
    comes from the primary (Kafka 4.3.1's ``get`` lays the connector store's answer, ``null`` for a key it lacks, over
    the worker store's), so a value only the worker's topic has shows as ``null``.
  - Writing (``set``): without tombstones, every record to the primary, then the non-null offsets to the secondary;
    with tombstones (KAFKA-15018), first the tombstones to the secondary, then every record to the primary, then the
    non-null offsets to the secondary. A failure of the last write is only logged (:attr:`OffsetWrite.best_effort`);
    the others fail the request.

``sameOffsetTopicAsWorker`` (read in the 4.3.1 bytecode) also compares the worker's bootstrap servers with the
connector's producer's (``producer.override.bootstrap.servers``): the same name on another cluster is another topic.
connect-state reads one Kafka cluster, so only the names are compared here.

**Sink connectors** keep their offsets as the committed offsets of a consumer group
(:func:`connector_consumer_group`): ``consumer.override.group.id`` when the config sets it, else ``connect-<name>``
(``SinkUtils.consumerGroupId``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from connect_state.core.errors import RecordFormatError
from connect_state.formats import javalang
from connect_state.formats.offsets import map_identity, offset_key_bytes, parse_offset_key, parse_offset_value

__all__ = [
    "CONSUMER_GROUP_OVERRIDE",
    "OFFSETS_TOPIC_CONFIG",
    "ConnectorOffsetStores",
    "OffsetWrite",
    "connector_consumer_group",
    "connector_offset_stores",
    "connector_offsets_topic",
    "listed_partitions",
    "offsets_topics",
    "sink_consumer_group",
    "source_connector_offsets",
]

log = logging.getLogger(__name__)

#: ``SourceConnectorConfig.OFFSETS_TOPIC_CONFIG``: a source connector's own offsets topic.
OFFSETS_TOPIC_CONFIG = "offsets.storage.topic"
#: ``consumer.override.group.id``: a sink connector's consumer group when set (``Worker.baseConsumerConfigs``).
CONSUMER_GROUP_OVERRIDE = "consumer.override.group.id"

#: An offsets-topic record: Connect's key bytes and the value bytes (None: a tombstone).
OffsetRecord = tuple[bytes, bytes | None]


def connector_offsets_topic(config: Mapping[str, object] | None) -> str | None:
    """The source connector's own offsets topic (``offsets.storage.topic``, trimmed; a blank value is none), or None.

    Whether it is another topic than the worker's is :func:`connector_offset_stores`' question.
    """
    topic = (config or {}).get(OFFSETS_TOPIC_CONFIG)
    return topic.strip() if isinstance(topic, str) and topic.strip() else None


class OffsetWrite(NamedTuple):
    """One write of ``ConnectorOffsetBackingStore.set``: records to one topic; ``best_effort`` when a failure is only
    logged (the last write to the secondary store)."""

    topic: str
    records: list[OffsetRecord]
    best_effort: bool = False


@dataclass(frozen=True)
class ConnectorOffsetStores:
    """A source connector's offset stores: the ``primary_topic`` its values are read from and every record is
    written to (``ConnectorOffsetBackingStore.primaryOffsetsTopic``), and the worker's topic as ``secondary_topic``
    when the connector has its own, other topic (None otherwise)."""

    primary_topic: str
    secondary_topic: str | None = None

    @property
    def topics(self) -> tuple[str, ...]:
        """Every topic of the connector's offsets (its partitions are listed from all of them), in the order ``set``
        writes tombstones: the worker's first, then the connector's."""
        if self.secondary_topic is None:
            return (self.primary_topic,)
        return (self.secondary_topic, self.primary_topic)

    @property
    def value_topic(self) -> str:
        """The topic ``get`` takes every value from: the primary."""
        return self.primary_topic

    def writes(self, records: Sequence[OffsetRecord]) -> list[OffsetWrite]:
        """``set``: the writes of ``records``, in order (see the module docstring); none for no records."""
        if not records:
            return []
        records = list(records)
        if self.secondary_topic is None:
            return [OffsetWrite(self.primary_topic, records)]
        tombstones: list[OffsetRecord] = [(key, value) for key, value in records if value is None]
        regular: list[OffsetRecord] = [(key, value) for key, value in records if value is not None]
        writes = [OffsetWrite(self.secondary_topic, tombstones)] if tombstones else []
        writes.append(OffsetWrite(self.primary_topic, records))
        if regular:
            writes.append(OffsetWrite(self.secondary_topic, regular, best_effort=True))
        return writes


def connector_offset_stores(worker_topic: str, config: Mapping[str, object] | None) -> ConnectorOffsetStores:
    """The offset stores of a source connector with ``config`` on a worker whose offsets topic is ``worker_topic``
    (``Worker.offsetStoreForRegularSourceConnector``): the worker's topic alone without an own topic *or with an own
    topic equal to it*; else the connector's topic, then the worker's."""
    own = connector_offsets_topic(config)
    if own is None or own == worker_topic:
        return ConnectorOffsetStores(worker_topic)
    return ConnectorOffsetStores(own, worker_topic)


def offsets_topics(worker_topic: str, configs: Iterable[Mapping[str, object] | None]) -> set[str]:
    """Every offsets topic of a worker and its connectors: the worker's, and each config's own topic."""
    topics = {worker_topic}
    for config in configs:
        topics.update(connector_offset_stores(worker_topic, config).topics)
    return topics


def sink_consumer_group(connector: str) -> str:
    """``SinkUtils.consumerGroupId``: ``connect-<name>`` (unless ``consumer.override.group.id`` is set)."""
    return f"connect-{connector}"


def connector_consumer_group(connector: str, config: Mapping[str, object] | None) -> str:
    """A sink connector's consumer group: ``consumer.override.group.id`` when the config sets it (Connect's default
    client-override policy ``All`` allows it), else :func:`sink_consumer_group`."""
    override = (config or {}).get(CONSUMER_GROUP_OVERRIDE)
    return override if isinstance(override, str) else sink_consumer_group(connector)


def listed_partitions(name: str, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, object]]:
    """The connector's ``connectorPartitions``: the partition maps of its listed rows, deduplicated by Java
    ``Map.equals``, sorted by their key bytes."""
    return [partition for _key, partition in _listed_partition_keys(name, rows)]


def _listed_partition_keys(name: str, rows: Sequence[Mapping[str, Any]]) -> list[tuple[bytes, dict[str, object]]]:
    """:func:`listed_partitions` with each partition's key bytes (:func:`offset_key_bytes`, computed once)."""
    found: dict[object, tuple[bytes, dict[str, object]]] = {}
    for row in rows:
        if not row.get("listed") or row.get("key") is None:
            continue
        listed = _listed_key(bytes(row["key"]))
        if listed is None or listed.connector != name:
            continue
        found.setdefault(listed.identity, (listed.key_bytes, dict(listed.partition)))
    return sorted(found.values(), key=_first)


class _ListedKey(NamedTuple):
    connector: str
    identity: object
    key_bytes: bytes
    partition: dict[str, object]


@lru_cache(maxsize=65536)
def _listed_key(raw: bytes) -> _ListedKey | None:
    """What :func:`listed_partitions` needs of a key, once per distinct key bytes (parsing the key and writing its
    canonical bytes again is most of a ``GET /offsets``' cost): None for a key Connect ignores or a null partition.
    The partition map is shared: callers get copies."""
    try:
        key = parse_offset_key(raw)
    except RecordFormatError:
        return None
    if key.partition is None:
        return None
    return _ListedKey(
        key.connector, map_identity(key.partition), offset_key_bytes(key.connector, key.partition), key.partition
    )


def _first(pair: tuple[bytes, dict[str, object]]) -> bytes:
    return pair[0]


def source_connector_offsets(
    name: str, rows: Sequence[Mapping[str, Any]], stores: ConnectorOffsetStores
) -> list[dict[str, object]]:
    """``Worker.sourceConnectorOffsets`` over ``source_offsets`` rows of the connector (any topic): its partitions
    listed in any of its stores, each value from the store ``get`` reads. A value Connect cannot read is left out and
    logged, as Connect logs it (:func:`log_unreadable_offsets`)."""
    entries, unreadable = source_connector_offsets_checked(name, rows, stores)
    log_unreadable_offsets(name, unreadable)
    return entries


UnreadableOffset = tuple[dict[str, object], str]
"""A listed partition whose offset value Connect cannot read, and why."""


def source_connector_offsets_checked(
    name: str, rows: Sequence[Mapping[str, Any]], stores: ConnectorOffsetStores
) -> tuple[list[dict[str, object]], list[UnreadableOffset]]:
    """:func:`source_connector_offsets` without the logging: the entries, and the partitions left out with why."""
    in_topics = [row for row in rows if row.get("offsets_topic") in stores.topics]
    values = {
        bytes(row["key"]): (bytes(row["value"]) if row.get("value") is not None else None)
        for row in in_topics
        if row.get("offsets_topic") == stores.value_topic and row.get("key") is not None
    }
    entries: list[dict[str, object]] = []
    unreadable: list[UnreadableOffset] = []
    for key, partition in _listed_partition_keys(name, in_topics):
        raw = values.get(key)
        try:
            offset = parse_offset_value(raw)
        except RecordFormatError as err:
            unreadable.append((partition, str(err)))
            continue
        entries.append(
            {
                "partition": javalang.java_hashmap_ordered(partition),
                "offset": None if offset is None else javalang.java_hashmap_ordered(offset),
            }
        )
    return entries, unreadable


def log_unreadable_offsets(name: str, unreadable: Sequence[UnreadableOffset]) -> None:
    """Connect's ERROR for each offset value it cannot read (``OffsetStorageReaderImpl.offsets``)."""
    for partition, reason in unreadable:
        log.error("CRITICAL: Failed to deserialize offset data of connector %s (%s): %s", name, partition, reason)
