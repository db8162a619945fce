"""Auto-restart (issue 35 item 2): the policy (Strimzi's n²+n backoff, cap, maximum, reset, opt-in globs, a connector
config that may only tighten) and the passes (paused or stopped never, outcomes judged from the status changes)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from connect_state.core.errors import ConfigError, ConnectStateError
from connect_state.core.settings import Settings, load_settings
from connect_state.restarts.policy import RestartPolicy, policy_from_settings
from connect_state.restarts.reconciler import (
    Action,
    Attempt,
    ConnectorHealth,
    Outcome,
    RestartsReconciler,
    StatusChange,
    decide,
    failed_since,
    health_from_row,
    judge,
)
from connect_state.tables.schemas import CONNECTOR_RESTARTS
from tests.unit.conftest import MakeClient
from tests.unit.helpers import write_table

MINUTE = 60_000
POLICY = RestartPolicy(connectors=("orders-*", "billing"), backoff_base_ms=MINUTE, backoff_max_ms=60 * MINUTE)


def failed(name: str = "orders-1", target: str = "STARTED", config: Mapping[str, str] | None = None) -> ConnectorHealth:
    return ConnectorHealth(
        name, target, "RUNNING", tasks={0: ("RUNNING", None), 1: ("FAILED", "java.io.IOException: nope")},
        config=dict(config or {}),
    )  # fmt: skip


def attempt(n: int, at: int, outcome: Outcome = Outcome.FAILED_AGAIN, outcome_at: int | None = None) -> Attempt:
    return Attempt("orders-1", at, n, "task 1 FAILED", "trace", 0, outcome, outcome_at)


# --- the policy ------------------------------------------------------------------------------------------------------


def test_backoff_is_strimzis_n_squared_plus_n_minutes_capped() -> None:
    assert [POLICY.delay_ms(n) // MINUTE for n in range(10)] == [0, 2, 6, 12, 20, 30, 42, 56, 60, 60]


def test_the_series_of_restarts_follows_the_backoff_from_each_request() -> None:
    """Restart, then never before 2 min after it, then 6 min after the second, ..."""
    history: list[Attempt] = []
    now, times = 0, []
    while len(history) < 4:
        decision = decide(failed(), history, POLICY, now)
        if decision.action == Action.RESTART:
            assert decision.attempt == len(history) + 1
            times.append(now // MINUTE)
            history.append(attempt(decision.attempt, now))
        else:
            assert decision.action == Action.WAIT and decision.due_at is not None and decision.due_at > now
        now += MINUTE // 2
    assert times == [0, 2, 8, 20]


def test_at_most_max_attempts_then_it_gives_up() -> None:
    policy = replace(POLICY, max_attempts=3)
    history = [attempt(1, 0), attempt(2, 2 * MINUTE), attempt(3, 8 * MINUTE)]
    decision = decide(failed(), history, policy, 10**9)
    assert decision.action == Action.NONE and "gave up after 3" in decision.why
    assert decide(failed(), history[:2], policy, 10**9).action == Action.RESTART


def test_a_failure_long_after_the_last_outcome_starts_a_new_series() -> None:
    policy = replace(POLICY, max_attempts=2, reset_after_ms=30 * MINUTE)
    history = [attempt(1, 0), attempt(2, 2 * MINUTE, Outcome.RECOVERED, outcome_at=3 * MINUTE)]
    # failed again 29 minutes after the recovery: the series goes on, and it is at its maximum
    assert decide(failed(), history, policy, 40 * MINUTE, since=32 * MINUTE).action == Action.NONE
    # 30 minutes after: a new series, restarted at once as its first
    fresh = decide(failed(), history, policy, 40 * MINUTE, since=33 * MINUTE)
    assert (fresh.action, fresh.attempt) == (Action.RESTART, 1)


@pytest.mark.parametrize("target", ["PAUSED", "STOPPED"])
def test_never_while_paused_or_stopped(target: str) -> None:
    decision = decide(failed(target=target), [], POLICY, 0)
    assert decision.action == Action.NONE and target in decision.why


@pytest.mark.parametrize(("name", "opted_in"), [("orders-1", True), ("orders", False), ("billing", True), ("x", False)])
def test_opt_in_by_glob(name: str, opted_in: bool) -> None:
    assert (decide(failed(name), [], POLICY, 0).action == Action.RESTART) is opted_in
    assert decide(failed(name), [], RestartPolicy(), 0).action == Action.NONE  # default: off for every connector


def test_healthy_connectors_are_not_restarted() -> None:
    healthy = ConnectorHealth("orders-1", "STARTED", "RUNNING", tasks={0: ("RUNNING", None)})
    assert decide(healthy, [], POLICY, 0).action == Action.NONE
    assert decide(replace(healthy, connector_state="FAILED"), [], POLICY, 0).action == Action.RESTART


def test_a_connector_config_may_turn_it_off_but_never_on() -> None:
    assert decide(failed(config={"connect-state.restart.auto.enabled": "false"}), [], POLICY, 0).action == Action.NONE
    not_opted = failed("other", config={"connect-state.restart.auto.enabled": "true"})
    assert decide(not_opted, [], POLICY, 0).action == Action.NONE


def test_a_connector_config_only_tightens() -> None:
    own = POLICY.for_connector(
        {
            "connect-state.restart.auto.max.attempts": "3",  # lower: applied
            "connect-state.restart.auto.backoff.base.ms": "1000",  # shorter: ignored
            "connect-state.restart.auto.backoff.max.ms": "7200000",  # longer: applied
            "connect-state.restart.auto.reset.after.ms": "soon",  # unreadable: ignored
            "restart.auto.max.attempts": "1",  # not ours (no prefix): Connect's or the connector's, ignored
        }
    )
    assert own.policy == replace(POLICY, max_attempts=3, backoff_max_ms=7_200_000)
    assert len(own.ignored) == 2 and "may only tighten the operator's 60000" in own.ignored[0]
    looser = POLICY.for_connector({"connect-state.restart.auto.max.attempts": "1000"})
    assert looser.policy == POLICY and looser.ignored


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("restart.auto.max.attempts", "0", "restart.auto.max.attempts: expected at least 1, got 0"),
        ("restart.auto.backoff.base.ms", "-1", "restart.auto.backoff.base.ms: expected milliseconds, 0 or more"),
        ("restart.auto.backoff.max.ms", "1000", "restart.auto.backoff.max.ms: expected at least"),
        ("restart.auto.reset.after.ms", "soon", "restart.auto.reset.after.ms: expected an integer, got 'soon'"),
    ],
)
def test_a_bad_setting_is_a_config_error_naming_it(key: str, value: str, said: str) -> None:
    with pytest.raises(ConfigError) as raised:
        policy_from_settings(load_settings(overrides={key: value}, environ={}))
    assert said in str(raised.value)


def test_the_shipped_defaults_are_off_with_strimzis_minutes() -> None:
    policy = policy_from_settings(load_settings(environ={}))
    assert not policy.enabled
    assert policy.delay_ms(1) == 2 * MINUTE


# --- outcomes --------------------------------------------------------------------------------------------------------


def test_outcomes_from_the_status_changes_after_the_request() -> None:
    pending = attempt(1, 1000, Outcome.PENDING)
    running = ConnectorHealth("orders-1", "STARTED", "RUNNING", tasks={0: ("RUNNING", None), 1: ("RUNNING", None)})
    before = [StatusChange(500, 1, "FAILED")]
    assert judge(pending, failed(), before).outcome == Outcome.PENDING  # nothing happened since the request
    assert judge(pending, running, before).outcome == Outcome.PENDING  # the table says RUNNING, no evidence yet
    restarted = [*before, StatusChange(1200, 1, "RESTARTING"), StatusChange(1300, 1, "RUNNING")]
    recovered = judge(pending, running, restarted)
    assert (recovered.outcome, recovered.outcome_at) == (Outcome.RECOVERED, 1300)
    again = judge(pending, failed(), [*restarted, StatusChange(1400, 1, "FAILED")])
    assert (again.outcome, again.outcome_at, again.detail) == (Outcome.FAILED_AGAIN, 1400, "task 1 FAILED again")
    assert judge(pending, failed(target="PAUSED"), []).outcome == Outcome.INTERRUPTED
    assert judge(pending, None, []).outcome == Outcome.INTERRUPTED
    assert judge(again, running, restarted) is again  # final


def test_failed_since_is_the_latest_failure_of_what_is_failed_now() -> None:
    changes = [StatusChange(100, 1, "FAILED"), StatusChange(200, 1, "RUNNING"), StatusChange(300, 1, "FAILED"),
               StatusChange(400, 0, "FAILED"), StatusChange(500, 0, "RUNNING")]  # fmt: skip
    assert failed_since(failed(), changes) == 300


def test_a_connectors_row_as_health() -> None:
    task = {"id": 0, "state": "FAILED", "trace": "boom", "worker_id": "w", "generation": 1, "version": "1"}
    row = {"name": "c", "target_state": "STARTED", "connector_state": "RUNNING", "connector_trace": None,
           "config": '{"connect-state.restart.auto.enabled": "false"}', "deleted": False, "tasks": [task]}  # fmt: skip
    health = health_from_row(row)
    assert (health.failed_tasks, health.trace(), health.reason()) == ([0], "boom", "task 0 FAILED")
    assert health.config == {"connect-state.restart.auto.enabled": "false"}


# --- passes ----------------------------------------------------------------------------------------------------------


class FakeIO:
    def __init__(self, rows: list[dict[str, Any]], target: str | None = "STARTED") -> None:
        self.rows = rows
        self.target = target
        self.recorded: dict[tuple[str, int], Attempt] = {}
        self.restarts: list[str] = []
        self.changes: dict[str, list[StatusChange]] = {}
        self.fail_with: Exception | None = None

    def connectors(self) -> list[Mapping[str, Any]]:
        return self.rows

    def attempts(self) -> list[Attempt]:
        return list(self.recorded.values())

    def status_changes(self, connectors: Iterable[str]) -> dict[str, list[StatusChange]]:
        return {name: self.changes.get(name, []) for name in connectors}

    def target_state(self, connector: str) -> str | None:
        return self.target

    def restart(self, connector: str) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.restarts.append(connector)

    def record(self, attempts: Sequence[Attempt]) -> None:
        self.recorded.update({(a.connector, a.requested_at): a for a in attempts})


def row(name: str, task_state: str, target: str = "STARTED") -> dict[str, Any]:
    return {"name": name, "target_state": target, "connector_state": "RUNNING", "config": "{}", "deleted": False,
            "tasks": [{"id": 0, "state": task_state, "trace": "java.io.FileNotFoundException"}]}  # fmt: skip


def test_a_pass_restarts_once_then_judges_the_outcome() -> None:
    clock = iter(range(1000, 100_000, 1000))
    io = FakeIO([row("orders-1", "FAILED"), row("other", "FAILED")])
    reconciler = RestartsReconciler(io, POLICY, lambda: next(clock))
    reconciler.run_pass()
    reconciler.run_pass()  # within the backoff: no second request
    assert io.restarts == ["orders-1"]
    (first,) = io.recorded.values()
    assert (first.attempt, first.reason, first.trace, first.outcome) == (
        1, "task 0 FAILED", "java.io.FileNotFoundException", Outcome.PENDING)  # fmt: skip
    io.rows = [row("orders-1", "RUNNING")]
    io.changes["orders-1"] = [StatusChange(first.requested_at + 5, 0, "RUNNING")]
    reconciler.run_pass()
    assert [a.outcome for a in io.recorded.values()] == [Outcome.RECOVERED]
    assert reconciler.run_pass() is None  # nothing pending, nothing failed


def test_a_pass_never_restarts_when_the_config_topic_says_paused() -> None:
    """The table may lag a pause: the config topic read to its end decides."""
    io = FakeIO([row("orders-1", "FAILED")], target="PAUSED")
    RestartsReconciler(io, POLICY, lambda: 0).run_pass()
    assert io.restarts == [] and io.recorded == {}


def test_a_request_that_cannot_be_written_is_recorded_not_sent() -> None:
    io = FakeIO([row("orders-1", "FAILED")])
    io.fail_with = ConnectStateError("Kafka unreachable")
    RestartsReconciler(io, POLICY, lambda: 0).run_pass()
    (only,) = io.recorded.values()
    assert (only.outcome, only.detail) == (Outcome.NOT_SENT, "Kafka unreachable")


def test_an_unexpected_error_after_the_request_is_recorded_so_the_backoff_holds() -> None:
    io = FakeIO([row("orders-1", "FAILED")])
    io.fail_with = KeyError("connector_worker_id")
    reconciler = RestartsReconciler(io, POLICY, lambda: 0)
    with pytest.raises(KeyError):
        reconciler.run_pass()
    (only,) = io.recorded.values()
    assert only.outcome == Outcome.PENDING and "may have been written" in (only.detail or "")
    io.fail_with = None
    reconciler.run_pass()
    assert io.restarts == []  # within the backoff


def test_the_status_changes_win_over_a_lagging_connectors_row() -> None:
    """``connector_events`` may be ahead of ``connectors``: a restart that the events show RUNNING is not repeated."""
    now = [0]
    io = FakeIO([row("orders-1", "FAILED")])
    reconciler = RestartsReconciler(io, POLICY, lambda: now[0])
    reconciler.run_pass()
    io.changes["orders-1"] = [StatusChange(-5, 0, "FAILED"), StatusChange(10, 0, "RESTARTING"),
                              StatusChange(20, 0, "RUNNING")]  # fmt: skip
    now[0] = 2 * MINUTE  # the backoff has passed, and the row still says FAILED
    reconciler.run_pass()
    assert io.restarts == ["orders-1"]
    assert [(a.outcome, a.outcome_at) for a in io.recorded.values()] == [(Outcome.RECOVERED, 20)]


def test_a_pending_attempt_without_effect_is_closed_by_the_next() -> None:
    now = [0]
    io = FakeIO([row("orders-1", "FAILED")])
    reconciler = RestartsReconciler(io, POLICY, lambda: now[0])
    reconciler.run_pass()
    now[0] = 2 * MINUTE
    reconciler.run_pass()
    assert [(a.attempt, a.outcome) for a in io.recorded.values()] == [(1, Outcome.NO_EFFECT), (2, Outcome.PENDING)]


# --- the API ---------------------------------------------------------------------------------------------------------


def restart_row(connector: str, minute: int, outcome: str) -> dict[str, Any]:
    at = dt.datetime(2026, 11, 28, 13, minute, tzinfo=dt.UTC)
    return {"connector": connector, "requested_at": at, "attempt": 1, "reason": "task 0 FAILED", "trace": "t",
            "failed_since": at - dt.timedelta(seconds=2), "outcome": outcome, "outcome_at": None, "detail": None,
            "updated_at": at}  # fmt: skip


def test_the_api_lists_restarts_newest_first_and_by_outcome(settings: Settings, make_client: MakeClient) -> None:
    client = make_client()
    assert client.get("/restarts").get_json() == {"restarts": []}  # no table yet: auto-restart never acted
    rows = [restart_row("a", 1, "recovered"), restart_row("b", 2, "pending"), restart_row("a", 3, "failed-again")]
    write_table(settings.delta_root, CONNECTOR_RESTARTS, rows)
    client = make_client()
    answer = client.get("/connectors/a/restarts").get_json()
    assert answer["name"] == "a"
    assert [(r["requested_at"], r["outcome"]) for r in answer["restarts"]] == [
        ("2026-11-28T13:03:00.000Z", "failed-again"), ("2026-11-28T13:01:00.000Z", "recovered")]  # fmt: skip
    assert answer["restarts"][0]["failed_since"] == "2026-11-28T13:02:58.000Z"
    pending = client.get("/restarts?outcome=pending&outcome=recovered").get_json()["restarts"]
    assert [(r["connector"], r["outcome"]) for r in pending] == [("b", "pending"), ("a", "recovered")]
    bad = client.get("/restarts?outcome=fine")
    assert bad.status_code == 400 and bad.get_json()["message"].startswith("Unknown outcome fine: expected one of")
