"""Sending the heartbeats that are due: provider call, heartbeat topic, offsets topic, one history row per record.

What ``AbstractWorkerSourceTask`` would do with KIP-910's offset updates and heartbeat records, done from outside the
worker (provider forms and record format: :mod:`connect_state.heartbeats.provider`), after the API's guards
(:class:`~connect_state.security.guards.Guards`: the heartbeat topic allowed, the connector's offsets stores ones the
API may write; else ``failed``, nothing sent):

0. a provider with the offsets-update form is asked for the offsets to commit given the partition's last one (none
   for a timer-mode connector without partitions); they are committed to the connector's stores in Connect's write
   order (:meth:`HeartbeatEmitter._commit`) and recorded ``offsets_committed``, one row per partition; nothing is
   produced. A provider with both forms goes on with 1.;
1. call the provider registered for the connector's class (the default one produces nothing); each provider call has
   the deadline ``heartbeat.provider.timeout.ms`` (:mod:`connect_state.core.deadlines`): past it the turn is skipped,
   recorded ``timed_out`` with the reason;
2. send each record to the connector's heartbeat topic (created if missing only with ``heartbeat.topics.create``)
   with the framework headers, and wait for
   ``acks=all``;
3. for records that carry a source offset, commit it like ``OffsetStorageWriter`` once the records are acknowledged:
   the exact key bytes ``[connector, partition]``, the value in Java ``HashMap`` order, the partition Java's producer
   picks (:class:`~connect_state.kafka.InternalTopicWriter`), the last offset per source partition, to the
   connector's stores (its own ``offsets.storage.topic``, then the worker's);
4. return one :class:`EmittedHeartbeat` per record (``produced``), or one saying ``no_records`` or ``failed`` (the
   provider raised or returned something invalid, or Kafka did not acknowledge): a failing heartbeat never stops
   the others; the next one is tried one interval later.

Before 1., the offsets topic is read from the record the fold last applied for the partition to its end
(:class:`~connect_state.kafka.OffsetsTopicReader`): the fold's view lags by up to a micro-batch, and a task that
committed a new offset meanwhile is not idle; a provider committing the offset it was given would even move the
task's offset back. Such a heartbeat is ``skipped``. (A commit landing between this check and ours can still be
overwritten; intervals of minutes make that window rare, and the task's next commit corrects it.)

No Spark here: the heartbeats job calls :meth:`HeartbeatEmitter.emit` on the driver (its timer, when heartbeats
are due); unit tests use fake writers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from kafka import errors as kafka_errors

from connect_state.connect.offset_stores import connector_offset_stores
from connect_state.core.deadlines import DeadlineRunner, PluginTimeout
from connect_state.core.errors import KafkaWriteError, RecordFormatError, describe_error
from connect_state.formats.offsets import (
    offset_key_bytes,
    parse_offset_value,
    serialize_offset_value,
)
from connect_state.heartbeats.fold import DuePartition
from connect_state.heartbeats.provider import (
    HeartbeatProvider,
    HeartbeatRecord,
    HeartbeatRecordError,
    as_provider,
    checked_offsets,
    implements_heartbeat_records,
    implements_update_offsets,
    provider_for,
    provider_name,
    record_headers,
    serialize_payload,
)
from connect_state.kafka import RecordPosition
from connect_state.security.guards import GuardRefusal, Guards

log = logging.getLogger("connect_state.heartbeat_emitter")
T = TypeVar("T")


class HeartbeatOutcome(StrEnum):
    """The ``outcome`` of a ``heartbeats`` row: a record sent (and its offset committed), the provider gave no record,
    something failed (the provider, Kafka, the offset commit), or not sent (the offset moved since it was read)."""

    PRODUCED = "produced"
    NO_RECORDS = "no_records"
    FAILED = "failed"
    SKIPPED = "skipped"
    #: offsets-update form: an offset committed without any record produced
    OFFSETS_COMMITTED = "offsets_committed"
    #: the provider did not return by ``heartbeat.provider.timeout.ms`` (or an earlier call of it that did not still
    #: runs): its turn is skipped, nothing sent or committed, the reason in ``error``
    TIMED_OUT = "timed_out"


HeartbeatMessage = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]
"""``(key, value, headers)`` as sent to the heartbeat topic."""


class HeartbeatSender(Protocol):
    """What the emitter needs to write heartbeat records (see :class:`~connect_state.kafka.InternalTopicWriter`)."""

    def ensure_topic(self, topic: str) -> None: ...

    def send_messages(self, topic: str, messages: Sequence[HeartbeatMessage]) -> list[RecordPosition]: ...


class OffsetSender(Protocol):
    """What the emitter needs to commit offsets (see :class:`~connect_state.kafka.InternalTopicWriter`)."""

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
    outcome: HeartbeatOutcome
    error: str | None
    idle_ms: int
    heartbeat_interval_ms: int
    due_at: int
    emitted_at: int


class OffsetReader(Protocol):
    """What the emitter needs to check that a partition's offset has not moved (see
    :class:`~connect_state.kafka.OffsetsTopicReader`)."""

    def latest_offset(self, key: bytes, kafka_partition: int, after_offset: int) -> tuple[bool, bytes | None]: ...


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
        providers: Mapping[str, object],
        heartbeat_sender: HeartbeatSender,
        offset_sender: OffsetSender,
        offsets_topic: str,
        offset_reader: OffsetReader | None = None,
        *,
        guards: Guards,
        provider_timeout_ms: int = 10_000,
    ) -> None:
        # the API's checks of the names a connector's config steers us to (connect_state.security.guards)
        self.guards = guards
        # third-party code: each call with a deadline (connect_state.core.deadlines)
        self.deadlines = DeadlineRunner(provider_timeout_ms, "heartbeat.provider.timeout.ms")
        # any plugin shape (a provider, a duck-typed object, a function), as loaded from the settings
        self.providers = {connector_class: as_provider(plugin) for connector_class, plugin in providers.items()}
        self.heartbeat_sender = heartbeat_sender
        self.offset_sender = offset_sender
        self.offsets_topic = offsets_topic
        self.offset_reader = offset_reader

    def emit(self, due: DuePartition, now: int) -> list[EmittedHeartbeat]:
        """Send the heartbeat of one due partition; never raises for the provider's or Kafka's failures."""
        partition_json = json.dumps(due.partition, separators=(",", ":"))

        def result(outcome: HeartbeatOutcome, error: str | None = None, **record: Any) -> EmittedHeartbeat:
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

        try:
            self.guards.heartbeat_topic(due.records_topic)
            self.guards.offsets_stores(connector_offset_stores(self.offsets_topic, due.config))
        except GuardRefusal as err:
            log.warning("heartbeat of %s %s refused: %s", due.connector, partition_json, err)
            return [result(HeartbeatOutcome.FAILED, str(err))]
        if self.offset_reader is not None and due.kafka_partition is not None and due.kafka_offset is not None:
            try:
                found, value = self.offset_reader.latest_offset(due.key, due.kafka_partition, due.kafka_offset)
            except (KafkaWriteError, kafka_errors.KafkaError) as err:
                return [result(HeartbeatOutcome.FAILED, f"cannot check the latest offset: {describe_error(err)}")]
            if _offset_moved(due, found, value):
                # The task committed since the fold's view: the partition is not idle, and a provider committing the
                # offset it was given would move it back.
                return [result(HeartbeatOutcome.SKIPPED, "the offset moved since it was read")]
        provider = provider_for(self.providers, due.connector_class)
        rows: list[EmittedHeartbeat] = []
        if implements_update_offsets(provider):
            rows.extend(self._update_offsets(provider, due, result))
            if not implements_heartbeat_records(provider):
                return rows
        if not due.partition:
            return rows or [result(HeartbeatOutcome.NO_RECORDS)]  # no partition yet: nothing to ask for records
        try:
            records = self._checked(
                self._call(
                    provider,
                    lambda: provider.produce_heartbeat_records(due.connector, due.config, due.partition, due.offset),
                )
            )
        except PluginTimeout as err:
            log.warning("heartbeat of %s %s skipped: %s", due.connector, partition_json, err)
            return [*rows, result(HeartbeatOutcome.TIMED_OUT, str(err))]
        except Exception as err:  # a provider is third-party code: record its failure, keep going
            log.warning("heartbeat provider for %s failed on %s: %s", due.connector, partition_json, err)
            return [*rows, result(HeartbeatOutcome.FAILED, f"{type(err).__name__}: {err}")]
        if not records:
            return rows or [result(HeartbeatOutcome.NO_RECORDS)]
        messages = [
            (serialize_payload(r.key), serialize_payload(r.value), record_headers(due.connector, due.partition, r))
            for r in records
        ]
        try:
            if self.guards.create_heartbeat_topics:
                self.heartbeat_sender.ensure_topic(due.records_topic)
            positions = self.heartbeat_sender.send_messages(due.records_topic, messages)
        except KafkaWriteError as err:
            log.warning("heartbeat of %s %s not sent: %s", due.connector, partition_json, err)
            return [result(HeartbeatOutcome.FAILED, str(err))]
        commits: dict[bytes, bytes | None] = {}
        for record in records:
            if record.source_offset is not None:
                partition = record.source_partition if record.source_partition is not None else due.partition
                commits[offset_key_bytes(due.connector, partition)] = serialize_offset_value(record.source_offset)
        commit_error = None
        if commits:
            try:
                self._commit(due, list(commits.items()))
            except KafkaWriteError as err:
                log.warning("offsets of the heartbeat of %s %s not committed: %s", due.connector, partition_json, err)
                commit_error = f"offset not committed: {err}"
        for index, (record, (key, value, _headers), position) in enumerate(
            zip(records, messages, positions, strict=True)
        ):
            committed = None
            if record.source_offset is not None and commit_error is None:
                committed = json.dumps(dict(record.source_offset), separators=(",", ":"))
            failed = commit_error is not None and record.source_offset is not None
            rows.append(
                result(
                    HeartbeatOutcome.FAILED if failed else HeartbeatOutcome.PRODUCED,
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

    def _commit(self, due: DuePartition, records: list[tuple[bytes, bytes | None]]) -> None:
        """Commit offsets as the framework does: to the connector's stores in ``ConnectorOffsetBackingStore.set``'s
        order (its own ``offsets.storage.topic`` first, then the worker's, whose failure is only logged)."""
        for write in connector_offset_stores(self.offsets_topic, due.config).writes(records):
            try:
                self.offset_sender.send(write.topic, write.records)
            except KafkaWriteError as err:
                if not write.best_effort:
                    raise
                log.warning("offsets of %s not written to the secondary store %s: %s", due.connector, write.topic, err)

    def _update_offsets(
        self, provider: HeartbeatProvider, due: DuePartition, result: Callable[..., EmittedHeartbeat]
    ) -> list[EmittedHeartbeat]:
        """The offsets-update form: ask the provider, commit what it returns, produce nothing."""
        given = [(due.partition, due.offset)] if due.partition else []
        try:
            updates = checked_offsets(
                self._call(provider, lambda: provider.update_offsets(due.connector, due.config, given))
            )
        except PluginTimeout as err:
            log.warning("offsets update of %s skipped: %s", due.connector, err)
            return [result(HeartbeatOutcome.TIMED_OUT, str(err))]
        except Exception as err:  # third-party code
            log.warning("heartbeat provider for %s failed to update offsets: %s", due.connector, err)
            return [result(HeartbeatOutcome.FAILED, f"{type(err).__name__}: {err}")]
        if not updates:
            return [] if implements_heartbeat_records(provider) else [result(HeartbeatOutcome.NO_RECORDS)]
        records = [(offset_key_bytes(due.connector, p), serialize_offset_value(o)) for p, o in updates]
        try:
            self._commit(due, records)
        except KafkaWriteError as err:
            log.warning("offsets of %s not committed: %s", due.connector, err)
            return [result(HeartbeatOutcome.FAILED, f"offset not committed: {err}")]
        return [
            replace(
                result(
                    HeartbeatOutcome.OFFSETS_COMMITTED,
                    committed_offset=json.dumps(offset, separators=(",", ":")) if offset is not None else None,
                ),
                partition=json.dumps(partition, separators=(",", ":")),
                source_key=key,
            )
            for (partition, offset), (key, _value) in zip(updates, records, strict=True)
        ]

    def _call(self, provider: HeartbeatProvider, call: Callable[[], T]) -> T:
        """A provider call with its deadline (:class:`~connect_state.core.deadlines.PluginTimeout` past it); one
        abandoned call per provider at most."""
        return self.deadlines.run(provider, f"heartbeat provider {provider_name(provider)}", call)

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
