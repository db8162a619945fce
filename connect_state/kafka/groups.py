"""Consumer-group administration for sink connectors, as Connect's ``Worker`` does it with the Java ``Admin`` client.

A sink connector's offsets are the committed offsets of its consumer group (``connect-<name>`` or
``consumer.override.group.id``). Connect changes them with four admin calls (``Worker``
``modifySinkConnectorOffsets``, ``alterSinkConnectorOffsets``, ``resetSinkConnectorOffsets``:
``connect/runtime/src/main/java/org/apache/kafka/connect/runtime/Worker.java``):

* ``listConsumerGroupOffsets`` -> :meth:`ConsumerGroupAdmin.list_group_offsets`;
* ``alterConsumerGroupOffsets`` -> :meth:`ConsumerGroupAdmin.alter_group_offsets`;
* ``deleteConsumerGroupOffsets`` -> :meth:`ConsumerGroupAdmin.delete_group_offsets`;
* ``deleteConsumerGroups`` -> :meth:`ConsumerGroupAdmin.delete_group` (also used by the KIP-883 cleanup job).

Errors are mapped the way Connect tells them apart:

* the group still has members (sink tasks that have not stopped: "zombie sink tasks"): the broker answers
  ``UNKNOWN_MEMBER_ID`` to an offset commit from outside the group, ``GROUP_SUBSCRIBED_TO_TOPIC`` to an offset delete
  and ``NON_EMPTY_GROUP`` to a group delete -> :class:`GroupNotEmptyError`;
* the group does not exist (``GROUP_ID_NOT_FOUND``): ``delete_group`` returns False (Connect's reset is idempotent),
  ``list_group_offsets`` returns no offsets;
* no answer within ``api.kafka.write.timeout.ms`` (Kafka unreachable included) -> :class:`ConsumerGroupAdminTimeout`;
  any other error -> :class:`ConsumerGroupAdminError`. Retriable errors (coordinator moving or loading) are retried
  until the deadline, as the Java admin client does.

Built on the layer's one admin client (:class:`~connect_state.kafka.admin.KafkaAdmin`): one kafka-python
``KafkaAdminClient`` per instance, created on first use, thread-safe (calls are serialized), closed by
:meth:`ConsumerGroupAdmin.close`. Nothing here knows about Flask or Spark.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kafka import KafkaAdminClient, TopicPartition
from kafka import errors as kafka_errors
from kafka.structs import OffsetAndMetadata

from connect_state.core.errors import (
    ConsumerGroupAdminError,
    ConsumerGroupAdminTimeout,
    GroupNotEmptyError,
    KafkaUnavailableError,
    KafkaWriteError,
    describe_error,
)
from connect_state.core.partitions import Partition
from connect_state.core.settings import Settings
from connect_state.kafka.admin import KafkaAdmin

log = logging.getLogger(__name__)

T = TypeVar("T")

CLIENT_ID = "connect-state-group-admin"
_RETRY_BACKOFF_S = 0.2

# Broker errors meaning "the group has members": only members may commit (UNKNOWN_MEMBER_ID for a commit from the
# admin's empty member id), offsets of subscribed topics cannot be deleted, a group with members cannot be deleted.
_MEMBERS_ERRORS: tuple[type[BaseException], ...] = (
    kafka_errors.UnknownMemberIdError,
    kafka_errors.GroupSubscribedToTopicError,
    kafka_errors.NonEmptyGroupError,
)


def _error_class(value: object) -> type[BaseException] | None:
    """A kafka-python error class from a per-partition result (a class) or a ``delete_groups`` result (a name)."""
    if isinstance(value, type) and issubclass(value, BaseException):
        return None if value is kafka_errors.NoError else value
    if isinstance(value, str):
        if value == "OK":
            return None
        found = getattr(kafka_errors, value, None)
        return found if isinstance(found, type) and issubclass(found, BaseException) else ConsumerGroupAdminError
    return None


class ConsumerGroupAdmin(KafkaAdmin):
    """Lists, alters and deletes consumer-group offsets and groups on the cluster of ``settings``.

    ``timeout_ms`` (default ``api.kafka.write.timeout.ms``) bounds every call, retries included.
    """

    def __init__(self, settings: Settings, *, timeout_ms: int | None = None, client_id: str = CLIENT_ID) -> None:
        super().__init__(
            settings.kafka_client_config(),
            client_id=client_id,
            timeout_ms=settings.api_kafka_write_timeout_ms if timeout_ms is None else timeout_ms,
            name="consumer-group admin client",
        )
        self.settings = settings

    def _call(self, what: str, group_id: str, call: Callable[[KafkaAdminClient], T]) -> T:
        """Run ``call`` on the admin client, retrying retriable errors until the deadline; map the rest."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            try:
                return self.call(call)
            except KafkaUnavailableError as err:
                raise ConsumerGroupAdminTimeout(str(err)) from err
            except KafkaWriteError as err:  # closed, or the client could not be created
                raise ConsumerGroupAdminError(str(err)) from err
            except _MEMBERS_ERRORS as err:
                raise GroupNotEmptyError(
                    f"{what} failed: consumer group {group_id!r} has active members ({describe_error(err)})"
                ) from err
            except kafka_errors.KafkaError as err:
                retriable = getattr(err, "retriable", False)
                if retriable and time.monotonic() + _RETRY_BACKOFF_S < deadline:
                    log.debug("%s for group %s: retrying after %s", what, group_id, describe_error(err))
                    time.sleep(_RETRY_BACKOFF_S)
                    continue
                if isinstance(err, kafka_errors.KafkaTimeoutError) or retriable:
                    reason = describe_error(err)
                    raise ConsumerGroupAdminTimeout(
                        f"{what} for consumer group {group_id!r} timed out after {self.timeout_ms} ms: {reason}"
                    ) from err
                raise ConsumerGroupAdminError(
                    f"{what} for consumer group {group_id!r} failed: {describe_error(err)}"
                ) from err

    @staticmethod
    def _raise_partition_errors(what: str, group_id: str, results: Mapping[Any, object]) -> None:
        """Raise the first per-partition error of an alter/delete-offsets answer (Java's ``all()`` future does)."""
        for tp, value in results.items():
            error = _error_class(value)
            if error is not None:
                raise error(f"{what} for consumer group {group_id!r}, partition {tp.topic}-{tp.partition}")

    # --- the calls ---------------------------------------------------------------------------------------------

    def list_group_offsets(self, group_id: str) -> dict[Partition, int]:
        """``listConsumerGroupOffsets``: the group's committed offsets; none for a group that does not exist."""

        def call(admin: KafkaAdminClient) -> dict[Partition, int]:
            try:
                offsets = admin.list_group_offsets({group_id: None}).get(group_id, {})
            except kafka_errors.GroupIdNotFoundError:
                return {}
            return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items() if meta.offset >= 0}

        return self._call("list offsets", group_id, call)

    def alter_group_offsets(self, group_id: str, offsets: Mapping[Partition, int]) -> None:
        """``alterConsumerGroupOffsets``: commit ``offsets`` for the group (which must have no members)."""
        if not offsets:
            return
        request = {TopicPartition(t, p): OffsetAndMetadata(o, "", None) for (t, p), o in offsets.items()}

        def call(admin: KafkaAdminClient) -> None:
            self._raise_partition_errors("alter offsets", group_id, admin.alter_group_offsets(group_id, request))

        self._call("alter offsets", group_id, call)

    def delete_group_offsets(self, group_id: str, partitions: Iterable[Partition]) -> None:
        """``deleteConsumerGroupOffsets``: forget the group's committed offsets of ``partitions``."""
        request = [TopicPartition(t, p) for t, p in partitions]
        if not request:
            return

        def call(admin: KafkaAdminClient) -> None:
            self._raise_partition_errors("delete offsets", group_id, admin.delete_group_offsets(group_id, request))

        self._call("delete offsets", group_id, call)

    def group_members(self, group_id: str) -> int:
        """``describeConsumerGroups`` for one group: how many members it has (0 for a group that does not exist)."""

        def call(admin: KafkaAdminClient) -> int:
            described = admin.describe_groups([group_id]).get(group_id) or {}
            return len(described.get("members") or [])

        return self._call("describe group", group_id, call)

    def delete_group(self, group_id: str) -> bool:
        """``deleteConsumerGroups`` for one group: True when deleted, False when it did not exist.

        Raises :class:`GroupNotEmptyError` when the group has members, :class:`ConsumerGroupAdminTimeout` or
        :class:`ConsumerGroupAdminError` otherwise.
        """

        def call(admin: KafkaAdminClient) -> bool:
            result = admin.delete_groups([group_id]).get(group_id, "OK")
            error = _error_class(result)
            if error is None:
                return True
            if error is kafka_errors.GroupIdNotFoundError:
                return False
            raise error(f"delete group {group_id!r}: {result}")

        return self._call("delete group", group_id, call)
