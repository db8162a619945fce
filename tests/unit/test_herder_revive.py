"""A deleted connector brought back (connect_state/herder/revive.py) without Flask, over :class:`FakeHerderIO` and a
history in memory: its refusals in order (409 when it exists, 404 without a deletion, 400 without a config at or
before the time, 404 when the config was not kept), the records written (target state first, then the config, secrets
as written), the version chosen with and without ``at``, and the cleanup hooks that already ran. With its offsets:
the time they are read as of (the deletion's by default and for an ``at`` after it), written after the config as PATCH
writes them (a partition without an offset then is reset), STOPPED only, a sink's group with members a 409 writing
nothing, a failed offsets write saying the connector is back without them. Against the real worker:
tests/integration/test_connector_restore_connect.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from connect_state.connect import rest
from connect_state.core.errors import ConsumerGroupAdminError
from connect_state.core.settings import Settings
from connect_state.core.vocabulary import ConnectorType
from connect_state.formats.config import (
    connector_config_key,
    delete_records,
    serialize_connector_config,
    serialize_target_state,
    target_state_key,
)
from connect_state.formats.offsets import offset_key_bytes, serialize_offset_value
from connect_state.herder import (
    BadRequestError,
    ConflictError,
    ConnectError,
    Herder,
    InitialState,
    NotFoundError,
    RestoreChange,
)
from connect_state.herder.revive import (
    already_exists_message,
    group_has_members_message,
    no_deletion_message,
    offsets_need_stopped_message,
)
from tests.unit.fakes import FakeAdmin, FakeHerderIO, InMemoryTopics, RecordingWriter
from tests.unit.test_herder_offsets import SINK, SOURCE, history, stopped
from tests.unit.test_herder_restore import KEPT_FROM, entry, source_now
from tests.unit.test_herder_restore import History as OffsetsHistoryInMemory

V1 = {**SOURCE, "file": "/tmp/v1", "db.password": "s3cret"}
V2 = {**SOURCE, "file": "/tmp/v2", "db.password": "s3cret-2"}


def event(kind: str, offset: int, ts: int, config: dict[str, str] | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {"connector_class": SOURCE["connector.class"]}
    if config is not None:
        details["config"] = config
    return {"event": kind, "details": json.dumps(details), "kafka_offset": offset, "kafka_timestamp": ts}


class History:
    """A :class:`~connect_state.herder.revive.ConnectorHistory` in memory; records what was asked."""

    def __init__(self, events: list[dict[str, Any]], steps: dict[int, list[dict[str, Any]]] | None = None) -> None:
        self.events = events
        self.steps = steps or {}
        self.asked: list[object] = []

    def config_events(self, name: str) -> list[dict[str, Any]]:
        self.asked.append(name)
        return self.events

    def deletion_steps(self, name: str, deletion_offset: int) -> list[dict[str, Any]]:
        self.asked.append(deletion_offset)
        return self.steps.get(deletion_offset, [])


#: Created at 1000 (offset 0), reconfigured at 2000 (offset 3), deleted at 3000 (offset 6, last config V2).
EVENTS = [
    event("created", 0, 1_000, V1),
    event("reconfigured", 3, 2_000, V2),
    event("deleted", 6, 3_000, V2),
]


@pytest.fixture
def admin() -> FakeAdmin:
    return FakeAdmin(groups=["connect-snk"])  # its group has ("t", 0) at 5


@pytest.fixture
def io(settings: Settings, kafka_log: InMemoryTopics, writer: RecordingWriter, admin: FakeAdmin) -> FakeHerderIO:
    return FakeHerderIO(settings, kafka_log, writer, admin)


def written(writer: RecordingWriter) -> list[tuple[str, bytes, bytes | None]]:
    return [(topic, key, value) for topic, records, _ in writer.sends for key, value in records]


def test_an_existing_connector_is_409_and_nothing_is_read_or_written(io: FakeHerderIO, writer: RecordingWriter) -> None:
    stopped(io, "src", SOURCE)
    before = list(writer.sends)
    past = History(EVENTS)
    with pytest.raises(ConflictError) as refused:
        Herder(io.settings, io).restore_connector("src", None, InitialState.STOPPED, past)
    assert refused.value.message == already_exists_message("src") == "Connector src already exists"
    assert writer.sends == before and past.asked == []


def test_no_deletion_in_the_history_is_404(io: FakeHerderIO, writer: RecordingWriter) -> None:
    with pytest.raises(NotFoundError) as refused:
        Herder(io.settings, io).restore_connector("src", None, InitialState.STOPPED, History(EVENTS[:2]))
    assert refused.value.message == no_deletion_message("src")
    assert writer.sends == []


def test_a_time_before_any_config_is_400(io: FakeHerderIO, writer: RecordingWriter) -> None:
    with pytest.raises(BadRequestError, match="No config of connector src at or before"):
        Herder(io.settings, io).restore_connector("src", 999, InitialState.STOPPED, History(EVENTS))
    assert writer.sends == []


def test_a_config_not_kept_is_404(io: FakeHerderIO, writer: RecordingWriter) -> None:
    events = [event("created", 0, 1_000), event("deleted", 2, 2_000)]
    with pytest.raises(NotFoundError, match="is not kept"):
        Herder(io.settings, io).restore_connector("src", None, InitialState.STOPPED, History(events))
    assert writer.sends == []


def test_the_records_written_in_order_with_the_last_config_before_the_deletion(
    io: FakeHerderIO, writer: RecordingWriter
) -> None:
    history(io, (connector_config_key("src"), serialize_connector_config(V2)), *delete_records("src"))
    writer.sends.clear()
    restored = Herder(io.settings, io).restore_connector("src", None, InitialState.STOPPED, History(EVENTS))
    topic = io.settings.config_storage_topic
    assert written(writer) == [
        (topic, target_state_key("src").encode(), b'{"state":"PAUSED","state.v2":"STOPPED"}'),
        (topic, connector_config_key("src").encode(), serialize_connector_config(V2)),
    ]
    assert b'"db.password":"s3cret-2"' in written(writer)[1][2]  # secrets as written
    assert "s3cret" not in json.dumps(restored.as_json())  # never shown
    assert (restored.config_offset, restored.deletion_offset, restored.deleted_at) == (3, 6, 3_000)
    assert io.connector("src").exists  # the config topic now has it: restoring again is a 409
    with pytest.raises(ConflictError):
        Herder(io.settings, io).restore_connector("src", None, InitialState.STOPPED, History(EVENTS))


@pytest.mark.parametrize(
    ("state", "target"),
    [(InitialState.RUNNING, "STARTED"), (InitialState.PAUSED, "PAUSED"), (InitialState.STOPPED, "STOPPED")],
)
def test_the_initial_state_is_kip_980s(
    io: FakeHerderIO, writer: RecordingWriter, state: InitialState, target: str
) -> None:
    Herder(io.settings, io).restore_connector("src", None, state, History(EVENTS))
    assert written(writer)[0][2] == serialize_target_state(target)
    assert io.connector("src").exists


def test_at_picks_the_config_of_that_time(io: FakeHerderIO, writer: RecordingWriter) -> None:
    restored = Herder(io.settings, io).restore_connector("src", 1_500, InitialState.STOPPED, History(EVENTS))
    assert written(writer)[1][2] == serialize_connector_config(V1)
    assert (restored.config_offset, restored.deletion_offset) == (0, 6)


def test_the_cleanup_hooks_that_ran_are_said(io: FakeHerderIO, writer: RecordingWriter) -> None:
    steps = {
        6: [
            {"step": "hook:drop-table", "status": "succeeded"},
            {"step": "hook:notify", "status": "failed"},
            {"step": "offsets", "status": "succeeded"},
        ]
    }
    restored = Herder(io.settings, io).restore_connector("src", None, InitialState.STOPPED, History(EVENTS, steps))
    assert restored.hooks_ran == ["drop-table"]
    answer = restored.as_json()
    assert answer["cleanup_hooks_ran"] == ["drop-table"]
    assert "hooks drop-table: the external resources they removed are not restored" in str(answer["message"])


def test_no_hook_ran_says_nothing_of_them(io: FakeHerderIO, writer: RecordingWriter) -> None:
    restored = Herder(io.settings, io).restore_connector("src", None, InitialState.STOPPED, History(EVENTS))
    assert restored.hooks_ran == [] and "hooks" not in str(restored.as_json()["message"])


# --- with its offsets ------------------------------------------------------------------------------------------------

SINK_V = {**SINK, "name": "snk"}
SINK_EVENTS = [event("created", 0, 1_000, SINK_V), event("deleted", 2, 3_000, SINK_V)]


def sink_entry(offset: int) -> dict[str, Any]:
    return {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": offset}}


def test_a_source_gets_its_offsets_of_the_deletion_time_after_its_config(
    io: FakeHerderIO, writer: RecordingWriter
) -> None:
    source_now(io, "src", {"/tmp/v2": 99, "/tmp/later": 5})  # moved since, and a partition that came later
    offsets = OffsetsHistoryInMemory(KEPT_FROM, [entry("/tmp/v2", 12)])
    restored = Herder(io.settings, io).restore_connector("src", None, InitialState.STOPPED, History(EVENTS), offsets)
    assert offsets.asked == [("src", ConnectorType.SOURCE, 3_000)]  # as of the deletion
    config_topic, offsets_topic = io.settings.config_storage_topic, io.settings.offset_storage_topic
    assert [(topic, key) for topic, key, _ in written(writer)] == [
        (config_topic, target_state_key("src").encode()),
        (config_topic, connector_config_key("src").encode()),
        (offsets_topic, offset_key_bytes("src", {"filename": "/tmp/later"})),
        (offsets_topic, offset_key_bytes("src", {"filename": "/tmp/v2"})),
    ]
    assert [value for _, _, value in written(writer)[2:]] == [None, serialize_offset_value({"position": 12})]
    answer = restored.as_json()
    assert answer["offsets_at"] == 3_000
    assert [(p["partition"], p["change"]) for p in answer["offsets"]] == [
        ({"filename": "/tmp/later"}, "reset"),
        ({"filename": "/tmp/v2"}, "altered"),
    ]
    assert "Its offsets as of 1970-01-01T00:00:03.000Z written: 2 partition(s)" in str(answer["message"])


def test_an_at_before_the_deletion_is_the_offsets_time_and_one_after_it_is_the_deletions(
    io: FakeHerderIO, writer: RecordingWriter
) -> None:
    offsets = OffsetsHistoryInMemory(KEPT_FROM, [entry("/tmp/v1", 4)])
    Herder(io.settings, io).restore_connector("src", 1_500, InitialState.STOPPED, History(EVENTS), offsets)
    assert offsets.asked == [("src", ConnectorType.SOURCE, 1_500)]
    io.topics.append(io.settings.config_storage_topic, 0, connector_config_key("src").encode(), None)
    Herder(io.settings, io).restore_connector("src", 9_000, InitialState.STOPPED, History(EVENTS), offsets)
    assert offsets.asked[1] == ("src", ConnectorType.SOURCE, 3_000)  # not the cleanup's tombstones after it


def test_offsets_already_in_place_write_only_the_config(io: FakeHerderIO, writer: RecordingWriter) -> None:
    source_now(io, "src", {"/tmp/v2": 12})
    offsets = OffsetsHistoryInMemory(KEPT_FROM, [entry("/tmp/v2", 12)])
    restored = Herder(io.settings, io).restore_connector("src", None, InitialState.STOPPED, History(EVENTS), offsets)
    assert [topic for topic, _, _ in written(writer)] == [io.settings.config_storage_topic] * 2
    assert "already in place: nothing written" in str(restored.as_json()["message"])


@pytest.mark.parametrize("state", [InitialState.RUNNING, InitialState.PAUSED])
def test_offsets_need_the_stopped_state_and_nothing_is_written(
    io: FakeHerderIO, writer: RecordingWriter, state: InitialState
) -> None:
    offsets = OffsetsHistoryInMemory(KEPT_FROM, [entry("/tmp/v2", 12)])
    with pytest.raises(BadRequestError) as refused:
        Herder(io.settings, io).restore_connector("src", None, state, History(EVENTS), offsets)
    assert refused.value.message == offsets_need_stopped_message("src", state)
    assert writer.sends == [] and offsets.asked == []


def test_without_offsets_asked_the_answer_says_none_and_what_the_cleanup_removed(
    io: FakeHerderIO, writer: RecordingWriter
) -> None:
    steps = {6: [{"step": "offsets", "status": "succeeded", "detail": "source-offset tombstones written: 1 to x"}]}
    restored = Herder(io.settings, io).restore_connector("src", None, InitialState.STOPPED, History(EVENTS, steps))
    answer = restored.as_json()
    assert (answer["offsets_at"], answer["offsets"]) == (None, None)
    assert "had removed its offsets (source-offset tombstones written: 1 to x): offsets=true restores them" in str(
        answer["message"]
    )


def test_a_sink_gets_its_group_offsets(io: FakeHerderIO, writer: RecordingWriter, admin: FakeAdmin) -> None:
    offsets = OffsetsHistoryInMemory(KEPT_FROM, [sink_entry(2)])  # the group has ("t", 0) at 5 now
    restored = Herder(io.settings, io).restore_connector(
        "snk", None, InitialState.STOPPED, History(SINK_EVENTS), offsets
    )
    assert offsets.asked == [("snk", ConnectorType.SINK, 3_000)]
    assert [call for call in admin.calls if call[0] != "list_group_offsets"] == [
        ("group_members", "connect-snk", None),
        ("alter_group_offsets", "connect-snk", {("t", 0): 2}),
    ]
    assert [p.change for p in restored.offsets or []] == [RestoreChange.ALTERED]
    assert len(written(writer)) == 2  # the config records; the offsets went through the admin


def test_a_sink_whose_group_has_members_is_409_writing_nothing(
    io: FakeHerderIO, writer: RecordingWriter, admin: FakeAdmin
) -> None:
    admin.members["connect-snk"] = 2
    offsets = OffsetsHistoryInMemory(KEPT_FROM, [sink_entry(2)])
    with pytest.raises(ConflictError) as refused:
        Herder(io.settings, io).restore_connector("snk", None, InitialState.STOPPED, History(SINK_EVENTS), offsets)
    assert refused.value.message == group_has_members_message("snk", "connect-snk", 2)
    assert writer.sends == [] and not io.connector("snk").exists
    assert not [call for call in admin.calls if call[0] in ("alter_group_offsets", "delete_group_offsets")]


def test_offsets_that_fail_after_the_config_say_it_was_restored_without_them(
    io: FakeHerderIO, writer: RecordingWriter, admin: FakeAdmin
) -> None:
    admin.errors["alter_group_offsets"] = ConsumerGroupAdminError("broker said no")
    offsets = OffsetsHistoryInMemory(KEPT_FROM, [sink_entry(2)])
    with pytest.raises(ConnectError) as failed:
        Herder(io.settings, io).restore_connector("snk", None, InitialState.STOPPED, History(SINK_EVENTS), offsets)
    assert failed.value.message.startswith(rest.sink_alter_failed_message("snk"))
    assert "was restored STOPPED with its config, without its offsets as of 1970-01-01T00:00:03.000Z" in (
        failed.value.message
    )
    assert "POST /connectors/snk/offsets/restore?at=3000&apply=true" in failed.value.message
    assert io.connector("snk").exists
