"""Availability over a window (connect_state/tables/availability.py): the replay, the gaps, the counts."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from connect_state.tables.availability import (
    Availability,
    Coverage,
    Event,
    Segment,
    Unknown,
    connector_availability,
    report_json,
    summarize,
)

NOW = 1_000_000


def ev(at: int, kind: str, **details: Any) -> Event:
    return Event(at, kind, details)


def status(at: int, to: str | None, before: str | None = None) -> Event:
    return ev(at, "status_changed", **{"from": before, "to": to})


def task(at: int, number: int, to: str | None, before: str | None = None) -> Event:
    return ev(at, "task_status_changed", task=number, **{"from": before, "to": to})


#: Created at 100 with two tasks, RUNNING from 300 (the second task's RUNNING), a task FAILED at 500, restarted
#: (RESTARTING at 600, RUNNING at 700), paused 800..900, stopped from 950.
LIFE = [
    ev(100, "created", connector_class="X"),
    ev(110, "tasks_committed", task_count=2),
    status(200, "RUNNING"),
    task(250, 0, "RUNNING"),
    task(300, 1, "RUNNING"),
    task(500, 1, "FAILED", "RUNNING"),
    task(600, 1, "RESTARTING", "FAILED"),
    task(700, 1, "RUNNING", "RESTARTING"),
    status(800, "PAUSED", "RUNNING"),
    task(800, 0, "PAUSED", "RUNNING"),
    task(800, 1, "PAUSED", "RUNNING"),
    status(900, "RUNNING", "PAUSED"),
    task(900, 0, "RUNNING", "PAUSED"),
    task(900, 1, "RUNNING", "PAUSED"),
    ev(950, "tasks_committed", task_count=0),
    status(950, "STOPPED", "RUNNING"),
]


def test_a_connector_s_life_in_states_and_counts() -> None:
    report = connector_availability(LIFE, 0, 1000, Coverage(NOW))
    assert report.segments == [
        Segment(0, 100, Availability.UNKNOWN, Unknown.NOT_EXISTING),
        Segment(100, 300, Availability.DEGRADED),
        Segment(300, 500, Availability.RUNNING),
        Segment(500, 600, Availability.FAILED),
        Segment(600, 700, Availability.DEGRADED),
        Segment(700, 800, Availability.RUNNING),
        Segment(800, 900, Availability.PAUSED),
        Segment(900, 950, Availability.RUNNING),
        Segment(950, 1000, Availability.STOPPED),
    ]
    body = report_json(report)
    assert body["durations_ms"] == {
        "running": 350,
        "degraded": 300,
        "failed": 100,
        "paused": 100,
        "stopped": 50,
        "unknown": 100,
    }
    assert body["shares"]["running"] == 0.35
    assert body["unknown_ms"]["not_existing"] == 100
    assert body["failures"] == 1
    assert body["recovery"] == {"count": 1, "mean_ms": 200, "worst_ms": 200, "unrecovered": 0}
    assert body["restarts"] == 1


def test_the_state_at_the_window_s_start_comes_from_the_events_before_it() -> None:
    report = connector_availability(LIFE, 550, 750, Coverage(NOW))
    assert [(s.start, s.end, s.state) for s in report.segments] == [
        (550, 600, Availability.FAILED),
        (600, 700, Availability.DEGRADED),
        (700, 750, Availability.RUNNING),
    ]
    assert report.failures == 0  # the window opened in the failure
    assert report.restarts == 1


def test_a_failure_not_recovered_by_until() -> None:
    report = connector_availability(LIFE, 400, 650, Coverage(NOW))
    assert (report.failures, report.recoveries, report.unrecovered) == (1, [], 1)


def test_a_connector_failure_counts_like_a_task_failure_and_a_failed_task_leaving_failed_is_a_restart() -> None:
    events = [
        ev(0, "created"),
        ev(0, "tasks_committed", task_count=1),
        status(0, "RUNNING"),
        task(0, 0, "RUNNING"),
        status(10, "FAILED", "RUNNING"),
        status(20, "RUNNING", "FAILED"),
        task(30, 0, "FAILED", "RUNNING"),
        task(40, 0, "UNASSIGNED", "FAILED"),
        task(50, 0, "RUNNING", "UNASSIGNED"),
    ]
    report = connector_availability(events, 0, 100, Coverage(NOW))
    assert report.failures == 2
    assert report.recoveries == [10, 20]
    assert report.restarts == 2


def test_the_gaps_are_unknown_by_precedence() -> None:
    coverage = Coverage(now=950, kept_from=150, known_until=900, lost=((400, 450), (140, 160)))
    report = connector_availability(LIFE, 0, 1000, coverage)
    unknown = report.unknown()
    assert unknown == {
        Unknown.BEFORE_HISTORY: 150,
        Unknown.RECORDS_LOST: 60,
        Unknown.JOBS_BEHIND: 100,
        Unknown.FUTURE: 0,
        Unknown.NOT_EXISTING: 0,
    }
    assert report.segments[:2] == [
        Segment(0, 150, Availability.UNKNOWN, Unknown.BEFORE_HISTORY),
        Segment(150, 160, Availability.UNKNOWN, Unknown.RECORDS_LOST),
    ]
    assert report.segments[-1] == Segment(900, 1000, Availability.UNKNOWN, Unknown.JOBS_BEHIND)
    assert report.failures == 1  # the events are facts, whatever covers them


def test_after_now_is_future_and_a_deleted_connector_is_not_existing() -> None:
    events = [ev(0, "created"), ev(0, "tasks_committed", task_count=0), status(0, "RUNNING"), ev(50, "deleted")]
    report = connector_availability(events, 0, 200, Coverage(now=150))
    assert [(s.start, s.end, s.state, s.reason) for s in report.segments] == [
        (0, 50, Availability.RUNNING, None),
        (50, 150, Availability.UNKNOWN, Unknown.NOT_EXISTING),
        (150, 200, Availability.UNKNOWN, Unknown.FUTURE),
    ]
    assert connector_availability(events, 60, 100, Coverage(NOW)).existed is False


def test_summary_adds_connector_time() -> None:
    a = connector_availability(LIFE, 0, 1000, Coverage(NOW))
    b = connector_availability(
        [ev(0, "created"), ev(0, "tasks_committed", task_count=0), status(0, "RUNNING")], 0, 1000, Coverage(NOW)
    )
    body = summarize(0, 1000, [a, b]).as_json()
    assert body["connector_count"] == 2
    assert body["durations_ms"]["running"] == 1350
    assert body["shares"]["running"] == 0.675
    assert body["failures"] == 1


# --- properties ---------------------------------------------------------------------------------------------------

STATES = ["RUNNING", "PAUSED", "FAILED", "UNASSIGNED", "RESTARTING", "STOPPED", None]
events_strategy = st.lists(
    st.one_of(
        st.builds(lambda at: ev(at, "created"), st.integers(0, 1000)),
        st.builds(lambda at: ev(at, "deleted"), st.integers(0, 1000)),
        st.builds(lambda at, n: ev(at, "tasks_committed", task_count=n), st.integers(0, 1000), st.integers(0, 3)),
        st.builds(status, st.integers(0, 1000), st.sampled_from(STATES), st.sampled_from(STATES)),
        st.builds(task, st.integers(0, 1000), st.integers(0, 3), st.sampled_from(STATES), st.sampled_from(STATES)),
    ),
    max_size=30,
)
spans = st.tuples(st.integers(-100, 1100), st.integers(-100, 1100))
coverages = st.builds(
    Coverage,
    now=st.integers(0, 1200),
    kept_from=st.none() | st.integers(-100, 1100),
    known_until=st.none() | st.integers(-100, 1100),
    lost=st.lists(spans, max_size=3).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(events_strategy, st.integers(-100, 1100), st.integers(1, 1200), coverages)
def test_the_timeline_covers_the_window_once_and_the_shares_add_up_to_one(
    events: list[Event], since: int, length: int, coverage: Coverage
) -> None:
    until = since + length
    report = connector_availability(events, since, until, coverage)
    assert report.segments[0].start == since and report.segments[-1].end == until
    for before, after in zip(report.segments, report.segments[1:], strict=False):
        assert before.end == after.start and before.start < before.end
        assert (before.state, before.reason) != (after.state, after.reason)  # merged
    assert all((seg.reason is not None) == (seg.state == Availability.UNKNOWN) for seg in report.segments)
    body = report_json(report)
    assert abs(sum(body["shares"].values()) - 1) < 1e-9
    assert sum(body["unknown_ms"].values()) == body["durations_ms"]["unknown"]
    assert len(report.recoveries) + report.unrecovered <= report.failures
    assert all(0 < ms <= length for ms in report.recoveries)


@settings(max_examples=200, deadline=None)
@given(events_strategy, st.integers(0, 1000), st.integers(1, 500), coverages, spans)
def test_losing_more_records_never_makes_less_unknown(
    events: list[Event], since: int, length: int, coverage: Coverage, span: tuple[int, int]
) -> None:
    until = since + length
    more = Coverage(coverage.now, coverage.kept_from, coverage.known_until, (*coverage.lost, span))
    before = connector_availability(events, since, until, coverage).durations()[Availability.UNKNOWN]
    after = connector_availability(events, since, until, more).durations()[Availability.UNKNOWN]
    assert after >= before


@settings(max_examples=200, deadline=None)
@given(events_strategy, st.integers(0, 1000), st.integers(2, 500), st.data())
def test_a_window_split_in_two_adds_up_to_the_whole(
    events: list[Event], since: int, length: int, data: st.DataObject
) -> None:
    until = since + length
    middle = data.draw(st.integers(since + 1, until - 1))
    whole = connector_availability(events, since, until, Coverage(NOW)).durations()
    left = connector_availability(events, since, middle, Coverage(NOW)).durations()
    right = connector_availability(events, middle, until, Coverage(NOW)).durations()
    assert whole == {state: left[state] + right[state] for state in Availability}


def test_running_before_its_tasks_are_committed_is_degraded_and_a_deletion_forgets_them() -> None:
    events = [
        ev(0, "created"),
        status(10, "RUNNING"),
        ev(20, "tasks_committed", task_count=0),  # a connector with no task at all runs
        ev(30, "deleted"),
        ev(40, "created"),
        status(40, "RUNNING"),
    ]
    report = connector_availability(events, 0, 50, Coverage(NOW))
    assert [(s.start, s.end, s.state) for s in report.segments] == [
        (0, 20, Availability.DEGRADED),
        (20, 30, Availability.RUNNING),
        (30, 40, Availability.UNKNOWN),
        (40, 50, Availability.DEGRADED),
    ]
