"""The jobs' view of where the topics' logs start: the topics that exist and the partitions' log start offsets.

:class:`TopicPositions` answers, on the admin client (:class:`~connect_state.kafka.admin.KafkaAdmin`, one per
process, shared by the queries: :func:`shared_positions`), what a job needs to tell a data loss (a log start past
its checkpoint) and to reconcile its tables with the topics (which topics exist at all). Errors are typed
(:mod:`connect_state.core.errors`): a failure to answer is never taken for "no such topic".
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from kafka import IsolationLevel, OffsetSpec, TopicPartition
from kafka import errors as kafka_errors

from connect_state.core.errors import describe_error
from connect_state.core.partitions import Partition
from connect_state.core.settings import Settings
from connect_state.kafka.admin import KafkaAdmin
from connect_state.kafka.errors import write_error

CLIENT_ID = "connect-state-jobs-positions"


class TopicPositions:
    """Topics and log start/end offsets, asked with one lazily created admin client (thread-safe)."""

    def __init__(self, settings: Settings, *, timeout_ms: int | None = None, client_id: str = CLIENT_ID) -> None:
        self.bootstrap_servers = settings.bootstrap_servers
        self.admin = KafkaAdmin(
            settings.kafka_client_config(),
            client_id=client_id,
            timeout_ms=settings.api_kafka_write_timeout_ms if timeout_ms is None else timeout_ms,
            name="jobs' Kafka positions client",
            warn_unsupported=False,
        )

    def topics(self) -> set[str]:
        """Every topic of the cluster (internal ones included). Raises a :class:`KafkaWriteError` subclass when the
        cluster does not answer: an unanswered question is never "no such topic"."""
        try:
            return set(self.admin.call(lambda admin: admin.list_topics()))
        except kafka_errors.KafkaError as err:
            reason = describe_error(err)
            raise write_error(err)(f"cannot list the topics of Kafka at {self.bootstrap_servers}: {reason}") from err

    def partitions(self, topics: Iterable[str]) -> list[Partition]:
        """Every partition of those of ``topics`` that exist."""
        names = sorted(set(topics) & self.topics())
        if not names:
            return []
        try:
            described = self.admin.call(lambda admin: admin.describe_topics(names))
        except kafka_errors.KafkaError as err:
            reason = describe_error(err)
            what = ", ".join(names)
            raise write_error(err)(f"cannot describe {what} on Kafka at {self.bootstrap_servers}: {reason}") from err
        return sorted(
            (info["name"], int(p["partition_index"]))
            for info in described
            if info.get("error_code", 0) == 0
            for p in info.get("partitions") or []
        )

    def earliest_offsets(self, partitions: Iterable[Partition]) -> dict[Partition, int]:
        """The log start offset of each of ``partitions`` that exists (a partition of a deleted topic is left out)."""
        return self._offsets(partitions, OffsetSpec.EARLIEST)

    def latest_offsets(self, partitions: Iterable[Partition]) -> dict[Partition, int]:
        """The end offset (``read_committed``: the last stable offset) of each of ``partitions`` that exists."""
        return self._offsets(partitions, OffsetSpec.LATEST)

    def _offsets(self, partitions: Iterable[Partition], spec: OffsetSpec) -> dict[Partition, int]:
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        existing = self.topics()
        by_topic: dict[str, list[int]] = {}
        for topic, partition in wanted:
            if topic in existing:
                by_topic.setdefault(topic, []).append(partition)
        try:
            return self._list_offsets({(t, p) for t, ps in by_topic.items() for p in ps}, spec)
        except kafka_errors.UnknownTopicOrPartitionError:
            pass  # a topic was deleted meanwhile: ask topic by topic, leaving out the ones that are gone
        found: dict[Partition, int] = {}
        for topic, numbers in by_topic.items():
            try:
                found.update(self._list_offsets({(topic, p) for p in numbers}, spec))
            except kafka_errors.UnknownTopicOrPartitionError:
                continue
        return found

    def _list_offsets(self, partitions: set[Partition], spec: OffsetSpec) -> dict[Partition, int]:
        """One ListOffsets round (per leader); UnknownTopicOrPartitionError passes through, other errors are typed."""
        if not partitions:
            return {}
        specs = {TopicPartition(topic, partition): spec for topic, partition in sorted(partitions)}
        try:
            answered = self.admin.call(
                lambda admin: admin.list_partition_offsets(specs, isolation_level=IsolationLevel.READ_COMMITTED)
            )
        except kafka_errors.UnknownTopicOrPartitionError:
            raise
        except kafka_errors.KafkaError as err:
            reason = describe_error(err)
            raise write_error(err)(
                f"cannot read the offsets of {len(specs)} partitions from Kafka at {self.bootstrap_servers}: {reason}"
            ) from err
        return {(tp.topic, tp.partition): int(result.offset) for tp, result in answered.items()}

    def close(self) -> None:
        self.admin.close()


_shared: dict[tuple, TopicPositions] = {}
_shared_lock = threading.Lock()


def shared_positions(settings: Settings) -> TopicPositions:
    """One :class:`TopicPositions` per cluster (client properties) and process, for the queries' writers; it lives
    as long as the process."""
    key = tuple(sorted(settings.kafka_client_config().items()))
    with _shared_lock:
        positions = _shared.get(key)
        if positions is None:
            positions = _shared[key] = TopicPositions(settings)
        return positions
