"""Benchmark: the active-topics job against a raw Spark Kafka read of the same status topic, in one run.

A fresh 5-partition compacted topic shaped like ``connect-status`` is filled with N synthetic records (default
200,000): topic statuses over many connectors, some tombstones, and a small share of connector and task statuses
the job must ignore. Every record goes to the partition the Java producer would pick for its key. Then, in one
SparkSession (``local[2]``, the production JIT), after a warm-up on a small topic:

* (a) the baseline: ``read_topic_batch(...).count()``, a raw batch read of the whole topic;
* (b) the job: ``connect_state.spark.active_topics.start(..., available_now=True)`` from empty state (new Delta
  tables, new checkpoint), timed from ``start()`` until the query stops.

Each prints records/s; the last line is the ratio of the job's time to the raw read's time. After each job run the
tables are checked against the fold computed in Python while generating the records (``check: OK``, or exit 1).
Performance is compared only within one run, never against fixed numbers.

Without ``--bootstrap-servers`` a temporary KRaft broker (``connect_state.dev.local_stack.KafkaBroker``) is started on
free loopback ports with its data in the work directory, and stopped at the end, also on error or Ctrl-C::

    .venv/bin/python bench/active_topics.py                       # 200,000 records, temporary broker
    .venv/bin/python bench/active_topics.py --records 50000 --repeat 3 --breakdown
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from pyspark.sql import SparkSession

from connect_state.core.settings import Settings, add_config_arguments
from connect_state.formats.status import (
    Status,
    TopicStatus,
    connector_status_key,
    serialize_status,
    serialize_topic_status,
    task_status_key,
    topic_status_key,
)
from connect_state.spark import active_topics as job
from connect_state.spark.foldjob import FoldWriter, classify_records
from connect_state.spark.kafka_source import read_topic_batch
from connect_state.tables.schemas import ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, REJECTED_RECORDS

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    BenchError,
    JobUnderTest,
    add_cluster_arguments,
    bench_main,
    bench_session,
    check_arguments,
    new_topic,
    rate,
    run_rounds,
    warm_up,
)

PARTITIONS = 5
"""Connect's default partition count for ``connect-status``."""
BASE_TIMESTAMP_MS = 1_700_000_000_000
TASKS_PER_CONNECTOR = 4
JOB = JobUnderTest(
    topic_setting="status.storage.topic",
    start=job.start,
    writer=(FoldWriter, "__call__"),
    writer_parts=(
        (FoldWriter, "insert_history", "history append"),
        (FoldWriter, "merge_current", "active_topics MERGE"),
        (FoldWriter, "write_rejected", "rejected MERGE"),
    ),
    start_what="creating the tables, emptying active_topics, starting the query",
)


# --- the workload ---------------------------------------------------------------------------------------------------


@dataclass
class Workload:
    """The records to write, and what the job must produce from them (computed with the fold's rules)."""

    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
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


# --- Kafka and Spark ------------------------------------------------------------------------------------------------


def time_parse(spark: SparkSession, settings: Settings, topic: str) -> tuple[int, float]:
    """Breakdown only: the raw read plus the job's parse (``mapInArrow``: bulk path, exact parser for the rest) to a
    count of parsed rows."""
    started = time.perf_counter()
    parsed = classify_records(read_topic_batch(spark, settings, topic), job.classify, job.PARSED_SCHEMA, job.fast_parse)
    count = parsed.count()
    return count, time.perf_counter() - started


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
    add_cluster_arguments(parser)
    parser.add_argument("--keep-dir", action="store_true", help="keep the temporary directory (broker data, tables)")
    add_config_arguments(parser)
    return parser


def validate(args: argparse.Namespace) -> None:
    check_arguments(
        (
            (args.records > 0, "--records must be positive"),
            (
                args.connectors > 0 and args.topics_per_connector > 0,
                "--connectors and --topics-per-connector must be > 0",
            ),
            (min(args.tombstone_ratio, args.other_ratio) >= 0, "ratios must be >= 0"),
            (args.tombstone_ratio + args.other_ratio < 1, "--tombstone-ratio + --other-ratio must be below 1"),
            (args.repeat >= 1 and args.warmup_records >= 0, "--repeat must be >= 1, --warmup-records >= 0"),
            (args.job_timeout > 0, "--job-timeout must be positive"),
        )
    )


def make_workload(args: argparse.Namespace, n: int, seed: int) -> Workload:
    return generate_workload(
        n, args.connectors, args.topics_per_connector, args.tombstone_ratio, args.other_ratio, seed
    )


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
    topic = new_topic(
        cluster, "bench-status", work.records, PARTITIONS, args.replication_factor, topics, report_fill=True
    )

    spark = bench_session(work_dir, args.master, "connect-state-bench-active-topics", args.conf)
    try:
        if args.warmup_records:
            warm = make_workload(args, args.warmup_records, args.seed + 1)
            check_warm = partial(check_tables, work=warm)
            warm_up(spark, args, cluster, work_dir, topics, JOB, "bench-status", PARTITIONS, warm.records, check_warm)
        raw_times, job_times, _ = run_rounds(
            spark, args, cluster, work_dir, topic, n, JOB, partial(check_tables, work=work)
        )
        if args.breakdown:
            parsed, parse_seconds = time_parse(spark, cluster, topic)
            print(f"breakdown: raw read + parse (mapInArrow, {parsed:,} rows out): {rate(n, parse_seconds)}")
    finally:
        spark.stop()

    raw, job_seconds = statistics.median(raw_times), statistics.median(job_times)
    print(f"(a) raw Kafka read to a count, median of {len(raw_times)}: {rate(n, raw)}")
    print(f"(b) active-topics job, AvailableNow from empty state, median of {len(job_times)}: {rate(n, job_seconds)}")
    print(f"ratio b/a (job time / raw read time): {job_seconds / raw:.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return bench_main("bench/active_topics.py", args, measure, validate, keep=args.keep_dir)


if __name__ == "__main__":
    sys.exit(main())
