"""Connect's ``ClusterConfigState`` as of a config-topic position: what a leader knows once it has read that far.

Pure Python. :class:`ConfigSnapshot` applies raw config-topic records, in offset order, with the connector-state fold
(:func:`connect_state.folds.connector_states.apply_record`, config records only: the same rules as the
``connectors`` table) and answers, per connector, what ``DistributedHerder`` checks before it acts: whether
the connector exists (``configState.contains``), its target state (``configState.targetState``) and its committed task
count (``configState.taskCount``). The API reads the config topic to its end into one snapshot per process
(:class:`connect_state.kafka.ConfigTopicTail`) before every write, as the leader does
(``connect/runtime/src/main/java/org/apache/kafka/connect/runtime/distributed/DistributedHerder.java``).

Records are parsed with :func:`connect_state.formats.config.parse_config_record`; a record Connect ignores is ignored,
except a ``commit-<name>`` record Connect cannot read, which still clears a config-less connector's buffered task
configs (as in the connector-state job). Beyond Connect's state the snapshot remembers, per connector, the offset of
the ``target-state-<name>`` record in effect, so a writer can tell its own record from a later one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connect_state.core.errors import RecordFormatError
from connect_state.core.vocabulary import TargetState
from connect_state.folds.connector_states import (
    ConnectorRecord,
    ConnectorState,
    apply_record,
    connector_of,
    connector_row,
)
from connect_state.formats.config import (
    TargetStateKey,
    TaskCommitKey,
    TaskCount,
    TaskCountKey,
    parse_config_key,
    parse_config_record,
)

__all__ = ["ConfigSnapshot", "ConnectorConfigView", "config_connector_record"]


def config_connector_record(
    key: bytes | None, value: bytes | None, kafka_partition: int, kafka_offset: int, kafka_timestamp: int
) -> ConnectorRecord | None:
    """The connector-state fold's record for one raw config-topic record, or None when it changes no connector (a
    record Connect ignores, a session key, a logger level)."""
    try:
        parsed = parse_config_record(key, value)
    except RecordFormatError:
        try:
            commit = parse_config_key(key)
        except RecordFormatError:
            return None
        if isinstance(commit, TaskCommitKey):
            return ConnectorRecord.unreadable_commit(commit.connector, kafka_partition, kafka_offset, kafka_timestamp)
        return None
    if connector_of(parsed.key) is None:
        return None
    try:
        return ConnectorRecord.from_config(parsed, kafka_partition, kafka_offset, kafka_timestamp)
    except ValueError:  # a value the fold does not take for its key: it changes no connector (never a poison pill)
        return None


@dataclass(frozen=True)
class ConnectorConfigView:
    """One connector as the config topic has it at the snapshot's position (an immutable copy).

    ``exists`` is ``ClusterConfigState.contains`` (a config is in effect); ``target_state`` the effective target state
    (``ClusterConfigState.targetState``: STARTED for a config without a target-state record; None when neither is
    left); ``task_count`` the committed task count (0 before any commit and after a deletion); ``target_state_offset``
    the offset of the last ``target-state-<name>`` record applied (value or tombstone), None when there was none;
    ``task_count_record`` the last ``tasks-fencing-<name>`` record's task count (``ClusterConfigState.taskCountRecord``,
    KIP-618: how many task producers the last fencing round left to fence; never cleared, not even by a deletion) and
    ``pending_fencing`` whether task configs were committed after it (``ClusterConfigState.pendingFencing``); ``row``
    the ``connectors``-table shape of the same state (:func:`~connect_state.folds.connector_states.
    connector_row`: ``type``, ``connector_class``, ``config`` as JSON...), without statuses.
    """

    name: str
    exists: bool
    target_state: TargetState | None
    task_count: int
    target_state_offset: int | None
    row: Mapping[str, Any] = field(hash=False, compare=False)
    task_count_record: int | None = None
    pending_fencing: bool = False

    @property
    def target_state_left(self) -> bool:
        """A deleted (or never configured) connector whose target state is still in Connect's
        ``connectorTargetStates``: its ``target-state-<name>`` tombstone was never written (a half-finished deletion,
        a target state written after the deletion). A connector created again under the name would start in it."""
        return not self.exists and self.target_state is not None


class ConfigSnapshot:
    """Every connector's config-topic state, built record by record (not thread-safe: the caller serialises).

    ``positions`` maps each config-topic partition to the next offset to apply (records below it are applied).
    """

    def __init__(self) -> None:
        self._states: dict[str, ConnectorState] = {}
        self._target_state_offsets: dict[str, int] = {}
        self._task_count_records: dict[str, int] = {}
        self._pending_fencing: set[str] = set()
        self.positions: dict[int, int] = {}

    def apply(
        self, key: bytes | None, value: bytes | None, kafka_partition: int, kafka_offset: int, kafka_timestamp: int
    ) -> None:
        """Apply one raw config-topic record (records must come in offset order per partition; a replay is skipped)."""
        self.positions[kafka_partition] = max(self.positions.get(kafka_partition, 0), kafka_offset + 1)
        record = config_connector_record(key, value, kafka_partition, kafka_offset, kafka_timestamp)
        if record is None:
            return
        state = self._states.setdefault(record.connector, ConnectorState(record.connector))
        before = state.config_applied.get(kafka_partition)
        had_config = state.config is not None
        apply_record(state, record)
        if before is not None and kafka_offset <= before:
            return  # a replay
        if isinstance(record.key, TargetStateKey):
            self._target_state_offsets[record.connector] = kafka_offset
        elif isinstance(record.key, TaskCommitKey) and record.value is not None and had_config:
            # processTasksCommitRecord: task configs after the last task-count record need a round of fencing
            self._pending_fencing.add(record.connector)
        elif isinstance(record.key, TaskCountKey) and isinstance(record.value, TaskCount):
            # processTaskCountRecord
            self._task_count_records[record.connector] = record.value.task_count
            self._pending_fencing.discard(record.connector)

    def connector(self, name: str) -> ConnectorConfigView:
        """The connector's view (an unknown name: not existing, no target state)."""
        state = self._states.get(name)
        if state is None:
            state = ConnectorState(name)
        exists = state.config is not None
        return ConnectorConfigView(
            name=name,
            exists=exists,
            target_state=state.effective_target_state,
            task_count=state.committed_task_count,
            target_state_offset=self._target_state_offsets.get(name),
            row=connector_row(state),
            task_count_record=self._task_count_records.get(name),
            pending_fencing=name in self._pending_fencing,
        )

    def connectors(self) -> list[str]:
        """The names ``ClusterConfigState.connectors()`` lists (a config in effect), sorted."""
        return sorted(name for name, state in self._states.items() if state.config is not None)
