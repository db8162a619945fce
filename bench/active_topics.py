"""Benchmark: the active-topics job against a raw Spark Kafka read of the same status topic, in one run.

A fresh 5-partition compacted topic shaped like ``connect-status`` is filled with N synthetic records (default
200,000): topic statuses over many connectors, some tombstones, and a small share of connector and task statuses
the job must ignore. Every record goes to the partition the Java producer would pick for its key. Then, in one
SparkSession (``local[2]``, the production JIT), after a warm-up on a small topic:

* (a) the baseline: ``read_topic_batch(...).count()``, a raw batch read of the whole topic;
* (b) the job: ``jobs.active_topics.start(..., available_now=True)`` from empty state (new Delta tables, new
  checkpoint), timed from ``start()`` until the query stops.

Each prints records/s; the last line is the ratio of the job's time to the raw read's time. After each job run the
tables are checked against the fold computed in Python while generating the records (``check: OK``, or exit 1).
Performance is compared only within one run, never against fixed numbers.

Without ``--bootstrap-servers`` a temporary KRaft broker (``connect_state.local_stack.KafkaBroker``) is started on
free loopback ports with its data in the work directory, and stopped at the end, also on error or Ctrl-C::

    .venv/bin/python bench/active_topics.py                       # 200,000 records, temporary broker
    .venv/bin/python bench/active_topics.py --records 50000 --repeat 3 --breakdown
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pyspark
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from pyspark.sql import SparkSession
from pyspark.sql.utils import StreamingQueryException

from connect_state.config import Settings, add_config_arguments, settings_from_args
from connect_state.formats.status import (
    Status,
    TopicStatus,
    connector_status_key,
    serialize_status,
    serialize_topic_status,
    task_status_key,
    topic_status_key,
)
from connect_state.kafka_writer import kafka_python_config
from connect_state.local_stack import KafkaBroker, free_ports, prepare_data_dir
from connect_state.partitioner import partition_for_key
from connect_state.spark.foldjob import classify_records
from connect_state.spark.kafka_source import read_topic_batch
from connect_state.spark.session import build_session
from connect_state.tables import ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, REJECTED_RECORDS
from jobs import active_topics as job

PARTITIONS = 5
"""Connect's default partition count for ``connect-status``."""
BASE_TIMESTAMP_MS = 1_700_000_000_000
TASKS_PER_CONNECTOR = 4
KAFKA_TIMEOUT_S = 60.0
BROKER_START_TIMEOUT_S = 120.0

# The tests' SparkSession settings (tests/fixtures/spark.py TEST_CONF) without the C1-only JIT and serial GC flags:
# the benchmark runs the JVM as production does.
BENCH_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "2g",
    "spark.databricks.delta.snapshotPartitions": "2",
}

Record = tuple[bytes, bytes | None]

log = logging.getLogger("bench.active_topics")


class BenchError(Exception):
    """The benchmark could not measure, or the job's result is wrong."""


# --- the workload ---------------------------------------------------------------------------------------------------


@dataclass
class Workload:
    """The records to write, and what the job must produce from them (computed with the fold's rules)."""

    records: list[Record] = field(default_factory=list)
    topic_statuses: int = 0
    tombstones: int = 0
    other_statuses: int = 0
    expected_active: int = 0
    expected_changes: int = 0


def connector_name(index: int) -> str:
    return f"bench-connector-{index:05d}"


def topic_name(connector: int, topic: int) -> str:
    return f"bench-topic-{connector:05d}-{topic:03d}"


def generate_workload(
    n: int, connectors: int, topics_per_connector: int, tombstone_ratio: float, other_ratio: float, seed: int
) -> Workload:
    """``n`` status-topic records and the expected active-topics tables.

    Each record picks a connector and one of its topics at random: with probability ``tombstone_ratio`` it is a
    tombstone of that (connector, topic), with ``other_ratio`` a connector or task status (ignored by the job),
    otherwise a topic status with a new discover timestamp. As in ``connect_state.folds.active_topics``, a topic
    status adds the topic (or updates it: the timestamp always differs), a tombstone removes an active topic.
    """
    rng = random.Random(seed)
    work = Workload()
    active: set[tuple[int, int]] = set()
    running = serialize_status(Status("RUNNING", None, "127.0.0.1:8083", 1, None))
    for i in range(n):
        c, t = rng.randrange(connectors), rng.randrange(topics_per_connector)
        roll = rng.random()
        if roll < other_ratio:
            work.other_statuses += 1
            key = connector_status_key(connector_name(c)) if i % 2 else task_status_key(connector_name(c), t)
            work.records.append((key.encode(), running))
            continue
        key_bytes = topic_status_key(topic_name(c, t), connector_name(c)).encode()
        if roll < other_ratio + tombstone_ratio:
            work.tombstones += 1
            work.records.append((key_bytes, None))
            if (c, t) in active:
                active.discard((c, t))
                work.expected_changes += 1
            continue
        work.topic_statuses += 1
        status = TopicStatus(
            topic_name(c, t), connector_name(c), rng.randrange(TASKS_PER_CONNECTOR), BASE_TIMESTAMP_MS + i
        )
        work.records.append((key_bytes, serialize_topic_status(status)))
        active.add((c, t))
        work.expected_changes += 1
    work.expected_active = len(active)
    return work


# --- Kafka: topic, fill, end offsets ---------------------------------------------------------------------------------


def client_config(settings: Settings, defaults: dict[str, Any]) -> dict[str, Any]:
    """``bootstrap.servers`` and ``kafka.client.properties`` as kafka-python keyword arguments."""
    return kafka_python_config(settings.kafka_client_config(), defaults, warn=False)


def create_topic(settings: Settings, name: str, replication_factor: int) -> None:
    """A compacted topic like ``connect-status`` (5 partitions); compaction is held off for the run's duration so
    that every record written is read back."""
    admin = KafkaAdminClient(**client_config(settings, KafkaAdminClient.DEFAULT_CONFIG))
    try:
        configs = {"cleanup.policy": "compact", "min.compaction.lag.ms": str(24 * 3600 * 1000)}
        admin.create_topics([NewTopic(name, PARTITIONS, replication_factor, topic_configs=configs)], timeout_ms=30_000)
        deadline = time.monotonic() + KAFKA_TIMEOUT_S
        while not _topic_ready(admin, name):
            if time.monotonic() > deadline:
                raise BenchError(f"topic {name} has no leader for all {PARTITIONS} partitions after {KAFKA_TIMEOUT_S}s")
            time.sleep(0.2)
    finally:
        admin.close()


def _topic_ready(admin: KafkaAdminClient, name: str) -> bool:
    """True when the topic's metadata lists every partition with a leader."""
    try:
        (description,) = admin.describe_topics([name])
    except Exception as err:  # retriable metadata errors while the topic is being created
        log.debug("describe_topics(%s): %s", name, err)
        return False
    partitions = description.get("partitions") or []
    return (
        description.get("error_code") == 0
        and len(partitions) == PARTITIONS
        and all(p.get("error_code") == 0 and p.get("leader_id", -1) >= 0 for p in partitions)
    )


def delete_topics(settings: Settings, names: Sequence[str]) -> None:
    """Remove the benchmark's topics from a broker we did not start (best effort)."""
    admin = KafkaAdminClient(**client_config(settings, KafkaAdminClient.DEFAULT_CONFIG))
    try:
        admin.delete_topics(list(names), timeout_ms=30_000)
    except Exception as err:
        print(f"note: could not delete topics {', '.join(names)}: {err}", file=sys.stderr)
    finally:
        admin.close()


def fill_topic(settings: Settings, topic: str, records: Sequence[Record]) -> float:
    """Write ``records`` in order, each to the Java producer's partition for its key; return the seconds taken.

    Large batches, no compression, ``acks=1``; no retries and no idempotence, so nothing can be reordered: a record
    that fails fails the benchmark.
    """
    config = client_config(settings, KafkaProducer.DEFAULT_CONFIG)
    config.update(
        acks=1,
        enable_idempotence=False,
        retries=0,
        linger_ms=50,
        batch_size=512 * 1024,
        compression_type=None,
        allow_auto_create_topics=False,
    )
    partitions: dict[bytes, int] = {}
    started = time.perf_counter()
    producer = KafkaProducer(**config)
    try:
        futures = []
        for key, value in records:
            partition = partitions.get(key)
            if partition is None:
                partition = partitions[key] = partition_for_key(key, PARTITIONS)
            futures.append(producer.send(topic, key=key, value=value, partition=partition))
        producer.flush(timeout=KAFKA_TIMEOUT_S)
        failed = [f for f in futures if not f.is_done or f.failed()]
        if failed:
            first = failed[0].exception if failed[0].is_done else "not acknowledged in time"
            raise BenchError(f"{len(failed)} of {len(futures)} records were not written to {topic}: {first}")
    finally:
        producer.close(timeout=KAFKA_TIMEOUT_S)
    return time.perf_counter() - started


def end_offsets_total(settings: Settings, topic: str) -> int:
    """The sum of the topic's end offsets (records written, as the topic is new)."""
    consumer = KafkaConsumer(**client_config(settings, KafkaConsumer.DEFAULT_CONFIG), enable_auto_commit=False)
    try:
        offsets = consumer.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
        return sum(offsets.values())
    finally:
        consumer.close()


def prepare_topic(settings: Settings, name: str, work: Workload, replication_factor: int) -> float:
    """Create and fill the topic, check it holds every record; return the fill time in seconds."""
    create_topic(settings, name, replication_factor)
    seconds = fill_topic(settings, name, work.records)
    total = end_offsets_total(settings, name)
    if total != len(work.records):
        raise BenchError(f"topic {name} ends at {total} records in total, expected {len(work.records)}")
    return seconds


@contextlib.contextmanager
def kafka_cluster(settings: Settings, bootstrap_servers: str | None, work_dir: Path) -> Iterator[Settings]:
    """The given cluster, or a temporary broker on free loopback ports (always stopped on the way out)."""
    if bootstrap_servers:
        yield settings.with_overrides(**{"bootstrap.servers": bootstrap_servers})
        return
    broker_port, controller_port = free_ports(2)
    data_dir = work_dir / "local"
    prepare_data_dir(data_dir)
    broker = KafkaBroker(
        settings,
        port=broker_port,
        controller_port=controller_port,
        data_dir=data_dir / "broker",
        start_timeout=BROKER_START_TIMEOUT_S,
    )
    print(f"starting a temporary broker on {broker.bootstrap_servers} (data in {data_dir})", flush=True)
    try:
        broker.start()
        yield settings.with_overrides(**{"bootstrap.servers": broker.bootstrap_servers})
    finally:
        broker.stop()


# --- Spark: session, the two measurements ----------------------------------------------------------------------------


def bench_session(work_dir: Path, master: str) -> SparkSession:
    """The one SparkSession of the run: the tests' settings with the production JIT, scratch space in ``work_dir``."""
    conf = {
        **BENCH_SPARK_CONF,
        "spark.sql.warehouse.dir": str(work_dir / "spark-warehouse"),
        "spark.local.dir": str(work_dir / "spark-local"),
    }
    spark = build_session("connect-state-bench-active-topics", master, conf)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def time_raw_read(spark: SparkSession, settings: Settings, topic: str) -> tuple[int, float]:
    """(a): a raw batch read of the whole topic to a count; returns (records, seconds)."""
    started = time.perf_counter()
    count = read_topic_batch(spark, settings, topic).count()
    return count, time.perf_counter() - started


def time_parse(spark: SparkSession, settings: Settings, topic: str) -> tuple[int, float]:
    """Breakdown only: the raw read plus the job's Python parse (``mapInPandas``) to a count of parsed rows."""
    started = time.perf_counter()
    count = classify_records(read_topic_batch(spark, settings, topic), job.classify, job.PARSED_SCHEMA).count()
    return count, time.perf_counter() - started


@dataclass
class WriterTimes:
    """Seconds spent in the job's ``foreachBatch`` writer, by part (summed over micro-batches)."""

    total: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    batches: int = 0

    def upstream(self) -> float:
        """``foreachBatch`` time outside the Delta writes: persist + counts, i.e. Kafka read, parse and fold."""
        return self.total - sum(self.parts.values())


@contextlib.contextmanager
def instrumented_writer() -> Iterator[WriterTimes]:
    """Time ``ActiveTopicsWriter``'s call and its Delta writes by wrapping the methods (restored on exit).

    ``foreachBatch`` calls the writer in this Python process, so the wrappers see every batch; they add a clock
    read per call and change nothing else.
    """
    times = WriterTimes()
    cls = job.ActiveTopicsWriter
    originals = {
        name: getattr(cls, name) for name in ("__call__", "_write_history", "_merge_current", "write_rejected")
    }

    def timed(name: str, method: Callable[..., None]) -> Callable[..., None]:
        def wrapper(*args: Any, **kwargs: Any) -> None:
            started = time.perf_counter()
            try:
                method(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                if name == "__call__":
                    times.total += elapsed
                    times.batches += 1
                else:
                    times.parts[name] = times.parts.get(name, 0.0) + elapsed

        return wrapper

    try:
        for name, method in originals.items():
            setattr(cls, name, timed(name, method))
        yield times
    finally:
        for name, method in originals.items():
            setattr(cls, name, method)


@dataclass
class JobRun:
    """One timed run of the job."""

    seconds: float
    start_seconds: float
    """Time spent in ``start()``: creating the three tables, emptying ``active_topics``, starting the query."""
    writer: WriterTimes
    progress: list[dict[str, Any]]


def run_job(spark: SparkSession, settings: Settings, timeout_s: float) -> JobRun:
    """(b): the active-topics job with ``Trigger.AvailableNow`` from empty state, timed from ``start()`` to its end."""
    with instrumented_writer() as writer:
        started = time.perf_counter()
        query = job.start(spark, settings, available_now=True)
        start_seconds = time.perf_counter() - started
        try:
            finished = query.awaitTermination(timeout_s)
        except StreamingQueryException as err:
            raise BenchError(f"the job failed: {err}") from None
        finally:
            if query.isActive:
                query.stop()
        seconds = time.perf_counter() - started
    if not finished:
        raise BenchError(f"the job did not finish within {timeout_s:g}s (stopped); raise --job-timeout?")
    if query.exception() is not None:
        raise BenchError(f"the job failed: {query.exception()}")
    return JobRun(seconds, start_seconds, writer, list(query.recentProgress))


def check_tables(spark: SparkSession, settings: Settings, work: Workload) -> str:
    """Compare the job's tables with the expected fold; raise BenchError on a mismatch, else a one-line summary."""
    counts = {
        spec.name: spark.read.format("delta").load(str(settings.table_path(spec.name))).count()
        for spec in (ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, REJECTED_RECORDS)
    }
    expected = {
        ACTIVE_TOPICS.name: work.expected_active,
        ACTIVE_TOPICS_HISTORY.name: work.expected_changes,
        REJECTED_RECORDS.name: 0,
    }
    wrong = [
        f"{name} has {counts[name]:,} rows, expected {want:,}"
        for name, want in expected.items()
        if counts[name] != want
    ]
    if wrong:
        raise BenchError("check failed: " + "; ".join(wrong))
    return ", ".join(f"{name} {counts[name]:,} rows" for name in expected)


def job_settings(cluster: Settings, work_dir: Path, topic: str, label: str) -> Settings:
    """The cluster's settings with the bench topic as status topic and fresh Delta and checkpoint roots."""
    return cluster.with_overrides(
        **{
            "status.storage.topic": topic,
            "delta.root": str(work_dir / label / "delta"),
            "checkpoint.root": str(work_dir / label / "checkpoints"),
        }
    )


# --- reporting -------------------------------------------------------------------------------------------------------


def rate(records: int, seconds: float) -> str:
    return f"{records:,} records in {seconds:.2f} s = {records / seconds:,.0f} records/s"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: other work on the machine skews the figures."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def machine_lines(spark: SparkSession, master: str) -> list[str]:
    """nproc, memory, OS, Python, pyspark, the Spark JVM's Java version."""
    memory = ""
    with contextlib.suppress(OSError, ValueError):
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages * page_size / 2**30:.1f} GiB RAM"
    jvm = spark.sparkContext._jvm
    java = f"{jvm.System.getProperty('java.version')} ({jvm.System.getProperty('java.vm.name')})" if jvm else "?"
    return [
        f"machine: {os.cpu_count()} cores (nproc {len(os.sched_getaffinity(0))}){memory}, "
        f"{platform.system()} {platform.release()} {platform.machine()}",
        f"software: Python {platform.python_version()}, pyspark {pyspark.__version__}, Java {java}, master {master}",
    ]


def progress_lines(run: JobRun) -> list[str]:
    """Where the job's time went: the writer's parts and Spark's durationMs, summed over the micro-batches."""
    parts = run.writer.parts
    lines = [
        f"    foreachBatch {run.writer.total:.2f} s in {run.writer.batches} batch(es): "
        f"persist+counts (Kafka read, parse, fold) {run.writer.upstream():.2f} s, "
        f"history append {parts.get('_write_history', 0.0):.2f} s, "
        f"active_topics MERGE {parts.get('_merge_current', 0.0):.2f} s, "
        f"rejected MERGE {parts.get('write_rejected', 0.0):.2f} s; "
        f"outside foreachBatch {run.seconds - run.writer.total:.2f} s, of which start() {run.start_seconds:.2f} s "
        "(creating the tables, emptying active_topics, starting the query)"
    ]
    durations: dict[str, int] = {}
    input_rows = 0
    for progress in run.progress:
        input_rows += progress.get("numInputRows", 0)
        for name, ms in (progress.get("durationMs") or {}).items():
            durations[name] = durations.get(name, 0) + ms
    ordered = ", ".join(f"{name} {ms / 1000:.2f}" for name, ms in sorted(durations.items(), key=lambda kv: -kv[1]))
    lines.append(
        f"    Spark progress: {len(run.progress)} batch(es), {input_rows:,} input rows; durationMs (s): {ordered}"
    )
    for progress in run.progress[-1:]:
        for op in progress.get("stateOperators") or []:
            lines.append(
                f"    state operator {op.get('operatorName')}: {op.get('numRowsTotal')} rows, "
                f"{op.get('memoryUsedBytes', 0) / 2**20:.1f} MiB, updates {op.get('allUpdatesTimeMs')} ms, "
                f"commit {op.get('commitTimeMs')} ms"
            )
    return lines


# --- the run ---------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench/active_topics.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--records", type=int, default=200_000, help="records in the status topic (default 200000)")
    parser.add_argument("--connectors", type=int, default=500, help="distinct connectors (default 500)")
    parser.add_argument("--topics-per-connector", type=int, default=20, help="topics each connector uses (default 20)")
    parser.add_argument("--tombstone-ratio", type=float, default=0.1, help="share of tombstones (default 0.1)")
    parser.add_argument(
        "--other-ratio", type=float, default=0.02, help="share of connector/task statuses the job ignores (0.02)"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed of the workload (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of (a) and (b); medians are reported (default 1)")
    parser.add_argument("--warmup-records", type=int, default=2_000, help="records of the warm-up topic, 0: no warm-up")
    parser.add_argument("--breakdown", action="store_true", help="also time the raw read + the job's Python parse")
    parser.add_argument("--bootstrap-servers", help="use this Kafka cluster instead of a temporary local broker")
    parser.add_argument("--replication-factor", type=int, default=1, help="of the bench topics (default 1)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--job-timeout", type=float, default=1800.0, help="longest wait for one job run, s (1800)")
    parser.add_argument("--work-dir", type=Path, help="parent of the run's temporary directory (default: system temp)")
    parser.add_argument("--keep-dir", action="store_true", help="keep the temporary directory (broker data, tables)")
    add_config_arguments(parser)
    return parser


def validate(args: argparse.Namespace) -> None:
    checks = (
        (args.records > 0, "--records must be positive"),
        (args.connectors > 0 and args.topics_per_connector > 0, "--connectors and --topics-per-connector must be > 0"),
        (min(args.tombstone_ratio, args.other_ratio) >= 0, "ratios must be >= 0"),
        (args.tombstone_ratio + args.other_ratio < 1, "--tombstone-ratio + --other-ratio must be below 1"),
        (args.repeat >= 1 and args.warmup_records >= 0, "--repeat must be >= 1, --warmup-records >= 0"),
        (args.job_timeout > 0, "--job-timeout must be positive"),
    )
    for ok, message in checks:
        if not ok:
            raise BenchError(message)


def make_workload(args: argparse.Namespace, n: int, seed: int) -> Workload:
    return generate_workload(
        n, args.connectors, args.topics_per_connector, args.tombstone_ratio, args.other_ratio, seed
    )


def warm_up(
    spark: SparkSession, cluster: Settings, args: argparse.Namespace, work_dir: Path, topics: list[str]
) -> None:
    """A raw read and a job run on a small topic: JVM class loading, JIT, Python workers and Delta set-up are paid
    before either measurement."""
    work = make_workload(args, args.warmup_records, args.seed + 1)
    topic = f"bench-status-warmup-{uuid.uuid4().hex[:8]}"
    topics.append(topic)
    prepare_topic(cluster, topic, work, args.replication_factor)
    _, raw_seconds = time_raw_read(spark, cluster, topic)
    settings = job_settings(cluster, work_dir, topic, "warmup")
    run = run_job(spark, settings, args.job_timeout)
    check_tables(spark, settings, work)
    print(f"warm-up ({len(work.records):,} records): raw read {raw_seconds:.2f} s, job {run.seconds:.2f} s", flush=True)


def measure(args: argparse.Namespace, cluster: Settings, work_dir: Path, topics: list[str]) -> None:
    """Generate, fill, warm up, then (a) and (b) ``--repeat`` times; print the figures, the ratio last."""
    started = time.perf_counter()
    work = make_workload(args, args.records, args.seed)
    n = len(work.records)
    print(
        f"workload: {n:,} records ({work.topic_statuses:,} topic statuses, {work.tombstones:,} tombstones, "
        f"{work.other_statuses:,} connector/task statuses) over {args.connectors:,} connectors x "
        f"{args.topics_per_connector} topics, seed {args.seed}; generated in {time.perf_counter() - started:.2f} s",
        flush=True,
    )
    topic = f"bench-status-{uuid.uuid4().hex[:8]}"
    topics.append(topic)
    fill_seconds = prepare_topic(cluster, topic, work, args.replication_factor)
    print(f"fill ({PARTITIONS} partitions, kafka-python, acks=1; informational): {rate(n, fill_seconds)}", flush=True)

    spark = bench_session(work_dir, args.master)
    try:
        for line in machine_lines(spark, args.master):
            print(line, flush=True)
        if args.warmup_records:
            warm_up(spark, cluster, args, work_dir, topics)
        raw_times, job_times = run_rounds(spark, cluster, args, work_dir, topic, work)
        if args.breakdown:
            parsed, parse_seconds = time_parse(spark, cluster, topic)
            print(f"breakdown: raw read + Python parse (mapInPandas, {parsed:,} rows out): {rate(n, parse_seconds)}")
    finally:
        spark.stop()

    raw, job_seconds = statistics.median(raw_times), statistics.median(job_times)
    print(f"(a) raw Kafka read to a count, median of {len(raw_times)}: {rate(n, raw)}")
    print(f"(b) active-topics job, AvailableNow from empty state, median of {len(job_times)}: {rate(n, job_seconds)}")
    print(f"ratio b/a (job time / raw read time): {job_seconds / raw:.2f}", flush=True)


def run_rounds(
    spark: SparkSession, cluster: Settings, args: argparse.Namespace, work_dir: Path, topic: str, work: Workload
) -> tuple[list[float], list[float]]:
    """``--repeat`` rounds of (a) then (b), each job run from empty state and checked; return both time lists."""
    n = len(work.records)
    raw_times: list[float] = []
    job_times: list[float] = []
    for round_no in range(1, args.repeat + 1):
        print(f"round {round_no}: load average {load_average()} (includes this run's own work)", flush=True)
        count, seconds = time_raw_read(spark, cluster, topic)
        if count != n:
            raise BenchError(f"the raw read counted {count:,} records, expected {n:,}")
        raw_times.append(seconds)
        print(f"(a) raw read, run {round_no}: {rate(n, seconds)}", flush=True)
        settings = job_settings(cluster, work_dir, topic, f"job-{round_no}")
        run = run_job(spark, settings, args.job_timeout)
        job_times.append(run.seconds)
        print(f"(b) job, run {round_no}: {rate(n, run.seconds)}", flush=True)
        for line in progress_lines(run):
            print(line, flush=True)
        print(f"check: OK ({check_tables(spark, settings, work)})", flush=True)
    return raw_times, job_times


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # kafka-python warns when its IO loop is held up by the fill's tight send loop: expected here, and noise.
    logging.getLogger("kafka").setLevel(logging.ERROR)
    signal.signal(signal.SIGTERM, _raise_interrupt)  # SIGTERM cleans up like Ctrl-C
    work_dir = Path(tempfile.mkdtemp(prefix="connect-state-bench-", dir=args.work_dir)).resolve()
    topics: list[str] = []
    try:
        validate(args)
        base = settings_from_args(args)
        with kafka_cluster(base, args.bootstrap_servers, work_dir) as cluster:
            try:
                measure(args, cluster, work_dir, topics)
            finally:
                if args.bootstrap_servers and topics:
                    delete_topics(cluster, topics)
        return 0
    except BenchError as err:
        print(f"bench/active_topics.py: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if args.keep_dir:
            print(f"kept {work_dir}", file=sys.stderr)
        else:
            shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
