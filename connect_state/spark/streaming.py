"""Running jobs: the one job interface, the one supervisor, and what a console script of a job does.

A **job** (:class:`Job`) is what a console script runs: ``start`` creates its tables, starts its work and returns a
:class:`Run`: the **tasks** the supervisor runs (a streaming query, a query that restarts itself, a loop of passes),
the job's **catch-up step** (run once after a catch-up run's tasks all ended well: the heartbeats' sweep), and what to
close at the end. :func:`run_job` runs one job, continuous or catch-up, for a job's console script and for each step
of ``connect-state-jobs --available-now``; :func:`supervise` runs tasks side by side, one thread each, until they end,
a signal arrives or one of them fails.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from connect_state.errors import ConnectStateError
from connect_state.settings import Settings, add_config_arguments, settings_from_args

log = logging.getLogger("connect_state.streaming")

JOIN_TIMEOUT_S = 180.0


def job_logger(name: str) -> logging.Logger:
    """The logger of a job's lines (its writer's batches, its passes): ``connect_state.jobs.<name>``."""
    return logging.getLogger(f"connect_state.jobs.{name}")


def checkpoint_query_id(spark: SparkSession, checkpoint: str) -> str:
    """The id Spark stored in a checkpoint's ``metadata`` file: stable across restarts, new for a new checkpoint."""
    metadata = spark.read.json(f"{checkpoint}/metadata").first()
    if metadata is None:
        raise ConnectStateError(f"checkpoint {checkpoint} has an empty metadata file")
    return str(metadata["id"])


def stop_on_signals(stop: threading.Event, what: str) -> dict[int, Any]:
    """Set ``stop`` on SIGINT/SIGTERM (main thread only); return the previous handlers for :func:`restore_signals`."""

    def request_stop(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping %s", signum, what)
        stop.set()

    return {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}


def restore_signals(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


# ---------------------------------------------------------------------------------------------------------------------
# Tasks: what the supervisor runs
# ---------------------------------------------------------------------------------------------------------------------


class Task(Protocol):
    """Something the supervisor runs in a thread of its own until it ends or ``stop`` is set."""

    name: str

    def run(self, stop: threading.Event) -> int:
        """Run until done (0), failed (1), or ``stop`` is set (then stop cleanly and return 0)."""
        ...


def stop_between_batches(query: StreamingQuery, timeout_s: float = 120.0) -> None:
    """Stop ``query`` once its current micro-batch (if any) has finished, so no batch is interrupted halfway (the
    writes are idempotent either way); waits at most ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()


class QueryTask:
    """A streaming query: each new micro-batch's progress in the log; stopped when ``stop`` is set.

    Subclasses may replace :attr:`query` in :meth:`after_poll` (a query that restarts itself with another
    subscription keeps its task).
    """

    def __init__(self, query: StreamingQuery, poll_seconds: float = 10.0) -> None:
        self.query = query
        self.name = query.name or str(query.id)
        self.poll_seconds = poll_seconds

    def after_poll(self) -> None:
        """Called after every wait while the query runs and no stop was asked for."""

    def run(self, stop: threading.Event) -> int:
        last_batch = -1
        while self.query.isActive and not stop.is_set():
            self.query.awaitTermination(self.poll_seconds)  # type: ignore[arg-type]  # pyspark takes seconds as float too
            progress = self.query.lastProgress
            if progress and progress["batchId"] != last_batch:
                last_batch = progress["batchId"]
                (log.info if progress["numInputRows"] else log.debug)(
                    "%s batch %d: %d input rows, %.1f rows/s processed",
                    self.name,
                    last_batch,
                    progress["numInputRows"],
                    progress.get("processedRowsPerSecond") or 0.0,
                )
            if self.query.isActive and not stop.is_set():
                previous = self.query
                self.after_poll()
                if self.query is not previous:
                    last_batch = -1
        if self.query.isActive:
            self.query.stop()
        error = self.query.exception()
        if error is not None:
            log.error("query %s failed: %s", self.name, error)
            return 1
        return 0


class PeriodicTask:
    """A pass every ``interval_s`` (or a single one with ``once``): a pass that raises is logged, and the next pass
    runs after the interval; a single pass that raises makes the task fail."""

    def __init__(
        self, name: str, run_pass: Callable[[], object], interval_s: float, once: bool, logger: logging.Logger
    ) -> None:
        self.name = name
        self.run_pass = run_pass
        self.interval_s = interval_s
        self.once = once
        self.log = logger

    def run(self, stop: threading.Event) -> int:
        while not stop.is_set():
            try:
                self.log.info("pass: %s", self.run_pass())
            except Exception:
                self.log.exception("%s pass failed", self.name)
                if self.once:
                    return 1
            if self.once:
                return 0
            stop.wait(self.interval_s)
        return 0


# ---------------------------------------------------------------------------------------------------------------------
# The supervisor
# ---------------------------------------------------------------------------------------------------------------------


def supervise(tasks: Sequence[Task], stop: threading.Event | None = None, timeout_s: float | None = None) -> int:
    """Run ``tasks`` side by side (one thread each) until all have ended, SIGINT/SIGTERM arrives, or ``stop`` is set
    (then the caller handles signals); when one task fails the others are stopped. With ``timeout_s``, tasks still
    running after that long are stopped and count as failed.

    Returns 0 when every task ended well (a catch-up run that caught up, or a requested stop), 1 otherwise.
    """
    stop_requested = stop if stop is not None else threading.Event()
    names = ", ".join(task.name for task in tasks)
    previous = stop_on_signals(stop_requested, names) if stop is None else {}
    statuses: dict[str, int] = {}

    def target(task: Task) -> None:
        try:
            statuses[task.name] = task.run(stop_requested)
        except Exception:
            log.exception("%s failed", task.name)
            statuses[task.name] = 1
        if statuses[task.name] != 0:
            stop_requested.set()  # one task failed: stop the others and report it

    threads = [threading.Thread(target=target, args=(task,), name=task.name, daemon=True) for task in tasks]
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    timed_out = False
    try:
        for thread in threads:
            thread.start()
        while any(thread.is_alive() for thread in threads) and not stop_requested.wait(0.5):
            if deadline is not None and time.monotonic() > deadline:
                log.error("%s did not finish within %.0f s: stopping", names, timeout_s)
                timed_out = True
                break
        stop_requested.set()
        for thread in threads:
            thread.join(timeout=JOIN_TIMEOUT_S)
        failed = sorted(task.name for task in tasks if statuses.get(task.name, 1) != 0 or timed_out)
        if failed and len(tasks) > 1:
            log.error("failed: %s", ", ".join(failed))
        return 1 if failed else 0
    finally:
        restore_signals(previous)


# ---------------------------------------------------------------------------------------------------------------------
# The job interface
# ---------------------------------------------------------------------------------------------------------------------


@dataclass
class Run:
    """What starting a job gives: the tasks to supervise, the catch-up step (after a catch-up run whose tasks all
    ended well), and what to close once everything has ended."""

    tasks: list[Task]
    catch_up: Callable[[], object] | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for close in self.closers:
            try:
                close()
            except Exception:
                log.exception("closing %s", ", ".join(task.name for task in self.tasks))


class Job(Protocol):
    """One connect-state job: ``name`` (its console script is ``connect-state-<name>``; each query's checkpoint
    directory is named after the query), ``check`` (raise ConnectStateError for a setting it cannot start with) and
    ``start`` (create the tables, start the queries or passes, continuous or catch-up)."""

    @property
    def name(self) -> str: ...

    def check(self, settings: Settings) -> None: ...

    def start(self, spark: SparkSession, settings: Settings, available_now: bool, max_offsets: int | None) -> Run: ...


def run_job(
    job: Job,
    spark: SparkSession,
    settings: Settings,
    available_now: bool = False,
    max_offsets: int | None = None,
    stop: threading.Event | None = None,
    timeout_s: float | None = None,
) -> int:
    """Start ``job`` and supervise it until it ends (a catch-up run, then its catch-up step), a signal arrives,
    ``stop`` is set, or ``timeout_s`` has passed (then it failed). 0 on success."""
    run = job.start(spark, settings, available_now, max_offsets)
    try:
        status = supervise(run.tasks, stop, timeout_s)
        if status == 0 and available_now and run.catch_up is not None:
            run.catch_up()
        return status
    finally:
        run.close()


# ---------------------------------------------------------------------------------------------------------------------
# Console scripts
# ---------------------------------------------------------------------------------------------------------------------


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for chatty in ("py4j", "kafka"):  # per-command and per-connection INFO lines of the client libraries
        logging.getLogger(chatty).setLevel(logging.WARNING)


def job_arguments(
    name: str,
    description: str,
    available_now_help: str = "catch up with the topics, then stop (for scheduled runs)",
) -> argparse.ArgumentParser:
    """The flags every job takes: ``--available-now``, ``--max-offsets-per-trigger``, ``--conf-file``, ``--set``."""
    parser = argparse.ArgumentParser(prog=f"connect-state-{name.replace('_', '-')}", description=description)
    parser.add_argument("--available-now", action="store_true", help=available_now_help)
    parser.add_argument("--max-offsets-per-trigger", type=int, help="bound the records read per micro-batch")
    add_config_arguments(parser)
    return parser


def main_of(
    jobs: Sequence[Job],
    args: argparse.Namespace,
    app_name: str,
    logger: logging.Logger,
    run: Callable[[SparkSession, Settings], int],
) -> int:
    """What a job's ``main()`` does once its arguments are parsed: logging, settings, every job's ``check`` (a bad
    setting: exit status 2, said in ``logger``), the SparkSession ``connect-state-<app_name>``, then ``run``."""
    from connect_state.spark.session import build_session

    setup_logging()
    try:
        settings = settings_from_args(args)
        for job in jobs:
            job.check(settings)
    except ConnectStateError as err:
        logger.error("%s", err)
        return 2
    spark = build_session(f"connect-state-{app_name}", settings.spark_master)
    return run(spark, settings)


def job_main(job: Job, args: argparse.Namespace) -> int:
    """The console script of one job: :func:`main_of`, then :func:`run_job` (catch-up with ``--available-now``)."""
    max_offsets = getattr(args, "max_offsets_per_trigger", None)
    return main_of(
        [job],
        args,
        job.name,
        job_logger(job.name),
        lambda spark, settings: run_job(job, spark, settings, args.available_now, max_offsets),
    )


# ---------------------------------------------------------------------------------------------------------------------
# Several jobs in one driver
# ---------------------------------------------------------------------------------------------------------------------


def cloned_session(spark: SparkSession) -> SparkSession:
    """A new session of the same SparkContext with ``spark``'s runtime settings: a query started on it keeps the
    settings its ``foreachBatch`` changes (Delta transaction ids) to itself."""
    session = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if session.conf.isModifiable(key) and session.conf.get(key, None) != value:
            session.conf.set(key, value)
    return session


def run_catch_up(jobs: Sequence[Job], spark: SparkSession, settings: Settings, max_offsets: int | None = None) -> int:
    """One catch-up run of each job, in the given order; stops at the first failure."""
    for job in jobs:
        log.info("catch-up: %s", job.name)
        status = run_job(job, spark, settings, True, max_offsets)
        if status != 0:
            log.error("catch-up: %s failed (status %d); not running the rest", job.name, status)
            return status
    return 0


def run_continuous(
    jobs: Sequence[Job],
    spark: SparkSession,
    settings: Settings,
    max_offsets: int | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Every job side by side until a signal (or ``stop``) or a failure; 1 when one of them failed.

    The jobs are started one after the other from this thread, each on its own :func:`cloned_session` (some starts
    toggle a session setting for their own query), then supervised together."""
    runs: list[Run] = []
    try:
        for job in jobs:
            runs.append(job.start(cloned_session(spark), settings, False, max_offsets))
        return supervise([task for run in runs for task in run.tasks], stop)
    finally:
        for run in runs:
            run.close()
