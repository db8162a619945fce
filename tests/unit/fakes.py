"""In-memory stand-ins shared by the API unit tests (no broker in unit tests; the integration tests use real ones)."""

from __future__ import annotations

from collections.abc import Sequence

from connect_state.partitioner import partition_for_key

STATUS_PARTITIONS = 5  # Connect's default status.storage.partitions


class RecordingWriter:
    """A stand-in for :class:`~connect_state.kafka_writer.InternalTopicWriter`: records every send and answers the
    ``(partition, offset)`` of each record, placed as the Java producer would place it on a topic of ``partitions``.
    """

    def __init__(self, fail: Exception | None = None, partitions: int = STATUS_PARTITIONS) -> None:
        self.sends: list[tuple[str, list[tuple[bytes, bytes | None]], int | None]] = []
        self.fail = fail
        self.partitions = partitions
        self.closed = False

    def send(
        self, topic: str, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int | None = None
    ) -> list[tuple[int, int]]:
        if self.fail is not None:
            raise self.fail
        self.sends.append((topic, list(records), timeout_ms))
        return [(partition_for_key(key, self.partitions), offset) for offset, (key, _) in enumerate(records)]

    def close(self) -> None:
        self.closed = True

    @property
    def keys(self) -> list[bytes]:
        return [key for _, records, _ in self.sends for key, _ in records]

    @property
    def placements(self) -> list[tuple[bytes, int]]:
        """``(key, partition)`` of every record sent, as the Java producer would place it."""
        return [(key, partition_for_key(key, self.partitions)) for key in self.keys]
