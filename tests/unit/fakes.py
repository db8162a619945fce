"""In-memory stand-ins shared by the unit tests (no broker in unit tests; the integration tests use real ones).

* :class:`RecordingWriter`: the one fake Kafka writer (the API's ``RecordWriter``, the heartbeat offset sender);
* :class:`InMemoryTables`: the one in-memory table fake (the API's ``TableSource``), filtered by the real reader.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from connect_state.api.tables import TableReader, missing_table_message
from connect_state.errors import TableNotFoundError
from connect_state.kafka.partitioner import partition_for_key
from connect_state.tables import TableSpec

STATUS_PARTITIONS = 5  # Connect's default status.storage.partitions

Record = tuple[bytes, bytes | None]


class RecordingWriter:
    """A stand-in for :class:`~connect_state.kafka.InternalTopicWriter`: records every send and answers the
    ``(partition, offset)`` of each record, placed as the Java producer would place it on a topic of ``partitions``.

    ``fail`` makes sends fail: an exception, or a function of the topic returning one (or None to let it through).
    """

    def __init__(
        self,
        fail: Exception | Callable[[str], Exception | None] | None = None,
        partitions: int = STATUS_PARTITIONS,
    ) -> None:
        self.sends: list[tuple[str, list[Record], int | None]] = []
        self.fail = fail
        self.partitions = partitions
        self.closed = False

    def send(self, topic: str, records: Sequence[Record], timeout_ms: int | None = None) -> list[tuple[int, int]]:
        error = self.fail(topic) if callable(self.fail) else self.fail
        if error is not None:
            raise error
        self.sends.append((topic, list(records), timeout_ms))
        return [(partition_for_key(key, self.partitions), offset) for offset, (key, _) in enumerate(records)]

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


class InMemoryTables(TableReader):
    """A :class:`~connect_state.api.tables.TableReader` whose tables are rows in memory instead of Delta tables.

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
