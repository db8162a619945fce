"""The herder's refusals and failures, one class per answer Connect gives (the API maps each to its status code).

Named after Connect's REST exceptions (``org.apache.kafka.connect.runtime.rest.errors``): the herder raises them, the
API answers ``{"error_code": <status>, "message": <message>}`` (:mod:`connect_state.api.errors`). Which class is raised
decides the status; ``message`` is the answer's message, word for word. What the herder lets through keeps its own
mapping there (:class:`~connect_state.security.guards.GuardRefusal` 400,
:class:`~connect_state.core.errors.KafkaWriteError` 500 with its message).
"""

from __future__ import annotations

from connect_state.core.errors import ConnectStateError

__all__ = [
    "BadRequestError",
    "ConflictError",
    "ConnectError",
    "ForbiddenError",
    "HerderError",
    "KafkaUnreachableError",
    "NotEstablishedError",
    "NotFoundError",
    "PluginDeadlineError",
    "UnsupportedError",
    "for_status",
]


class HerderError(ConnectStateError):
    """A write the herder refused or could not complete; ``message`` is what the answer says."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFoundError(HerderError):
    """``NotFoundException`` (404): the connector has no config (or no status, where the answer needs one)."""


class BadRequestError(HerderError):
    """``BadRequestException`` (400): the connector's state or the request forbids the write (not STOPPED, bad
    offsets)."""


class ForbiddenError(HerderError):
    """403: a write the worker's settings disable (``topic.tracking.enable``, ``topic.tracking.allow.reset``)."""


class ConflictError(HerderError):
    """``AlreadyExistsException`` (409): a connector of that name exists (a deleted connector brought back)."""


class NotEstablishedError(HerderError):
    """409 (ours): what Connect's leader would know before it acts (the config topic, the active topics, the source
    partitions, read to their end) could not be established in time; nothing was written."""


class KafkaUnreachableError(NotEstablishedError):
    """503 (ours): as :class:`NotEstablishedError`, or a write not sent, because no Kafka broker could be reached."""


class ConnectError(HerderError):
    """``ConnectException`` (500): the write failed, or its outcome is unknown (the message says which)."""


class PluginDeadlineError(ConnectError):
    """500 (Connect's status for a failed offsets change): a plug-in called in the request (an ``alterOffsets`` rule)
    did not return by its deadline (:class:`~connect_state.core.deadlines.PluginTimeout`; the message names the
    plug-in, the deadline and its setting); nothing was written."""


class UnsupportedError(HerderError):
    """501 (ours): a write connect-state cannot make through Kafka (the message says what to do instead)."""


def for_status(status: int, message: str) -> HerderError:
    """The error of a lower layer's refusal that carries Connect's status (400 or 500): ``BadOffsetsRequest``,
    ``ModifyOffsetsRefused``."""
    return BadRequestError(message) if status == 400 else ConnectError(message)
