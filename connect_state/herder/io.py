"""The herder's I/O: what it reads and writes, as protocols (the API implements them on its app's resources:
:mod:`connect_state.api.herder_io`; the unit tests on fakes).

* :class:`HerderIO`: the config topic read to its end (a connector as Connect's leader knows it), the ``connectors``
  table's row (the statuses a restart plan shows), the connector's active topics and source partitions read to the
  end of their topics, what the tables say about a consumer group, and the two clients below;
* :class:`RecordWriter`: the Kafka writer (:class:`connect_state.kafka.InternalTopicWriter`): acknowledged sends,
  transactions, zombie fencing;
* :class:`GroupAdmin`: the consumer-group admin (:class:`connect_state.kafka.ConsumerGroupAdmin`).

A read that cannot be established in time raises :class:`~connect_state.herder.errors.NotEstablishedError` (or
:class:`~connect_state.herder.errors.KafkaUnreachableError`); nothing is written then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from connect_state.connect.offset_stores import ConnectorOffsetStores
from connect_state.core.partitions import Partition
from connect_state.folds.config_snapshot import ConnectorConfigView

#: A consumer group's partition, ``(topic, partition)``.
GroupPartition = Partition
Row = Mapping[str, Any]

__all__ = ["GroupAdmin", "GroupPartition", "HerderIO", "OpenTransaction", "RecordWriter"]


class OpenTransaction(Protocol):
    """A begun transaction (see :class:`connect_state.kafka.Transaction`): commit writes and commits; close aborts
    what was not committed."""

    def commit(
        self, topic: str, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int | None = None
    ) -> Any: ...

    def close(self) -> None: ...


class RecordWriter(Protocol):
    """What the herder needs from a Kafka writer (see :class:`connect_state.kafka.InternalTopicWriter`)."""

    def send(self, topic: str, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int | None = None) -> Any: ...

    def begin_transaction(self, transactional_id: str, timeout_ms: int | None = None) -> OpenTransaction: ...

    def fence_producers(self, transactional_ids: Sequence[str], timeout_ms: int | None = None) -> None: ...

    def close(self) -> None: ...


class GroupAdmin(Protocol):
    """What the herder needs from a consumer-group admin (see :class:`connect_state.kafka.ConsumerGroupAdmin`)."""

    def list_group_offsets(self, group_id: str) -> dict[GroupPartition, int]: ...

    def alter_group_offsets(self, group_id: str, offsets: Mapping[GroupPartition, int]) -> None: ...

    def delete_group_offsets(self, group_id: str, partitions: Iterable[GroupPartition]) -> None: ...

    def delete_group(self, group_id: str) -> bool: ...

    def group_members(self, group_id: str) -> int: ...

    def close(self) -> None: ...


class HerderIO(Protocol):
    """Every read and write of the herder."""

    def connector(self, name: str) -> ConnectorConfigView:
        """The connector as the config topic has it, read to its end offset now."""
        ...

    def connector_row(self, name: str) -> Row | None:
        """The connector's ``connectors`` row (statuses included), None when there is none."""
        ...

    def active_topics(self, name: str) -> list[str]:
        """The connector's active topics as of the status topic's end offsets now, sorted."""
        ...

    def source_rows(self, name: str, stores: ConnectorOffsetStores) -> list[dict[str, Any]]:
        """The connector's ``source_offsets`` rows in ``stores`` as of those topics' end offsets now."""
        ...

    def committed_topics(self, group: str) -> set[str]:
        """The topics ``group`` has committed offsets for (``sink_offsets``; none without the table)."""
        ...

    def connector_names(self) -> set[str]:
        """The names of the connectors that are not deleted (``connectors``; none without the table)."""
        ...

    def writer(self) -> RecordWriter: ...

    def admin(self) -> GroupAdmin: ...
