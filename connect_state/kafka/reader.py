"""Reading back one key's records of the offsets topic, as Connect's ``KafkaOffsetBackingStore`` would see them.

:class:`OffsetsTopicReader` answers "was this key written after that record?": the heartbeat emitter asks it before
a heartbeat (the fold's view may lag by a micro-batch). It reads through a :class:`~connect_state.kafka.log.
TopicLogReader` (one consumer, no group, ``read_committed``, created on first use); errors are typed
(:mod:`connect_state.core.errors`).
"""

from __future__ import annotations

from connect_state.core.errors import RecordFormatError
from connect_state.core.settings import Settings
from connect_state.formats.offsets import offset_key_bytes, parse_offset_key
from connect_state.kafka.log import TopicLogReader

CLIENT_ID = "connect-state-heartbeat-offsets-reader"


class OffsetsTopicReader:
    """Reads the offsets-topic records of one key written after a known record (the fold's view may lag by a
    micro-batch): ``latest_offset`` -> ``(found, value)``, comparing keys as Connect looks them up."""

    def __init__(self, settings: Settings, timeout_ms: int | None = None) -> None:
        self.topic = settings.offset_storage_topic
        timeout_ms = settings.api_kafka_write_timeout_ms if timeout_ms is None else timeout_ms
        self.log = TopicLogReader(settings, client_id=CLIENT_ID, timeout_ms=timeout_ms)

    def latest_offset(self, key: bytes, kafka_partition: int, after_offset: int) -> tuple[bool, bytes | None]:
        """Whether ``key`` was written to ``kafka_partition`` after ``after_offset``, and its last value if so.

        Raises :class:`KafkaWriteTimeout` when the records up to the end are not read within the timeout.
        """
        partition = (self.topic, kafka_partition)
        end = self.log.offsets([self.topic]).ends[partition]
        records = self.log.read({partition: (after_offset + 1, end)})
        values = [record.value for record in records if _lookup_key(record.key) == key]
        return (True, values[-1]) if values else (False, None)

    def close(self) -> None:
        self.log.close()


def _lookup_key(raw: bytes | None) -> bytes | None:
    """The bytes Connect looks a raw offsets key up with (None for keys it ignores)."""
    try:
        parsed = parse_offset_key(raw)
    except RecordFormatError:
        return None
    return offset_key_bytes(parsed.connector, parsed.partition) if parsed.partition is not None else None
