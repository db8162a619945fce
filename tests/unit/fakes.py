"""In-memory stand-ins shared by the unit tests (no broker in unit tests; the integration tests use real ones).

* :class:`RecordingWriter`: the one fake Kafka writer (the API's ``RecordWriter``, the heartbeat offset sender);
* :class:`FakeAdmin`: the consumer-group admin (the herder's ``GroupAdmin``), recording its calls;
* :class:`FakeHerderIO`: the herder's I/O (:class:`connect_state.herder.io.HerderIO`) over :class:`InMemoryTopics`,
  a :class:`RecordingWriter` and a :class:`FakeAdmin`;
* :class:`InMemoryTables`: the one in-memory table fake (the API's ``TableSource``), filtered by the real reader;
* :class:`InMemoryTopics`: the one in-memory Kafka log (the API's ``TopicLog``: the config topic's tail, the records
  past a table's watermark, the topics' end offsets); a :class:`RecordingWriter` given ``topics`` appends what it
  sends there, so the API reads its own writes back as it would from Kafka.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from connect_state.connect.offset_stores import ConnectorOffsetStores
from connect_state.core.errors import TableNotFoundError, TopicNotFoundError
from connect_state.core.settings import Settings
from connect_state.folds.config_snapshot import ConfigSnapshot, ConnectorConfigView
from connect_state.kafka.log import LogRecord, TopicOffsets
from connect_state.kafka.partitioner import partition_for_key
from connect_state.tables.reader import TableReader, missing_table_message
from connect_state.tables.scan import ArrowFiles, TableScan
from connect_state.tables.schemas import TableSpec

STATUS_PARTITIONS = 5  # Connect's default status.storage.partitions

Record = tuple[bytes, bytes | None]


class RecordingWriter:
    """A stand-in for :class:`~connect_state.kafka.InternalTopicWriter`: records every send and answers the
    ``(partition, offset)`` of each record, placed as the Java producer would place it on a topic of ``partitions``.

    ``fail`` makes sends fail: an exception, or a function of the topic returning one (or None to let it through).
    With ``topics`` (:class:`InMemoryTopics`) every record sent is appended there, placed on the topic's partitions as
    the Java producer would, and the answer is its real ``(partition, offset)``.
    """

    def __init__(
        self,
        fail: Exception | Callable[[str], Exception | None] | None = None,
        partitions: int = STATUS_PARTITIONS,
        topics: InMemoryTopics | None = None,
    ) -> None:
        self.sends: list[tuple[str, list[Record], int | None]] = []
        self.fail = fail
        self.partitions = partitions
        self.topics = topics
        self.closed = False
        self.fenced: list[list[str]] = []
        self.fence_error: Exception | None = None
        self.transactions: list[RecordingTransaction] = []

    def send(self, topic: str, records: Sequence[Record], timeout_ms: int | None = None) -> list[tuple[int, int]]:
        error = self.fail(topic) if callable(self.fail) else self.fail
        if error is not None:
            raise error
        self.sends.append((topic, list(records), timeout_ms))
        if self.topics is not None:
            return [self.topics.append_keyed(topic, key, value) for key, value in records]
        return [(partition_for_key(key, self.partitions), offset) for offset, (key, _) in enumerate(records)]

    def fence_producers(self, transactional_ids: Sequence[str], timeout_ms: int | None = None) -> None:
        """Records the ids fenced (``fenced``); raises ``fence_error`` when set."""
        if self.fence_error is not None:
            raise self.fence_error
        self.fenced.append(list(transactional_ids))

    def begin_transaction(self, transactional_id: str, timeout_ms: int | None = None) -> RecordingTransaction:
        """A transaction whose commits go through :meth:`send` (``transactions`` keeps them)."""
        transaction = RecordingTransaction(self, transactional_id)
        self.transactions.append(transaction)
        return transaction

    def close(self) -> None:
        self.closed = True

    @property
    def batches(self) -> list[tuple[str, list[Record]]]:
        """``(topic, records)`` of every send, in order (the timeouts left out)."""
        return [(topic, records) for topic, records, _ in self.sends]

    @property
    def keys(self) -> list[bytes]:
        return [key for _, records, _ in self.sends for key, _ in records]

    @property
    def placements(self) -> list[tuple[bytes, int]]:
        """``(key, partition)`` of every record sent, as the Java producer would place it."""
        return [(key, partition_for_key(key, self.partitions)) for key in self.keys]


class RecordingTransaction:
    """A begun transaction of :class:`RecordingWriter`: ``committed`` ``(topic, records)``, ``closed``."""

    def __init__(self, writer: RecordingWriter, transactional_id: str) -> None:
        self.writer = writer
        self.transactional_id = transactional_id
        self.committed: list[tuple[str, list[Record]]] = []
        self.closed = False

    def commit(self, topic: str, records: Sequence[Record], timeout_ms: int | None = None) -> list[tuple[int, int]]:
        positions = self.writer.send(topic, records, timeout_ms)
        self.committed.append((topic, list(records)))
        return positions

    def close(self) -> None:
        self.closed = True


class FakeAdmin:
    """A consumer-group admin that records calls; ``errors`` maps a method name to the exception it raises."""

    def __init__(
        self,
        errors: Mapping[str, Exception] | None = None,
        groups: Iterable[str] = (),
        members: Mapping[str, int] | None = None,
    ) -> None:
        self.calls: list[tuple[str, str, object]] = []
        self.errors = dict(errors or {})
        self.groups = set(groups)
        self.members = dict(members or {})

    def _record(self, method: str, group_id: str, argument: object) -> None:
        self.calls.append((method, group_id, argument))
        if method in self.errors:
            raise self.errors[method]

    def list_group_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        self._record("list_group_offsets", group_id, None)
        return {("t", 0): 5} if group_id in self.groups else {}

    def alter_group_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], int]) -> None:
        if offsets:
            self._record("alter_group_offsets", group_id, dict(offsets))

    def delete_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]]) -> None:
        partitions = sorted(partitions)
        if partitions:
            self._record("delete_group_offsets", group_id, partitions)

    def group_members(self, group_id: str) -> int:
        self._record("group_members", group_id, None)
        return self.members.get(group_id, 0)

    def delete_group(self, group_id: str) -> bool:
        self._record("delete_group", group_id, None)
        existed = group_id in self.groups
        self.groups.discard(group_id)
        return existed

    def close(self) -> None:
        pass


class FakeHerderIO:
    """The herder's I/O (:class:`connect_state.herder.io.HerderIO`) in memory: the config topic is ``topics``'
    (every read folds its records, so the herder reads its own writes back), the writer appends there; ``rows``
    (``connectors`` rows), ``active`` (active topics), ``sources`` (``source_offsets`` rows), ``committed`` (a group's
    committed topics) are the tables and the fresh reads. ``unreadable`` makes every fresh read raise it."""

    def __init__(self, settings: Settings, topics: InMemoryTopics, writer: RecordingWriter, admin: FakeAdmin) -> None:
        self.settings = settings
        self.topics = topics
        self._writer = writer
        self._admin = admin
        self.rows: dict[str, dict[str, Any]] = {}
        self.active: dict[str, list[str]] = {}
        self.sources: dict[str, list[dict[str, Any]]] = {}
        self.committed: dict[str, set[str]] = {}
        self.unreadable: Exception | None = None

    def _fresh(self) -> None:
        if self.unreadable is not None:
            raise self.unreadable

    def connector(self, name: str) -> ConnectorConfigView:
        self._fresh()
        snapshot = ConfigSnapshot()
        for record in self.topics.logs.get((self.settings.config_storage_topic, 0), []):
            snapshot.apply(record.key, record.value, record.partition, record.offset, record.timestamp)
        return snapshot.connector(name)

    def connector_row(self, name: str) -> dict[str, Any] | None:
        return self.rows.get(name)

    def active_topics(self, name: str) -> list[str]:
        self._fresh()
        return sorted(self.active.get(name, []))

    def source_rows(self, name: str, stores: ConnectorOffsetStores) -> list[dict[str, Any]]:
        self._fresh()
        return [row for row in self.sources.get(name, []) if row["offsets_topic"] in stores.topics]

    def committed_topics(self, group: str) -> set[str]:
        return set(self.committed.get(group, set()))

    def connector_names(self) -> set[str]:
        return {name for name in self.rows if not self.rows[name].get("deleted")}

    def writer(self) -> RecordingWriter:
        return self._writer

    def admin(self) -> FakeAdmin:
        return self._admin


SCAN_FILE_ROWS = 3
"""Rows per data file of an :class:`InMemoryTables` scan: small, so that the API's paged reads cross files."""


class InMemoryTables(TableReader):
    """A :class:`~connect_state.tables.reader.TableReader` whose tables are rows in memory instead of Delta tables.

    ``tables`` maps a table name to its rows (dicts; missing columns are null). Rows are typed by the table's Arrow
    schema and filtered and projected by the real reader, so filters behave as on a Delta table. A table absent from
    ``tables`` does not exist (TableNotFoundError, with the reader's message).
    """

    def __init__(self, tables: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        super().__init__(Path("in-memory"))
        self.tables = {name: list(rows) for name, rows in tables.items()}

    def snapshot(self, spec: TableSpec) -> pa.Table:
        if spec.name not in self.tables:
            raise TableNotFoundError(missing_table_message(spec, self.path(spec)))
        return pa.Table.from_pylist(self.tables[spec.name], schema=spec.schema)

    def scan(self, spec: TableSpec) -> TableScan:
        """The rows as data files of :data:`SCAN_FILE_ROWS` rows each, in the order given (statistics exact)."""
        return TableScan(ArrowFiles(self.snapshot(spec), SCAN_FILE_ROWS))


class InMemoryTopics:
    """Kafka topics in memory, for the API's Kafka readers (:class:`~connect_state.kafka.log.TopicLog`).

    ``partitions`` maps a topic to its partition count (topics not named have ``default_partitions``; the config topic
    has one, as Connect requires). A topic exists once it is named, created or written. ``fail`` makes reads fail: an
    exception, or a function of the topics returning one (or None). ``start`` offsets (a log start past 0, as after
    retention) are set per partition with :meth:`truncate`. Records get offsets 0, 1, ... per partition and the
    current time as their timestamp unless given one.
    """

    def __init__(
        self,
        partitions: Mapping[str, int] | None = None,
        default_partitions: int = STATUS_PARTITIONS,
        fail: Exception | Callable[[Sequence[str]], Exception | None] | None = None,
    ) -> None:
        self.partition_counts = dict(partitions or {})
        self.default_partitions = default_partitions
        self.fail = fail
        self.logs: dict[tuple[str, int], list[LogRecord]] = {}
        self.starts: dict[tuple[str, int], int] = {}
        self.reads: list[dict[tuple[str, int], tuple[int | None, int]]] = []
        self.closed = False

    def create(self, topic: str, partitions: int | None = None) -> None:
        self.partition_counts.setdefault(topic, partitions or self.default_partitions)

    def partition_count(self, topic: str) -> int:
        self.create(topic)
        return self.partition_counts[topic]

    def append(
        self, topic: str, partition: int, key: bytes | None, value: bytes | None, timestamp: int | None = None
    ) -> tuple[int, int]:
        """Append one record to ``topic``'s ``partition``; its ``(partition, offset)``."""
        self.create(topic)
        log = self.logs.setdefault((topic, partition), [])
        offset = len(log) + self.starts.get((topic, partition), 0) if not log else log[-1].offset + 1
        when = int(time.time() * 1000) if timestamp is None else timestamp
        log.append(LogRecord(topic, partition, offset, when, key, value))
        return partition, offset

    def append_keyed(
        self, topic: str, key: bytes, value: bytes | None, timestamp: int | None = None
    ) -> tuple[int, int]:
        """Append a keyed record where the Java producer would put it."""
        return self.append(topic, partition_for_key(key, self.partition_count(topic)), key, value, timestamp)

    def truncate(self, topic: str, partition: int, start: int) -> None:
        """Drop the records below ``start`` (retention): the partition's log start becomes ``start``."""
        log = self.logs.get((topic, partition), [])
        self.logs[(topic, partition)] = [r for r in log if r.offset >= start]
        self.starts[(topic, partition)] = start

    def end(self, topic: str, partition: int) -> int:
        log = self.logs.get((topic, partition), [])
        return log[-1].offset + 1 if log else self.starts.get((topic, partition), 0)

    def _check(self, topics: Sequence[str]) -> None:
        error = self.fail(topics) if callable(self.fail) else self.fail
        if error is not None:
            raise error
        for topic in topics:
            if topic not in self.partition_counts:
                raise TopicNotFoundError(f"topic {topic!r} does not exist")

    def offsets(self, topics: Sequence[str], timeout_ms: int | None = None) -> TopicOffsets:
        self._check(topics)
        partitions = [(t, p) for t in dict.fromkeys(topics) for p in range(self.partition_counts[t])]
        return TopicOffsets(
            {tp: self.starts.get(tp, 0) for tp in partitions},
            {tp: self.end(*tp) for tp in partitions},
            time.monotonic(),
        )

    def read(
        self, ranges: Mapping[tuple[str, int], tuple[int | None, int]], timeout_ms: int | None = None
    ) -> list[LogRecord]:
        self._check(sorted({topic for topic, _ in ranges}))
        wanted = {tp: (start, end) for tp, (start, end) in ranges.items() if end > (start or 0)}
        if wanted:  # as the real reader, which asks Kafka nothing for empty ranges
            self.reads.append(wanted)
        return [
            record
            for (topic, partition), (start, end) in ranges.items()
            for record in self.logs.get((topic, partition), [])
            if (start is None or record.offset >= start) and record.offset < end
        ]

    def close(self) -> None:
        self.closed = True
