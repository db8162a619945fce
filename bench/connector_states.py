"""Benchmark: the connector-states job against a raw Spark Kafka read of the same config and status topics, in one run.

Issue 11 §1 asks for this job's catch-up ratio. Two fresh topics shaped like ``connect-configs`` (1 partition) and
``connect-status`` (5 partitions) are filled with N synthetic records in all (default 200,000) over many connectors,
written as a Kafka 4.3.1 worker writes them (:mod:`connect_state.formats.config` and :mod:`connect_state.formats.
status`): each connector is created (config, target state STARTED, task configs, commit), then its life is a stream
of connector and task statuses (RUNNING, UNASSIGNED on rebalances with a new generation), with pauses and resumes
(target states) and reconfigurations (a new config, task configs and a commit) now and then. Every record goes to the
partition the Java producer would pick for its key. Then, in one SparkSession (``local[2]``), after a warm-up on small
topics:

* (a) the baseline: a raw batch read of both topics to a count (``read_topic_batch(...).count()`` of each, summed);
* (b) the job: ``connect_state.spark.connector_states.start(..., available_now=True)`` from empty state (new Delta
  tables, new checkpoint), timed from ``start()`` until the query stops.

The last line is the ratio of the job's time to the raw read's time. After each job run the ``connectors`` table is
checked against the generator's own bookkeeping, not against our fold: one row per connector, its last target state,
its task count, and no rejected record (``check: OK``, or exit 1). Performance is compared only within one run.

    .venv/bin/python bench/connector_states.py                      # 200,000 records, temporary broker
    .venv/bin/python bench/connector_states.py --records 50000 --repeat 3
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from connect_state.core.settings import Settings, add_config_arguments
from connect_state.core.vocabulary import TargetState
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
from connect_state.formats.status import Status, connector_status_key, serialize_status, task_status_key
from connect_state.spark import connector_states as job
from connect_state.spark.foldjob import FoldWriter
from connect_state.tables.schemas import CONNECTOR_EVENTS, CONNECTORS, REJECTED_RECORDS

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    BenchError,
    JobUnderTest,
    add_cluster_arguments,
    bench_main,
    bench_session,
    check_arguments,
    load_average,
    new_topic,
    progress_lines,
    rate,
    time_raw_read,
)

STATUS_PARTITIONS = 5
"""Connect's default partition count for ``connect-status``."""
CONFIG_PARTITIONS = 1
"""``connect-configs`` always has one partition."""
WORKERS = ("10.0.0.1:8083", "10.0.0.2:8083", "10.0.0.3:8083")
JOB = JobUnderTest(
    topic_setting="status.storage.topic",
    start=job.start,
    writer=(FoldWriter, "__call__"),
    writer_parts=(
        (FoldWriter, "insert_history", "connector_events append"),
        (FoldWriter, "merge_current", "connectors MERGE"),
        (FoldWriter, "write_rejected", "rejected MERGE"),
    ),
    start_what="creating the tables, starting the query",
)

Record = tuple[bytes, bytes | None]


# --- the workload ---------------------------------------------------------------------------------------------------


@dataclass
class Workload:
    """The records of both topics, and what the ``connectors`` table must hold after them."""

    config: list[Record] = field(default_factory=list)
    status: list[Record] = field(default_factory=list)
    target_states: dict[str, TargetState] = field(default_factory=dict)
    task_counts: dict[str, int] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return len(self.config) + len(self.status)


def connector_name(index: int) -> str:
    return f"bench-connector-{index:05d}"


def _connector_config(name: str, tasks: int, revision: int) -> dict[str, str]:
    return {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": str(tasks),
        "file": f"/data/{name}/input-{revision}.txt",
        "topic": f"{name}-out",
        "name": name,
    }


def _task_config(name: str, task: int, revision: int) -> dict[str, str]:
    return {
        "task.class": "org.apache.kafka.connect.file.FileStreamSourceTask",
        "file": f"/data/{name}/input-{revision}.txt",
        "topic": f"{name}-out",
        "batch.size": "2000",
        "task.id": str(task),
    }


def _create(work: Workload, name: str, tasks: int, revision: int, announce: bool) -> None:
    """A connector's config, task configs and commit as ``putConnectorConfig`` and ``putTaskConfigs`` write them
    (a new connector also gets its target state first)."""
    if announce:
        work.config.append((target_state_key(name).encode(), serialize_target_state(TargetState.STARTED)))
        work.target_states[name] = TargetState.STARTED
    work.config.append(
        (connector_config_key(name).encode(), serialize_connector_config(_connector_config(name, tasks, revision)))
    )
    for task in range(tasks):
        work.config.append(
            (task_config_key(name, task).encode(), serialize_task_config(_task_config(name, task, revision)))
        )
    work.config.append((task_commit_key(name).encode(), serialize_task_commit(tasks)))
    work.task_counts[name] = tasks


def generate_workload(n: int, connectors: int, tasks: int, config_ratio: float, seed: int) -> Workload:
    """About ``n`` records (creations first, then the life of the connectors until ``n`` is reached).

    Each later step picks a connector at random: with probability ``config_ratio`` a config change (a pause or a
    resume, one time in four a reconfiguration), otherwise a status: a task or the connector RUNNING on a worker, or,
    one time in ten, a rebalance (every task UNASSIGNED, then RUNNING with the next generation).
    """
    rng = random.Random(seed)
    work = Workload()
    generations = [1] * connectors
    revisions = [0] * connectors
    for c in range(connectors):
        _create(work, connector_name(c), tasks, 0, announce=True)
    while work.records < n:
        c = rng.randrange(connectors)
        name = connector_name(c)
        if rng.random() < config_ratio:
            if rng.random() < 0.25:
                revisions[c] += 1
                _create(work, name, tasks, revisions[c], announce=False)
            else:
                target = TargetState.PAUSED if work.target_states[name] == TargetState.STARTED else TargetState.STARTED
                work.config.append((target_state_key(name).encode(), serialize_target_state(target)))
                work.target_states[name] = target
            continue
        worker = WORKERS[rng.randrange(len(WORKERS))]
        if rng.random() < 0.1:
            for task in range(tasks):
                status = Status("UNASSIGNED", None, worker, generations[c])
                work.status.append((task_status_key(name, task).encode(), serialize_status(status)))
            generations[c] += 1
        state = "PAUSED" if work.target_states[name] == TargetState.PAUSED else "RUNNING"
        key = connector_status_key(name) if rng.random() < 0.2 else task_status_key(name, rng.randrange(tasks))
        work.status.append((key.encode(), serialize_status(Status(state, None, worker, generations[c]))))
    return work


# --- Kafka and Spark ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Topics:
    config: str
    status: str


def fill_topics(cluster: Settings, args: argparse.Namespace, work: Workload, prefix: str, topics: list[str]) -> Topics:
    config = new_topic(cluster, f"{prefix}-configs", work.config, CONFIG_PARTITIONS, args.replication_factor, topics)
    status = new_topic(cluster, f"{prefix}-status", work.status, STATUS_PARTITIONS, args.replication_factor, topics)
    return Topics(config, status)


def job_settings(cluster: Settings, work_dir: Path, topics: Topics, label: str) -> Settings:
    return JOB.settings(cluster, work_dir, topics.status, label).with_overrides(
        **{"config.storage.topic": topics.config}
    )


def raw_read(spark: SparkSession, cluster: Settings, topics: Topics) -> tuple[int, float]:
    """(a): both topics read to a count, one after the other; the records and the summed seconds."""
    config_count, config_seconds = time_raw_read(spark, cluster, topics.config)
    status_count, status_seconds = time_raw_read(spark, cluster, topics.status)
    return config_count + status_count, config_seconds + status_seconds


def check_tables(spark: SparkSession, settings: Settings, work: Workload) -> str:
    """The ``connectors`` table against the generator's bookkeeping; raise BenchError on a mismatch."""
    table = spark.read.format("delta").load(str(settings.table_path(CONNECTORS.name)))
    rows = {row["name"]: row for row in table.select("name", "target_state", "task_count").collect()}
    events = spark.read.format("delta").load(str(settings.table_path(CONNECTOR_EVENTS.name))).count()
    rejected = spark.read.format("delta").load(str(settings.table_path(REJECTED_RECORDS.name))).count()
    wrong = []
    if set(rows) != set(work.target_states):
        wrong.append(f"connectors has {len(rows):,} rows, expected {len(work.target_states):,}")
    for name, target in work.target_states.items():
        row = rows.get(name)
        if row is not None and (row["target_state"], row["task_count"]) != (target.value, work.task_counts[name]):
            wrong.append(
                f"{name}: {row['target_state']} with {row['task_count']} tasks, expected {target.value} "
                f"with {work.task_counts[name]}"
            )
            break
    if rejected:
        wrong.append(f"{rejected:,} rejected records")
    if not events:
        wrong.append("no connector_events")
    if wrong:
        raise BenchError("check failed: " + "; ".join(wrong))
    return f"connectors {len(rows):,} rows, connector_events {events:,} rows, rejected_records 0 rows"


# --- the run ---------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench/connector_states.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--records", type=int, default=200_000, help="records in both topics (default 200000)")
    parser.add_argument("--connectors", type=int, default=1_000, help="distinct connectors (default 1000)")
    parser.add_argument("--tasks", type=int, default=4, help="tasks per connector (default 4)")
    parser.add_argument(
        "--config-ratio", type=float, default=0.05, help="share of later steps that are config changes (0.05)"
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
            (args.records > 0 and args.connectors > 0 and args.tasks > 0, "--records, --connectors, --tasks > 0"),
            (0 <= args.config_ratio < 1, "--config-ratio must be in [0, 1)"),
            (args.repeat >= 1 and args.warmup_records >= 0, "--repeat must be >= 1, --warmup-records >= 0"),
            (args.job_timeout > 0, "--job-timeout must be positive"),
        )
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
    run = JOB.run(spark, settings, args.job_timeout)
    summary = check_tables(spark, settings, work)
    if label != "warmup":
        print(f"(a) raw read of both topics, {label}: {rate(work.records, raw_seconds)}", flush=True)
        print(f"(b) job, {label}: {rate(work.records, run.seconds)}", flush=True)
        for line in progress_lines(run, JOB.part_labels, JOB.start_what):
            print(line, flush=True)
        print(f"check: OK ({summary})", flush=True)
    else:
        print(f"warm-up ({work.records:,} records): raw read {raw_seconds:.2f} s, job {run.seconds:.2f} s", flush=True)
    return raw_seconds, run.seconds


def measure(args: argparse.Namespace, cluster: Settings, work_dir: Path, topics: list[str]) -> None:
    """Generate, fill, warm up, then (a) and (b) ``--repeat`` times; print the figures, the ratio last."""
    started = time.perf_counter()
    work = generate_workload(args.records, args.connectors, args.tasks, args.config_ratio, args.seed)
    print(
        f"workload: {work.records:,} records ({len(work.config):,} config, {len(work.status):,} status) over "
        f"{args.connectors:,} connectors x {args.tasks} tasks, seed {args.seed}; generated in "
        f"{time.perf_counter() - started:.2f} s",
        flush=True,
    )
    main_topics = fill_topics(cluster, args, work, "bench-states", topics)
    spark = bench_session(work_dir, args.master, "connect-state-bench-connector-states", args.conf)
    raw_times: list[float] = []
    job_times: list[float] = []
    try:
        if args.warmup_records:
            connectors = max(1, min(args.connectors, args.warmup_records // 50))
            warm = generate_workload(args.warmup_records, connectors, args.tasks, args.config_ratio, args.seed + 1)
            warm_topics = fill_topics(cluster, args, warm, "bench-states-warmup", topics)
            run_once(spark, args, cluster, work_dir, warm_topics, warm, "warmup")
        for round_no in range(1, args.repeat + 1):
            print(f"round {round_no}: load average {load_average()} (includes this run's own work)", flush=True)
            raw_seconds, job_seconds = run_once(spark, args, cluster, work_dir, main_topics, work, f"job-{round_no}")
            raw_times.append(raw_seconds)
            job_times.append(job_seconds)
    finally:
        spark.stop()
    raw, job_seconds = statistics.median(raw_times), statistics.median(job_times)
    print(f"(a) raw Kafka read of both topics to a count, median of {len(raw_times)}: {rate(work.records, raw)}")
    print(
        f"(b) connector-states job, AvailableNow from empty state, median of {len(job_times)}: "
        f"{rate(work.records, job_seconds)}"
    )
    print(f"ratio b/a (job time / raw read time): {job_seconds / raw:.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return bench_main("bench/connector_states.py", args, measure, validate, keep=args.keep_dir)


if __name__ == "__main__":
    sys.exit(main())
