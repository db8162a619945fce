"""KIP-910's offsets-update form against the real worker: an offset committed without any record produced is what the
connector resumes from after a restart, for a connector on the worker's offsets topic and for one with its own
``offsets.storage.topic`` (committed there first, then to the worker's topic, as ``ConnectorOffsetBackingStore.set``).

The provider is registered for FileStreamSource and has only the offsets-update form: for an idle file it commits the
position after the file's first line ("rewind"), so the restarted source reads lines 2 and 3 again. A catch-up run of
the heartbeats job (the fold, then the sweep) finds the idle partitions and calls it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from connect_state.connect.filestream import FILE_SOURCE_CLASS
from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.heartbeats import HeartbeatProvider, SourceOffset
from connect_state.settings import Settings
from connect_state.spark import heartbeats
from connect_state.spark.streaming import run_job
from tests.integration.helpers import (
    api_client,
    connect_offsets,
    create_topic,
    job_settings,
    read_topic,
    source_position,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]
WAIT_S = 90.0
INTERVAL_MS = 2000


class RewindOffsets(HeartbeatProvider):
    """Offsets-update form only: the position after the file's first line, for every partition given."""

    def update_offsets(
        self, connector: str, config: Mapping[str, object], offsets: Sequence[SourceOffset]
    ) -> list[SourceOffset]:
        updates: list[SourceOffset] = []
        for partition, _offset in offsets:
            with open(str(partition["filename"]), "rb") as file:
                updates.append((dict(partition), {"position": len(file.readline())}))
        return updates


PROVIDER = RewindOffsets()
PROVIDERS = f"{FILE_SOURCE_CLASS}=tests.integration.test_heartbeat_offsets_connect:PROVIDER"


def topic_values(settings: Settings, topic: str) -> list[bytes]:
    return [record.value for record in read_topic(settings.bootstrap_servers, topic)]


def test_offsets_committed_without_records_are_where_the_sources_resume(
    spark, connect, stack_settings, tmp_path: Path, created
):
    settings = job_settings(
        stack_settings,
        tmp_path,
        **{
            "heartbeat.interval.ms": "600000",  # only this test's connectors (their own interval) are due
            "heartbeat.records.topic": unique("kip910-heartbeats"),
            "heartbeat.providers": PROVIDERS,
        },
    )
    api = api_client(settings)
    own_offsets = unique("kip910-own-offsets")
    create_topic(settings, own_offsets, 1, compacted=True)
    sources: dict[str, tuple[Path, str]] = {}
    for label, extra in (("worker", {}), ("own", {"offsets.storage.topic": own_offsets})):
        name, topic = unique(f"kip910-{label}"), unique(f"kip910-{label}-topic")
        file = tmp_path / f"{name}.txt"
        append_lines(file, ["line 1", "line 2", "line 3"])
        connect.create_connector(
            name, file_source_config(name, file, topic, **{"heartbeat.interval.ms": str(INTERVAL_MS), **extra})
        )
        created.append(name)
        sources[name] = (file, topic)
    for name, (file, _topic) in sources.items():
        size = file.stat().st_size
        connect.wait_for(lambda n=name, s=size: source_position(connect, n) == s, WAIT_S, description=f"{name} read")
    time.sleep(INTERVAL_MS / 1000 + 0.5)  # idle for one interval

    assert run_job(heartbeats.HeartbeatsJob(), spark, settings, True, timeout_s=240) == 0
    first_line = len(b"line 1\n")
    for name, (_file, _topic) in sources.items():
        rows = api.get(f"/connectors/{name}/heartbeats?limit=100").get_json()["heartbeats"]
        # a second due time in the same run finds the offset moved (by our own commit) and skips: never a record
        outcomes = {row["outcome"] for row in rows}
        assert "offsets_committed" in outcomes and outcomes <= {"offsets_committed", "skipped"}, rows
        # Connect reads the committed offset (for the own-topic connector: from its own topic)
        connect.wait_for(
            lambda n=name: [e["offset"] for e in connect_offsets(connect, n)] == [{"position": first_line}],
            WAIT_S,
            description=f"{name} offset rewound by the heartbeat",
        )
    assert topic_values(settings, settings.heartbeat_records_topic) == []  # nothing was produced

    # Restarted, each source resumes from the committed offset: lines 2 and 3 once more.
    for name in sources:
        status, _body = connect.post(connect.connector_path(name, "restart") + "?includeTasks=true")
        assert status in (202, 204)
    for name, (_file, topic) in sources.items():

        def resumed(t: str = topic) -> Any:
            values = topic_values(settings, t)
            return values if len(values) >= 5 else None

        connect.wait_for(resumed, WAIT_S, description=f"{name} resumed from the heartbeat's offset")
        assert [v.strip(b'"') for v in topic_values(settings, topic)] == [
            b"line 1",
            b"line 2",
            b"line 3",
            b"line 2",
            b"line 3",
        ]
