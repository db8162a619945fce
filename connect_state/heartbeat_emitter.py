"""Sending the heartbeats that are due: provider call, heartbeat topic, offsets topic, one history row per record.

What ``AbstractWorkerSourceTask`` would do with the records of KIP-910's ``produceHeartbeatRecords``, done from
outside the worker (record format: :mod:`connect_state.heartbeats`):

1. call the provider registered for the connector's class (the default one produces nothing);
2. send each record to the connector's heartbeat topic (created if missing) with the framework headers, and wait for
   ``acks=all``;
3. for records that carry a source offset, commit it like ``OffsetStorageWriter`` once the records are acknowledged:
   the exact key bytes ``[connector, partition]``, the value in Java ``HashMap`` order, the partition Java's producer
   picks (:class:`~connect_state.kafka_writer.InternalTopicWriter`), the last offset per source partition;
4. return one :class:`EmittedHeartbeat` per record (``produced``), or one saying ``no_records`` or ``failed`` (the
   provider raised or returned something invalid, or Kafka did not acknowledge): a failing heartbeat never stops
   the others; the next one is tried one interval later.

Before 1., the offsets topic is read from the record the fold last applied for the partition to its end
(:class:`OffsetsTopicReader`): the fold's view lags by up to a micro-batch, and a task that committed a new offset
meanwhile is not idle; a provider committing the offset it was given would even move the task's offset back. Such a
heartbeat is ``skipped``. (A commit landing between this check and ours can still be overwritten; intervals of
minutes make that window rare, and the task's next commit corrects it.)

No Spark here: the heartbeats job calls :meth:`HeartbeatEmitter.emit` on the driver (``foreachBatch`` and the
catch-up sweep); unit tests use fake writers.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kafka import KafkaConsumer, TopicPartition
from kafka import errors as kafka_errors

from connect_state.errors import KafkaWriteError, RecordFormatError
from connect_state.folds.heartbeats import DuePartition
from connect_state.formats.offsets import (
    offset_key_bytes,
    parse_offset_key,
    parse_offset_value,
    serialize_offset_value,
)
from connect_state.heartbeats import (
    HeartbeatProvider,
    HeartbeatRecord,
    HeartbeatRecordError,
    provider_for,
    record_headers,
    serialize_payload,
)
from connect_state.kafka_writer import InternalTopicWriter, RecordPosition, describe_error, kafka_python_config
from connect_state.partitioner import partition_for_key
from connect_state.settings import Settings

log = logging.getLogger(__name__)

PRODUCED = "produced"
NO_RECORDS = "no_records"
FAILED = "failed"
SKIPPED = "skipped"

HeartbeatMessage = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]
"""``(key, value, headers)`` as sent to the heartbeat topic."""


class HeartbeatSender(Protocol):
    """What the emitter needs to write heartbeat records (see :class:`HeartbeatTopicWriter`)."""

    def ensure_topic(self, topic: str) -> None: ...

    def send_messages(self, topic: str, messages: Sequence[HeartbeatMessage]) -> list[RecordPosition]: ...


class OffsetSender(Protocol):
    """What the emitter needs to commit offsets (see :class:`~connect_state.kafka_writer.InternalTopicWriter`)."""

    def send(self, topic: str, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int | None = None) -> Any: ...


@dataclass(frozen=True)
class EmittedHeartbeat:
    """One row of the ``heartbeats`` table (timestamps epoch ms; JSON as text)."""

    connector: str
    partition: str
    source_key: bytes
    heartbeat_topic: str
    record_index: int | None
    record_key: bytes | None
    record_value: bytes | None
    record_partition: int | None
    record_offset: int | None
    committed_offset: str | None
    outcome: str
    error: str | None
    idle_ms: int
    heartbeat_interval_ms: int
    due_at: int
    emitted_at: int

    def row(self) -> dict[str, object]:
        return dict(self.__dict__)


class HeartbeatTopicWriter(InternalTopicWriter):
    """An :class:`InternalTopicWriter` that also creates heartbeat topics and sends records with headers and null
    keys (keyed records still go where Java's producer puts them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ensured: set[str] = set()

    def ensure_topic(self, topic: str) -> None:
        """Create ``topic`` with the broker's default partitions and replication factor unless it exists."""
        if topic in self._ensured:
            return
        admin = self._admin_client()
        with self._metadata_lock:
            try:
                admin.create_topics({topic: {}}, timeout_ms=self.default_timeout_ms, wait_for_metadata=True)
                log.info("created heartbeat topic %s", topic)
            except kafka_errors.TopicAlreadyExistsError:
                pass
            except kafka_errors.KafkaError as err:
                raise KafkaWriteError(f"cannot create heartbeat topic {topic!r}: {describe_error(err)}") from err
        self._ensured.add(topic)

    def send_messages(self, topic: str, messages: Sequence[HeartbeatMessage]) -> list[RecordPosition]:
        """Send ``messages`` in order and wait for every acknowledgement (``api.kafka.write.timeout.ms``)."""
        if not messages:
            return []
        deadline = time.monotonic() + self.default_timeout_ms / 1000
        count = self.partition_count(topic)
        producer = self._producer_client()
        try:
            futures = [
                producer.send(
                    topic,
                    key=key,
                    value=value,
                    headers=headers,
                    partition=partition_for_key(key, count) if key is not None else None,
                )
                for key, value, headers in messages
            ]
            producer.flush(timeout=max(deadline - time.monotonic(), 0))
            positions = []
            for future in futures:
                metadata = future.get(timeout=max(deadline - time.monotonic(), 0))
                positions.append(RecordPosition(metadata.topic, metadata.partition, metadata.offset))
        except kafka_errors.KafkaError as err:
            raise KafkaWriteError(f"write to heartbeat topic {topic!r} failed: {describe_error(err)}") from err
        return positions


class OffsetReader(Protocol):
    """What the emitter needs to check that a partition's offset has not moved (see :class:`OffsetsTopicReader`)."""

    def latest_offset(self, key: bytes, kafka_partition: int, after_offset: int) -> tuple[bool, bytes | None]: ...


class OffsetsTopicReader:
    """Reads the offsets-topic records of one key written after a known record (the fold's view may lag by a
    micro-batch): ``latest_offset`` -> ``(found, value)``, comparing keys as Connect looks them up."""

    def __init__(self, settings: Settings, timeout_ms: int | None = None) -> None:
        self.settings = settings
        self.topic = settings.offset_storage_topic
        self.timeout_ms = settings.api_kafka_write_timeout_ms if timeout_ms is None else timeout_ms
        self._consumer: KafkaConsumer | None = None

    def _client(self) -> KafkaConsumer:
        if self._consumer is None:
            config = kafka_python_config(self.settings.kafka_client_config(), KafkaConsumer.DEFAULT_CONFIG, warn=False)
            config.update(
                client_id="connect-state-heartbeat-offsets-reader",
                group_id=None,
                enable_auto_commit=False,
                isolation_level="read_committed",
            )
            self._consumer = KafkaConsumer(**config)
        return self._consumer

    def latest_offset(self, key: bytes, kafka_partition: int, after_offset: int) -> tuple[bool, bytes | None]:
        consumer = self._client()
        partition = TopicPartition(self.topic, kafka_partition)
        consumer.assign([partition])
        end = consumer.end_offsets([partition])[partition]
        found, latest = False, None
        if after_offset + 1 >= end:
            return found, latest
        consumer.seek(partition, after_offset + 1)
        deadline = time.monotonic() + self.timeout_ms / 1000
        while consumer.position(partition) < end:
            if time.monotonic() > deadline:
                raise KafkaWriteError(f"timed out reading {self.topic}-{kafka_partition} up to offset {end}")
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    if record.offset < end and _lookup_key(record.key) == key:
                        found, latest = True, record.value
        return found, latest

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def _lookup_key(raw: bytes | None) -> bytes | None:
    """The bytes Connect looks a raw offsets key up with (None for keys it ignores)."""
    try:
        parsed = parse_offset_key(raw)
    except RecordFormatError:
        return None
    return offset_key_bytes(parsed.connector, parsed.partition) if parsed.partition is not None else None


def _offset_moved(due: DuePartition, found: bool, value: bytes | None) -> bool:
    if not found:
        return False
    try:
        latest = parse_offset_value(value)
    except RecordFormatError:
        return True
    return latest is None or serialize_offset_value(latest) != serialize_offset_value(due.offset)


class HeartbeatEmitter:
    """Sends due heartbeats with the providers by connector class (see the module docstring)."""

    def __init__(
        self,
        providers: Mapping[str, HeartbeatProvider],
        heartbeat_sender: HeartbeatSender,
        offset_sender: OffsetSender,
        offsets_topic: str,
        offset_reader: OffsetReader | None = None,
    ) -> None:
        self.providers = providers
        self.heartbeat_sender = heartbeat_sender
        self.offset_sender = offset_sender
        self.offsets_topic = offsets_topic
        self.offset_reader = offset_reader

    def emit(self, due: DuePartition, now: int) -> list[EmittedHeartbeat]:
        """Send the heartbeat of one due partition; never raises for the provider's or Kafka's failures."""
        partition_json = json.dumps(due.partition, separators=(",", ":"))

        def result(outcome: str, error: str | None = None, **record: Any) -> EmittedHeartbeat:
            fields: dict[str, Any] = {
                "record_index": None,
                "record_key": None,
                "record_value": None,
                "record_partition": None,
                "record_offset": None,
                "committed_offset": None,
                **record,
            }
            return EmittedHeartbeat(
                due.connector, partition_json, due.key, due.records_topic, outcome=outcome, error=error,
                idle_ms=due.idle_ms, heartbeat_interval_ms=due.interval_ms, due_at=due.due_at, emitted_at=now,
                **fields,
            )  # fmt: skip

        if self.offset_reader is not None and due.kafka_partition is not None and due.kafka_offset is not None:
            try:
                found, value = self.offset_reader.latest_offset(due.key, due.kafka_partition, due.kafka_offset)
            except (KafkaWriteError, kafka_errors.KafkaError) as err:
                return [result(FAILED, f"cannot check the latest offset: {describe_error(err)}")]
            if _offset_moved(due, found, value):
                # The task committed since the fold's view: the partition is not idle, and a provider committing the
                # offset it was given would move it back.
                return [result(SKIPPED, "the offset moved since it was read")]
        provider = provider_for(self.providers, due.connector_class)
        try:
            records = provider.produce_heartbeat_records(due.connector, due.config, due.partition, due.offset)
            records = self._checked(records)
        except Exception as err:  # a provider is third-party code: record its failure, keep going
            log.warning("heartbeat provider for %s failed on %s: %s", due.connector, partition_json, err)
            return [result(FAILED, f"{type(err).__name__}: {err}")]
        if not records:
            return [result(NO_RECORDS)]
        messages = [
            (serialize_payload(r.key), serialize_payload(r.value), record_headers(due.connector, due.partition, r))
            for r in records
        ]
        try:
            self.heartbeat_sender.ensure_topic(due.records_topic)
            positions = self.heartbeat_sender.send_messages(due.records_topic, messages)
        except KafkaWriteError as err:
            log.warning("heartbeat of %s %s not sent: %s", due.connector, partition_json, err)
            return [result(FAILED, str(err))]
        commits: dict[bytes, bytes | None] = {}
        for record in records:
            if record.source_offset is not None:
                partition = record.source_partition if record.source_partition is not None else due.partition
                commits[offset_key_bytes(due.connector, partition)] = serialize_offset_value(record.source_offset)
        commit_error = None
        if commits:
            try:
                self.offset_sender.send(self.offsets_topic, list(commits.items()))
            except KafkaWriteError as err:
                log.warning("offsets of the heartbeat of %s %s not committed: %s", due.connector, partition_json, err)
                commit_error = f"offset not committed: {err}"
        rows = []
        for index, (record, (key, value, _headers), position) in enumerate(
            zip(records, messages, positions, strict=True)
        ):
            committed = None
            if record.source_offset is not None and commit_error is None:
                committed = json.dumps(dict(record.source_offset), separators=(",", ":"))
            rows.append(
                result(
                    FAILED if commit_error and record.source_offset is not None else PRODUCED,
                    commit_error if record.source_offset is not None else None,
                    record_index=index,
                    record_key=key,
                    record_value=value,
                    record_partition=position.partition,
                    record_offset=position.offset,
                    committed_offset=committed,
                )
            )
        return rows

    @staticmethod
    def _checked(records: object) -> list[HeartbeatRecord]:
        if records is None:
            return []
        if not isinstance(records, list | tuple):
            raise HeartbeatRecordError(
                f"a provider must return a list of HeartbeatRecord, got {type(records).__name__}"
            )
        for record in records:
            if not isinstance(record, HeartbeatRecord):
                raise HeartbeatRecordError(f"a provider must return HeartbeatRecord objects, got {record!r}")
            record.validate()
        return list(records)
