"""The connector-state fold without Spark: config-topic and status-topic rules, events, replays, state round trip.

Records are written with the real serializers of ``formats.config`` / ``formats.status`` (and the herder's own record
sequences: ``task_config_records``, ``stop_records``, ``delete_records``, ...) and read back with the real parsers, so
the fold sees exactly the types the job passes it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable

import pytest

from connect_state.connect.connector_types import config_connector_type
from connect_state.connect.filestream import FILE_SINK_CLASS, FILE_SOURCE_CLASS
from connect_state.connect.rest import connector_state_info, status_not_found_message
from connect_state.core.errors import RecordFormatError
from connect_state.core.vocabulary import ConnectorType
from connect_state.folds.connector_states import (
    CONFIG,
    CREATED,
    DELETED,
    RECONFIGURED,
    STATUS,
    STATUS_CHANGED,
    TARGET_STATE_CHANGED,
    TASK_STATUS_CHANGED,
    TASKS_COMMITTED,
    ConnectorEvent,
    ConnectorRecord,
    ConnectorState,
    connector_of,
    connector_row,
    fold_all,
    fold_connector,
    fold_status_past_row,
    state_from_json,
    state_to_json,
    status_columns,
)
from connect_state.formats.config import (
    ConfigWrite,
    LoggerLevelKey,
    RestartRequest,
    SessionKeyKey,
    TaskCommitKey,
    connector_config_key,
    delete_records,
    parse_config_key,
    parse_config_record,
    pause_records,
    restart_request_key,
    resume_records,
    serialize_connector_config,
    serialize_restart_request,
    serialize_target_state,
    serialize_task_commit,
    serialize_task_config,
    serialize_task_count,
    stop_records,
    target_state_key,
    task_commit_key,
    task_config_key,
    task_config_records,
    task_count_key,
)
from connect_state.formats.status import (
    Status,
    TopicStatusKey,
    connector_status_key,
    parse_status_key,
    parse_status_record,
    serialize_status,
    task_status_key,
)
from connect_state.kafka.partitioner import partition_for_key

NAME = "c"
STATUS_PARTITIONS = 5  # status.storage.partitions default

SOURCE, SINK, UNKNOWN = ConnectorType.SOURCE, ConnectorType.SINK, ConnectorType.UNKNOWN


class Topics:
    """Writes records the way a worker does: config topic with one partition, status keys placed by murmur2."""

    def __init__(self, name: str = NAME) -> None:
        self.name = name
        self.records: list[ConnectorRecord] = []
        self.config_offset = 0
        self.status_offsets = [0] * STATUS_PARTITIONS
        self.clock = 1_000

    def _tick(self, timestamp: int | None) -> int:
        self.clock += 1
        return self.clock if timestamp is None else timestamp

    def config(self, *writes: ConfigWrite, timestamp: int | None = None) -> list[ConnectorRecord]:
        added = []
        for key, value in writes:
            record = parse_config_record(key.encode(), value)
            added.append(ConnectorRecord.from_config(record, 0, self.config_offset, self._tick(timestamp)))
            self.config_offset += 1
        self.records += added
        return added

    def status(self, key: str, status: Status | None, timestamp: int | None = None) -> list[ConnectorRecord]:
        partition = partition_for_key(key.encode(), STATUS_PARTITIONS)
        value = serialize_status(status) if status is not None else None
        record = ConnectorRecord.from_status(
            parse_status_record(key.encode(), value), partition, self.status_offsets[partition], self._tick(timestamp)
        )
        self.status_offsets[partition] += 1
        self.records.append(record)
        return [record]

    # What the herder and the workers write.

    def create(self, config: dict[str, str] | None = None, tasks: int = 1) -> list[ConnectorRecord]:
        config = config if config is not None else source_config(self.name)
        return self.config((connector_config_key(self.name), serialize_connector_config(config))) + self.tasks(tasks)

    def tasks(self, count: int) -> list[ConnectorRecord]:
        return self.config(*task_config_records(self.name, [{"task.id": str(i)} for i in range(count)]))

    def target(self, state: str | None) -> list[ConnectorRecord]:
        return self.config((target_state_key(self.name), serialize_target_state(state) if state else None))

    def connector_status(
        self, state: str | None, generation: int = 1, timestamp: int | None = None, **fields: str | None
    ) -> list[ConnectorRecord]:
        value = status(state, generation, **fields) if state else None
        return self.status(connector_status_key(self.name), value, timestamp)

    def task_status(
        self, task: int, state: str | None, generation: int = 1, timestamp: int | None = None, **fields: str | None
    ) -> list[ConnectorRecord]:
        value = status(state, generation, **fields) if state else None
        return self.status(task_status_key(self.name, task), value, timestamp)


def status(state: str, generation: int = 1, worker_id: str = "w:8083", **fields: str | None) -> Status:
    return Status(state, fields.get("trace"), worker_id, generation, fields.get("version"))


def source_config(name: str = NAME, **extra: str) -> dict[str, str]:
    return {"name": name, "connector.class": FILE_SOURCE_CLASS, "tasks.max": "1", "topic": "t", **extra}


def sink_config(name: str = NAME, **extra: str) -> dict[str, str]:
    return {"name": name, "connector.class": FILE_SINK_CLASS, "tasks.max": "1", "topics": "t", **extra}


def fold(records: Iterable[ConnectorRecord], state: ConnectorState | None = None):
    return fold_connector(state if state is not None else ConnectorState(NAME), records)


def kinds(events: list[ConnectorEvent]) -> list[str]:
    return [e.event for e in events]


# ---------------------------------------------------------------------------------------------------------------------
# Grouping
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "connector"),
    [
        (connector_config_key("a-b"), "a-b"),
        (task_config_key("a-b", 3), "a-b"),
        (task_commit_key("a"), "a"),
        (target_state_key("a"), "a"),
        (restart_request_key("a"), "a"),
        (task_count_key("a"), "a"),
        ("session-key", None),
        ("logger-cluster-org.apache", None),
    ],
)
def test_connector_of_config_keys(key: str, connector: str | None):
    assert connector_of(parse_config_key(key)) == connector


@pytest.mark.parametrize(
    ("key", "connector"),
    [
        (connector_status_key("a-b"), "a-b"),
        (task_status_key("a-b", 2), "a-b"),
        ("status-topic-t:connector-a", None),
    ],
)
def test_connector_of_status_keys(key: str, connector: str | None):
    assert connector_of(parse_status_key(key)) == connector


@pytest.mark.parametrize("key", [SessionKeyKey(), LoggerLevelKey("x"), TopicStatusKey("t", "c")])
def test_records_outside_the_fold_are_refused(key: object):
    with pytest.raises(ValueError):
        ConnectorRecord(CONFIG, key, None, 0, 0, 0)  # type: ignore[arg-type]


def test_record_source_must_match_its_key():
    record = parse_config_record(connector_config_key(NAME).encode(), serialize_connector_config(source_config()))
    with pytest.raises(ValueError):
        ConnectorRecord(STATUS, record.key, record.value, 0, 0, 0)  # type: ignore[arg-type]


def test_a_record_of_another_connector_is_refused():
    other = Topics("other").create()
    with pytest.raises(ValueError):
        fold(other)


def test_fold_all_groups_by_connector():
    a, b = Topics("a"), Topics("b")
    a.create(tasks=2)
    b.create(sink_config("b"), tasks=1)
    b.config(*delete_records("b"))
    result = fold_all(b.records + a.records)
    assert {name: (s.committed_task_count, s.deleted) for name, s in result.items()} == {
        "a": (2, False),
        "b": (0, True),
    }


# ---------------------------------------------------------------------------------------------------------------------
# Config topic: creation, type, target state
# ---------------------------------------------------------------------------------------------------------------------


def test_created_connector_is_started_with_its_committed_tasks():
    topics = Topics()
    topics.create(tasks=2)
    state, events = fold(topics.records)
    assert state.target_state == "STARTED"
    assert state.committed_task_count == 2
    assert not state.inconsistent
    assert kinds(events) == [CREATED, TASKS_COMMITTED]
    assert events[0].details == {"connector_class": FILE_SOURCE_CLASS, "target_state": "STARTED"}
    assert events[1].details == {"task_count": 2, "previous_task_count": 0, "consistent": True}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b'{"state":"PAUSED","state.v2":"STOPPED"}', "STOPPED"),  # what a 3.5+ worker writes for STOPPED
        (b'{"state":"STARTED","state.v2":"PAUSED"}', "PAUSED"),  # state.v2 wins whatever state says
        (b'{"state":"PAUSED"}', "PAUSED"),  # legacy TARGET_STATE_V0
        (b'{"state":"STARTED"}', "STARTED"),
        (b'{"state":"PAUSED","state.v2":7}', "PAUSED"),  # a non-string state.v2 falls back to state
    ],
)
def test_target_state_prefers_state_v2(value: bytes, expected: str):
    topics = Topics()
    topics.create()
    topics.config((target_state_key(NAME), value))
    state, _ = fold(topics.records)
    assert state.effective_target_state == expected
    assert connector_row(state)["target_state"] == expected


def test_target_state_written_before_the_config_is_kept():
    topics = Topics()
    topics.target("STOPPED")  # POST /connectors with initial_state=STOPPED writes it first
    before, events = fold(topics.records)
    assert before.config is None
    assert before.effective_target_state == "STOPPED"
    assert [(e.event, e.details) for e in events] == [(TARGET_STATE_CHANGED, {"from": None, "to": "STOPPED"})]
    topics.config((connector_config_key(NAME), serialize_connector_config(source_config())))
    state, events = fold(topics.records[1:], before)
    assert state.effective_target_state == "STOPPED"
    assert state.committed_task_count == 0  # created STOPPED: no task or commit records at all
    assert [(e.event, e.details["target_state"]) for e in events] == [(CREATED, "STOPPED")]


@pytest.mark.parametrize(("with_config", "expected"), [(True, "STARTED"), (False, None)])
def test_target_state_tombstone(with_config: bool, expected: str | None):
    topics = Topics()
    if with_config:
        topics.create()
    topics.target("PAUSED")
    topics.target(None)
    state, events = fold(topics.records)
    assert state.target_state == expected
    assert state.effective_target_state == expected
    changes = [(e.details["from"], e.details["to"]) for e in events if e.event == TARGET_STATE_CHANGED]
    assert changes[-1] == ("PAUSED", expected)


@pytest.mark.parametrize(
    ("writes", "expected", "changes"),
    [
        (pause_records, "PAUSED", [("STARTED", "PAUSED")]),
        (resume_records, "STARTED", []),  # resuming a running connector changes nothing
    ],
)
def test_pause_and_resume_write_only_the_target_state(writes, expected: str, changes: list):
    topics = Topics()
    topics.create(tasks=1)
    before, _ = fold(topics.records)
    new = topics.config(*writes(NAME))
    state, events = fold(new, before)
    assert state.effective_target_state == expected
    assert state.committed_task_count == 1
    assert [(e.details["from"], e.details["to"]) for e in events] == changes


def test_stop_sequence_gives_stopped_with_no_tasks():
    topics = Topics()
    topics.create(tasks=2)
    before, _ = fold(topics.records)
    state, events = fold(topics.config(*stop_records(NAME)), before)
    assert state.effective_target_state == "STOPPED"
    assert state.committed_task_count == 0
    assert not state.inconsistent
    assert [(e.event, e.details) for e in events] == [
        (TASKS_COMMITTED, {"task_count": 0, "previous_task_count": 2, "consistent": True}),
        (TARGET_STATE_CHANGED, {"from": "STARTED", "to": "STOPPED"}),
    ]
    # Resuming makes the leader generate tasks again.
    state, events = fold(topics.config(*resume_records(NAME)) + topics.tasks(2), state)
    assert (state.effective_target_state, state.committed_task_count) == ("STARTED", 2)
    assert kinds(events) == [TARGET_STATE_CHANGED, TASKS_COMMITTED]


def test_reconfiguration_reports_changed_keys_and_an_identical_rewrite_nothing():
    topics = Topics()
    topics.create()
    before, _ = fold(topics.records)
    changed = source_config(topic="t2", extra="x")
    same_again = dict(reversed(list(changed.items())))  # same properties, another order
    new = topics.config(
        (connector_config_key(NAME), serialize_connector_config(changed)),
        (connector_config_key(NAME), serialize_connector_config(same_again)),
    )
    state, events = fold(new, before)
    assert [(e.event, e.details) for e in events] == [
        (RECONFIGURED, {"connector_class": FILE_SOURCE_CLASS, "changed_keys": ["extra", "topic"]})
    ]
    assert state.config == same_again
    assert state.config_offset == new[-1].kafka_offset


# ---------------------------------------------------------------------------------------------------------------------
# Config topic: task commits (processTasksCommitRecord)
# ---------------------------------------------------------------------------------------------------------------------


def task_writes(ids: Iterable[int], commit: int) -> list[ConfigWrite]:
    writes = [(task_config_key(NAME, i), serialize_task_config({"task.id": str(i)})) for i in ids]
    return [*writes, (task_commit_key(NAME), serialize_task_commit(commit))]


@pytest.mark.parametrize(
    ("ids", "commit", "consistent"),
    [
        ([0, 1], 2, True),
        ([1, 0], 2, True),  # any order
        ([0, 1, 2], 2, True),  # extra ids are compaction leftovers, fine
        ([1], 2, False),  # task-0 compacted away
        ([0, 2], 2, False),
        ([], 1, False),
        ([], 0, True),
    ],
)
def test_commit_applies_only_a_complete_task_set(ids: list[int], commit: int, consistent: bool):
    topics = Topics()
    topics.create(tasks=0)
    before, _ = fold(topics.records)
    state, events = fold(topics.config(*task_writes(ids, commit)), before)
    assert state.inconsistent is (not consistent)
    assert state.committed_task_count == commit  # 4.3.1 stores the count of an inconsistent commit too
    assert state.deferred_task_ids == frozenset()
    assert connector_row(state)["inconsistent"] is (not consistent)
    assert [(e.event, e.details["consistent"]) for e in events] == [(TASKS_COMMITTED, consistent)]


def test_inconsistent_commit_clears_the_buffer_and_the_next_complete_commit_repairs():
    topics = Topics()
    topics.create(tasks=0)
    topics.config(*task_writes([0, 1], 3))  # incomplete: buffer {0, 1} is dropped
    topics.config((task_commit_key(NAME), serialize_task_commit(2)))  # would be complete had the buffer been kept
    state, _ = fold(topics.records)
    assert state.inconsistent
    topics.config(*task_writes([0, 1], 2))
    state, _ = fold(topics.records)
    assert not state.inconsistent
    assert state.committed_task_count == 2


def test_task_configs_are_buffered_before_the_config_exists():
    topics = Topics()
    topics.config(
        (task_config_key(NAME, 0), serialize_task_config({})),
        (connector_config_key(NAME), serialize_connector_config(source_config())),
        (task_commit_key(NAME), serialize_task_commit(1)),
    )
    state, _ = fold(topics.records)
    assert (state.committed_task_count, state.inconsistent) == (1, False)


@pytest.mark.parametrize("commit", [serialize_task_commit(1), None, b'{"tasks":"1"}', b"[1]"])
def test_commit_without_config_is_ignored_but_drops_buffered_task_configs(commit: bytes | None):
    topics = Topics()
    topics.config((task_config_key(NAME, 0), serialize_task_config({})))
    try:
        topics.config((task_commit_key(NAME), commit))
    except RecordFormatError:  # the parser rejects it; the job passes it on as an unreadable commit
        topics.records.append(ConnectorRecord.unreadable_commit(NAME, 0, topics.config_offset, 5))
        topics.config_offset += 1
    state, events = fold(topics.records)
    assert events == []
    assert (state.config, state.task_count, state.deferred_task_ids) == (None, None, frozenset())
    # processConnectorRemoval emptied the buffer: the commit after the config finds task 0 missing.
    topics.config((connector_config_key(NAME), serialize_connector_config(source_config())))
    topics.config((task_commit_key(NAME), serialize_task_commit(1)))
    state, _ = fold(topics.records)
    assert state.inconsistent


def test_unreadable_commit_for_a_configured_connector_changes_nothing():
    topics = Topics()
    topics.create(tasks=1)
    topics.config((task_config_key(NAME, 0), serialize_task_config({})))
    before, _ = fold(topics.records)
    state, events = fold([ConnectorRecord.unreadable_commit(NAME, 0, topics.config_offset, 9)], before)
    assert events == []
    assert state.deferred_task_ids == frozenset({0})
    assert state.committed_task_count == 1


def test_restart_and_task_count_records_change_nothing():
    topics = Topics()
    topics.create(tasks=1)
    before, _ = fold(topics.records)
    new = topics.config(
        (restart_request_key(NAME), serialize_restart_request(RestartRequest(True, False))),
        (task_count_key(NAME), serialize_task_count(1)),
    )
    state, events = fold(new, before)
    assert events == []
    assert state.config_applied == {0: new[-1].kafka_offset}
    assert connector_row(state) == connector_row(before)


# ---------------------------------------------------------------------------------------------------------------------
# Config topic: deletion
# ---------------------------------------------------------------------------------------------------------------------


def test_delete_then_recreate():
    topics = Topics()
    topics.create(sink_config(), tasks=2)
    topics.config(*stop_records(NAME))
    topics.config((task_config_key(NAME, 0), serialize_task_config({})))  # a deferred update, dropped by the delete
    deleted_offset = topics.config_offset
    topics.config(*delete_records(NAME), timestamp=7_777)
    state, events = fold(topics.records)
    assert state.deleted and state.deleted_at == 7_777
    assert (state.config, state.task_count, state.deferred_task_ids) == (None, None, frozenset())
    assert state.target_state is None
    assert [(e.event, e.details) for e in events[-2:]] == [
        (DELETED, {"connector_class": FILE_SINK_CLASS}),
        (TARGET_STATE_CHANGED, {"from": "STOPPED", "to": None}),
    ]
    row = connector_row(state)
    assert (row["type"], row["config"], row["target_state"], row["task_count"]) == (UNKNOWN, None, None, 0)
    assert (row["deleted"], row["deleted_at"], row["config_offset"]) == (True, 7_777, deleted_offset)
    # Task and commit records are not tombstoned; a later commit for the deleted connector is ignored.
    topics.config((task_commit_key(NAME), serialize_task_commit(2)))
    state, _ = fold(topics.records)
    assert state.task_count is None
    # Re-created: "created" again, no longer deleted.
    before = state
    state, events = fold(topics.create(source_config(), tasks=1), before)
    assert kinds(events) == [CREATED, TASKS_COMMITTED]
    assert events[0].details == {"connector_class": FILE_SOURCE_CLASS, "target_state": "STARTED"}
    assert (state.deleted, state.deleted_at) == (False, None)
    assert (state.effective_target_state, state.committed_task_count) == ("STARTED", 1)
    assert connector_row(state)["type"] == SOURCE


def test_connector_tombstone_keeps_the_target_state_until_its_own_tombstone():
    topics = Topics()
    topics.create()
    topics.target("PAUSED")
    topics.config((connector_config_key(NAME), None))
    state, events = fold(topics.records)
    assert state.effective_target_state == "PAUSED"
    assert events[-1].event == DELETED


def test_tombstone_for_a_connector_never_seen_marks_it_deleted_without_event():
    topics = Topics()
    topics.config(*delete_records(NAME))
    state, events = fold(topics.records)
    assert events == []
    assert state.deleted


# ---------------------------------------------------------------------------------------------------------------------
# Status topic (KafkaStatusBackingStore.read)
# ---------------------------------------------------------------------------------------------------------------------


def test_status_records_replace_the_cached_status():
    topics = Topics()
    topics.connector_status("RUNNING", 1)
    topics.task_status(0, "RUNNING", 1)
    topics.connector_status("FAILED", 2, trace="boom")
    state, events = fold(topics.records)
    assert state.connector_status == status("FAILED", 2, trace="boom")
    assert [(e.event, e.details["from"], e.details["to"]) for e in events] == [
        (STATUS_CHANGED, None, "RUNNING"),
        (TASK_STATUS_CHANGED, None, "RUNNING"),
        (STATUS_CHANGED, "RUNNING", "FAILED"),
    ]
    assert events[1].details["task"] == 0


@pytest.mark.parametrize("with_connector_status", [True, False])
def test_connector_status_tombstone_removes_every_task_status(with_connector_status: bool):
    topics = Topics()
    if with_connector_status:
        topics.connector_status("RUNNING")
    topics.task_status(1, "RUNNING")
    topics.task_status(0, "FAILED", trace="x")
    topics.connector_status(None)
    state, events = fold(topics.records)
    assert state.connector_status is None
    assert state.task_statuses == {}
    removal = [(e.event, e.details.get("task"), e.details["from"], e.details["to"]) for e in events[-3:]]
    expected = [(STATUS_CHANGED, None, "RUNNING", None)] if with_connector_status else []
    expected += [(TASK_STATUS_CHANGED, 0, "FAILED", None), (TASK_STATUS_CHANGED, 1, "RUNNING", None)]
    assert removal[-len(expected) :] == expected
    assert status_response(state) is None


def test_task_tombstone_removes_one_task():
    topics = Topics()
    topics.connector_status("STOPPED")
    topics.task_status(0, "UNASSIGNED")
    topics.task_status(1, "UNASSIGNED")
    topics.task_status(0, None)
    state, events = fold(topics.records)
    assert sorted(state.task_statuses) == [1]
    assert events[-1].details == {"task": 0, "from": "UNASSIGNED", "to": None, "worker_id": None, "generation": None}


@pytest.mark.parametrize(
    ("cached", "incoming", "applied"),
    [
        (("RUNNING", 5), ("UNASSIGNED", 5), False),  # stale: same generation
        (("RUNNING", 5), ("UNASSIGNED", 4), False),  # stale: older generation
        (("RUNNING", 5), ("UNASSIGNED", 6), True),  # a newer generation's UNASSIGNED is applied
        (("FAILED", 5), ("UNASSIGNED", 3), True),  # the rule only protects RUNNING
        (("PAUSED", 5), ("UNASSIGNED", 3), True),
        (("RUNNING", 5), ("PAUSED", 1), True),  # and only against UNASSIGNED
        (None, ("UNASSIGNED", 0), True),
    ],
)
def test_stale_unassigned_task_status_is_ignored(cached, incoming, applied: bool):
    topics = Topics()
    if cached:
        topics.task_status(3, cached[0], cached[1])
    topics.task_status(3, incoming[0], incoming[1])
    state, events = fold(topics.records)
    expected = status(*incoming) if applied else status(*cached)
    assert state.task_statuses[3] == expected
    assert len(events) == (1 if cached else 0) + (1 if applied else 0)


def test_connector_unassigned_is_never_stale():
    topics = Topics()
    topics.connector_status("RUNNING", 5)
    topics.connector_status("UNASSIGNED", 1)
    state, _ = fold(topics.records)
    assert state.connector_status == status("UNASSIGNED", 1)


def test_identical_status_rewrite_is_no_event():
    topics = Topics()
    topics.connector_status("RUNNING", 2)
    topics.task_status(0, "RUNNING", 2)
    topics.connector_status("RUNNING", 2)
    topics.task_status(0, "RUNNING", 2)
    topics.task_status(0, "RUNNING", 3)  # a new generation is a change
    _, events = fold(topics.records)
    assert kinds(events) == [STATUS_CHANGED, TASK_STATUS_CHANGED, TASK_STATUS_CHANGED]


# ---------------------------------------------------------------------------------------------------------------------
# Replays, ordering, batching
# ---------------------------------------------------------------------------------------------------------------------


def test_replayed_records_are_skipped():
    topics = Topics()
    topics.create(tasks=2)
    topics.connector_status("RUNNING")
    topics.task_status(0, "RUNNING")
    topics.config(*pause_records(NAME))
    state, events = fold(topics.records)
    assert events
    again, replay_events = fold(topics.records, state)
    assert replay_events == []
    assert again == state
    # A replay of an early record must not undo what later records did.
    again, replay_events = fold(topics.records[:1], state)
    assert (replay_events, again) == ([], state)


def test_input_order_does_not_matter_within_a_batch():
    topics = Topics()
    topics.create(tasks=2)
    topics.connector_status("RUNNING")
    topics.task_status(0, "RUNNING")
    topics.task_status(0, "UNASSIGNED", 2)
    topics.config(*stop_records(NAME))
    shuffled = topics.records[:]
    random.Random(3).shuffle(shuffled)
    assert fold(shuffled) == fold(topics.records)


def test_events_are_ordered_by_timestamp_then_config_before_status():
    topics = Topics()  # status-connector-c sits in partition 0, like the config topic's records
    topics.config((target_state_key(NAME), serialize_target_state("PAUSED")), timestamp=1)
    topics.config((connector_config_key(NAME), serialize_connector_config(source_config())), timestamp=10)
    topics.connector_status("RUNNING", timestamp=10)
    topics.task_status(0, "RUNNING", timestamp=5)
    _, events = fold(topics.records)
    assert [(e.event, e.source, e.kafka_partition, e.kafka_offset, e.kafka_timestamp) for e in events] == [
        (TARGET_STATE_CHANGED, CONFIG, 0, 0, 1),
        (TASK_STATUS_CHANGED, STATUS, 1, 0, 5),
        (CREATED, CONFIG, 0, 1, 10),
        (STATUS_CHANGED, STATUS, 0, 0, 10),
    ]


def random_history(rng: random.Random, steps: int) -> Topics:
    topics = Topics()
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.10:
            topics.create(rng.choice([source_config(), sink_config(), source_config(x=str(rng.random()))]), 0)
        elif roll < 0.20:
            topics.tasks(rng.randrange(4))
        elif roll < 0.27:
            ids = rng.sample(range(4), rng.randrange(4))
            topics.config(*task_writes(ids, rng.randrange(4)))
        elif roll < 0.35:
            topics.target(rng.choice(["STARTED", "PAUSED", "STOPPED", None]))
        elif roll < 0.40:
            topics.config(*stop_records(NAME))
        elif roll < 0.45:
            topics.config(*delete_records(NAME))
        elif roll < 0.60:
            topics.connector_status(
                rng.choice(["RUNNING", "PAUSED", "FAILED", "UNASSIGNED", "STOPPED", None]), rng.randrange(5)
            )
        else:
            topics.task_status(
                rng.randrange(4), rng.choice(["RUNNING", "UNASSIGNED", "FAILED", None]), rng.randrange(5)
            )
    return topics


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_folding_in_batches_equals_folding_at_once(seed: int):
    rng = random.Random(seed)
    records = random_history(rng, 300).records
    whole, whole_events = fold(records)
    state, events = ConnectorState(NAME), []
    # Kafka order per partition, batches cut anywhere, each batch's state through the JSON state column.
    for start in range(0, len(records), 37):
        state, batch_events = fold(records[start : start + 37], state_from_json(state_to_json(state)))
        events += batch_events
    assert state == whole
    key = lambda e: (e.source, e.kafka_partition, e.kafka_offset, e.event, e.recorded_json())  # noqa: E731
    assert sorted(events, key=key) == sorted(whole_events, key=key)
    # Replaying everything (a restarted query) changes nothing.
    assert fold(records, state) == (state, [])


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_status_records_past_the_watermark_over_a_newer_row_give_the_whole_folds_statuses(seed: int):
    """The API's answer (issue 11 §2): a table row at least as new as the watermark, with every record past the
    watermark folded over it again, has the statuses of the whole fold, and the row's config columns."""
    rng = random.Random(seed)
    records = random_history(rng, 200).records
    whole, _ = fold(records)
    for _ in range(25):
        mark = rng.randrange(len(records) + 1)
        version = rng.randrange(mark, len(records) + 1)
        row = connector_row(fold(records[:version])[0])
        assert fold_status_past_row(row, records[mark:]) == {**row, **status_columns(whole)}


# ---------------------------------------------------------------------------------------------------------------------
# State JSON, row, type, status response
# ---------------------------------------------------------------------------------------------------------------------


def test_state_json_round_trip():
    topics = Topics()
    topics.create(sink_config(extra="\ud800 é"), tasks=1)
    topics.config((task_config_key(NAME, 2), serialize_task_config({})))
    topics.connector_status("FAILED", 3, trace="t", version="4.3.1")
    topics.task_status(7, "RUNNING")
    state, _ = fold(topics.records)
    text = state_to_json(state)
    assert text.isascii()
    assert state_from_json(text) == state
    empty = ConnectorState("x")
    assert state_from_json(state_to_json(empty)) == empty


def test_connector_row():
    topics = Topics()
    topics.create({"topics": "t", "name": NAME, "connector.class": FILE_SINK_CLASS}, tasks=2)
    topics.connector_status("RUNNING", 4, version="4.3.1")
    topics.task_status(1, "FAILED", 4, trace="boom")
    topics.task_status(0, "RUNNING", 4)
    state, _ = fold(topics.records)
    assert connector_row(state) == {
        "name": NAME,
        "type": SINK,
        "connector_class": FILE_SINK_CLASS,
        "config": '{"connector.class":"' + FILE_SINK_CLASS + '","name":"c","topics":"t"}',
        "target_state": "STARTED",
        "task_count": 2,
        "task_configs": '{"0":{"task.id":"0"},"1":{"task.id":"1"}}',
        "inconsistent": False,
        "connector_state": "RUNNING",
        "connector_worker_id": "w:8083",
        "connector_trace": None,
        "connector_generation": 4,
        "connector_version": "4.3.1",
        "tasks": [
            {"id": 0, "state": "RUNNING", "worker_id": "w:8083", "trace": None, "generation": 4, "version": None},
            {"id": 1, "state": "FAILED", "worker_id": "w:8083", "trace": "boom", "generation": 4, "version": None},
        ],
        "deleted": False,
        "deleted_at": None,
        "config_offset": 0,
    }


@pytest.mark.parametrize(
    ("config", "class_type_map", "expected"),
    [
        (None, None, UNKNOWN),
        ({"connector.class": "com.x.Any", "topics": "t"}, None, SINK),
        ({"connector.class": "com.x.Any", "topics.regex": "t.*"}, None, SINK),
        ({"connector.class": "com.x.Any", "topic": "t"}, None, SOURCE),
        ({"connector.class": "com.x.Any", "topics": None}, None, SOURCE),
        ({"topics": "t"}, None, UNKNOWN),  # no connector.class: Connect says unknown too
        ({"connector.class": "com.x.Any", "topics": "t"}, {"com.x.Any": SOURCE}, SOURCE),  # the map wins
        ({"connector.class": "AnySource"}, {"com.x.AnySourceConnector": SINK}, SINK),  # alias of a mapped class
        ({"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector", "topics": ".*"}, None, SOURCE),
        ({"connector.class": "MirrorSourceConnector", "topics": ".*"}, None, SOURCE),
        ({"connector.class": "FileStreamSink"}, None, SINK),
        ({"connector.class": "FileStreamSink"}, {"FileStreamSink": SOURCE}, SOURCE),  # configured beats built in
    ],
)
def test_connector_type(config, class_type_map, expected: str):
    assert config_connector_type(config, class_type_map) == expected
    state = ConnectorState(NAME, config=config)
    assert state.connector_type(class_type_map) == expected


def test_connector_type_map_values_are_checked():
    with pytest.raises(ValueError):
        config_connector_type({"connector.class": "a.B"}, {"a.B": "SINK"})


def dumps(body: object) -> str:
    return json.dumps(body, separators=(",", ":"))


def status_response(state: ConnectorState, *, with_version: bool = True) -> dict[str, object] | None:
    """``GET /connectors/<name>/status`` of a folded state, as the API answers it from the state's table row."""
    return connector_state_info(connector_row(state), with_version=with_version)


def test_status_response_matches_connect_byte_for_byte():
    """Expected text: Jackson (Kafka 4.3.1, ObjectMapper defaults) serializing the same ConnectorStateInfo."""
    topics = Topics()
    topics.create(sink_config(), tasks=2)
    topics.connector_status("RUNNING", worker_id="w:8083")
    topics.task_status(1, "FAILED", worker_id="w:8083", trace="boom", version="4.3.1")
    topics.task_status(0, "RUNNING", worker_id="w:8083", trace="", version="undefined")
    state, _ = fold(topics.records)
    assert dumps(status_response(state)) == (
        '{"name":"c","connector":{"state":"RUNNING","worker_id":"w:8083","version":null},'
        '"tasks":[{"id":0,"state":"RUNNING","worker_id":"w:8083"},'
        '{"id":1,"state":"FAILED","worker_id":"w:8083","version":"4.3.1","trace":"boom"}],"type":"sink"}'
    )
    assert dumps(status_response(state, with_version=False)) == (
        '{"name":"c","connector":{"state":"RUNNING","worker_id":"w:8083"},'
        '"tasks":[{"id":0,"state":"RUNNING","worker_id":"w:8083"},'
        '{"id":1,"state":"FAILED","worker_id":"w:8083","trace":"boom"}],"type":"sink"}'
    )


def test_status_response_without_config_is_unknown_type():
    topics = Topics()
    topics.connector_status("FAILED", trace="t", version="1.0")
    state, _ = fold(topics.records)
    assert dumps(status_response(state)) == (
        '{"name":"c","connector":{"state":"FAILED","worker_id":"w:8083","version":"1.0","trace":"t"},'
        '"tasks":[],"type":"unknown"}'
    )


def test_stopped_connector_status_has_no_tasks_once_the_leader_tombstoned_them():
    topics = Topics()
    topics.create(tasks=1)
    topics.connector_status("RUNNING", 1)
    topics.task_status(0, "RUNNING", 1)
    topics.config(*stop_records(NAME))
    topics.connector_status("STOPPED", 1)
    topics.task_status(0, "UNASSIGNED", 2)
    topics.task_status(0, None)
    state, _ = fold(topics.records)
    body = status_response(state, with_version=False)
    assert body == {
        "name": NAME,
        "connector": {"state": "STOPPED", "worker_id": "w:8083"},
        "tasks": [],
        "type": SOURCE,
    }


def test_no_connector_status_means_404():
    topics = Topics()
    topics.create(tasks=1)
    topics.task_status(0, "RUNNING")  # tasks alone do not make a status
    state, _ = fold(topics.records)
    assert status_response(state) is None
    assert status_not_found_message(NAME) == "No status found for connector c"


def test_unreadable_commit_record_shape():
    record = ConnectorRecord.unreadable_commit(NAME, 0, 4, 9)
    assert (record.key, record.value, record.connector) == (TaskCommitKey(NAME), None, NAME)


def test_task_configs_applied_on_consistent_commit_only():
    """``processTasksCommitRecord``: deferred task configs become ``taskConfigs`` on a complete commit; an
    incomplete one leaves the previous configs; a deletion removes them."""
    topics = Topics()
    topics.create(tasks=2)
    state, _ = fold(topics.records)
    assert state.task_configs == {0: {"task.id": "0"}, 1: {"task.id": "1"}}
    assert state.deferred_task_configs == {}
    # Only task 1 rewritten, then a commit of 2: incomplete, nothing applied.
    topics.config((task_config_key(NAME, 1), serialize_task_config({"task.id": "new"})))
    topics.config((task_commit_key(NAME), serialize_task_commit(2)))
    state, _ = fold(topics.records)
    assert state.inconsistent
    assert state.task_configs == {0: {"task.id": "0"}, 1: {"task.id": "1"}}
    # A complete commit of 1 task: task 0 replaced, task 1 left (Connect keeps ids past the count).
    topics.config(*task_config_records(NAME, [{"task.id": "z"}]))
    state, _ = fold(topics.records)
    assert not state.inconsistent and state.task_count == 1
    assert state.task_configs == {0: {"task.id": "z"}, 1: {"task.id": "1"}}
    assert state_from_json(state_to_json(state)) == state
    assert json.loads(str(connector_row(state)["task_configs"]))["0"] == {"task.id": "z"}
    topics.config((connector_config_key(NAME), None))
    state, _ = fold(topics.records)
    assert state.task_configs == {} and json.loads(str(connector_row(state)["task_configs"])) == {}


def test_state_json_without_task_configs_reads():
    """A state row written before ``task_configs`` existed still reads (no task configs)."""
    text = state_to_json(ConnectorState("x", task_count=1))
    fields = json.loads(text)
    del fields["task_configs"], fields["deferred_task_configs"]
    assert state_from_json(json.dumps(fields)) == ConnectorState("x", task_count=1)


def test_created_and_reconfigured_events_record_the_config():
    """The ``connector_events`` details of ``created`` / ``reconfigured`` carry the config then in effect (the
    history API's config versions read it); ``details`` themselves are unchanged."""
    topics = Topics()
    topics.create({"name": NAME, "connector.class": FILE_SINK_CLASS, "topics": "a"}, tasks=0)
    topics.config((connector_config_key(NAME), serialize_connector_config({"name": NAME, "topics": "b"})))
    _, events = fold(topics.records)
    created, reconfigured = (e for e in events if e.event in (CREATED, RECONFIGURED))
    assert json.loads(created.recorded_json())["config"]["topics"] == "a"
    assert "config" not in created.details
    assert json.loads(reconfigured.recorded_json())["config"] == {"name": NAME, "topics": "b"}
    assert json.loads(reconfigured.recorded_json())["changed_keys"] == ["connector.class", "topics"]
