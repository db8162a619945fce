"""Configs of Kafka's FileStream connectors (``connect-file``) for the demo, the tests and the benchmarks."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from connect_state.connect.connector_types import CONNECTOR_CLASS_CONFIG
from connect_state.connect.filestream import FILE_CONFIG, FILE_SINK_CLASS, FILE_SOURCE_CLASS, TOPIC_CONFIG

STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


def file_source_config(name: str, file: Path, topic: str, **extra: str) -> dict[str, str]:
    """A FileStreamSource that writes each line appended to ``file`` to ``topic`` (one task)."""
    return {
        "name": name,
        CONNECTOR_CLASS_CONFIG: FILE_SOURCE_CLASS,
        "tasks.max": "1",
        FILE_CONFIG: str(file),
        TOPIC_CONFIG: topic,
        "key.converter": STRING_CONVERTER,
        "value.converter": STRING_CONVERTER,
        **extra,
    }


def file_sink_config(name: str, file: Path, topics: Iterable[str], **extra: str) -> dict[str, str]:
    """A FileStreamSink that appends every record of ``topics`` to ``file`` (one task)."""
    return {
        "name": name,
        CONNECTOR_CLASS_CONFIG: FILE_SINK_CLASS,
        "tasks.max": "1",
        FILE_CONFIG: str(file),
        "topics": ",".join(topics),
        "key.converter": STRING_CONVERTER,
        "value.converter": STRING_CONVERTER,
        **extra,
    }


def append_lines(file: Path, lines: Iterable[str]) -> None:
    """Append lines to a source file (the FileStreamSource picks them up on its next poll)."""
    with file.open("a", encoding="utf-8") as out:
        for line in lines:
            out.write(line + "\n")
