"""retry_on_conflict: Delta write conflicts between jobs sharing a table are retried, other errors are not."""

from __future__ import annotations

import pytest

from connect_state.spark import delta_io


class ConcurrentAppendException(Exception):
    """Named like the Delta exception PySpark converts from the JVM."""


class Flaky:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delta_io.time, "sleep", lambda _s: None)


def test_conflicts_are_retried_until_the_write_succeeds() -> None:
    action = Flaky([ConcurrentAppendException("Files were added"), RuntimeError("ConcurrentDeleteReadException: x")])
    delta_io.retry_on_conflict(action, "rejected_records")
    assert action.calls == 3


def test_other_errors_are_not_retried() -> None:
    action = Flaky([ValueError("schema mismatch")])
    with pytest.raises(ValueError, match="schema mismatch"):
        delta_io.retry_on_conflict(action, "rejected_records")
    assert action.calls == 1


def test_a_conflict_that_persists_is_raised_after_the_last_attempt() -> None:
    action = Flaky([ConcurrentAppendException(str(n)) for n in range(5)])
    with pytest.raises(ConcurrentAppendException):
        delta_io.retry_on_conflict(action, "rejected_records", attempts=3)
    assert action.calls == 3
