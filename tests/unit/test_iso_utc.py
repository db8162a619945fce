"""Timestamps as the API's answers and the audit rows show them (:func:`connect_state.tables.schemas.iso_utc`): UTC
with ``Z``, to the millisecond (the answers) or the microsecond (an audit row's ``time``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from connect_state.tables.audit_table import iso_time
from connect_state.tables.schemas import iso_utc

AT = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (AT, "2026-11-22T10:00:00.123Z"),
        (AT.astimezone(timezone(timedelta(hours=2))), "2026-11-22T10:00:00.123Z"),
        (AT.replace(tzinfo=None), "2026-11-22T10:00:00.123Z"),  # a naive cell is UTC
        (None, None),
    ],
)
def test_the_answers_show_a_timestamp_in_utc_to_the_millisecond(value, expected):
    assert iso_utc(value) == expected


def test_an_audit_rows_time_is_utc_to_the_microsecond():
    assert iso_time(AT.astimezone(timezone(timedelta(hours=-5)))) == "2026-11-22T10:00:00.123456Z"
