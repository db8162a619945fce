"""Kafka's FileStream connectors (``connect-file``): their classes, configs, source partitions and offsets, and their
``alterOffsets`` checks (registered as built-in rules in :mod:`connect_state.connect.alter_offsets`).

* ``FileStreamSourceConnector`` reads the lines appended to ``file`` (stdin when unset) into ``topic``; its task keeps
  one source partition per file, ``{"filename": <file>}``, with the offset ``{"position": <bytes read>}``
  (``FileStreamSourceTask``). Its ``alterOffsets`` checks the offsets (:func:`file_stream_source_alter_offsets`) and
  returns true.
* ``FileStreamSinkConnector`` appends every record of its ``topics`` to ``file``; its ``alterOffsets`` accepts
  anything and returns true.

A connector's ``alterOffsets`` returning true gives the short success message of the offsets endpoints
(:func:`connect_state.connect.rest.offsets_success_message`); the default (false) the long "framework-managed" one.
Config builders for the demo and the tests are in :mod:`connect_state.dev.filestream`.
"""

from __future__ import annotations

from collections.abc import Mapping

from connect_state.core.errors import AlterOffsetsRejected
from connect_state.formats.javalang import java_trim
from connect_state.formats.offsets import OffsetPair

__all__ = [
    "FILENAME_FIELD",
    "FILE_CONFIG",
    "FILE_SINK_CLASS",
    "FILE_SOURCE_CLASS",
    "POSITION_FIELD",
    "TOPIC_CONFIG",
    "file_stream_sink_alter_offsets",
    "file_stream_source_alter_offsets",
]

FILE_SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"
#: ``FileStreamSourceConnector.FILE_CONFIG`` / ``FileStreamSinkConnector.FILE_CONFIG``.
FILE_CONFIG = "file"
#: ``FileStreamSourceConnector.TOPIC_CONFIG``.
TOPIC_CONFIG = "topic"
#: ``FileStreamSourceTask.FILENAME_FIELD``: the key of a source partition.
FILENAME_FIELD = "filename"
#: ``FileStreamSourceTask.POSITION_FIELD``: the key of a source offset.
POSITION_FIELD = "position"


def file_stream_source_alter_offsets(config: Mapping[str, object], pairs: list[OffsetPair]) -> bool:
    """``FileStreamSourceConnector.alterOffsets``: its checks, in its order, as ``ConnectException`` (Connect's 500,
    :class:`~connect_state.core.errors.AlterOffsetsRejected`); true."""
    filename = config.get(FILE_CONFIG)  # ConfigDef trims string values
    if not isinstance(filename, str) or java_trim(filename) == "":
        raise AlterOffsetsRejected(
            f"Offsets cannot be modified if the '{FILE_CONFIG}' configuration is unspecified. This is because stdin "
            "is used for input and offsets are not tracked."
        )
    for partition, offset in pairs:
        if offset is None:
            continue  # tombstones are allowed for anything, so that garbage can be cleaned up
        if POSITION_FIELD not in offset:
            raise AlterOffsetsRejected(f"Offset objects should either be null or contain the key '{POSITION_FIELD}'")
        position = offset[POSITION_FIELD]
        if not isinstance(position, int) or isinstance(position, bool):  # normalised: every integer is a Long
            raise AlterOffsetsRejected(
                f"The value for the '{POSITION_FIELD}' key in the offset is expected to be a Long value"
            )
        if position < 0:
            raise AlterOffsetsRejected(
                f"The value for the '{POSITION_FIELD}' key in the offset should be a non-negative value"
            )
        if partition is None:
            raise AlterOffsetsRejected("Partition objects cannot be null")
        if FILENAME_FIELD not in partition:
            raise AlterOffsetsRejected(f"Partition objects should contain the key '{FILENAME_FIELD}'")
    return True


def file_stream_sink_alter_offsets(config: Mapping[str, object], offsets: Mapping[tuple[str, int], int | None]) -> bool:
    """``FileStreamSinkConnector.alterOffsets``: accepts anything, returns true."""
    return True
