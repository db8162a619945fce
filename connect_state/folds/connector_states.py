"""Connector state: fold a connector's config-topic and status-topic records into what a Connect worker knows of it.

Pure Python, no Spark: the connector-state job calls :func:`fold_connector` once per connector and micro-batch from
``applyInPandasWithState``; tests call it directly. The records are the parsed ones of
:mod:`connect_state.formats.config` and :mod:`connect_state.formats.status`, wrapped in :class:`ConnectorRecord`.

Config topic, as Kafka 4.3.1's ``KafkaConfigBackingStore`` applies it
(``connect/runtime/src/main/java/org/apache/kafka/connect/storage/KafkaConfigBackingStore.java``; checked against the
4.3.1 bytecode):

* ``connector-<name>`` (``processConnectorConfigRecord``): a value replaces the config and, when the connector has no
  target state yet, sets STARTED; a tombstone runs ``processConnectorRemoval`` (config, task count, task configs and
  deferred task configs go; the target state and the inconsistent flag stay).
* ``target-state-<name>`` (``processTargetStateRecord``): a value sets the target state, even before the config exists
  (``initial_state``); ``state.v2`` is preferred over ``state`` by the parser. A tombstone removes the target
  state, and STARTED is put back when the config still exists.
* ``task-<name>-<n>`` (``processTaskConfigRecord``): buffered (``deferredTaskUpdates``) until a commit, with or
  without a config.
* ``commit-<name>`` (``processTasksCommitRecord``): for a connector without config it runs
  ``processConnectorRemoval`` and is otherwise ignored, whatever its value. Otherwise the commit is consistent when the
  buffer holds every task id 0..n-1 (``completeTaskIdSet``), else the connector is marked inconsistent and the task
  configs are not applied; either way the buffer is cleared and the task count becomes n (4.3.1 stores the count of
  an inconsistent commit too; ``ClusterConfigState.tasks`` then lists no tasks).
* ``restart-connector-<name>`` and ``tasks-fencing-<name>`` change nothing here.

Status topic, as ``KafkaStatusBackingStore.read`` applies it
(``connect/runtime/src/main/java/org/apache/kafka/connect/storage/KafkaStatusBackingStore.java``):

* a connector-status tombstone (``remove(connector)``) removes the connector's status and every task status;
* a task-status tombstone removes that task's status;
* a task UNASSIGNED is ignored when the cached status of that task is RUNNING with a generation >= the incoming one
  (``readTaskStatus``); every other status replaces the cached one.

Config and status records never interact, so the fold applies each topic in its own order: config records by offset
(the config topic has one partition); status records by offset within a partition (one status key always
lives in one partition), partitions merged by Kafka timestamp, because a connector-status tombstone reaches task keys
in other partitions. A record at or below the offset already applied for its topic and partition is a replay and is
skipped, which makes the fold idempotent.

Every transition is reported as a :class:`ConnectorEvent`, ordered by Kafka timestamp, then config before status, then
partition and offset.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final, Literal

from connect_state.connect.connector_types import config_connector_type, connector_class
from connect_state.core.vocabulary import ConnectorType, State, TargetState
from connect_state.formats.config import (
    ConfigKey,
    ConfigRecord,
    ConnectorConfig,
    ConnectorConfigKey,
    LoggerLevelKey,
    RestartRequest,
    RestartRequestKey,
    SessionKeyKey,
    TargetStateKey,
    TargetStateValue,
    TaskCommit,
    TaskCommitKey,
    TaskConfig,
    TaskConfigKey,
    TaskCount,
    TaskCountKey,
)
from connect_state.formats.status import (
    ConnectorStatusKey,
    Status,
    StatusKey,
    StatusRecord,
    TaskStatusKey,
    TopicStatus,
    TopicStatusKey,
)

__all__ = [
    "CONFIG",
    "CREATED",
    "DELETED",
    "EVENTS",
    "RECONFIGURED",
    "STATUS",
    "STATUS_CHANGED",
    "TARGET_STATE_CHANGED",
    "TASKS_COMMITTED",
    "TASK_STATUS_CHANGED",
    "ConnectorEvent",
    "ConnectorRecord",
    "ConnectorState",
    "apply_record",
    "connector_of",
    "connector_row",
    "fold_all",
    "fold_connector",
    "state_from_json",
    "state_to_json",
]

CONFIG: Final = "config"
STATUS: Final = "status"
RecordSource = Literal["config", "status"]

CREATED = "created"
RECONFIGURED = "reconfigured"
TARGET_STATE_CHANGED = "target_state_changed"
TASKS_COMMITTED = "tasks_committed"
STATUS_CHANGED = "status_changed"
TASK_STATUS_CHANGED = "task_status_changed"
DELETED = "deleted"
EVENTS = (CREATED, RECONFIGURED, TARGET_STATE_CHANGED, TASKS_COMMITTED, STATUS_CHANGED, TASK_STATUS_CHANGED, DELETED)


# ---------------------------------------------------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------------------------------------------------

ConnectorKey = (
    ConnectorConfigKey
    | TargetStateKey
    | TaskConfigKey
    | TaskCommitKey
    | RestartRequestKey
    | TaskCountKey
    | ConnectorStatusKey
    | TaskStatusKey
)
ConnectorValue = ConnectorConfig | TargetStateValue | TaskConfig | TaskCommit | RestartRequest | TaskCount | Status

# Per key kind: the topic it comes from, the value type it carries and whether a null value is allowed.
_KEY_KINDS: dict[type, tuple[RecordSource, type, bool]] = {
    ConnectorConfigKey: (CONFIG, ConnectorConfig, True),
    TargetStateKey: (CONFIG, TargetStateValue, True),
    TaskConfigKey: (CONFIG, TaskConfig, False),
    TaskCommitKey: (CONFIG, TaskCommit, True),
    RestartRequestKey: (CONFIG, RestartRequest, False),
    TaskCountKey: (CONFIG, TaskCount, False),
    ConnectorStatusKey: (STATUS, Status, True),
    TaskStatusKey: (STATUS, Status, True),
}


def connector_of(key: ConfigKey | StatusKey) -> str | None:
    """The connector a parsed config or status key belongs to, or None for keys outside this fold.

    ``session-key`` and ``logger-cluster-<ns>`` belong to no connector; topic-status keys belong to the active-topics
    fold (:mod:`connect_state.folds.active_topics`).
    """
    if isinstance(key, (SessionKeyKey, LoggerLevelKey, TopicStatusKey)):
        return None
    return key.connector


@dataclass(frozen=True)
class ConnectorRecord:
    """One parsed config-topic or status-topic record about one connector, with where Kafka had it.

    ``value`` is None for a tombstone. For a ``commit-<name>`` key, None stands for any commit whose value Connect
    cannot read (a tombstone, a value of the wrong shape or count type): the parser rejects those, but
    ``processTasksCommitRecord`` still clears a config-less connector's buffered task configs for them, so the job
    passes them here too (:meth:`unreadable_commit`).
    """

    source: RecordSource
    key: ConnectorKey
    value: ConnectorValue | None
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp: int

    def __post_init__(self) -> None:
        kind = _KEY_KINDS.get(type(self.key))
        if kind is None:
            raise ValueError(f"{type(self.key).__name__} records are not part of the connector-state fold")
        source, value_type, nullable = kind
        if self.source != source:
            raise ValueError(f"a {type(self.key).__name__} comes from the {source} topic, not {self.source!r}")
        if self.value is None and not nullable:
            raise ValueError(f"a {type(self.key).__name__} record cannot be a tombstone here")
        if self.value is not None and not isinstance(self.value, value_type):
            raise ValueError(f"a {type(self.key).__name__} carries a {value_type.__name__}, not {self.value!r}")

    @property
    def connector(self) -> str:
        return self.key.connector

    @classmethod
    def from_config(
        cls, record: ConfigRecord, kafka_partition: int, kafka_offset: int, kafka_timestamp: int
    ) -> ConnectorRecord:
        """Wrap a :func:`~connect_state.formats.config.parse_config_record` result (raises ValueError for a key
        without connector)."""
        return cls(CONFIG, record.key, record.value, kafka_partition, kafka_offset, kafka_timestamp)  # type: ignore[arg-type]

    @classmethod
    def from_status(
        cls, record: StatusRecord, kafka_partition: int, kafka_offset: int, kafka_timestamp: int
    ) -> ConnectorRecord:
        """Wrap a :func:`~connect_state.formats.status.parse_status_record` result (raises ValueError for a topic
        status)."""
        if isinstance(record.value, TopicStatus):
            raise ValueError("topic statuses are not part of the connector-state fold")
        return cls(STATUS, record.key, record.value, kafka_partition, kafka_offset, kafka_timestamp)  # type: ignore[arg-type]

    @classmethod
    def unreadable_commit(
        cls, connector: str, kafka_partition: int, kafka_offset: int, kafka_timestamp: int
    ) -> ConnectorRecord:
        """A ``commit-<connector>`` record the parser rejected (see the class docstring)."""
        return cls(CONFIG, TaskCommitKey(connector), None, kafka_partition, kafka_offset, kafka_timestamp)


# ---------------------------------------------------------------------------------------------------------------------
# State and events
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class ConnectorState:
    """What a worker's config and status stores hold for one connector, plus the fold's bookkeeping.

    ``target_state`` is Connect's ``connectorTargetStates`` entry (None when absent), ``task_count`` its
    ``connectorTaskCounts`` entry, ``deferred_task_ids`` the ids in ``deferredTaskUpdates``, ``inconsistent`` its
    membership of ``inconsistent``. ``config_offset`` is the offset of the ``connector-<name>`` record in effect (the
    tombstone's when ``deleted``); ``deleted_at`` is that tombstone's Kafka timestamp (epoch ms).
    ``config_applied`` / ``status_applied`` map a partition to the last offset applied from it (replay guard).
    """

    name: str
    config: dict[str, object] | None = None
    config_offset: int | None = None
    target_state: TargetState | None = None
    deferred_task_ids: frozenset[int] = frozenset()
    task_count: int | None = None
    #: ``taskConfigs`` (applied by a consistent commit) and ``deferredTaskUpdates`` (buffered), by task id.
    task_configs: dict[int, dict[str, object]] = field(default_factory=dict)
    deferred_task_configs: dict[int, dict[str, object]] = field(default_factory=dict)
    inconsistent: bool = False
    connector_status: Status | None = None
    task_statuses: dict[int, Status] = field(default_factory=dict)
    deleted: bool = False
    deleted_at: int | None = None
    config_applied: dict[int, int] = field(default_factory=dict)
    status_applied: dict[int, int] = field(default_factory=dict)

    @property
    def effective_target_state(self) -> TargetState | None:
        """``ClusterConfigState.targetState``; STARTED when a config exists without one."""
        if self.target_state is None and self.config is not None:
            return TargetState.STARTED
        return self.target_state

    @property
    def committed_task_count(self) -> int:
        """``ClusterConfigState.taskCount``: the last committed count, 0 before any commit."""
        return self.task_count if self.task_count is not None else 0

    @property
    def connector_class(self) -> str | None:
        return connector_class(self.config)

    def connector_type(self, class_type_map: Mapping[str, str] | None = None) -> ConnectorType:
        """See :func:`~connect_state.connect.connector_types.config_connector_type`."""
        return config_connector_type(self.config, class_type_map)


@dataclass(frozen=True)
class ConnectorEvent:
    """One transition of a connector, as written to the ``connector_events`` history table.

    ``event`` is one of :data:`EVENTS`; ``details`` a small JSON-able dict (see :func:`apply_record`); ``source`` and
    the ``kafka_*`` fields name the record that caused it.
    """

    connector: str
    event: str
    details: dict[str, object] = field(hash=False)
    source: RecordSource
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp: int
    #: For a ``deleted`` event: the connector's config just before its tombstone (None for other events). KIP-883
    #: cleanup (:mod:`connect_state.cleanup.reconciler`) needs it once the config is gone; it is not part of
    #: ``details`` (the transition) but of :meth:`recorded` (what the ``connector_events`` table keeps).
    last_config: dict[str, object] | None = field(default=None, compare=False, hash=False)
    #: For a ``created`` or ``reconfigured`` event: the config now in effect (None for other events). The history API's
    #: config versions (issue 14) read it from :meth:`recorded`; it is not part of ``details``.
    config: dict[str, object] | None = field(default=None, compare=False, hash=False)

    def recorded(self, class_type_map: Mapping[str, str] | None = None) -> dict[str, object]:
        """``details`` as the ``connector_events`` table keeps them: for a ``deleted`` event, plus ``config`` (the
        last config) and ``connector_type``
        (:func:`~connect_state.connect.connector_types.config_connector_type` of it, with ``class_type_map``:
        ``connector.class.types``); for ``created`` and ``reconfigured``, plus ``config`` (the new config)."""
        if self.last_config is not None:
            last = self.last_config
            return {**self.details, "config": last, "connector_type": config_connector_type(last, class_type_map)}
        if self.config is not None:
            return {**self.details, "config": self.config}
        return self.details

    def recorded_json(self, class_type_map: Mapping[str, str] | None = None) -> str:
        """:meth:`recorded` as the ``details`` column's JSON."""
        return json.dumps(self.recorded(class_type_map), separators=(",", ":"), sort_keys=True)


Change = tuple[str, Mapping[str, object]] | tuple[str, Mapping[str, object], Mapping[str, object]]
"""``(event, details)``, or ``(event, details, last_config)`` for a ``deleted`` event."""


# ---------------------------------------------------------------------------------------------------------------------
# Config topic (KafkaConfigBackingStore)
# ---------------------------------------------------------------------------------------------------------------------


def _canonical(value: object) -> str:
    """A value's JSON text, so ``1``, ``1.0`` and ``true`` stay different when configs are compared."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _changed_keys(before: Mapping[str, object], after: Mapping[str, object]) -> list[str]:
    return sorted(
        name
        for name in before.keys() | after.keys()
        if name not in before or name not in after or _canonical(before[name]) != _canonical(after[name])
    )


def _remove_connector(state: ConnectorState) -> None:
    """``processConnectorRemoval``: config, task count, task configs and deferred updates go (not the target state,
    not the inconsistent flag)."""
    state.config = None
    state.task_count = None
    state.deferred_task_ids = frozenset()
    state.task_configs = {}
    state.deferred_task_configs = {}


def _apply_connector_config(state: ConnectorState, record: ConnectorRecord) -> list[Change]:
    """``processConnectorConfigRecord``."""
    old_config = state.config
    state.config_offset = record.kafka_offset
    if record.value is None:
        _remove_connector(state)
        state.deleted, state.deleted_at = True, record.kafka_timestamp
        if old_config is None:
            return []
        return [(DELETED, {"connector_class": connector_class(old_config)}, dict(old_config))]
    assert isinstance(record.value, ConnectorConfig)
    state.config = dict(record.value.properties)
    if state.target_state is None:
        # "ensures that any connectors which were created with 0.9 Connect" start
        state.target_state = TargetState.STARTED
    if old_config is None:
        state.deleted, state.deleted_at = False, None
        details = {"connector_class": state.connector_class, "target_state": state.effective_target_state}
        return [(CREATED, details)]
    changed = _changed_keys(old_config, state.config)
    return [(RECONFIGURED, {"connector_class": state.connector_class, "changed_keys": changed})] if changed else []


def _apply_target_state(state: ConnectorState, record: ConnectorRecord) -> list[Change]:
    """``processTargetStateRecord``; the value was read ``state.v2`` first by the parser."""
    before = state.effective_target_state
    if record.value is None:
        state.target_state = TargetState.STARTED if state.config is not None else None
    else:
        assert isinstance(record.value, TargetStateValue)
        state.target_state = record.value.state
    after = state.effective_target_state
    return [(TARGET_STATE_CHANGED, {"from": before, "to": after})] if after != before else []


def _apply_task_config(state: ConnectorState, record: ConnectorRecord) -> list[Change]:
    """``processTaskConfigRecord``: buffered until the next commit, whether or not the connector has a config."""
    assert isinstance(record.key, TaskConfigKey)
    assert isinstance(record.value, TaskConfig)
    state.deferred_task_ids = state.deferred_task_ids | {record.key.task}
    state.deferred_task_configs = {**state.deferred_task_configs, record.key.task: dict(record.value.properties)}
    return []


def _complete_task_id_set(ids: frozenset[int], expected: int) -> bool:
    """``completeTaskIdSet``: ids 0..expected-1 all present (extra ids are fine, they may be compaction leftovers)."""
    return len(ids) >= expected and all(task in ids for task in range(expected))


def _apply_task_commit(state: ConnectorState, record: ConnectorRecord) -> list[Change]:
    """``processTasksCommitRecord``."""
    if state.config is None:
        _remove_connector(state)  # "it appears that the connector was deleted previously", whatever the value
        return []
    if record.value is None:
        return []  # Connect logs the bad value (or throws, skipping the rest of its batch)
    assert isinstance(record.value, TaskCommit)
    previous = state.committed_task_count
    consistent = _complete_task_id_set(state.deferred_task_ids, record.value.tasks)
    state.inconsistent = not consistent
    if consistent:  # taskConfigs.putAll(deferred); ids past the new count stay, as in Connect
        state.task_configs = {**state.task_configs, **state.deferred_task_configs}
    state.deferred_task_ids = frozenset()
    state.deferred_task_configs = {}
    state.task_count = record.value.tasks
    details = {"task_count": record.value.tasks, "previous_task_count": previous, "consistent": consistent}
    return [(TASKS_COMMITTED, details)]


def _no_change(state: ConnectorState, record: ConnectorRecord) -> list[Change]:
    """Restart requests and task-count (fencing) records do not change what this fold keeps."""
    return []


# ---------------------------------------------------------------------------------------------------------------------
# Status topic (KafkaStatusBackingStore)
# ---------------------------------------------------------------------------------------------------------------------


def _status_change(old: Status | None, new: Status | None) -> dict[str, object]:
    return {
        "from": old.state if old is not None else None,
        "to": new.state if new is not None else None,
        "worker_id": new.worker_id if new is not None else None,
        "generation": new.generation if new is not None else None,
    }


def _apply_connector_status(state: ConnectorState, record: ConnectorRecord) -> list[Change]:
    """``readConnectorStatus``; a tombstone is ``remove(connector)``, which drops the task statuses too."""
    old = state.connector_status
    if record.value is None:
        removed = sorted(state.task_statuses.items())
        state.connector_status, state.task_statuses = None, {}
        changes: list[Change] = [(STATUS_CHANGED, _status_change(old, None))] if old is not None else []
        changes += [(TASK_STATUS_CHANGED, {"task": task, **_status_change(status, None)}) for task, status in removed]
        return changes
    assert isinstance(record.value, Status)
    state.connector_status = record.value
    return [(STATUS_CHANGED, _status_change(old, record.value))] if record.value != old else []


def _is_stale_unassigned(cached: Status | None, incoming: Status) -> bool:
    """``readTaskStatus``: "Ignoring stale status", an UNASSIGNED over a RUNNING of the same or a later generation."""
    return (
        incoming.state == State.UNASSIGNED
        and cached is not None
        and cached.state == State.RUNNING
        and cached.generation >= incoming.generation
    )


def _apply_task_status(state: ConnectorState, record: ConnectorRecord) -> list[Change]:
    """``readTaskStatus``; a tombstone is ``remove(ConnectorTaskId)``."""
    assert isinstance(record.key, TaskStatusKey)
    task = record.key.task
    old = state.task_statuses.get(task)
    if record.value is None:
        if old is None:
            return []
        del state.task_statuses[task]
        return [(TASK_STATUS_CHANGED, {"task": task, **_status_change(old, None)})]
    assert isinstance(record.value, Status)
    if _is_stale_unassigned(old, record.value):
        return []
    state.task_statuses[task] = record.value
    return [(TASK_STATUS_CHANGED, {"task": task, **_status_change(old, record.value)})] if record.value != old else []


# ---------------------------------------------------------------------------------------------------------------------
# Folding
# ---------------------------------------------------------------------------------------------------------------------

_APPLY = {
    ConnectorConfigKey: _apply_connector_config,
    TargetStateKey: _apply_target_state,
    TaskConfigKey: _apply_task_config,
    TaskCommitKey: _apply_task_commit,
    RestartRequestKey: _no_change,
    TaskCountKey: _no_change,
    ConnectorStatusKey: _apply_connector_status,
    TaskStatusKey: _apply_task_status,
}
_SOURCE_RANK = {CONFIG: 0, STATUS: 1}


def apply_record(state: ConnectorState, record: ConnectorRecord) -> list[ConnectorEvent]:
    """Apply one record to ``state`` in place; return the transitions it makes (none for a replay).

    Event details: ``created`` {connector_class, target_state}; ``reconfigured`` {connector_class, changed_keys};
    ``deleted`` {connector_class} (the event's ``last_config`` holds the config the tombstone removed; the table's
    details add it as ``config`` with its ``connector_type``); ``target_state_changed`` {from, to} (effective target
    states, None when there is none); ``tasks_committed`` {task_count, previous_task_count, consistent};
    ``status_changed`` {from, to, worker_id, generation}; ``task_status_changed`` the same plus ``task``. A removed
    status has ``to`` None.
    """
    if record.connector != state.name:
        raise ValueError(f"a record of connector {record.connector!r} folded into the state of {state.name!r}")
    applied = state.config_applied if record.source == CONFIG else state.status_applied
    last = applied.get(record.kafka_partition)
    if last is not None and record.kafka_offset <= last:
        return []
    applied[record.kafka_partition] = record.kafka_offset
    changes = _APPLY[type(record.key)](state, record)
    return [
        ConnectorEvent(
            state.name,
            event,
            dict(details),
            record.source,
            record.kafka_partition,
            record.kafka_offset,
            record.kafka_timestamp,
            last_config=dict(rest[0]) if rest else None,
            config=dict(state.config) if event in (CREATED, RECONFIGURED) and state.config is not None else None,
        )
        for event, details, *rest in changes
    ]


def _copy(state: ConnectorState) -> ConnectorState:
    """A copy sharing nothing mutable with ``state`` (configs and statuses are replaced, never changed in place)."""
    return replace(
        state,
        task_statuses=dict(state.task_statuses),
        task_configs=dict(state.task_configs),
        deferred_task_configs=dict(state.deferred_task_configs),
        config_applied=dict(state.config_applied),
        status_applied=dict(state.status_applied),
    )


def _apply_order(records: Iterable[ConnectorRecord]) -> list[ConnectorRecord]:
    """Config records in offset order, then status records: each partition in offset order, the partitions merged
    by Kafka timestamp.

    A connector-status tombstone removes task statuses that live in other partitions, and Kafka orders nothing across
    partitions; Connect applies them in whatever order its consumer fetches them. Merging by timestamp applies a task
    status written after the tombstone (a re-created connector's) after it, whichever partitions they sit in, and makes
    a batch fold agree with a whole fold whenever the batches are cut in time (as a stream's batches are).
    """
    config: list[ConnectorRecord] = []
    by_partition: dict[int, list[ConnectorRecord]] = {}
    for record in records:
        if record.source == CONFIG:
            config.append(record)
        else:
            by_partition.setdefault(record.kafka_partition, []).append(record)
    config.sort(key=lambda r: (r.kafka_partition, r.kafka_offset))
    partitions = [sorted(recs, key=lambda r: r.kafka_offset) for _, recs in sorted(by_partition.items())]
    return config + list(heapq.merge(*partitions, key=lambda r: (r.kafka_timestamp, r.kafka_partition)))


def fold_connector(
    state: ConnectorState, records: Iterable[ConnectorRecord]
) -> tuple[ConnectorState, list[ConnectorEvent]]:
    """Fold one connector's records (any order: see :func:`_apply_order`) into a copy of ``state``.

    Events come back ordered by Kafka timestamp, then config before status, then partition and offset (events of one
    record in the order they happened).
    """
    new_state = _copy(state)
    events: list[ConnectorEvent] = []
    for record in _apply_order(records):
        events.extend(apply_record(new_state, record))
    events.sort(key=lambda e: (e.kafka_timestamp, _SOURCE_RANK[e.source], e.kafka_partition, e.kafka_offset))
    return new_state, events


def fold_all(records: Iterable[ConnectorRecord]) -> dict[str, ConnectorState]:
    """Fold both topics' worth of records, all connectors at once: the reference the job must agree with."""
    by_connector: dict[str, list[ConnectorRecord]] = {}
    for record in records:
        by_connector.setdefault(record.connector, []).append(record)
    return {name: fold_connector(ConnectorState(name), recs)[0] for name, recs in by_connector.items()}


# ---------------------------------------------------------------------------------------------------------------------
# State row (applyInPandasWithState keeps one string column)
# ---------------------------------------------------------------------------------------------------------------------


def _offsets_to_json(offsets: Mapping[int, int]) -> dict[str, int]:
    return {str(partition): offset for partition, offset in sorted(offsets.items())}


def _offsets_from_json(offsets: Mapping[str, int]) -> dict[int, int]:
    return {int(partition): offset for partition, offset in offsets.items()}


def _task_configs_to_json(configs: Mapping[int, Mapping[str, object]]) -> dict[str, Mapping[str, object]]:
    return {str(task): config for task, config in sorted(configs.items())}


def _task_configs_from_json(configs: Mapping[str, Mapping[str, object]]) -> dict[int, dict[str, object]]:
    return {int(task): dict(config) for task, config in configs.items()}


def state_to_json(state: ConnectorState) -> str:
    """Serialize the state for the stateful operator's state row (ASCII JSON: lone surrogates survive)."""
    fields = {
        "name": state.name,
        "config": state.config,
        "config_offset": state.config_offset,
        "target_state": state.target_state,
        "deferred_task_ids": sorted(state.deferred_task_ids),
        "task_count": state.task_count,
        "task_configs": _task_configs_to_json(state.task_configs),
        "deferred_task_configs": _task_configs_to_json(state.deferred_task_configs),
        "inconsistent": state.inconsistent,
        "connector_status": asdict(state.connector_status) if state.connector_status is not None else None,
        "task_statuses": {str(task): asdict(status) for task, status in sorted(state.task_statuses.items())},
        "deleted": state.deleted,
        "deleted_at": state.deleted_at,
        "config_applied": _offsets_to_json(state.config_applied),
        "status_applied": _offsets_to_json(state.status_applied),
    }
    return json.dumps(fields, separators=(",", ":"))


def state_from_json(text: str) -> ConnectorState:
    """The inverse of :func:`state_to_json`."""
    fields = json.loads(text)
    status = fields["connector_status"]
    return ConnectorState(
        name=fields["name"],
        config=fields["config"],
        config_offset=fields["config_offset"],
        target_state=TargetState(fields["target_state"]) if fields["target_state"] is not None else None,
        deferred_task_ids=frozenset(fields["deferred_task_ids"]),
        task_count=fields["task_count"],
        task_configs=_task_configs_from_json(fields.get("task_configs") or {}),
        deferred_task_configs=_task_configs_from_json(fields.get("deferred_task_configs") or {}),
        inconsistent=fields["inconsistent"],
        connector_status=Status(**status) if status is not None else None,
        task_statuses={int(task): Status(**value) for task, value in fields["task_statuses"].items()},
        deleted=fields["deleted"],
        deleted_at=fields["deleted_at"],
        config_applied=_offsets_from_json(fields["config_applied"]),
        status_applied=_offsets_from_json(fields["status_applied"]),
    )


# ---------------------------------------------------------------------------------------------------------------------
# Output: the connectors table row (GET /connectors/<name>/status is connect_state.connect.rest.connector_state_info)
# ---------------------------------------------------------------------------------------------------------------------


def _task_row(task: int, status: Status) -> dict[str, object]:
    return {
        "id": task,
        "state": status.state,
        "worker_id": status.worker_id,
        "trace": status.trace,
        "generation": status.generation,
        "version": status.version,
    }


def status_columns(state: ConnectorState) -> dict[str, object]:
    """The ``connectors`` row's columns that come from the status topic: ``connector_*`` and ``tasks``."""
    status = state.connector_status
    return {
        "connector_state": status.state if status is not None else None,
        "connector_worker_id": status.worker_id if status is not None else None,
        "connector_trace": status.trace if status is not None else None,
        "connector_generation": status.generation if status is not None else None,
        "connector_version": status.version if status is not None else None,
        "tasks": [_task_row(task, task_status) for task, task_status in sorted(state.task_statuses.items())],
    }


def _status_of(state: object, worker_id: object, trace: object, generation: object, version: object) -> Status:
    return Status(
        state=State(str(state)),
        trace=trace if isinstance(trace, str) else None,
        worker_id=worker_id if isinstance(worker_id, str) else None,
        generation=int(generation) if isinstance(generation, int) else 0,
        version=version if isinstance(version, str) else None,
    )


def statuses_from_row(row: Mapping[str, Any]) -> ConnectorState:
    """The status part of a connector's state from its ``connectors`` row, to fold status records over: the config
    part and the replay guard are not in the table, so only status records past the table's watermark may be folded
    over it (:func:`fold_status_past_row`)."""
    state = ConnectorState(str(row["name"]))
    if row.get("connector_state") is not None:
        state.connector_status = _status_of(
            row["connector_state"],
            row.get("connector_worker_id"),
            row.get("connector_trace"),
            row.get("connector_generation"),
            row.get("connector_version"),
        )
    for task in row.get("tasks") or []:
        state.task_statuses[int(task["id"])] = _status_of(
            task["state"], task.get("worker_id"), task.get("trace"), task.get("generation"), task.get("version")
        )
    return state


def fold_status_past_row(row: Mapping[str, Any], records: Iterable[ConnectorRecord]) -> dict[str, Any]:
    """The connector's ``connectors`` row with the status records past the table's watermark folded over it (the
    API's answer as of the status topic it follows, issue 11 §2). Config records are left out: the row's config
    columns stay the table's.

    Records between the watermark and the row's version are folded again: each status replaces the one of its key
    (a stale UNASSIGNED is ignored as the job ignores it), so the result is that of the records in order.
    """
    records = [record for record in records if record.source == STATUS]
    if not records:
        return dict(row)
    state, _events = fold_connector(statuses_from_row(row), records)
    return {**row, **status_columns(state)}


def connector_row(state: ConnectorState, class_type_map: Mapping[str, str] | None = None) -> dict[str, object]:
    """The ``connectors`` table row of a state.

    ``config`` is the properties as compact JSON with sorted keys (None without config); ``target_state`` the
    effective one; ``task_count`` ``ClusterConfigState.taskCount`` (``inconsistent`` says whether Connect would list
    those tasks); ``task_configs`` Connect's applied ``taskConfigs`` as JSON ``{"<id>": {...}}`` (ids past the count
    may linger, as in Connect: ``GET /tasks`` reads ids 0..task_count-1); ``connector_*`` the connector's status
    (None without one); ``tasks`` the task statuses by id; ``deleted_at`` epoch ms; ``config_offset`` see
    :class:`ConnectorState`. The ``*version`` fields are the plugin versions Kafka 4.3 workers write into statuses.
    """
    return {
        "name": state.name,
        "type": state.connector_type(class_type_map),
        "connector_class": state.connector_class,
        "config": json.dumps(state.config, sort_keys=True, separators=(",", ":")) if state.config is not None else None,
        "target_state": state.effective_target_state,
        "task_count": state.committed_task_count,
        "task_configs": json.dumps(_task_configs_to_json(state.task_configs), sort_keys=True, separators=(",", ":")),
        "inconsistent": state.inconsistent,
        **status_columns(state),
        "deleted": state.deleted,
        "deleted_at": state.deleted_at,
        "config_offset": state.config_offset,
    }
