"""KIP-883 cleanup when a connector is deleted: which steps a deletion needs, when they may run, and their outcomes.

Pure Python (no Spark, Kafka, Delta or Flask): a pass (:class:`CleanupReconciler`) decides what to do, which keys to
tombstone and when, and does every read and write through a small I/O interface (:class:`CleanupIO`; on Spark, Delta
and Kafka: :mod:`connect_state.spark.cleanup`), recording each outcome in ``connector_deletions``; the API reads
that table.

What Connect does, and what it does not. A deletion is ``DistributedHerder.deleteConnectorConfig`` →
``KafkaConfigBackingStore.removeConnectorConfig``: a tombstone for ``connector-<name>`` then one for
``target-state-<name>`` (a stop is not a deletion). Workers then stop the connector (``Connector.stop()``; KIP-883's
``stop(isDeleted=true)`` was never merged), the leader tombstones its statuses, and a worker with topic tracking on
tombstones its ``status-topic-*:connector-<name>`` keys (``DistributedHerder.resetActiveTopics``). Source offsets stay
in the offsets topic and a sink's consumer group stays, so a new connector with the same name silently resumes.

A **deletion** is one ``deleted`` event of the ``connector_events`` table (written by the connector-state fold for a
``connector-<name>`` tombstone that removed a config), identified by ``(connector, deletion_offset)``, the
config-topic offset of the tombstone. The event carries the connector's last config and its type. Its steps:

* ``active_topics``: tombstones for every ``status-topic-<topic>:connector-<name>`` key, always (KIP-558 says a
  deletion resets them), even with ``topic.tracking.allow.reset=false``, which only guards the REST endpoint;
* ``offsets``, only when ``cleanup.offsets.on.delete`` is true in the connector's last config, or, when the config
  does not set it, in connect-state's settings: a source connector's offsets become tombstones with the exact key
  bytes; a sink connector's consumer group (``consumer.override.group.id`` or ``connect-<name>``) is deleted;
* ``hook:<name>``, one per registered :class:`DeletionHook`: the external counterpart of
  ``Connector.stop(isDeleted=true)``.

**Planned once.** A deletion's steps are fixed the first time the job sees it: all its rows are written at once
(``pending``, or ``skipped`` with the reason), before any step runs, so a crash can never forget a step. A hook
registered later does not run for earlier deletions; a hook no longer registered when its step is due is recorded as
skipped. ``succeeded`` and ``skipped`` are final: such a step never runs again for that deletion, across restarts
(the Delta table is the record, written right after each step). A step that raised is ``failed`` with its error and
retried after an exponential backoff (:func:`backoff_ms`); a failing step never blocks the other steps.

**Shared resources and recreated connectors (order by config-topic offset).** Offsets, the consumer group and the
topic-status keys are keyed by the connector's *name*, not by its incarnation: every connector ever created with that
name shares them, and at any moment they belong to the latest incarnation. Hence the rule: only the last deletion of
a name, and only while no connector with that name was created after it, may clean anything shared
(:func:`shared_cleanup_blocker`). A ``created`` event (or a live ``connector-<name>`` record in the config topic) at a
higher offset than the tombstone means the name was recreated: ``active_topics`` and ``offsets`` are skipped with
"connector recreated at config offset N", because what they would delete now belongs to the new connector (if that
one is deleted in turn, its own deletion cleans everything, earlier leftovers included, since the keys are the same).
A later deletion of the same name implies a recreation in between (even one compacted away) and has the same effect.
Hooks always run: they release what the *deleted* incarnation provisioned outside Kafka. The rule is checked when the
steps are planned and again right before a shared step runs; the job also scans the config topic itself, so a
recreation not folded into the tables yet still counts. What remains is the time between that check and the write.

**Quiescence.** Connect's tasks write offsets and topic statuses until they stop (a source task commits its offsets
once more when it stops). A shared step therefore waits (``pending``, not an attempt) while the ``connectors`` table
still shows the connector or one of its tasks RUNNING, PAUSED or RESTARTING (:func:`live_statuses`); the leader
tombstones those statuses, or the workers write UNASSIGNED, once the tasks are stopped.

If connect-state was down when the connector was deleted, nothing is lost: ``connector_events`` is a history, so the
next pass of the job finds the deletion and cleans up then.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Protocol, cast

from connect_state.connect.connector_types import config_connector_type, connector_class, names_any
from connect_state.connect.offset_stores import (
    connector_consumer_group,
    connector_offset_stores,
    sink_consumer_group,
    source_connector_offsets,
)
from connect_state.connect.plugins import (
    DELETION_HOOKS_BY_CLASS_GROUP,
    DELETION_HOOKS_GROUP,
    PluginError,
    entry_point_objects,
    load_named_plugins,
    load_object,
    split_paths,
)
from connect_state.core.deadlines import DeadlineRunner, PluginTimeout
from connect_state.core.errors import ConfigError, RecordFormatError, describe_error
from connect_state.core.vocabulary import ConnectorType, State
from connect_state.folds.connector_states import CREATED, DELETED, ConnectorRecord, ConnectorState, fold_connector
from connect_state.formats.config import CONNECTOR_PREFIX, parse_config_record
from connect_state.formats.offsets import parse_offset_key
from connect_state.formats.status import (
    TOPIC_STATUS_PREFIX,
    TOPIC_STATUS_SEPARATOR,
    TopicStatusKey,
    parse_status_key,
    topic_status_key,
)
from connect_state.security.guards import GuardRefusal, Guards
from connect_state.tables.schemas import epoch_ms

#: A partition or an offset map, as Connect's REST shows them.
JsonMap = Mapping[str, object]


class Step(StrEnum):
    """The steps on a name's shared resources; a hook's step is ``hook:<name>`` (:func:`hook_step`)."""

    ACTIVE_TOPICS = "active_topics"
    OFFSETS = "offsets"


HOOK_STEP_PREFIX = "hook:"
SHARED_STEPS = (Step.ACTIVE_TOPICS, Step.OFFSETS)


class StepStatus(StrEnum):
    """The ``status`` of a ``connector_deletions`` row."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    #: a guard refused what the connector's config asked (:mod:`connect_state.security.guards`): the reason in
    #: ``detail``; final, nothing was done
    REFUSED = "refused"


PENDING, SUCCEEDED, FAILED, SKIPPED, REFUSED = StepStatus  # the members by name, as the API imports them
FINAL_STATUSES = (StepStatus.SUCCEEDED, StepStatus.SKIPPED, StepStatus.REFUSED)

#: connect-state setting, and the connector config key that overrides it for one connector.
CLEANUP_OFFSETS_CONFIG = "cleanup.offsets.on.delete"
#: States of a connector or task that may still write offsets or topic statuses (``AbstractStatus.State``).
LIVE_STATES = (State.RUNNING, State.PAUSED, State.RESTARTING)


# ---------------------------------------------------------------------------------------------------------------------
# Hooks
# ---------------------------------------------------------------------------------------------------------------------


class DeletionHook(Protocol):
    """Called once per deletion, once the deleted connector's tasks have stopped, with its name and last config.

    The external counterpart of KIP-883's ``Connector.stop(boolean isDeleted)``: ``is_deleted`` is always True here
    (a stop is not a deletion and calls no hook). A hook that also accepts a keyword argument ``context`` (or
    ``**kwargs``) receives a :class:`DeletedConnector`: the last config, the task configs, the last source offsets or
    sink group offsets and the active topics. Raise to report a failure: the step is recorded as failed with the
    exception and called again after a backoff, so a hook must be idempotent (it may also be called again when the job
    crashed after the hook returned and before its outcome was written). A hook that returned is never called again
    for that deletion. Each call has a deadline (``cleanup.hook.timeout.ms``): a hook still running then is recorded
    as failed and retried later (not while its earlier call is still running); the other steps go on meanwhile.
    """

    def __call__(self, connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None: ...


@dataclass(frozen=True)
class DeletedConnector:
    """What a deletion hook receives as ``context``: the deleted connector as it was when its tasks stopped.

    ``config``: its last config (``Map<String, String>``); ``task_configs``: the task configs in force at the
    deletion, folded from the config topic's ``task-<name>-<n>`` / ``commit-<name>`` records before the tombstone (as
    Connect applies them); ``source_offsets``: ``(partition, offset)`` of every source partition in the store Connect
    reads (a source connector); ``sink_offsets``: ``{(topic, partition): offset}`` committed by its consumer group
    (a sink connector); ``active_topics``: its KIP-558 active topics. Offsets and topics are read once, before the
    pass's ``offsets`` / ``active_topics`` steps clean them, and reused by the retries of the same job process.
    """

    name: str
    connector_class: str | None
    connector_type: ConnectorType
    config: Mapping[str, str]
    task_configs: Mapping[int, Mapping[str, str]]
    source_offsets: Sequence[tuple[Mapping[str, object] | None, Mapping[str, object] | None]]
    sink_offsets: Mapping[tuple[str, int], int]
    active_topics: Sequence[str]
    deletion_offset: int
    deleted_at: int


#: The class key of ``cleanup.hooks.by.class`` matching every connector class (a catch-all, like ``cleanup.hooks``).
ANY_CLASS = "*"


def _instantiate_hook(name: str, plugin: object) -> DeletionHook:
    target = plugin
    if isinstance(plugin, type):
        try:
            target = plugin()
        except Exception as err:
            raise PluginError(f"deletion hook {name!r}: cannot instantiate {plugin.__name__}: {err}") from err
    if not callable(target):
        raise PluginError(
            f"deletion hook {name!r} is a {type(target).__name__}, not a callable "
            "(connector, config, *, is_deleted) -> None"
        )
    return target


def load_deletion_hooks(cleanup_hooks: str) -> dict[str, DeletionHook]:
    """The hooks of the ``cleanup.hooks`` setting (``module:attribute`` paths, named by their path) and of the
    ``connect_state.deletion_hooks`` entry points (named by entry name): catch-alls, called for every class.

    A class is instantiated without arguments (as Connect instantiates plugin classes). Raises
    :class:`~connect_state.connect.plugins.PluginError` when a path cannot be imported or names something that is not
    callable: the job refuses to start rather than plan deletions without a hook the operator asked for.
    """
    return {
        name: _instantiate_hook(name, plugin)
        for name, plugin in load_named_plugins(split_paths(cleanup_hooks), DELETION_HOOKS_GROUP).items()
    }


def load_class_hooks(paths_by_class: Mapping[str, str]) -> tuple[dict[str, DeletionHook], dict[str, frozenset[str]]]:
    """KIP-883 hooks per connector class: ``cleanup.hooks.by.class=<class>=<module:attribute>`` pairs (several hooks
    of one class separated by ``|``) and the entry points of group ``connect_state.deletion_hooks_by_class`` (name =
    connector class); ``*`` as the class matches every class.

    Returns the hooks by name (the ``module:attribute`` path, or ``<class>:<attribute name>`` for an entry point) and
    the classes each is registered for.
    """
    hooks: dict[str, DeletionHook] = {}
    classes: dict[str, set[str]] = {}
    for connector_class_name, plugin in entry_point_objects(DELETION_HOOKS_BY_CLASS_GROUP).items():
        name = f"{connector_class_name}:{getattr(plugin, '__name__', type(plugin).__name__)}"
        hooks[name] = _instantiate_hook(name, plugin)
        classes.setdefault(name, set()).add(connector_class_name)
    for connector_class_name, paths in paths_by_class.items():
        for path in (part.strip() for part in paths.split("|")):
            if not path:
                continue
            if path not in hooks:
                hooks[path] = _instantiate_hook(path, load_object(path))
            classes.setdefault(path, set()).add(connector_class_name)
    return hooks, {name: frozenset(found) for name, found in classes.items()}


def hook_applies(classes: Collection[str] | None, class_name: str | None) -> bool:
    """Whether a hook registered for ``classes`` (None: a catch-all) runs for a connector of class ``class_name``
    (its full name or a ``PluginUtils`` alias, on either side)."""
    if classes is None or ANY_CLASS in classes:
        return True
    return names_any(class_name, classes)


def accepts_context(hook: Callable[..., object]) -> bool:
    """Whether ``hook`` takes the ``context`` keyword (by name, or through ``**kwargs``)."""
    try:
        parameters = inspect.signature(hook).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "context" or p.kind == inspect.Parameter.VAR_KEYWORD for p in parameters)


def call_hook(hook: DeletionHook, context: DeletedConnector) -> None:
    """Call a hook as :class:`DeletionHook` says: with ``context`` when it takes it."""
    if accepts_context(hook):
        hook(context.name, dict(context.config), is_deleted=True, context=context)  # type: ignore[call-arg]
    else:
        hook(context.name, dict(context.config), is_deleted=True)


def last_task_configs(
    records: Iterable[tuple[bytes, bytes | None, int]], connector: str, before_offset: int
) -> dict[int, dict[str, str]]:
    """The connector's task configs in force just before ``before_offset`` (its deletion's tombstone): its config-topic
    records folded with the connector-state fold (task configs apply on a complete ``commit-<name>``, as
    ``KafkaConfigBackingStore`` applies them)."""
    folded: list[ConnectorRecord] = []
    for key, value, offset in records:
        if offset >= before_offset:
            continue
        try:
            record = parse_config_record(key, value)
        except RecordFormatError:
            continue
        if getattr(record.key, "connector", None) != connector:
            continue
        try:
            folded.append(ConnectorRecord.from_config(record, 0, offset, 0))
        except ValueError:
            continue
    state, _events = fold_connector(ConnectorState(connector), folded)
    return {task: hook_config(config) for task, config in sorted(state.task_configs.items())}


#: Deletion hooks run with a deadline through the one home of plug-in deadlines (:mod:`connect_state.core.deadlines`):
#: a call still running at ``cleanup.hook.timeout.ms`` is reported failed (:class:`HookTimeout`) and left to finish in
#: the background; while it runs, the step's next attempt fails at once instead of starting a second call.
HookTimeout = PluginTimeout


def hook_step(name: str) -> str:
    """The step name of a hook: ``hook:<name>``."""
    return HOOK_STEP_PREFIX + name


def hook_config(config: Mapping[str, object] | None) -> dict[str, str]:
    """A connector config as hooks get it: Connect's ``Map<String, String>`` (a non-string value as its JSON text)."""
    return {
        str(key): value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        for key, value in (config or {}).items()
    }


# ---------------------------------------------------------------------------------------------------------------------
# Deletions and the lifecycle of a name
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Deletion:
    """One deletion: the tombstone's config-topic offset and Kafka timestamp (epoch ms), the last config and type.

    ``config`` is None for a ``deleted`` event recorded before events carried the config; then the type is unknown.
    """

    connector: str
    deletion_offset: int
    deleted_at: int
    connector_type: ConnectorType
    config: dict[str, object] | None = field(default=None, hash=False, compare=False)

    @property
    def key(self) -> tuple[str, int]:
        return (self.connector, self.deletion_offset)


@dataclass(frozen=True)
class Lifecycle:
    """Config-topic offsets of every creation and deletion seen for one name."""

    created: tuple[int, ...] = ()
    deleted: tuple[int, ...] = ()

    def with_created(self, offsets: Iterable[int]) -> Lifecycle:
        return replace(self, created=tuple(sorted(set(self.created) | set(offsets))))


def deletions_from_events(
    events: Iterable[Mapping[str, object]], class_types: Mapping[str, str] | None = None
) -> tuple[list[Deletion], dict[str, Lifecycle]]:
    """The deletions and every name's lifecycle, from ``connector_events`` rows (a deletion that recorded no type
    gets its last config's, ``class_types``, ``connector.class.types``, first).

    Rows need ``connector``, ``event``, ``details`` (JSON), ``source``, ``kafka_offset``, ``kafka_timestamp`` (epoch
    ms or a datetime). Only config-topic ``created`` and ``deleted`` events count; a row repeated (a rebuilt
    checkpoint appends the history again) counts once. Deletions come back ordered by (connector, offset).
    """
    deletions: dict[tuple[str, int], Deletion] = {}
    created: dict[str, set[int]] = {}
    deleted: dict[str, set[int]] = {}
    for row in events:
        if row.get("source", "config") != "config" or row["event"] not in (CREATED, DELETED):
            continue
        name, offset = str(row["connector"]), int(row["kafka_offset"])  # type: ignore[call-overload]
        if row["event"] == CREATED:
            created.setdefault(name, set()).add(offset)
            continue
        deleted.setdefault(name, set()).add(offset)
        details = json.loads(str(row["details"])) if row.get("details") else {}
        config = details.get("config")
        config = dict(config) if isinstance(config, dict) else None
        recorded = details.get("connector_type")
        if recorded:
            kind = ConnectorType(recorded) if recorded in set(ConnectorType) else ConnectorType.UNKNOWN
        else:
            kind = config_connector_type(config, class_types) if config is not None else ConnectorType.UNKNOWN
        deleted_at = epoch_ms(cast("int | datetime", row["kafka_timestamp"]))
        deletions[(name, offset)] = Deletion(name, offset, deleted_at, kind, config)
    names = created.keys() | deleted.keys()
    lifecycles = {
        name: Lifecycle(tuple(sorted(created.get(name, ()))), tuple(sorted(deleted.get(name, ())))) for name in names
    }
    return [deletions[key] for key in sorted(deletions)], lifecycles


def shared_cleanup_blocker(deletion: Deletion, lifecycle: Lifecycle | None) -> str | None:
    """Why this deletion must not touch the name's shared resources (offsets, group, topic statuses), or None.

    The name was recreated after the tombstone (a creation at a higher config offset), or deleted again later (which
    implies a recreation in between); see the module docstring.
    """
    if lifecycle is None:
        return None
    later = [offset for offset in lifecycle.created if offset > deletion.deletion_offset]
    if later:
        return f"connector recreated at config offset {min(later)}"
    later = [offset for offset in lifecycle.deleted if offset > deletion.deletion_offset]
    if later:
        return f"connector recreated and deleted again at config offset {min(later)}"
    return None


def live_statuses(row: Mapping[str, object] | None) -> list[str]:
    """The connector's and tasks' statuses in a ``connectors`` row that may still write offsets or topic statuses,
    as ``"connector RUNNING"`` / ``"task 0 RUNNING"``; empty when quiescent (or when there is no row)."""
    if row is None:
        return []
    live = []
    if row.get("connector_state") in LIVE_STATES:
        live.append(f"connector {row['connector_state']}")
    for task in row.get("tasks") or []:  # type: ignore[attr-defined]
        if task.get("state") in LIVE_STATES:
            live.append(f"task {task.get('id')} {task.get('state')}")
    return live


# ---------------------------------------------------------------------------------------------------------------------
# Settings of a deletion
# ---------------------------------------------------------------------------------------------------------------------


def parse_bool(key: str, value: object) -> bool:
    """``ConfigDef.Type.BOOLEAN``: ``true``/``false``, trimmed, any case; anything else raises ConfigError."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    return text == "true"


def offsets_cleanup_enabled(config: Mapping[str, object] | None, default: bool) -> bool:
    """``cleanup.offsets.on.delete`` of the connector's last config when it sets it, else ``default`` (connect-state's
    setting). Raises ConfigError for a value that is not a boolean."""
    if config is not None and CLEANUP_OFFSETS_CONFIG in config:
        return parse_bool(f"{CLEANUP_OFFSETS_CONFIG} in the connector's config", config[CLEANUP_OFFSETS_CONFIG])
    return default


def sink_group_id(connector: str, config: Mapping[str, object] | None) -> str:
    """The consumer group of a sink connector, by the offsets API's rule
    (:func:`~connect_state.connect.offset_stores.connector_consumer_group`), except that an empty override (a group no
    consumer can join) deletes ``connect-<name>`` rather than nothing."""
    return connector_consumer_group(connector, config) or sink_consumer_group(connector)


def source_offsets_topics(default_topic: str, config: Mapping[str, object] | None) -> list[str]:
    """Where a source connector's offsets live: the worker's offsets topic and, when the config names another one, its
    own (:func:`~connect_state.connect.offset_stores.connector_offset_stores`; ``ConnectorOffsetBackingStore`` writes
    resets to both, the worker's first)."""
    return list(connector_offset_stores(default_topic, config).topics)


# ---------------------------------------------------------------------------------------------------------------------
# Planning
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedStep:
    """A step of a deletion: run it, or record it skipped with ``skip_reason``."""

    step: str
    skip_reason: str | None = None


def offsets_skip_reason(deletion: Deletion, default_enabled: bool) -> str | None:
    """Why the ``offsets`` step is skipped for its own settings (not the recreation rule), or None to run it."""
    try:
        enabled = offsets_cleanup_enabled(deletion.config, default_enabled)
    except ConfigError as err:
        return f"{err}; offsets left in place"
    if not enabled:
        where = "in the connector's config" if deletion.config and CLEANUP_OFFSETS_CONFIG in deletion.config else ""
        return f"offset cleanup disabled ({CLEANUP_OFFSETS_CONFIG}=false{' ' + where if where else ''})"
    if deletion.connector_type not in (ConnectorType.SOURCE, ConnectorType.SINK):
        return "connector type unknown (the deleted event carries no config): cannot tell offsets from a group"
    return None


def plan_steps(
    deletion: Deletion,
    hook_names: Sequence[str],
    offsets_enabled_default: bool,
    lifecycle: Lifecycle | None = None,
) -> list[PlannedStep]:
    """The steps of a deletion seen for the first time: ``active_topics``, ``offsets``, then ``hook:<name>`` per hook.

    The shared steps are skipped when :func:`shared_cleanup_blocker` says so; ``offsets`` also when disabled
    (:func:`offsets_skip_reason`). Hooks always run.
    """
    blocker = shared_cleanup_blocker(deletion, lifecycle)
    offsets_reason = blocker or offsets_skip_reason(deletion, offsets_enabled_default)
    return [
        PlannedStep(Step.ACTIVE_TOPICS, blocker),
        PlannedStep(Step.OFFSETS, offsets_reason),
        *(PlannedStep(hook_step(name)) for name in hook_names),
    ]


# ---------------------------------------------------------------------------------------------------------------------
# Outcomes
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepResult:
    """What running a step gave: ``succeeded`` (with a detail), ``failed`` (with the error) or ``pending`` (not
    attempted: waiting for something, said in ``detail``)."""

    status: str
    detail: str | None = None
    error: str | None = None

    @classmethod
    def succeeded(cls, detail: str | None = None) -> StepResult:
        return cls(SUCCEEDED, detail)

    @classmethod
    def failed(cls, error: str, detail: str | None = None) -> StepResult:
        return cls(FAILED, detail, error)

    @classmethod
    def waiting(cls, reason: str) -> StepResult:
        return cls(PENDING, reason)

    @classmethod
    def skipped(cls, reason: str) -> StepResult:
        return cls(SKIPPED, reason)

    @classmethod
    def refused(cls, reason: str) -> StepResult:
        return cls(REFUSED, reason)


@dataclass(frozen=True)
class StepOutcome:
    """A ``connector_deletions`` row's step part: status, attempts so far, detail (what was done, or why skipped or
    waiting), last error, when the next attempt is due and when the row changed (epoch ms)."""

    step: str
    status: str
    attempts: int = 0
    detail: str | None = None
    error: str | None = None
    next_attempt_at: int | None = None
    updated_at: int | None = None

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES


def backoff_ms(attempts: int, base_ms: int, max_ms: int) -> int:
    """Wait after the ``attempts``-th failed attempt: ``base_ms`` doubled per attempt after the first, at most
    ``max_ms`` (``cleanup.retry.backoff.ms`` / ``cleanup.retry.backoff.max.ms``)."""
    if attempts < 1:
        return 0
    if base_ms <= 0:
        return 0
    exponent = min(attempts - 1, 62)
    return min(base_ms * (1 << exponent), max(max_ms, base_ms))


def planned_outcome(planned: PlannedStep, now_ms: int) -> StepOutcome:
    """The first row of a planned step: skipped (final) or pending and due now."""
    if planned.skip_reason is not None:
        return StepOutcome(planned.step, SKIPPED, detail=planned.skip_reason, updated_at=now_ms)
    return StepOutcome(planned.step, PENDING, next_attempt_at=now_ms, updated_at=now_ms)


def is_due(outcome: StepOutcome, now_ms: int) -> bool:
    """Whether a step should run in this pass: not final, and its next attempt is due."""
    return not outcome.final and (outcome.next_attempt_at is None or outcome.next_attempt_at <= now_ms)


def next_outcome(previous: StepOutcome, result: StepResult, now_ms: int, base_ms: int, max_ms: int) -> StepOutcome:
    """The row after running a step. A failure counts an attempt and is retried after :func:`backoff_ms`; waiting
    counts none and looks again after ``base_ms``; success and skip are final."""
    if result.status == FAILED:
        attempts = previous.attempts + 1
        due = now_ms + backoff_ms(attempts, base_ms, max_ms)
        return StepOutcome(previous.step, FAILED, attempts, result.detail, result.error, due, now_ms)
    if result.status == PENDING:
        return StepOutcome(
            previous.step, PENDING, previous.attempts, result.detail, previous.error, now_ms + base_ms, now_ms
        )
    attempts = previous.attempts + (1 if result.status == SUCCEEDED else 0)
    return StepOutcome(previous.step, result.status, attempts, result.detail, None, None, now_ms)


def run_step(action: Callable[[], StepResult]) -> StepResult:
    """Run one step's action; a guard's refusal becomes a refused result, any other exception a failed one (a step
    never stops the others)."""
    try:
        return action()
    except GuardRefusal as err:
        return StepResult.refused(str(err))
    except Exception as err:
        return StepResult.failed(describe_error(err))


def run_due_steps(
    outcomes: Mapping[str, StepOutcome],
    actions: Mapping[str, Callable[[], StepResult]],
    record: Callable[[StepOutcome], None],
    now_ms: Callable[[], int],
    base_ms: int,
    max_ms: int,
) -> list[StepOutcome]:
    """Run every due step of one deletion, in its order, and ``record`` each outcome right after its step ran.

    ``actions`` maps step names to what runs them; a due step without action (a hook no longer registered) is recorded
    as skipped. Returns the new outcomes.
    """
    new: list[StepOutcome] = []
    for step, outcome in outcomes.items():
        if not is_due(outcome, now_ms()):
            continue
        action = actions.get(step)
        if action is None:
            result = StepResult.skipped(f"{step} is no longer registered (cleanup.hooks or entry points)")
        else:
            result = run_step(action)
        updated = next_outcome(outcome, result, now_ms(), base_ms, max_ms)
        record(updated)
        new.append(updated)
    return new


# ---------------------------------------------------------------------------------------------------------------------
# A pass: the decisions, behind a small I/O interface
# ---------------------------------------------------------------------------------------------------------------------


class CleanupIO(Protocol):
    """What a cleanup pass reads and writes: the Delta tables, the topics, the consumer groups
    (:class:`connect_state.spark.cleanup.SparkCleanupIO`; unit tests use an in-memory one)."""

    def begin_pass(self) -> None:
        """Called first in every pass (create the ``connector_deletions`` table if needed)."""
        ...

    def input_marks(self) -> tuple[int, int] | None:
        """What a pass depends on, cheaply told: a number that changes when ``connector_events`` gains a creation or
        a deletion (a count of them, or the table's version) and the Delta version of ``connector_deletions`` (-1: the
        table does not exist), or None when they cannot be told cheaply (then every pass runs)."""
        ...

    def deletion_events(self) -> list[Mapping[str, object]] | None:
        """The ``connector_events`` rows :func:`deletions_from_events` needs (``kafka_timestamp`` in epoch ms), or None
        when the table does not exist yet."""
        ...

    def read_outcomes(self) -> dict[tuple[str, int], dict[str, StepOutcome]]:
        """Every ``connector_deletions`` row, by (connector, deletion offset) and step."""
        ...

    def record_outcomes(self, rows: Sequence[tuple[Deletion, StepOutcome]], insert_only: bool) -> None:
        """Merge rows into ``connector_deletions`` (``insert_only``: keep rows that exist)."""
        ...

    def connector_row(self, name: str) -> Mapping[str, object] | None:
        """The connector's ``connectors`` row (tasks as a list of dicts), or None."""
        ...

    def config_records(self) -> list[tuple[bytes, bytes | None, int]]:
        """``(key, value, offset)`` of every record of the config topic (read once per pass)."""
        ...

    def active_topics(self, connector: str) -> list[str]:
        """The topics of the connector in the ``active_topics`` table."""
        ...

    def source_offsets_keys(self, connector: str) -> list[tuple[str, bytes]]:
        """``(offsets topic, key bytes)`` of the connector's rows in the ``source_offsets`` table."""
        ...

    def live_keys(self, topic: str, *, contains: str | None = None) -> list[bytes]:
        """The keys of ``topic`` whose latest record is not a tombstone, among those whose text contains
        ``contains`` (a coarse filter: the caller parses the keys)."""
        ...

    def topic_exists(self, topic: str) -> bool: ...

    def write_tombstones(self, topic: str, keys: Sequence[bytes]) -> None:
        """Send a tombstone per key, each to the partition Java's producer picks; wait for the acknowledgements."""
        ...

    def delete_group(self, group: str) -> bool:
        """Delete a consumer group: True when deleted, False when there was no such group."""
        ...

    def source_offset_rows(self, connector: str) -> list[Mapping[str, object]]:
        """The connector's ``source_offsets`` rows (``offsets_topic``, ``key``, ``value``, ``listed``), in any topic."""
        ...

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """The committed offsets of a consumer group (the ``sink_offsets`` table), by (topic, partition)."""
        ...

    def active_topics_at(self, connector: str, at_ms: int) -> list[str]:
        """The connector's active topics as of Kafka time ``at_ms`` (``active_topics_history``: each topic's last
        change at or before it was an addition or an update, not a removal); Connect resets them right after a
        deletion."""
        ...

    def close(self) -> None: ...


@dataclass
class PassSummary:
    """What one pass did, for the log."""

    deletions: int = 0
    planned: int = 0
    ran: int = 0
    succeeded: int = 0
    failed: int = 0
    waiting: int = 0
    skipped: int = 0
    refused: int = 0

    def count(self, status: str) -> None:
        """Count a step that ran and ended with ``status``."""
        self.ran += 1
        name = "waiting" if status == StepStatus.PENDING else str(status)
        setattr(self, name, getattr(self, name) + 1)

    def __str__(self) -> str:
        return (
            f"{self.deletions} deletions, {self.planned} newly planned; {self.ran} steps run: {self.succeeded} "
            f"succeeded, {self.failed} failed, {self.waiting} waiting, {self.skipped} skipped, {self.refused} refused"
        )


def next_due_at(outcomes: Iterable[StepOutcome]) -> int | None:
    """When the earliest of ``outcomes`` that is not final is due (epoch ms; 0: at once), None when all are final."""
    due = [outcome.next_attempt_at or 0 for outcome in outcomes if not outcome.final]
    return min(due) if due else None


def step_order(step: str) -> tuple[int, str]:
    """The order steps run in: ``active_topics``, ``offsets``, then the hooks by name."""
    return (SHARED_STEPS.index(step), "") if step in SHARED_STEPS else (len(SHARED_STEPS), step)


def _coarse_text(name: str) -> str | None:
    """A text every key of the connector's offsets contains (its name, when JSON writes it as is), for a coarse
    filter before parsing; None when the name may be escaped."""
    return name if name.isascii() and name.isprintable() and '"' not in name and "\\" not in name else None


class CleanupReconciler:
    """One reconcile pass at a time (:meth:`run_pass`) over the deletions of ``connector_events``: plan the steps of
    every deletion not seen yet, run the steps that are due, record each outcome right after its step ran.

    Every read and write goes through ``io``; ``clock`` returns epoch ms. The topics are the worker's
    (``status_topic``, ``offsets_topic``); ``offsets_on_delete`` is connect-state's ``cleanup.offsets.on.delete``;
    ``backoff_ms`` / ``backoff_max_ms`` are ``cleanup.retry.backoff.ms`` / ``cleanup.retry.backoff.max.ms``;
    ``class_types`` is ``connector.class.types`` (for a deletion whose event recorded no type). ``guards`` are the
    API's checks of what a connector's config names (:class:`~connect_state.security.guards.Guards`): the group a
    sink's deletion deletes, the offsets topics a source's deletion tombstones; a refusal is recorded ``refused``.
    """

    def __init__(
        self,
        io: CleanupIO,
        hooks: Mapping[str, DeletionHook],
        *,
        status_topic: str,
        offsets_topic: str,
        offsets_on_delete: bool,
        backoff_ms: int,
        backoff_max_ms: int,
        clock: Callable[[], int],
        guards: Guards,
        log: logging.Logger | None = None,
        hook_classes: Mapping[str, Collection[str]] | None = None,
        hook_timeout_ms: int = 30_000,
        class_types: Mapping[str, str] | None = None,
    ) -> None:
        self.io = io
        self.guards = guards
        self.class_types = dict(class_types or {})
        self.hooks = dict(hooks)
        self.hook_classes = dict(hook_classes or {})
        self.hook_runner = DeadlineRunner(hook_timeout_ms, "cleanup.hook.timeout.ms")
        self._contexts: dict[tuple[str, int], DeletedConnector] = {}
        self._config_records: list[tuple[bytes, bytes | None, int]] | None = None
        self._status_keys: list[bytes] | None = None
        self.status_topic = status_topic
        self.offsets_topic = offsets_topic
        self.offsets_on_delete = offsets_on_delete
        self.backoff_ms = backoff_ms
        self.backoff_max_ms = backoff_max_ms
        self.clock = clock
        self.log = log or logging.getLogger("connect_state.jobs.cleanup")
        self._lifecycles: dict[str, Lifecycle] = {}
        self._creations: dict[str, list[int]] | None = None
        #: The input marks the last pass worked from (``connector_events``' when it started, ``connector_deletions``'
        #: after its own writes) and when its earliest unfinished step is due: see :meth:`pass_needed`.
        self._last_inputs: tuple[int, int] | None = None
        self._next_due: int | None = None

    def close(self) -> None:
        self.io.close()

    def pass_needed(self, inputs: tuple[int, int] | None) -> bool:
        """Whether a pass can do anything, given its ``inputs`` now (:meth:`CleanupIO.input_marks`): the creation
        and deletion events or the recorded outcomes changed since the last pass (or that cannot be told),
        or a step of the last pass's is due. A cluster without creations or deletions then costs a cheap check per
        trigger instead of two table reads."""
        if inputs is None or self._last_inputs is None or inputs != self._last_inputs:
            return True
        return self._next_due is not None and self._next_due <= self.clock()

    # --- one pass ------------------------------------------------------------------------------------------------

    def run_pass(self) -> PassSummary | None:
        """Plan new deletions, run the due steps, record every outcome; None (nothing read) when no pass is needed
        (:meth:`pass_needed`)."""
        started_from = self.io.input_marks()
        if not self.pass_needed(started_from):
            return None
        self._last_inputs = None  # a pass that fails part-way is run again at the next trigger
        self._lifecycles, self._creations, self._config_records, self._status_keys = {}, None, None, None
        summary = PassSummary()
        self.io.begin_pass()
        events = self.io.deletion_events()
        if events is None:
            self.log.info("no connector_events table yet: run connect-state-connector-states first")
            return summary
        deletions, self._lifecycles = deletions_from_events(events, self.class_types)
        summary.deletions = len(deletions)
        known = self.io.read_outcomes()
        now = self.clock()
        planned_rows: list[tuple[Deletion, StepOutcome]] = []
        for deletion in deletions:
            if deletion.key in known:
                continue
            plan = plan_steps(
                deletion, self.hook_names(deletion), self.offsets_on_delete, self._lifecycles.get(deletion.connector)
            )
            outcomes = {p.step: planned_outcome(p, now) for p in plan}
            known[deletion.key] = outcomes
            planned_rows.extend((deletion, outcome) for outcome in outcomes.values())
            self.log.info(
                "deletion of %s at config offset %d: steps %s",
                deletion.connector,
                deletion.deletion_offset,
                ", ".join(f"{o.step}={o.status}" for o in outcomes.values()),
            )
        if planned_rows:
            self.io.record_outcomes(planned_rows, insert_only=True)
            summary.planned = len({d.key for d, _ in planned_rows})
        for deletion in deletions:
            outcomes = dict(sorted(known[deletion.key].items(), key=lambda item: step_order(item[0])))
            if not any(is_due(o, self.clock()) for o in outcomes.values()):
                continue
            hooks_due = any(
                step.startswith(HOOK_STEP_PREFIX) and is_due(o, self.clock()) for step, o in outcomes.items()
            )
            if hooks_due and self._hooks_wait(deletion) is None:
                self._context(deletion)  # before this pass's shared steps clean what the hooks are told about
            new = run_due_steps(
                outcomes,
                self.actions(deletion),
                functools.partial(self._record, deletion),
                self.clock,
                self.backoff_ms,
                self.backoff_max_ms,
            )
            for outcome in new:
                summary.count(outcome.status)
            known[deletion.key] = {**outcomes, **{outcome.step: outcome for outcome in new}}
        self._next_due = next_due_at(o for deletion in deletions for o in known[deletion.key].values())
        ended_at = self.io.input_marks()
        if started_from is not None and ended_at is not None:
            self._last_inputs = (started_from[0], ended_at[1])
        return summary

    def _record(self, deletion: Deletion, outcome: StepOutcome) -> None:
        self.log.log(
            logging.WARNING if outcome.status == StepStatus.FAILED else logging.INFO,
            "deletion of %s at config offset %d: %s %s (attempt %d)%s%s",
            deletion.connector,
            deletion.deletion_offset,
            outcome.step,
            outcome.status,
            outcome.attempts,
            f": {outcome.detail}" if outcome.detail else "",
            f"; error: {outcome.error}" if outcome.error else "",
        )
        self.io.record_outcomes([(deletion, outcome)], insert_only=False)

    # --- steps ---------------------------------------------------------------------------------------------------

    def actions(self, deletion: Deletion) -> dict[str, Callable[[], StepResult]]:
        """What runs each step of ``deletion``."""
        return {
            Step.ACTIVE_TOPICS: lambda: self._shared(deletion, self._reset_active_topics),
            Step.OFFSETS: lambda: self._shared(deletion, self._clean_offsets),
            **{
                hook_step(name): functools.partial(self._hook, deletion, name, hook)
                for name, hook in self.hooks.items()
            },
        }

    def hook_names(self, deletion: Deletion) -> list[str]:
        """The hooks registered for the deleted connector's class (and the catch-alls), in registration order."""
        class_name = connector_class(deletion.config)
        return [name for name in self.hooks if hook_applies(self.hook_classes.get(name), class_name)]

    def _hooks_wait(self, deletion: Deletion) -> StepResult | None:
        """Why the deletion's hooks must wait (its tasks still run), or None. Hooks run once the deleted connector's
        tasks have stopped, as ``stop(isDeleted=true)`` is called when the connector stops; a recreated name's
        statuses are the new connector's, so they do not hold the old one's hooks."""
        lifecycle = self._lifecycles.get(deletion.connector, Lifecycle())
        lifecycle = lifecycle.with_created(self._config_topic_creations().get(deletion.connector, ()))
        if shared_cleanup_blocker(deletion, lifecycle) is not None:
            return None
        row = self.io.connector_row(deletion.connector)
        config_offset = int(row.get("config_offset") or -1) if row is not None else -1  # type: ignore[call-overload]
        if row is not None and not row.get("deleted") and config_offset > deletion.deletion_offset:
            return None
        live = live_statuses(row)
        if live:
            return StepResult.waiting(f"waiting for the deleted connector's tasks to stop ({', '.join(live)})")
        return None

    def _hook(self, deletion: Deletion, name: str, hook: DeletionHook) -> StepResult:
        waiting = self._hooks_wait(deletion)
        if waiting is not None:
            return waiting
        context = self._context(deletion)
        self.hook_runner.run((deletion.key, name), f"deletion hook {name}", lambda: call_hook(hook, context))
        return StepResult.succeeded("hook returned")

    def _context(self, deletion: Deletion) -> DeletedConnector:
        """What the deletion's hooks are told (:class:`DeletedConnector`), read once per job process."""
        if deletion.key in self._contexts:
            return self._contexts[deletion.key]
        name = deletion.connector
        source: list[tuple[Mapping[str, object] | None, Mapping[str, object] | None]] = []
        sink: dict[tuple[str, int], int] = {}
        if deletion.connector_type == ConnectorType.SINK:
            sink = dict(sorted(self.io.group_offsets(sink_group_id(name, deletion.config)).items()))
        elif deletion.connector_type == ConnectorType.SOURCE:
            # what GET /connectors/<name>/offsets answers (Worker.sourceConnectorOffsets)
            stores = connector_offset_stores(self.offsets_topic, deletion.config)
            entries = source_connector_offsets(name, self.io.source_offset_rows(name), stores)
            source = [(cast(JsonMap, entry["partition"]), cast("JsonMap | None", entry["offset"])) for entry in entries]
        context = DeletedConnector(
            name=name,
            connector_class=connector_class(deletion.config),
            connector_type=deletion.connector_type,
            config=hook_config(deletion.config),
            task_configs=last_task_configs(self._all_config_records(), name, deletion.deletion_offset),
            source_offsets=source,
            sink_offsets=sink,
            active_topics=sorted(
                set(self.io.active_topics(name)) | set(self.io.active_topics_at(name, deletion.deleted_at))
            ),
            deletion_offset=deletion.deletion_offset,
            deleted_at=deletion.deleted_at,
        )
        self._contexts[deletion.key] = context
        return context

    def _live_topic_status_keys(self) -> list[bytes]:
        """The status topic's live ``status-topic-*`` keys, read once per pass: one read of the topic serves the
        ``active_topics`` step of every deletion (a first pass may have hundreds; a read each took seconds)."""
        if self._status_keys is None:
            self._status_keys = self.io.live_keys(self.status_topic, contains=TOPIC_STATUS_PREFIX)
        return self._status_keys

    def _all_config_records(self) -> list[tuple[bytes, bytes | None, int]]:
        if self._config_records is None:
            self._config_records = self.io.config_records()
        return self._config_records

    def _shared(self, deletion: Deletion, action: Callable[[Deletion], StepResult]) -> StepResult:
        """Run a step on the name's shared resources, unless the name was recreated (skip) or the deleted
        connector's tasks may still be writing (wait)."""
        lifecycle = self._lifecycles.get(deletion.connector, Lifecycle())
        lifecycle = lifecycle.with_created(self._config_topic_creations().get(deletion.connector, ()))
        blocker = shared_cleanup_blocker(deletion, lifecycle)
        if blocker is not None:
            return StepResult.skipped(blocker)
        row = self.io.connector_row(deletion.connector)
        config_offset = int(row.get("config_offset") or -1) if row is not None else -1  # type: ignore[call-overload]
        if row is not None and not row.get("deleted") and config_offset > deletion.deletion_offset:
            return StepResult.skipped(f"connector recreated at config offset {row['config_offset']}")
        live = live_statuses(row)
        if live:
            return StepResult.waiting(f"waiting for the deleted connector's tasks to stop ({', '.join(live)})")
        return action(deletion)

    def _config_topic_creations(self) -> dict[str, list[int]]:
        """Per name, the config-topic offsets of its live ``connector-<name>`` records (from the pass's one read of the
        config topic)."""
        if self._creations is None:
            creations: dict[str, list[int]] = {}
            for name, alive, offset in self._connector_records():
                if alive:
                    creations.setdefault(name, []).append(offset)
            self._creations = creations
        return self._creations

    def _connector_records(self) -> Iterator[tuple[str, bool, int]]:
        """The config topic's readable ``connector-<name>`` records in order: name, whether not a tombstone, offset."""
        for key, value, offset in self._all_config_records():
            if not key.startswith(CONNECTOR_PREFIX.encode()):
                continue
            try:
                record = parse_config_record(key, value)
            except RecordFormatError:
                continue
            yield record.key.connector, record.value is not None, offset  # type: ignore[union-attr]

    def _live_connectors(self) -> set[str]:
        """The names whose latest ``connector-<name>`` record in the config topic is not a tombstone."""
        live = {name: alive for name, alive, _offset in self._connector_records()}
        return {name for name, alive in live.items() if alive}

    def _reset_active_topics(self, deletion: Deletion) -> StepResult:
        """Tombstones for every ``status-topic-<topic>:connector-<name>`` key the table or the status topic shows."""
        name, topic = deletion.connector, self.status_topic
        keys = {topic_status_key(active, name).encode("utf-8") for active in self.io.active_topics(name)}
        suffix = (TOPIC_STATUS_SEPARATOR + name).encode("utf-8")
        for key in self._live_topic_status_keys():
            if not key.endswith(suffix):
                continue
            try:
                parsed = parse_status_key(key)
            except RecordFormatError:
                continue
            if isinstance(parsed, TopicStatusKey) and parsed.connector == name:
                keys.add(key)
        if not keys:
            return StepResult.succeeded("no active topics")
        self.io.write_tombstones(topic, sorted(keys))
        return StepResult.succeeded(f"{len(keys)} topic-status tombstones written to {topic}")

    def _clean_offsets(self, deletion: Deletion) -> StepResult:
        if deletion.connector_type == ConnectorType.SINK:
            group = sink_group_id(deletion.connector, deletion.config)
            self.guards.cleanup_group(deletion.connector, group, self._live_connectors())  # GuardRefusal: refused
            deleted = self.io.delete_group(group)
            return StepResult.succeeded(f"consumer group {group} {'deleted' if deleted else 'did not exist'}")
        return self._tombstone_source_offsets(deletion)

    def _tombstone_source_offsets(self, deletion: Deletion) -> StepResult:
        """Tombstones with the exact key bytes of every live offsets-topic key of the connector's namespace, in each of
        its offset stores (:func:`source_offsets_topics`)."""
        name = deletion.connector
        targets: dict[str, set[bytes]] = {}
        for offsets_topic, key in self.io.source_offsets_keys(name):
            targets.setdefault(offsets_topic, set()).add(key)
        stores = source_offsets_topics(self.offsets_topic, deletion.config)
        for topic in {*stores, *targets}:
            self.guards.offsets_topic(topic)  # GuardRefusal: refused, nothing written
        for topic in stores:
            if topic != self.offsets_topic and not self.io.topic_exists(topic):
                continue
            for key in self.io.live_keys(topic, contains=_coarse_text(name)):
                try:
                    parsed = parse_offset_key(key)
                except RecordFormatError:
                    continue
                if parsed.connector == name:
                    targets.setdefault(topic, set()).add(key)
        written = []
        for topic, keys in sorted(targets.items()):
            if keys:
                self.io.write_tombstones(topic, sorted(keys))
                written.append(f"{len(keys)} to {topic}")
        if not written:
            return StepResult.succeeded("no source offsets")
        return StepResult.succeeded("source-offset tombstones written: " + ", ".join(written))
