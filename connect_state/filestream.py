"""Configs of Kafka's FileStream connectors (``connect-file``), used by the demo, the tests and the benchmarks."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

FILE_SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


def file_source_config(name: str, file: Path, topic: str, **extra: str) -> dict[str, str]:
    """A FileStreamSource that writes each line appended to ``file`` to ``topic`` (one task)."""
    return {
        "name": name,
        "connector.class": FILE_SOURCE_CLASS,
        "tasks.max": "1",
        "file": str(file),
        "topic": topic,
        "key.converter": STRING_CONVERTER,
        "value.converter": STRING_CONVERTER,
        **extra,
    }


def file_sink_config(name: str, file: Path, topics: Iterable[str], **extra: str) -> dict[str, str]:
    """A FileStreamSink that appends every record of ``topics`` to ``file`` (one task)."""
    return {
        "name": name,
        "connector.class": FILE_SINK_CLASS,
        "tasks.max": "1",
        "file": str(file),
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
