"""The verdicts' judge (issue 35): evidence in, verdict and evidence out; thresholds; what moved between passes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connect_state.core.errors import ConfigError
from connect_state.core.settings import load_settings
from connect_state.verdicts.evidence import (
    ConnectorEvidence,
    DropEvidence,
    HeartbeatEvidence,
    SinkEvidence,
    SourceEvidence,
    TaskEvidence,
    WorkersEvidence,
)
from connect_state.verdicts.judge import judge
from connect_state.verdicts.movement import Counter, Movement
from connect_state.verdicts.thresholds import Threshold, Thresholds, thresholds_for
from connect_state.verdicts.vocabulary import Verdict

NOW = 1_800_000_000_000
T = Thresholds(sink_stall_ms=10_000, source_stall_ms=10_000, flapping_count=3, flapping_window_ms=60_000)
RUNNING1 = (TaskEvidence(0, "RUNNING", since_ms=NOW - 100_000),)


def connector(**fields: object) -> ConnectorEvidence:
    base = ConnectorEvidence(
        name="c",
        type="sink",
        target_state="STARTED",
        state="RUNNING",
        state_since_ms=NOW - 100_000,
        running_since_ms=NOW - 100_000,
        tasks=RUNNING1,
        task_count=1,
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def sink(lag: int, moved_ago: int, lag_ago: int | None) -> SinkEvidence:
    return SinkEvidence("connect-c", ("t",), lag, NOW - moved_ago, None if lag_ago is None else NOW - lag_ago)


def source(offsets_ago: int | None, topics_ago: int | None, beat: HeartbeatEvidence | None = None) -> SourceEvidence:
    return SourceEvidence(
        None if offsets_ago is None else NOW - offsets_ago,
        ("out",),
        None if topics_ago is None else NOW - topics_ago,
        beat,
        beat is not None,
    )


A, B = "127.0.0.1:8083", "127.0.0.1:8084"
ONLY_A = WorkersEvidence("connect-cluster", frozenset({A}), NOW - 500, {B: NOW - 3000})
BOTH = WorkersEvidence("connect-cluster", frozenset({A, B}), NOW - 500)
ON_A_AND_B = (TaskEvidence(0, "RUNNING", worker_id=A), TaskEvidence(1, "RUNNING", worker_id=B))
FAILED_TASK = TaskEvidence(0, "FAILED", "java.io.FileNotFoundException: /x/out.txt", NOW - 5000)
CASES = {
    "no status at all": (connector(state=None, target_state=None, tasks=()), Verdict.UNKNOWN),
    "config but no status yet": (connector(state=None, tasks=()), Verdict.UNKNOWN),
    "stopped": (connector(target_state="STOPPED", state="STOPPED", tasks=()), Verdict.STOPPED),
    "paused": (connector(target_state="PAUSED", state="PAUSED"), Verdict.PAUSED),
    "connector failed": (connector(state="FAILED", trace="boom"), Verdict.FAILED),
    "every task failed": (connector(tasks=(FAILED_TASK,)), Verdict.FAILED),
    "one task of two failed": (
        connector(tasks=(FAILED_TASK, TaskEvidence(1, "RUNNING")), task_count=2),
        Verdict.DEGRADED,
    ),
    "a task unassigned": (connector(tasks=(TaskEvidence(0, "UNASSIGNED"),)), Verdict.DEGRADED),
    "fewer running than committed": (connector(task_count=2), Verdict.DEGRADED),
    "connector unassigned": (connector(state="UNASSIGNED"), Verdict.DEGRADED),
    "restarting": (connector(state="RESTARTING"), Verdict.RESTARTING),
    "a task RUNNING on a worker that left the group": (
        connector(tasks=ON_A_AND_B, task_count=2, worker_id=A, workers=ONLY_A),
        Verdict.DEGRADED,
    ),
    "tasks RUNNING on live workers": (
        connector(tasks=ON_A_AND_B, task_count=2, worker_id=A, workers=BOTH),
        Verdict.HEALTHY,
    ),
    "no evidence of the group's members": (
        connector(tasks=ON_A_AND_B, task_count=2, worker_id=A, workers=None),
        Verdict.HEALTHY,
    ),
    "the connector RUNNING on a worker that left": (
        connector(tasks=(TaskEvidence(0, "RUNNING", worker_id=A),), worker_id=B, workers=ONLY_A),
        Verdict.DEGRADED,
    ),
    "a status with no worker id is no loss": (
        connector(tasks=(TaskEvidence(0, "RUNNING"),), workers=ONLY_A),
        Verdict.HEALTHY,
    ),
    "an UNASSIGNED task on a worker that left is no loss": (
        connector(tasks=(TaskEvidence(0, "UNASSIGNED", worker_id=B),), worker_id=A, workers=ONLY_A),
        Verdict.DEGRADED,
    ),
    "paused on a worker that left": (
        connector(target_state="PAUSED", state="PAUSED", tasks=(), worker_id=B, workers=ONLY_A),
        Verdict.PAUSED,
    ),
    "4 restarts in the window": (connector(restarts_ms=(NOW - 4, NOW - 3, NOW - 2, NOW - 1)), Verdict.FLAPPING),
    "3 restarts in the window": (connector(restarts_ms=(NOW - 3, NOW - 2, NOW - 1)), Verdict.HEALTHY),
    "4 restarts, one before the window": (
        connector(restarts_ms=(NOW - 70_000, NOW - 3, NOW - 2, NOW - 1)),
        Verdict.HEALTHY,
    ),
    "2 failures and 2 restarts": (
        connector(failures_ms=(NOW - 4, NOW - 3), restarts_ms=(NOW - 2, NOW - 1)),
        Verdict.FLAPPING,
    ),
    "sink lag, commits still for longer than the threshold": (connector(sink=sink(5, 20_000, 20_000)), Verdict.STALLED),
    "sink lag, commits still for less": (connector(sink=sink(5, 20_000, 5_000)), Verdict.HEALTHY),
    "sink lag, commits just moved": (connector(sink=sink(5, 1_000, 20_000)), Verdict.HEALTHY),
    "sink caught up, no commit for long": (connector(sink=sink(0, 99_000, None)), Verdict.HEALTHY),
    "sink task restarted recently": (
        connector(sink=sink(5, 20_000, 20_000), running_since_ms=NOW - 2_000),
        Verdict.HEALTHY,
    ),
    "dead-letter records": (connector(dead_letters=DropEvidence("dlq", 3, NOW - 1000)), Verdict.DROPPING),
    "no dead-letter record": (connector(dead_letters=DropEvidence("dlq", 0, NOW - 1000)), Verdict.HEALTHY),
    "source silent, no provider": (connector(type="source", source=source(20_000, 20_000)), Verdict.QUIET),
    "source silent, provider answered since": (
        connector(type="source", source=source(20_000, 20_000, HeartbeatEvidence("produced", NOW - 1000))),
        Verdict.IDLE,
    ),
    "source silent, provider said no records": (
        connector(type="source", source=source(20_000, 20_000, HeartbeatEvidence("no_records", NOW - 1000))),
        Verdict.IDLE,
    ),
    "source silent, provider failed since": (
        connector(type="source", source=source(20_000, 20_000, HeartbeatEvidence("failed", NOW - 1000, "down"))),
        Verdict.STALLED,
    ),
    "source silent, the provider's answer is older than the silence": (
        connector(type="source", source=source(20_000, 20_000, HeartbeatEvidence("produced", NOW - 30_000))),
        Verdict.QUIET,
    ),
    "source offsets moved lately": (connector(type="source", source=source(1_000, 20_000)), Verdict.HEALTHY),
    "source output topics grew lately": (connector(type="source", source=source(20_000, 1_000)), Verdict.HEALTHY),
    "source never committed, running long": (connector(type="source", source=source(None, None)), Verdict.QUIET),
    "failed beats flapping": (
        connector(state="FAILED", restarts_ms=(NOW - 4, NOW - 3, NOW - 2, NOW - 1)),
        Verdict.FAILED,
    ),
    "flapping beats stalled": (
        connector(sink=sink(5, 20_000, 20_000), restarts_ms=(NOW - 4, NOW - 3, NOW - 2, NOW - 1)),
        Verdict.FLAPPING,
    ),
    "paused beats a stalled look": (
        connector(target_state="PAUSED", state="PAUSED", sink=sink(5, 20_000, 20_000)),
        Verdict.PAUSED,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_verdicts(case: str) -> None:
    evidence, expected = CASES[case]
    assert judge(evidence, T, NOW).verdict is expected


def test_failed_carries_since_and_trace() -> None:
    judged = judge(connector(tasks=(FAILED_TASK,)), T, NOW)
    assert judged.evidence["traces"] == {"0": FAILED_TASK.trace}
    assert judged.evidence["since"] == "2027-01-15T07:59:55.000Z"  # NOW - 5 s
    assert judged.began_at_ms == NOW - 5000
    assert judged.tasks[0] == (
        Verdict.FAILED,
        {"state": "FAILED", "since": judged.evidence["since"], "trace": FAILED_TASK.trace},
    )


def test_stalled_carries_lag_and_times() -> None:
    judged = judge(connector(sink=sink(42, 30_000, 20_000)), T, NOW)
    assert judged.evidence["lag"] == 42 and judged.evidence["stalled_for_ms"] == 20_000
    assert judged.evidence["threshold_ms"] == 10_000 and judged.began_at_ms == NOW - 10_000
    assert judged.tasks[0][0] is Verdict.STALLED  # a running task shares its connector's progress verdict


def test_a_lost_worker_carries_tasks_workers_and_since() -> None:
    judged = judge(connector(tasks=ON_A_AND_B, task_count=2, worker_id=A, workers=ONLY_A), T, NOW)
    assert judged.verdict is Verdict.DEGRADED
    assert {k: judged.evidence[k] for k in ("lost_tasks", "lost_connector", "departed_workers", "live_workers")} == {
        "lost_tasks": [1],
        "lost_connector": False,
        "departed_workers": [B],
        "live_workers": [A],
    }
    assert judged.evidence["running"] == 1 and judged.evidence["connect_group"] == "connect-cluster"
    assert judged.evidence["missing_since"] == "2027-01-15T07:59:57.000Z"  # NOW - 3 s
    assert judged.evidence["members_seen_at"] == "2027-01-15T07:59:59.500Z"
    assert judged.began_at_ms == NOW - 3000
    assert judged.tasks[0][0] is Verdict.HEALTHY
    assert judged.tasks[1] == (Verdict.DEGRADED, {"state": "RUNNING", "since": None, "departed_worker": B})
    unassigned = judge(connector(tasks=(TaskEvidence(0, "UNASSIGNED", worker_id=B),), workers=ONLY_A), T, NOW)
    assert "lost_tasks" not in unassigned.evidence and unassigned.evidence["unassigned_tasks"] == [0]


def test_flapping_counts() -> None:
    judged = judge(connector(failures_ms=(NOW - 40, NOW - 30), restarts_ms=(NOW - 20, NOW - 10)), T, NOW)
    assert {k: judged.evidence[k] for k in ("failures", "restarts", "threshold", "window_ms")} == {
        "failures": 2,
        "restarts": 2,
        "threshold": 3,
        "window_ms": 60_000,
    }


@given(
    lag=st.integers(0, 1000),
    moved_ago=st.integers(0, 100_000),
    lag_ago=st.integers(0, 100_000),
    loose=st.integers(1, 100_000),
    tighter_by=st.integers(0, 100_000),
)
def test_a_tighter_sink_threshold_never_hides_a_stall(
    lag: int, moved_ago: int, lag_ago: int, loose: int, tighter_by: int
) -> None:
    evidence = connector(sink=sink(lag, moved_ago, lag_ago))
    tight = max(1, loose - tighter_by)
    if judge(evidence, replace(T, sink_stall_ms=loose), NOW).verdict is Verdict.STALLED:
        assert judge(evidence, replace(T, sink_stall_ms=tight), NOW).verdict is Verdict.STALLED


# --- thresholds -----------------------------------------------------------------------------------------------------


def test_defaults_fit_connects_commit_interval() -> None:
    thresholds = Thresholds.from_settings(load_settings(environ={}))
    assert thresholds == Thresholds()
    assert thresholds.sink_stall_ms == 5 * 60_000  # 5 x offset.flush.interval.ms


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"verdict.sink.stall.ms": "0"}, "verdict.sink.stall.ms: expected an integer >= 1, got 0"),
        ({"verdict.flapping.count": "-1"}, "verdict.flapping.count: expected an integer >= 0, got -1"),
        ({"verdict.source.stall.ms": "soon"}, "verdict.source.stall.ms: expected an integer, got 'soon'"),
        ({"verdict.overrides": "jdbc-*:sink.stall=5"}, "unknown threshold 'sink.stall'"),
        ({"verdict.overrides": "sink.stall.ms=5"}, "expected <connector glob>:<threshold>=<value>"),
        ({"verdict.overrides": "a*:sink.stall.ms=0"}, "expected an integer >= 1, got 0"),
    ],
)
def test_a_bad_threshold_is_a_config_error(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("*", r"\*").replace("(", r"\(")):
        Thresholds.from_settings(load_settings(overrides=overrides, environ={}))


def test_globs_then_tightening_connector_keys() -> None:
    overrides = {"jdbc-*:source.stall.ms": "3600000", "jdbc-orders:flapping.count": "1"}
    config = {
        "connect-state.verdict.source.stall.ms": "60000",  # tighter: taken
        "connect-state.verdict.flapping.count": "10",  # looser: ignored
        "connect-state.verdict.dropping.window.ms": "600000",  # a longer window is tighter: taken
        "connect-state.verdict.sink.stall.ms": "never",  # bad: ignored
        "connect-state.verdict.silence": "true",  # unknown: ignored
    }
    thresholds, ignored = thresholds_for(Thresholds(), overrides, "jdbc-orders", config)
    assert thresholds == Thresholds(source_stall_ms=60_000, flapping_count=1, dropping_window_ms=600_000)
    assert len(ignored) == 3 and any("looser" in why for why in ignored), ignored
    other, _ = thresholds_for(Thresholds(), overrides, "files", {})
    assert other == Thresholds()


@given(st.sampled_from(list(Threshold)), st.integers(0, 10**9))
def test_a_connector_never_loosens_a_threshold(key: Threshold, value: int) -> None:
    base = Thresholds()
    result, _ = thresholds_for(base, {}, "c", {f"connect-state.verdict.{key}": str(value)})
    looser_window = key in (Threshold.FLAPPING_WINDOW_MS, Threshold.DROPPING_WINDOW_MS)
    assert (result.get(key) >= base.get(key)) if looser_window else (result.get(key) <= base.get(key))


# --- movement -------------------------------------------------------------------------------------------------------


def test_movement_remembers_when_a_value_last_changed() -> None:
    moves = Movement()
    assert moves.observe("k", 1, 100, first_seen_ms=50) == 50
    assert moves.observe("k", 1, 200) == 50
    assert moves.observe("k", 2, 300) == 300
    moves.forget_except(set())
    assert moves.observe("k", 2, 400) == 400


def test_counter_counts_growth_within_the_window() -> None:
    counter = Counter()
    assert counter.observe("dlq", 10, 1000, window_ms=5000) == (0, 1000)  # first look: growth before it unknown
    assert counter.observe("dlq", 13, 3000, window_ms=5000) == (3, 1000)
    assert counter.observe("dlq", 15, 7000, window_ms=5000) == (2, 3000)  # the sample at 1000 left the window
