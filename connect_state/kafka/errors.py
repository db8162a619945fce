"""kafka-python's exceptions as the Kafka layer's typed errors (:mod:`connect_state.core.errors`).

The layer raises :class:`~connect_state.core.errors.KafkaWriteError` and its subclasses, never kafka-python's
exceptions: :class:`~connect_state.core.errors.KafkaWriteTimeout` (not acknowledged in time),
:class:`~connect_state.core.errors.KafkaUnavailableError` (no broker reached in time) and
:class:`~connect_state.core.errors.TopicNotFoundError` (the topic does not exist). The consumer-group admin raises
:class:`~connect_state.core.errors.ConsumerGroupAdminError` and its subclasses.
"""

from __future__ import annotations

import socket

from kafka import errors as kafka_errors

from connect_state.core.errors import KafkaUnavailableError, KafkaWriteError, KafkaWriteTimeout, describe_error

# kafka-python's "no answer in time": the client's own timeouts, and a broker's REQUEST_TIMED_OUT.
_TIMEOUTS: tuple[type[BaseException], ...] = (kafka_errors.KafkaTimeoutError, kafka_errors.RequestTimedOutError)

# What a kafka-python consumer call (offset lookups, polls) can raise: its own errors, and a KeyError that
# kafka-python 3.0.x raises when the broker goes away mid-call. Catch these, then type them with client_error.
CLIENT_CALL_ERRORS: tuple[type[BaseException], ...] = (kafka_errors.KafkaError, KeyError)


def client_error(err: BaseException) -> BaseException:
    """One of :data:`CLIENT_CALL_ERRORS` as kafka-python's own error: kafka-python 3.0.x's KeyError (the broker
    went away mid-call, or the call's timeout ran out partway) means no answer in time, and says so."""
    if isinstance(err, kafka_errors.KafkaError):
        return err
    return kafka_errors.KafkaTimeoutError(f"no answer in time (kafka-python's {describe_error(err)})")


def timed_out(err: BaseException) -> bool:
    """Whether a kafka-python exception means "no answer in time"."""
    return isinstance(err, _TIMEOUTS)


def write_error(err: BaseException) -> type[KafkaWriteError]:
    """The typed error for a kafka-python exception: :class:`KafkaWriteTimeout` for a timeout, else the base class."""
    return KafkaWriteTimeout if timed_out(err) else KafkaWriteError


def any_listening(bootstrap_servers: str, timeout_s: float = 1.0) -> bool:
    """Whether any of ``bootstrap_servers`` (``host:port,...``, optionally ``PROTOCOL://``) accepts a TCP connection.

    A probe after a read timed out on a client that had bootstrapped: no listener at all means Kafka is away (a
    stopped or unreachable cluster), not slow."""
    for server in filter(None, (part.strip() for part in bootstrap_servers.split(","))):
        host, _, port = server.rpartition("://")[2].rpartition(":")
        try:
            with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=timeout_s):
                return True
        except (OSError, ValueError):
            continue
    return False


def read_error(err: BaseException, bootstrap_servers: str) -> type[KafkaWriteError]:
    """The typed error of a failed read (nothing was written): :class:`KafkaUnavailableError` when it timed out and no
    bootstrap server accepts a connection any more, else :func:`write_error`'s."""
    if timed_out(err) and not any_listening(bootstrap_servers):
        return KafkaUnavailableError
    return write_error(err)


def unreachable(err: BaseException, bootstrap_servers: str) -> KafkaWriteError:
    """The error for a client that could not be created: :class:`KafkaUnavailableError` when it could not bootstrap
    in time (kafka-python's ``KafkaTimeoutError``), :class:`KafkaWriteError` otherwise."""
    error = KafkaUnavailableError if timed_out(err) else KafkaWriteError
    return error(f"cannot reach Kafka at {bootstrap_servers}: {describe_error(err)}")
