"""A KIP-910 heartbeat provider for Kafka's FileStream source, used by the demo (``make run``).

``FileStreamSourceTask`` keeps one source partition per file, ``{"filename": <file>}``, with the offset
``{"position": <bytes read>}``. When the file has had no new line for the heartbeat interval, this provider sends one
heartbeat record naming the file and the position, and commits the same offset again (the KIP's use: keep the
committed offset fresh while the source is quiet)::

    key     b'/path/input.txt'
    value   b'{"connector":"demo-source","filename":"/path/input.txt","position":1234}'

Register it with ``heartbeat.providers=org.apache.kafka.connect.file.FileStreamSourceConnector=``
``connect_state.dev.demo_heartbeats:provider``.
"""

from __future__ import annotations

from collections.abc import Mapping

from connect_state.connect.filestream import FILENAME_FIELD, POSITION_FIELD
from connect_state.heartbeats.provider import HeartbeatProvider, HeartbeatRecord


class FileStreamHeartbeatProvider(HeartbeatProvider):
    """One record per idle file: the file name as key, connector/file/position as JSON value; same offset again."""

    def produce_heartbeat_records(
        self,
        connector: str,
        config: Mapping[str, object],
        partition: Mapping[str, object],
        last_offset: Mapping[str, object] | None,
    ) -> list[HeartbeatRecord]:
        filename = partition.get(FILENAME_FIELD)
        if not isinstance(filename, str):
            return []  # not a FileStream partition (the stdin source has none)
        position = last_offset.get(POSITION_FIELD) if last_offset is not None else None
        value = {"connector": connector, FILENAME_FIELD: filename, POSITION_FIELD: position}
        return [HeartbeatRecord(key=filename, value=value, source_offset=last_offset)]


provider = FileStreamHeartbeatProvider()
