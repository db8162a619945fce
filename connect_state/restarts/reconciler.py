"""Auto-restart passes: judge the outcome of earlier restarts, then restart what is FAILED and due (pure: every read
and write goes through :class:`RestartsIO`; the job's I/O is :mod:`connect_state.spark.restarts`).

A pass:

1. reads the ``connectors`` rows (the connector-state job's fold of the config and status topics) and the
   ``connector_restarts`` rows (the attempts so far);
2. judges each ``pending`` attempt from the status changes recorded since its request (``connector_events``):
   ``failed-again`` when a restarted connector or task went FAILED after the request; ``recovered`` once something
   changed after the request and the connector and every task are RUNNING; ``interrupted`` when the connector was
   deleted, paused or stopped meanwhile; still ``pending`` otherwise (a later attempt makes it ``no-effect``);
3. decides, for every connector with a FAILED connector or task, whether to restart it now
   (:func:`decide`: opted in, target state STARTED, under the maximum, backoff passed) and, when so, checks the target
   state again in the config topic read to its end, writes the restart request (onlyFailed, includeTasks) and records
   the attempt (``pending``; ``not-sent`` with the error when the request could not be written).

Every attempt is recorded right after its request; the records are fenced by the ``restarts`` lease, so two instances
never restart the same failure.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from connect_state.core.errors import ConnectStateError
from connect_state.core.vocabulary import State, TargetState
from connect_state.leases.decisions import LeaseLost
from connect_state.restarts.policy import RestartPolicy

__all__ = [
    "Attempt",
    "ConnectorHealth",
    "Decision",
    "Outcome",
    "RestartsIO",
    "RestartsReconciler",
    "StatusChange",
    "attempt_from_row",
    "attempt_view",
    "attempts_view",
    "decide",
    "health_from_row",
    "judge",
    "overlay",
]

log = logging.getLogger("connect_state.restarts")


class Outcome(StrEnum):
    """What came of a restart request."""

    PENDING = "pending"
    """Requested; no outcome seen yet."""
    RECOVERED = "recovered"
    """The connector and every task RUNNING after the request."""
    FAILED_AGAIN = "failed-again"
    """A restarted connector or task FAILED again after the request."""
    NO_EFFECT = "no-effect"
    """Still pending, with nothing changed, when the next attempt was due."""
    INTERRUPTED = "interrupted"
    """The connector was deleted, paused or stopped before an outcome was seen."""
    NOT_SENT = "not-sent"
    """The restart request could not be written (the error is the attempt's ``detail``)."""


class Action(StrEnum):
    """What :func:`decide` says to do about a connector."""

    RESTART = "restart"
    WAIT = "wait"
    """Backoff: not before ``due_at``."""
    NONE = "none"
    """Nothing to do (healthy, not opted in, paused or stopped, given up): ``why`` says which."""


@dataclass(frozen=True)
class StatusChange:
    """A status record's transition (``connector_events``): when (the record's timestamp, epoch ms), whose (``task``
    None: the connector) and to what state (None: the status was removed)."""

    at_ms: int
    task: int | None
    to: str | None


@dataclass(frozen=True)
class ConnectorHealth:
    """A connector as the ``connectors`` table has it: target state, statuses, traces and its own config."""

    name: str
    target_state: str | None
    connector_state: str | None
    connector_trace: str | None = None
    tasks: Mapping[int, tuple[str | None, str | None]] = field(default_factory=dict)
    """Task id -> (state, trace)."""
    config: Mapping[str, str] = field(default_factory=dict)
    deleted: bool = False

    @property
    def failed_tasks(self) -> list[int]:
        return sorted(task for task, (state, _) in self.tasks.items() if state == State.FAILED)

    @property
    def failed(self) -> bool:
        """The connector or one of its tasks is FAILED."""
        return self.connector_state == State.FAILED or bool(self.failed_tasks)

    @property
    def running(self) -> bool:
        """The connector and every task RUNNING."""
        return self.connector_state == State.RUNNING and all(state == State.RUNNING for state, _ in self.tasks.values())

    def reason(self) -> str:
        """Why it needs a restart: ``connector FAILED``, ``task 0 FAILED``, ``connector and tasks 0, 2 FAILED``."""
        tasks = self.failed_tasks
        what = []
        if self.connector_state == State.FAILED:
            what.append("connector")
        if tasks:
            what.append(("task " if len(tasks) == 1 else "tasks ") + ", ".join(map(str, tasks)))
        return " and ".join(what) + " FAILED"

    def trace(self) -> str | None:
        """The trace the restart answers: the connector's when it failed, else the first failed task's."""
        if self.connector_state == State.FAILED:
            return self.connector_trace
        tasks = self.failed_tasks
        return self.tasks[tasks[0]][1] if tasks else None


def _config(value: Any) -> dict[str, str]:
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, str) and value:
        try:
            parsed = json.loads(value)
        except ValueError:
            return {}
        return _config(parsed) if isinstance(parsed, Mapping) else {}
    return {}


def health_from_row(row: Mapping[str, Any]) -> ConnectorHealth:
    """A ``connectors`` row (``tasks`` a list of ``{id, state, trace, ...}``, ``config`` JSON) as
    :class:`ConnectorHealth`."""
    tasks = {
        int(task["id"]): (task.get("state"), task.get("trace"))
        for task in row.get("tasks") or []
        if task is not None and task.get("id") is not None
    }
    return ConnectorHealth(
        name=str(row["name"]),
        target_state=row.get("target_state"),
        connector_state=row.get("connector_state"),
        connector_trace=row.get("connector_trace"),
        tasks=tasks,
        config=_config(row.get("config")),
        deleted=bool(row.get("deleted")),
    )


@dataclass(frozen=True)
class Attempt:
    """One restart request and what came of it (a ``connector_restarts`` row; times epoch ms)."""

    connector: str
    requested_at: int
    attempt: int
    """Its number in the series (1 after a reset)."""
    reason: str
    trace: str | None
    failed_since: int | None
    outcome: Outcome = Outcome.PENDING
    outcome_at: int | None = None
    detail: str | None = None


def attempt_from_row(row: Mapping[str, Any]) -> Attempt:
    """A ``connector_restarts`` row (timestamps as datetimes or epoch ms) as an :class:`Attempt`."""
    return Attempt(
        connector=str(row["connector"]),
        requested_at=_ms(row["requested_at"]) or 0,
        attempt=int(row.get("attempt") or 0),
        reason=str(row.get("reason") or ""),
        trace=row.get("trace"),
        failed_since=_ms(row.get("failed_since")),
        outcome=Outcome(row["outcome"]),
        outcome_at=_ms(row.get("outcome_at")),
        detail=row.get("detail"),
    )


def _ms(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return int(aware.timestamp() * 1000)
    return int(value)


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def attempt_view(attempt: Attempt) -> dict[str, Any]:
    """One attempt as the API shows it (times UTC ISO-8601 with milliseconds)."""
    return {
        "connector": attempt.connector,
        "requested_at": _iso(attempt.requested_at),
        "attempt": attempt.attempt,
        "reason": attempt.reason,
        "trace": attempt.trace,
        "failed_since": _iso(attempt.failed_since),
        "outcome": str(attempt.outcome),
        "outcome_at": _iso(attempt.outcome_at),
        "detail": attempt.detail,
    }


def attempts_view(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``connector_restarts`` rows as the API lists them: newest request first."""
    attempts = sorted(map(attempt_from_row, rows), key=lambda a: (a.requested_at, a.connector), reverse=True)
    return [attempt_view(a) for a in attempts]


@dataclass(frozen=True)
class Decision:
    """:func:`decide`'s answer for one connector."""

    connector: str
    action: Action
    why: str
    attempt: int = 0
    due_at: int | None = None


def overlay(health: ConnectorHealth, changes: Sequence[StatusChange]) -> ConnectorHealth:
    """``health`` with each status replaced by the latest status change of its connector or task (``changes``, oldest
    first): the ``connectors`` table and ``connector_events`` are written apart, so the events (the same status
    records) may be ahead of the row a pass read."""
    connector_state = health.connector_state
    tasks = dict(health.tasks)
    for change in changes:
        if change.task is None:
            connector_state = change.to
        elif change.to is None:
            tasks.pop(change.task, None)
        else:
            trace = health.tasks.get(change.task, (None, None))[1] if change.to == State.FAILED else None
            tasks[change.task] = (change.to, trace)
    return replace(health, connector_state=connector_state, tasks=tasks)


def failed_since(health: ConnectorHealth, changes: Sequence[StatusChange]) -> int | None:
    """When the current failure began: the latest change to FAILED of the connector or a task FAILED now."""
    scopes: set[int | None] = set(health.failed_tasks)
    if health.connector_state == State.FAILED:
        scopes.add(None)
    times = [c.at_ms for c in changes if c.to == State.FAILED and c.task in scopes]
    return max(times) if times else None


def judge(attempt: Attempt, health: ConnectorHealth | None, changes: Sequence[StatusChange]) -> Attempt:
    """The outcome of a ``pending`` attempt from the connector now and the status changes of its connector (see the
    module docstring); other outcomes are final and come back unchanged."""
    if attempt.outcome != Outcome.PENDING:
        return attempt
    if health is None or health.deleted:
        return replace(attempt, outcome=Outcome.INTERRUPTED, detail="the connector was deleted")
    if health.target_state not in (None, TargetState.STARTED):
        return replace(attempt, outcome=Outcome.INTERRUPTED, detail=f"the connector was {health.target_state}")
    after = sorted((c for c in changes if c.at_ms >= attempt.requested_at), key=lambda c: c.at_ms)
    failures = [c for c in after if c.to == State.FAILED]
    if failures:
        first = failures[0]
        who = "connector" if first.task is None else f"task {first.task}"
        return replace(attempt, outcome=Outcome.FAILED_AGAIN, outcome_at=first.at_ms, detail=f"{who} FAILED again")
    if after and health.running:
        return replace(attempt, outcome=Outcome.RECOVERED, outcome_at=after[-1].at_ms, detail="RUNNING")
    return attempt


def _series_number(history: Sequence[Attempt], policy: RestartPolicy, since: int | None) -> int:
    """How many restarts the current series has had: a failure starting ``reset_after_ms`` or more after the last
    attempt's outcome (or request) starts a new series."""
    if not history:
        return 0
    last = history[-1]
    ended = last.outcome_at if last.outcome_at is not None else last.requested_at
    if since is not None and since - ended >= policy.reset_after_ms:
        return 0
    return last.attempt


def decide(
    health: ConnectorHealth,
    history: Sequence[Attempt],
    policy: RestartPolicy,
    now: int,
    since: int | None = None,
) -> Decision:
    """Whether to restart ``health``'s connector now; ``history`` its attempts, oldest first; ``since`` when the
    current failure began (:func:`failed_since`); ``policy`` the operator's (tightened here by the connector's
    config)."""
    name = health.name
    if not health.failed or health.deleted:
        return Decision(name, Action.NONE, "not FAILED")
    if not policy.opted_in(name):
        return Decision(name, Action.NONE, "not opted in (restart.auto.connectors)")
    own = policy.for_connector(health.config)
    if own.policy is None:
        return Decision(name, Action.NONE, "turned off by its config (connect-state.restart.auto.enabled=false)")
    if health.target_state not in (None, TargetState.STARTED):
        return Decision(name, Action.NONE, f"target state {health.target_state}")
    done = _series_number(history, own.policy, since)
    if done >= own.policy.max_attempts:
        return Decision(name, Action.NONE, f"gave up after {done} restarts (restart.auto.max.attempts)")
    if done:
        due = history[-1].requested_at + own.policy.delay_ms(done)
        if now < due:
            return Decision(name, Action.WAIT, f"backoff after {done} restarts", done + 1, due)
    return Decision(name, Action.RESTART, health.reason(), done + 1, now)


class RestartsIO(Protocol):
    """Every read and write of a pass (:class:`connect_state.spark.restarts.RestartsJobIO`)."""

    def connectors(self) -> list[Mapping[str, Any]]:
        """The ``connectors`` rows (none without the table)."""
        ...

    def attempts(self) -> list[Attempt]:
        """Every ``connector_restarts`` row (none without the table)."""
        ...

    def status_changes(self, connectors: Iterable[str]) -> dict[str, list[StatusChange]]:
        """The status changes of ``connectors`` (``connector_events``), by connector."""
        ...

    def target_state(self, connector: str) -> str | None:
        """The connector's target state in the config topic read to its end now (None: no such connector)."""
        ...

    def restart(self, connector: str) -> None:
        """Write ``restart-connector-<name>`` (onlyFailed, includeTasks), acknowledged; fenced by the lease."""
        ...

    def record(self, attempts: Sequence[Attempt]) -> None:
        """Insert or update these attempts (key: connector, requested_at); fenced by the lease."""
        ...


@dataclass
class PassSummary:
    judged: dict[str, int] = field(default_factory=dict)
    restarted: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        parts = [f"restarted {', '.join(self.restarted)}" if self.restarted else "restarted none"]
        if self.waiting:
            parts.append(f"backing off {', '.join(self.waiting)}")
        parts += [f"{n} {outcome}" for outcome, n in sorted(self.judged.items())]
        return "; ".join(parts)


class RestartsReconciler:
    """The auto-restart passes over ``io`` with ``policy``; ``clock`` in epoch ms."""

    def __init__(self, io: RestartsIO, policy: RestartPolicy, clock: Callable[[], int]) -> None:
        self.io = io
        self.policy = policy
        self.clock = clock

    def run_pass(self) -> PassSummary | None:
        """One pass (see the module docstring); None when nothing was to be done."""
        healths = {h.name: h for h in map(health_from_row, self.io.connectors())}
        history: dict[str, list[Attempt]] = {}
        for attempt in sorted(self.io.attempts(), key=lambda a: a.requested_at):
            history.setdefault(attempt.connector, []).append(attempt)
        pending = {name for name, attempts in history.items() if attempts[-1].outcome == Outcome.PENDING}
        failing = {name for name, h in healths.items() if h.failed and not h.deleted and self.policy.opted_in(name)}
        if not pending and not failing:
            return None
        changes = self.io.status_changes(sorted(pending | failing))
        healths.update({name: overlay(healths[name], found) for name, found in changes.items() if name in healths})
        summary = PassSummary()
        self._judge(pending, healths, history, changes, summary)
        for name in sorted(failing):
            self._maybe_restart(healths[name], history.get(name, []), changes.get(name, []), summary)
        return summary

    def _judge(
        self,
        pending: set[str],
        healths: Mapping[str, ConnectorHealth],
        history: dict[str, list[Attempt]],
        changes: Mapping[str, Sequence[StatusChange]],
        summary: PassSummary,
    ) -> None:
        judged = []
        for name in sorted(pending):
            before = history[name][-1]
            after = judge(before, healths.get(name), changes.get(name, []))
            if after != before:
                judged.append(after)
                history[name][-1] = after
                summary.judged[after.outcome] = summary.judged.get(after.outcome, 0) + 1
        if judged:
            self.io.record(judged)

    def _maybe_restart(
        self, health: ConnectorHealth, history: list[Attempt], changes: Sequence[StatusChange], summary: PassSummary
    ) -> None:
        now = self.clock()
        since = failed_since(health, changes)
        decision = decide(health, history, self.policy, now, since)
        if decision.action == Action.WAIT:
            summary.waiting.append(health.name)
            return
        if decision.action != Action.RESTART:
            return
        target = self.io.target_state(health.name)  # the config topic now: a pause or stop since the table wins
        if target not in (TargetState.STARTED,):
            log.info("%s: not restarted: target state %s in the config topic", health.name, target)
            return
        updates = []
        if history and history[-1].outcome == Outcome.PENDING:
            updates.append(replace(history[-1], outcome=Outcome.NO_EFFECT, outcome_at=now, detail="nothing changed"))
        attempt = Attempt(health.name, now, decision.attempt, decision.why, health.trace(), since)
        try:
            self.io.restart(health.name)
        except LeaseLost:
            raise
        except ConnectStateError as err:
            attempt = replace(attempt, outcome=Outcome.NOT_SENT, outcome_at=self.clock(), detail=str(err))
            log.warning("%s: restart request %d not sent: %s", health.name, decision.attempt, err)
        except Exception as err:  # after the write, perhaps: recorded as pending, so the backoff holds
            self.io.record([*updates, replace(attempt, detail=f"the request may have been written: {err!r}")])
            raise
        else:
            log.info("%s: restart %d requested (%s)", health.name, decision.attempt, decision.why)
            summary.restarted.append(health.name)
        self.io.record([*updates, attempt])
