"""Topics followed as they are written, in a background thread, the way a Connect worker's ``KafkaBasedLog`` follows
its status and offsets topics: what the API adds to a table's rows so that a GET answers changes the jobs have not
folded yet (issue 11 §2).

:class:`TopicFollower` assigns itself every partition of its topics, starts at their end offsets, and keeps the
records it reads (at most ``max_records``: past that, the oldest half is dropped). :meth:`TopicFollower.records_since`
answers the records of one connector at or past given offsets (a table's watermarks: the next offsets not folded into
it), or None when it does not hold all of them: a partition it has not started following, a watermark older than the
oldest record it kept (the jobs are behind, or were when it started). The caller then answers from the table alone, as
before. The follower never blocks a request on Kafka: a request reads what it holds, under a lock.

Which connector a record belongs to is told by ``connector_of(topic, key)``, given by the caller (the record formats
know it), so that a request filters without parsing every record.
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

from connect_state.kafka.config import kafka_python_config
from connect_state.kafka.log import LogRecord, Partition
from connect_state.settings import Settings

log = logging.getLogger(__name__)

CLIENT_ID = "connect-state-api-follower"
_POLL_MS = 200
_RETRY_S = 5.0

ConnectorOf = Callable[[str, bytes | None], str | None]
"""``connector_of(topic, key)``: the connector a record is about, or None (not one a request asks for)."""


@dataclass
class _PartitionBuffer:
    """The records kept of one partition, by offset: complete from ``covered_from`` to ``position``."""

    covered_from: int
    position: int
    offsets: list[int] = field(default_factory=list)
    connectors: list[str | None] = field(default_factory=list)
    records: list[LogRecord] = field(default_factory=list)

    def append(self, record: LogRecord, connector: str | None) -> None:
        self.offsets.append(record.offset)
        self.connectors.append(connector)
        self.records.append(record)
        self.position = record.offset + 1

    def drop_oldest(self, count: int) -> None:
        """Drop the ``count`` oldest records: the buffer is then complete from the first one kept (or its position)."""
        del self.offsets[:count], self.connectors[:count], self.records[:count]
        self.covered_from = self.offsets[0] if self.offsets else self.position


class TopicFollower:
    """Every partition of ``topics`` followed from its end at start (see the module docstring). Thread-safe."""

    def __init__(
        self,
        settings: Settings,
        topics: Sequence[str],
        connector_of: ConnectorOf,
        *,
        max_records: int,
        client_id: str = CLIENT_ID,
    ) -> None:
        self.settings = settings
        self.topics = tuple(dict.fromkeys(topics))
        self.connector_of = connector_of
        self.max_records = max_records
        self.client_id = client_id
        self._buffers: dict[Partition, _PartitionBuffer] = {}
        self._held = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the request side -------------------------------------------------------------------------------------------

    def records_since(self, starts: Mapping[Partition, int], connector: str) -> list[LogRecord] | None:
        """The records of ``connector`` at or past ``starts`` (per partition of the followed topics in ``starts``),
        in offset order per partition; None when the follower does not hold every record past some start."""
        found: list[LogRecord] = []
        with self._lock:
            for partition, start in starts.items():
                buffer = self._buffers.get(partition)
                if buffer is None or start < buffer.covered_from:
                    return None
                first = bisect.bisect_left(buffer.offsets, start)
                found.extend(
                    buffer.records[i] for i in range(first, len(buffer.offsets)) if buffer.connectors[i] == connector
                )
        return found

    def positions(self) -> dict[Partition, int]:
        """The next offset the follower will read, per partition it follows."""
        with self._lock:
            return {partition: buffer.position for partition, buffer in self._buffers.items()}

    def following(self, topic: str) -> bool:
        """Whether every partition of ``topic`` is followed (false until the follower has started)."""
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
        config = kafka_python_config(self.settings.kafka_client_config(), KafkaConsumer.DEFAULT_CONFIG, warn=False)
        config.update(
            client_id=self.client_id,
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",  # as the jobs read
            auto_offset_reset="earliest",
        )
        return config

    def _run(self) -> None:
        while not self._stop.is_set():
            consumer: KafkaConsumer | None = None
            try:
                consumer = KafkaConsumer(**self._consumer_config())
                self._assign(consumer)
                while not self._stop.is_set():
                    polled = consumer.poll(timeout_ms=_POLL_MS)
                    self.take(polled, {p: consumer.position(TopicPartition(*p)) for p in self._buffers})
            except Exception:  # a broker away, a topic not created yet: answer from the tables meanwhile, retry
                log.warning(
                    "following %s failed; GETs answer from the tables alone meanwhile", self.topics, exc_info=True
                )
                self.follow_from({})
                self._stop.wait(_RETRY_S)
            finally:
                if consumer is not None:
                    consumer.close()

    def _assign(self, consumer: KafkaConsumer) -> None:
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

    # The background thread's two steps (public for the tests, which feed records without a broker).

    def follow_from(self, positions: Mapping[Partition, int]) -> None:
        """Start (again) at ``positions``: nothing held, every record from there on kept."""
        with self._lock:
            self._buffers = {p: _PartitionBuffer(covered_from=pos, position=pos) for p, pos in positions.items()}
            self._held = 0

    def take(self, polled: Mapping[TopicPartition, Sequence[Any]], positions: Mapping[Partition, int]) -> None:
        """Keep the polled records; then every partition's position is the consumer's (past markers and gaps)."""
        with self._lock:
            for tp, records in polled.items():
                buffer = self._buffers[(tp.topic, tp.partition)]
                for r in records:
                    record = LogRecord(tp.topic, tp.partition, r.offset, r.timestamp, r.key, r.value)
                    buffer.append(record, self.connector_of(tp.topic, r.key))
                    self._held += 1
            if self._held > self.max_records:
                for buffer in self._buffers.values():
                    dropped = (len(buffer.offsets) + 1) // 2
                    buffer.drop_oldest(dropped)
                    self._held -= dropped
            for partition, position in positions.items():
                buffer = self._buffers[partition]
                buffer.position = max(buffer.position, position)
