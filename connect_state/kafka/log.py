"""Reading internal topics up to their end offsets: the API's fresh view of Kafka (issue 10).

* :class:`TopicLogReader`: one kafka-python ``KafkaConsumer`` (no group, ``read_committed`` like the jobs' Spark
  source, created on first use, calls serialised, so one instance is safe to share between threads) that answers the
  partitions' start and end offsets and reads offset ranges, every call bounded by a deadline;
* :class:`ConfigTopicTail`: Connect's ``KafkaConfigBackingStore`` reading its config topic to the end before it acts:
  a :class:`~connect_state.folds.config_snapshot.ConfigSnapshot` kept in memory and brought to the topic's end
  offset incrementally (only the records written since the last call are read), one per process;
* :class:`OffsetsCache`: start and end offsets remembered for a short while, so that answering "how far behind is this
  table" on every GET costs one ListOffsets request per second at most, and never waits for Kafka while another
  request is already asking it.

Errors are typed (:mod:`connect_state.core.errors`): :class:`KafkaUnavailableError` (no broker reached in time),
:class:`TopicNotFoundError`, :class:`KafkaWriteTimeout` (the end was not reached, or an answer did not come, in time),
else :class:`KafkaWriteError`. Nothing here knows about Flask or Spark.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self

from kafka import KafkaConsumer, TopicPartition
from kafka import errors as kafka_errors

from connect_state.core.errors import KafkaUnavailableError, KafkaWriteError, KafkaWriteTimeout, describe_error
from connect_state.core.partitions import Partition
from connect_state.core.settings import Settings
from connect_state.folds.config_snapshot import ConfigSnapshot, ConnectorConfigView
from connect_state.kafka.admin import KafkaAdmin, SafeConsumer
from connect_state.kafka.config import kafka_python_config
from connect_state.kafka.errors import (
    CLIENT_CALL_ERRORS,
    any_listening,
    client_error,
    read_error,
    unreachable,
)

log = logging.getLogger(__name__)

CLIENT_ID = "connect-state-reader"
_POLL_MS = 200


@dataclass(frozen=True)
class LogRecord:
    """One record read from a topic: where it is, when it was written (epoch ms), its raw key and value."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class TopicOffsets:
    """Start (log start) and end offsets of every partition of some topics, and when they were asked (monotonic s)."""

    starts: Mapping[Partition, int]
    ends: Mapping[Partition, int]
    at: float


class TopicLog(Protocol):
    """What the API needs from a topic reader (:class:`TopicLogReader`; the unit tests' in-memory topics)."""

    def offsets(self, topics: Sequence[str], timeout_ms: int) -> TopicOffsets: ...

    def read(self, ranges: Mapping[Partition, tuple[int | None, int]], timeout_ms: int) -> list[LogRecord]: ...

    def close(self) -> None: ...


class _Deadline:
    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.at = time.monotonic() + timeout_ms / 1000

    def remaining_ms(self) -> int:
        return max(int((self.at - time.monotonic()) * 1000), 0)

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at


def reader_consumer_config(settings: Settings, client_id: str, **overrides: Any) -> dict[str, Any]:
    """The keyword arguments of a consumer that reads Connect's topics the way the jobs do: the client properties,
    then no group, no commits, ``read_committed``; then ``overrides``."""
    config = kafka_python_config(settings.kafka_client_config(), KafkaConsumer.DEFAULT_CONFIG, warn=False)
    config.update(client_id=client_id, group_id=None, enable_auto_commit=False, isolation_level="read_committed")
    config.update(overrides)
    return config


class TopicLogReader:
    """Start/end offsets and offset ranges of topics, read with one lazily created consumer.

    ``timeout_ms`` bounds the consumer's bootstrap and is the default of every call's bound; each call waits for the
    reader (calls are serialised) within its own bound.
    """

    def __init__(self, settings: Settings, *, client_id: str = CLIENT_ID, timeout_ms: int | None = None) -> None:
        self.settings = settings
        self.bootstrap_servers = settings.bootstrap_servers
        self.client_id = client_id
        self.timeout_ms = settings.api_fresh_read_timeout_ms if timeout_ms is None else timeout_ms
        self.admin = KafkaAdmin(
            settings.kafka_client_config(),
            client_id=f"{client_id}-metadata",
            timeout_ms=self.timeout_ms,
            name=f"Kafka reader's admin client ({client_id})",
            warn_unsupported=False,
        )
        self._lock = threading.Lock()
        self._consumer: KafkaConsumer | None = None
        self._closed = False

    def consumer_config(self) -> dict[str, Any]:
        """The consumer's keyword arguments: client properties, then what this reader needs."""
        return reader_consumer_config(
            self.settings,
            self.client_id,
            auto_offset_reset="earliest",  # an offset below the log start (retention) reads from the start
            bootstrap_timeout_ms=self.timeout_ms,
        )

    def _client(self) -> KafkaConsumer:
        if self._closed:
            raise KafkaWriteError(f"the Kafka reader {self.client_id} is closed")
        if self._consumer is None:
            try:
                self._consumer = SafeConsumer(**self.consumer_config())
            except kafka_errors.KafkaError as err:
                raise unreachable(err, self.bootstrap_servers) from err
        return self._consumer

    def _acquire(self, deadline: _Deadline, what: str) -> None:
        if not self._lock.acquire(timeout=deadline.remaining_ms() / 1000):
            raise KafkaWriteTimeout(f"timed out after {deadline.timeout_ms} ms waiting to {what} (reader busy)")

    def partitions(self, topic: str, timeout_ms: int | None = None) -> list[int]:
        """The partition numbers of ``topic`` (from cluster metadata, cached); TopicNotFoundError when it does not
        exist."""
        return list(range(self.admin.partition_count(topic, self.timeout_ms if timeout_ms is None else timeout_ms)))

    def offsets(self, topics: Sequence[str], timeout_ms: int | None = None) -> TopicOffsets:
        """The start and end offsets (``read_committed``: the last stable offset) of every partition of ``topics``."""
        deadline = _Deadline(self.timeout_ms if timeout_ms is None else timeout_ms)
        partitions = [
            TopicPartition(topic, number)
            for topic in dict.fromkeys(topics)
            for number in self.partitions(topic, deadline.remaining_ms())
        ]
        what = "read the offsets of " + ", ".join(dict.fromkeys(topics))
        self._acquire(deadline, what)
        try:
            consumer = self._client()
            try:
                starts = consumer.beginning_offsets(partitions, timeout_ms=deadline.remaining_ms())
                ends = consumer.end_offsets(partitions, timeout_ms=deadline.remaining_ms())
            except CLIENT_CALL_ERRORS as err:
                typed = client_error(err)
                raise read_error(typed, self.bootstrap_servers)(
                    f"cannot {what} on Kafka at {self.bootstrap_servers}: {describe_error(typed)}"
                ) from err
        finally:
            self._lock.release()
        return TopicOffsets(
            {(tp.topic, tp.partition): int(o) for tp, o in starts.items()},
            {(tp.topic, tp.partition): int(o) for tp, o in ends.items()},
            time.monotonic(),
        )

    def read(
        self, ranges: Mapping[Partition, tuple[int | None, int]], timeout_ms: int | None = None
    ) -> list[LogRecord]:
        """Every record of each ``(topic, partition)`` from its start offset (None: the log start) up to, not
        including, its end offset, in offset order per partition. Raises :class:`KafkaWriteTimeout` when the ends are
        not all reached within ``timeout_ms``."""
        deadline = _Deadline(self.timeout_ms if timeout_ms is None else timeout_ms)
        wanted = {TopicPartition(t, p): (start, end) for (t, p), (start, end) in ranges.items() if end > (start or 0)}
        if not wanted:
            return []
        names = ", ".join(sorted({f"{tp.topic}-{tp.partition}" for tp in wanted}))
        self._acquire(deadline, f"read {names}")
        try:
            return self._read(self._client(), wanted, deadline, names)
        except KafkaUnavailableError:
            raise
        except KafkaWriteTimeout as err:  # the end offsets not reached in time: Kafka may be away altogether
            if any_listening(self.bootstrap_servers):
                raise
            raise KafkaUnavailableError(f"{err}; no broker at {self.bootstrap_servers} accepts connections") from err
        except CLIENT_CALL_ERRORS as err:
            typed = client_error(err)
            reason = describe_error(typed)
            error = read_error(typed, self.bootstrap_servers)
            raise error(f"cannot read {names} from Kafka at {self.bootstrap_servers}: {reason}") from err
        finally:
            self._lock.release()

    def _read(
        self,
        consumer: KafkaConsumer,
        wanted: Mapping[TopicPartition, tuple[int | None, int]],
        deadline: _Deadline,
        names: str,
    ) -> list[LogRecord]:
        consumer.assign(list(wanted))
        for tp, (start, _end) in wanted.items():
            if start is None:
                consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, start)
        records: list[LogRecord] = []
        pending = set(wanted)
        while pending:
            if deadline.expired:
                behind = ", ".join(sorted(f"{tp.topic}-{tp.partition} (end {wanted[tp][1]})" for tp in pending))
                raise KafkaWriteTimeout(
                    f"timed out after {deadline.timeout_ms} ms reading up to the end offsets of {names}: {behind} not "
                    "reached"
                )
            for tp, batch in consumer.poll(timeout_ms=min(deadline.remaining_ms(), _POLL_MS)).items():
                end = wanted[tp][1]
                records.extend(
                    LogRecord(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value)
                    for r in batch
                    if r.offset < end
                )
            for tp in list(pending):
                position = consumer.position(tp, timeout_ms=min(deadline.remaining_ms(), _POLL_MS))
                if position is not None and position >= wanted[tp][1]:
                    pending.discard(tp)
        consumer.assign([])
        return records

    def close(self) -> None:
        """Close the consumer and the admin client (idempotent); later calls raise KafkaWriteError."""
        with self._lock:
            self._closed = True
            consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except Exception:
                log.warning("error closing the Kafka reader %s", self.client_id, exc_info=True)
        self.admin.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ConfigTopicTail:
    """The config topic read to its end, incrementally, into one :class:`ConfigSnapshot` (thread-safe).

    :meth:`read_to_end` asks the topic's end offset at the call and applies every record up to it that the snapshot
    has not seen yet, as ``KafkaConfigBackingStore.refresh`` does before the leader acts; concurrent callers wait for
    each other (each asks the end offset itself, after the previous caller finished).
    """

    def __init__(self, log: TopicLog, topic: str) -> None:
        self.log = log
        self.topic = topic
        self.snapshot = ConfigSnapshot()
        self._lock = threading.Lock()

    def read_to_end(self, timeout_ms: int, connectors: Iterable[str] = ()) -> ConfigTopicView:
        """Bring the snapshot to the topic's end offsets at the call, within ``timeout_ms``; the view of
        ``connectors`` then (copied under the lock: a concurrent caller may move the snapshot on meanwhile)."""
        deadline = _Deadline(timeout_ms)
        if not self._lock.acquire(timeout=deadline.remaining_ms() / 1000):
            raise KafkaWriteTimeout(
                f"timed out after {timeout_ms} ms waiting for another read of the config topic {self.topic}"
            )
        try:
            ends = self.log.offsets([self.topic], deadline.remaining_ms()).ends
            positions = self.snapshot.positions
            ranges = {tp: (positions.get(tp[1]), end) for tp, end in ends.items()}
            for record in self.log.read(ranges, deadline.remaining_ms()):
                self.snapshot.apply(record.key, record.value, record.partition, record.offset, record.timestamp)
            for (_topic, partition), end in ends.items():  # compacted or aborted tails: the end is reached anyway
                positions[partition] = max(positions.get(partition, 0), end)
            views = {name: self.snapshot.connector(name) for name in connectors}
            return ConfigTopicView(self.topic, dict(ends), views, self.snapshot.connectors())
        finally:
            self._lock.release()

    def close(self) -> None:
        self.log.close()


@dataclass(frozen=True)
class ConfigTopicView:
    """What :meth:`ConfigTopicTail.read_to_end` established: the end offsets it read to, the connectors asked for,
    and the names of every configured connector, as of those offsets."""

    topic: str
    ends: Mapping[Partition, int]
    views: Mapping[str, ConnectorConfigView]
    configured: Sequence[str]

    def connector(self, name: str) -> ConnectorConfigView:
        return self.views[name]


class OffsetsCache:
    """Start and end offsets of topics, remembered for ``max_age_ms``; at most one caller asks Kafka at a time.

    :meth:`get` answers the remembered offsets while they are fresh; when they are not, one caller asks Kafka (within
    ``timeout_ms``) while the others answer what is remembered (possibly None). A failure is remembered as long as an
    answer would be (the error is returned, so a GET never waits on a broker that just failed).
    """

    def __init__(self, log: TopicLog, max_age_ms: int, timeout_ms: int) -> None:
        self.log = log
        self.max_age_ms = max_age_ms
        self.timeout_ms = timeout_ms
        self._entries: dict[tuple[str, ...], tuple[float, TopicOffsets | None, str | None]] = {}
        self._guard = threading.Lock()
        self._asking: set[tuple[str, ...]] = set()

    def get(self, topics: Iterable[str]) -> tuple[TopicOffsets | None, str | None]:
        """``(offsets, None)``, or ``(None, reason)`` when they could not be read (or are being read by another
        caller and nothing is remembered yet)."""
        key = tuple(sorted(set(topics)))
        now = time.monotonic()
        with self._guard:
            entry = self._entries.get(key)
            fresh = entry is not None and (now - entry[0]) * 1000 < self.max_age_ms
            if fresh or key in self._asking:
                return (entry[1], entry[2]) if entry is not None else (None, "the end offsets are being read")
            self._asking.add(key)
        try:
            try:
                result: tuple[TopicOffsets | None, str | None] = (self.log.offsets(list(key), self.timeout_ms), None)
            except KafkaWriteError as err:
                result = (None, str(err))
            with self._guard:
                self._entries[key] = (time.monotonic(), *result)
            return result
        finally:
            with self._guard:
                self._asking.discard(key)

    def close(self) -> None:
        self.log.close()
