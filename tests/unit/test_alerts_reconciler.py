"""The alerts' decisions and passes (connect_state/alerts: engine, reconciler, render), over an in-memory IO."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pytest

from connect_state.alerts.channels import Backoff, Channel, ChannelKind, parse_channels
from connect_state.alerts.engine import Alert, AlertState, Condition, Event, Silence, evaluate
from connect_state.alerts.reconciler import AlertsReconciler, Delivery, DeliveryStatus, SendResult
from connect_state.alerts.render import alertmanager_body, slack_body, webhook_body
from connect_state.alerts.rules import ConditionKind, Rule, Severity
from connect_state.core.errors import ConfigError
from connect_state.verdicts.vocabulary import Verdict

STALLED = Rule("Stuck", ConditionKind.VERDICT, for_ms=60_000, verdicts=frozenset({Verdict.STALLED}),
               severity=Severity.CRITICAL)  # fmt: skip
LOSS = Rule("Lost", ConditionKind.DATA_LOSS, window_ms=600_000)


def stalled(connector: str, since: int) -> Condition:
    return Condition(
        ConditionKind.VERDICT, connector, "", since, "lag 120, commits still", values={"verdict": "stalled"}
    )


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@dataclass
class Receiver:
    """A channel's receiver: up or down; what it got."""

    up: bool = True
    got: list[tuple[str, dict | list]] = field(default_factory=list)


@dataclass
class MemoryIO:
    """The tables in memory (they survive a new reconciler: a restart of the job) and the receivers."""

    current: list[Condition] = field(default_factory=list)
    silenced: list[Silence] = field(default_factory=list)
    alert_rows: dict[str, Alert] = field(default_factory=dict)
    delivery_rows: dict[tuple[str, str, str], Delivery] = field(default_factory=dict)
    receivers: dict[str, Receiver] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def conditions(self, now_ms: int) -> list[Condition]:
        return list(self.current)

    def silences(self) -> list[Silence]:
        return list(self.silenced)

    def open_alerts(self) -> list[Alert]:
        return [a for a in self.alert_rows.values() if a.open]

    def alerts(self, ids: Iterable[str]) -> list[Alert]:
        return [self.alert_rows[i] for i in ids]

    def pending_deliveries(self) -> list[Delivery]:
        return [d for d in self.delivery_rows.values() if d.status == DeliveryStatus.PENDING]

    def record_alerts(self, alerts: Sequence[Alert]) -> None:
        self.log.append(f"record {len(alerts)} alerts")
        self.alert_rows.update({a.id: a for a in alerts})

    def record_deliveries(self, deliveries: Sequence[Delivery]) -> None:
        self.log.append("record " + ", ".join(f"{d.channel}:{d.event}:{d.status}" for d in deliveries))
        self.delivery_rows.update({d.key: d for d in deliveries})

    def send(self, channel: Channel, data: bytes) -> SendResult:
        receiver = self.receivers.setdefault(channel.name, Receiver())
        self.log.append(f"send {channel.name}")
        if not receiver.up:
            return SendResult(False, None, f"cannot reach {channel.endpoint}: [Errno 111] Connection refused")
        receiver.got.append((channel.name, json.loads(data)))
        return SendResult(True, 200)


CHANNELS = parse_channels(
    {
        "hook": "webhook:http://127.0.0.1:1/hook",
        "slack": "slack:http://127.0.0.1:1/s",
        "am": "alertmanager:http://am:9093",
    }
)


def reconciler(io: MemoryIO, clock: Clock, rules: Sequence[Rule] = (STALLED, LOSS)) -> AlertsReconciler:
    return AlertsReconciler(io, rules, CHANNELS, Backoff(1000, 8000), generator_url="http://api:8083",
                            resend_ms=60_000, clock=clock, log=logging.getLogger("test"))  # fmt: skip


def events(io: MemoryIO, channel: str) -> list[str]:
    got = io.receivers.get(channel, Receiver()).got
    if channel == "slack":
        return [body["text"].split("]")[0].strip("[").lower() for _, body in got]
    return [body["status"] for _, body in got]


def test_one_notification_when_it_fires_after_for_and_one_when_it_resolves() -> None:
    io, clock = MemoryIO(), Clock()
    r = reconciler(io, clock)
    io.current = [stalled("orders", clock.now - 10_000)]
    r.run_pass()
    assert io.receivers == {}, "pending: the condition has held 10 s of the rule's 60"
    clock.now += 50_000
    r.run_pass()
    clock.now += 10_000
    r.run_pass()  # still firing: nothing more
    assert events(io, "hook") == ["firing"] and events(io, "slack") == ["firing"]
    io.current = []
    clock.now += 10_000
    r.run_pass()
    assert events(io, "hook") == ["firing", "resolved"] and events(io, "slack") == ["firing", "resolved"]
    delivered = [d for d in io.delivery_rows.values() if d.channel == "hook"]
    assert sorted((d.event, d.status, d.latency_ms) for d in delivered) == [
        (Event.FIRING, DeliveryStatus.DELIVERED, 60_000),  # 60 s after the stall began
        (Event.RESOLVED, DeliveryStatus.DELIVERED, 0),
    ]


def test_a_condition_gone_before_for_sends_nothing() -> None:
    io, clock = MemoryIO(), Clock()
    r = reconciler(io, clock)
    io.current = [stalled("orders", clock.now)]
    r.run_pass()
    io.current = []
    clock.now += 120_000
    r.run_pass()
    assert io.receivers == {}
    (alert,) = io.alert_rows.values()
    assert (alert.state, alert.notified) == (AlertState.RESOLVED, False)


def test_recorded_before_sent_and_a_restart_sends_nothing_twice() -> None:
    io, clock = MemoryIO(), Clock()
    io.current = [stalled("orders", clock.now - 120_000)]
    reconciler(io, clock).run_pass()
    first_send = io.log.index("send hook")
    assert io.log[first_send - 1].startswith("record hook:firing:pending"), io.log
    again = reconciler(io, clock)  # the job restarted: its state is read back from the tables
    clock.now += 10_000
    again.run_pass()
    assert events(io, "hook") == ["firing"]
    io.current = []
    again.run_pass()
    assert events(io, "hook") == ["firing", "resolved"]


def test_an_unreachable_receiver_is_retried_with_backoff_and_loses_nothing(caplog: pytest.LogCaptureFixture) -> None:
    io, clock = MemoryIO(), Clock()
    io.receivers["hook"] = Receiver(up=False)
    r = reconciler(io, clock)
    io.current = [stalled("orders", clock.now - 120_000)]
    with caplog.at_level(logging.ERROR):
        r.run_pass()
    assert "delivery to channel hook (webhook http://127.0.0.1:1/hook) failed, attempt 1: cannot reach" in caplog.text
    assert "retrying in 1.0 s" in caplog.text
    io.current = []  # resolved while the receiver is down
    clock.now += 500
    r.run_pass()  # not due yet: no attempt
    assert io.log.count("send hook") == 1
    clock.now += 600
    r.run_pass()  # due: attempt 2 fails, next in 2 s
    assert io.log.count("send hook") == 2, "a failing channel is tried once per pass, not once per delivery"
    r = reconciler(io, clock)  # restarted while down: the pending rows are read back
    io.receivers["hook"].up = True
    clock.now += 2_000
    r.run_pass()
    assert events(io, "hook") == ["firing", "resolved"], "in order, nothing lost"
    rows = {d.event: d for d in io.delivery_rows.values() if d.channel == "hook"}
    assert (rows[Event.FIRING].attempts, rows[Event.FIRING].status) == (3, DeliveryStatus.DELIVERED)
    assert events(io, "slack") == ["firing", "resolved"], "the other channels were not held up"


def test_retries_can_be_bounded() -> None:
    io, clock = MemoryIO(), Clock()
    io.receivers["hook"] = Receiver(up=False)
    r = AlertsReconciler(
        io,
        [STALLED],
        CHANNELS[:1],
        Backoff(1000, 2000, max_attempts=2),
        generator_url="http://api",
        resend_ms=60_000,
        clock=clock,
        log=logging.getLogger("t"),
    )
    io.current = [stalled("orders", 0)]
    for _ in range(4):
        r.run_pass()
        clock.now += 5_000
    (row,) = io.delivery_rows.values()
    assert (row.status, row.attempts) == (DeliveryStatus.FAILED, 2)


def test_backoff_doubles_up_to_its_maximum() -> None:
    backoff = Backoff(1000, 8000)
    assert [backoff.delay_ms(n) for n in range(1, 7)] == [1000, 2000, 4000, 8000, 8000, 8000]
    with pytest.raises(ConfigError, match=r"alerts\.retry\.backoff\.max\.ms"):
        Backoff(1000, 500)


def test_a_silence_holds_the_notification_until_it_ends() -> None:
    io, clock = MemoryIO(), Clock()
    io.silenced = [Silence("s1", "orders", clock.now, clock.now + 60_000, "alice", "maintenance")]
    io.current = [stalled("orders", clock.now - 120_000), stalled("billing", clock.now - 120_000)]
    r = reconciler(io, clock)
    r.run_pass()
    assert [body["connector"] for _, body in io.receivers["hook"].got] == ["billing"]
    assert io.alert_rows[next(a.id for a in io.alert_rows.values() if a.connector == "orders")].silenced
    clock.now += 61_000
    r.run_pass()
    assert [body["connector"] for _, body in io.receivers["hook"].got] == ["billing", "orders"]


def test_a_lifted_silence_no_longer_holds() -> None:
    io, clock = MemoryIO(), Clock()
    io.silenced = [Silence("s1", "orders", clock.now, clock.now + 600_000, lifted_at=clock.now)]
    io.current = [stalled("orders", clock.now - 120_000)]
    reconciler(io, clock).run_pass()
    assert events(io, "hook") == ["firing"]


def test_a_data_loss_fires_for_the_rules_window() -> None:
    loss = Condition(ConditionKind.DATA_LOSS, None, "offsets: t-0 from 5", 1_000_000, "gone", {"cause": "x"})
    first = evaluate([LOSS], [loss], [], {}, 1_000_500)
    assert [(a.state, e) for a, e in first.notifications] == [(AlertState.FIRING, Event.FIRING)]
    opened = {a.key: a for a in first.alerts}
    later = evaluate([LOSS], [loss], [], opened, 1_000_000 + 600_000)
    assert [(a.state, e) for a, e in later.notifications] == [(AlertState.RESOLVED, Event.RESOLVED)]


def test_rules_match_verdicts_and_connector_globs() -> None:
    rule = Rule("OrdersDown", ConditionKind.VERDICT, verdicts=frozenset({Verdict.FAILED}), connectors="orders-*")
    conditions = [
        Condition(ConditionKind.VERDICT, "orders-1", "", 0, values={"verdict": "failed"}),
        Condition(ConditionKind.VERDICT, "orders-2", "", 0, values={"verdict": "healthy"}),
        Condition(ConditionKind.VERDICT, "billing", "", 0, values={"verdict": "failed"}),
    ]
    fired = evaluate([rule], conditions, [], {}, 10)
    assert [a.connector for a, _ in fired.notifications] == ["orders-1"]


ALERT = Alert("abc", "Stuck", ConditionKind.VERDICT, "orders", "", Severity.CRITICAL, "connector orders is stalled",
              "lag 120", {}, AlertState.FIRING, 1_000_000, fired_at=1_060_000,
              values={"verdict": "stalled"})  # fmt: skip


def test_the_bodies() -> None:
    assert webhook_body(ALERT, Event.FIRING, 1_060_000, "http://api/alerts?id=abc") == {
        "source": "connect-state",
        "status": "firing",
        "id": "abc",
        "rule": "Stuck",
        "kind": "verdict",
        "severity": "critical",
        "connector": "orders",
        "subject": "",
        "summary": "connector orders is stalled",
        "detail": "lag 120",
        "labels": {},
        "values": {"verdict": "stalled"},
        "started_at": "1970-01-01T00:16:40.000Z",
        "fired_at": "1970-01-01T00:17:40.000Z",
        "resolved_at": None,
        "sent_at": "1970-01-01T00:17:40.000Z",
        "url": "http://api/alerts?id=abc",
    }
    slack = slack_body(ALERT, Event.FIRING, 1_060_000, "http://api/alerts?id=abc")
    assert slack["text"] == "[FIRING] Stuck: connector orders is stalled"
    assert [block["type"] for block in slack["blocks"]] == ["section", "section", "section", "context"]
    assert alertmanager_body(ALERT, Event.FIRING, 1_060_000, "http://api/a", 240_000) == [
        {
            "labels": {"alertname": "Stuck", "severity": "critical", "kind": "verdict", "source": "connect-state",
                       "connector": "orders"},
            "annotations": {"summary": "connector orders is stalled", "verdict": "stalled", "description": "lag 120"},
            "startsAt": "1970-01-01T00:17:40.000Z",
            "endsAt": "1970-01-01T00:21:40.000Z",
            "generatorURL": "http://api/a",
        }
    ]  # fmt: skip


def test_the_bodies_name_the_cluster_when_the_deployment_names_it() -> None:
    hook = webhook_body(ALERT, Event.FIRING, 1_060_000, "http://api/clusters/billing/alerts?id=abc", "billing")
    assert hook["cluster"] == "billing" and next(iter(hook)) == "cluster"
    slack = slack_body(ALERT, Event.FIRING, 1_060_000, "http://api/a", "billing")
    assert slack["text"] == "[FIRING] Stuck (billing): connector orders is stalled"
    assert "*Cluster:* billing" in [field["text"] for field in slack["blocks"][1]["fields"]]
    [managed] = alertmanager_body(ALERT, Event.FIRING, 1_060_000, "http://api/a", 240_000, "billing")
    assert managed["labels"]["connect_cluster"] == "billing" and "cluster" not in managed["labels"]


@pytest.mark.parametrize(
    ("value", "message"),
    [("pager:http://x", "channel c: expected <kind>:<url> with kind one of webhook, slack, alertmanager"),
     ("webhook:ftp://x", "channel c: expected an http or https URL after webhook:"),
     ("slack", "channel c: expected an http or https URL")],
)  # fmt: skip
def test_a_bad_channel_names_the_key(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^alerts.channels: {message}"):
        parse_channels({"c": value})


def test_alertmanager_endpoint() -> None:
    (channel,) = parse_channels({"am": "alertmanager:http://am:9093/"})
    assert (channel.kind, channel.endpoint) == (ChannelKind.ALERTMANAGER, "http://am:9093/api/v2/alerts")


def test_firing_alerts_are_sent_to_alertmanager_again_every_resend_interval() -> None:
    io, clock = MemoryIO(), Clock()
    r = reconciler(io, clock)
    io.current = [stalled("orders", clock.now - 120_000)]
    r.run_pass()
    clock.now += 30_000
    r.run_pass()
    assert len(io.receivers["am"].got) == 1 and len(io.receivers["hook"].got) == 1
    clock.now += 31_000
    r.run_pass()
    assert len(io.receivers["am"].got) == 2, "sent again after 60 s: Alertmanager keeps it while it fires"
    assert len(io.receivers["hook"].got) == 1, "the other channels are told once"
    (_, again) = io.receivers["am"].got[1]
    assert again[0]["endsAt"] == "1970-01-01T00:21:41.000Z"  # four resend intervals after this send
    assert len([d for d in io.delivery_rows.values() if d.channel == "am"]) == 1, "repeats are not recorded"


def test_a_verdict_that_changes_within_the_rule_is_one_alert_with_the_same_labels() -> None:
    rule = Rule("Down", ConditionKind.VERDICT, verdicts=frozenset({Verdict.STALLED, Verdict.FAILED}),
                summary="{connector} is {verdict}")  # fmt: skip
    io, clock = MemoryIO(), Clock()
    r = reconciler(io, clock, [rule])
    io.current = [stalled("orders", clock.now - 1000)]
    r.run_pass()
    clock.now += 61_000
    io.current = [Condition(ConditionKind.VERDICT, "orders", "", clock.now, "trace", values={"verdict": "failed"})]
    r.run_pass()
    assert len(io.receivers["hook"].got) == 1, "still the same alert: no second notification"
    (alert,) = io.alert_rows.values()
    assert (alert.summary, alert.values) == ("orders is failed", {"verdict": "failed"})
    first, again = (body[0] for _, body in io.receivers["am"].got)
    assert first["labels"] == again["labels"], "Alertmanager sees the same alert (its identity is its labels)"
    assert (first["annotations"]["verdict"], again["annotations"]["verdict"]) == ("stalled", "failed")
