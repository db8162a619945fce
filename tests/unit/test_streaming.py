"""The one supervisor and the one job interface (connect_state/spark/streaming.py), with tasks that need no Spark."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import pytest

from connect_state.spark.streaming import PeriodicTask, Run, run_catch_up, run_job, supervise


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


def test_catch_up_of_several_jobs_stops_at_the_first_failure() -> None:
    jobs = [FakeJob("a", [FakeTask("a")]), FakeJob("b", [FakeTask("b", status=1)]), FakeJob("c", [FakeTask("c")])]
    assert run_catch_up(jobs, None, None) == 1  # type: ignore[arg-type]
    assert [len(job.journal) for job in jobs] == [3, 2, 0]


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
