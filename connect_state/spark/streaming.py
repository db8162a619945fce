"""Running jobs: the one job interface, the one supervisor, and what a console script of a job does.

A **job** (:class:`Job`) is what a console script runs: ``start`` creates its tables, starts its work and returns a
:class:`Run`: the **tasks** the supervisor runs (a streaming query, a query that restarts itself, a loop of passes),
the job's **catch-up step** (run once after a catch-up run's tasks all ended well: sending the heartbeats due by
then), and what to close at the end. :func:`run_job` runs one job, continuous or catch-up, for a job's console
script and for each step of ``connect-state-jobs --available-now``; :class:`Supervisor` (:func:`supervise`) runs
tasks side by side, one thread each, until they end or a signal arrives.

**Healing.** In a continuous run a task that fails (a query that terminated with an error, a restart that raised) is
restarted with exponential backoff (:class:`Backoff`) while the others keep running; each failure and restart is
logged with its count, and the supervisor's :meth:`Supervisor.state` holds the counts. ``connect-state-jobs``
supervises each job as one task (:class:`JobTask`: a job whose start fails is started again with backoff) whose own
supervisor restarts its queries one by one. A catch-up run does not restart: a failed task fails its job, and
:func:`run_catch_up` still runs the other jobs, then names the failed ones and exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from connect_state.core.clusters import Cluster, cluster_label, clusters
from connect_state.core.errors import ConnectStateError
from connect_state.core.settings import Settings, add_config_arguments, settings_from_args
from connect_state.progress.query_progress import ReadProgress
from connect_state.spark import storage
from connect_state.spark.metrics import METRICS
from connect_state.tables.retention import table_retentions

log = logging.getLogger("connect_state.streaming")

JOIN_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 20.0
"""How long a clean stop waits for a query's current micro-batch to end before it interrupts it (its writes are
idempotent per batch: the next start replays it; a query that keeps triggering back to back has no gap to wait for)."""


def job_logger(name: str) -> logging.Logger:
    """The logger of a job's lines (its writer's batches, its passes): ``connect_state.jobs.<name>``."""
    return logging.getLogger(f"connect_state.jobs.{name}")


def checkpoint_query_id(spark: SparkSession, checkpoint: str) -> str:
    """The id Spark stored in a checkpoint's ``metadata`` file: stable across restarts, new for a new checkpoint.

    Read through Hadoop's filesystem (:mod:`connect_state.spark.storage`): the checkpoint may be in object storage.
    """
    text = storage.read_text(spark, f"{checkpoint}/metadata") or ""
    try:
        return str(json.loads(text.splitlines()[0])["id"])
    except (IndexError, ValueError, KeyError, TypeError):
        raise ConnectStateError(f"checkpoint {checkpoint} has no readable metadata file") from None


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
    """Something the supervisor runs in a thread of its own until it ends or ``stop`` is set.

    A task may have a ``restart()`` method: a continuous run's supervisor calls it before running a failed task again
    (a streaming query is started again from its checkpoint); a task without one is simply run again.
    """

    name: str

    def run(self, stop: threading.Event) -> int:
        """Run until done (0), failed (1), or ``stop`` is set (then stop cleanly and return 0)."""
        ...


def _last_batch_id(query: StreamingQuery) -> int | None:
    progress = query.lastProgress
    if progress is None:
        return None
    batch = progress.get("batchId") if isinstance(progress, dict) else getattr(progress, "batchId", None)
    return batch if isinstance(batch, int) else None


def stop_between_batches(query: StreamingQuery, timeout_s: float = 120.0) -> None:
    """Stop ``query`` at the end of its current micro-batch (if any), so no batch is interrupted halfway (the writes
    are idempotent either way); waits at most ``timeout_s``.

    The end of a batch is seen as a gap between triggers or, for a query whose batches run back to back (a batch
    longer than its trigger interval, or timeouts due at every batch), as a new ``batchId`` in its last progress: the
    next batch has then only just started planning, before any write, and is planned again on the next start.
    """
    deadline = time.monotonic() + timeout_s
    started_with = _last_batch_id(query)
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        if _last_batch_id(query) != started_with:
            break
        time.sleep(0.05)
    query.stop()


def _progress_dict(progress: Any) -> dict[str, Any]:
    """A ``StreamingQueryProgress`` as plain JSON values (its sources' offsets as dicts)."""
    text = getattr(progress, "json", None)
    return json.loads(text) if isinstance(text, str) else dict(progress)


class QueryTask:
    """A streaming query: each new micro-batch's progress in the log; stopped when ``stop`` is set.

    Subclasses may replace :attr:`query` in :meth:`after_poll` (a query that restarts itself with another
    subscription keeps its task). ``restart`` starts the query again (from its checkpoint) after a failure.
    """

    def __init__(
        self,
        query: StreamingQuery,
        poll_seconds: float = 10.0,
        restart: Callable[[], StreamingQuery] | None = None,
        cluster: str | None = None,
    ) -> None:
        self.query = query
        self.name = query.name or str(query.id)
        self.poll_seconds = poll_seconds
        self._restart = restart
        #: The Connect cluster the query folds, as its metrics name it (:func:`~connect_state.core.clusters.
        #: cluster_label`; None: unnamed).
        self.cluster = cluster

    def restart(self) -> None:
        """Start the query again from its checkpoint (the failed one is stopped first if it still runs)."""
        if self._restart is None:
            raise ConnectStateError(f"query {self.name} cannot be restarted")
        if self.query.isActive:
            self.query.stop()
        self.query = self._restart()

    def after_poll(self) -> None:
        """Called after every wait while the query runs and no stop was asked for."""

    def new_progress(self, last_batch: int) -> list[dict[str, Any]]:
        """The progress of each batch after ``last_batch`` (as dicts), oldest first."""
        progress = self.query.lastProgress
        if not progress or progress["batchId"] == last_batch:
            return []
        if progress["batchId"] == last_batch + 1:
            return [_progress_dict(progress)]
        recent = [_progress_dict(p) for p in self.query.recentProgress]
        return [p for p in recent if p["batchId"] > last_batch] or [_progress_dict(progress)]

    def run(self, stop: threading.Event) -> int:
        last_batch = -1
        reading = ReadProgress(self.name, time.monotonic())
        while self.query.isActive and not stop.is_set():
            self.query.awaitTermination(self.poll_seconds)  # type: ignore[arg-type]  # pyspark takes seconds as float too
            batches = self.new_progress(last_batch)
            for batch in batches:
                reading.observe(batch)
                METRICS.observe(self.name, batch, self.cluster)
            if batches:
                progress = batches[-1]
                last_batch = progress["batchId"]
                if reading.behind:  # records read of how many, and when it expects to finish
                    log.info("%s: %s", self.name, reading.line(time.monotonic()))
                (log.info if progress["numInputRows"] else log.debug)(
                    "%s batch %d: %d input rows, %.1f rows/s processed, in %.2f s",
                    self.name,
                    last_batch,
                    progress["numInputRows"],
                    progress.get("processedRowsPerSecond") or 0.0,
                    (progress.get("durationMs") or {}).get("triggerExecution", 0) / 1000,
                )
            if self.query.isActive and not stop.is_set():
                previous = self.query
                self.after_poll()
                if self.query is not previous:
                    last_batch = -1
        stopped = stop.is_set() and self.query.isActive
        if stopped:  # a clean stop: not inside a batch (an interrupted MERGE fails the query on its way out)
            stop_between_batches(self.query, STOP_TIMEOUT_S)
        elif self.query.isActive:
            self.query.stop()
        for batch in self.new_progress(last_batch):  # the batches of a catch-up run's last moments
            reading.observe(batch)
            METRICS.observe(self.name, batch, self.cluster)
        if reading.batches:
            log.info("%s: %s", self.name, reading.line(time.monotonic()))
        error = self.query.exception()
        if error is not None and stopped:  # a batch cut short by the stop (after STOP_TIMEOUT_S): replayed next start
            log.warning("query %s stopped on request; its last batch was interrupted: %s", self.name, error)
        elif error is not None:
            log.error("query %s failed: %s", self.name, error)
            return 1
        return 0


class PeriodicTask:
    """A pass every ``interval_s`` (or a single one with ``once``): a pass that raises is logged, and the next pass
    runs after the interval; a single pass that raises makes the task fail. ``after_pass`` (the tables' retention,
    :class:`~connect_state.spark.retention.RetentionPass`) runs after each pass, between it and the next one."""

    def __init__(
        self,
        name: str,
        run_pass: Callable[[], object],
        interval_s: float,
        once: bool,
        logger: logging.Logger,
        after_pass: Callable[[], object] | None = None,
    ) -> None:
        self.name = name
        self.run_pass = run_pass
        self.interval_s = interval_s
        self.once = once
        self.log = logger
        self.after_pass = after_pass

    def run(self, stop: threading.Event) -> int:
        while not stop.is_set():
            try:
                summary = self.run_pass()
                if summary is not None:  # None: nothing to do, nothing done
                    self.log.info("pass: %s", summary)
            except Exception:
                self.log.exception("%s pass failed", self.name)
                if self.once:
                    return 1
            if self.after_pass is not None:
                self.after_pass()
            if self.once:
                return 0
            stop.wait(self.interval_s)
        return 0


# ---------------------------------------------------------------------------------------------------------------------
# The supervisor
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backoff:
    """The wait before a failed task runs again: ``initial_s``, times ``factor`` for each further failure in a row, at
    most ``max_s``; a task that ran ``healthy_s`` before it failed starts again from ``initial_s``."""

    initial_s: float = 5.0
    max_s: float = 300.0
    factor: float = 2.0
    healthy_s: float = 600.0

    def delay(self, failures_in_a_row: int) -> float:
        return min(self.max_s, self.initial_s * self.factor ** max(failures_in_a_row - 1, 0))


RESTART_BACKOFF = Backoff()
"""The backoff of continuous runs (``connect-state-jobs`` and each job's console script)."""


class TaskStatus(StrEnum):
    """Where a supervised task is (:class:`TaskState`)."""

    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"  # failed; waiting for its backoff
    ENDED = "ended"  # ended well (a catch-up that caught up)
    STOPPED = "stopped"  # stopped on request
    FAILED = "failed"  # failed for good (no restarts: a catch-up run)


@dataclass
class TaskState:
    """What the supervisor knows of a task: its status, how often it failed and was restarted, the last error."""

    name: str
    #: The Connect cluster the task works for, as the metrics name it (:func:`~connect_state.core.clusters.
    #: cluster_label`; None: unnamed).
    cluster: str | None = None
    status: TaskStatus = TaskStatus.STARTING
    failures: int = 0
    restarts: int = 0
    failures_in_a_row: int = 0
    last_error: str | None = None
    next_restart_in_s: float | None = None


class Supervisor:
    """Runs ``tasks`` side by side (one thread each) until all have ended, SIGINT/SIGTERM arrives (when no ``stop``
    is given; else the caller handles signals and sets ``stop``), or ``timeout_s`` has passed (tasks still running
    then are stopped and count as failed).

    Without ``backoff`` (catch-up runs) a task that fails stops the others. With ``backoff`` (continuous runs) it
    runs again after the backoff (its ``restart()`` first, when it has one) while the others keep running; every
    failure and restart is logged with its count and kept in :meth:`state`.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        stop: threading.Event | None = None,
        timeout_s: float | None = None,
        backoff: Backoff | None = None,
        name: str | None = None,
    ) -> None:
        self.tasks = list(tasks)
        self.stop = stop
        self.timeout_s = timeout_s
        self.backoff = backoff
        self.name = name or ", ".join(task.name for task in self.tasks)
        self.halt = threading.Event()  # what the tasks watch: a stop, a signal, a failure without backoff, a timeout
        self._states = {task.name: TaskState(task.name, getattr(task, "cluster", None)) for task in self.tasks}
        self._exits: dict[str, int] = {}
        self._lock = threading.Lock()

    def state(self) -> dict[str, TaskState]:
        """A copy of every task's state; a task that supervises tasks of its own (:class:`JobTask`) adds theirs as
        ``<task>/<its task>``."""
        with self._lock:
            states = {name: replace(state) for name, state in self._states.items()}
        for task in self.tasks:
            inner = getattr(task, "supervisor", None)
            if isinstance(inner, Supervisor):
                outer = getattr(task, "cluster", None)  # a job's tasks work for its cluster
                for name, state in inner.state().items():
                    states[f"{task.name}/{name}"] = replace(state, cluster=state.cluster or outer)
        return states

    def _set(self, task: Task, **changes: Any) -> TaskState:
        with self._lock:
            state = self._states[task.name]
            for key, value in changes.items():
                setattr(state, key, value)
            return replace(state)

    def _run_task(self, task: Task) -> None:
        restart_first = False
        while True:
            started = time.monotonic()
            try:
                if restart_first:
                    restart = getattr(task, "restart", None)
                    if callable(restart):
                        restart()
                    state = self._set(task, restarts=self._states[task.name].restarts + 1)
                    log.info("%s: %s restarted (restart %d)", self.name, task.name, state.restarts)
                self._set(task, status=TaskStatus.RUNNING, next_restart_in_s=None)
                status = task.run(self.halt)
                error = None if status == 0 else f"ended with status {status}"
            except Exception as err:
                status, error = 1, f"{type(err).__name__}: {err}"
                log.exception("%s: %s failed", self.name, task.name)
            if status == 0:
                self._set(task, status=TaskStatus.STOPPED if self.halt.is_set() else TaskStatus.ENDED)
                self._exits[task.name] = 0
                return
            failed = self._states[task.name]
            in_a_row = 1 if time.monotonic() - started >= self._healthy_s() else failed.failures_in_a_row + 1
            state = self._set(task, failures=failed.failures + 1, failures_in_a_row=in_a_row, last_error=error)
            if self.backoff is None or self.halt.is_set():
                self._set(task, status=TaskStatus.FAILED)
                self._exits[task.name] = 1
                log.error("%s: %s failed: %s", self.name, task.name, error)
                self.halt.set()  # one task failed: stop the others and report it
                return
            delay = self.backoff.delay(in_a_row)
            self._set(task, status=TaskStatus.RESTARTING, next_restart_in_s=delay)
            log.error(
                "%s: %s failed (%s): failure %d (%d in a row), restarting it in %.1f s; the other tasks keep running",
                self.name,
                task.name,
                error,
                state.failures,
                in_a_row,
                delay,
            )
            if self.halt.wait(delay):
                self._set(task, status=TaskStatus.STOPPED, next_restart_in_s=None)
                self._exits[task.name] = 0
                return
            restart_first = True

    def _healthy_s(self) -> float:
        return self.backoff.healthy_s if self.backoff is not None else float("inf")

    def run(self) -> int:
        """0 when every task ended well or was stopped on request, 1 otherwise."""
        METRICS.track(self)
        previous = stop_on_signals(self.halt, self.name) if self.stop is None else {}
        threads = [
            threading.Thread(target=self._run_task, args=(task,), name=task.name, daemon=True) for task in self.tasks
        ]
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        timed_out = False
        try:
            for thread in threads:
                thread.start()
            while any(thread.is_alive() for thread in threads) and not self.halt.wait(0.5):
                if self.stop is not None and self.stop.is_set():
                    break
                if deadline is not None and time.monotonic() > deadline:
                    log.error("%s did not finish within %.0f s: stopping", self.name, self.timeout_s)
                    timed_out = True
                    break
            self.halt.set()
            for thread in threads:
                thread.join(timeout=JOIN_TIMEOUT_S)
            failed = sorted(task.name for task in self.tasks if self._exits.get(task.name, 1) != 0 or timed_out)
            if failed:
                log.error("%s: failed: %s", self.name, ", ".join(failed))
            restarted = {name: state.restarts for name, state in self.state().items() if state.restarts}
            if restarted:
                log.info("%s: restarts: %s", self.name, ", ".join(f"{k} {v}" for k, v in sorted(restarted.items())))
            return 1 if failed else 0
        finally:
            restore_signals(previous)


def supervise(
    tasks: Sequence[Task],
    stop: threading.Event | None = None,
    timeout_s: float | None = None,
    backoff: Backoff | None = None,
    name: str | None = None,
) -> int:
    """Run ``tasks`` under a :class:`Supervisor`; 0 when every task ended well or was stopped on request."""
    return Supervisor(tasks, stop, timeout_s, backoff, name).run()


def query_name(settings: Settings, name: str) -> str:
    """The name of a query of ``settings``'s cluster (Spark's query name, the metrics' ``query`` label, the log's):
    ``name``, as its checkpoint directory is named, or ``<cluster.id>/<name>`` when the settings name their cluster,
    so two clusters' queries in one driver (issue 37) are told apart."""
    return f"{settings.cluster_id}/{name}" if settings.cluster_id else name


def cluster_job_name(cluster: Cluster, job: Job, several: bool) -> str:
    """A job's name in a driver's log and metrics: ``<cluster>/<job>`` when the driver follows several clusters."""
    return f"{cluster.id}/{job.name}" if several else job.name


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
    backoff: Backoff | None = RESTART_BACKOFF,
) -> int:
    """Start ``job`` and supervise it until it ends (a catch-up run, then its catch-up step), a signal arrives,
    ``stop`` is set, or ``timeout_s`` has passed (then it failed). 0 on success.

    A continuous run restarts a failed task with ``backoff`` (None: a failed task ends the run); a catch-up run never
    restarts."""
    run = job.start(spark, settings, available_now, max_offsets)
    try:
        status = supervise(run.tasks, stop, timeout_s, None if available_now else backoff, job.name)
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
    from connect_state.spark.session import job_session

    setup_logging()
    try:
        settings = settings_from_args(args)
        table_retentions(settings)  # history.retention.ms.by.table names history tables
        for cluster in clusters(settings):  # every cluster's settings, checked before anything starts
            for job in jobs:
                job.check(cluster.settings)
    except ConnectStateError as err:
        logger.error("%s", err)
        return 2
    if settings.jobs_metrics_port:
        METRICS.serve(settings.jobs_metrics_port, settings.jobs_metrics_host)
    spark = job_session(f"connect-state-{app_name}", settings)
    return run(spark, settings)


def job_main(job: Job, args: argparse.Namespace) -> int:
    """The console script of one job: :func:`main_of`, then :func:`run_job` (catch-up with ``--available-now``); with
    several clusters, the job of each, as ``connect-state-jobs`` runs them (:func:`run_catch_up`,
    :func:`run_continuous`)."""
    max_offsets = getattr(args, "max_offsets_per_trigger", None)

    def run(spark: SparkSession, settings: Settings) -> int:
        if len(clusters(settings)) > 1:
            several = run_catch_up if args.available_now else run_continuous
            return several([job], spark, settings, max_offsets)
        return run_job(job, spark, settings, args.available_now, max_offsets)

    return main_of([job], args, job.name, job_logger(job.name), run)


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
    """One catch-up run of each job, in the given order, for each cluster of the settings in turn (issue 37). A job
    that fails does not stop the ones after it (they read its tables as they are), nor another cluster's; the run then
    names the failed jobs (``<cluster>/<job>`` with several clusters) and returns 1."""
    failed: list[str] = []
    every = clusters(settings)
    for cluster, job in ((cluster, job) for cluster in every for job in jobs):
        name = cluster_job_name(cluster, job, len(every) > 1)
        log.info("catch-up: %s", name)
        try:
            status = run_job(job, spark, cluster.settings, True, max_offsets)
        except Exception:
            log.exception("catch-up: %s failed", name)
            status = 1
        if status != 0:
            log.error("catch-up: %s failed (status %d); running the other jobs", name, status)
            failed.append(name)
    if failed:
        log.error("catch-up failed: %s (exit status 1)", ", ".join(failed))
        return 1
    return 0


class JobTask:
    """One job of a continuous ``connect-state-jobs`` run, as one task of the top supervisor: :meth:`start` starts
    the job (:meth:`run` does, if that has not happened or failed), then a :class:`Supervisor` of its own runs the
    job's tasks and restarts each failed one with ``backoff``. When the job's start fails, the top supervisor runs
    the task again (and so starts the job again) after its backoff."""

    def __init__(
        self,
        job: Job,
        spark: SparkSession,
        settings: Settings,
        max_offsets: int | None,
        backoff: Backoff,
        name: str | None = None,
    ) -> None:
        self.job = job
        self.name = name or job.name
        self.spark = spark
        self.settings = settings
        self.max_offsets = max_offsets
        self.backoff = backoff
        self.started: Run | None = None
        self.supervisor: Supervisor | None = None
        #: The job's cluster, as the metrics name its tasks (:func:`~connect_state.core.clusters.cluster_label`).
        self.cluster = cluster_label(settings)

    def start(self) -> None:
        if self.started is None:
            self.started = self.job.start(self.spark, self.settings, False, self.max_offsets)

    def run(self, stop: threading.Event) -> int:
        self.start()
        assert self.started is not None
        self.supervisor = Supervisor(self.started.tasks, stop, backoff=self.backoff, name=self.name)
        return self.supervisor.run()

    def restart(self) -> None:
        """Close what the job started; :meth:`run` starts it again."""
        self.close()

    def close(self) -> None:
        if self.started is not None:
            started, self.started = self.started, None
            started.close()


def run_continuous(
    jobs: Sequence[Job],
    spark: SparkSession,
    settings: Settings,
    max_offsets: int | None = None,
    stop: threading.Event | None = None,
    backoff: Backoff = RESTART_BACKOFF,
    supervisors: list[Supervisor] | None = None,
) -> int:
    """Every job of every cluster of the settings (issue 37) side by side until a signal (or ``stop``); a failed query
    restarts with ``backoff`` while the others keep running. 0 once stopped on request.

    The jobs are started one after the other from this thread, each on its own :func:`cloned_session` (some starts
    toggle a session setting for their own query), then supervised together (:class:`JobTask`); a job whose start
    failed is started again by its task. ``supervisors`` (if given) receives the top supervisor, whose
    :meth:`~Supervisor.state` has every task's failures and restarts."""
    every = clusters(settings)
    several = len(every) > 1
    tasks = [
        JobTask(
            job, cloned_session(spark), cluster.settings, max_offsets, backoff, cluster_job_name(cluster, job, several)
        )
        for cluster in every
        for job in jobs
    ]
    try:
        for task in tasks:
            try:
                task.start()
            except Exception:
                log.exception("starting %s failed: it is started again", task.name)
        supervisor = Supervisor(tasks, stop, backoff=backoff, name="connect-state-jobs")
        if supervisors is not None:
            supervisors.append(supervisor)
        return supervisor.run()
    finally:
        for task in tasks:
            task.close()
