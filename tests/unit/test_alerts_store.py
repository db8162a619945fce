"""The conditions the alerts job reads from the other jobs' rows (connect_state/alerts/store.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from connect_state.alerts.engine import Condition
from connect_state.alerts.rules import ConditionKind
from connect_state.alerts.store import (
    cleanup_conditions,
    data_loss_conditions,
    heartbeat_conditions,
    verdict_conditions,
)


def at(second: int) -> datetime:
    return datetime(2026, 1, 1, 0, 0, second, tzinfo=UTC)


MS = int(at(0).timestamp() * 1000)


def beat(partition: str, second: int, outcome: str, error: str | None = None) -> dict:
    return {"connector": "src", "partition": partition, "source_key": partition.encode(), "outcome": outcome,
            "error": error, "emitted_at": at(second), "record_index": 0}  # fmt: skip


def test_a_partition_whose_latest_heartbeats_fail_since_the_first_of_them() -> None:
    rows = [
        beat("p0", 1, "produced"),
        beat("p0", 2, "failed", "provider broke"),
        beat("p0", 3, "timed_out", "no answer in 10 s"),
        beat("p1", 1, "failed", "x"),
        beat("p1", 2, "produced"),  # recovered: no condition
    ]
    assert heartbeat_conditions(rows) == [
        Condition(
            ConditionKind.HEARTBEAT_FAILED,
            "src",
            "p0",
            MS + 2000,
            "no answer in 10 s",
            values={"outcome": "timed_out", "failures": "2"},
        )
    ]


def test_failed_cleanup_steps_only() -> None:
    rows = [
        {"connector": "c", "deletion_offset": 7, "step": "hook:t", "status": "failed", "error": "boom",
         "detail": None, "deleted_at": at(1), "updated_at": at(4)},
        {"connector": "c", "deletion_offset": 7, "step": "offsets", "status": "succeeded", "error": None,
         "detail": "done", "deleted_at": at(1), "updated_at": at(2)},
    ]  # fmt: skip
    assert cleanup_conditions(rows) == [
        Condition(
            ConditionKind.CLEANUP_FAILED,
            "c",
            "hook:t of the deletion at offset 7",
            MS + 4000,
            "boom",
            {"step": "hook:t", "deletion_offset": "7"},
        )
    ]


def test_verdicts_and_losses() -> None:
    (verdict,) = verdict_conditions([{"connector": "o", "verdict": "stalled", "since": at(5), "evidence": "{}"}])
    assert (verdict.connector, verdict.since_ms, verdict.labels, verdict.values) == (
        "o", MS + 5000, {}, {"verdict": "stalled"})  # fmt: skip
    (loss,) = data_loss_conditions(
        [{"query": "offsets", "topic": "t", "partition": 0, "expected_offset": 5, "earliest_offset": None,
          "cause": "partition_gone", "batch_id": 1, "detected_at": at(9)}]
    )  # fmt: skip
    assert (loss.connector, loss.subject, loss.detail) == (None, "offsets: t-0 from offset 5", "the partition is gone")
