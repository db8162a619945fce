"""Failed logins counted per claimed name and per address over a sliding window (security/login_throttle.py, issue 33
finding 6), and refusals audited in summary (security/refusal_sampler.py): pure, on a clock the test moves."""

from __future__ import annotations

import pytest

from connect_state.security.login_throttle import LimitKind, LoginThrottle, Throttled, address_key
from connect_state.security.refusal_sampler import RefusalKey, RefusalSampler, Summary


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def throttle(clock: Clock, per_principal: int = 3, per_address: int = 5, tracked: int = 100) -> LoginThrottle:
    return LoginThrottle(60.0, per_principal, per_address, tracked, clock=clock)


def test_a_name_is_refused_after_its_failures_from_any_address(clock: Clock) -> None:
    limits = throttle(clock)
    for i in range(3):
        assert limits.refused("alice", f"10.0.0.{i}") is None
        limits.failed("alice", f"10.0.0.{i}")
        clock.now += 10
    assert limits.refused("alice", "10.0.0.99") == Throttled(LimitKind.PRINCIPAL, "alice", 30)  # 1000 + 60 - 1030
    assert limits.refused("bob", "10.0.0.99") is None  # another name, a fresh address
    clock.now = 1060.0  # the first failure leaves the window
    assert limits.refused("alice", "10.0.0.99") is None


def test_an_address_is_refused_after_its_failures_under_any_name(clock: Clock) -> None:
    limits = throttle(clock)
    for i in range(5):
        limits.failed(f"user{i}", "192.0.2.7")
    assert limits.refused("someone-else", "192.0.2.7") == Throttled(LimitKind.ADDRESS, "192.0.2.7", 60)
    assert limits.refused(None, "192.0.2.7") is not None  # a bearer token: no name, the address still counts
    assert limits.refused("someone-else", "192.0.2.8") is None


def test_refused_attempts_do_not_count_and_nothing_clears_a_limit(clock: Clock) -> None:
    limits = throttle(clock)
    for _ in range(5):
        limits.failed(None, "192.0.2.7")
    for _ in range(100):  # refused: not counted, so the refusal ends a window after the last counted failure
        assert limits.refused(None, "192.0.2.7") is not None
    clock.now += 60
    assert limits.refused(None, "192.0.2.7") is None


def test_ipv6_clients_are_counted_by_their_64(clock: Clock) -> None:
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::2") == "2001:db8:1:2::/64"
    assert address_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert address_key("192.0.2.7") == "192.0.2.7" and address_key(None) is None
    limits = throttle(clock)
    for i in range(5):
        limits.failed(None, f"2001:db8:1:2::{i + 1}")
    assert limits.refused(None, "2001:db8:1:2:ffff::9") is not None
    assert limits.refused(None, "2001:db8:1:3::1") is None


def test_memory_is_bounded_and_the_least_recently_failing_go_first(clock: Clock) -> None:
    limits = throttle(clock, per_principal=2, per_address=0, tracked=10)
    limits.failed("victim", None)
    for i in range(1000):
        limits.failed(f"guess-{i}", None)
        if i % 5 == 0:
            limits.failed("victim", None)  # still failing: kept
    assert len(limits) == 10
    assert limits.refused("victim", None) is not None


def test_zero_turns_a_limit_off(clock: Clock) -> None:
    limits = throttle(clock, per_principal=0, per_address=0)
    for _ in range(100):
        limits.failed("alice", "192.0.2.7")
    assert limits.refused("alice", "192.0.2.7") is None and len(limits) == 0
    with pytest.raises(ValueError):
        LoginThrottle(60.0, -1, 5, 10)


KEY = RefusalKey(None, None, "192.0.2.7", "GET", "connectors.list_connectors", "read", 401)


def test_the_first_refusal_of_a_window_is_written_the_others_summarised(clock: Clock) -> None:
    sampler = RefusalSampler(60.0, clock=clock)
    assert sampler.admit(KEY, "t0", "/connectors") == (True, [])
    for i in range(1, 1000):
        assert sampler.admit(KEY, f"t{i}", "/connectors") == (False, [])
    other = RefusalKey("bob", "basic", "192.0.2.7", "PUT", "connectors.stop_connector", "operate", 403)
    assert sampler.admit(other, "u0", "/connectors/x/stop") == (True, [])
    assert sampler.due() == []
    clock.now += 60
    assert sampler.due() == [Summary(KEY, 999, "t0", "t999", "/connectors")]  # bob's window counted nothing
    assert len(sampler) == 0
    assert sampler.admit(KEY, "t1000", "/connectors") == (True, [])  # a new window


def test_a_passed_window_is_summarised_at_the_next_refusal_and_all_at_shutdown(clock: Clock) -> None:
    sampler = RefusalSampler(60.0, clock=clock)
    sampler.admit(KEY, "t0", "/connectors")
    sampler.admit(KEY, "t1", "/connectors")
    clock.now += 61
    assert sampler.admit(KEY, "t2", "/connectors") == (True, [Summary(KEY, 1, "t0", "t1", "/connectors")])
    sampler.admit(KEY, "t3", "/connectors")
    assert sampler.due(every=True) == [Summary(KEY, 1, "t2", "t3", "/connectors")]


def test_sampler_memory_is_bounded_by_closing_the_oldest_window(clock: Clock) -> None:
    sampler = RefusalSampler(60.0, tracked=3, clock=clock)
    sampler.admit(KEY, "t0", "/connectors")
    sampler.admit(KEY, "t1", "/connectors")
    written = []
    for i in range(10):
        key = RefusalKey(None, None, f"198.51.100.{i}", "GET", "connectors.list_connectors", "read", 401)
        written.append(sampler.admit(key, f"a{i}", "/connectors"))
    assert len(sampler) == 3
    assert written[2] == (True, [Summary(KEY, 1, "t0", "t1", "/connectors")])  # closed early, its count kept


def test_window_zero_writes_every_refusal(clock: Clock) -> None:
    sampler = RefusalSampler(0.0, clock=clock)
    assert all(sampler.admit(KEY, f"t{i}", "/connectors") == (True, []) for i in range(10))


def test_long_names_and_paths_are_kept_short(clock: Clock) -> None:
    limits = throttle(clock, per_principal=1)
    limits.failed("x" * 8000, None)
    refused = limits.refused("x" * 8000, None)
    assert refused is not None and refused.subject.startswith("sha256:") and len(refused.subject) == 71
    assert limits.refused("x" * 7999, None) is None
    sampler = RefusalSampler(60.0, clock=clock)
    sampler.admit(KEY, "t0", "/" + "p" * 8000)
    sampler.admit(KEY, "t1", "/q")
    (summary,) = sampler.due(every=True)
    assert len(summary.path) == 1027 and summary.path.endswith("...")
