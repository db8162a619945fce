"""Exactly-once source connectors (KIP-618) around an offsets change (KIP-875): zombie fencing and the transaction.

With ``exactly.once.source.support=enabled`` on the workers, Connect (Kafka 4.x) alters or resets a source
connector's offsets like this (``DistributedHerder.modifyConnectorOffsets``, ``doFenceZombieSourceTasks``,
``Worker.fenceZombies``, ``Worker.modifySourceConnectorOffsets``:
``connect/runtime/src/main/java/org/apache/kafka/connect/runtime/distributed/DistributedHerder.java``,
``connect/runtime/src/main/java/org/apache/kafka/connect/runtime/Worker.java``):

1. the usual checks (the connector exists, is STOPPED, has no committed tasks);
2. a round of zombie fencing (:func:`zombie_fencing_ids`): when task configs were committed after the connector's last
   ``tasks-fencing-<name>`` record (``pendingFencing``) and that record exists, ``Admin.fenceProducers`` on the
   transactional ids of that many tasks (``<group.id>-<connector>-<task>``). No record: no producer of the connector
   ever ran transactionally, nothing to fence. Any failure answers 500
   (:func:`~connect_state.connect.rest.zombie_fencing_failed_message`);
3. the checks again (the fencing ran asynchronously);
4. the offsets written through a producer with task 0's transactional id (:func:`offsets_transactional_id`):
   ``initTransactions`` (which fences task 0's producer once more), ``beginTransaction``, the writes to the
   connector's primary offsets store, ``commitTransaction``.

connect-state does the same, with two differences (README, KIP-875): kafka-python has no ``fenceProducers``, so a
producer is fenced by what that call sends, an ``InitProducerId`` for its transactional id (a short-lived
transactional producer's ``init_transactions``), which bumps the id's epoch and aborts its open transaction; and
connect-state does not write the ``tasks-fencing-<name>`` record Connect's leader writes after fencing (only the
leader writes the config topic transactionally): the leader fences the same ids again before it starts the
connector's tasks, which is harmless.

Pure: no Kafka here; :class:`~connect_state.kafka.InternalTopicWriter` fences and runs the transaction.
"""

from __future__ import annotations

from typing import Protocol

__all__ = [
    "FencingState",
    "offsets_transactional_id",
    "task_transactional_id",
    "zombie_fencing_ids",
]


class FencingState(Protocol):
    """What fencing needs of a connector's config-topic state (``ClusterConfigState``'s ``taskCount``,
    ``taskCountRecord`` and ``pendingFencing``); the config topic's fold
    (:class:`~connect_state.folds.config_snapshot.ConnectorConfigView`) has it."""

    @property
    def name(self) -> str: ...

    @property
    def task_count(self) -> int: ...

    @property
    def task_count_record(self) -> int | None: ...

    @property
    def pending_fencing(self) -> bool: ...


def task_transactional_id(group_id: str, connector: str, task: int) -> str:
    """``Worker.taskTransactionalId``: ``<group.id>-<connector>-<task>``."""
    return f"{group_id}-{connector}-{task}"


def offsets_transactional_id(group_id: str, connector: str) -> str:
    """The transactional id of an offsets change (``Worker.modifySourceConnectorOffsets`` builds its producer with
    ``exactlyOnceSourceTaskProducerConfigs`` for task 0)."""
    return task_transactional_id(group_id, connector, 0)


def zombie_fencing_ids(group_id: str, view: FencingState) -> list[str]:
    """The transactional ids ``doFenceZombieSourceTasks`` fences for a stopped connector (none when no fencing is
    pending or no task-count record exists; Connect also skips a 1-task to 1-task generation change, which cannot
    happen to a stopped connector, whose task count is 0)."""
    record = view.task_count_record
    if not view.pending_fencing or record is None or (record == 1 and view.task_count == 1):
        return []
    return [task_transactional_id(group_id, view.name, task) for task in range(record)]
