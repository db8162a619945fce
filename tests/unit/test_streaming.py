"""The one supervisor and the one job interface (connect_state/spark/streaming.py), with tasks that need no Spark."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from connect_state.core.settings import Settings
from connect_state.spark import streaming
from connect_state.spark.streaming import (
    Backoff,
    PeriodicTask,
    QueryTask,
    Run,
    Supervisor,
    TaskStatus,
    run_catch_up,
    run_continuous,
    run_job,
    supervise,
)


@dataclass
class FakeTask:
    """Ends with ``status`` after ``seconds``, or earlier when stopped (then 0)."""

    name: str
    status: int = 0
    seconds: float = 0.0
    stopped: bool = False

    def run(self, stop: threading.Event) -> int:
        if stop.wait(self.seconds):
            self.stopped = True
            return 0
        if self.status < 0:
            raise RuntimeError(f"{self.name} broke")
        return self.status


@dataclass
class FakeJob:
    name: str
    tasks: list[FakeTask]
    journal: list[str] = field(default_factory=list)

    def check(self, settings: object) -> None:
        self.journal.append("check")

    def start(self, spark: object, settings: object, available_now: bool, max_offsets: int | None) -> Run:
        self.journal.append(f"start available_now={available_now} max_offsets={max_offsets}")
        return Run(
            list(self.tasks),
            catch_up=lambda: self.journal.append("catch-up step"),
            closers=[lambda: self.journal.append("closed")],
        )


def test_supervise_waits_for_every_task() -> None:
    tasks = [FakeTask("a", seconds=0.2), FakeTask("b", seconds=0.4)]
    assert supervise(tasks, threading.Event()) == 0
    assert not any(task.stopped for task in tasks)


@pytest.mark.parametrize("status", [1, -1])  # a failed task, a task that raised
def test_a_failing_task_stops_the_others(status: int) -> None:
    long = FakeTask("long", seconds=30.0)
    started = time.monotonic()
    assert supervise([long, FakeTask("bad", status=status, seconds=0.1)], threading.Event()) == 1
    assert long.stopped and time.monotonic() - started < 10


def test_a_requested_stop_ends_every_task_well() -> None:
    stop = threading.Event()
    tasks = [FakeTask("a", seconds=30.0), FakeTask("b", seconds=30.0)]
    threading.Timer(0.2, stop.set).start()
    assert supervise(tasks, stop) == 0
    assert all(task.stopped for task in tasks)


def test_a_task_still_running_at_the_timeout_fails() -> None:
    task = FakeTask("slow", seconds=30.0)
    assert supervise([task], threading.Event(), timeout_s=0.3) == 1
    assert task.stopped


def test_run_job_runs_the_catch_up_step_only_after_a_successful_catch_up() -> None:
    ok = FakeJob("ok", [FakeTask("q")])
    assert run_job(ok, None, None, True, 7, stop=threading.Event()) == 0  # type: ignore[arg-type]
    assert ok.journal == ["start available_now=True max_offsets=7", "catch-up step", "closed"]
    continuous = FakeJob("continuous", [FakeTask("q")])
    assert run_job(continuous, None, None, False, stop=threading.Event()) == 0  # type: ignore[arg-type]
    assert continuous.journal == ["start available_now=False max_offsets=None", "closed"]
    failed = FakeJob("failed", [FakeTask("q", status=1)])
    assert run_job(failed, None, None, True, stop=threading.Event()) == 1  # type: ignore[arg-type]
    assert failed.journal == ["start available_now=True max_offsets=None", "closed"]


def test_catch_up_of_several_jobs_runs_them_all_and_names_the_failed_one(
    caplog: pytest.LogCaptureFixture, settings: Settings
) -> None:
    jobs = [FakeJob("a", [FakeTask("a")]), FakeJob("b", [FakeTask("b", status=1)]), FakeJob("c", [FakeTask("c")])]
    with caplog.at_level(logging.ERROR, logger="connect_state.streaming"):
        assert run_catch_up(jobs, None, settings) == 1  # type: ignore[arg-type]
    assert [len(job.journal) for job in jobs] == [3, 2, 3]  # b's catch-up step did not run; c did run
    assert caplog.records[-1].getMessage() == "catch-up failed: b (exit status 1)"


def test_catch_up_names_a_job_whose_start_raised(caplog: pytest.LogCaptureFixture, settings: Settings) -> None:
    broken = BrokenStartJob("broken", failures=1)
    with caplog.at_level(logging.ERROR, logger="connect_state.streaming"):
        assert run_catch_up([broken, FakeJob("ok", [FakeTask("ok")])], None, settings) == 1  # type: ignore[arg-type]
    assert caplog.records[-1].getMessage() == "catch-up failed: broken (exit status 1)"


# --- healing: continuous runs restart a failed task with backoff -----------------------------------------------------

FAST = Backoff(initial_s=0.05, max_s=0.2, factor=2.0, healthy_s=30.0)


@dataclass
class FlakyTask:
    """Fails (status 1, or raises) ``failures`` times, then runs until stopped; counts its restarts."""

    name: str
    failures: int
    raises: bool = False
    runs: int = 0
    restarts: int = 0
    stopped: bool = False

    def run(self, stop: threading.Event) -> int:
        self.runs += 1
        if self.runs <= self.failures:
            if self.raises:
                raise RuntimeError(f"{self.name} broke")
            return 1
        stop.wait()
        self.stopped = True
        return 0

    def restart(self) -> None:
        self.restarts += 1


def wait_until(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_backoff_doubles_up_to_its_maximum() -> None:
    backoff = Backoff(initial_s=1.0, max_s=5.0, factor=2.0)
    assert [backoff.delay(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]


@pytest.mark.parametrize("raises", [False, True])
def test_a_failed_task_restarts_with_backoff_while_the_others_keep_running(raises: bool) -> None:
    flaky, steady = FlakyTask("flaky", failures=3, raises=raises), FakeTask("steady", seconds=60.0)
    stop = threading.Event()
    supervisor = Supervisor([flaky, steady], stop, backoff=FAST)
    result: list[int] = []
    runner = threading.Thread(target=lambda: result.append(supervisor.run()), daemon=True)
    started = time.monotonic()
    runner.start()
    wait_until(lambda: supervisor.state()["flaky"].status == TaskStatus.RUNNING and flaky.runs == 4)
    elapsed = time.monotonic() - started
    assert elapsed >= 0.05 + 0.1 + 0.2 - 0.01  # three backoffs: 0.05, 0.1, 0.2 s
    state = supervisor.state()
    assert (state["flaky"].failures, state["flaky"].restarts, flaky.restarts) == (3, 3, 3)
    assert state["flaky"].last_error is not None
    assert state["steady"].status == TaskStatus.RUNNING and not steady.stopped
    stop.set()
    runner.join(10)
    assert result == [0]  # healed, then stopped on request
    assert flaky.stopped and steady.stopped
    assert supervisor.state()["flaky"].status == TaskStatus.STOPPED


def test_a_stop_during_the_backoff_ends_the_task() -> None:
    flaky = FlakyTask("flaky", failures=100)
    stop = threading.Event()
    supervisor = Supervisor([flaky], stop, backoff=Backoff(initial_s=30.0))
    runner = threading.Thread(target=supervisor.run, daemon=True)
    runner.start()
    wait_until(lambda: supervisor.state()["flaky"].status == TaskStatus.RESTARTING)
    assert supervisor.state()["flaky"].next_restart_in_s == 30.0
    stop.set()
    runner.join(5)
    assert not runner.is_alive() and flaky.runs == 1


def test_the_failure_count_in_a_row_resets_after_a_healthy_run() -> None:
    backoff = Backoff(initial_s=0.01, max_s=0.01, healthy_s=0.0)  # every run counts as healthy
    flaky = FlakyTask("flaky", failures=3)
    stop = threading.Event()
    supervisor = Supervisor([flaky], stop, backoff=backoff)
    runner = threading.Thread(target=supervisor.run, daemon=True)
    runner.start()
    wait_until(lambda: flaky.runs == 4)
    state = supervisor.state()["flaky"]
    assert (state.failures, state.failures_in_a_row) == (3, 1)
    stop.set()
    runner.join(5)


@dataclass
class BrokenStartJob:
    """A job whose ``start`` raises ``failures`` times, then starts one task that runs until stopped."""

    name: str
    failures: int
    starts: int = 0
    task: FakeTask = field(default_factory=lambda: FakeTask("after-start", seconds=60.0))

    def check(self, settings: object) -> None:
        return None

    def start(self, spark: object, settings: object, available_now: bool, max_offsets: int | None) -> Run:
        self.starts += 1
        if self.starts <= self.failures:
            raise RuntimeError("Kafka is away")
        return Run([self.task])


class FakeSpark:
    """What ``cloned_session`` needs of a session."""

    class conf:
        getAll: ClassVar[dict[str, str]] = {}

    def newSession(self) -> FakeSpark:
        return self


def test_continuous_jobs_heal_a_failed_query_and_a_failed_start(settings: Settings) -> None:
    flaky = FlakyTask("flaky-query", failures=2)
    steady = FakeTask("steady-query", seconds=60.0)
    jobs = [FakeJob("flaky", [flaky]), FakeJob("steady", [steady]), BrokenStartJob("late", failures=2)]
    stop = threading.Event()
    supervisors: list[Supervisor] = []
    result: list[int] = []
    runner = threading.Thread(
        target=lambda: result.append(
            run_continuous(jobs, FakeSpark(), settings, stop=stop, backoff=FAST, supervisors=supervisors)  # type: ignore[arg-type]
        ),
        daemon=True,
    )
    runner.start()
    wait_until(lambda: bool(supervisors))
    top = supervisors[0]
    wait_until(lambda: flaky.runs == 3 and top.state().get("late/after-start", None) is not None)
    state = top.state()
    assert state["flaky/flaky-query"].restarts == 2 and state["flaky/flaky-query"].status == TaskStatus.RUNNING
    assert state["steady"].restarts == 0 and state["steady/steady-query"].status == TaskStatus.RUNNING
    assert (
        state["late"].failures >= 1 and state["late"].restarts >= 1
    )  # its start failed twice (once in the main thread)
    assert jobs[2].starts == 3
    stop.set()
    runner.join(10)
    assert result == [0]
    assert steady.stopped and flaky.stopped
    assert jobs[0].journal[-1] == "closed" and jobs[1].journal[-1] == "closed"


def test_a_catch_up_never_restarts() -> None:
    flaky = FlakyTask("flaky", failures=1)
    job = FakeJob("job", [flaky])
    assert run_job(job, None, None, True, stop=threading.Event()) == 1  # type: ignore[arg-type]
    assert (flaky.runs, flaky.restarts) == (1, 0)


def test_periodic_task_passes_until_stopped_and_a_single_failing_pass_fails() -> None:
    log = logging.getLogger("test.periodic")
    passes: list[int] = []
    stop = threading.Event()

    def one_pass() -> str:
        passes.append(1)
        if len(passes) == 3:
            stop.set()
        if len(passes) == 2:
            raise RuntimeError("a pass failed")  # logged; the next pass runs after the interval
        return "ok"

    assert PeriodicTask("p", one_pass, 0.01, once=False, logger=log).run(stop) == 0
    assert len(passes) == 3

    def broken() -> str:
        raise RuntimeError("broken")

    assert PeriodicTask("p", broken, 0.01, once=True, logger=log).run(threading.Event()) == 1
    assert PeriodicTask("p", lambda: "ok", 0.01, once=True, logger=log).run(threading.Event()) == 0


# --- a query task stopped on request ---------------------------------------------------------------------------------


class FakeQuery:
    """A streaming query: its trigger is active for ``busy_s``; a ``stop()`` during it interrupts the batch (the
    query ends with an exception, as an interrupted MERGE does); ``fails`` ends it by itself with an error."""

    name = "q"
    id = "q-id"
    lastProgress = None
    recentProgress: ClassVar[list] = []

    def __init__(self, busy_s: float = 0.0, fails: bool = False) -> None:
        self.busy_until = time.monotonic() + busy_s
        self.active = not fails
        self.error: str | None = "failed by itself" if fails else None
        self.stopped_while_busy: bool | None = None

    @property
    def isActive(self) -> bool:
        return self.active

    @property
    def status(self) -> dict:
        return {"isTriggerActive": time.monotonic() < self.busy_until}

    def awaitTermination(self, timeout: float) -> None:
        time.sleep(min(timeout, 0.05))

    def stop(self) -> None:
        self.stopped_while_busy = time.monotonic() < self.busy_until
        if self.stopped_while_busy:
            self.error = "InterruptedException"
        self.active = False

    def exception(self) -> str | None:
        return self.error


def test_a_query_stopped_on_request_ends_its_batch_first_and_counts_as_stopped() -> None:
    query = FakeQuery(busy_s=0.5)
    stop = threading.Event()
    stop.set()
    assert QueryTask(query, poll_seconds=0.05).run(stop) == 0  # type: ignore[arg-type]
    assert query.stopped_while_busy is False


def test_a_query_interrupted_by_a_stop_on_request_still_counts_as_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streaming, "STOP_TIMEOUT_S", 0.1)
    query = FakeQuery(busy_s=30.0)
    stop = threading.Event()
    stop.set()
    assert QueryTask(query, poll_seconds=0.05).run(stop) == 0  # type: ignore[arg-type]
    assert query.stopped_while_busy is True


class BackToBackQuery(FakeQuery):
    """Batches run back to back (the trigger is always active); each ``batch_s`` a new progress appears."""

    def __init__(self, batch_s: float) -> None:
        super().__init__(busy_s=3600.0)
        self.started = time.monotonic()
        self.batch_s = batch_s

    @property
    def lastProgress(self) -> dict:  # type: ignore[override]
        return {"batchId": int((time.monotonic() - self.started) / self.batch_s)}

    def stop(self) -> None:
        # the batch that finished is whole; the one starting is interrupted before it wrote anything
        self.stopped_after = time.monotonic() - self.started
        self.active = False


def test_a_query_whose_batches_run_back_to_back_stops_after_the_current_batch() -> None:
    query = BackToBackQuery(batch_s=0.3)
    streaming.stop_between_batches(query, timeout_s=30.0)  # type: ignore[arg-type]
    assert query.isActive is False
    assert 0.3 <= query.stopped_after < 1.0  # at the first batch end, not at the timeout


def test_a_query_that_fails_by_itself_fails_its_task() -> None:
    assert QueryTask(FakeQuery(fails=True), poll_seconds=0.05).run(threading.Event()) == 1  # type: ignore[arg-type]


def test_periodic_task_runs_its_after_pass_between_passes() -> None:
    log = logging.getLogger("test.periodic")
    order: list[str] = []
    stop = threading.Event()

    def one_pass() -> None:
        order.append("pass")
        if order.count("pass") == 2:
            raise RuntimeError("a pass failed")  # the clean-up still runs after it
        if order.count("pass") == 3:
            stop.set()

    task = PeriodicTask("p", one_pass, 0.01, once=False, logger=log, after_pass=lambda: order.append("after"))
    assert task.run(stop) == 0
    assert order == ["pass", "after"] * 3
