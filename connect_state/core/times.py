"""The tables' and the API's times without Arrow: epoch milliseconds, UTC datetimes, and the API's ISO-8601 text.
Home of the conversions; :mod:`connect_state.tables.schemas` imports them for the tables' users, and the herder (which
imports no Arrow) uses them directly."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import overload

__all__ = ["epoch_ms", "iso_utc", "now_ms", "timestamp"]


def now_ms() -> int:
    """The wall clock in epoch milliseconds: the tables' times."""
    return int(time.time() * 1000)


@overload
def epoch_ms(value: datetime | int) -> int: ...
@overload
def epoch_ms(value: object) -> int | None: ...
def epoch_ms(value: object) -> int | None:
    """A table timestamp (a datetime, naive ones taken as UTC; or epoch ms already) as epoch milliseconds; None as
    None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return int(aware.timestamp() * 1000)
    return int(value)  # type: ignore[call-overload]


@overload
def timestamp(ms: int) -> datetime: ...
@overload
def timestamp(ms: int | None) -> datetime | None: ...
def timestamp(ms: int | None) -> datetime | None:
    """Epoch milliseconds as a :data:`TIMESTAMP` column's value (UTC); None as None."""
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


@overload
def iso_utc(value: datetime | int, timespec: str = "milliseconds") -> str: ...
@overload
def iso_utc(value: datetime | int | None, timespec: str = "milliseconds") -> str | None: ...
def iso_utc(value: datetime | int | None, timespec: str = "milliseconds") -> str | None:
    """A timestamp (naive: UTC; an int: epoch milliseconds) as the API shows it: UTC ISO-8601 to ``timespec``, with
    ``Z``; None as None."""
    if value is None:
        return None
    if isinstance(value, int):
        value = timestamp(value)
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
