"""Leases (connect_state/leases/decisions.py, connect_state/tables/lease_store.py, api/leases.py) without Spark: the
decisions, the keeper on an in-memory compare-and-set store (races, takeover, fencing, release), the leased task,
``GET /leases``."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings, load_settings
from connect_state.leases.decisions import (
    Action,
    Lease,
    LeaseLost,
    LeaseTiming,
    current_lease,
    decide,
    holds,
    local_deadline,
    new_holder_id,
    released,
)
from connect_state.spark.leases import LeasedTask
from connect_state.tables.lease_store import DeltaLeaseStore, LeaseKeeper
from connect_state.tables.schemas import LEASES
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables

DURATION = 30_000
TIMING = LeaseTiming(DURATION, 10_000)


# --- the decisions --------------------------------------------------------------------------------------------------


def lease(holder: str = "a", epoch: int = 1, renewed: int = 1_000, expires: int = 31_000) -> Lease:
    return Lease("cleanup", holder, epoch, 1_000, renewed, expires)


def test_nobody_holds_it_yet_the_first_instance_takes_epoch_1() -> None:
    decision = decide(None, "cleanup", "a", None, 5_000, DURATION)
    assert decision.action is Action.TAKE and decision.expected is None
    assert decision.proposed == Lease("cleanup", "a", 1, 5_000, 5_000, 35_000)


def test_the_holder_renews_with_the_same_epoch() -> None:
    current = lease()
    decision = decide(current, "cleanup", "a", 1, 20_000, DURATION)
    assert decision.action is Action.RENEW and decision.expected == current
    assert decision.proposed == replace(current, renewed_at=20_000, expires_at=50_000)


def test_another_instance_waits_while_the_lease_is_live() -> None:
    decision = decide(lease(), "cleanup", "b", None, 30_999, DURATION)
    assert decision.action is Action.WAIT and decision.proposed is None
    assert "held by a (epoch 1) until 31000" in decision.reason


def test_an_expired_lease_is_taken_over_with_the_next_epoch() -> None:
    decision = decide(lease(epoch=4), "cleanup", "b", None, 31_000, DURATION)
    assert decision.action is Action.TAKE and decision.expected == lease(epoch=4)
    assert decision.proposed == Lease("cleanup", "b", 5, 31_000, 31_000, 61_000)
    assert decision.reason == "a's lease (epoch 4) expired"


def test_a_released_lease_is_taken_at_once() -> None:
    gone = released(lease(epoch=2), 10_000)
    assert gone.expires_at == gone.renewed_at == 10_000 and gone.holder == "a" and gone.epoch == 2
    decision = decide(gone, "cleanup", "b", None, 10_001, DURATION)
    assert decision.action is Action.TAKE and decision.proposed.epoch == 3  # type: ignore[union-attr]
    assert decision.reason == "a's lease (epoch 2) released"


def test_an_expired_lease_of_its_own_is_taken_again_as_a_new_epoch() -> None:
    decision = decide(lease(), "cleanup", "a", 1, 40_000, DURATION)
    assert decision.action is Action.TAKE and decision.proposed.epoch == 2  # type: ignore[union-attr]


def test_its_own_lease_it_gave_up_locally_is_taken_again_as_a_new_epoch() -> None:
    decision = decide(lease(), "cleanup", "a", None, 20_000, DURATION)
    assert decision.action is Action.TAKE and decision.proposed.epoch == 2  # type: ignore[union-attr]


def test_a_holder_with_a_stale_epoch_does_not_renew() -> None:
    decision = decide(lease(holder="a", epoch=3), "cleanup", "b", 2, 20_000, DURATION)
    assert decision.action is Action.WAIT


def test_fencing_check() -> None:
    current = lease(epoch=3)
    assert holds(current, "a", 3, 30_999)
    assert not holds(current, "a", 3, 31_000)  # expired
    assert not holds(current, "a", 2, 20_000)  # an older epoch: someone took it over in between
    assert not holds(current, "b", 3, 20_000)
    assert not holds(None, "a", 3, 20_000)
    assert not holds(current, "a", None, 20_000)


def test_current_lease_of_several_rows_is_the_same_for_every_reader() -> None:
    rows = [lease("b", 2), lease("a", 2), lease("c", 1, renewed=9_000)]
    assert current_lease(rows) == lease("b", 2)
    assert current_lease(reversed(rows)) == lease("b", 2)
    assert current_lease([]) is None


def test_timing_and_local_deadline() -> None:
    assert local_deadline(100.0, TIMING) == 120.0  # 30 s lease, stops acting 10 s (one renewal) early
    with pytest.raises(ConfigError, match="at least twice"):
        LeaseTiming(15_000, 10_000)
    with pytest.raises(ConfigError, match="positive"):
        LeaseTiming(15_000, 0)


def test_holder_ids_are_unique_and_readable() -> None:
    a, b = new_holder_id("cleanup"), new_holder_id("cleanup")
    assert a != b and a.startswith("cleanup@")


# --- the keeper on a compare-and-set store --------------------------------------------------------------------------


class MemoryStore:
    """A lease store with the semantics of the Delta one: a write applies only when the row is still ``expected``."""

    def __init__(self) -> None:
        self.rows: dict[str, Lease] = {}
        self.writes = 0
        self.fail_reads = False
        self.before_write = None  # a callable run just before a write applies (to interleave a rival's write)

    def read(self, name: str) -> Lease | None:
        if self.fail_reads:
            raise OSError("storage unavailable")
        return self.rows.get(name)

    def write(self, expected: Lease | None, proposed: Lease) -> bool:
        if self.before_write is not None:
            hook, self.before_write = self.before_write, None
            hook()
        self.writes += 1
        if self.rows.get(proposed.name) == expected:
            self.rows[proposed.name] = proposed
        return True

    def vacuum(self) -> None:
        pass


class Clocks:
    def __init__(self) -> None:
        self.wall = 1_000_000
        self.mono = 500.0

    def advance(self, ms: int) -> None:
        self.wall += ms
        self.mono += ms / 1000.0


def keeper(store: MemoryStore, clocks: Clocks, holder: str) -> LeaseKeeper:
    return LeaseKeeper(store, "cleanup", TIMING, holder, clock=lambda: clocks.wall, monotonic=lambda: clocks.mono)


def test_second_instance_waits_then_takes_over_after_expiry_and_the_first_is_fenced() -> None:
    store, clocks = MemoryStore(), Clocks()
    a, b = keeper(store, clocks, "a"), keeper(store, clocks, "b")
    assert a.try_acquire() and a.epoch == 1
    assert not b.try_acquire() and b.lease is None
    a.fence()  # a holds it

    clocks.advance(10_000)
    assert a.renew() and store.rows["cleanup"].expires_at == clocks.wall + DURATION
    clocks.advance(DURATION - 1)
    assert not b.try_acquire()  # not expired yet
    assert not a.held  # a stopped acting one renewal interval before the expiry
    with pytest.raises(LeaseLost):
        a.check()

    clocks.advance(1)
    assert b.try_acquire() and b.epoch == 2
    with pytest.raises(LeaseLost):
        a.fence()
    assert not a.renew()  # a's renewal finds b's epoch
    assert store.rows["cleanup"].holder == "b"


def test_a_holder_whose_lease_was_taken_over_learns_it_at_the_fence() -> None:
    store, clocks = MemoryStore(), Clocks()
    a = keeper(store, clocks, "a")
    assert a.try_acquire()
    store.rows["cleanup"] = replace(store.rows["cleanup"], holder="b", epoch=2)  # b took it (a's clock was off)
    with pytest.raises(LeaseLost, match="no longer holds it"):
        a.fence()
    assert a.lease is None and not a.held


def test_of_two_instances_deciding_at_once_one_wins() -> None:
    store, clocks = MemoryStore(), Clocks()
    a, b = keeper(store, clocks, "a"), keeper(store, clocks, "b")
    store.before_write = lambda: b.try_acquire()  # b reads, decides and writes between a's read and a's write
    assert not a.try_acquire()
    assert b.held and store.rows["cleanup"].holder == "b" and store.rows["cleanup"].epoch == 1
    assert not a.held


def test_a_renewal_that_fails_on_io_keeps_the_lease_until_the_local_deadline() -> None:
    store, clocks = MemoryStore(), Clocks()
    a = keeper(store, clocks, "a")
    assert a.try_acquire()
    store.fail_reads = True
    clocks.advance(10_000)
    assert a.renew()  # failed, still held
    clocks.advance(9_999)
    assert a.renew()
    clocks.advance(1)
    assert not a.renew()  # 20 s after the last successful renewal: lost


def test_a_renewal_that_keeps_losing_races_to_other_commits_keeps_the_lease_until_the_local_deadline() -> None:
    store, clocks = MemoryStore(), Clocks()
    a = keeper(store, clocks, "a")
    assert a.try_acquire()
    store.write = lambda expected, proposed: False  # type: ignore[method-assign]  # every commit loses a race
    clocks.advance(10_000)
    assert a.renew() and a.held and a.epoch == 1
    clocks.advance(10_000)
    assert not a.renew() and not a.held


def test_release_lets_the_next_instance_take_it_at_once() -> None:
    store, clocks = MemoryStore(), Clocks()
    a, b = keeper(store, clocks, "a"), keeper(store, clocks, "b")
    assert a.try_acquire()
    a.release()
    assert not a.held and store.rows["cleanup"].expires_at == clocks.wall
    clocks.advance(1)
    assert b.try_acquire() and b.epoch == 2
    a.release()  # nothing held: nothing written
    assert store.rows["cleanup"].holder == "b"


def test_release_does_not_touch_a_lease_taken_over_meanwhile() -> None:
    store, clocks = MemoryStore(), Clocks()
    a = keeper(store, clocks, "a")
    assert a.try_acquire()
    store.rows["cleanup"] = Lease("cleanup", "b", 2, clocks.wall, clocks.wall, clocks.wall + DURATION)
    a.release()
    assert store.rows["cleanup"].holder == "b" and store.rows["cleanup"].expires_at == clocks.wall + DURATION


def test_wait_until_held_is_bounded() -> None:
    store = MemoryStore()
    assert LeaseKeeper(store, "cleanup", TIMING, "a").try_acquire()  # real clocks: a holds it for 30 s
    b = LeaseKeeper(store, "cleanup", LeaseTiming(200, 100), "b")
    started = time.monotonic()
    assert not b.wait_until_held(threading.Event(), timeout_s=0.3)
    assert time.monotonic() - started < 2.0


# --- the leased task ------------------------------------------------------------------------------------------------


class Work:
    """An inner task: counts its runs; runs until stopped, or ends at once with ``ends``."""

    def __init__(self, ends: int | None = None) -> None:
        self.name = "work"
        self.runs = 0
        self.ends = ends
        self.running = threading.Event()

    def run(self, stop: threading.Event) -> int:
        self.runs += 1
        self.running.set()
        if self.ends is not None:
            return self.ends
        stop.wait(30)
        self.running.clear()
        return 0


def real_keeper(store: MemoryStore, holder: str, duration_ms: int = 1_000, renew_ms: int = 200) -> LeaseKeeper:
    return LeaseKeeper(store, "cleanup", LeaseTiming(duration_ms, renew_ms), holder)


def test_leased_task_runs_only_while_held_and_a_catch_up_of_a_second_instance_does_nothing() -> None:
    store, work = MemoryStore(), Work()
    a = LeasedTask("cleanup", real_keeper(store, "a"), lambda: work, once=False, poll_s=0.05)
    stop_a = threading.Event()
    runner = threading.Thread(target=lambda: a.run(stop_a), daemon=True)
    runner.start()
    assert work.running.wait(5)

    other = Work(ends=0)
    b = LeasedTask("cleanup", real_keeper(store, "b"), lambda: other, once=True, poll_s=0.05)
    assert b.run(threading.Event()) == 0 and b.skipped and other.runs == 0
    assert b.while_held(lambda: "swept")() is None  # its catch-up step does not run either

    time.sleep(0.6)  # several renewals: still a's, never expired
    assert store.rows["cleanup"].holder == "a" and store.rows["cleanup"].epoch == 1
    stop_a.set()
    runner.join(5)
    assert not runner.is_alive() and work.runs == 1


def test_leased_task_stops_its_work_when_the_lease_is_lost_and_waits_for_it_again() -> None:
    store, work = MemoryStore(), Work()
    lost: list[str] = []
    task = LeasedTask(
        "heartbeats", real_keeper(store, "a"), lambda: work, once=False, on_lost=lambda t: lost.append(t.name)
    )
    task.poll_s = 0.05
    stop = threading.Event()
    runner = threading.Thread(target=lambda: task.run(stop), daemon=True)
    runner.start()
    assert work.running.wait(5)
    now = int(time.time() * 1000)
    store.rows["cleanup"] = Lease("cleanup", "b", 2, now, now, now + 700)  # taken over by b
    deadline = time.monotonic() + 5
    while not lost and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lost == ["work"]
    time.sleep(0.2)
    assert not work.running.is_set()  # stopped, waiting for b's lease to expire
    assert work.running.wait(5) and work.runs == 2  # b's lease expired: a took it again (epoch 3) and runs again
    assert store.rows["cleanup"].holder == "a" and store.rows["cleanup"].epoch == 3
    stop.set()
    runner.join(5)
    assert not runner.is_alive()


def test_leased_task_renews_while_its_work_starts_slowly() -> None:
    store, work = MemoryStore(), Work(ends=0)

    def slow_start() -> Work:
        time.sleep(1.5)  # longer than the lease: starting a query and its tables on a busy driver
        return work

    task = LeasedTask("heartbeats", real_keeper(store, "a"), slow_start, once=True, poll_s=0.05)
    assert task.run(threading.Event()) == 0 and work.runs == 1
    assert store.rows["cleanup"].epoch == 1 and task.keeper.held  # renewed all along, never lost


def test_leased_catch_up_runs_once_and_its_step_after_a_renewal() -> None:
    store, work = MemoryStore(), Work(ends=0)
    task = LeasedTask("heartbeats", real_keeper(store, "a"), lambda: work, once=True, poll_s=0.05)
    assert task.run(threading.Event()) == 0 and work.runs == 1 and not task.skipped
    writes = store.writes
    assert task.while_held(lambda: "swept")() == "swept"
    assert store.writes == writes + 1  # renewed first


def test_leased_task_reports_its_works_failure() -> None:
    store = MemoryStore()
    task = LeasedTask("cleanup", real_keeper(store, "a"), lambda: Work(ends=1), once=False, poll_s=0.05)
    assert task.run(threading.Event()) == 1  # the supervisor restarts it (the lease expires if it waits long)


# --- GET /leases ----------------------------------------------------------------------------------------------------

UTC = dt.UTC


def at(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=UTC)


def row(name: str, holder: str, epoch: int, renewed: int, expires: int) -> dict:
    return {
        "name": name,
        "holder": holder,
        "epoch": epoch,
        "acquired_at": at(renewed - 5_000),
        "renewed_at": at(renewed),
        "expires_at": at(expires),
    }


def test_get_leases_shows_holder_epoch_and_expiry(make_client: MakeClient) -> None:
    now = int(time.time() * 1000)
    rows = [
        row("heartbeats", "heartbeats@h2:2:b", 1, now - 40_000, now - 10_000),
        row("cleanup", "cleanup@h1:1:a", 3, now, now + 30_000),
        row("stopped", "x@h3:3:c", 2, now - 1_000, now - 1_000),
    ]
    client = make_client(tables=InMemoryTables({LEASES.name: rows}))
    body = client.get("/leases").get_json()
    assert [lease["name"] for lease in body["leases"]] == ["cleanup", "heartbeats", "stopped"]
    cleanup, heartbeats, stopped = body["leases"]
    assert cleanup["holder"] == "cleanup@h1:1:a" and cleanup["epoch"] == 3 and cleanup["state"] == "held"
    assert cleanup["expires_at"] == now + 30_000 and cleanup["renewed_at"] == now
    assert 0 < cleanup["expires_in_ms"] <= 30_000
    assert heartbeats["state"] == "expired" and heartbeats["expires_in_ms"] < 0
    assert stopped["state"] == "released"

    one = client.get("/leases/cleanup")
    assert one.status_code == 200 and one.get_json()["epoch"] == 3
    missing = client.get("/leases/nope")
    assert missing.status_code == 404
    assert missing.get_json() == {"error_code": 404, "message": "Lease nope not found"}


def test_get_leases_before_any_lease_was_taken(make_client: MakeClient) -> None:
    assert make_client(tables=InMemoryTables({})).get("/leases").get_json() == {"leases": []}


# --- the Delta store (deltalake: no JVM) ----------------------------------------------------------------------------


@pytest.fixture
def delta_settings(tmp_path: Path) -> Settings:
    return load_settings(overrides={"delta.root": str(tmp_path / "delta")}, environ={})


def test_delta_store_writes_only_onto_the_row_it_was_decided_on(delta_settings: Settings) -> None:
    store = DeltaLeaseStore(delta_settings)
    assert store.read("cleanup") is None
    first = Lease("cleanup", "a", 1, 1_000, 1_000, 31_000)
    assert store.write(None, first)
    assert store.read("cleanup") == first
    store.read("cleanup")
    store.write(None, Lease("cleanup", "b", 1, 2_000, 2_000, 32_000))  # "insert if absent": there is a row
    assert store.read("cleanup") == first
    stale = Lease("cleanup", "a", 1, 1_000, 1_000, 30_000)  # not the row in the table
    store.write(stale, Lease("cleanup", "b", 2, 40_000, 40_000, 70_000))
    assert store.read("cleanup") == first
    taken = Lease("cleanup", "b", 2, 40_000, 40_000, 70_000)
    assert store.write(first, taken)
    assert store.read("cleanup") == taken
    other = Lease("heartbeats", "c", 1, 1_000, 1_000, 31_000)
    assert store.write(None, other)  # a second lease in the same table
    assert store.read("heartbeats") == other and store.read("cleanup") == taken


def test_delta_store_write_fails_when_another_commit_came_first(delta_settings: Settings) -> None:
    a, b = DeltaLeaseStore(delta_settings), DeltaLeaseStore(delta_settings)
    assert a.read("cleanup") is None and b.read("cleanup") is None  # both on the same version
    assert a.write(None, Lease("cleanup", "a", 1, 1_000, 1_000, 31_000))
    assert not b.write(None, Lease("cleanup", "b", 1, 1_000, 1_000, 31_000))  # compare-and-set on the version
    assert b.read("cleanup").holder == "a"  # type: ignore[union-attr]


def test_keepers_on_delta_racing_from_threads_leave_one_holder(delta_settings: Settings) -> None:
    timing = LeaseTiming(60_000, 10_000)
    keepers = [LeaseKeeper(DeltaLeaseStore(delta_settings), "heartbeats", timing, f"h{i}") for i in range(4)]
    keepers[0].store.read("heartbeats")  # the table exists before the race
    start = threading.Barrier(len(keepers))
    results: dict[str, bool] = {}

    def race(keeper: LeaseKeeper) -> None:
        start.wait()
        results[keeper.holder] = keeper.try_acquire()

    threads = [threading.Thread(target=race, args=(k,)) for k in keepers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results.values()) == [False, False, False, True], results
    winner = next(k for k in keepers if results[k.holder])
    winner.fence()
    assert winner.renew()
    loser = next(k for k in keepers if not results[k.holder])
    assert not loser.try_acquire()
    winner.release()
    assert loser.try_acquire() and loser.epoch == 2
    with pytest.raises(LeaseLost):
        winner.fence()


RACER = """
import sys, time
from connect_state.leases.decisions import LeaseTiming
from connect_state.core.settings import load_settings
from connect_state.tables.lease_store import DeltaLeaseStore, LeaseKeeper
settings = load_settings(overrides={"delta.root": sys.argv[1]}, environ={})
keeper = LeaseKeeper(DeltaLeaseStore(settings), "cleanup", LeaseTiming(60_000, 10_000), sys.argv[2])
keeper.store.read("cleanup")
while time.time() < float(sys.argv[3]):
    time.sleep(0.001)
print("won" if keeper.try_acquire() else "lost", flush=True)
"""


def test_processes_racing_for_a_lease_leave_one_holder(tmp_path: Path) -> None:
    root = tmp_path / "delta"
    DeltaLeaseStore(load_settings(overrides={"delta.root": str(root)}, environ={})).read("cleanup")  # create it
    start_at = str(time.time() + 3.0)
    racers = [
        subprocess.Popen([sys.executable, "-c", RACER, str(root), f"p{i}", start_at], stdout=subprocess.PIPE, text=True)
        for i in range(3)
    ]
    outcomes = sorted(racer.communicate(timeout=60)[0].strip() for racer in racers)
    assert outcomes == ["lost", "lost", "won"]
