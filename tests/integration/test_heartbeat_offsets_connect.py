"""KIP-910's offsets-update form against the real worker: an offset committed without any record produced is what the
connector resumes from after a restart, for a connector on the worker's offsets topic and for one with its own
``offsets.storage.topic`` (committed there first, then to the worker's topic, as ``ConnectorOffsetBackingStore.set``).

The provider is registered for FileStreamSource and has only the offsets-update form: for an idle file it commits the
position after the file's first line ("rewind"), so the restarted source reads lines 2 and 3 again. A catch-up run of
the heartbeats job (the fold, then the heartbeats due at its end) finds the idle partitions and calls it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from connect_state.connect.filestream import FILE_SOURCE_CLASS
from connect_state.core.settings import Settings
from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.heartbeats.provider import HeartbeatProvider, SourceOffset
from connect_state.spark import heartbeats
from connect_state.spark.streaming import run_job
from tests.integration.helpers import (
    api_client,
    connect_offsets,
    continuous_job,
    create_topic,
    job_settings,
    read_topic,
    source_position,
    unique,
    wait_state,
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


class FirstOffset(HeartbeatProvider):
    """Offsets-update form only, for a timer-mode connector that has no offset yet: asked with no offsets, it commits
    the position after the first line of the connector's ``file`` (which does not exist yet)."""

    def update_offsets(
        self, connector: str, config: Mapping[str, object], offsets: Sequence[SourceOffset]
    ) -> list[SourceOffset]:
        if offsets:
            return []
        return [({"filename": str(config["file"])}, {"position": len(b"line 1\n")})]


FIRST_OFFSET = FirstOffset()


def test_timer_mode_commits_an_offset_before_the_connector_has_any(spark, connect, stack_settings, tmp_path, created):
    """KIP-910's timer fires every interval per connector, also before its task has committed anything: the provider
    is asked with no offsets, its offset is the connector's first, and the source starts from it. The continuous job's
    timer fires it (the connector has no partition, so no row of source_partition_activity)."""
    settings = job_settings(
        stack_settings,
        tmp_path,
        **{
            "heartbeat.interval.ms": "600000",  # only this test's connector (its own interval) is due
            "heartbeat.records.topic": unique("kip910-timer-heartbeats"),
            "heartbeat.providers": f"{FILE_SOURCE_CLASS}=tests.integration.test_heartbeat_offsets_connect:FIRST_OFFSET",
            "trigger.interval": "1000 milliseconds",
        },
    )
    api = api_client(settings)
    name, topic = unique("kip910-timer"), unique("kip910-timer-topic")
    file = tmp_path / f"{name}.txt"  # not there yet: the task runs and commits nothing
    config = {"heartbeat.interval.ms": str(INTERVAL_MS), "heartbeat.mode": "timer"}
    connect.create_connector(name, file_source_config(name, file, topic, **config))
    created.append(name)
    wait_state(connect, name, "RUNNING", 1)
    assert connect_offsets(connect, name) == []

    def committed() -> bool:
        rows = api.get(f"/connectors/{name}/heartbeats?limit=100").get_json().get("heartbeats", [])
        return any(row["outcome"] == "offsets_committed" for row in rows)

    with continuous_job(heartbeats.HeartbeatsJob(), spark, settings):
        connect.wait_for(committed, WAIT_S * 2, interval=1.0, description="the timer fired and the offset committed")
    connect.wait_for(
        lambda: connect_offsets(connect, name) == [{"partition": {"filename": str(file)}, "offset": {"position": 7}}],
        WAIT_S,
        description="Connect reads the offset the timer committed",
    )
    assert topic_values(settings, settings.heartbeat_records_topic) == []  # nothing was produced

    # Stopped, given its file, resumed: the source starts from the committed offset, after line 1.
    assert connect.put(connect.connector_path(name, "stop"))[0] == 204
    wait_state(connect, name, "STOPPED", 0)
    append_lines(file, ["line 1", "line 2", "line 3"])
    assert connect.put(connect.connector_path(name, "resume"))[0] == 202
    connect.wait_for(
        lambda: len(topic_values(settings, topic)) >= 2, WAIT_S, description=f"{name} read its file from the offset"
    )
    assert [v.strip(b'"') for v in topic_values(settings, topic)] == [b"line 2", b"line 3"]
