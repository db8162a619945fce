"""KIP-910 idle detection: per connector, its state and the last offsets of its source partitions; which are due.

Pure Python, no Spark: the heartbeats job calls :func:`fold` once per connector and micro-batch from
``applyInPandasWithState`` (records only, no timeouts), and its timer on the driver keeps the eligible connectors'
states in a :class:`HeartbeatSchedule`, which calls :func:`fire` when they are due; :func:`step` is both at one
instant. Tests call them with an injected ``now`` (epoch ms).

**State** (:class:`HeartbeatState`): the connector's :class:`~connect_state.folds.connector_states.ConnectorState`
folded from its config-topic and status-topic records by the connector-state fold, plus one
:class:`PartitionActivity` per source partition that has an offset in the offsets topic: the partition and its last
offset, when the offset last *moved* (the Kafka timestamp of the record that changed its value: a record repeating
the same value does not move it), and when the last heartbeat was due. Offsets-topic records are applied as
``KafkaOffsetBackingStore`` applies them, keyed by the exact bytes Connect looks partitions up with
(:func:`~connect_state.formats.offsets.offset_key_bytes`): a value sets the offset, a tombstone removes the partition
(as ``OffsetUtils.processPartitionKey`` does for ``connectorPartitions``). A value Connect cannot deserialize also
removes it here (``OffsetStorageReaderImpl`` gives the task no offset for it). Records at or below the offset already
applied for their offsets-topic partition are replays and are skipped.

**Eligibility** (:func:`heartbeat_policy`), the first failing check is the ``reason``: the connector has a config
(not deleted), is a source connector, its class has a heartbeat provider (:attr:`HeartbeatDefaults.provider_classes`,
KIP-910: only tasks implementing the method take part), its ``heartbeat.interval.ms`` (its own config, else
connect-state's) is a valid integer > 0 (0 turns heartbeats off, as in the KIP), its ``heartbeat.mode`` is valid, the
worker's offsets topic is known when it has its own ``offsets.storage.topic`` (heartbeat offsets are committed to its
stores in Connect's order), its effective target state is STARTED and its connector status is RUNNING.

**Due**, ``idle`` mode (:func:`due_at`): a partition is due at ``max(last_moved_at, last_heartbeat_at) +
interval``: its offset has not moved, and no heartbeat was sent, for one interval. After a heartbeat the timer
restarts, as the KIP's ``currentTimeMs + heartbeatIntervalMs``. The connector is due next at the earliest due time of
its partitions (:attr:`FireResult.next_at`), only while it is eligible.

**Due**, ``timer`` mode (KIP-910's timer, :class:`HeartbeatMode`): per connector, armed one interval after it became
eligible (:attr:`HeartbeatState.timer_next_at`), fired every interval whether or not offsets moved and reset whether or
not anything came back; every partition is due when it fires, and a connector without partitions gets one heartbeat
with partition ``{}`` (:data:`NO_PARTITION_KEY`), so its provider can commit a first offset.

Kafka timestamps are the worker's clock, ``now`` is ours: idle ages are clamped at 0 when the clocks disagree.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import lru_cache

from connect_state.connect.connector_types import names_any
from connect_state.connect.offset_stores import OFFSETS_TOPIC_CONFIG, connector_offsets_topic
from connect_state.core.errors import RecordFormatError
from connect_state.core.vocabulary import ConnectorType, State, TargetState
from connect_state.folds.connector_states import (
    ConnectorRecord,
    ConnectorState,
    fold_connector,
    state_from_json,
    state_to_json,
)
from connect_state.formats.offsets import (
    offset_key_bytes,
    parse_offset_key,
    parse_offset_value,
    serialize_offset_value,
)

__all__ = [
    "INTERVAL_CONFIG",
    "MODE_CONFIG",
    "NO_PARTITION_KEY",
    "TOPIC_CONFIG",
    "DuePartition",
    "FireResult",
    "FoldResult",
    "HeartbeatDefaults",
    "HeartbeatMode",
    "HeartbeatPolicy",
    "HeartbeatSchedule",
    "HeartbeatState",
    "OffsetRecord",
    "PartitionActivity",
    "StepResult",
    "activity_rows",
    "apply_offset_record",
    "due_at",
    "due_partitions",
    "fire",
    "fold",
    "has_provider",
    "heartbeat_policy",
    "heartbeat_state_from_json",
    "heartbeat_state_to_json",
    "idle_ms",
    "is_due",
    "offset_key_parts",
    "parse_offset_record",
    "step",
    "still_due",
]

INTERVAL_CONFIG = "heartbeat.interval.ms"
TOPIC_CONFIG = "heartbeat.records.topic"
#: Ours: ``idle`` (a partition beats once its offset has not moved for the interval) or ``timer`` (KIP-910's timer).
MODE_CONFIG = "heartbeat.mode"
_INT32_MAX = 2**31 - 1


class HeartbeatMode(StrEnum):
    """When heartbeats fire (``heartbeat.mode``, globally or in a connector's config).

    ``idle``: per partition, once its offset has not moved and no heartbeat was sent for the interval (connect-state's
    original rule: a partition whose offset moves never beats). ``timer``: KIP-910's timer, per connector: every
    interval, reset whether or not anything came back, whether or not offsets moved, also before the connector has
    any offset (the provider is then asked with no partitions)."""

    IDLE = "idle"
    TIMER = "timer"

    @classmethod
    def parse(cls, text: object) -> HeartbeatMode:
        """A mode as written in a setting or a config (case and surrounding blanks ignored); ValueError if unknown."""
        return cls(str(text).strip().lower())


# ---------------------------------------------------------------------------------------------------------------------
# Policy: interval, topic, eligibility
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeartbeatDefaults:
    """connect-state's ``heartbeat.interval.ms`` and ``heartbeat.records.topic`` (a connector's config overrides), and
    the worker's offsets topic (``offset.storage.topic``), the one the job reads; when it is None (not known), any
    connector-specific ``offsets.storage.topic`` counts as another topic."""

    interval_ms: int
    records_topic: str
    offsets_topic: str | None = None
    #: The connector classes that have a heartbeat provider (KIP-910: only tasks implementing the method take part);
    #: None: not checked (every source connector with an interval is eligible).
    provider_classes: frozenset[str] | None = None
    mode: HeartbeatMode = HeartbeatMode.IDLE
    #: ``connector.class.types``: connector classes known to be ``source`` or ``sink`` (Kafka's own are known anyway;
    #: any other connector's type is guessed from its config, as the API does).
    class_types: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HeartbeatPolicy:
    """What applies to a connector now: the effective interval (0 = off) and topic, and why it is not eligible."""

    interval_ms: int
    records_topic: str
    reason: str | None
    mode: HeartbeatMode = HeartbeatMode.IDLE

    @property
    def eligible(self) -> bool:
        return self.reason is None


def _override(config: Mapping[str, object] | None, key: str) -> object | None:
    value = config.get(key) if config is not None else None
    if isinstance(value, str) and not value.strip():
        return None  # "If the value of this config is empty or is not specified" the global value applies
    return value


def _interval(config: Mapping[str, object] | None, defaults: HeartbeatDefaults) -> tuple[int, str | None]:
    """The effective interval and, for a bad override, why it is refused (the KIP's type: int, >= 0 here)."""
    value = _override(config, INTERVAL_CONFIG)
    if value is None:
        return defaults.interval_ms, None
    try:
        interval = int(value.strip()) if isinstance(value, str) else value if type(value) is int else None
    except ValueError:
        interval = None
    if interval is None or not 0 <= interval <= _INT32_MAX:
        return 0, f"invalid {INTERVAL_CONFIG} {value!r} in the connector config (expected an int >= 0)"
    return interval, None


def _offsets_elsewhere(config: Mapping[str, object], defaults: HeartbeatDefaults) -> bool:
    """Whether the connector's offsets are (also) in another topic than the worker's, and the worker's topic is not
    known: then its stores cannot be written in Connect's order (the job always knows it)."""
    return defaults.offsets_topic is None and connector_offsets_topic(config) is not None


def _mode(config: Mapping[str, object] | None, defaults: HeartbeatDefaults) -> tuple[HeartbeatMode, str | None]:
    value = _override(config, MODE_CONFIG)
    if value is None:
        return defaults.mode, None
    try:
        return HeartbeatMode.parse(value), None
    except ValueError:
        return defaults.mode, f"invalid {MODE_CONFIG} {value!r} in the connector config (expected idle or timer)"


def has_provider(connector_class: str | None, provider_classes: frozenset[str] | None) -> bool:
    """Whether a provider is registered for the class (by full name or a ``PluginUtils`` alias of either side)."""
    if provider_classes is None:
        return True
    return names_any(connector_class, provider_classes)


def heartbeat_policy(connector: ConnectorState, defaults: HeartbeatDefaults) -> HeartbeatPolicy:
    """The connector's effective interval and topic, and the first reason it gets no heartbeats (None: eligible)."""
    config = connector.config
    interval, bad_interval = _interval(config, defaults)
    mode, bad_mode = _mode(config, defaults)
    topic_override = _override(config, TOPIC_CONFIG)
    topic = str(topic_override).strip() if topic_override is not None else defaults.records_topic
    status = connector.connector_status
    if config is None:
        reason: str | None = "deleted" if connector.deleted else "no config"
    elif (kind := connector.connector_type(defaults.class_types)) != ConnectorType.SOURCE:
        reason = f"not a source connector ({kind})"
    elif not has_provider(connector.connector_class, defaults.provider_classes):
        reason = f"no heartbeat provider for class {connector.connector_class} (heartbeat.providers)"
    elif bad_interval is not None:
        reason = bad_interval
    elif interval == 0:
        reason = f"heartbeats disabled ({INTERVAL_CONFIG}=0)"
    elif bad_mode is not None:
        reason = bad_mode
    elif _offsets_elsewhere(config, defaults):
        reason = f"connector-specific {OFFSETS_TOPIC_CONFIG} is not supported"
    elif connector.effective_target_state != TargetState.STARTED:
        reason = f"target state {connector.effective_target_state}"
    elif status is None:
        reason = "no connector status"
    elif status.state != State.RUNNING:
        reason = f"connector status {status.state}"
    else:
        reason = None
    return HeartbeatPolicy(interval, topic, reason, mode)


# ---------------------------------------------------------------------------------------------------------------------
# Due computation (shared by the schedule, the sink's last check and the API)
# ---------------------------------------------------------------------------------------------------------------------


def due_at(last_moved_at: int, last_heartbeat_at: int | None, interval_ms: int) -> int | None:
    """When a partition is due: one interval after its offset last moved or its last heartbeat, whichever is later;
    None when heartbeats are off (``interval_ms`` <= 0)."""
    if interval_ms <= 0:
        return None
    last = last_moved_at if last_heartbeat_at is None else max(last_moved_at, last_heartbeat_at)
    return last + interval_ms


def is_due(last_moved_at: int, last_heartbeat_at: int | None, interval_ms: int, eligible: bool, now: int) -> bool:
    """Whether a heartbeat is due at ``now`` (epoch ms) for a partition of an eligible connector."""
    when = due_at(last_moved_at, last_heartbeat_at, interval_ms)
    return eligible and when is not None and now >= when


def idle_ms(last_moved_at: int, now: int) -> int:
    """How long the offset has not moved (0 when the worker's clock is ahead of ours)."""
    return max(now - last_moved_at, 0)


# ---------------------------------------------------------------------------------------------------------------------
# Offsets-topic records and partition state
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetRecord:
    """One offsets-topic record of a connector's source partition; ``offset`` None for a tombstone (or a value
    Connect cannot read, see the module docstring)."""

    connector: str
    partition: dict[str, object] = field(hash=False)
    offset: dict[str, object] | None = field(hash=False)
    kafka_partition: int
    kafka_offset: int
    kafka_timestamp: int

    #: :func:`~connect_state.formats.offsets.offset_key_bytes` of the partition, when already known.
    lookup_key: bytes | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> bytes:
        """The key Connect writes and looks up for the partition (its partition map normalised)."""
        if self.lookup_key is not None:
            return self.lookup_key
        return offset_key_bytes(self.connector, self.partition)


@dataclass(frozen=True)
class OffsetKeyParts:
    """What the fold needs of an offsets-topic key: its connector, its partition map (None for ``[connector,
    null]``) and the normalised key bytes of that partition (None with it)."""

    connector: str
    partition: dict[str, object] | None = field(hash=False)
    lookup_key: bytes | None


@lru_cache(maxsize=65536)
def offset_key_parts(key: bytes) -> OffsetKeyParts:
    """:func:`~connect_state.formats.offsets.parse_offset_key` and the partition's normalised key bytes, once per
    distinct key bytes (a source partition's key repeats with every offset commit). Raises ``RecordFormatError`` for a
    key ``OffsetUtils.processPartitionKey`` ignores (not cached). The partition map is shared by every record of the
    key: never modify it."""
    parsed = parse_offset_key(key)
    if parsed.partition is None:
        return OffsetKeyParts(parsed.connector, None, None)
    return OffsetKeyParts(parsed.connector, parsed.partition, offset_key_bytes(parsed.connector, parsed.partition))


def parse_offset_record(
    key: bytes | None, value: bytes | None, kafka_partition: int, kafka_offset: int, kafka_timestamp: int
) -> OffsetRecord | None:
    """An offsets-topic record as :class:`OffsetRecord`; None for ``[connector, null]`` (ignored silently by
    Connect). Raises ``RecordFormatError`` for a key ``OffsetUtils.processPartitionKey`` ignores."""
    if key is None:
        parse_offset_key(key)  # raises: a null key
    parts = offset_key_parts(bytes(key))  # type: ignore[arg-type]
    if parts.partition is None:
        return None
    try:
        offset = parse_offset_value(value)
    except RecordFormatError:
        offset = None
    return OffsetRecord(
        parts.connector, parts.partition, offset, kafka_partition, kafka_offset, kafka_timestamp, parts.lookup_key
    )


@dataclass
class PartitionActivity:
    """A source partition's last offset, when it last moved and when its last heartbeat was due (epoch ms)."""

    partition: dict[str, object]
    offset: dict[str, object]
    last_moved_at: int
    last_heartbeat_at: int | None = None
    kafka_partition: int | None = None
    kafka_offset: int | None = None


@dataclass
class HeartbeatState:
    """One connector's state in the heartbeats job. ``partitions`` is keyed by Connect's offsets-topic key bytes;
    ``offsets_applied`` maps an offsets-topic partition to the last offset applied from it (replay guard)."""

    connector: ConnectorState
    partitions: dict[bytes, PartitionActivity] = field(default_factory=dict)
    offsets_applied: dict[int, int] = field(default_factory=dict)
    #: Timer mode: when the connector's timer fires next (epoch ms); None while it is not armed.
    timer_next_at: int | None = None

    @classmethod
    def new(cls, name: str) -> HeartbeatState:
        return cls(ConnectorState(name))

    @property
    def name(self) -> str:
        return self.connector.name


_PLAIN_TYPES = frozenset({str, bool, type(None)})
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def _plain_map(offset: Mapping[str, object]) -> bool:
    """Every value a string, a boolean, null or an integer in Java's long range: the offset's bytes are then a
    one-to-one function of its (key, value, type) triples (no float, whose rendering may merge values)."""
    for value in offset.values():
        kind = type(value)
        if kind is int:
            if not _LONG_MIN <= value <= _LONG_MAX:  # type: ignore[operator]
                return False
        elif kind not in _PLAIN_TYPES:
            return False
    return True


def _same_offset(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    """Whether Connect writes the two offsets as the same bytes (:func:`~connect_state.formats.offsets.
    serialize_offset_value`). For two maps of plain values with their keys in the same order: equal values of the
    same types. (Keys in another order may or may not give other bytes: a ``HashMap`` keeps colliding keys in the
    order they came.)"""
    if tuple(a) == tuple(b) and _plain_map(a) and _plain_map(b):
        return all(type(value) is type(b[key]) and value == b[key] for key, value in a.items())
    return serialize_offset_value(a) == serialize_offset_value(b)


def apply_offset_record(state: HeartbeatState, record: OffsetRecord) -> bytes | None:
    """Apply one offsets-topic record in place; return the key of a partition it removed, else None."""
    if record.connector != state.name:
        raise ValueError(f"an offset of connector {record.connector!r} folded into the state of {state.name!r}")
    last = state.offsets_applied.get(record.kafka_partition)
    if last is not None and record.kafka_offset <= last:
        return None
    state.offsets_applied[record.kafka_partition] = record.kafka_offset
    key = record.key
    current = state.partitions.get(key)
    if record.offset is None:
        return key if state.partitions.pop(key, None) is not None else None
    if current is None:
        state.partitions[key] = PartitionActivity(
            dict(record.partition), dict(record.offset), record.kafka_timestamp, None,
            record.kafka_partition, record.kafka_offset,
        )  # fmt: skip
        return None
    if not _same_offset(current.offset, record.offset):
        current.offset = dict(record.offset)
        current.last_moved_at = record.kafka_timestamp
    current.kafka_partition, current.kafka_offset = record.kafka_partition, record.kafka_offset
    return None


def _copy(state: HeartbeatState) -> HeartbeatState:
    return HeartbeatState(
        state.connector,
        {key: replace(activity) for key, activity in state.partitions.items()},
        dict(state.offsets_applied),
        state.timer_next_at,
    )


# ---------------------------------------------------------------------------------------------------------------------
# One call of the stateful function
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DuePartition:
    """A heartbeat to send now: everything the provider and the writer need."""

    connector: str
    connector_class: str | None
    config: dict[str, object] = field(hash=False)
    partition: dict[str, object] = field(hash=False)
    key: bytes
    offset: dict[str, object] = field(hash=False)
    last_moved_at: int
    idle_ms: int
    interval_ms: int
    records_topic: str
    due_at: int
    #: The offsets-topic record the offset was last read from (to check it has not moved since, before sending).
    kafka_partition: int | None = None
    kafka_offset: int | None = None


@dataclass(frozen=True)
class StepResult:
    """The new state, the heartbeats due now, the keys of partitions removed in this step, the connector's policy,
    and when the connector is due next (epoch ms; None: not while nothing changes; named after the Spark timeout the
    job once armed with it)."""

    state: HeartbeatState
    due: list[DuePartition]
    removed: list[bytes]
    policy: HeartbeatPolicy
    timeout_at: int | None


#: The key of a timer-mode heartbeat of a connector that has no source partition yet (``partition`` is ``{}``).
NO_PARTITION_KEY = b""


def _timer_fired(state: HeartbeatState, policy: HeartbeatPolicy, now: int) -> bool:
    return policy.mode == HeartbeatMode.TIMER and state.timer_next_at is not None and now >= state.timer_next_at


def due_partitions(state: HeartbeatState, policy: HeartbeatPolicy, now: int) -> list[DuePartition]:
    """The partitions due at ``now`` (none unless the connector is eligible), in key order.

    Idle mode: each partition idle for the interval. Timer mode: every partition when the connector's timer has fired,
    or, when it has none yet, one heartbeat with ``partition`` ``{}`` and key :data:`NO_PARTITION_KEY` (the provider
    is asked with no offsets, as the KIP's task would be before its first commit)."""
    if not policy.eligible:
        return []
    timer = _timer_fired(state, policy, now)
    if timer and not state.partitions:
        config = dict(state.connector.config or {})
        fired = state.timer_next_at or now
        return [
            DuePartition(
                state.name, state.connector.connector_class, config, {}, NO_PARTITION_KEY, {},
                fired - policy.interval_ms, 0, policy.interval_ms, policy.records_topic, fired,
            )
        ]  # fmt: skip
    due = []
    when: int | None
    for key, activity in sorted(state.partitions.items()):
        if policy.mode == HeartbeatMode.TIMER:
            when = state.timer_next_at if timer else None
        else:
            when = due_at(activity.last_moved_at, activity.last_heartbeat_at, policy.interval_ms)
        if when is not None and now >= when:
            # timer mode: "moved" one interval before the timer fired, so that :func:`still_due` agrees it is due
            moved = when - policy.interval_ms if policy.mode == HeartbeatMode.TIMER else activity.last_moved_at
            due.append(
                DuePartition(
                    state.name,
                    state.connector.connector_class,
                    dict(state.connector.config or {}),
                    dict(activity.partition),
                    key,
                    dict(activity.offset),
                    moved,
                    idle_ms(activity.last_moved_at, now),
                    policy.interval_ms,
                    policy.records_topic,
                    when,
                    activity.kafka_partition,
                    activity.kafka_offset,
                )
            )
    return due


def _next_timeout(state: HeartbeatState, policy: HeartbeatPolicy) -> int | None:
    if not policy.eligible:
        return None
    if policy.mode == HeartbeatMode.TIMER:
        return state.timer_next_at
    times = [
        due_at(activity.last_moved_at, activity.last_heartbeat_at, policy.interval_ms)
        for activity in state.partitions.values()
    ]
    pending = [t for t in times if t is not None]
    return min(pending) if pending else None


@dataclass(frozen=True)
class FoldResult:
    """A connector's state after its records (:func:`fold`), the keys of the partitions they removed, and its policy."""

    state: HeartbeatState
    removed: list[bytes]
    policy: HeartbeatPolicy


def fold(
    state: HeartbeatState,
    connector_records: Iterable[ConnectorRecord],
    offset_records: Iterable[OffsetRecord],
    defaults: HeartbeatDefaults,
    now: int,
) -> FoldResult:
    """Fold the records (any order) into a new state: the connector's state, its partitions, and in timer mode the
    timer, armed one interval after ``now`` when the connector becomes eligible (cleared while it is not). Nothing
    fires here: that is :func:`fire` (the job's :class:`HeartbeatSchedule`). ``state`` is not changed."""
    new_state = _copy(state)
    new_state.connector, _events = fold_connector(state.connector, connector_records)
    removed = []
    for record in sorted(offset_records, key=lambda r: (r.kafka_partition, r.kafka_offset)):
        gone = apply_offset_record(new_state, record)
        if gone is not None:
            removed.append(gone)
    policy = heartbeat_policy(new_state.connector, defaults)
    if policy.mode == HeartbeatMode.TIMER and policy.eligible:
        if new_state.timer_next_at is None:
            new_state.timer_next_at = now + policy.interval_ms  # armed when the connector becomes eligible
    else:
        new_state.timer_next_at = None
    removed = [key for key in dict.fromkeys(removed) if key not in new_state.partitions]
    return FoldResult(new_state, removed, policy)


@dataclass(frozen=True)
class FireResult:
    """The state after :func:`fire`, the heartbeats due now, and when the connector is due next (epoch ms; None:
    not while nothing changes)."""

    state: HeartbeatState
    due: list[DuePartition]
    next_at: int | None


def fire(state: HeartbeatState, policy: HeartbeatPolicy, now: int) -> FireResult:
    """The heartbeats due at ``now`` (:func:`due_partitions`), marked sent at ``now`` in the new state; in timer mode a
    timer that fired is reset one interval after ``now``, whether or not anything comes back. ``state`` is not
    changed."""
    new_state = _copy(state)
    due = due_partitions(new_state, policy, now)
    for heartbeat in due:
        if heartbeat.key in new_state.partitions:
            new_state.partitions[heartbeat.key].last_heartbeat_at = now
    if _timer_fired(new_state, policy, now):
        new_state.timer_next_at = now + policy.interval_ms
    return FireResult(new_state, due, _next_timeout(new_state, policy))


def step(
    state: HeartbeatState,
    connector_records: Iterable[ConnectorRecord],
    offset_records: Iterable[OffsetRecord],
    defaults: HeartbeatDefaults,
    now: int,
) -> StepResult:
    """:func:`fold` the records, then :func:`fire` at the same ``now``: what the job does for a connector whose records
    arrive while its schedule is due. ``state`` is not changed."""
    folded = fold(state, connector_records, offset_records, defaults, now)
    fired = fire(folded.state, folded.policy, now)
    return StepResult(fired.state, fired.due, folded.removed, folded.policy, fired.next_at)


class HeartbeatSchedule:
    """When the eligible connectors' heartbeats are due: the heartbeats job's timer, on the driver.

    The stateful fold (Spark's state, one group per connector) keeps every connector's state and hands each new one to
    :meth:`update`; the job asks :meth:`due` every second or so, and in between nothing runs (no Spark batch without
    records). The schedule keeps the connectors that have been eligible, and what only it knows: when their
    heartbeats were sent (:func:`fire` marks them) and, in timer mode, when the timer fires next. A new state from the
    fold lacks those (the fold never fires), so :meth:`update` merges: the later ``last_heartbeat_at`` of each
    partition, and the schedule's running timer (the fold clears it while the connector is not eligible, and arms it
    anew after). Heartbeats recorded in ``source_partition_activity`` by earlier runs come in through
    :meth:`recorded`. Not thread-safe: the job serializes the calls.
    """

    def __init__(self, defaults: HeartbeatDefaults) -> None:
        self.defaults = defaults
        self._states: dict[str, tuple[HeartbeatState, HeartbeatPolicy]] = {}
        #: Heartbeats recorded for connectors not in the schedule (yet): applied when they enter it.
        self._recorded: dict[str, dict[bytes, int]] = {}

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, connector: object) -> bool:
        return connector in self._states

    def copy(self) -> HeartbeatSchedule:
        """An independent copy (what to put back when sending the due heartbeats failed)."""
        other = HeartbeatSchedule(self.defaults)
        other._states = {name: (_copy(state), policy) for name, (state, policy) in self._states.items()}
        other._recorded = {name: dict(marks) for name, marks in self._recorded.items()}
        return other

    def update(self, state: HeartbeatState) -> None:
        """The fold's new state of a connector: taken in once it is eligible, kept while it has a config (a paused
        connector keeps its heartbeats' times for when it runs again), forgotten when deleted."""
        policy = heartbeat_policy(state.connector, self.defaults)
        known = self._states.get(state.name)
        if state.connector.config is None or (known is None and not policy.eligible):
            self._states.pop(state.name, None)
            if state.connector.config is None:
                self._recorded.pop(state.name, None)
            return
        merged = _copy(state)
        if known is not None:
            old_state, _ = known
            for key, activity in merged.partitions.items():
                old = old_state.partitions.get(key)
                if old is not None:
                    activity.last_heartbeat_at = _later(activity.last_heartbeat_at, old.last_heartbeat_at)
            if merged.timer_next_at is not None and old_state.timer_next_at is not None:
                merged.timer_next_at = old_state.timer_next_at  # the fold's stays where it was armed
        self._states[state.name] = (merged, policy)
        for key, sent_at in self._recorded.pop(state.name, {}).items():
            self._mark(merged, policy, key, sent_at)

    def recorded(self, connector: str, key: bytes, sent_at: int) -> None:
        """A heartbeat recorded as sent at ``sent_at`` (epoch ms; an earlier run's, from the activity table): not due
        again before one interval has passed (in timer mode, the connector's timer too). Kept for a connector not in
        the schedule until it enters it."""
        known = self._states.get(connector)
        if known is None:
            marks = self._recorded.setdefault(connector, {})
            marks[key] = max(marks.get(key, sent_at), sent_at)
            return
        self._mark(*known, key, sent_at)

    def committed(self, connector: str, key: bytes, offset: Mapping[str, object]) -> None:
        """A heartbeat committed ``offset`` for the partition: the offset the next one starts from, before the fold
        has read that commit back (else the emitter would take our own commit for the task's, and skip)."""
        known = self._states.get(connector)
        activity = known[0].partitions.get(key) if known is not None else None
        if activity is not None:
            activity.offset = dict(offset)

    @staticmethod
    def _mark(state: HeartbeatState, policy: HeartbeatPolicy, key: bytes, sent_at: int) -> None:
        activity = state.partitions.get(key)
        if activity is not None:
            activity.last_heartbeat_at = _later(activity.last_heartbeat_at, sent_at)
        if policy.mode == HeartbeatMode.TIMER and state.timer_next_at is not None:
            state.timer_next_at = max(state.timer_next_at, sent_at + policy.interval_ms)

    def due(self, now: int) -> list[DuePartition]:
        """The heartbeats due at ``now``, in connector and key order; they count as sent at ``now`` from here on."""
        due: list[DuePartition] = []
        for name in sorted(self._states):
            state, policy = self._states[name]
            fired = fire(state, policy, now)
            self._states[name] = (fired.state, policy)
            due.extend(fired.due)
        return due

    def next_due(self) -> int | None:
        """When the next heartbeat is due (epoch ms), None when none is pending."""
        times = [t for state, policy in self._states.values() if (t := _next_timeout(state, policy)) is not None]
        return min(times) if times else None


def _later(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def activity_rows(state: HeartbeatState, policy: HeartbeatPolicy, now: int) -> list[dict[str, object]]:
    """One ``source_partition_activity`` row per partition (timestamps as epoch ms, JSON as text)."""
    config = (
        json.dumps(state.connector.config, sort_keys=True, separators=(",", ":")) if state.connector.config else None
    )
    rows: list[dict[str, object]] = []
    for key, activity in sorted(state.partitions.items()):
        rows.append(
            {
                "connector": state.name,
                "partition": json.dumps(activity.partition, separators=(",", ":")),
                "key": key,
                "offset": json.dumps(activity.offset, separators=(",", ":")),
                "connector_class": state.connector.connector_class,
                "config": config,
                "last_moved_at": activity.last_moved_at,
                "last_heartbeat_at": activity.last_heartbeat_at,
                "idle_ms": idle_ms(activity.last_moved_at, now),
                "heartbeat_interval_ms": policy.interval_ms,
                "heartbeat_topic": policy.records_topic,
                "eligible": policy.eligible,
                "reason": policy.reason,
                "kafka_partition": activity.kafka_partition,
                "kafka_offset": activity.kafka_offset,
            }
        )
    return rows


# ---------------------------------------------------------------------------------------------------------------------
# State row (applyInPandasWithState keeps one string column)
# ---------------------------------------------------------------------------------------------------------------------


def heartbeat_state_to_json(state: HeartbeatState) -> str:
    """The state as ASCII JSON (key bytes in base64)."""
    partitions = [
        {
            "key": base64.b64encode(key).decode("ascii"),
            "partition": activity.partition,
            "offset": activity.offset,
            "last_moved_at": activity.last_moved_at,
            "last_heartbeat_at": activity.last_heartbeat_at,
            "kafka_partition": activity.kafka_partition,
            "kafka_offset": activity.kafka_offset,
        }
        for key, activity in sorted(state.partitions.items())
    ]
    fields = {
        "connector": state_to_json(state.connector),
        "partitions": partitions,
        "offsets_applied": {str(p): o for p, o in sorted(state.offsets_applied.items())},
        "timer_next_at": state.timer_next_at,
    }
    return json.dumps(fields, separators=(",", ":"))


def heartbeat_state_from_json(text: str) -> HeartbeatState:
    """Inverse of :func:`heartbeat_state_to_json`."""
    fields = json.loads(text)
    partitions = {
        base64.b64decode(item["key"]): PartitionActivity(
            item["partition"],
            item["offset"],
            item["last_moved_at"],
            item["last_heartbeat_at"],
            item["kafka_partition"],
            item["kafka_offset"],
        )
        for item in fields["partitions"]
    }
    offsets_applied = {int(p): o for p, o in fields["offsets_applied"].items()}
    return HeartbeatState(
        state_from_json(fields["connector"]), partitions, offsets_applied, fields.get("timer_next_at")
    )


# ---------------------------------------------------------------------------------------------------------------------
# Still due? (right before sending)
# ---------------------------------------------------------------------------------------------------------------------


def still_due(
    due: Iterable[DuePartition], last_heartbeats: Mapping[tuple[str, bytes], int], now: int
) -> tuple[list[DuePartition], list[tuple[DuePartition, int | None]]]:
    """Split heartbeats found due by the record of those sent (``source_partition_activity.last_heartbeat_at`` per
    (connector, key), epoch ms): those still due at ``now`` by :func:`is_due`, and those not (already sent within the
    interval, with when), so a heartbeat an earlier run sent is not sent again."""
    send: list[DuePartition] = []
    sent: list[tuple[DuePartition, int | None]] = []
    for heartbeat in due:
        last = last_heartbeats.get((heartbeat.connector, heartbeat.key))
        if is_due(heartbeat.last_moved_at, last, heartbeat.interval_ms, True, now):
            send.append(heartbeat)
        else:
            sent.append((heartbeat, last))
    return send, sent
