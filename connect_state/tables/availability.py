"""Availability of connectors over a window (issue 36, item 3), from their ``connector_events`` rows. Pure: no Flask,
no Delta, no Spark (the API reads the rows, :mod:`connect_state.api.availability`).

**The states.** At each moment of the window ``[since, until)`` a connector is in one :class:`Availability` state,
from the events replayed up to that moment (the connector's status, its committed task count, each task's status):

* ``failed``: the connector or one of its tasks (``0 .. task_count - 1``) is ``FAILED``;
* ``stopped`` / ``paused``: the connector's status is ``STOPPED`` / ``PAUSED``;
* ``running``: the connector is ``RUNNING``, its tasks are committed and every task is ``RUNNING``;
* ``degraded``: it exists and none of the above (starting: no tasks committed yet, ``UNASSIGNED``, ``RESTARTING``, a
  task without a status);
* ``unknown``, with its :class:`Unknown` reason, in this order of precedence: ``before_history`` (before what
  ``connector_events`` keeps: its retention), ``records_lost`` (a ``data_loss`` row of the connector-state job: from
  the last event before the lost offsets to when the loss was detected), ``jobs_behind`` (after the job's last
  committed batch when records wait past its watermark), ``future`` (after now), ``not_existing`` (before it was
  created, after it was deleted).

**The counts**, over the events inside the window: ``failures`` (entries into ``failed``), the time each took to
recover (from the failure to the next ``running``; a failure not recovered by ``until`` is ``unrecovered``), and
``restarts`` (a connector or task status that goes to ``RESTARTING`` or leaves ``FAILED``: what a restart, Connect's
``POST .../restart`` or a task restart, writes).

The durations of the states add up to the window, so the shares add up to 1 (a property test checks it).
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from connect_state.core.vocabulary import State
from connect_state.tables.schemas import epoch_ms

__all__ = [
    "Availability",
    "Coverage",
    "Event",
    "Report",
    "Segment",
    "Summary",
    "Unknown",
    "connector_availability",
    "event_of_row",
    "events_of_rows",
    "report_json",
    "summarize",
]

#: The ``connector_events`` kinds the replay reads.
KINDS = ("created", "deleted", "tasks_committed", "status_changed", "task_status_changed")


class Availability(StrEnum):
    RUNNING = "running"
    DEGRADED = "degraded"
    FAILED = "failed"
    PAUSED = "paused"
    STOPPED = "stopped"
    UNKNOWN = "unknown"


class Unknown(StrEnum):
    """Why a stretch of time is ``unknown``; the order is the precedence where they overlap."""

    BEFORE_HISTORY = "before_history"
    RECORDS_LOST = "records_lost"
    JOBS_BEHIND = "jobs_behind"
    FUTURE = "future"
    NOT_EXISTING = "not_existing"


@dataclass(frozen=True)
class Event:
    """One ``connector_events`` row: Kafka time (epoch ms), kind, details."""

    at: int
    kind: str
    details: Mapping[str, Any]


def event_of_row(row: Mapping[str, Any]) -> Event:
    """A ``connector_events`` row (``event``, ``details`` JSON, ``kafka_timestamp``) as an :class:`Event`."""
    details = row.get("details")
    parsed = json.loads(details) if isinstance(details, str) and details else {}
    at = epoch_ms(row.get("kafka_timestamp")) or epoch_ms(row.get("recorded_at")) or 0
    return Event(at, str(row["event"]), parsed if isinstance(parsed, dict) else {})


def _row_order(row: Mapping[str, Any]) -> tuple[int, bool, int, int]:
    at = epoch_ms(row.get("kafka_timestamp")) or epoch_ms(row.get("recorded_at")) or 0
    return at, row.get("source") != "config", int(row.get("kafka_partition") or 0), int(row.get("kafka_offset") or 0)


def events_of_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[Event]]:
    """``connector_events`` rows as each connector's events, in the table's order (Kafka time, config records before
    status records, partition, offset: the history endpoints' order)."""
    events: dict[str, list[Event]] = {}
    for row in sorted(rows, key=_row_order):
        events.setdefault(str(row["connector"]), []).append(event_of_row(row))
    return events


@dataclass(frozen=True)
class Coverage:
    """What the tables know: nothing before ``kept_from`` (None: everything kept), nothing after ``known_until`` (the
    connector-state job's last batch, when records wait past it), nothing after ``now``, nothing in the ``lost``
    stretches ``(start, end)``."""

    now: int
    kept_from: int | None = None
    known_until: int | None = None
    lost: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Segment:
    start: int
    end: int
    state: Availability
    reason: Unknown | None = None

    def as_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "state": self.state.value, "reason": _value(self.reason)}


def _value(reason: Unknown | None) -> str | None:
    return reason.value if reason is not None else None


@dataclass
class Report:
    """A connector's availability over ``[since, until)``."""

    since: int
    until: int
    segments: list[Segment]
    failures: int = 0
    recoveries: list[int] = field(default_factory=list)
    unrecovered: int = 0
    restarts: int = 0
    #: Whether the connector existed at some moment of the window (as the events say).
    existed: bool = True

    def durations(self) -> dict[Availability, int]:
        totals = dict.fromkeys(Availability, 0)
        for seg in self.segments:
            totals[seg.state] += seg.end - seg.start
        return totals

    def unknown(self) -> dict[Unknown, int]:
        totals = dict.fromkeys(Unknown, 0)
        for seg in self.segments:
            if seg.reason is not None:
                totals[seg.reason] += seg.end - seg.start
        return totals


def _shares(durations: Mapping[Availability, int], total: int) -> dict[str, float]:
    return {state.value: (ms / total if total else 0.0) for state, ms in durations.items()}


def _recovery(recoveries: Sequence[int], unrecovered: int) -> dict[str, Any]:
    mean = round(sum(recoveries) / len(recoveries)) if recoveries else None
    return {
        "count": len(recoveries),
        "mean_ms": mean,
        "worst_ms": max(recoveries, default=None),
        "unrecovered": unrecovered,
    }


def report_json(report: Report) -> dict[str, Any]:
    """The API's answer for one connector (the caller adds the name and what is kept)."""
    durations = report.durations()
    return {
        "since": report.since,
        "until": report.until,
        "shares": _shares(durations, report.until - report.since),
        "durations_ms": {state.value: ms for state, ms in durations.items()},
        "unknown_ms": {reason.value: ms for reason, ms in report.unknown().items()},
        "failures": report.failures,
        "recovery": _recovery(report.recoveries, report.unrecovered),
        "restarts": report.restarts,
        "segments": [seg.as_json() for seg in report.segments],
    }


# ---------------------------------------------------------------------------------------------------------------------
# The replay
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class _Replay:
    exists: bool = False
    status: str | None = None
    task_count: int | None = None  # None: no tasks committed yet (or since its deletion)
    tasks: dict[int, str] = field(default_factory=dict)

    def apply(self, event: Event) -> bool:
        """Apply ``event``; True when it is a restart."""
        details = event.details
        if event.kind == "created":
            self.exists = True
        elif event.kind == "deleted":
            self.exists, self.task_count = False, None
        elif event.kind == "tasks_committed":
            self.task_count = int(details.get("task_count") or 0)
        elif event.kind in ("status_changed", "task_status_changed"):
            to = details.get("to")
            if event.kind == "status_changed":
                self.status = to
            elif to is None:
                self.tasks.pop(int(details["task"]), None)
            else:
                self.tasks[int(details["task"])] = str(to)
            return to == State.RESTARTING or (details.get("from") == State.FAILED and to not in (None, State.FAILED))
        return False

    def state(self) -> Availability:
        if not self.exists:
            return Availability.UNKNOWN
        tasks = [self.tasks.get(task) for task in range(self.task_count or 0)]
        if self.status == State.FAILED or State.FAILED in tasks:
            return Availability.FAILED
        if self.status == State.STOPPED:
            return Availability.STOPPED
        if self.status == State.PAUSED:
            return Availability.PAUSED
        if self.status == State.RUNNING and self.task_count is not None and all(t == State.RUNNING for t in tasks):
            return Availability.RUNNING
        return Availability.DEGRADED


def _base(events: Sequence[Event], since: int, until: int) -> tuple[list[Segment], Availability, int]:
    """The replayed states over the window (unknown: not existing), the state just before it, and the restarts inside
    it. Events at the same time are applied together, in the table's order (config before status, then offset)."""
    replay = _Replay()
    index = 0
    while index < len(events) and events[index].at < since:
        replay.apply(events[index])
        index += 1
    prior = state = replay.state()
    restarts, start = 0, since
    segments: list[Segment] = []
    while index < len(events) and events[index].at < until:
        at = events[index].at
        while index < len(events) and events[index].at == at:
            restarts += replay.apply(events[index])
            index += 1
        new = replay.state()
        if new != state:
            if at > start:
                segments.append(_segment(start, at, state))
            start, state = at, new
    segments.append(_segment(start, until, state))
    return segments, prior, restarts


def _segment(start: int, end: int, state: Availability) -> Segment:
    return Segment(start, end, state, Unknown.NOT_EXISTING if state == Availability.UNKNOWN else None)


def _gaps(coverage: Coverage, since: int, until: int) -> list[tuple[Unknown, int, int]]:
    """The unknown stretches ``coverage`` says, by precedence."""
    gaps: list[tuple[Unknown, int, int]] = []
    if coverage.kept_from is not None:
        gaps.append((Unknown.BEFORE_HISTORY, since, coverage.kept_from))
    gaps += [(Unknown.RECORDS_LOST, start, end) for start, end in coverage.lost]
    if coverage.known_until is not None:
        gaps.append((Unknown.JOBS_BEHIND, coverage.known_until, until))
    gaps.append((Unknown.FUTURE, coverage.now, until))
    return [(reason, max(start, since), min(end, until)) for reason, start, end in gaps if start < end]


def _overlay(base: list[Segment], gaps: list[tuple[Unknown, int, int]]) -> list[Segment]:
    """``base`` with the ``gaps`` over it, adjacent stretches of the same state and reason merged."""
    points = sorted({p for seg in base for p in (seg.start, seg.end)} | {p for _, a, b in gaps for p in (a, b)})
    starts = [seg.start for seg in base]
    lo, hi = base[0].start, base[-1].end
    out: list[Segment] = []
    for a, b in itertools.pairwise(points):
        if a < lo or b > hi or a >= b:
            continue
        reason = next((r for r, start, end in gaps if start <= a < end), None)
        if reason is not None:
            seg = Segment(a, b, Availability.UNKNOWN, reason)
        else:
            under = base[bisect.bisect_right(starts, a) - 1]
            seg = Segment(a, b, under.state, under.reason)
        if out and out[-1].state == seg.state and out[-1].reason == seg.reason and out[-1].end == a:
            out[-1] = Segment(out[-1].start, b, seg.state, seg.reason)
        else:
            out.append(seg)
    return out


def _failures(segments: Sequence[Segment], prior: Availability) -> tuple[int, list[int], int]:
    """Entries into ``failed`` from another state (``prior``: the state before the window; a window opening in a
    failure does not count it), each one's time to the next ``running``."""
    failures, recoveries, unrecovered = 0, [], 0
    failed_at: int | None = None
    previous = prior
    for seg in segments:
        if seg.state == Availability.FAILED and previous != Availability.FAILED:
            failures += 1
            if failed_at is None:
                failed_at = seg.start
        elif seg.state == Availability.RUNNING and failed_at is not None:
            recoveries.append(seg.start - failed_at)
            failed_at = None
        previous = seg.state
    if failed_at is not None:
        unrecovered = 1
    return failures, recoveries, unrecovered


def connector_availability(events: Iterable[Event], since: int, until: int, coverage: Coverage) -> Report:
    """A connector's :class:`Report` over ``[since, until)`` from its events (any before ``until``, in the table's
    order) and what the tables cover. ``since`` < ``until`` (ValueError otherwise)."""
    if since >= until:
        raise ValueError(f"since ({since}) must be before until ({until})")
    ordered = sorted(events, key=lambda e: e.at)  # stable: the table's order within a millisecond
    base, prior, restarts = _base(ordered, since, until)
    failures, recoveries, unrecovered = _failures(base, prior)
    segments = _overlay(base, _gaps(coverage, since, until))
    existed = any(seg.state != Availability.UNKNOWN for seg in base)
    return Report(since, until, segments, failures, recoveries, unrecovered, restarts, existed)


# ---------------------------------------------------------------------------------------------------------------------
# Over several connectors
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class Summary:
    """Several connectors' reports added up: durations in connector-milliseconds, shares of ``connectors`` times the
    window."""

    since: int
    until: int
    connectors: int
    durations: dict[Availability, int]
    unknown: dict[Unknown, int]
    failures: int
    recoveries: list[int]
    unrecovered: int
    restarts: int

    def as_json(self) -> dict[str, Any]:
        total = self.connectors * (self.until - self.since)
        return {
            "since": self.since,
            "until": self.until,
            "connector_count": self.connectors,
            "shares": _shares(self.durations, total),
            "durations_ms": {state.value: ms for state, ms in self.durations.items()},
            "unknown_ms": {reason.value: ms for reason, ms in self.unknown.items()},
            "failures": self.failures,
            "recovery": _recovery(self.recoveries, self.unrecovered),
            "restarts": self.restarts,
        }


def summarize(since: int, until: int, reports: Sequence[Report]) -> Summary:
    durations = dict.fromkeys(Availability, 0)
    unknown = dict.fromkeys(Unknown, 0)
    for report in reports:
        for state, ms in report.durations().items():
            durations[state] += ms
        for reason, ms in report.unknown().items():
            unknown[reason] += ms
    return Summary(
        since,
        until,
        len(reports),
        durations,
        unknown,
        sum(r.failures for r in reports),
        [ms for r in reports for ms in r.recoveries],
        sum(r.unrecovered for r in reports),
        sum(r.restarts for r in reports),
    )
