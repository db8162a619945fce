"""Benchmark: the sink-offsets job against a raw Spark Kafka read of the same ``__consumer_offsets``-shaped topic.

Issue 11 §1 asks for this job's catch-up ratio. A fresh 50-partition topic shaped like ``__consumer_offsets``
(``offsets.topic.num.partitions``) is filled with N offset-commit records (default 200,000) written as the group
coordinator writes them (:mod:`connect_state.formats.consumer_offsets`: ``OffsetCommitKey`` type 1,
``OffsetCommitValue`` version 3), over ``--groups`` sink connectors' consumer groups (1,000, named
``connect-<connector>`` as Connect names them) × ``--topics-per-group`` topics (2) × ``--partitions-per-topic``
partitions (10). A group's life is a stream of commits: a sink task commits every partition it holds at once, each
partition's offset moved forward; one commit in ``1 / --reset-every`` (100) of a group is instead a reset (KIP-875
``DELETE /connectors/<name>/offsets``: a tombstone for each of the group's partitions), after which its next commit
starts again from zero. Every record goes to the partition the coordinator uses for its group,
``Utils.abs(groupId.hashCode()) % 50`` (the group coordinator's ``partitionFor``), so one group's records keep their
order in one partition, as in the real topic.

Then, in one SparkSession (``local[2]``), after a warm-up on a small topic:

* (a) the baseline: ``read_topic_batch(...).count()``, a raw batch read of the whole topic;
* (b) the job: ``connect_state.spark.sink_offsets.start(..., available_now=True)`` from empty state (new Delta tables,
  new checkpoint), timed from ``start()`` until the query stops; ``sink_offsets`` is then checked against the
  generator's own bookkeeping (each live (group, topic, partition) with its last committed offset, the reset ones
  absent), with no rejected record (``check: OK``, or exit 1).

The last line is the ratio of the job's time to the raw read's time. Performance is compared only within one run.

    .venv/bin/python bench/sink_offsets.py                          # 200,000 records, temporary broker
    .venv/bin/python bench/sink_offsets.py --records 50000 --repeat 3
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
from connect_state.formats.consumer_offsets import (
    OffsetCommitValue,
    parse_record_key,
    serialize_offset_commit_key,
    serialize_offset_commit_value,
)
from connect_state.formats.javalang import java_string_hashcode
from connect_state.spark import sink_offsets as job
from connect_state.spark.foldjob import FoldWriter
from connect_state.tables.schemas import REJECTED_RECORDS, SINK_OFFSETS, SINK_OFFSETS_HISTORY

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

PARTITIONS = 50
"""The broker's default ``offsets.topic.num.partitions``."""
FIRST_COMMIT_MS = 1_764_000_000_000
"""The commit timestamp of the first record (2025-11-24); each later record is 10 ms later."""
JOB = JobUnderTest(
    topic_setting="consumer.offsets.topic",
    start=job.start,
    writer=(FoldWriter, "__call__"),
    writer_parts=(
        (FoldWriter, "insert_history", "history append"),
        (FoldWriter, "merge_current", "sink_offsets MERGE"),
        (FoldWriter, "write_rejected", "rejected MERGE"),
    ),
    start_what="creating the tables, emptying sink_offsets, starting the query",
)

Record = tuple[bytes, bytes | None]
OffsetKey = tuple[str, str, int]
"""(group, topic, partition)."""


def coordinator_partition(key: bytes, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of the record's group: ``Utils.abs(groupId.hashCode()) % partitions``
    (Kafka's ``Utils.abs``: 0 for ``Integer.MIN_VALUE``, else ``Math.abs``)."""
    record_key = parse_record_key(key)
    group = getattr(record_key, "group", None)
    if group is None:
        raise BenchError(f"not an offset-commit key: {key!r}")
    code = java_string_hashcode(group)
    return (0 if code == -(2**31) else abs(code)) % partitions


# --- the workload ---------------------------------------------------------------------------------------------------


@dataclass
class Workload:
    """The records, and what ``sink_offsets`` must hold after them."""

    records: list[Record] = field(default_factory=list)
    committed: dict[OffsetKey, int] = field(default_factory=dict)
    commits: int = 0
    tombstones: int = 0


def group_name(index: int) -> str:
    """A sink connector's consumer group, as Connect names it (``SinkUtils.consumerGroupId``)."""
    return f"connect-bench-sink-{index:05d}"


def group_partitions(index: int, topics: int, partitions: int) -> list[tuple[str, int]]:
    """The (topic, partition) pairs a group consumes: its own topics, ``partitions`` each."""
    return [(f"bench-sink-in-{index:05d}-{t}", p) for t in range(topics) for p in range(partitions)]


def generate_workload(n: int, groups: int, topics: int, partitions: int, reset_every: int, seed: int) -> Workload:
    """About ``n`` records (exactly ``n``: the last commit is cut short), each step a group picked at random."""
    rng = random.Random(seed)
    work = Workload()
    positions: list[dict[tuple[str, int], int]] = [{} for _ in range(groups)]
    assigned = [group_partitions(g, topics, partitions) for g in range(groups)]
    while len(work.records) < n:
        g = rng.randrange(groups)
        group = group_name(g)
        reset = bool(positions[g]) and rng.randrange(reset_every) == 0
        for topic, partition in assigned[g]:
            if len(work.records) >= n:
                break
            key = serialize_offset_commit_key(group, topic, partition)
            if reset:
                work.records.append((key, None))
                work.committed.pop((group, topic, partition), None)
                work.tombstones += 1
                continue
            offset = positions[g].get((topic, partition), 0) + rng.randrange(1, 500)
            positions[g][(topic, partition)] = offset
            commit = OffsetCommitValue(
                offset=offset,
                metadata="",
                commit_timestamp=FIRST_COMMIT_MS + 10 * len(work.records),
                leader_epoch=rng.randrange(3),
            )
            work.records.append((key, serialize_offset_commit_value(commit)))
            work.committed[(group, topic, partition)] = offset
            work.commits += 1
        if reset:
            positions[g].clear()
    return work


# --- checking -------------------------------------------------------------------------------------------------------


def check_tables(spark: SparkSession, settings: Settings, work: Workload) -> str:
    """``sink_offsets`` against the generator's bookkeeping; raise BenchError on a mismatch."""
    table = spark.read.format("delta").load(str(settings.table_path(SINK_OFFSETS.name)))
    rows = {
        (row["group_id"], row["topic"], row["partition"]): row["offset"]
        for row in table.select("group_id", "topic", "partition", "offset").collect()
    }
    history = spark.read.format("delta").load(str(settings.table_path(SINK_OFFSETS_HISTORY.name))).count()
    rejected = spark.read.format("delta").load(str(settings.table_path(REJECTED_RECORDS.name))).count()
    wrong = []
    if set(rows) != set(work.committed):
        missing, extra = len(set(work.committed) - set(rows)), len(set(rows) - set(work.committed))
        wrong.append(f"sink_offsets has {len(rows):,} rows ({missing:,} missing, {extra:,} extra)")
    differing = [key for key, offset in work.committed.items() if key in rows and rows[key] != offset]
    if differing:
        key = differing[0]
        wrong.append(f"{len(differing):,} offsets differ, e.g. {key}: {rows[key]} instead of {work.committed[key]}")
    if rejected:
        wrong.append(f"{rejected:,} rejected records")
    if history < work.commits:
        wrong.append(f"sink_offsets_history has {history:,} rows, fewer than the {work.commits:,} commits")
    if wrong:
        raise BenchError("check failed: " + "; ".join(wrong))
    return f"sink_offsets {len(rows):,} rows, sink_offsets_history {history:,} rows, rejected_records 0 rows"


# --- the run ---------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench/sink_offsets.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--records", type=int, default=200_000, help="records in the topic (default 200000)")
    parser.add_argument("--groups", type=int, default=1_000, help="sink connectors' consumer groups (default 1000)")
    parser.add_argument("--topics-per-group", type=int, default=2, help="topics each group consumes (default 2)")
    parser.add_argument("--partitions-per-topic", type=int, default=10, help="partitions of each topic (default 10)")
    parser.add_argument("--reset-every", type=int, default=100, help="one step of a group in N is a reset (100)")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the workload (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of (a) and (b); medians are reported (default 1)")
    parser.add_argument("--warmup-records", type=int, default=2_000, help="records of the warm-up topic, 0: none")
    add_cluster_arguments(parser)
    parser.add_argument("--keep-dir", action="store_true", help="keep the temporary directory (broker data, tables)")
    add_config_arguments(parser)
    return parser


def validate(args: argparse.Namespace) -> None:
    check_arguments(
        (
            (
                min(args.records, args.groups, args.topics_per_group, args.partitions_per_topic) > 0,
                "--records, --groups, --topics-per-group, --partitions-per-topic must be > 0",
            ),
            (args.reset_every >= 1, "--reset-every must be >= 1"),
            (args.repeat >= 1 and args.warmup_records >= 0, "--repeat must be >= 1, --warmup-records >= 0"),
            (args.job_timeout > 0, "--job-timeout must be positive"),
        )
    )


def make_workload(args: argparse.Namespace, n: int, groups: int, seed: int) -> Workload:
    return generate_workload(n, groups, args.topics_per_group, args.partitions_per_topic, args.reset_every, seed)


def measure(args: argparse.Namespace, cluster: Settings, work_dir: Path, topics: list[str]) -> None:
    """Generate, fill, warm up, then (a) and (b) ``--repeat`` times; print the figures, the ratio last."""
    started = time.perf_counter()
    work = make_workload(args, args.records, args.groups, args.seed)
    n = len(work.records)
    print(
        f"workload: {n:,} records ({work.commits:,} commits, {work.tombstones:,} tombstones) over {args.groups:,} "
        f"groups x {args.topics_per_group * args.partitions_per_topic} partitions, {len(work.committed):,} offsets "
        f"committed at the end, seed {args.seed}; generated in {time.perf_counter() - started:.2f} s",
        flush=True,
    )
    topic = new_topic(
        cluster,
        "bench-consumer-offsets",
        work.records,
        PARTITIONS,
        args.replication_factor,
        topics,
        report_fill=True,
        partitioner=coordinator_partition,
    )
    spark = bench_session(work_dir, args.master, "connect-state-bench-sink-offsets", args.conf)
    try:
        if args.warmup_records:
            groups = max(1, min(args.groups, args.warmup_records // 50))
            warm = make_workload(args, args.warmup_records, groups, args.seed + 1)
            check_warm = partial(check_tables, work=warm)
            warm_up(
                spark,
                args,
                cluster,
                work_dir,
                topics,
                JOB,
                "bench-consumer-offsets",
                PARTITIONS,
                warm.records,
                check_warm,
                partitioner=coordinator_partition,
            )
        raw_times, job_times, _ = run_rounds(
            spark, args, cluster, work_dir, topic, n, JOB, partial(check_tables, work=work)
        )
    finally:
        spark.stop()
    raw, job_seconds = statistics.median(raw_times), statistics.median(job_times)
    print(f"(a) raw Kafka read to a count, median of {len(raw_times)}: {rate(n, raw)}")
    print(f"(b) sink-offsets job, AvailableNow from empty state, median of {len(job_times)}: {rate(n, job_seconds)}")
    print(f"ratio b/a (job time / raw read time): {job_seconds / raw:.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return bench_main("bench/sink_offsets.py", args, measure, validate, keep=args.keep_dir)


if __name__ == "__main__":
    sys.exit(main())
