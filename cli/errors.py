"""Exit codes scripts can rely on, and the typed errors that carry them.

Every error is a :class:`click.ClickException`: click prints its one line on stderr (``Error: <message>``) and exits
with its code. Nothing is told apart by message text: an API answer's status picks the class
(:func:`error_for_status`).
"""

from __future__ import annotations

from enum import IntEnum

import click


class ExitCode(IntEnum):
    """``connect-state``'s exit codes (README "Command line")."""

    OK = 0
    #: The API answered an error of its own (5xx: a table no job created yet, Kafka unreachable from it, a write
    #: whose outcome is unknown) or an answer the command cannot read.
    FAILED = 1
    #: Bad arguments or options (click's own code), a bad regular expression, an unknown context, a contexts file or
    #: a ``${env:NAME}`` reference that cannot be used, an offsets file that is not JSON.
    USAGE = 2
    #: 404: no such connector (or route); a regular expression that matches no connector.
    NOT_FOUND = 3
    #: Any other 4xx: 400 (e.g. offsets of a connector that is not STOPPED), 401, 403 (a role missing), 409 (the
    #: API could not read Connect's state in time: nothing written, retry).
    REFUSED = 4
    #: A bulk action on several connectors where at least one failed (each failure is listed).
    PARTIAL = 5
    #: No answer: connection refused, unknown host, TLS handshake failed, or no answer within ``--timeout``.
    UNREACHABLE = 6
    #: The confirmation was declined (or could not be asked: no terminal, and no ``--yes``): nothing done.
    ABORTED = 7


class CliError(click.ClickException):
    """An error of the command line, with the exit code of its class."""

    exit_code = ExitCode.FAILED


class UsageProblem(CliError):
    exit_code = ExitCode.USAGE


class Unreachable(CliError):
    exit_code = ExitCode.UNREACHABLE


class Aborted(CliError):
    exit_code = ExitCode.ABORTED


class PartialFailure(CliError):
    exit_code = ExitCode.PARTIAL


class NoMatch(CliError):
    """A regular expression that matches no connector."""

    exit_code = ExitCode.NOT_FOUND


class ApiError(CliError):
    """The API answered ``status`` (4xx or 5xx); ``message`` is its error body's (Connect's ``ErrorMessage``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class NotFound(ApiError):
    exit_code = ExitCode.NOT_FOUND


class Refused(ApiError):
    exit_code = ExitCode.REFUSED


class ApiFailure(ApiError):
    exit_code = ExitCode.FAILED


def error_for_status(status: int, message: str) -> ApiError:
    """The error of an API answer's status: 404 not found, another 4xx refused, else a failure."""
    if status == 404:
        return NotFound(status, message)
    if 400 <= status < 500:
        return Refused(status, message)
    return ApiFailure(status, message)
