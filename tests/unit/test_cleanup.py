"""KIP-883 cleanup planning (connect_state/cleanup/reconciler.py): steps, the recreated-connector rule, backoff,
outcomes, hooks, and the ``deleted`` event of the connector-state fold that feeds it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from connect_state.cleanup.reconciler import (
    FAILED,
    PENDING,
    SKIPPED,
    SUCCEEDED,
    CleanupReconciler,
    DeletedConnector,
    Deletion,
    Lifecycle,
    PlannedStep,
    Step,
    StepOutcome,
    StepResult,
    backoff_ms,
    call_hook,
    deletions_from_events,
    hook_applies,
    hook_config,
    is_due,
    live_statuses,
    load_class_hooks,
    load_deletion_hooks,
    next_outcome,
    offsets_cleanup_enabled,
    plan_steps,
    planned_outcome,
    run_due_steps,
    shared_cleanup_blocker,
    sink_group_id,
    source_offsets_topics,
)
from connect_state.connect import plugins
from connect_state.connect.filestream import FILE_SINK_CLASS, FILE_SOURCE_CLASS
from connect_state.connect.plugins import PluginError
from connect_state.core.errors import ConfigError
from connect_state.core.settings import interval_seconds, load_settings
from connect_state.core.vocabulary import ConnectorType
from connect_state.folds.connector_states import DELETED, ConnectorRecord, ConnectorState, fold_connector
from connect_state.formats.config import (
    ConnectorConfig,
    ConnectorConfigKey,
)
from connect_state.formats.offsets import offset_key_bytes
from connect_state.security.guards import Guards, InternalTopics
from connect_state.spark.cleanup import SparkCleanupIO
from connect_state.tables import small_writes
from connect_state.tables.schemas import CONNECTOR_EVENTS

SOURCE_CONFIG = {"connector.class": FILE_SOURCE_CLASS, "file": "/tmp/in.txt", "topic": "t"}
SINK_CONFIG = {"connector.class": FILE_SINK_CLASS, "file": "/tmp/out.txt", "topics": "t"}
INTERNAL = InternalTopics("connect-configs", "connect-offsets", "connect-status")


def deletion(offset: int = 10, kind: str = "source", config: dict[str, Any] | None = None, name: str = "c") -> Deletion:
    return Deletion(name, offset, 1_000, kind, dict(SOURCE_CONFIG if config is None else config))


def steps(plan: list[PlannedStep]) -> list[tuple[str, str | None]]:
    return [(p.step, p.skip_reason) for p in plan]


# --- the deleted event carries the last config ----------------------------------------------------------------------


def test_deleted_event_records_last_config_and_type() -> None:
    create = ConnectorRecord("config", ConnectorConfigKey("c"), ConnectorConfig(dict(SINK_CONFIG)), 0, 3, 100)
    tombstone = ConnectorRecord("config", ConnectorConfigKey("c"), None, 0, 9, 200)
    _, events = fold_connector(ConnectorState("c"), [create, tombstone])
    [deleted] = [e for e in events if e.event == DELETED]
    assert deleted.details == {"connector_class": FILE_SINK_CLASS}
    assert (deleted.kafka_offset, deleted.kafka_timestamp) == (9, 200)
    assert json.loads(deleted.recorded_json()) == {
        "connector_class": FILE_SINK_CLASS,
        "config": SINK_CONFIG,
        "connector_type": "sink",
    }
    [d], lifecycles = deletions_from_events(
        [
            {"connector": e.connector, "event": e.event, "details": e.recorded_json(), "source": e.source,
             "kafka_offset": e.kafka_offset, "kafka_timestamp": e.kafka_timestamp}
            for e in events
        ]
    )  # fmt: skip
    assert (d.connector, d.deletion_offset, d.deleted_at, d.connector_type, d.config) == (
        "c",
        9,
        200,
        "sink",
        SINK_CONFIG,
    )
    assert lifecycles["c"] == Lifecycle(created=(3,), deleted=(9,))


def test_deletions_from_events_dedupes_ignores_status_and_old_events_without_config() -> None:
    row = {"connector": "c", "event": "deleted", "details": '{"connector_class":"X"}', "source": "config",
           "kafka_offset": 5, "kafka_timestamp": 7}  # fmt: skip
    created = {**row, "event": "created", "kafka_offset": 2, "details": "{}"}
    status = {**row, "event": "status_changed", "source": "status", "kafka_offset": 99}
    deletions, lifecycles = deletions_from_events([created, row, dict(row), status])
    assert deletions == [Deletion("c", 5, 7, ConnectorType.UNKNOWN, None)]
    assert deletions[0].config is None
    assert lifecycles == {"c": Lifecycle((2,), (5,))}


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [("sink", ConnectorType.SINK), ("source", ConnectorType.SOURCE), ("SINK", ConnectorType.UNKNOWN),
     ("mirror", ConnectorType.UNKNOWN), (None, ConnectorType.SOURCE)],
)  # fmt: skip
def test_a_deletions_type_is_the_recorded_one_when_connect_knows_it(recorded, expected) -> None:
    details = {"config": SOURCE_CONFIG, **({"connector_type": recorded} if recorded else {})}
    row = {"connector": "c", "event": "deleted", "details": json.dumps(details), "source": "config",
           "kafka_offset": 5, "kafka_timestamp": 7}  # fmt: skip
    [deletion], _ = deletions_from_events([row])
    assert deletion.connector_type is expected


@pytest.mark.parametrize(
    ("class_types", "expected"), [(None, ConnectorType.SINK), ({"x.Queue": "source"}, ConnectorType.SOURCE)]
)
def test_an_unrecorded_type_comes_from_connector_class_types_first(class_types, expected) -> None:
    details = {"config": {"connector.class": "x.Queue", "topics": "in"}}  # a "topics" key: guessed to be a sink
    row = {"connector": "c", "event": "deleted", "details": json.dumps(details), "source": "config",
           "kafka_offset": 5, "kafka_timestamp": 7}  # fmt: skip
    [deletion], _ = deletions_from_events([row], class_types)
    assert deletion.connector_type is expected


# --- the recreated rule ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lifecycle", "expected"),
    [
        (None, None),
        (Lifecycle(created=(1,), deleted=(10,)), None),
        (Lifecycle(created=(1, 20), deleted=(10,)), "connector recreated at config offset 20"),
        (Lifecycle(created=(1, 30, 20), deleted=(10,)), "connector recreated at config offset 20"),
        # The recreation was compacted away before the fold saw it; a later deletion still implies it.
        (Lifecycle(created=(1,), deleted=(10, 40)), "connector recreated and deleted again at config offset 40"),
        # A creation at the tombstone's own offset is impossible; only strictly later ones count.
        (Lifecycle(created=(10,), deleted=(10,)), None),
    ],
)
def test_shared_cleanup_blocker(lifecycle: Lifecycle | None, expected: str | None) -> None:
    assert shared_cleanup_blocker(deletion(10), lifecycle) == expected


def test_only_the_last_deletion_before_no_recreation_cleans_shared_resources() -> None:
    # created 1, deleted 10, created 20, deleted 30: only the deletion at 30 may touch offsets and topic statuses.
    life = Lifecycle(created=(1, 20), deleted=(10, 30))
    first = plan_steps(deletion(10, config={**SOURCE_CONFIG, "cleanup.offsets.on.delete": "true"}), ["h"], True, life)
    last = plan_steps(deletion(30, config={**SOURCE_CONFIG, "cleanup.offsets.on.delete": "true"}), ["h"], True, life)
    assert steps(first) == [
        (Step.ACTIVE_TOPICS, "connector recreated at config offset 20"),
        (Step.OFFSETS, "connector recreated at config offset 20"),
        ("hook:h", None),  # hooks still run: they release the old incarnation's external resources
    ]
    assert steps(last) == [(Step.ACTIVE_TOPICS, None), (Step.OFFSETS, None), ("hook:h", None)]


# --- planning -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("default", "config_value", "kind", "offsets_reason"),
    [
        (False, None, "source", "offset cleanup disabled (cleanup.offsets.on.delete=false)"),
        (True, None, "source", None),
        (True, None, "sink", None),
        (False, "true", "source", None),
        (False, " TRUE ", "sink", None),
        (
            True,
            "false",
            "source",
            "offset cleanup disabled (cleanup.offsets.on.delete=false in the connector's config)",
        ),
        (
            True,
            "yes",
            "source",
            "cleanup.offsets.on.delete in the connector's config must be true or false, got 'yes'; offsets left in "
            "place",
        ),
        (True, None, "unknown", "connector type unknown (the deleted event carries no config): cannot tell offsets "
         "from a group"),
    ],
)  # fmt: skip
def test_plan_offsets_step(default: bool, config_value: str | None, kind: str, offsets_reason: str | None) -> None:
    config = dict(SOURCE_CONFIG)
    if config_value is not None:
        config["cleanup.offsets.on.delete"] = config_value
    plan = plan_steps(deletion(kind=kind, config=config), [], default)
    assert steps(plan) == [(Step.ACTIVE_TOPICS, None), (Step.OFFSETS, offsets_reason)]


def test_plan_hooks_in_order_and_active_topics_always() -> None:
    plan = plan_steps(deletion(), ["b.mod:hook", "a"], False)
    assert [p.step for p in plan] == [Step.ACTIVE_TOPICS, Step.OFFSETS, "hook:b.mod:hook", "hook:a"]
    assert plan[0].skip_reason is None


def test_offsets_cleanup_enabled_rejects_non_booleans() -> None:
    assert offsets_cleanup_enabled(None, True) is True
    assert offsets_cleanup_enabled({"cleanup.offsets.on.delete": "False"}, True) is False
    with pytest.raises(ConfigError, match="must be true or false"):
        offsets_cleanup_enabled({"cleanup.offsets.on.delete": "1"}, False)


@pytest.mark.parametrize(
    ("config", "group"),
    [
        ({}, "connect-c"),
        ({"consumer.override.group.id": "my-group"}, "my-group"),
        ({"consumer.override.group.id": ""}, "connect-c"),
    ],
)
def test_sink_group_id(config: dict[str, str], group: str) -> None:
    assert sink_group_id("c", config) == group


@pytest.mark.parametrize(
    ("config", "topics"),
    [
        ({}, ["connect-offsets"]),
        ({"offsets.storage.topic": "own"}, ["connect-offsets", "own"]),
        ({"offsets.storage.topic": "connect-offsets"}, ["connect-offsets"]),
    ],
)
def test_source_offsets_topics(config: dict[str, str], topics: list[str]) -> None:
    assert source_offsets_topics("connect-offsets", config) == topics


@pytest.mark.parametrize(
    ("row", "live"),
    [
        (None, []),
        ({"connector_state": None, "tasks": []}, []),
        ({"connector_state": "UNASSIGNED", "tasks": [{"id": 0, "state": "UNASSIGNED"}]}, []),
        ({"connector_state": "RUNNING", "tasks": [{"id": 0, "state": "FAILED"}]}, ["connector RUNNING"]),
        ({"connector_state": "STOPPED", "tasks": [{"id": 1, "state": "PAUSED"}]}, ["task 1 PAUSED"]),
    ],
)
def test_live_statuses(row: dict[str, Any] | None, live: list[str]) -> None:
    assert live_statuses(row) == live


# --- backoff and outcomes -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempts", "expected"),
    [(0, 0), (1, 1_000), (2, 2_000), (3, 4_000), (9, 256_000), (10, 300_000), (200, 300_000)],
)
def test_backoff_doubles_up_to_the_max(attempts: int, expected: int) -> None:
    assert backoff_ms(attempts, 1_000, 300_000) == expected


def test_outcome_transitions() -> None:
    pending = planned_outcome(PlannedStep("hook:h"), 100)
    assert (pending.status, pending.next_attempt_at, is_due(pending, 100)) == (PENDING, 100, True)
    failed = next_outcome(pending, StepResult.failed("ValueError: boom"), 200, 1_000, 10_000)
    assert (failed.status, failed.attempts, failed.error, failed.next_attempt_at) == (
        FAILED,
        1,
        "ValueError: boom",
        1_200,
    )
    assert not is_due(failed, 1_199) and is_due(failed, 1_200)
    again = next_outcome(failed, StepResult.failed("ValueError: boom"), 1_200, 1_000, 10_000)
    assert (again.attempts, again.next_attempt_at) == (2, 3_200)
    waiting = next_outcome(again, StepResult.waiting("tasks running"), 3_200, 1_000, 10_000)
    assert (waiting.status, waiting.attempts, waiting.detail, waiting.next_attempt_at) == (
        PENDING,
        2,
        "tasks running",
        4_200,
    )
    done = next_outcome(waiting, StepResult.succeeded("ok"), 4_200, 1_000, 10_000)
    assert (done.status, done.attempts, done.error, done.next_attempt_at, done.final) == (
        SUCCEEDED,
        3,
        None,
        None,
        True,
    )
    assert not is_due(done, 10**12)
    skipped = planned_outcome(PlannedStep(Step.OFFSETS, "disabled"), 5)
    assert (skipped.status, skipped.detail, is_due(skipped, 10**12)) == (SKIPPED, "disabled", False)


@dataclass
class Clock:
    now: int = 1_000

    def __call__(self) -> int:
        return self.now


def test_a_failing_step_never_blocks_the_others_and_each_outcome_is_recorded_right_away() -> None:
    clock = Clock()
    recorded: list[StepOutcome] = []
    journal: list[str] = []

    def record(outcome: StepOutcome) -> None:
        journal.append(f"recorded {outcome.step}")
        recorded.append(outcome)

    def fails() -> StepResult:
        journal.append("ran hook:bad")
        raise RuntimeError("external system down")

    def ok(step: str):
        def run() -> StepResult:
            journal.append(f"ran {step}")
            return StepResult.succeeded(step)

        return run

    outcomes = {
        step: planned_outcome(PlannedStep(step), clock.now)
        for step in (Step.ACTIVE_TOPICS, "hook:bad", "hook:good", "hook:gone")
    }
    actions = {Step.ACTIVE_TOPICS: ok(Step.ACTIVE_TOPICS), "hook:bad": fails, "hook:good": ok("hook:good")}
    new = run_due_steps(outcomes, actions, record, clock, 1_000, 60_000)
    assert journal == [
        "ran active_topics",
        "recorded active_topics",
        "ran hook:bad",
        "recorded hook:bad",
        "ran hook:good",
        "recorded hook:good",
        "recorded hook:gone",
    ]
    assert new == recorded
    assert [(o.step, o.status, o.attempts) for o in new] == [
        (Step.ACTIVE_TOPICS, SUCCEEDED, 1),
        ("hook:bad", FAILED, 1),
        ("hook:good", SUCCEEDED, 1),
        ("hook:gone", SKIPPED, 0),
    ]
    assert new[1].error == "RuntimeError: external system down"
    assert new[3].detail == "hook:gone is no longer registered (cleanup.hooks or entry points)"
    # Next pass, before the backoff: nothing runs. After it: only the failed hook, which now succeeds.
    state = {o.step: o for o in new}
    assert run_due_steps(state, actions, record, clock, 1_000, 60_000) == []
    clock.now += 1_000
    actions["hook:bad"] = ok("hook:bad")
    [retried] = run_due_steps(state, actions, record, clock, 1_000, 60_000)
    assert (retried.step, retried.status, retried.attempts, retried.error) == ("hook:bad", SUCCEEDED, 2, None)
    assert journal[-2:] == ["ran hook:bad", "recorded hook:bad"]


def test_call_hook_passes_name_string_config_and_is_deleted() -> None:
    seen: list[tuple[str, Mapping[str, str], bool]] = []

    def hook(connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
        seen.append((connector, config, is_deleted))

    config = hook_config({"a": "x", "n": 3, "z": None})
    context = DeletedConnector("c", None, "source", config, {}, [], {}, [], 7, 0)
    call_hook(hook, context)
    assert seen == [("c", {"a": "x", "n": "3", "z": "null"}, True)]
    assert hook_config(None) == {}


# --- hook loading ---------------------------------------------------------------------------------------------------


def module_hook(connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
    """A hook named by path in the tests."""


class ClassHook:
    def __call__(self, connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
        pass


class BrokenClassHook:
    def __init__(self) -> None:
        raise RuntimeError("no credentials")


NOT_CALLABLE = "just a string"


@dataclass
class FakeEntryPoint:
    name: str
    target: object

    def load(self) -> object:
        if isinstance(self.target, Exception):
            raise self.target
        return self.target


def test_load_hooks_by_path_class_and_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins, "entry_points", lambda group: [FakeEntryPoint("from-ep", module_hook)])
    hooks = load_deletion_hooks(f"{__name__}:module_hook, {__name__}:ClassHook")
    assert list(hooks) == ["from-ep", f"{__name__}:module_hook", f"{__name__}:ClassHook"]
    assert hooks[f"{__name__}:module_hook"] is module_hook
    assert isinstance(hooks[f"{__name__}:ClassHook"], ClassHook)
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    assert load_deletion_hooks("") == {}
    assert list(load_deletion_hooks("connect_state.dev.demo_hooks:log_deletion")) == [
        "connect_state.dev.demo_hooks:log_deletion"
    ]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("no_such_module_xyz:hook", "cannot import module 'no_such_module_xyz'"),
        (f"{__name__}:missing", "has no attribute 'missing'"),
        ("nocolon", "expected 'module:attribute'"),
        (f"{__name__}:NOT_CALLABLE", "is a str, not a callable"),
        (f"{__name__}:BrokenClassHook", "cannot instantiate BrokenClassHook: no credentials"),
    ],
)
def test_load_hooks_failures(monkeypatch: pytest.MonkeyPatch, setting: str, message: str) -> None:
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    with pytest.raises(PluginError, match=message):
        load_deletion_hooks(setting)


def test_load_hooks_failing_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins, "entry_points", lambda group: [FakeEntryPoint("bad", ImportError("missing dep"))])
    with pytest.raises(PluginError, match=r"entry point 'bad' .* cannot be loaded: missing dep"):
        load_deletion_hooks("")


def test_job_refuses_to_start_with_a_bad_hook(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    from connect_state.jobs import cleanup as job

    code = job.main(["--once", "--set", "cleanup.hooks=no_such_module_xyz:hook", "--set", f"delta.root={tmp_path}"])
    assert code == 2
    assert "cannot import module 'no_such_module_xyz'" in caplog.text


# --- misc -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10 seconds", 10.0), ("1 minute", 60.0), ("500 milliseconds", 0.5), ("250", 0.25), ("2 h", 7200.0)],
)
def test_interval_seconds(text: str, seconds: float) -> None:
    assert interval_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "ten seconds", "10 fortnights", "1 2 3"])
def test_interval_seconds_rejects(text: str) -> None:
    with pytest.raises(ConfigError, match=r"trigger\.interval"):
        interval_seconds(text)


# --- a pass, with in-memory I/O -------------------------------------------------------------------------------------


@dataclass
class MemoryCleanupIO:
    """:class:`connect_state.cleanup.reconciler.CleanupIO` in memory: tables as lists, topics as (key, value) lists."""

    events: list[dict[str, Any]] | None = None
    connectors: dict[str, dict[str, Any]] = field(default_factory=dict)
    active: dict[str, list[str]] = field(default_factory=dict)
    source_offsets: list[tuple[str, str, bytes]] = field(default_factory=list)  # (connector, topic, key)
    topics: dict[str, list[tuple[bytes, bytes | None]]] = field(default_factory=dict)
    groups: set[str] = field(default_factory=set)
    group_commits: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    topic_history: list[tuple[str, str, int]] = field(default_factory=list)  # (connector, topic added, at)
    outcomes: dict[tuple[str, int], dict[str, StepOutcome]] = field(default_factory=dict)
    tombstones: list[tuple[str, list[bytes]]] = field(default_factory=list)
    live_reads: list[str] = field(default_factory=list)
    passes: int = 0
    #: The tables' versions (events, outcomes) as Delta would count them; None: not told (every pass runs).
    versions: list[int] | None = None

    def begin_pass(self) -> None:
        self.passes += 1

    def input_marks(self) -> tuple[int, int] | None:
        return None if self.versions is None else (self.versions[0], self.versions[1])

    def add_events(self, *rows: dict[str, Any]) -> None:
        self.events = [*(self.events or []), *rows]
        if self.versions is not None:
            self.versions[0] += 1

    def deletion_events(self) -> list[dict[str, Any]] | None:
        return self.events

    def read_outcomes(self) -> dict[tuple[str, int], dict[str, StepOutcome]]:
        return {key: dict(steps) for key, steps in self.outcomes.items()}

    def record_outcomes(self, rows, insert_only: bool) -> None:
        if self.versions is not None:
            self.versions[1] += 1
        for deletion, outcome in rows:
            steps = self.outcomes.setdefault(deletion.key, {})
            if not (insert_only and outcome.step in steps):
                steps[outcome.step] = outcome

    def connector_row(self, name: str) -> dict[str, Any] | None:
        return self.connectors.get(name)

    def config_records(self) -> list[tuple[bytes, bytes | None, int]]:
        return [(k, v, offset) for offset, (k, v) in enumerate(self.topics.get("connect-configs", []))]

    def active_topics(self, connector: str) -> list[str]:
        return self.active.get(connector, [])

    def source_offsets_keys(self, connector: str) -> list[tuple[str, bytes]]:
        return [(topic, key) for name, topic, key in self.source_offsets if name == connector]

    def live_keys(self, topic: str, *, contains: str | None = None) -> list[bytes]:
        self.live_reads.append(topic)
        latest = dict(self.topics.get(topic, []))
        return [
            key for key, value in latest.items() if value is not None and (contains is None or contains in key.decode())
        ]

    def topic_exists(self, topic: str) -> bool:
        return topic in self.topics

    def write_tombstones(self, topic: str, keys) -> None:
        self.tombstones.append((topic, list(keys)))
        self.topics.setdefault(topic, []).extend((key, None) for key in keys)

    def delete_group(self, group: str) -> bool:
        if group in self.groups:
            self.groups.remove(group)
            return True
        return False

    def source_offset_rows(self, connector: str) -> list[Mapping[str, object]]:
        latest = {(topic, key): value for topic, records in self.topics.items() for key, value in records}
        return [
            {"offsets_topic": topic, "key": key, "value": latest.get((topic, key)), "listed": True}
            for name, topic, key in self.source_offsets
            if name == connector
        ]

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        return dict(self.group_commits.get(group, {}))

    def active_topics_at(self, connector: str, at_ms: int) -> list[str]:
        return [topic for name, topic, ts in self.topic_history if name == connector and ts <= at_ms]

    def close(self) -> None:
        return None


def event(name: str, kind: str, offset: int, config: dict[str, Any] | None = None) -> dict[str, Any]:
    details = json.dumps({"config": config}) if config is not None else None
    return {"connector": name, "event": kind, "details": details, "source": "config", "kafka_offset": offset,
            "kafka_timestamp": 1_000}  # fmt: skip


#: The guards as the job builds them from the settings (Guards.from_settings): nothing widened.
GUARDS = Guards(INTERNAL, reserved_groups=frozenset({"connect-cluster"}), allowed_offsets_topics=("*",))


def reconciler(
    io: MemoryCleanupIO,
    hooks: Mapping[str, Any] | None = None,
    offsets_on_delete: bool = True,
    guards: Guards = GUARDS,
):
    return CleanupReconciler(
        io, hooks or {}, status_topic="connect-status", offsets_topic="connect-offsets",
        offsets_on_delete=offsets_on_delete, backoff_ms=1_000, backoff_max_ms=60_000, clock=Clock(), guards=guards,
    )  # fmt: skip


def statuses(io: MemoryCleanupIO, name: str) -> dict[str, str]:
    (steps,) = [steps for (connector, _), steps in io.outcomes.items() if connector == name]
    return {step: outcome.status for step, outcome in steps.items()}


def test_a_pass_without_the_events_table_does_nothing() -> None:
    io = MemoryCleanupIO()
    assert str(reconciler(io).run_pass()).startswith("0 deletions")
    assert io.outcomes == {}


def test_a_pass_tombstones_exactly_the_connectors_keys() -> None:
    own = {**SOURCE_CONFIG, "offsets.storage.topic": "own-offsets"}
    key = offset_key_bytes("src", {"filename": "/in.txt"})
    other = offset_key_bytes("src-2", {"filename": "/in.txt"})
    io = MemoryCleanupIO(
        events=[event("src", "created", 1), event("src", "deleted", 5, own)],
        active={"src": ["t1"]},
        source_offsets=[("src", "connect-offsets", key)],
        topics={
            "connect-status": [
                (b"status-topic-t2:connector-src", b"{}"),
                (b"status-topic-t3:connector-src", b"{}"),
                (b"status-topic-t3:connector-src", None),  # already gone
                (b"status-topic-t1:connector-src-2", b"{}"),
            ],
            "connect-offsets": [(key, b'{"position":1}'), (other, b'{"position":1}')],
            "own-offsets": [(key, b'{"position":9}'), (b'["src"]', b"{}")],  # a key Connect ignores
        },
    )
    summary = reconciler(io).run_pass()
    assert (summary.deletions, summary.planned, summary.succeeded) == (1, 1, 2)
    assert statuses(io, "src") == {"active_topics": SUCCEEDED, "offsets": SUCCEEDED}
    assert io.tombstones == [
        ("connect-status", [b"status-topic-t1:connector-src", b"status-topic-t2:connector-src"]),
        ("connect-offsets", [key]),
        ("own-offsets", [key]),
    ]
    # Final: the next pass runs nothing.
    assert reconciler(io).run_pass().ran == 0


def test_a_pass_reads_the_status_topic_once_for_all_its_deletions() -> None:
    names = [f"c{i}" for i in range(5)]
    io = MemoryCleanupIO(
        events=[event(name, "deleted", 10 + i, SOURCE_CONFIG) for i, name in enumerate(names)],
        topics={"connect-status": [(f"status-topic-t:connector-{name}".encode(), b"{}") for name in names[:3]]},
    )
    rec = reconciler(io, offsets_on_delete=False)
    assert rec.run_pass().succeeded == 5
    assert io.live_reads == ["connect-status"]
    assert io.tombstones == [("connect-status", [f"status-topic-t:connector-{name}".encode()]) for name in names[:3]]
    io.events.append(event("c9", "deleted", 30, SOURCE_CONFIG))
    rec.run_pass()  # the next pass reads it again: keys written since count
    assert io.live_reads == ["connect-status", "connect-status"]


def test_a_missing_own_offsets_topic_is_left_out_and_a_sinks_group_is_deleted() -> None:
    io = MemoryCleanupIO(
        events=[
            event("src", "deleted", 5, {**SOURCE_CONFIG, "offsets.storage.topic": "never-created"}),
            event("snk", "deleted", 6, SINK_CONFIG),
        ],
        topics={"connect-offsets": [], "connect-status": []},
        groups={"connect-snk"},
    )
    reconciler(io).run_pass()
    details = {name: io.outcomes[(name, offset)]["offsets"].detail for name, offset in (("src", 5), ("snk", 6))}
    assert details == {"src": "no source offsets", "snk": "consumer group connect-snk deleted"}
    assert io.groups == set()


def test_shared_steps_skip_a_recreated_name_and_wait_for_running_tasks() -> None:
    io = MemoryCleanupIO(
        events=[event("again", "deleted", 5, SOURCE_CONFIG), event("busy", "deleted", 6, SOURCE_CONFIG)],
        topics={
            "connect-configs": [(f"connector-x{i}".encode(), b"{}") for i in range(7)]
            + [(b"connector-again", b'{"properties":{"connector.class":"X"}}')],  # offset 7: a recreation
            "connect-offsets": [],
            "connect-status": [],
        },
        connectors={"busy": {"connector_state": "UNASSIGNED", "tasks": [{"id": 0, "state": "RUNNING"}]}},
    )
    hook_calls: list[str] = []
    summary = reconciler(io, {"h": lambda name, config, *, is_deleted: hook_calls.append(name)}).run_pass()
    assert statuses(io, "again") == {"active_topics": SKIPPED, "offsets": SKIPPED, "hook:h": SUCCEEDED}
    assert io.outcomes[("again", 5)]["offsets"].detail == "connector recreated at config offset 7"
    # KIP-883: hooks too run once the deleted connector's tasks have stopped
    assert statuses(io, "busy") == {"active_topics": PENDING, "offsets": PENDING, "hook:h": PENDING}
    for step in ("offsets", "hook:h"):
        assert (
            io.outcomes[("busy", 6)][step].detail
            == "waiting for the deleted connector's tasks to stop (task 0 RUNNING)"
        )
    assert summary.waiting == 3 and sorted(hook_calls) == ["again"] and io.tombstones == []


# --- KIP-883 hooks per class, with a deadline, with the deleted connector's context ---------------------------------


def _task_records(name: str, configs: list[dict[str, str]]) -> list[tuple[bytes, bytes]]:
    records = [
        (f"task-{name}-{i}".encode(), json.dumps({"properties": config}).encode()) for i, config in enumerate(configs)
    ]
    return [*records, (f"commit-{name}".encode(), json.dumps({"tasks": len(configs)}).encode())]


def test_hooks_run_for_their_class_only_and_receive_the_deleted_connectors_context() -> None:
    key = offset_key_bytes("src", {"filename": "/in.txt"})
    config_records = [
        (b"connector-src", json.dumps({"properties": SOURCE_CONFIG}).encode()),
        *_task_records("src", [{"task.class": "old"}]),
        *_task_records("src", [{"task.class": "T", "file": "/in.txt"}, {"task.class": "T2"}]),
        (b"connector-src", None),  # the deletion: offset 6
        (b"task-src-0", json.dumps({"properties": {"task.class": "later"}}).encode()),
    ]
    io = MemoryCleanupIO(
        events=[event("src", "deleted", 6, SOURCE_CONFIG), event("snk", "deleted", 8, SINK_CONFIG)],
        topics={
            "connect-configs": config_records,
            "connect-offsets": [(key, b'{"position":42}')],
            "connect-status": [],
        },
        active={"snk": ["t"]},
        topic_history=[("src", "t", 1_000), ("src", "after-deletion", 5_000)],  # Connect reset them at the deletion
        source_offsets=[("src", "connect-offsets", key)],
        groups={"connect-snk"},
        group_commits={"connect-snk": {("t", 0): 5}},
    )
    seen: dict[str, Any] = {}

    def source_hook(connector: str, config: Mapping[str, str], *, is_deleted: bool, context: DeletedConnector) -> None:
        seen[connector] = context

    def any_hook(connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
        seen.setdefault("any", []).append(connector)

    rec = CleanupReconciler(
        io, {"src-hook": source_hook, "sink-hook": lambda *a, **k: seen.setdefault("sink", a[0]), "all": any_hook},
        status_topic="connect-status", offsets_topic="connect-offsets", offsets_on_delete=True, backoff_ms=1_000,
        backoff_max_ms=60_000, clock=Clock(), guards=GUARDS,
        hook_classes={"src-hook": {"FileStreamSource"}, "sink-hook": {FILE_SINK_CLASS}},
    )  # fmt: skip
    rec.run_pass()
    assert statuses(io, "src") == {"active_topics": SUCCEEDED, "offsets": SUCCEEDED, "hook:src-hook": SUCCEEDED,
                                   "hook:all": SUCCEEDED}  # fmt: skip
    assert statuses(io, "snk") == {"active_topics": SUCCEEDED, "offsets": SUCCEEDED, "hook:sink-hook": SUCCEEDED,
                                   "hook:all": SUCCEEDED}  # fmt: skip
    context = seen["src"]
    assert context.task_configs == {0: {"task.class": "T", "file": "/in.txt"}, 1: {"task.class": "T2"}}
    # read before the pass's offsets and active_topics steps tombstoned them
    assert context.source_offsets == [({"filename": "/in.txt"}, {"position": 42})]
    assert context.active_topics == ["t"] and context.connector_class == FILE_SOURCE_CLASS
    assert context.config == hook_config(SOURCE_CONFIG) and (context.deletion_offset, context.sink_offsets) == (6, {})
    assert seen["sink"] == "snk" and sorted(seen["any"]) == ["snk", "src"]
    assert rec._context(
        next(d for d in deletions_from_events(io.events or [])[0] if d.connector == "snk")
    ).sink_offsets == {("t", 0): 5}


def test_a_hung_hook_fails_at_its_deadline_without_holding_up_the_others_and_is_not_rerun_while_it_hangs() -> None:
    release = threading.Event()
    calls: list[str] = []

    def hung(connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
        calls.append("hung")
        release.wait(5)

    def quick(connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
        calls.append("quick")

    io = MemoryCleanupIO(events=[event("c", "deleted", 1, SOURCE_CONFIG)], topics={"connect-configs": []})
    clock = Clock()
    rec = CleanupReconciler(
        io, {"hung": hung, "quick": quick}, status_topic="connect-status", offsets_topic="connect-offsets",
        offsets_on_delete=False, backoff_ms=1, backoff_max_ms=1, clock=clock, hook_timeout_ms=50, guards=GUARDS,
    )  # fmt: skip
    rec.run_pass()
    outcome = io.outcomes[("c", 1)]["hook:hung"]
    assert (outcome.status, outcome.attempts) == (FAILED, 1)
    assert outcome.error == "PluginTimeout: deletion hook hung did not return within 50 ms (cleanup.hook.timeout.ms)"
    assert io.outcomes[("c", 1)]["hook:quick"].status == SUCCEEDED
    clock.now += 10
    rec.run_pass()  # retried: the first call still hangs, so no second call
    assert io.outcomes[("c", 1)]["hook:hung"].attempts == 2 and calls.count("hung") == 1
    assert "an earlier call that missed its deadline of 50 ms" in (io.outcomes[("c", 1)]["hook:hung"].error or "")
    release.set()
    time.sleep(0.1)
    clock.now += 10
    rec.run_pass()  # the call returned: the retry calls the hook again, and it returns now
    assert calls.count("hung") == 2 and io.outcomes[("c", 1)]["hook:hung"].status == SUCCEEDED


def test_class_hooks_load_from_settings_paths() -> None:
    hooks, classes = load_class_hooks(
        {"FileStreamSource": f"{__name__}:module_hook|{__name__}:ClassHook", "*": f"{__name__}:module_hook"}
    )
    assert set(hooks) == {f"{__name__}:module_hook", f"{__name__}:ClassHook"}
    assert classes[f"{__name__}:module_hook"] == frozenset({"FileStreamSource", "*"})
    assert hook_applies(classes[f"{__name__}:ClassHook"], FILE_SOURCE_CLASS)
    assert not hook_applies(classes[f"{__name__}:ClassHook"], FILE_SINK_CLASS)
    assert hook_applies(classes[f"{__name__}:module_hook"], "org.example.Other") and hook_applies(None, None)


# --- passes skipped on a quiet cluster ------------------------------------------------------------------------------


def test_a_pass_is_skipped_while_nothing_changed_and_nothing_is_due() -> None:
    io = MemoryCleanupIO(events=[event("src", "created", 1)], versions=[1, 0])
    rec = reconciler(io)
    assert rec.run_pass() is not None
    assert io.passes == 1
    assert rec.run_pass() is None  # same versions, no unfinished step
    assert io.passes == 1
    io.add_events(event("src", "deleted", 5, SOURCE_CONFIG))  # a deletion arrives: the next pass plans it
    summary = rec.run_pass()
    assert summary is not None and (summary.deletions, summary.planned) == (1, 1)
    assert statuses(io, "src") == {"active_topics": SUCCEEDED, "offsets": SUCCEEDED}
    assert rec.run_pass() is None  # its own outcome writes are not news
    assert io.passes == 2


def test_a_failed_step_brings_the_pass_back_when_its_retry_is_due() -> None:
    io = MemoryCleanupIO(events=[event("src", "deleted", 5, SOURCE_CONFIG)], versions=[1, 0])
    calls: list[str] = []

    def hook(name: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
        calls.append(name)
        if len(calls) == 1:
            raise RuntimeError("external system down")

    rec = reconciler(io, {"h": hook})
    clock = rec.clock
    assert isinstance(clock, Clock)
    assert rec.run_pass() is not None
    assert statuses(io, "src")["hook:h"] == FAILED
    assert rec.run_pass() is None  # the retry is not due yet (backoff 1 s)
    clock.now += 1_000
    summary = rec.run_pass()
    assert summary is not None and summary.succeeded == 1
    assert calls == ["src", "src"]
    assert rec.run_pass() is None


def test_every_pass_runs_when_the_versions_cannot_be_told() -> None:
    io = MemoryCleanupIO(events=[event("src", "created", 1)])
    rec = reconciler(io)
    for _ in range(3):
        assert rec.run_pass() is not None
    assert io.passes == 3


def events_rows(*rows: tuple[str, str, str, int]) -> pa.Table:
    """``connector_events`` rows (connector, event, source, kafka_offset)."""
    columns: dict[str, list[object]] = {name: [None] * len(rows) for name in CONNECTOR_EVENTS.column_names}
    columns.update(
        connector=[r[0] for r in rows],
        event=[r[1] for r in rows],
        source=[r[2] for r in rows],
        kafka_partition=[0] * len(rows),
        kafka_offset=[r[3] for r in rows],
    )
    return pa.table(columns, schema=CONNECTOR_EVENTS.schema)


def test_the_jobs_pass_check_counts_creations_and_deletions_not_every_event(tmp_path) -> None:
    """The cleanup job's cheap check (deltalake, no Spark): pauses, resumes and status events leave it unchanged, so no
    pass runs for them; a creation or a deletion from the config topic changes it; so does nothing a rewrite of the
    same rows (a compaction of the table's files)."""
    settings = load_settings(overrides={"delta.root": str(tmp_path / "delta")}, environ={})
    io = SparkCleanupIO(None, settings)  # type: ignore[arg-type]  # no Spark: the check reads through deltalake
    assert io.input_marks() == (-1, -1)
    path = str(settings.table_path(CONNECTOR_EVENTS.name))
    write_deltalake(path, events_rows(("src", "created", "config", 1)), schema_mode=None)
    first = io.input_marks()
    assert first is not None and first[0] == 1
    write_deltalake(path, events_rows(("src", "paused", "config", 2), ("src", "deleted", "status", 3)), mode="append")
    assert io.input_marks() == first
    write_deltalake(path, events_rows(("src", "deleted", "config", 4)), mode="append")
    after_deletion = io.input_marks()
    assert after_deletion is not None and after_deletion[0] == 2
    every_row = DeltaTable(path).to_pyarrow_table()
    write_deltalake(path, every_row, mode="overwrite")  # the same rows in a new file
    assert io.input_marks() == after_deletion


def test_the_jobs_pass_check_fails_for_good_only_at_its_first_read(tmp_path, monkeypatch) -> None:
    """deltalake unable to read the tables at the first check (no credentials, say): every pass runs from then on.
    A failure after a check that worked (a store's passing error) is a pass this time only."""
    settings = load_settings(overrides={"delta.root": str(tmp_path / "delta")}, environ={})
    write_deltalake(str(settings.table_path(CONNECTOR_EVENTS.name)), events_rows(("src", "created", "config", 1)))
    real_latest = small_writes.latest

    def failing(*args, **kwargs):
        raise OSError("store unreachable")

    broken = SparkCleanupIO(None, settings)  # type: ignore[arg-type]
    monkeypatch.setattr(small_writes, "latest", failing)
    assert broken.input_marks() is None
    monkeypatch.setattr(small_writes, "latest", real_latest)
    assert broken.input_marks() is None  # for good

    io = SparkCleanupIO(None, settings)  # type: ignore[arg-type]
    marks = io.input_marks()
    assert marks == (1, -1)
    monkeypatch.setattr(small_writes, "latest", failing)
    assert io.input_marks() is None
    monkeypatch.setattr(small_writes, "latest", real_latest)
    assert io.input_marks() == marks


# --- no confused deputy: a deletion acts only on what the guards let through (issue 33, finding 4) --------------------


def overriding_sink(group: str) -> dict[str, str]:
    """A sink whose author named someone else's group and turned cleanup on (both are the connector config's)."""
    return {**SINK_CONFIG, "consumer.override.group.id": group, "cleanup.offsets.on.delete": "true"}


def test_a_deletion_never_deletes_the_group_a_sinks_config_names_and_the_job_goes_on() -> None:
    io = MemoryCleanupIO(
        events=[event("evil", "deleted", 5, overriding_sink("payments")), event("snk", "deleted", 6, SINK_CONFIG)],
        topics={"connect-offsets": [], "connect-status": []},
        groups={"payments", "connect-evil", "connect-snk"},
    )
    summary = reconciler(io).run_pass()
    evil = io.outcomes[("evil", 5)]["offsets"]
    assert (evil.status, evil.attempts, evil.error) == ("refused", 0, None)
    assert evil.detail == (
        "consumer.override.group.id 'payments' of connector evil is not the connector's consumer group: connect-state "
        "alters or deletes only connect-evil and groups matching cleanup.allowed.groups"
    )
    assert io.groups == {"payments", "connect-evil"}  # the next deletion of the pass went on: connect-snk is gone
    assert (summary.refused, summary.succeeded) == (1, 3)
    assert reconciler(io).run_pass().ran == 0  # refused is final


def test_cleanup_allowed_groups_widens_the_guard_but_never_to_the_workers_or_a_live_connectors_group() -> None:
    io = MemoryCleanupIO(
        events=[
            event("a", "deleted", 5, overriding_sink("team-a.sink")),
            event("b", "deleted", 6, overriding_sink("connect-cluster")),  # the workers' group (connect.group.id)
            event("c", "deleted", 7, overriding_sink("connect-live")),  # a live connector's own group
        ],
        topics={"connect-configs": [(b"connector-live", b'{"properties":{}}')], "connect-status": []},
        groups={"team-a.sink", "connect-cluster", "connect-live"},
    )
    widened = Guards(INTERNAL, reserved_groups=frozenset({"connect-cluster"}), allowed_groups=("team-a.*", "connect-*"))
    reconciler(io, guards=widened).run_pass()
    outcomes = {name: io.outcomes[(name, offset)]["offsets"] for name, offset in (("a", 5), ("b", 6), ("c", 7))}
    assert {name: o.status for name, o in outcomes.items()} == {"a": SUCCEEDED, "b": "refused", "c": "refused"}
    assert "Connect workers' group (connect.group.id)" in (outcomes["b"].detail or "")
    assert "default consumer group of connector live" in (outcomes["c"].detail or "")
    assert io.groups == {"connect-cluster", "connect-live"}


def test_a_deletion_writes_no_tombstone_to_an_internal_topic_its_config_names() -> None:
    key = offset_key_bytes("src", {"filename": "/in.txt"})
    io = MemoryCleanupIO(
        events=[event("src", "deleted", 5, {**SOURCE_CONFIG, "offsets.storage.topic": "connect-status"})],
        topics={"connect-offsets": [(key, b'{"position":1}')], "connect-status": [(key, b"{}")]},
    )
    reconciler(io).run_pass()
    outcome = io.outcomes[("src", 5)]["offsets"]
    assert outcome.status == "refused"
    assert "offsets.storage.topic 'connect-status' is one of Kafka's or Connect's internal topics" in (
        outcome.detail or ""
    )
    assert io.tombstones == []
