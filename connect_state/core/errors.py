"""Exceptions raised by connect-state. Each names what went wrong in words an operator can act on."""

from __future__ import annotations


def describe_error(err: BaseException) -> str:
    """An exception as ``Type: message``, for logs and ``error`` columns (kafka-python's messages alone are often just
    the class name; one that already starts with it is kept as is)."""
    text = str(err)
    name = type(err).__name__
    return text if text.startswith(name) else f"{name}: {text}" if text else name


class ConnectStateError(Exception):
    """Base class of every connect-state error."""


class ConfigError(ConnectStateError):
    """A setting is missing or has a value of the wrong kind."""


class RecordFormatError(ConnectStateError):
    """A record of an internal topic cannot be parsed the way a Connect worker parses it.

    ``reason`` is the text stored in ``rejected_records``; it follows Connect's own log message where Connect has one.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LocalStackError(ConnectStateError):
    """The embedded broker or Connect worker could not be set up, started or reached."""


class KafkaWriteError(ConnectStateError):
    """A write to Kafka failed, or the metadata, topic or connection it needs (:mod:`connect_state.kafka`).

    The subclasses say why, for callers that act on the reason (never on the message text):
    :class:`KafkaWriteTimeout` (not acknowledged in time), :class:`KafkaUnavailableError` (no broker reached in time)
    and :class:`TopicNotFoundError` (the topic does not exist).
    """


class KafkaWriteTimeout(KafkaWriteError):
    """Kafka did not acknowledge a write, or answer a request the write needs, in time.

    A timed-out record may still be delivered later: like any Kafka client, we cannot take back a record in flight.
    """


class KafkaUnavailableError(KafkaWriteTimeout):
    """No broker of the cluster could be reached in time (the client could not bootstrap).

    A timeout too: what Connect reports when its producer cannot reach the cluster.
    """


class ZombieFencingError(KafkaWriteError):
    """The transactional producers of a connector's tasks could not be fenced (KIP-618 zombie fencing): the broker
    refused or did not answer the ``InitProducerId`` for one of their transactional ids."""


class TopicNotFoundError(KafkaWriteError):
    """The topic does not exist on the cluster (the Kafka layer never auto-creates a topic)."""


class ConsumerGroupAdminError(ConnectStateError):
    """An admin call on a consumer group failed (the message names the call, the group and the broker's error)."""


class ConsumerGroupAdminTimeout(ConsumerGroupAdminError):
    """An admin call on a consumer group got no answer in time (Kafka unreachable included)."""


class GroupNotEmptyError(ConsumerGroupAdminError):
    """The consumer group still has members (for a sink connector: tasks that have not stopped yet)."""


class TableNotFoundError(ConnectStateError):
    """A Delta table the API reads has not been created yet (its job has never run)."""


class DeltaWriteError(ConnectStateError):
    """A Delta write gave up: every attempt lost to a concurrent writer's commit, or a pass of writes had some fail
    (the message names them)."""


class ConnectorOffsetsError(ConnectStateError):
    """A connector's ``alterOffsets`` (KIP-875) refused an offsets request (:mod:`connect_state.connect.alter_offsets`).

    The subclass says how Connect answers, never the message text: :class:`AlterOffsetsUnsupported` (the connector's
    ``UnsupportedOperationException``: Connect's 500 message), :class:`AlterOffsetsRejected` (a ``ConnectException``:
    500 with the connector's message) and :class:`AlterOffsetsBadRequest` (a ``BadRequestException``: 400).
    """


class AlterOffsetsUnsupported(ConnectorOffsetsError):
    """The connector cannot have its offsets altered or reset at all (``UnsupportedOperationException``)."""


class AlterOffsetsRejected(ConnectorOffsetsError):
    """The connector refused these offsets (``ConnectException``): Connect answers 500 with ``message``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AlterOffsetsBadRequest(AlterOffsetsRejected):
    """The connector refused these offsets as a bad request (``BadRequestException``): Connect answers 400."""
