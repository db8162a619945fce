"""Benchmark: the KIP-910 heartbeats job against a raw Spark Kafka read of the same config, status and offsets topics,
in one run.

Issue 11 §1 asks for this job's catch-up ratio. Three fresh topics shaped like ``connect-configs`` (1 partition),
``connect-status`` (5 partitions) and ``connect-offsets`` (25 partitions) are filled with N synthetic records in all
(default 200,000), written as a Kafka 4.3.1 worker writes them (:mod:`connect_state.formats.config`,
:mod:`connect_state.formats.status`, :mod:`connect_state.formats.offsets`):

* ``--connectors`` (1,000) FileStream source connectors (``FileStreamSourceConnector``, the class of the demo
  provider :mod:`connect_state.dev.demo_heartbeats`, registered for the run with ``heartbeat.providers``: only a class
  with a provider is eligible), each created as ``putConnectorConfig`` and ``putTaskConfigs`` write it (target state
  STARTED, config, its one task config, commit), its connector and task RUNNING in the status topic; a share of them
  (``--paused-ratio``, 5%) is then paused (target state PAUSED, connector and task PAUSED), so not eligible;
* the rest of the N records are source offsets as ``OffsetStorageWriter`` flushes them: keys Connect's exact bytes
  ``["<connector>",{"filename":...}]`` (:func:`~connect_state.formats.offsets.offset_key_bytes`), values
  ``{"position":N}``. First one flush per connector of all its ``--partitions-per-connector`` (100) source partitions,
  then flushes of 1 to 10 random partitions of a random connector, each position moved forward (with
  ``--tombstone-ratio``, 0 by default, a partition's commit is now and then a tombstone, as an offsets reset writes
  it), until N records. Every record goes to the partition the Java producer would pick for its key
  (``connect_state.kafka.partitioner``).

Then, in one SparkSession (``local[2]``), after a warm-up on small topics:

* (a) the baseline: one raw batch read of the three topics together (``read_topic_batch(...).count()`` of one
  subscription to all three, as the job's query subscribes to them);
* (b) the job: ``HeartbeatsJob().start(spark, settings, available_now=True)`` from empty state (new Delta tables, new
  checkpoint, new ``leases`` table), run as ``connect_state.spark.streaming.run_job`` runs a catch-up: the supervisor
  runs the job's leased query task until the query stops, then the job's catch-up step (one tick of its
  ``HeartbeatScheduler``: "a catch-up run ticks once, at its end"), then the run is closed (sink closed, lease
  released). Timed from ``HeartbeatsJob.start()`` until the run is closed: taking the heartbeats lease (which creates
  the ``leases`` table with ``deltalake``) and its renewals, creating the tables, rebuilding the schedule, the query
  (Kafka read, parse, the per-connector ``applyInPandasWithState`` fold, the ``source_partition_activity`` MERGE, the
  schedule's updates, the watermarks), the final tick and the lease's release. Loading the providers
  (``HeartbeatsJob.check``) is not timed: the console script does it before its SparkSession.

**Heartbeats sent: none.** ``heartbeat.interval.ms`` is 24 hours (``idle`` mode) and every offset was written moments
before the run, so no partition is due: the final tick looks at the schedule (every eligible connector's partitions)
and sends nothing, as the catch-up of a cluster whose sources are busy does. The timed run includes that look, not
the sending of heartbeats (one provider call, produce with ``acks=all``, offsets-topic read and commit per due
partition). ``heartbeat.records.topic`` is a fresh topic of the run, created empty, and the check finds it still
empty afterwards.

After each job run the tables are checked against the generator's own bookkeeping, not against our fold:
``source_partition_activity`` has one row per live (connector, source partition), with the partition, the last
position the generator wrote, the connector's class and config, the offsets-topic partition the Java partitioner
picks for the key and the offset of the key's last record in it, ``eligible`` exactly for the connectors not paused
(a reason otherwise), the run's interval and heartbeat topic, no ``last_heartbeat_at``, and a ``last_moved_at``
within the offsets topic's fill; ``heartbeats``, the heartbeat topic and ``rejected_records`` are empty
(``check: OK``, or exit 1). The last line is the ratio of the job's time to the raw read's time. Performance is
compared only within one run.

    .venv/bin/python bench/heartbeats.py                            # 200,000 records, temporary broker
    .venv/bin/python bench/heartbeats.py --records 50000 --connectors 250 --repeat 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from connect_state.connect.filestream import FILE_SOURCE_CLASS, FILENAME_FIELD, POSITION_FIELD
from connect_state.core.settings import Settings, add_config_arguments
from connect_state.core.vocabulary import State, TargetState
from connect_state.dev.filestream import file_source_config
from connect_state.formats.config import (
    connector_config_key,
    serialize_connector_config,
    serialize_target_state,
    serialize_task_commit,
    serialize_task_config,
    target_state_key,
    task_commit_key,
    task_config_key,
)
from connect_state.formats.offsets import offset_key_bytes, serialize_offset_value
from connect_state.formats.status import Status, connector_status_key, serialize_status, task_status_key
from connect_state.kafka.partitioner import partition_for_key
from connect_state.spark import heartbeats as hb
from connect_state.spark.streaming import supervise
from connect_state.tables.schemas import HEARTBEATS, REJECTED_RECORDS, SOURCE_PARTITION_ACTIVITY

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    BenchError,
    JobRun,
    Record,
    add_cluster_arguments,
    bench_main,
    bench_session,
    check_arguments,
    end_offsets_total,
    instrumented_writer,
    load_average,
    new_topic,
    progress_lines,
    rate,
    time_raw_read,
)

CONFIG_PARTITIONS = 1
"""``connect-configs`` always has one partition."""
STATUS_PARTITIONS = 5
"""Connect's default partition count for ``connect-status``."""
OFFSETS_PARTITIONS = 25
"""Connect's default partition count for ``connect-offsets`` (``offset.storage.partitions``)."""
HEARTBEAT_INTERVAL_MS = 24 * 3600 * 1000
"""``heartbeat.interval.ms`` of the runs: far longer than a run, so nothing is due at the catch-up's final tick."""
FLUSH_MAX = 10
"""The most source partitions one later offsets flush commits."""
TASKS = 1
"""``FileStreamSourceConnector.taskConfigs`` gives one task."""
WORKERS = ("10.0.0.1:8083", "10.0.0.2:8083", "10.0.0.3:8083")
DEMO_PROVIDER = "connect_state.dev.demo_heartbeats:provider"


# --- the workload ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LivePartition:
    """A source partition with an offset after the whole workload, and where its last record is."""

    connector: str
    partition: int
    position: int
    kafka_partition: int
    kafka_offset: int


@dataclass
class Workload:
    """The records of the three topics, and what ``source_partition_activity`` must hold after them."""

    config: list[Record] = field(default_factory=list)
    status: list[Record] = field(default_factory=list)
    offsets: list[Record] = field(default_factory=list)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    """Each connector's config as the config topic holds it last."""
    eligible: dict[str, bool] = field(default_factory=dict)
    """Whether each connector is eligible (STARTED and RUNNING; the paused ones are not)."""
    live: dict[bytes, LivePartition] = field(default_factory=dict)
    """Key bytes of a live source partition -> its last offset and record."""
    tombstones: int = 0
    next_offset: list[int] = field(default_factory=lambda: [0] * OFFSETS_PARTITIONS)
    """The next Kafka offset of each offsets-topic partition (records are written in order, without retries)."""

    @property
    def records(self) -> int:
        return len(self.config) + len(self.status) + len(self.offsets)

    def commit(self, connector: str, partition: int, key: bytes, kafka_partition: int, position: int | None) -> None:
        """One offsets-topic record: ``position``, or a tombstone (None)."""
        offset = self.next_offset[kafka_partition]
        self.next_offset[kafka_partition] += 1
        if position is None:
            self.tombstones += 1
            self.offsets.append((key, None))
            self.live.pop(key, None)
            return
        self.offsets.append((key, serialize_offset_value({POSITION_FIELD: position})))
        self.live[key] = LivePartition(connector, partition, position, kafka_partition, offset)


def connector_name(index: int) -> str:
    return f"bench-hb-source-{index:05d}"


def source_partition(connector: str, partition: int) -> dict[str, object]:
    """A FileStream source partition (``FileStreamSourceTask``: ``{"filename": <file>}``)."""
    return {FILENAME_FIELD: f"/var/bench/input/{connector}/part-{partition:03d}.txt"}


def _connector_config(name: str) -> dict[str, str]:
    return file_source_config(name, Path(f"/var/bench/input/{name}/part-000.txt"), f"{name}-lines")


def _task_config(config: dict[str, str]) -> dict[str, str]:
    return {
        "task.class": "org.apache.kafka.connect.file.FileStreamSourceTask",
        "file": config["file"],
        "topic": config["topic"],
        "batch.size": "2000",
    }


def _status(work: Workload, name: str, state: State, worker: str) -> None:
    """The connector's and its task's status, as the worker running them writes it."""
    work.status.append((connector_status_key(name).encode(), serialize_status(Status(state, None, worker, 1))))
    for task in range(TASKS):
        work.status.append((task_status_key(name, task).encode(), serialize_status(Status(state, None, worker, 1))))


def _create(work: Workload, name: str, worker: str, paused: bool) -> None:
    """A new connector (target state, config, task configs, commit), RUNNING; then paused, if ``paused``."""
    config = _connector_config(name)
    work.config.append((target_state_key(name).encode(), serialize_target_state(TargetState.STARTED)))
    work.config.append((connector_config_key(name).encode(), serialize_connector_config(config)))
    for task in range(TASKS):
        work.config.append((task_config_key(name, task).encode(), serialize_task_config(_task_config(config))))
    work.config.append((task_commit_key(name).encode(), serialize_task_commit(TASKS)))
    _status(work, name, State.RUNNING, worker)
    if paused:
        work.config.append((target_state_key(name).encode(), serialize_target_state(TargetState.PAUSED)))
        _status(work, name, State.PAUSED, worker)
    work.configs[name] = config
    work.eligible[name] = not paused


def generate_workload(
    n: int, connectors: int, partitions_per_connector: int, paused_ratio: float, tombstone_ratio: float, seed: int
) -> Workload:
    """``n`` records: the connectors' config and status records, then offsets flushes until ``n`` (see the module
    docstring)."""
    rng = random.Random(seed)
    work = Workload()
    names = [connector_name(c) for c in range(connectors)]
    for name in names:
        _create(work, name, WORKERS[rng.randrange(len(WORKERS))], paused=rng.random() < paused_ratio)
    if work.records >= n:
        raise BenchError(
            f"{connectors:,} connectors take {work.records:,} config and status records: --records {n:,} leaves no "
            "room for offsets (raise --records or lower --connectors)"
        )
    keys: dict[tuple[int, int], tuple[bytes, int]] = {}
    positions: dict[tuple[int, int], int] = {}

    def flush(c: int, partitions: Sequence[int], first: bool) -> None:
        for p in partitions:
            if work.records >= n:
                return
            known = keys.get((c, p))
            if known is None:
                key = offset_key_bytes(names[c], source_partition(names[c], p))
                known = keys[(c, p)] = (key, partition_for_key(key, OFFSETS_PARTITIONS))
            if not first and rng.random() < tombstone_ratio:
                positions.pop((c, p), None)
                work.commit(names[c], p, known[0], known[1], None)
                continue
            position = positions[(c, p)] = positions.get((c, p), 0) + rng.randrange(1, 4096)
            work.commit(names[c], p, known[0], known[1], position)

    everything = range(partitions_per_connector)
    for c in range(connectors):  # each task's first flush: every file it reads
        flush(c, everything, first=True)
    while work.records < n:
        c = rng.randrange(connectors)
        k = min(rng.randint(1, FLUSH_MAX), partitions_per_connector)
        flush(c, rng.sample(everything, k), first=False)
    return work


# --- Kafka and Spark ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Topics:
    config: str
    status: str
    offsets: str
    heartbeats: str
    offsets_filled: tuple[int, int]
    """Epoch ms before and after the offsets topic's fill: the records' timestamps lie in between."""

    @property
    def read(self) -> list[str]:
        """The topics the job reads (and the raw read counts)."""
        return [self.config, self.status, self.offsets]


def fill_topics(
    cluster: Settings, args: argparse.Namespace, work: Workload, prefix: str, heartbeats: str, topics: list[str]
) -> Topics:
    rf = args.replication_factor
    config = new_topic(cluster, f"{prefix}-configs", work.config, CONFIG_PARTITIONS, rf, topics)
    status = new_topic(cluster, f"{prefix}-status", work.status, STATUS_PARTITIONS, rf, topics)
    before = int(time.time() * 1000)
    offsets = new_topic(cluster, f"{prefix}-offsets", work.offsets, OFFSETS_PARTITIONS, rf, topics)
    return Topics(config, status, offsets, heartbeats, (before, int(time.time() * 1000)))


def job_settings(cluster: Settings, work_dir: Path, topics: Topics, label: str) -> Settings:
    """The cluster's settings with the run's topics, fresh Delta and checkpoint roots, and the heartbeat settings."""
    return cluster.with_overrides(
        **{
            "config.storage.topic": topics.config,
            "status.storage.topic": topics.status,
            "offset.storage.topic": topics.offsets,
            "delta.root": str(work_dir / label / "delta"),
            "checkpoint.root": str(work_dir / label / "checkpoints"),
            "heartbeat.interval.ms": str(HEARTBEAT_INTERVAL_MS),
            "heartbeat.mode": "idle",
            "heartbeat.records.topic": topics.heartbeats,
            "heartbeat.providers": f"{FILE_SOURCE_CLASS}={DEMO_PROVIDER}",
        }
    )


def raw_read(spark: SparkSession, cluster: Settings, topics: Topics) -> tuple[int, float]:
    """(a): the three topics read to a count in one batch read (``subscribe`` takes a comma-separated list)."""
    return time_raw_read(spark, cluster, ",".join(topics.read))


@contextlib.contextmanager
def captured_queries() -> Iterator[list[tuple[float, StreamingQuery]]]:
    """The heartbeats queries started meanwhile, with when their start returned (``perf_counter``): the module's
    ``start``, which ``HeartbeatsJob`` calls by name, wrapped and restored on exit."""
    original = hb.start
    started: list[tuple[float, StreamingQuery]] = []

    def start(*args: Any, **kwargs: Any) -> StreamingQuery:
        query = original(*args, **kwargs)
        started.append((time.perf_counter(), query))
        return query

    setattr(hb, "start", start)  # noqa: B010  (mypy refuses an assignment to a module's function)
    try:
        yield started
    finally:
        setattr(hb, "start", original)  # noqa: B010


@dataclass
class HeartbeatsRun:
    """One timed catch-up run of the heartbeats job."""

    run: JobRun
    query_seconds: float
    """From ``HeartbeatsJob.start()`` until the supervisor saw its task end (the query stopped)."""
    tick_seconds: float
    heartbeats_sent: int
    close_seconds: float


@dataclass(frozen=True)
class HeartbeatsUnderTest:
    """The heartbeats job as :class:`bench.common.JobUnderTest` describes a job, but run as a :class:`HeartbeatsJob`
    is (its ``start`` returns a ``Run``, not a query): ``JobUnderTest.run`` does not fit it."""

    writer: tuple[Any, str] = (hb.HeartbeatsWriter, "__call__")
    writer_parts: Sequence[tuple[Any, str, str]] = (
        (hb.HeartbeatsWriter, "merge_current", "source_partition_activity MERGE"),
        (hb.HeartbeatScheduler, "apply", "schedule updates"),
        (hb.HeartbeatsWriter, "record_watermark", "watermarks"),
    )
    start_what: str = "taking the lease, creating the tables, rebuilding the schedule, starting the query"

    @property
    def part_labels(self) -> list[tuple[str, str]]:
        return [(name, label) for _, name, label in self.writer_parts]

    def run(self, spark: SparkSession, settings: Settings, timeout_s: float) -> HeartbeatsRun:
        """(b): a catch-up run from empty state, as ``connect_state.spark.streaming.run_job(job, spark, settings,
        True)`` does it (supervise the run's tasks without restarts, then its catch-up step, then close it), timed
        from ``HeartbeatsJob.start()`` until the run is closed."""
        job = hb.HeartbeatsJob()
        job.check(settings)  # loads the providers: before the session in the console script, so not timed
        stop = threading.Event()  # given, so the supervisor leaves Ctrl-C and SIGTERM to the benchmark
        parts = [(owner, name) for owner, name, _ in self.writer_parts]
        with instrumented_writer(self.writer, parts) as writer, captured_queries() as queries:
            started = time.perf_counter()
            run = job.start(spark, settings, True, None)
            try:
                status = supervise(run.tasks, stop, timeout_s, None, job.name)
                query_done = time.perf_counter()
                if status != 0:
                    if query_done - started >= timeout_s:
                        raise BenchError(
                            f"the job did not finish within {timeout_s:g}s (stopped); raise --job-timeout?"
                        )
                    error = queries[-1][1].exception() if queries else None
                    raise BenchError(f"the job failed (status {status}): {error or 'see the log above'}")
                if len(queries) != 1:
                    raise BenchError(f"the job started {len(queries)} queries, expected 1 (lease not taken?)")
                emitted = run.catch_up() if run.catch_up is not None else []
                tick_done = time.perf_counter()
                if not isinstance(emitted, list):
                    raise BenchError("the catch-up step did not run (the lease was not held)")
            finally:
                closing = time.perf_counter()
                run.close()
                for _, query in queries:
                    if query.isActive:
                        query.stop()
            seconds = time.perf_counter() - started
        (query_started, query), *_ = queries
        job_run = JobRun(seconds, query_started - started, writer, list(query.recentProgress))
        return HeartbeatsRun(
            job_run, query_done - started, tick_done - query_done, len(emitted), seconds - (closing - started)
        )


JOB = HeartbeatsUnderTest()


def check_tables(spark: SparkSession, settings: Settings, cluster: Settings, topics: Topics, work: Workload) -> str:
    """The job's tables (and the heartbeat topic) against the generator's bookkeeping; raise BenchError on a
    mismatch."""

    def load(name: str) -> Any:
        return spark.read.format("delta").load(str(settings.table_path(name)))

    columns = ("connector", "key", "partition", "offset", "connector_class", "config", "eligible", "reason",
               "heartbeat_interval_ms", "heartbeat_topic", "kafka_partition", "kafka_offset", "last_heartbeat_at",
               "unix_millis(last_moved_at) AS last_moved_ms")  # fmt: skip
    rows = load(SOURCE_PARTITION_ACTIVITY.name).selectExpr(*columns).collect()
    got = {bytes(r.key): r for r in rows}
    wrong: list[str] = []
    if len(got) != len(rows):
        wrong.append(f"{len(rows) - len(got):,} duplicate keys")
    missing, extra = work.live.keys() - got.keys(), got.keys() - work.live.keys()
    if missing or extra:
        wrong.append(f"{len(missing):,} live source partitions missing, {len(extra):,} unexpected")
    earliest, latest = topics.offsets_filled
    fill_window = f"in the fill, [{earliest}, {latest}] ms"
    differ: list[str] = []
    for key in sorted(work.live.keys() & got.keys()):
        live, row = work.live[key], got[key]
        eligible = work.eligible[live.connector]
        expected: dict[str, object] = {
            "connector": live.connector,
            "partition": source_partition(live.connector, live.partition),
            "offset": {POSITION_FIELD: live.position},
            "connector_class": FILE_SOURCE_CLASS,
            "config": work.configs[live.connector],
            "eligible": eligible,
            "reason is null": eligible,
            "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
            "heartbeat_topic": topics.heartbeats,
            "kafka_partition": live.kafka_partition,
            "kafka_offset": live.kafka_offset,
            "last_heartbeat_at": None,
            "last_moved_at": fill_window,
        }
        found: dict[str, object] = {
            "connector": row.connector,
            "partition": json.loads(row.partition),
            "offset": json.loads(row.offset),
            "connector_class": row.connector_class,
            "config": json.loads(row.config) if row.config else None,
            "eligible": row.eligible,
            "reason is null": row.reason is None,
            "heartbeat_interval_ms": row.heartbeat_interval_ms,
            "heartbeat_topic": row.heartbeat_topic,
            "kafka_partition": row.kafka_partition,
            "kafka_offset": row.kafka_offset,
            "last_heartbeat_at": row.last_heartbeat_at,
            "last_moved_at": fill_window
            if earliest - 1000 <= row.last_moved_ms <= latest + 1000
            else row.last_moved_ms,
        }
        fields = [
            f"{name} {found[name]!r} (expected {want!r})" for name, want in expected.items() if found[name] != want
        ]
        if fields:
            differ.append(f"{key.decode()}: " + ", ".join(fields))
    if differ:
        wrong.append(f"{len(differ):,} rows wrong, e.g. {differ[0]}")
    counts = {spec.name: load(spec.name).count() for spec in (HEARTBEATS, REJECTED_RECORDS)}
    wrong += [f"{name} has {count:,} rows, expected none" for name, count in counts.items() if count]
    sent = end_offsets_total(cluster, topics.heartbeats, 1)
    if sent:
        wrong.append(f"heartbeat topic {topics.heartbeats} holds {sent:,} records, expected none")
    if wrong:
        raise BenchError("check failed: " + "; ".join(wrong))
    connectors = {r.connector for r in rows}
    eligible_rows = sum(1 for r in rows if r.eligible)
    return (
        f"{SOURCE_PARTITION_ACTIVITY.name} {len(rows):,} rows over {len(connectors):,} connectors "
        f"({eligible_rows:,} eligible), "
        + ", ".join(f"{k} {v:,} rows" for k, v in counts.items())
        + f", heartbeat topic {sent} records"
    )


# --- the run ---------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench/heartbeats.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--records", type=int, default=200_000, help="records in the three topics (default 200000)")
    parser.add_argument("--connectors", type=int, default=1_000, help="FileStream source connectors (default 1000)")
    parser.add_argument(
        "--partitions-per-connector", type=int, default=100, help="source partitions (files) per connector (100)"
    )
    parser.add_argument("--paused-ratio", type=float, default=0.05, help="share of connectors paused (default 0.05)")
    parser.add_argument(
        "--tombstone-ratio", type=float, default=0.0, help="share of later offset commits that are tombstones (0)"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed of the workload (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of (a) and (b); medians are reported (default 1)")
    parser.add_argument("--warmup-records", type=int, default=2_000, help="records of the warm-up topics, 0: none")
    add_cluster_arguments(parser)
    parser.add_argument("--keep-dir", action="store_true", help="keep the temporary directory (broker data, tables)")
    add_config_arguments(parser)
    return parser


def validate(args: argparse.Namespace) -> None:
    check_arguments(
        (
            (args.records > 0 and args.connectors > 0, "--records and --connectors must be > 0"),
            (args.partitions_per_connector > 0, "--partitions-per-connector must be > 0"),
            (0 <= args.paused_ratio <= 1, "--paused-ratio must be in [0, 1]"),
            (0 <= args.tombstone_ratio < 1, "--tombstone-ratio must be in [0, 1)"),
            (args.repeat >= 1 and args.warmup_records >= 0, "--repeat must be >= 1, --warmup-records >= 0"),
            (args.job_timeout > 0, "--job-timeout must be positive"),
        )
    )


def make_workload(args: argparse.Namespace, n: int, connectors: int, seed: int) -> Workload:
    return generate_workload(
        n, connectors, args.partitions_per_connector, args.paused_ratio, args.tombstone_ratio, seed
    )


def describe(work: Workload, connectors: int, args: argparse.Namespace) -> str:
    paused = sum(1 for eligible in work.eligible.values() if not eligible)
    return (
        f"{work.records:,} records ({len(work.config):,} config, {len(work.status):,} status, {len(work.offsets):,} "
        f"offsets of which {work.tombstones:,} tombstones) over {connectors:,} connectors ({paused:,} paused) x "
        f"{args.partitions_per_connector} source partitions, {len(work.live):,} live at the end"
    )


def run_once(
    spark: SparkSession,
    args: argparse.Namespace,
    cluster: Settings,
    work_dir: Path,
    topics: Topics,
    work: Workload,
    label: str,
) -> tuple[float, float]:
    """(a) then (b), the job's tables checked; returns both times."""
    count, raw_seconds = raw_read(spark, cluster, topics)
    if count != work.records:
        raise BenchError(f"the raw read counted {count:,} records, expected {work.records:,}")
    settings = job_settings(cluster, work_dir, topics, label)
    result = JOB.run(spark, settings, args.job_timeout)
    summary = check_tables(spark, settings, cluster, topics, work)
    seconds = result.run.seconds
    if label == "warmup":
        print(f"warm-up ({work.records:,} records): raw read {raw_seconds:.2f} s, job {seconds:.2f} s", flush=True)
        return raw_seconds, seconds
    print(f"(a) raw read of the three topics, {label}: {rate(work.records, raw_seconds)}", flush=True)
    print(f"(b) job, {label}: {rate(work.records, seconds)}", flush=True)
    for line in progress_lines(result.run, JOB.part_labels, JOB.start_what):
        print(line, flush=True)
    print(
        f"    query stopped {result.query_seconds:.2f} s after start(); then the catch-up tick "
        f"{result.tick_seconds:.2f} s ({result.heartbeats_sent} heartbeats sent), closing (lease released) "
        f"{result.close_seconds:.2f} s",
        flush=True,
    )
    print(f"check: OK ({summary})", flush=True)
    return raw_seconds, seconds


def measure(args: argparse.Namespace, cluster: Settings, work_dir: Path, topics: list[str]) -> None:
    """Generate, fill, warm up, then (a) and (b) ``--repeat`` times; print the figures, the ratio last."""
    started = time.perf_counter()
    work = make_workload(args, args.records, args.connectors, args.seed)
    print(
        f"workload: {describe(work, args.connectors, args)}, seed {args.seed}; generated in "
        f"{time.perf_counter() - started:.2f} s",
        flush=True,
    )
    heartbeats = new_topic(cluster, "bench-hb-records", [], 1, args.replication_factor, topics)
    main_topics = fill_topics(cluster, args, work, "bench-hb", heartbeats, topics)
    print(
        f"heartbeat.interval.ms {HEARTBEAT_INTERVAL_MS} (idle mode): nothing is due at the end of a run; "
        f"heartbeat.records.topic {heartbeats} (empty)",
        flush=True,
    )
    spark = bench_session(work_dir, args.master, "connect-state-bench-heartbeats", args.conf)
    raw_times: list[float] = []
    job_times: list[float] = []
    try:
        if args.warmup_records:
            connectors = max(1, min(args.connectors, args.warmup_records // 200))
            warm = make_workload(args, args.warmup_records, connectors, args.seed + 1)
            warm_topics = fill_topics(cluster, args, warm, "bench-hb-warmup", heartbeats, topics)
            run_once(spark, args, cluster, work_dir, warm_topics, warm, "warmup")
        for round_no in range(1, args.repeat + 1):
            print(f"round {round_no}: load average {load_average()} (includes this run's own work)", flush=True)
            raw_seconds, job_seconds = run_once(spark, args, cluster, work_dir, main_topics, work, f"job-{round_no}")
            raw_times.append(raw_seconds)
            job_times.append(job_seconds)
    finally:
        spark.stop()
    raw, job_seconds = statistics.median(raw_times), statistics.median(job_times)
    print(f"(a) raw Kafka read of the three topics to a count, median of {len(raw_times)}: {rate(work.records, raw)}")
    print(
        f"(b) heartbeats job, AvailableNow from empty state (no heartbeat due), median of {len(job_times)}: "
        f"{rate(work.records, job_seconds)}"
    )
    print(f"ratio b/a (job time / raw read time): {job_seconds / raw:.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return bench_main("bench/heartbeats.py", args, measure, validate, keep=args.keep_dir)


if __name__ == "__main__":
    sys.exit(main())
