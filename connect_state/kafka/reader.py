"""Reading back one key's records of the offsets topic, as Connect's ``KafkaOffsetBackingStore`` would see them.

:class:`OffsetsTopicReader` answers "was this key written after that record?": the heartbeat emitter asks it before
a heartbeat (the fold's view may lag by a micro-batch). One kafka-python ``KafkaConsumer`` per reader (no group,
``read_committed``), created on first use. Errors are typed (:mod:`connect_state.core.errors`).
"""

from __future__ import annotations

import time

from kafka import KafkaConsumer, TopicPartition
from kafka import errors as kafka_errors

from connect_state.core.errors import KafkaWriteTimeout, RecordFormatError, describe_error
from connect_state.core.settings import Settings
from connect_state.formats.offsets import offset_key_bytes, parse_offset_key
from connect_state.kafka.admin import SafeConsumer
from connect_state.kafka.errors import CLIENT_CALL_ERRORS, client_error, unreachable, write_error
from connect_state.kafka.log import reader_consumer_config

CLIENT_ID = "connect-state-heartbeat-offsets-reader"


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
            config = reader_consumer_config(self.settings, CLIENT_ID)
            config.setdefault("bootstrap_timeout_ms", self.timeout_ms)  # unless the client properties name one
            try:
                self._consumer = SafeConsumer(**config)
            except kafka_errors.KafkaError as err:
                raise unreachable(err, self.settings.bootstrap_servers) from err
        return self._consumer

    def latest_offset(self, key: bytes, kafka_partition: int, after_offset: int) -> tuple[bool, bytes | None]:
        """Whether ``key`` was written to ``kafka_partition`` after ``after_offset``, and its last value if so.

        Raises :class:`KafkaWriteTimeout` when the records up to the end are not read within the timeout.
        """
        consumer = self._client()
        partition = TopicPartition(self.topic, kafka_partition)
        found, latest = False, None
        try:
            consumer.assign([partition])
            end = consumer.end_offsets([partition])[partition]
            if after_offset + 1 >= end:
                return found, latest
            consumer.seek(partition, after_offset + 1)
            deadline = time.monotonic() + self.timeout_ms / 1000
            while consumer.position(partition) < end:
                if time.monotonic() > deadline:
                    raise KafkaWriteTimeout(f"timed out reading {self.topic}-{kafka_partition} up to offset {end}")
                for records in consumer.poll(timeout_ms=500).values():
                    for record in records:
                        if record.offset < end and _lookup_key(record.key) == key:
                            found, latest = True, record.value
        except CLIENT_CALL_ERRORS as err:
            reason = describe_error(err)
            raise write_error(client_error(err))(f"cannot read {self.topic}-{kafka_partition}: {reason}") from err
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
