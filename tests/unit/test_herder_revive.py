"""A deleted connector brought back (connect_state/herder/revive.py) without Flask, over :class:`FakeHerderIO` and a
history in memory: its refusals in order (409 when it exists, 404 without a deletion, 400 without a config at or
before the time, 404 when the config was not kept), the records written (target state first, then the config, secrets
as written), the version chosen with and without ``at``, and the cleanup hooks that already ran. Against the real
worker: tests/integration/test_connector_restore_connect.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from connect_state.core.settings import Settings
from connect_state.formats.config import (
    connector_config_key,
    delete_records,
    serialize_connector_config,
    serialize_target_state,
    target_state_key,
)
from connect_state.herder import BadRequestError, ConflictError, Herder, InitialState, NotFoundError
from connect_state.herder.revive import already_exists_message, no_deletion_message
from tests.unit.fakes import FakeAdmin, FakeHerderIO, InMemoryTopics, RecordingWriter
from tests.unit.test_herder_offsets import SOURCE, history, stopped

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
def io(settings: Settings, kafka_log: InMemoryTopics, writer: RecordingWriter) -> FakeHerderIO:
    return FakeHerderIO(settings, kafka_log, writer, FakeAdmin())


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
