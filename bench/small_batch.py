"""Benchmark: where a small micro-batch's time goes, for a continuously running job (issue 11 §3, steady state).

A fresh topic shaped like the job's input (``connect-status`` for ``--job active_topics``, ``connect-offsets`` for
``--job source_offsets``) is filled with ``--records`` records (the state the job starts from), then, in one
SparkSession (``local[2]``, the production JIT):

1. the job starts as a continuous query (``trigger.interval`` ``--trigger``) and catches up (its first batch);
2. the driver idles for ``--idle`` seconds: the CPU time of this process and of the Spark JVM over that time is
   printed (share of one core);
3. ``--batches`` times: ``--batch-records`` new records (changes of existing keys) are written, and the micro-batch
   that folds them is awaited. Per batch: the end-to-end latency (write acknowledged -> the writer's batch done),
   Spark's ``durationMs`` by phase, the writer's Delta writes one by one, and the CPU used.

The last line gives the median small batch's ``triggerExecution`` and the idle CPU share. Nothing here is a
pass/fail threshold.

    .venv/bin/python bench/small_batch.py --job active_topics --records 20000 --batches 8
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import active_topics as at_bench
from bench import offsets as offsets_bench
from bench.common import (
    BenchError,
    JobUnderTest,
    Record,
    add_cluster_arguments,
    bench_main,
    bench_session,
    check_arguments,
    cpu_seconds,
    fill_topic,
    instrumented_writer,
    load_average,
    new_topic,
    process_tree,
)
from connect_state.core.settings import Settings, add_config_arguments
from connect_state.formats.offsets import offset_key_bytes, serialize_offset_value
from connect_state.formats.status import TopicStatus, serialize_topic_status, topic_status_key
from connect_state.spark import foldjob

# Every fold job's steps beside its own table writes, timed too so that a batch's time is accounted for.
COMMON_PARTS: tuple[tuple[Any, str, str], ...] = (
    (foldjob, "kind_counts", "fold + counts"),
    (foldjob.FoldWriter, "record_data_loss", "data-loss check"),
    (foldjob.FoldWriter, "record_watermark", "watermark"),
    (foldjob.FoldWriter, "reconcile", "reconcile"),
)

JOBS: dict[str, tuple[JobUnderTest, int, str]] = {
    "active_topics": (at_bench.JOB, at_bench.PARTITIONS, "bench-status"),
    "source_offsets": (offsets_bench.JOB, offsets_bench.PARTITIONS, "bench-offsets"),
}


def initial_records(args: argparse.Namespace) -> list[Record]:
    if args.job == "active_topics":
        return at_bench.generate_workload(args.records, args.connectors, 20, 0.1, 0.02, args.seed).records
    return offsets_bench.generate_workload(args.records, args.connectors, 10, 0.05, args.seed).records


def change_records(args: argparse.Namespace, rng: random.Random, n: int, step: int) -> list[Record]:
    """``n`` changes of existing keys: new discover timestamps, or new source positions."""
    out: list[Record] = []
    for _ in range(n):
        c = rng.randrange(args.connectors)
        if args.job == "active_topics":
            connector, topic = at_bench.connector_name(c), at_bench.topic_name(c, rng.randrange(20))
            status = TopicStatus(topic, connector, 0, 1_800_000_000_000 + step)
            out.append((topic_status_key(topic, connector).encode(), serialize_topic_status(status)))
        else:
            name = offsets_bench.connector_name(c)
            key = offset_key_bytes(name, offsets_bench.source_partition(name, rng.randrange(10)))
            out.append((key, serialize_offset_value({"position": 10**9 + step})))
    return out


def wait_batch(query: Any, after_batch: int, timeout_s: float) -> dict[str, Any]:
    """The progress of the first batch with input rows after ``after_batch``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise BenchError(f"the job failed: {query.exception()}")
        for progress in query.recentProgress:
            if progress["batchId"] > after_batch and progress.get("numInputRows", 0) > 0:
                return progress
        time.sleep(0.05)
    raise BenchError(
        f"no batch with input after batch {after_batch} within {timeout_s:g}s; status {query.status}, "
        f"last progress {query.lastProgress}"
    )


def phases(progress: dict[str, Any]) -> str:
    durations = progress.get("durationMs") or {}
    return ", ".join(f"{k} {v}" for k, v in sorted(durations.items(), key=lambda kv: -kv[1]) if v)


def spark_jobs(spark: Any) -> list[dict[str, Any]]:
    """The session's Spark jobs so far, from its UI's REST API (``--stages``: the UI is on)."""
    base = f"{spark.sparkContext.uiWebUrl}/api/v1/applications/{spark.sparkContext.applicationId}"
    with urllib.request.urlopen(f"{base}/jobs", timeout=10) as answer:
        jobs = json.load(answer)
    for job in jobs:
        job["stages"] = []
        for stage_id in sorted(job.get("stageIds", [])):
            with urllib.request.urlopen(f"{base}/stages/{stage_id}", timeout=10) as answer:
                attempts = json.load(answer)
            job["stages"].extend(a for a in attempts if a.get("status") != "SKIPPED")
    return jobs


def stage_lines(jobs: Sequence[dict[str, Any]], after_job: int) -> list[str]:
    """One line per Spark job after ``after_job``: its wall time, and per stage run its tasks and their summed run
    time (where a small batch's fixed costs go)."""
    lines = []
    for job in sorted((j for j in jobs if j["jobId"] > after_job), key=lambda j: j["jobId"]):
        wall = _ui_seconds(job.get("completionTime")) - _ui_seconds(job.get("submissionTime"))
        stages = "; ".join(
            f"stage {s['stageId']} {s.get('numTasks', 0)} tasks, run {s.get('executorRunTime', 0) / 1000:.2f} s, "
            f"wall {_ui_seconds(s.get('completionTime')) - _ui_seconds(s.get('submissionTime')):.2f} s"
            for s in job["stages"]
        )
        name = (job.get("description") or job.get("name") or "").splitlines()[0][:60]
        lines.append(f"    job {job['jobId']} ({name}): {wall:.2f} s: {stages}")
    return lines


def jvm_compilations(spark: Any) -> tuple[int, float]:
    """Java classes Spark has generated (Janino compilations) and the JIT's compile time in seconds, so far."""
    jvm = spark.sparkContext._jvm
    generated = int(jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())
    jit = jvm.java.lang.management.ManagementFactory.getCompilationMXBean().getTotalCompilationTime() / 1000
    return generated, jit


def _ui_seconds(stamp: str | None) -> float:
    """Epoch seconds of a UI time stamp (``2026-11-24T17:01:02.345GMT``), 0 when absent."""
    if not stamp:
        return 0.0
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fGMT").replace(tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class SmallBatches:
    """What one run measured: the small batches' medians and the idle driver's CPU share (None: not measured)."""

    trigger_median_s: float
    latency_median_s: float
    idle_share: float | None


def measure(args: argparse.Namespace, cluster: Settings, work_dir: Path, topics: list[str]) -> SmallBatches:
    """Fill, start the job, idle (``--idle`` > 0), then the small batches; print each, return the medians."""
    job, partitions, prefix = JOBS[args.job]
    records = initial_records(args)
    topic = new_topic(cluster, prefix, records, partitions, args.replication_factor, topics, report_fill=True)
    extra = [*args.conf, "spark.ui.enabled=true", "spark.ui.port=0"] if args.stages else args.conf
    spark = bench_session(work_dir, args.master, "connect-state-bench-small-batch", extra)
    settings = job.settings(cluster, work_dir, topic, "job").with_overrides(**{"trigger.interval": args.trigger})
    rng = random.Random(args.seed + 7)
    parts_timed = (*job.writer_parts, *COMMON_PARTS)
    try:
        with instrumented_writer(job.writer, [(o, n) for o, n, _ in parts_timed]) as times:
            started = time.perf_counter()
            query = job.start(spark, settings, available_now=False)
            first = wait_batch(query, -1, args.job_timeout)
            print(
                f"catch-up: {first['numInputRows']:,} records in batch {first['batchId']}, "
                f"{time.perf_counter() - started:.2f} s from start(); {phases(first)}",
                flush=True,
            )
            time.sleep(2)  # let the no-data batches after the catch-up pass
            pids = process_tree(os.getpid())
            idle_share = None
            if args.idle > 0:
                before, t0 = cpu_seconds(pids), time.perf_counter()
                time.sleep(args.idle)
                idle_share = (cpu_seconds(pids) - before) / (time.perf_counter() - t0)
                print(
                    f"idle {args.idle:g} s: driver + JVM + workers used {100 * idle_share:.1f}% of one core "
                    f"(load average {load_average()})",
                    flush=True,
                )
            triggers: list[int] = []
            latencies: list[float] = []
            # The last batch that read records: an idle query's progress events (every 10 s without data) carry the
            # id of the batch to come, so the highest id overall may be the next batch's own.
            last = max(
                (p["batchId"] for p in query.recentProgress if p.get("numInputRows", 0) > 0), default=first["batchId"]
            )
            for step in range(1, args.batches + 1):
                parts_before, total_before = dict(times.parts), times.total
                last_job = max((j["jobId"] for j in spark_jobs(spark)), default=-1) if args.stages else -1
                cpu_before, compiled_before = cpu_seconds(pids), jvm_compilations(spark)
                sent = time.perf_counter()
                fill_topic(cluster, topic, change_records(args, rng, args.batch_records, step), partitions)
                progress = wait_batch(query, last, args.job_timeout)
                done = time.perf_counter()
                last = progress["batchId"]
                trigger = (progress.get("durationMs") or {}).get("triggerExecution", 0)
                triggers.append(trigger)
                latencies.append(done - sent)
                parts = ", ".join(
                    f"{label} {times.parts.get(name, 0.0) - parts_before.get(name, 0.0):.2f}"
                    for _, name, label in parts_timed
                )
                compiled = jvm_compilations(spark)
                generated, jit = compiled[0] - compiled_before[0], compiled[1] - compiled_before[1]
                print(
                    f"batch {last}: {progress['numInputRows']} records; written -> seen {done - sent:.2f} s; "
                    f"CPU {cpu_seconds(pids) - cpu_before:.2f} s (classes generated {generated:.0f}, JIT {jit:.2f} s); "
                    f"durationMs: {phases(progress)}; "
                    f"writer {times.total - total_before:.2f} s: {parts}",
                    flush=True,
                )
                if args.stages:
                    print("\n".join(stage_lines(spark_jobs(spark), last_job)), flush=True)
                time.sleep(args.pause)
            query.stop()
    finally:
        spark.stop()
    result = SmallBatches(statistics.median(triggers) / 1000, statistics.median(latencies), idle_share)
    idle = f"idle CPU {100 * idle_share:.1f}% of one core" if idle_share is not None else "idle CPU not measured"
    print(
        f"small batches ({args.batch_records} records, {len(triggers)} batches): triggerExecution median "
        f"{result.trigger_median_s:.2f} s, written -> seen median {result.latency_median_s:.2f} s; {idle}",
        flush=True,
    )
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/small_batch.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--job", choices=sorted(JOBS), default="active_topics")
    parser.add_argument("--records", type=int, default=20_000, help="records before the job starts (20000)")
    parser.add_argument("--connectors", type=int, default=500, help="distinct connectors (500)")
    parser.add_argument("--batches", type=int, default=8, help="small batches measured (8)")
    parser.add_argument("--batch-records", type=int, default=3, help="records per small batch (3)")
    parser.add_argument("--trigger", default="1 second", help="trigger.interval of the job (1 second)")
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of idle CPU measurement (20; 0: none)")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between small batches (1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--stages", action="store_true", help="turn Spark's UI on and print each small batch's Spark jobs and stages"
    )
    add_cluster_arguments(parser)
    add_config_arguments(parser)
    return parser


def validate(args: argparse.Namespace) -> None:
    check_arguments(
        (
            (args.records > 0 and args.connectors > 0, "--records and --connectors must be positive"),
            (args.batches > 0 and args.batch_records > 0, "--batches and --batch-records must be positive"),
            (args.idle >= 0, "--idle must not be negative"),
        )
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return bench_main("bench/small_batch.py", args, measure, validate)


if __name__ == "__main__":
    sys.exit(main())
