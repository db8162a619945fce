"""Query-string arguments shared by the endpoints: a time, a page size, a flag and a vocabulary's value, with
Connect-style 400s."""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from flask import request

from connect_state.api.errors import ConnectRestException
from connect_state.tables.history import parse_time


def time_arg(name: str) -> int | None:
    """The query argument ``name`` as epoch milliseconds (epoch ms or ISO-8601); None when absent or empty."""
    text = request.args.get(name)
    if text is None or text == "":
        return None
    try:
        return parse_time(text)
    except (ValueError, OverflowError, OSError):
        raise ConnectRestException(
            400, f"Invalid {name} {text!r}: expected epoch milliseconds or an ISO-8601 time"
        ) from None


def limit_arg(default: int, maximum: int) -> int:
    """The ``limit`` query argument: ``default`` when absent, else an integer from 1 to ``maximum``."""
    raw = request.args.get("limit")
    if raw is None:
        return default
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= maximum:
        raise ConnectRestException(400, f"limit must be an integer between 1 and {maximum}, got {raw!r}")
    return limit


def flag_arg(name: str) -> bool:
    """The query argument ``name`` as ``true`` or ``false`` (any case; absent or empty: false); anything else a 400
    (a write is never guessed)."""
    text = request.args.get(name)
    if text is None or text == "" or text.lower() == "false":
        return False
    if text.lower() == "true":
        return True
    raise ConnectRestException(400, f"Invalid {name} {text!r}: expected true or false")


_E = TypeVar("_E", bound=StrEnum)


def enum_arg(name: str, vocabulary: type[_E], what: str) -> _E | None:
    """The query argument ``name`` as a member of ``vocabulary`` (its value in any case); None when absent; a 400
    naming the ``what``s otherwise."""
    text = request.args.get(name)
    if text is None:
        return None
    wanted = text.strip().lower()
    for member in vocabulary:
        if member.value.lower() == wanted:
            return member
    allowed = ", ".join(member.value for member in vocabulary)
    raise ConnectRestException(400, f"{name}: unknown {what} {text!r}; the {what}s are {allowed}")
