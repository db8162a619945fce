"""Exceptions raised by connect-state. Each names what went wrong in words an operator can act on."""

from __future__ import annotations


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
    """A write to an internal topic was not acknowledged in time."""


class TableNotFoundError(ConnectStateError):
    """A Delta table the API reads has not been created yet (its job has never run)."""
