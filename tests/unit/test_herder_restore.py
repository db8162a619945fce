"""The offsets restore as of a time (connect_state/herder/restore.py) without Flask, over :class:`FakeHerderIO` and a
history in memory: its refusals in order (404, not STOPPED with apply, a time before the history kept), the dry run
(any state, nothing written), the difference per partition (altered, restored, reset, unchanged), and what apply
writes for a source and a sink. Through the REST API: tests/unit/test_api_offsets_restore.py; against the real
worker: tests/integration/test_offsets_restore_connect.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from connect_state.connect import rest
from connect_state.core.settings import Settings
from connect_state.core.vocabulary import ConnectorType
from connect_state.formats.config import connector_config_key, serialize_connector_config, task_config_records
from connect_state.formats.offsets import offset_key_bytes, serialize_offset_value
from connect_state.herder import BadRequestError, Herder, NotFoundError, RestoreChange
from connect_state.herder.restore import offsets_difference, restore_before_history_message
from tests.unit.fakes import FakeAdmin, FakeHerderIO, InMemoryTopics, RecordingWriter
from tests.unit.test_herder_offsets import SINK, SOURCE, stopped

KEPT_FROM = 1_000
AT = 5_000


class History:
    """An :class:`~connect_state.herder.restore.OffsetsHistory` in memory; records what was asked."""

    def __init__(self, kept_from: int | None, entries: list[dict[str, Any]]) -> None:
        self.kept = kept_from
        self.entries = entries
        self.asked: list[tuple[str, ConnectorType, int]] = []

    def kept_from(self, name: str) -> int | None:
        return self.kept

    def offsets_as_of(self, name: str, kind: ConnectorType, config: Mapping[str, Any], at: int) -> list[Any]:
        self.asked.append((name, kind, at))
        return self.entries


@pytest.fixture
def admin() -> FakeAdmin:
    return FakeAdmin(groups=["connect-snk"])  # its group has ("t", 0) at 5


@pytest.fixture
def io(settings: Settings, kafka_log: InMemoryTopics, writer: RecordingWriter, admin: FakeAdmin) -> FakeHerderIO:
    return FakeHerderIO(settings, kafka_log, writer, admin)


def source_now(io: FakeHerderIO, name: str, offsets: Mapping[str, int]) -> None:
    """The source's offsets now (the fresh ``source_offsets`` rows): file -> position."""
    topic = io.settings.offset_storage_topic
    io.sources[name] = [
        {
            "offsets_topic": topic,
            "key": offset_key_bytes(name, {"filename": file}),
            "value": serialize_offset_value({"position": position}),
            "listed": True,
        }
        for file, position in offsets.items()
    ]


def entry(file: str, position: int) -> dict[str, Any]:
    return {"partition": {"filename": file}, "offset": {"position": position}}


# --- refusals, in order ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("apply", [False, True])
def test_an_unknown_connector_is_404(io: FakeHerderIO, writer: RecordingWriter, apply: bool) -> None:
    with pytest.raises(NotFoundError) as refused:
        Herder(io.settings, io).restore_connector_offsets("nope", AT, History(KEPT_FROM, []), apply)
    assert refused.value.message == rest.connector_not_found_message("nope")
    assert writer.sends == []


def test_apply_needs_a_stopped_connector_before_anything_is_read(io: FakeHerderIO, writer: RecordingWriter) -> None:
    for key, value in [(connector_config_key("src"), serialize_connector_config(SOURCE))]:
        io.topics.append(io.settings.config_storage_topic, 0, key.encode(), value)
    for key, value in task_config_records("src", [{}]):
        io.topics.append(io.settings.config_storage_topic, 0, key.encode(), value)
    history = History(None, [entry("/a", 1)])  # no history either: the STOPPED check comes first
    with pytest.raises(BadRequestError) as refused:
        Herder(io.settings, io).restore_connector_offsets("src", AT, history, apply=True)
    assert refused.value.message == rest.not_stopped_message("src")
    assert history.asked == [] and writer.sends == []
    # A dry run is answered while it runs.
    source_now(io, "src", {"/a": 9})
    history.kept = KEPT_FROM
    restore = Herder(io.settings, io).restore_connector_offsets("src", AT, history, apply=False)
    assert [p.change for p in restore.partitions] == [RestoreChange.ALTERED]
    assert not restore.applied and writer.sends == []


@pytest.mark.parametrize("kept_from", [None, AT + 1], ids=["no-history", "before-history"])
@pytest.mark.parametrize("apply", [False, True])
def test_a_time_before_the_history_kept_is_400(
    io: FakeHerderIO, writer: RecordingWriter, kept_from: int | None, apply: bool
) -> None:
    stopped(io, "src", SOURCE)
    source_now(io, "src", {"/a": 9})
    history = History(kept_from, [entry("/a", 1)])
    with pytest.raises(BadRequestError) as refused:
        Herder(io.settings, io).restore_connector_offsets("src", AT, history, apply)
    assert refused.value.message == restore_before_history_message("src", AT, kept_from)
    assert history.asked == [] and writer.sends == []
    if kept_from is not None:
        assert "starts at 1970-01-01T00:00:05.001Z (5001)" in refused.value.message


# --- the difference --------------------------------------------------------------------------------------------------


def test_the_difference_per_partition() -> None:
    current = [
        entry("/same", 1),
        entry("/moved", 9),
        entry("/new", 3),
        {"partition": {"filename": "/null"}, "offset": None},
    ]
    target = [entry("/same", 1), entry("/moved", 4), entry("/gone", 7)]
    changes = {p.partition["filename"]: (p.change, p.current, p.restored) for p in offsets_difference(current, target)}
    assert changes == {
        "/same": (RestoreChange.UNCHANGED, {"position": 1}, {"position": 1}),
        "/moved": (RestoreChange.ALTERED, {"position": 9}, {"position": 4}),
        "/new": (RestoreChange.RESET, {"position": 3}, None),
        "/gone": (RestoreChange.RESTORED, None, {"position": 7}),
    }


# --- apply -----------------------------------------------------------------------------------------------------------


def test_a_source_restore_writes_the_difference(io: FakeHerderIO, writer: RecordingWriter) -> None:
    stopped(io, "src", SOURCE)
    source_now(io, "src", {"/same": 1, "/moved": 9, "/new": 3})
    history = History(KEPT_FROM, [entry("/same", 1), entry("/moved", 4), entry("/gone", 7)])
    restore = Herder(io.settings, io).restore_connector_offsets("src", AT, history, apply=True)
    assert restore.applied and history.asked == [("src", ConnectorType.SOURCE, AT)]
    assert "restored to 1970-01-01T00:00:05.000Z" in restore.message
    topic = io.settings.offset_storage_topic
    written = sorted((t, k, v) for t, records in writer.batches for k, v in records)
    expected = [
        (topic, offset_key_bytes("src", {"filename": "/moved"}), serialize_offset_value({"position": 4})),
        (topic, offset_key_bytes("src", {"filename": "/gone"}), serialize_offset_value({"position": 7})),
        (topic, offset_key_bytes("src", {"filename": "/new"}), None),
    ]
    assert written == sorted(expected)


def test_nothing_to_restore_writes_nothing(io: FakeHerderIO, writer: RecordingWriter) -> None:
    stopped(io, "src", SOURCE)
    source_now(io, "src", {"/a": 4})
    restore = Herder(io.settings, io).restore_connector_offsets("src", AT, History(KEPT_FROM, [entry("/a", 4)]), True)
    assert not restore.applied and restore.changes == [] and writer.sends == []


def test_a_sink_restore_alters_and_deletes_group_offsets(io: FakeHerderIO, admin: FakeAdmin) -> None:
    stopped(io, "snk", SINK)  # the group has ("t", 0) at 5 now
    target = [{"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": {"kafka_offset": 2}}]
    restore = Herder(io.settings, io).restore_connector_offsets("snk", AT, History(KEPT_FROM, target), apply=True)
    assert {p.change for p in restore.partitions} == {RestoreChange.RESET, RestoreChange.RESTORED}
    assert admin.calls[1:] == [
        ("alter_group_offsets", "connect-snk", {("t", 1): 2}),
        ("delete_group_offsets", "connect-snk", [("t", 0)]),
    ]
