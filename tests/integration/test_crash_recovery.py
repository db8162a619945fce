"""Crashes (issue 10): ``kill -9`` of the ``connect-state-jobs`` driver again and again while connectors work, and a
restart of the Connect worker; afterwards the tables are what a fold from scratch makes of the same topics.

A Connect worker of its own (its own internal topics, so the tables can be compared whole) runs two FileStream
sources and a sink while a workload thread appends lines, pauses, resumes, stops and resumes them, and creates and
deletes short-lived connectors. Meanwhile the driver of the three folds (``python -m connect_state.jobs.all --jobs
active_topics,connector_states,offsets``, a process group of its own: tests/integration/drivers.py; the leased jobs'
crashes are tests/integration/test_leases_connect.py's) is killed, each time at another point
(:mod:`connect_state.core.faults`):

1. continuous, ``after_history_write``: inside ``foreachBatch``, a history table written, its current table not yet;
2. continuous, ``batch_start``: a micro-batch arrived, nothing of it written (between two batches, for the tables),
   a few batches in; the Connect worker is restarted while this driver starts and runs;
3. a catch-up run (``--available-now``), ``after_batch_write``: a batch's tables and watermark written, its checkpoint
   commit not.

(Each round starts a driver of its own, a JVM and three jobs: minutes on a busy 2-core machine. So each fault point is
hit once, and the worker restart shares a round.)

Each run starts from what the killed one left (checkpoints, tables). Last, a catch-up of the crashed tables
and a fold from scratch (a fresh ``delta.root`` and ``checkpoint.root``) of the same topics: every current table
equals the fresh one row for row, every history table holds each Kafka record's change exactly once (no duplicate
Kafka coordinates, the same rows as the fresh one), and our answers (status, offsets, topics) equal Connect's.
Columns that say when a row was written (``updated_at``, ``recorded_at``, ...) are left out of the comparison.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kafka import KafkaConsumer, TopicPartition
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from connect_state.core.faults import FaultPoint
from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient, ConnectRestError
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.kafka.groups import ConsumerGroupAdmin
from connect_state.spark import active_topics, connector_states, offsets
from connect_state.spark.streaming import run_catch_up
from connect_state.tables.schemas import (
    ACTIVE_TOPICS,
    ACTIVE_TOPICS_HISTORY,
    CONNECTOR_EVENTS,
    CONNECTORS,
    REJECTED_RECORDS,
    SINK_OFFSETS,
    SINK_OFFSETS_HISTORY,
    SOURCE_OFFSETS,
    SOURCE_OFFSETS_HISTORY,
    TableSpec,
)
from tests.integration.drivers import DriverProcess, kill_leftovers
from tests.integration.helpers import api_client, delta_table, job_settings, source_position, unique
from tests.unit.helpers import WRITE_TIME_COLUMNS

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]
T = TypeVar("T")

WAIT_S = 240.0
ROUND_S = 300.0  # a driver's start (its own JVM) plus the batches until its fault point, on a busy 2-core machine
FOLD_JOBS = [active_topics.JOB, connector_states.JOB, offsets.JOB]
ONLY_FOLDS = ["--jobs", ",".join(job.name for job in FOLD_JOBS)]
CURRENT_TABLES = (ACTIVE_TOPICS, CONNECTORS, SOURCE_OFFSETS, SINK_OFFSETS)
HISTORY_TABLES = (
    ACTIVE_TOPICS_HISTORY,
    CONNECTOR_EVENTS,
    SOURCE_OFFSETS_HISTORY,
    SINK_OFFSETS_HISTORY,
    REJECTED_RECORDS,
)
# Where the continuous runs kill themselves: the first early in its run (a driver takes minutes to start on two busy
# cores), the second a few batches in (the fold queries' batches count together), so that it runs while the worker
# restarts; then where the catch-up run does.
HISTORY_FAULT = f"{FaultPoint.AFTER_HISTORY_WRITE}:1"
BATCH_START_FAULT = f"{FaultPoint.BATCH_START}:3"
CATCH_UP_FAULT = f"{FaultPoint.AFTER_BATCH_WRITE}:3"


@pytest.fixture(autouse=True)
def no_driver_left() -> Iterator[None]:
    """Every driver a test started is gone when it ends, however it ends."""
    yield
    kill_leftovers()


def wait_until(predicate: Callable[[], T], timeout_s: float, what: str, driver: DriverProcess | None = None) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            log = f"\n--- {driver.name}:\n{driver.log_tail()}" if driver is not None else ""
            pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what} (last: {value!r}){log}")
        time.sleep(1)


# --- connectors at work ---------------------------------------------------------------------------------------------


class Workload:
    """Connectors at work in a thread of their own: every ``pause_s`` the next action of a cycle (lines appended to
    both sources, a pause and resume, a stop and resume, a connector created and deleted). Connect's refusals while
    it rebalances (409) are counted and skipped."""

    def __init__(self, connect: ConnectRestClient, tmp_path: Path, sources: dict[str, Path], pause_s: float = 2.0):
        self.connect = connect
        self.tmp_path = tmp_path
        self.sources = sources
        self.pause_s = pause_s
        self.stop = threading.Event()
        self.done: list[str] = []
        self.refused: list[str] = []
        self.short_lived: list[str] = []
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)

    def actions(self) -> list[tuple[str, Callable[[], object]]]:
        (a, file_a), (b, file_b) = self.sources.items()
        lines = itertools.count()
        c = self.connect

        def append() -> None:
            append_lines(file_a, [f"a {next(lines)}", f"a {next(lines)}"])
            append_lines(file_b, [f"b {next(lines)}"])

        def create_short_lived() -> None:
            name = unique("crash-short")
            file = self.tmp_path / f"{name}.txt"
            append_lines(file, ["short"])
            c.create_connector(name, file_source_config(name, file, unique("crash-short-topic")))
            self.short_lived.append(name)

        def delete_short_lived() -> None:
            while self.short_lived:
                c.delete_connector(self.short_lived.pop(), missing_ok=True)

        return [
            ("append", append),
            ("pause b", lambda: c.put(c.connector_path(b, "pause"))),
            ("append", append),
            ("create short-lived", create_short_lived),
            ("resume b", lambda: c.put(c.connector_path(b, "resume"))),
            ("stop a", lambda: c.put(c.connector_path(a, "stop"))),
            ("append", append),
            ("delete short-lived", delete_short_lived),
            ("resume a", lambda: c.put(c.connector_path(a, "resume"))),
        ]

    def _run(self) -> None:
        for what, action in itertools.cycle(self.actions()):
            if self.stop.wait(self.pause_s):
                return
            try:
                action()
                self.done.append(what)
            except ConnectRestError as err:
                self.refused.append(f"{what}: {err}")

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> None:
        """Stop the cycle and leave everything running: both sources resumed, no short-lived connector left."""
        self.stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive()
        for name in self.short_lived:
            self.connect.delete_connector(name, missing_ok=True)
        for name in self.sources:
            self.connect.wait_for(
                lambda n=name: self.connect.put(self.connect.connector_path(n, "resume"))[0] == 202,
                WAIT_S,
                description=f"{name} resumed",
            )


# --- our answers and Connect's --------------------------------------------------------------------------------------


def disagreements(api, connect: ConnectRestClient, names: list[str]) -> list[str]:
    """The (connector, path) whose answer differs from Connect's (status, offsets, topics)."""
    differ = []
    for name, path in itertools.product(names, ("status", "offsets", "topics")):
        ours = api.get(f"/connectors/{name}/{path}")
        theirs = connect.get(connect.connector_path(name, path))
        if (ours.status_code, ours.get_json()) != theirs:
            differ.append(f"{name}/{path}: ours {ours.status_code} {ours.get_json()} != Connect's {theirs}")
    return differ


def all_running(connect: ConnectRestClient, names: list[str]) -> bool:
    for name in names:
        status = connect.connector_status(name) or {}
        states = [status.get("connector", {}).get("state")] + [t.get("state") for t in status.get("tasks", [])]
        if len(states) < 2 or set(states) != {"RUNNING"}:
            return False
    return True


# --- the tables -----------------------------------------------------------------------------------------------------


def end_offsets(settings: Settings, topics: list[str]) -> dict[TopicPartition, int]:
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap_servers)
    try:
        parts = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        return consumer.end_offsets(parts)
    finally:
        consumer.close()


def committed(settings: Settings, group: str) -> dict[TopicPartition, int]:
    """The sink's committed offsets (``__consumer_offsets`` is folded too, and the sink commits while it consumes)."""
    with ConsumerGroupAdmin(settings) as admin:
        return {TopicPartition(t, p): offset for (t, p), offset in admin.list_group_offsets(group).items()}


def comparable(spark: SparkSession, settings: Settings, spec: TableSpec, group: str, topics: list[str]) -> DataFrame:
    """The table without its write-time columns; the sink tables for our sink's group only, the quarantine for our
    worker's topics only (``__consumer_offsets`` is the whole broker's: other tests write to it meanwhile)."""
    frame = delta_table(spark, settings, spec.name)
    frame = frame.drop(*[c for c in WRITE_TIME_COLUMNS if c in frame.columns])
    if spec in (SINK_OFFSETS, SINK_OFFSETS_HISTORY):
        frame = frame.filter(F.col("group_id") == group)
    if spec is REJECTED_RECORDS:
        frame = frame.filter(F.col("topic").isin(topics))
    return frame


def sorted_rows(frame: DataFrame) -> list[Any]:
    return sorted(frame.collect(), key=repr)


def duplicates(frame: DataFrame, key: tuple[str, ...]) -> list[Any]:
    return frame.groupBy(*key).count().filter(F.col("count") > 1).collect()


# --- the driver -----------------------------------------------------------------------------------------------------


def assert_killed_by_fault(driver: DriverProcess, fault: str) -> None:
    """The driver killed itself (SIGKILL) at the fault's point within ``ROUND_S``."""
    code = driver.wait(ROUND_S)
    if code is None:
        driver.kill()
        pytest.fail(f"{fault} was not reached within {ROUND_S:.0f} s:\n{driver.log_tail()}")
    assert code == -9, (fault, code, driver.log_tail())
    assert f"killing the process at {fault.split(':')[0]}" in driver.log_tail(300), driver.log_tail()
    driver.kill()  # whatever of its process group is left


# --- the test -------------------------------------------------------------------------------------------------------


@pytest.mark.timeout(1500)
def test_kill_9_again_and_again_and_a_worker_restart_leave_the_tables_a_fold_from_scratch_makes(
    spark, extra_connect_worker, tmp_path
):
    worker = extra_connect_worker()
    connect = worker.client()
    settings = job_settings(
        worker.worker_settings(),
        tmp_path,
        **{
            "trigger.interval": "1 seconds",
        },
    )
    topics = worker.internal_topics
    src_a, src_b, sink = unique("crash-src-a"), unique("crash-src-b"), unique("crash-sink")
    sources = {src_a: tmp_path / "a.txt", src_b: tmp_path / "b.txt"}
    topic_a = unique("crash-topic-a")
    for name, file in sources.items():
        append_lines(file, [f"{name} first"])
        topic = topic_a if name == src_a else unique("crash-topic-b")
        connect.create_connector(name, file_source_config(name, file, topic))
    connect.create_connector(sink, file_sink_config(sink, tmp_path / "sink.txt", [topic_a]))
    names = [src_a, src_b, sink]
    connect.wait_for(lambda: all_running(connect, names), WAIT_S, description="the connectors running")

    workload = Workload(connect, tmp_path, sources)
    workload.start()
    drivers = tmp_path / "drivers"
    kills: list[str] = []
    try:
        # Continuous, killed inside foreachBatch between a history table's write and its current table's.
        driver = DriverProcess(settings, drivers, "continuous-history", ONLY_FOLDS, HISTORY_FAULT).start()
        assert_killed_by_fault(driver, HISTORY_FAULT)
        kills.append(HISTORY_FAULT)

        # Continuous; the Connect worker restarts while the driver starts and runs; killed at the start of a batch
        # (nothing of it written) a few batches in.
        driver = DriverProcess(settings, drivers, "continuous-batch-start", ONLY_FOLDS, BATCH_START_FAULT).start()
        worker.stop()
        worker.start()
        connect.wait_for(lambda: all_running(connect, names), WAIT_S, description="the connectors running again")
        assert_killed_by_fault(driver, BATCH_START_FAULT)
        kills.append(f"{BATCH_START_FAULT}, the worker restarted meanwhile")

        # A catch-up run killed after a batch's writes, before its checkpoint commit.
        driver = DriverProcess(settings, drivers, "catch-up", ["--available-now", *ONLY_FOLDS], CATCH_UP_FAULT).start()
        assert_killed_by_fault(driver, CATCH_UP_FAULT)
        kills.append(f"catch-up {CATCH_UP_FAULT}")
    finally:
        workload.finish()
    assert workload.done, workload.refused
    connect.wait_for(lambda: all_running(connect, names), WAIT_S, description="the connectors running, settled")
    for name, file in sources.items():
        size = file.stat().st_size
        connect.wait_for(lambda n=name, z=size: source_position(connect, n) == z, WAIT_S, description=f"{name} read")
    group = f"connect-{sink}"
    connect.wait_for(
        lambda: committed(settings, group) == end_offsets(settings, [topic_a]),
        WAIT_S,
        description="the sink's offsets committed up to the end of its topic",
    )

    # The crashed tables caught up (their checkpoints resumed), and a fold from scratch of the same topics.
    fresh = settings.with_overrides(
        **{"delta.root": str(tmp_path / "fresh-delta"), "checkpoint.root": str(tmp_path / "fresh-checkpoints")}
    )
    for _attempt in range(3):
        before = (end_offsets(settings, topics), committed(settings, group))
        assert run_catch_up(FOLD_JOBS, spark, settings) == 0
        assert run_catch_up(FOLD_JOBS, spark, fresh) == 0
        if (end_offsets(settings, topics), committed(settings, group)) == before:
            break  # nothing was written to the worker's topics or committed in between: both folds saw the same
    else:
        pytest.fail("the worker's topics kept changing; the folds cannot be compared")

    # After the worker's restart and the crashes, our answers equal Connect's.
    assert disagreements(api_client(settings), connect, names) == []

    for spec in CURRENT_TABLES:
        crashed = sorted_rows(comparable(spark, settings, spec, group, topics))
        scratch = sorted_rows(comparable(spark, fresh, spec, group, topics))
        assert crashed == scratch, f"{spec.name} differs from a fold from scratch"
        assert scratch, f"{spec.name} is empty: the test compared nothing"
    for spec in HISTORY_TABLES:
        crashed_frame = comparable(spark, settings, spec, group, topics)
        assert duplicates(crashed_frame, spec.key) == [], f"{spec.name} holds a Kafka record's change twice"
        crashed = sorted_rows(crashed_frame)
        scratch = sorted_rows(comparable(spark, fresh, spec, group, topics))
        assert crashed == scratch, f"{spec.name} differs from a fold from scratch"
        assert scratch or spec is REJECTED_RECORDS, f"{spec.name} is empty: the test compared nothing"
    print(f"kills: {kills}; workload: {len(workload.done)} actions, {len(workload.refused)} refused")
