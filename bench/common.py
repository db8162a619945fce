"""What the benchmarks share: the temporary broker, a fresh compacted topic filled with keyed records, the one
SparkSession of a run, the timed raw read and job run, and the report lines (rates, load average, machine).

Every benchmark compares a job with a raw Spark Kafka read of the same topic **in one run** (never against fixed
numbers), prints what it does as it goes, and ends with a line of ratios. Records go to the partition the Java
producer would pick for their key (``connect_state.kafka.partitioner``), as Connect's own writes do.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import shutil
import signal
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
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.utils import StreamingQueryException

from connect_state.core.errors import ConnectStateError
from connect_state.core.settings import Settings, load_settings, settings_from_args
from connect_state.dev.jvm_service import free_ports
from connect_state.dev.local_stack import KafkaBroker, prepare_data_dir
from connect_state.kafka.config import kafka_python_config
from connect_state.kafka.partitioner import partition_for_key
from connect_state.spark.kafka_source import read_topic_batch
from connect_state.spark.session import build_session, driver_java_conf
from connect_state.spark.storage import configure_checkpoint_manager

KAFKA_TIMEOUT_S = 60.0
BROKER_START_TIMEOUT_S = 120.0

# The tests' SparkSession settings (tests/fixtures/spark.py TEST_CONF) without their JVM flags: bench_session gives
# the driver the console scripts' JVM options (spark.driver.java.options), as production runs it.
BENCH_SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "2g",
}

Record = tuple[bytes, bytes | None]

log = logging.getLogger("bench")


class BenchError(Exception):
    """The benchmark could not measure, or the job's result is wrong."""


# --- Kafka: topic, fill, end offsets ---------------------------------------------------------------------------------


def add_work_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--work-dir``: where the run's temporary directory goes (:func:`in_work_dir`)."""
    parser.add_argument("--work-dir", type=Path, help="parent of the run's temporary directory (default: system temp)")


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every benchmark shares: which Kafka cluster, Spark master, time limit and work directory."""
    parser.add_argument("--bootstrap-servers", help="use this Kafka cluster instead of a temporary local broker")
    parser.add_argument("--replication-factor", type=int, default=1, help="of the bench topics (default 1)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--job-timeout", type=float, default=1800.0, help="longest wait for one job run, s (1800)")
    add_work_dir_argument(parser)
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra Spark setting of the run's session, to measure a lever before it is kept (repeatable)",
    )


def client_config(settings: Settings, defaults: dict[str, Any]) -> dict[str, Any]:
    """``bootstrap.servers`` and ``kafka.client.properties`` as kafka-python keyword arguments."""
    return kafka_python_config(settings.kafka_client_config(), defaults, warn=False)


def create_topic(settings: Settings, name: str, partitions: int, replication_factor: int) -> None:
    """A compacted topic like Connect's internal topics; compaction is held off for the run's duration so that
    every record written is read back."""
    admin = KafkaAdminClient(**client_config(settings, KafkaAdminClient.DEFAULT_CONFIG))
    try:
        configs = {"cleanup.policy": "compact", "min.compaction.lag.ms": str(24 * 3600 * 1000)}
        admin.create_topics([NewTopic(name, partitions, replication_factor, topic_configs=configs)], timeout_ms=30_000)
        deadline = time.monotonic() + KAFKA_TIMEOUT_S
        while not _topic_ready(admin, name, partitions):
            if time.monotonic() > deadline:
                raise BenchError(f"topic {name} has no leader for all {partitions} partitions after {KAFKA_TIMEOUT_S}s")
            time.sleep(0.2)
    finally:
        admin.close()
    _wait_until_led(settings, name, partitions, deadline)


def _wait_until_led(settings: Settings, name: str, partitions: int, deadline: float) -> None:
    """Wait until every partition answers ListOffsets: the metadata names a leader a little before that broker
    serves the partition, and the fill (no retries, so that nothing is reordered) would fail with
    NotLeaderForPartition meanwhile (seen with 25 partitions on a busy machine)."""
    consumer = KafkaConsumer(
        **client_config(settings, KafkaConsumer.DEFAULT_CONFIG), enable_auto_commit=False, request_timeout_ms=10_000
    )
    try:
        while True:
            try:
                consumer.end_offsets([TopicPartition(name, p) for p in range(partitions)])
                return
            except Exception as err:  # kafka-python raises its own errors (timeouts, not-leader) as they come
                if time.monotonic() > deadline:
                    raise BenchError(f"topic {name} does not answer ListOffsets on every partition: {err}") from None
                time.sleep(0.2)
    finally:
        consumer.close()


def _topic_ready(admin: KafkaAdminClient, name: str, partitions: int) -> bool:
    """True when the topic's metadata lists every partition with a leader."""
    try:
        (description,) = admin.describe_topics([name])
    except Exception as err:  # retriable metadata errors while the topic is being created
        log.debug("describe_topics(%s): %s", name, err)
        return False
    found = description.get("partitions") or []
    return (
        description.get("error_code") == 0
        and len(found) == partitions
        and all(p.get("error_code") == 0 and p.get("leader_id", -1) >= 0 for p in found)
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


Partitioner = Callable[[bytes, int], int]
"""``(key, partitions) -> partition``: where a record goes."""


def fill_topic(
    settings: Settings,
    topic: str,
    records: Sequence[Record],
    partitions: int,
    partitioner: Partitioner = partition_for_key,
) -> float:
    """Write ``records`` in order, each to ``partitioner``'s partition for its key (default: the Java producer's);
    return the seconds taken.

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
    chosen: dict[bytes, int] = {}
    started = time.perf_counter()
    producer = KafkaProducer(**config)
    try:
        futures = []
        for key, value in records:
            partition = chosen.get(key)
            if partition is None:
                partition = chosen[key] = partitioner(key, partitions)
            futures.append(producer.send(topic, key=key, value=value, partition=partition))
        producer.flush(timeout=KAFKA_TIMEOUT_S)
        failed = [f for f in futures if not f.is_done or f.failed()]
        if failed:
            first = failed[0].exception if failed[0].is_done else "not acknowledged in time"
            raise BenchError(f"{len(failed)} of {len(futures)} records were not written to {topic}: {first}")
    finally:
        producer.close(timeout=KAFKA_TIMEOUT_S)
    return time.perf_counter() - started


def end_offsets_total(settings: Settings, topic: str, partitions: int) -> int:
    """The sum of the topic's end offsets (records written, as the topic is new)."""
    consumer = KafkaConsumer(**client_config(settings, KafkaConsumer.DEFAULT_CONFIG), enable_auto_commit=False)
    try:
        offsets = consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return sum(offsets.values())
    finally:
        consumer.close()


def prepare_topic(
    settings: Settings,
    name: str,
    records: Sequence[Record],
    partitions: int,
    replication_factor: int,
    partitioner: Partitioner = partition_for_key,
) -> float:
    """Create and fill the topic, check it holds every record; return the fill time in seconds."""
    create_topic(settings, name, partitions, replication_factor)
    seconds = fill_topic(settings, name, records, partitions, partitioner)
    total = end_offsets_total(settings, name, partitions)
    if total != len(records):
        raise BenchError(f"topic {name} ends at {total} records in total, expected {len(records)}")
    return seconds


def new_topic(
    settings: Settings,
    prefix: str,
    records: Sequence[Record],
    partitions: int,
    replication_factor: int,
    topics: list[str],
    report_fill: bool = False,
    partitioner: Partitioner = partition_for_key,
) -> str:
    """A topic ``<prefix>-<random>``, added to ``topics`` (deleted at the end) and prepared (:func:`prepare_topic`);
    with ``report_fill``, the fill rate is printed (informational only)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    topics.append(name)
    seconds = prepare_topic(settings, name, records, partitions, replication_factor, partitioner)
    if report_fill:
        print(
            f"fill ({partitions} partitions, kafka-python, acks=1; informational): {rate(len(records), seconds)}",
            flush=True,
        )
    return name


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


def bench_session(work_dir: Path, master: str, app_name: str, extra: Sequence[str] = ()) -> SparkSession:
    """The one SparkSession of the run: the tests' settings with the console scripts' driver JVM options
    (``spark.driver.java.options``) and checkpoint manager, scratch space in ``work_dir``, then ``extra``
    (``KEY=VALUE``, from ``--conf``); prints the machine it runs on (:func:`machine_lines`)."""
    conf = {
        **BENCH_SPARK_CONF,
        "spark.sql.warehouse.dir": str(work_dir / "spark-warehouse"),
        "spark.local.dir": str(work_dir / "spark-local"),
    }
    conf.update(driver_java_conf(load_settings(environ={})))  # the console scripts' default JVM options
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep:
            raise BenchError(f"--conf expects KEY=VALUE, got {item!r}")
        conf[key.strip()] = value.strip()
        print(f"extra Spark setting: {key.strip()}={value.strip()}", flush=True)
    spark = build_session(app_name, master, conf)
    configure_checkpoint_manager(spark, str(work_dir))  # as the jobs' sessions write local checkpoints
    spark.sparkContext.setLogLevel("ERROR")
    for line in machine_lines(spark, master):
        print(line, flush=True)
    return spark


def time_raw_read(spark: SparkSession, settings: Settings, topic: str) -> tuple[int, float]:
    """(a): a raw batch read of the whole topic to a count; returns (records, seconds)."""
    started = time.perf_counter()
    count = read_topic_batch(spark, settings, topic).count()
    return count, time.perf_counter() - started


@dataclass
class WriterTimes:
    """Seconds spent in a job's ``foreachBatch`` writer, by part (summed over micro-batches)."""

    total: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    batches: int = 0

    def upstream(self) -> float:
        """``foreachBatch`` time outside the Delta writes: persist + counts, i.e. Kafka read, parse and fold."""
        return self.total - sum(self.parts.values())


Patchable = tuple[Any, str]
"""A class or module and the name of one of its callables."""


@contextlib.contextmanager
def instrumented_writer(total: Patchable, parts: Sequence[Patchable]) -> Iterator[WriterTimes]:
    """Time the writer's call (``total``) and its Delta writes (``parts``, keyed by name) by wrapping the callables;
    every owner is restored on exit (an inherited method is removed again rather than copied down).

    ``foreachBatch`` calls the writer in this Python process, so the wrappers see every batch; they add a clock
    read per call and change nothing else.
    """
    times = WriterTimes()
    targets = [(owner, name, name == total[1] and owner is total[0]) for owner, name in (total, *parts)]
    saved = [(owner, name, getattr(owner, name), name in vars(owner)) for owner, name, _ in targets]

    def timed(name: str, is_total: bool, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                if is_total:
                    times.total += elapsed
                    times.batches += 1
                else:
                    times.parts[name] = times.parts.get(name, 0.0) + elapsed

        return wrapper

    try:
        for (owner, name, is_total), (_, _, original, _) in zip(targets, saved, strict=True):
            setattr(owner, name, timed(name, is_total, original))
        yield times
    finally:
        for owner, name, original, own in saved:
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)


@dataclass
class JobRun:
    """One timed run of a job."""

    seconds: float
    start_seconds: float
    """Time spent in ``start()``: creating the tables, emptying the current tables, starting the query."""
    writer: WriterTimes
    progress: list[dict[str, Any]]


def run_job(
    start: Callable[[], StreamingQuery], timeout_s: float, total: Patchable, parts: Sequence[Patchable]
) -> JobRun:
    """(b): ``start()`` a job with ``Trigger.AvailableNow``, timed from ``start()`` until the query stops."""
    with instrumented_writer(total, parts) as writer:
        started = time.perf_counter()
        query = start()
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


# --- reporting -------------------------------------------------------------------------------------------------------


def rate(records: int, seconds: float) -> str:
    return f"{records:,} records in {seconds:.2f} s = {records / seconds:,.0f} records/s"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages: other work on the machine skews the figures."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def machine_lines(spark: SparkSession | None, master: str) -> list[str]:
    """nproc, memory, OS, Python, pyspark, the Spark JVM's Java version (``?`` without ``spark``: a driver in
    another process)."""
    memory = ""
    with contextlib.suppress(OSError, ValueError):
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages * page_size / 2**30:.1f} GiB RAM"
    jvm = spark.sparkContext._jvm if spark is not None else None
    java = f"{jvm.System.getProperty('java.version')} ({jvm.System.getProperty('java.vm.name')})" if jvm else "?"
    return [
        f"machine: {os.cpu_count()} cores (nproc {len(os.sched_getaffinity(0))}){memory}, "
        f"{platform.system()} {platform.release()} {platform.machine()}",
        f"software: Python {platform.python_version()}, pyspark {pyspark.__version__}, Java {java}, master {master}",
    ]


def progress_lines(run: JobRun, part_labels: Sequence[tuple[str, str]], start_what: str) -> list[str]:
    """Where the job's time went: the writer's parts (``(part name, label)``, in order) and Spark's durationMs,
    summed over the micro-batches, and the state operators of the last one."""
    parts = run.writer.parts
    timed_parts = "".join(f", {label} {parts.get(name, 0.0):.2f} s" for name, label in part_labels)
    lines = [
        f"    foreachBatch {run.writer.total:.2f} s in {run.writer.batches} batch(es): "
        f"persist+counts (Kafka read, parse, fold) {run.writer.upstream():.2f} s{timed_parts}; "
        f"outside foreachBatch {run.seconds - run.writer.total:.2f} s, of which start() {run.start_seconds:.2f} s "
        f"({start_what})"
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


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def bench_main(
    prog: str,
    args: Any,
    measure: Callable[[Any, Settings, Path, list[str]], object],
    validate: Callable[[Any], None],
    keep: bool = False,
) -> int:
    """Check ``validate(args)``, then run ``measure(args, cluster settings, work dir, topics to delete)`` in a new
    temporary work directory, on ``args.bootstrap_servers`` or a temporary broker; clean up on the way out, also on
    Ctrl-C and SIGTERM.

    ``args`` carries the config flags (``--conf-file``, ``--set``) and ``bootstrap_servers``; ``keep`` keeps the
    work directory. Returns the exit code: 0, 1 (BenchError or a failing component), 130 (interrupted).
    """

    def run(work_dir: Path) -> None:
        validate(args)
        topics: list[str] = []
        with kafka_cluster(settings_from_args(args), args.bootstrap_servers, work_dir) as cluster:
            try:
                measure(args, cluster, work_dir, topics)
            finally:
                if args.bootstrap_servers and topics:
                    delete_topics(cluster, topics)

    return in_work_dir(prog, getattr(args, "work_dir", None), run, keep)


def in_work_dir(prog: str, parent: Path | None, body: Callable[[Path], None], keep: bool = False) -> int:
    """Run ``body(work dir)`` in a new temporary directory under ``parent`` (default: the system's), removed on the
    way out (unless ``keep``), also on Ctrl-C and SIGTERM. Returns the exit code: 0, 1 (BenchError or a failing
    component, printed), 130 (interrupted)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # kafka-python warns when its IO loop is held up by the fill's tight send loop: expected here, and noise.
    logging.getLogger("kafka").setLevel(logging.ERROR)
    signal.signal(signal.SIGTERM, _raise_interrupt)  # SIGTERM cleans up like Ctrl-C
    work_dir = Path(tempfile.mkdtemp(prefix="connect-state-bench-", dir=parent)).resolve()
    try:
        body(work_dir)
        return 0
    except (BenchError, ConnectStateError) as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if keep:
            print(f"kept {work_dir}", file=sys.stderr)
        else:
            shutil.rmtree(work_dir, ignore_errors=True)


Check = Callable[[SparkSession, Settings], str]
"""Compares a job run's tables with what the workload must give: raises BenchError on a mismatch, else returns a
one-line summary."""


@dataclass(frozen=True)
class JobUnderTest:
    """The job a benchmark measures against the raw read of its input topic."""

    topic_setting: str
    """The setting that names the job's input topic (``status.storage.topic``, ``offset.storage.topic``)."""
    start: Callable[..., StreamingQuery]
    """The job's ``start(spark, settings, available_now=...)``."""
    writer: Patchable
    """Its ``foreachBatch`` writer's call, timed as a whole."""
    writer_parts: Sequence[tuple[Any, str, str]]
    """The writer's Delta writes, timed one by one: ``(class or module, callable name, label)``."""
    start_what: str
    """What ``start()`` does before the query runs (for the report)."""

    def settings(self, cluster: Settings, work_dir: Path, topic: str, label: str) -> Settings:
        """The cluster's settings with ``topic`` as the job's input topic and fresh Delta and checkpoint roots."""
        return cluster.with_overrides(
            **{
                self.topic_setting: topic,
                "delta.root": str(work_dir / label / "delta"),
                "checkpoint.root": str(work_dir / label / "checkpoints"),
            }
        )

    def run(self, spark: SparkSession, settings: Settings, timeout_s: float) -> JobRun:
        """(b): the job with ``Trigger.AvailableNow`` from empty state, timed from ``start()`` to its end."""
        return run_job(
            lambda: self.start(spark, settings, available_now=True),
            timeout_s,
            self.writer,
            [(owner, name) for owner, name, _ in self.writer_parts],
        )

    @property
    def part_labels(self) -> list[tuple[str, str]]:
        return [(name, label) for _, name, label in self.writer_parts]


def check_arguments(checks: Sequence[tuple[bool, str]]) -> None:
    """Raise BenchError with the message of the first ``(ok, message)`` that is not ok."""
    for ok, message in checks:
        if not ok:
            raise BenchError(message)


def warm_up(
    spark: SparkSession,
    args: Any,
    cluster: Settings,
    work_dir: Path,
    topics: list[str],
    job: JobUnderTest,
    topic_prefix: str,
    partitions: int,
    records: Sequence[Record],
    check: Check,
    partitioner: Partitioner = partition_for_key,
) -> None:
    """A raw read and a job run on a small topic of ``records``: JVM class loading, JIT, Python workers and Delta
    set-up are paid before either measurement. ``args``: ``replication_factor`` and ``job_timeout``."""
    topic = new_topic(
        cluster, f"{topic_prefix}-warmup", records, partitions, args.replication_factor, topics, partitioner=partitioner
    )
    _, raw_seconds = time_raw_read(spark, cluster, topic)
    settings = job.settings(cluster, work_dir, topic, "warmup")
    run = job.run(spark, settings, args.job_timeout)
    check(spark, settings)
    print(f"warm-up ({len(records):,} records): raw read {raw_seconds:.2f} s, job {run.seconds:.2f} s", flush=True)


def run_rounds(
    spark: SparkSession,
    args: Any,
    cluster: Settings,
    work_dir: Path,
    topic: str,
    n: int,
    job: JobUnderTest,
    check: Check,
) -> tuple[list[float], list[float], Settings]:
    """``args.repeat`` rounds of (a) a raw read of ``topic`` then (b) the job from empty state (at most
    ``args.job_timeout`` seconds), each checked; return both time lists and the settings of the last job run (whose
    tables a later step may serve)."""
    raw_times: list[float] = []
    job_times: list[float] = []
    settings = cluster
    for round_no in range(1, args.repeat + 1):
        print(f"round {round_no}: load average {load_average()} (includes this run's own work)", flush=True)
        count, seconds = time_raw_read(spark, cluster, topic)
        if count != n:
            raise BenchError(f"the raw read counted {count:,} records, expected {n:,}")
        raw_times.append(seconds)
        print(f"(a) raw read, run {round_no}: {rate(n, seconds)}", flush=True)
        settings = job.settings(cluster, work_dir, topic, f"job-{round_no}")
        run = job.run(spark, settings, args.job_timeout)
        job_times.append(run.seconds)
        print(f"(b) job, run {round_no}: {rate(n, run.seconds)}", flush=True)
        for line in progress_lines(run, job.part_labels, job.start_what):
            print(line, flush=True)
        print(f"check: OK ({check(spark, settings)})", flush=True)
    return raw_times, job_times, settings


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU seconds of the processes (and their reaped children), from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / ticks  # utime stime cutime cstime
    return total


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants (a driver: its Spark JVM and the JVM's Python workers), from /proc."""
    pids = [root]
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == parent and int(entry.name) not in pids:
                pids.append(int(entry.name))
                frontier.append(int(entry.name))
    return pids
