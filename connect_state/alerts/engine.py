"""When an alert starts, fires and resolves: the rules over the conditions seen at one pass (pure).

An alert is one rule over one subject (a connector, a cleanup step, a source partition, a lost range): **pending**
from the moment its condition is first seen (``started_at``: when the condition began, the verdict's ``since``, the
failure's time), **firing** once the condition has held for the rule's ``for`` (one ``firing`` notification, unless a
silence covers its connector then: it is sent when the silence ends and the alert still fires), **resolved** when
the condition is gone (one ``resolved`` notification, only if the ``firing`` one was sent). A pending alert whose
condition goes away resolves without any notification. Alerts open at a restart are read back from the ``alerts``
table, so a restart sends nothing twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from connect_state.alerts.rules import ConditionKind, Rule, Severity, summary_of


class AlertState(StrEnum):
    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


class Event(StrEnum):
    """What a notification says."""

    FIRING = "firing"
    RESOLVED = "resolved"


@dataclass(frozen=True)
class Condition:
    """Something wrong, seen at a pass: ``subject`` tells apart several of one kind for one connector (the step of
    a cleanup, the partition of a heartbeat, the lost range); ``since_ms``: when it began. ``labels`` say which
    (they never change while it lasts: Alertmanager tells alerts apart by them); ``values`` what it is now (the
    verdict, the number of failures: they may change, and fill the rule's summary)."""

    when: ConditionKind
    connector: str | None
    subject: str
    since_ms: int
    detail: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    values: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Silence:
    """An operator's mute of a connector's alerts from ``starts_at`` to ``ends_at`` (epoch ms), unless lifted."""

    id: str
    connector: str
    starts_at: int
    ends_at: int
    created_by: str = ""
    comment: str = ""
    lifted_at: int | None = None
    lifted_by: str | None = None

    def active(self, now_ms: int) -> bool:
        return self.lifted_at is None and self.starts_at <= now_ms < self.ends_at


def silenced(connector: str | None, silences: Iterable[Silence], now_ms: int) -> bool:
    return connector is not None and any(s.connector == connector and s.active(now_ms) for s in silences)


AlertKey = tuple[str, str, str]
"""(rule, connector or "", subject)."""


@dataclass(frozen=True)
class Alert:
    id: str
    rule: str
    when: ConditionKind
    connector: str | None
    subject: str
    severity: Severity
    summary: str
    detail: str
    labels: Mapping[str, str]
    state: AlertState
    started_at: int
    fired_at: int | None = None
    resolved_at: int | None = None
    notified: bool = False
    silenced: bool = False
    updated_at: int = 0
    values: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> AlertKey:
        return (self.rule, self.connector or "", self.subject)

    @property
    def open(self) -> bool:
        return self.state != AlertState.RESOLVED


def alert_id(rule: str, connector: str | None, subject: str, started_at: int) -> str:
    """Stable across restarts: the same rule, subject and start give the same id."""
    text = "\x1f".join((rule, connector or "", subject, str(started_at)))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Evaluation:
    """What a pass changed: the alerts to record, and the notifications to send (in order)."""

    alerts: list[Alert]
    notifications: list[tuple[Alert, Event]]


def evaluate(
    rules: Sequence[Rule],
    conditions: Iterable[Condition],
    silences: Sequence[Silence],
    open_alerts: Mapping[AlertKey, Alert],
    now_ms: int,
) -> Evaluation:
    """The rules over the conditions seen now, given the alerts still open (pending or firing)."""
    seen: dict[AlertKey, tuple[Rule, Condition]] = {}
    for condition in conditions:
        for rule in rules:
            if _matches(rule, condition, now_ms):
                seen.setdefault((rule.name, condition.connector or "", condition.subject), (rule, condition))
    changed: list[Alert] = []
    notifications: list[tuple[Alert, Event]] = []
    for key, (rule, condition) in seen.items():
        before = open_alerts.get(key)
        after, event = _step(rule, condition, before, silences, now_ms)
        if after != before:
            changed.append(after)
        if event is not None:
            notifications.append((after, event))
    for key, alert in open_alerts.items():
        if key in seen or not alert.open:
            continue
        resolved = replace(alert, state=AlertState.RESOLVED, resolved_at=now_ms, updated_at=now_ms)
        changed.append(resolved)
        if alert.state == AlertState.FIRING and alert.notified:
            notifications.append((resolved, Event.RESOLVED))
    return Evaluation(changed, notifications)


def _matches(rule: Rule, condition: Condition, now_ms: int) -> bool:
    if rule.when != condition.when or not rule.covers(condition.connector):
        return False
    if rule.when == ConditionKind.VERDICT:
        return condition.values.get("verdict") in rule.verdicts
    if rule.when == ConditionKind.DATA_LOSS:  # a loss is an event: its alert fires for the rule's window
        return now_ms - condition.since_ms < rule.window_ms
    return True


def _step(
    rule: Rule, condition: Condition, before: Alert | None, silences: Sequence[Silence], now_ms: int
) -> tuple[Alert, Event | None]:
    fill = {**condition.labels, **condition.values}
    summary = summary_of(rule, condition.connector, fill, condition.subject, condition.detail)
    if before is None:
        started = min(condition.since_ms, now_ms)
        alert = Alert(
            id=alert_id(rule.name, condition.connector, condition.subject, started),
            rule=rule.name,
            when=rule.when,
            connector=condition.connector,
            subject=condition.subject,
            severity=rule.severity,
            summary=summary,
            detail=condition.detail,
            labels=dict(condition.labels),
            state=AlertState.PENDING,
            started_at=started,
            updated_at=now_ms,
            values=dict(condition.values),
        )
    else:
        alert = before
        if (alert.summary, alert.detail, dict(alert.values)) != (summary, condition.detail, dict(condition.values)):
            alert = replace(alert, summary=summary, detail=condition.detail, values=dict(condition.values))
    muted = silenced(condition.connector, silences, now_ms)
    event: Event | None = None
    if alert.state == AlertState.PENDING and now_ms - alert.started_at >= rule.for_ms:
        alert = replace(alert, state=AlertState.FIRING, fired_at=now_ms, notified=not muted, silenced=muted)
        event = None if muted else Event.FIRING
    elif alert.state == AlertState.FIRING and not alert.notified and not muted:
        alert = replace(alert, notified=True, silenced=False)
        event = Event.FIRING
    elif alert.state == AlertState.FIRING and alert.silenced != muted:
        alert = replace(alert, silenced=muted)
    if alert != before:
        alert = replace(alert, updated_at=now_ms)
    return alert, event
