"""One pass of the alerts job (pure, behind :class:`AlertsIO`): the rules over what the tables show now, the
notifications recorded before they are sent, then every delivery that is due sent, its outcome recorded.

Every notification is one **delivery** per channel (``alert_deliveries``): pending until the channel answered 2xx
(delivered), retried with :class:`~connect_state.alerts.channels.Backoff` meanwhile (an unreachable receiver is logged
with the channel, the URL and the error at each attempt, and its deliveries wait: nothing is lost while the job runs
or across its restarts, since the pending rows are read back at start). A channel's deliveries go out in the order
they were made (a ``resolved`` never overtakes its ``firing``); a channel that fails in a pass is not tried again in
that pass. Firing alerts are sent again to Alertmanager channels every ``resend_ms`` (as Prometheus does), so
Alertmanager keeps them while they fire; those repeats are not recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

from connect_state.alerts.channels import Backoff, Channel, ChannelKind
from connect_state.alerts.engine import Alert, AlertKey, AlertState, Condition, Event, Silence, evaluate
from connect_state.alerts.render import body
from connect_state.alerts.rules import Rule


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    """Given up after ``alerts.retry.max.attempts`` (only when that is set above 0)."""


@dataclass(frozen=True)
class Delivery:
    alert_id: str
    event: Event
    channel: str
    kind: ChannelKind
    status: DeliveryStatus
    created_at: int
    next_attempt_at: int
    attempts: int = 0
    delivered_at: int | None = None
    last_error: str | None = None
    http_status: int | None = None
    latency_ms: int | None = None
    """Delivered: how long after the condition began (firing) or ended (resolved) the receiver had it."""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.alert_id, str(self.event), self.channel)


@dataclass(frozen=True)
class SendResult:
    ok: bool
    http_status: int | None = None
    error: str | None = None


class AlertsIO(Protocol):
    def conditions(self, now_ms: int) -> list[Condition]: ...
    def silences(self) -> list[Silence]: ...
    def open_alerts(self) -> list[Alert]: ...
    def alerts(self, ids: Iterable[str]) -> list[Alert]: ...
    def pending_deliveries(self) -> list[Delivery]: ...
    def record_alerts(self, alerts: Sequence[Alert]) -> None: ...
    def record_deliveries(self, deliveries: Sequence[Delivery]) -> None: ...
    def send(self, channel: Channel, data: bytes) -> SendResult: ...


class AlertsReconciler:
    def __init__(
        self,
        io: AlertsIO,
        rules: Sequence[Rule],
        channels: Sequence[Channel],
        backoff: Backoff,
        *,
        generator_url: str,
        resend_ms: int,
        clock: Callable[[], int],
        log: logging.Logger,
        fence: Callable[[], None] | None = None,
        cluster: str | None = None,
    ) -> None:
        self.io = io
        self.rules = list(rules)
        self.channels = {channel.name: channel for channel in channels}
        self.backoff = backoff
        self.generator_url = generator_url
        self.resend_ms = resend_ms
        self.clock = clock
        self.log = log
        self.fence = fence or (lambda: None)
        self.cluster = cluster
        """The Connect cluster whose alerts these are, named in every notification and in its link; None for a
        deployment that does not name its cluster (its notifications and links are as they were)."""
        self.open: dict[AlertKey, Alert] | None = None  # read at the first pass
        self.known: dict[str, Alert] = {}  # by id: the open alerts and those of pending deliveries
        self.pending: list[Delivery] = []
        self.last_resend: dict[str, int] = {}

    def load(self) -> None:
        """The alerts still open and the deliveries still pending, as the tables have them (a restart sends nothing
        twice and loses nothing)."""
        opened = self.io.open_alerts()
        self.open = {alert.key: alert for alert in opened}
        self.pending = sorted(self.io.pending_deliveries(), key=lambda d: (d.created_at, str(d.event)))
        self.known = {alert.id: alert for alert in opened}
        missing = {d.alert_id for d in self.pending} - set(self.known)
        self.known.update({alert.id: alert for alert in self.io.alerts(missing)})
        if self.pending or opened:
            self.log.info("%d alerts open, %d deliveries pending", len(opened), len(self.pending))

    def run_pass(self) -> str | None:
        if self.open is None:
            self.load()
        assert self.open is not None
        now = self.clock()
        evaluation = evaluate(self.rules, self.io.conditions(now), self.io.silences(), self.open, now)
        made = [
            Delivery(alert.id, event, channel.name, channel.kind, DeliveryStatus.PENDING, now, now)
            for alert, event in evaluation.notifications
            for channel in self.channels.values()
        ]
        if evaluation.alerts or made:
            self.fence()
            self.io.record_alerts(evaluation.alerts)
            self.io.record_deliveries(made)  # recorded before they are sent: a crash now sends them after restart
        for alert in evaluation.alerts:
            self.known[alert.id] = alert
            if alert.open:
                self.open[alert.key] = alert
            else:
                self.open.pop(alert.key, None)
        for alert, event in evaluation.notifications:
            self.log.info("alert %s %s: %s (%s)", alert.rule, event, alert.summary, alert.id)
        self.pending.extend(made)
        done = self.deliver()
        self.resend()
        if not (evaluation.alerts or made or done):
            return None
        return (
            f"{sum(a.state == AlertState.FIRING for a in self.open.values())} firing, "
            f"{sum(a.state == AlertState.PENDING for a in self.open.values())} pending; "
            f"{len(evaluation.notifications)} notifications, {len(done)} delivery attempts, "
            f"{len(self.pending)} deliveries pending"
        )

    def deliver(self) -> list[Delivery]:
        """Send every pending delivery that is due, in order per channel; record the outcomes."""
        now = self.clock()
        blocked: set[tuple[str, str]] = set()  # (channel, alert) with an earlier delivery still pending
        failed: set[str] = set()
        attempted: list[Delivery] = []
        for delivery in list(self.pending):
            channel = self.channels.get(delivery.channel)
            order = (delivery.channel, delivery.alert_id)
            if channel is None or delivery.channel in failed or order in blocked or delivery.next_attempt_at > now:
                blocked.add(order)
                continue
            outcome = self._attempt(channel, delivery)
            attempted.append(outcome)
            if outcome.status == DeliveryStatus.PENDING:
                failed.add(delivery.channel)
                blocked.add(order)
        if attempted:
            self.fence()
            self.io.record_deliveries(attempted)
            done = {d.key for d in attempted if d.status != DeliveryStatus.PENDING}
            by_key = {d.key: d for d in attempted}
            self.pending = [by_key.get(d.key, d) for d in self.pending if d.key not in done]
        return attempted

    def _attempt(self, channel: Channel, delivery: Delivery) -> Delivery:
        alert = self.known[delivery.alert_id]
        now = self.clock()
        data = body(channel.kind, alert, delivery.event, now, self._url(alert), 4 * self.resend_ms, self.cluster)
        result = self.io.send(channel, data)
        attempts = delivery.attempts + 1
        done_at = self.clock()
        if result.ok:
            began = alert.started_at if delivery.event == Event.FIRING else (alert.resolved_at or done_at)
            self.log.info(
                "alert %s %s delivered to %s (%s) %d ms after it %s",
                alert.rule,
                delivery.event,
                channel.name,
                channel.kind,
                done_at - began,
                "began" if delivery.event == Event.FIRING else "resolved",
            )
            return replace(
                delivery,
                status=DeliveryStatus.DELIVERED,
                attempts=attempts,
                delivered_at=done_at,
                http_status=result.http_status,
                last_error=None,
                latency_ms=done_at - began,
            )
        given_up = self.backoff.given_up(attempts)
        delay = self.backoff.delay_ms(attempts)
        self.log.error(
            "alert %s %s: delivery to channel %s (%s %s) failed, attempt %d: %s; %s",
            alert.rule,
            delivery.event,
            channel.name,
            channel.kind,
            channel.endpoint,
            attempts,
            result.error,
            "given up (alerts.retry.max.attempts)" if given_up else f"retrying in {delay / 1000:.1f} s",
        )
        return replace(
            delivery,
            status=DeliveryStatus.FAILED if given_up else DeliveryStatus.PENDING,
            attempts=attempts,
            next_attempt_at=done_at + delay,
            http_status=result.http_status,
            last_error=result.error,
        )

    def _url(self, alert: Alert) -> str:
        """The alert in the API: under ``/clusters/<id>`` for a named cluster, whose alerts are in its own tables."""
        where = "" if self.cluster is None else f"/clusters/{self.cluster}"
        return f"{self.generator_url.rstrip('/')}{where}/alerts?id={alert.id}"

    def resend(self) -> None:
        """Firing alerts again to each Alertmanager channel every ``resend_ms`` (not recorded; a failure waits for
        the next round)."""
        assert self.open is not None
        now = self.clock()
        firing = [a for a in self.open.values() if a.state == AlertState.FIRING and a.notified]
        for channel in self.channels.values():
            if channel.kind != ChannelKind.ALERTMANAGER or not firing:
                continue
            if now - self.last_resend.get(channel.name, now) < self.resend_ms:
                self.last_resend.setdefault(channel.name, now)
                continue
            if any(d.channel == channel.name for d in self.pending):
                continue  # its first deliveries are not through yet
            self.last_resend[channel.name] = now
            for alert in firing:
                result = self.io.send(channel, body(channel.kind, alert, Event.FIRING, now, self._url(alert),
                                                    4 * self.resend_ms, self.cluster))  # fmt: skip
                if not result.ok:
                    self.log.warning("alert %s: sending it again to %s failed: %s", alert.rule, channel.name,
                                     result.error)  # fmt: skip
                    break
