"""Query-string arguments shared by the endpoints: a time, a page size and a flag, with Connect-style 400s."""

from __future__ import annotations

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
