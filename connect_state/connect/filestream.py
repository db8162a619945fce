"""Kafka's FileStream connectors (``connect-file``): their classes, configs, source partitions and offsets, and their
``alterOffsets`` checks, which are the only connectors' ``alterOffsets`` connect-state knows.

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

from connect_state.connect.connector_types import is_alias_of
from connect_state.formats.javalang import java_trim
from connect_state.formats.offsets import BadOffsetsRequest, OffsetPair

__all__ = [
    "FILENAME_FIELD",
    "FILE_CONFIG",
    "FILE_SINK_CLASS",
    "FILE_SOURCE_CLASS",
    "POSITION_FIELD",
    "TOPIC_CONFIG",
    "file_stream_source_alter_offsets",
    "sink_connector_alter_offsets",
    "source_connector_alter_offsets",
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
    """``FileStreamSourceConnector.alterOffsets``: its checks, in its order, as 500s (``ConnectException``); true."""
    filename = config.get(FILE_CONFIG)  # ConfigDef trims string values
    if not isinstance(filename, str) or java_trim(filename) == "":
        raise BadOffsetsRequest(
            f"Offsets cannot be modified if the '{FILE_CONFIG}' configuration is unspecified. This is because stdin "
            "is used for input and offsets are not tracked.",
            500,
        )
    for partition, offset in pairs:
        if offset is None:
            continue  # tombstones are allowed for anything, so that garbage can be cleaned up
        if POSITION_FIELD not in offset:
            raise BadOffsetsRequest(f"Offset objects should either be null or contain the key '{POSITION_FIELD}'", 500)
        position = offset[POSITION_FIELD]
        if not isinstance(position, int) or isinstance(position, bool):  # normalised: every integer is a Long
            raise BadOffsetsRequest(
                f"The value for the '{POSITION_FIELD}' key in the offset is expected to be a Long value", 500
            )
        if position < 0:
            raise BadOffsetsRequest(
                f"The value for the '{POSITION_FIELD}' key in the offset should be a non-negative value", 500
            )
        if partition is None:
            raise BadOffsetsRequest("Partition objects cannot be null", 500)
        if FILENAME_FIELD not in partition:
            raise BadOffsetsRequest(f"Partition objects should contain the key '{FILENAME_FIELD}'", 500)
    return True


def source_connector_alter_offsets(
    connector_class: str | None, config: Mapping[str, object], pairs: list[OffsetPair]
) -> bool:
    """``SourceConnector.alterOffsets(config, normalizedOffsets)`` for the classes we know.

    ``FileStreamSourceConnector`` (by its class name or an alias) checks the pairs (:class:`BadOffsetsRequest` 500
    with its message) and returns true (short success message); any other class gets the default, false (Connect's
    long success message). A connector that overrides ``alterOffsets`` to refuse some offsets cannot be imitated
    without its code. The pairs are checked in request order; Connect iterates its ``HashMap`` (a documented
    difference when several entries are bad).
    """
    if is_alias_of(connector_class, FILE_SOURCE_CLASS):
        return file_stream_source_alter_offsets(config, pairs)
    return False


def sink_connector_alter_offsets(connector_class: str | None) -> bool:
    """``SinkConnector.alterOffsets``: ``FileStreamSinkConnector`` accepts anything and returns true; the default is
    false."""
    return is_alias_of(connector_class, FILE_SINK_CLASS)
