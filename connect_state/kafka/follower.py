"""Topics followed as they are written, in a background thread, the way a Connect worker's ``KafkaBasedLog`` follows
its status and offsets topics: what the API adds to a table's rows so that a GET answers changes the jobs have not
folded yet (issue 11 §2).

:class:`TopicFollower` assigns itself every partition of its topics, starts at their end offsets, and keeps the
records it reads, filed by connector (``connector_of(topic, key)``, given by the caller: the record formats know it),
at most ``max_bytes`` (keys, values and about 100 bytes per record): past that, the oldest half of each partition is
dropped.

Two things a request needs to know, both answered from memory under a lock (a request never waits on Kafka):

* :meth:`TopicFollower.records_since`: one connector's records at or past given offsets (a table's watermarks: the
  next offsets not folded into it), or None when it does not hold all of them (a partition it does not follow, a
  watermark older than the oldest record it kept);
* :meth:`TopicFollower.caught_up_as_of`: a time such that every record acknowledged before it is held. The thread asks
  the topics' end offsets (the last stable offsets: it reads ``read_committed``, as the jobs do), reads up to them,
  and then moves this time to when it asked (a round that does not get there within 10 s asks again). A table's rows
  committed after this time may reflect records the follower has not read yet, and folding older records over them
  would turn them back: the caller answers from the table alone then. While Kafka is away the time stops moving, and
  so answers come from the tables.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from connect_state.core.partitions import Partition
from connect_state.core.settings import Settings
from connect_state.kafka.admin import SafeConsumer
from connect_state.kafka.log import LogRecord, reader_consumer_config

log = logging.getLogger(__name__)

CLIENT_ID = "connect-state-api-follower"
_POLL_MS = 100
_REQUEST_TIMEOUT_MS = 30_000
_RETRY_S = 5.0
_ROUND_S = 10.0

ConnectorOf = Callable[[str, bytes | None], str | None]
"""``connector_of(topic, key)``: the connector a record is about, or None (not one a request asks for)."""


@dataclass
class _Records:
    """One connector's records of one partition, by offset."""

    offsets: list[int] = field(default_factory=list)
    records: list[LogRecord] = field(default_factory=list)


@dataclass
class _PartitionBuffer:
    """The records kept of one partition: complete from ``covered_from`` up to ``position``."""

    covered_from: int
    position: int
    by_connector: dict[str, _Records] = field(default_factory=dict)
    #: (offset, size in bytes) of every record kept, by offset: what the byte bound drops from.
    sizes: list[tuple[int, int]] = field(default_factory=list)

    def append(self, record: LogRecord, connector: str | None, size: int) -> None:
        if connector is not None:
            kept = self.by_connector.setdefault(connector, _Records())
            kept.offsets.append(record.offset)
            kept.records.append(record)
        self.sizes.append((record.offset, size))
        self.position = record.offset + 1

    def drop_oldest_half(self) -> int:
        """Drop the oldest half of the records (bytes freed); the buffer is then complete from the first one kept."""
        count = (len(self.sizes) + 1) // 2
        if count == 0:
            return 0
        freed = sum(size for _offset, size in self.sizes[:count])
        del self.sizes[:count]
        self.covered_from = self.sizes[0][0] if self.sizes else self.position
        for name in list(self.by_connector):
            kept = self.by_connector[name]
            first = bisect.bisect_left(kept.offsets, self.covered_from)
            if first == len(kept.offsets):
                del self.by_connector[name]
            elif first:
                del kept.offsets[:first], kept.records[:first]
        return freed

    def since(self, start: int, connector: str) -> list[LogRecord]:
        kept = self.by_connector.get(connector)
        if kept is None:
            return []
        return kept.records[bisect.bisect_left(kept.offsets, start) :]


class TopicFollower:
    """Every partition of ``topics`` followed from its end at start (see the module docstring). Thread-safe."""

    def __init__(
        self,
        settings: Settings,
        topics: Sequence[str],
        connector_of: ConnectorOf,
        *,
        max_bytes: int,
        client_id: str = CLIENT_ID,
    ) -> None:
        self.settings = settings
        self.topics = tuple(dict.fromkeys(topics))
        self.connector_of = connector_of
        self.max_bytes = max_bytes
        self.client_id = client_id
        self._buffers: dict[Partition, _PartitionBuffer] = {}
        self._held_bytes = 0
        self._caught_up_as_of: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the request side -------------------------------------------------------------------------------------------

    def records_since(self, starts: Mapping[Partition, int], connector: str) -> list[LogRecord] | None:
        """The records of ``connector`` at or past ``starts`` (per partition), in offset order per partition; None
        when the follower does not hold every record past some start."""
        found: list[LogRecord] = []
        with self._lock:
            for partition, start in starts.items():
                buffer = self._buffers.get(partition)
                if buffer is None or start < buffer.covered_from:
                    return None
                found.extend(buffer.since(start, connector))
        return found

    def positions(self) -> dict[Partition, int]:
        """The next offset the follower will read, per partition it follows."""
        with self._lock:
            return {partition: buffer.position for partition, buffer in self._buffers.items()}

    def caught_up_as_of(self) -> float | None:
        """Epoch seconds such that every record acknowledged before then is held (None: not yet)."""
        with self._lock:
            return self._caught_up_as_of

    def following(self, topic: str) -> bool:
        """Whether the follower has started following ``topic`` (false until its thread has assigned it)."""
        with self._lock:
            return any(partition[0] == topic for partition in self._buffers)

    # --- the background side ----------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start following in a daemon thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.client_id, daemon=True)
            self._thread.start()

    def close(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _consumer_config(self) -> dict[str, Any]:
        return reader_consumer_config(
            self.settings,
            self.client_id,
            auto_offset_reset="none",  # out of range (retention): fail, start again at the end
            request_timeout_ms=_REQUEST_TIMEOUT_MS,
        )

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            consumer: KafkaConsumer | None = None
            try:
                consumer = SafeConsumer(**self._consumer_config())
                partitions = self._assign(consumer)
                failures = 0
                while not self._stop.is_set():
                    self._catch_up(consumer, partitions)
            except Exception as err:  # a broker away, a topic not created yet: answers from the tables meanwhile
                failures += 1
                if failures == 1:
                    log.warning(
                        "following %s failed (%s); GETs answer from the tables alone meanwhile", self.topics, err
                    )
                else:
                    log.debug("following %s failed again", self.topics, exc_info=True)
                self.follow_from({})
                self._stop.wait(_RETRY_S)
            finally:
                if consumer is not None:
                    consumer.close()

    def _assign(self, consumer: KafkaConsumer) -> list[TopicPartition]:
        partitions: list[TopicPartition] = []
        deadline = time.monotonic() + 60.0
        for topic in self.topics:
            while (found := consumer.partitions_for_topic(topic)) is None:
                if self._stop.is_set() or time.monotonic() > deadline:
                    raise TimeoutError(f"no partitions found for topic {topic}")
                self._stop.wait(1.0)
            partitions.extend(TopicPartition(topic, p) for p in sorted(found))
        consumer.assign(partitions)
        consumer.seek_to_end(*partitions)
        self.follow_from({(tp.topic, tp.partition): consumer.position(tp) for tp in partitions})
        return partitions

    def _catch_up(self, consumer: KafkaConsumer, partitions: list[TopicPartition]) -> None:
        """Ask the end offsets, read up to them, then say the records acknowledged before the asking are held."""
        asked_at = time.time()
        ends = consumer.end_offsets(partitions)
        give_up_at = time.monotonic() + _ROUND_S
        while not self._stop.is_set():
            polled = consumer.poll(timeout_ms=_POLL_MS)
            positions = {(tp.topic, tp.partition): consumer.position(tp) for tp in partitions}
            self.take(polled, positions)
            if all(positions[(tp.topic, tp.partition)] >= ends[tp] for tp in partitions):
                self.caught_up(asked_at)
                return
            if time.monotonic() > give_up_at:  # e.g. a partition without a leader: ask again (GETs use the tables)
                log.debug(
                    "following %s: not caught up within %s s; asking the end offsets again", self.topics, _ROUND_S
                )
                return

    # The background thread's steps (public for the tests, which feed records without a broker).

    def follow_from(self, positions: Mapping[Partition, int]) -> None:
        """Start (again) at ``positions``: nothing held, every record from there on kept, not caught up."""
        with self._lock:
            self._buffers = {p: _PartitionBuffer(covered_from=pos, position=pos) for p, pos in positions.items()}
            self._held_bytes = 0
            self._caught_up_as_of = None

    def take(self, polled: Mapping[TopicPartition, Sequence[Any]], positions: Mapping[Partition, int]) -> None:
        """Keep the polled records; then every partition's position is the consumer's (past markers and gaps)."""
        filed = [
            (
                (tp.topic, tp.partition),
                LogRecord(tp.topic, tp.partition, r.offset, r.timestamp, r.key, r.value),
                self.connector_of(tp.topic, r.key),  # parsed outside the lock
                len(r.key or b"") + len(r.value or b"") + 100,  # with a rough per-record overhead
            )
            for tp, records in polled.items()
            for r in records
        ]
        with self._lock:
            for partition, record, connector, size in filed:
                self._buffers[partition].append(record, connector, size)
                self._held_bytes += size
            while self._held_bytes > self.max_bytes and any(b.sizes for b in self._buffers.values()):
                for buffer in self._buffers.values():
                    self._held_bytes -= buffer.drop_oldest_half()
            for partition, position in positions.items():
                buffer = self._buffers[partition]
                buffer.position = max(buffer.position, position)

    def caught_up(self, as_of: float) -> None:
        """Every record acknowledged before ``as_of`` (epoch seconds) is held."""
        with self._lock:
            self._caught_up_as_of = max(self._caught_up_as_of or 0.0, as_of)
