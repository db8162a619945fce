"""Benchmark: the source-offsets job against a raw Spark Kafka read of the same offsets topic, and
``GET /connectors/<name>/offsets`` of our API against a real Connect worker's, in one run.

A fresh 25-partition compacted topic shaped like ``connect-offsets`` is filled with N offset records (default
200,000) of FileStream source connectors: keys are Connect's exact key bytes ``["<connector>",{"filename":...}]``
(:func:`connect_state.formats.offsets.offset_key_bytes`), values ``{"position":N}``
(:func:`~connect_state.formats.offsets.serialize_offset_value`) or tombstones, over ``--connectors`` connectors (1,000)
× ``--partitions-per-connector`` source partitions (10); every record goes to the partition the Java producer would
pick for its key. Then, in one SparkSession (``local[2]``, the production JIT), after a warm-up on a small topic:

* (a) the baseline: ``read_topic_batch(...).count()``, a raw batch read of the whole topic;
* (b) the job: ``connect_state.spark.source_offsets.start(..., available_now=True)`` from empty state (new Delta
  tables, new checkpoint), timed from ``start()`` until the query stops; ``source_offsets``, ``source_offsets_history``
  and ``rejected_records`` are then checked against the fold computed in Python while generating (``check: OK``).

Then the REST comparison: a real Connect worker (``connect_state.dev.local_stack.ConnectWorker``) is started with the
benchmark topic as its ``offset.storage.topic``, and every connector is created through its ``POST /connectors`` with
``"initial_state":"STOPPED"`` (Connect 3.7+) as a FileStream source, so Connect lists the produced partitions and no
task ever writes an offset. ``jobs.connector_states`` (AvailableNow) folds the worker's config and status topics into
the ``connectors`` table next to the last job run's tables, and ``connect-state-api`` (gunicorn, :mod:`api.server`)
serves them. (c) ``GET /connectors/<name>/offsets`` is sent ``--requests`` times (1,000) over the connectors, in turn
to our API and to Connect (sequential, one keep-alive connection to each, after a warm-up); every answer of both is
checked against the expected offsets (``api check: OK``), and p50/p99 latencies are reported.

(d) Then the concurrent load of issue 11 §5 (:mod:`bench.http_load`): for each of ``GET /connectors/<name>/status``,
``/topics`` and ``/offsets`` and each ``--clients`` count (4 and 8), that many client processes send keep-alive
GETs over the connectors in a closed loop for ``--load-seconds`` (10), to our API, then to Connect; requests per
second and p50/p99 latencies are reported, with the resident memory of our API's processes afterwards. Before the
load, our ``/status`` and ``/topics`` answers for a sample of connectors are compared with Connect's (the oracle),
and ``jobs.active_topics`` (AvailableNow) folds the worker's status topic so ``/topics`` reads a real table.

The last line holds the ratios: the job's time over the raw read's, our p50 and p99 over Connect's, and, per path and
client count, our requests per second over Connect's.

Without ``--bootstrap-servers`` a temporary KRaft broker is started on free loopback ports with its data in the work
directory. The worker, the API and the broker are stopped and the work directory removed at the end, also on error,
Ctrl-C or SIGTERM (``--keep`` keeps the directory: broker data, tables, logs)::

    .venv/bin/python bench/offsets.py                             # 200,000 records, 1,000 connectors
    .venv/bin/python bench/offsets.py --records 20000 --connectors 200 --requests 400
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from pyspark.sql import SparkSession

from connect_state.core.settings import Settings, add_config_arguments
from connect_state.dev.connect_rest import ConnectRestClient, ConnectRestError
from connect_state.dev.filestream import file_source_config
from connect_state.dev.jvm_service import free_port, tail, terminate_process_group
from connect_state.dev.local_stack import ConnectWorker
from connect_state.formats.offsets import offset_key_bytes, serialize_offset_value
from connect_state.spark import active_topics as topics_job
from connect_state.spark import connector_states as states_job
from connect_state.spark import source_offsets as offsets_job
from connect_state.spark.foldjob import FoldWriter
from connect_state.tables.schemas import CONNECTORS, REJECTED_RECORDS, SOURCE_OFFSETS, SOURCE_OFFSETS_HISTORY

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
    rate,
    run_job,
    run_rounds,
    warm_up,
)
from bench.http_load import HTTP_TIMEOUT_S, LoadResult, percentile, run_load

PARTITIONS = 25
"""Connect's default partition count for ``connect-offsets`` (``offset.storage.partitions``)."""
REPO_ROOT = Path(__file__).resolve().parent.parent
LINES_TOPIC = "bench-lines"
"""The ``topic`` of the FileStream source configs (never written: the connectors stay STOPPED)."""
WORKER_START_TIMEOUT_S = 180.0
API_START_TIMEOUT_S = 60.0
PROCESS_STOP_TIMEOUT_S = 30.0
CREATE_TIMEOUT_S = 180.0
"""Longest time spent creating one connector, retries included."""
JOB = JobUnderTest(
    topic_setting="offset.storage.topic",
    start=offsets_job.start,
    writer=(offsets_job.SourceOffsetsWriter, "__call__"),
    writer_parts=(
        (offsets_job.SourceOffsetsWriter, "insert_history", "history append"),
        (offsets_job.SourceOffsetsWriter, "merge_current", "source_offsets MERGE"),
        (offsets_job.SourceOffsetsWriter, "write_rejected", "rejected MERGE"),
    ),
    start_what="creating the tables, emptying source_offsets, starting the query",
)


# --- the workload ---------------------------------------------------------------------------------------------------


def connector_name(index: int) -> str:
    return f"bench-source-{index:05d}"


def source_partition(connector: str, partition: int) -> dict[str, str]:
    """A FileStream source partition (``FileStreamSourceTask``: ``{"filename": <file>}``)."""
    return {"filename": f"/var/bench/input/{connector}/part-{partition:03d}.txt"}


@dataclass
class Workload:
    """The records to write, and what the job and both APIs must answer (``KafkaOffsetBackingStore``'s rules: a
    record with a value puts its key, a tombstone removes it; single-key partition maps are listed while live)."""

    connectors: list[str]
    partitions_per_connector: int
    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    offsets: int = 0
    tombstones: int = 0
    live: dict[bytes, tuple[str, int, int]] = field(default_factory=dict)
    """Key bytes of a live partition -> (connector, partition number, position)."""

    def expected_offsets(self) -> dict[str, list[tuple[str, str]]]:
        """Per connector, ``GET /connectors/<name>/offsets`` as :func:`canonical` entries."""
        answers: dict[str, list[tuple[str, str]]] = {name: [] for name in self.connectors}
        for connector, partition, position in self.live.values():
            answers[connector].append(
                (_canonical_json(source_partition(connector, partition)), _canonical_json({"position": position}))
            )
        return {name: sorted(entries) for name, entries in answers.items()}


def generate_workload(
    n: int, connectors: int, partitions_per_connector: int, tombstone_ratio: float, seed: int
) -> Workload:
    """``n`` offsets-topic records: each picks a connector and one of its partitions at random; with probability
    ``tombstone_ratio`` it is a tombstone, otherwise the partition's position grows (a FileStream source reading on).
    """
    rng = random.Random(seed)
    names = [connector_name(c) for c in range(connectors)]
    keys = [
        [offset_key_bytes(name, source_partition(name, p)) for p in range(partitions_per_connector)] for name in names
    ]
    work = Workload(names, partitions_per_connector)
    positions: dict[bytes, int] = {}
    for _ in range(n):
        c, p = rng.randrange(connectors), rng.randrange(partitions_per_connector)
        key = keys[c][p]
        if rng.random() < tombstone_ratio:
            work.tombstones += 1
            work.records.append((key, None))
            work.live.pop(key, None)
            continue
        position = positions[key] = positions.get(key, 0) + rng.randrange(1, 4096)
        work.offsets += 1
        work.records.append((key, serialize_offset_value({"position": position})))
        work.live[key] = (names[c], p, position)
    return work


def _canonical_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def canonical(entries: object) -> list[tuple[str, str]] | None:
    """The ``offsets`` list of a ``GET /offsets`` body, order-insensitive (Connect lists a ``HashSet``); None when
    the body is not that shape."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        return None
    return sorted((_canonical_json(e.get("partition")), _canonical_json(e.get("offset"))) for e in entries)


# --- Spark: the job and its check -----------------------------------------------------------------------------------


def check_tables(spark: SparkSession, settings: Settings, work: Workload) -> str:
    """Compare the job's tables with the expected fold; raise BenchError on a mismatch, else a one-line summary.

    ``source_offsets``: one row per live key, in the benchmark topic, of the key's connector, with the key's
    position, listed; ``source_offsets_history``: one row per record; ``rejected_records``: empty.
    """

    def load(name: str):
        return spark.read.format("delta").load(str(settings.table_path(name)))

    rows = load(SOURCE_OFFSETS.name).select("connector", "offsets_topic", "key", "offset", "listed").collect()
    got = {
        bytes(r.key): (r.connector, r.offsets_topic, json.loads(r.offset) if r.offset else None, r.listed) for r in rows
    }
    topic = settings.offset_storage_topic
    want = {key: (c, topic, {"position": position}, True) for key, (c, _p, position) in work.live.items()}
    wrong: list[str] = []
    if len(rows) != len(got):
        wrong.append(f"source_offsets has {len(rows) - len(got):,} duplicate keys")
    if got != want:
        missing, extra = want.keys() - got.keys(), got.keys() - want.keys()
        differ = [k for k in want.keys() & got.keys() if want[k] != got[k]]
        wrong.append(
            f"source_offsets differs: {len(missing):,} keys missing, {len(extra):,} unexpected, {len(differ):,} wrong"
            + (f" (e.g. {differ[0]!r}: {got[differ[0]]} instead of {want[differ[0]]})" if differ else "")
        )
    counts = {spec.name: load(spec.name).count() for spec in (SOURCE_OFFSETS_HISTORY, REJECTED_RECORDS)}
    expected = {SOURCE_OFFSETS_HISTORY.name: len(work.records), REJECTED_RECORDS.name: 0}
    wrong += [f"{name} has {counts[name]:,} rows, expected {n:,}" for name, n in expected.items() if counts[name] != n]
    if wrong:
        raise BenchError("check failed: " + "; ".join(wrong))
    return f"{SOURCE_OFFSETS.name} {len(rows):,} rows, " + ", ".join(f"{k} {v:,} rows" for k, v in counts.items())


# --- the Connect worker and its connectors ---------------------------------------------------------------------------


def start_worker(cluster: Settings, work_dir: Path, offsets_topic: str, run_id: str) -> ConnectWorker:
    """A distributed worker on a free port whose ``offset.storage.topic`` is the benchmark topic (config and status
    topics and group are new); ready when its REST API answers and its internal topics exist."""
    settings = cluster.with_overrides(
        **{
            "offset.storage.topic": offsets_topic,
            "config.storage.topic": f"bench-configs-{run_id}",
            "status.storage.topic": f"bench-status-{run_id}",
        }
    )
    return ConnectWorker(
        settings,
        port=free_port(),
        bootstrap_servers=cluster.bootstrap_servers,
        group_id=f"bench-connect-{run_id}",
        data_dir=work_dir / "local" / "connect",
        start_timeout=WORKER_START_TIMEOUT_S,
    )


def create_stopped_connector(
    client: ConnectRestClient, name: str, config: Mapping[str, str], cancelled: threading.Event
) -> None:
    """``POST /connectors`` with ``"initial_state":"STOPPED"``; retried while Connect answers 409 (a rebalance or a
    stale config snapshot: "Cannot complete request momentarily ..."), at most ``CREATE_TIMEOUT_S`` seconds.

    A 409 "already exists" after a retry means an earlier attempt went through: done. Gives up quietly once
    ``cancelled`` is set (the run is ending: the worker may be gone).
    """
    body = {"name": name, "config": dict(config), "initial_state": "STOPPED"}
    deadline = time.monotonic() + CREATE_TIMEOUT_S
    backoff = 0.1
    while not cancelled.is_set():
        try:
            status, answer = client.post("/connectors", body)
        except ConnectRestError as err:  # no answer (e.g. a read timeout): try again while time is left
            status, answer = None, str(err)
        message = answer.get("message", "") if isinstance(answer, dict) else str(answer)
        if status == 201 or (status == 409 and "already exists" in message):
            return
        if status not in (None, 409, 500, 503) or time.monotonic() + backoff > deadline:
            raise BenchError(f"creating connector {name} failed: Connect answered {status}: {message}")
        cancelled.wait(backoff)
        backoff = min(2.0, backoff * 2)


def create_connectors(client: ConnectRestClient, work: Workload, threads: int) -> float:
    """Create every connector STOPPED (``threads`` requests in flight), printing progress; return the seconds taken.

    Each connector is a FileStream source whose ``file`` is its first partition's file (Connect does not check it:
    a STOPPED connector never runs a task).
    """
    names = work.connectors
    step = max(1, len(names) // 10)
    started = time.perf_counter()
    executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="create-connector")
    cancelled = threading.Event()
    try:
        futures = [
            executor.submit(
                create_stopped_connector,
                client,
                name,
                file_source_config(name, Path(source_partition(name, 0)["filename"]), LINES_TOPIC),
                cancelled,
            )
            for name in names
        ]
        for done, future in enumerate(as_completed(futures), start=1):
            future.result()
            if done % step == 0 or done == len(names):
                elapsed = time.perf_counter() - started
                print(
                    f"    created {done:,}/{len(names):,} connectors in {elapsed:.1f} s ({done / elapsed:.1f}/s)",
                    flush=True,
                )
    finally:
        cancelled.set()  # after an error or Ctrl-C, the requests still in flight end without retrying
        executor.shutdown(wait=False, cancel_futures=True)
    client.wait_for(
        lambda: len(set(names) - set(client.list_connectors())) == 0,
        120.0,
        description=f"Connect to list all {len(names):,} connectors",
    )
    return time.perf_counter() - started


def run_connector_states(spark: SparkSession, settings: Settings, work: Workload, timeout_s: float) -> str:
    """``jobs.connector_states`` (AvailableNow) into ``settings.delta_root``; check every connector is a STOPPED
    source with a config there. Returns a one-line summary."""
    run = run_job(
        lambda: states_job.start(spark, settings, available_now=True),
        timeout_s,
        (FoldWriter, "__call__"),
        (),
    )
    table = spark.read.format("delta").load(str(settings.table_path(CONNECTORS.name)))
    rows = table.select("name", "type", "target_state", "config", "deleted").collect()
    ready = {r.name for r in rows if r.type == "source" and r.target_state == "STOPPED" and r.config and not r.deleted}
    missing = set(work.connectors) - ready
    if missing:
        raise BenchError(
            f"check failed: {len(missing):,} connectors are not STOPPED sources in the connectors table "
            f"(e.g. {sorted(missing)[0]})"
        )
    return f"{len(rows):,} rows, all {len(work.connectors):,} connectors STOPPED sources, in {run.seconds:.2f} s"


# --- our API as a process --------------------------------------------------------------------------------------------


class ApiProcess:
    """``connect-state-api`` (gunicorn via :mod:`api.server`) in its own process group, output to a log file."""

    def __init__(self, settings: Settings, args: argparse.Namespace, log_file: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_file = log_file
        script = Path(sys.executable).parent / "connect-state-api"
        command = [str(script)] if script.exists() else [sys.executable, "-m", "connect_state.api.server"]
        if args.conf_file:
            command += ["--conf-file", args.conf_file]
        for item in args.overrides:
            command += ["--set", item]
        overrides = {
            "bootstrap.servers": settings.bootstrap_servers,
            "offset.storage.topic": settings.offset_storage_topic,
            "config.storage.topic": settings.config_storage_topic,
            "status.storage.topic": settings.status_storage_topic,
            "delta.root": str(settings.delta_root),
            "checkpoint.root": str(settings.checkpoint_root),
            "api.host": "127.0.0.1",
            "api.port": str(self.port),
        }
        for key, value in overrides.items():
            command += ["--set", f"{key}={value}"]
        command += ["--workers", str(args.api_workers), "--threads", str(args.api_threads)]
        self.command = command
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float) -> None:
        """Launch, then wait until ``GET /connectors`` answers 200 (raise BenchError with the log tail otherwise)."""
        with self.log_file.open("ab") as out:
            self._proc = subprocess.Popen(
                self.command,
                cwd=REPO_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches us only; we stop it ourselves
            )
        client = ConnectRestClient(self.url, 5.0)
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc.poll() is not None:
                raise BenchError(f"connect-state-api exited with {self._proc.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(ConnectRestError):
                if client.get("/connectors")[0] == 200:
                    return
            if time.monotonic() > deadline:
                raise BenchError(f"connect-state-api not ready after {timeout_s:g}s:\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self) -> None:
        """SIGTERM the process group, wait, then SIGKILL."""
        proc, self._proc = self._proc, None
        if proc is not None:
            terminate_process_group(proc, PROCESS_STOP_TIMEOUT_S)

    def log_tail(self, lines: int = 30) -> str:
        return tail(self.log_file, lines)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def rss_bytes(self) -> int:
        """Resident memory of the gunicorn master and its workers (``/proc``), 0 when not running."""
        return process_tree_rss(self._proc.pid) if self._proc is not None else 0


def process_tree_rss(pid: int) -> int:
    """The summed ``VmRSS`` of ``pid`` and its descendants, read from ``/proc`` (Linux)."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
    return total


# --- (c): GET /connectors/<name>/offsets latency ---------------------------------------------------------------------


class HttpTarget:
    """Sequential GETs over one keep-alive HTTP/1.1 connection, timed from sending to the end of the body."""

    def __init__(self, label: str, base_url: str) -> None:
        self.label = label
        host_port = base_url.removeprefix("http://").rstrip("/")
        host, _, port = host_port.rpartition(":")
        self.host, self.port = host, int(port)
        self._conn: http.client.HTTPConnection | None = None
        self.latencies: list[float] = []
        self.mismatches: list[str] = []

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=HTTP_TIMEOUT_S)
            self._conn.connect()
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def get(self, path: str) -> tuple[int, bytes, float]:
        """(status, body, seconds); a connection the server closed is reopened once and the request re-timed."""
        for attempt in (1, 2):
            conn = self._connection()
            try:
                started = time.perf_counter()
                conn.request("GET", path, headers={"Accept": "application/json"})
                response = conn.getresponse()
                body = response.read()
                seconds = time.perf_counter() - started
            except (http.client.RemoteDisconnected, http.client.CannotSendRequest, ConnectionError) as err:
                self.close()
                if attempt == 2:
                    raise BenchError(f"GET {self.label}{path}: {err}") from None
                continue
            if response.will_close:
                self.close()
            return response.status, body, seconds
        raise AssertionError("unreachable")


def offsets_path(name: str) -> str:
    return ConnectRestClient.connector_path(name, "offsets")


def check_answer(target: HttpTarget, name: str, status: int, body: bytes, expected: list[tuple[str, str]]) -> None:
    """Record a mismatch when the answer is not 200 with exactly the expected offsets."""
    try:
        entries = canonical(json.loads(body).get("offsets")) if status == 200 else None
    except (ValueError, AttributeError):
        entries = None
    if entries != expected:
        target.mismatches.append(f"{name}: {status} {body[:200]!r}")


def measure_latency(
    targets: Sequence[HttpTarget], work: Workload, requests: int, warmup: int
) -> dict[str, list[tuple[str, str]]]:
    """``warmup`` untimed requests to each target, then ``requests`` timed ones over the connectors in order; each
    connector's request goes to every target in turn (the first target alternating), and every answer is checked."""
    expected = work.expected_offsets()
    names = work.connectors
    for i in range(warmup):
        for target in targets:
            target.get(offsets_path(names[-1 - i % len(names)]))
    step = max(1, requests // 5)
    started = time.perf_counter()
    for i in range(requests):
        name = names[i % len(names)]
        order = targets if i % 2 == 0 else list(reversed(targets))
        for target in order:
            status, body, seconds = target.get(offsets_path(name))
            target.latencies.append(seconds)
            check_answer(target, name, status, body, expected[name])
        if (i + 1) % step == 0 or i + 1 == requests:
            print(f"    {i + 1:,}/{requests:,} requests to each in {time.perf_counter() - started:.1f} s", flush=True)
    return expected


def latency_line(target: HttpTarget) -> str:
    ms = [s * 1000 for s in target.latencies]
    return (
        f"p50 {percentile(ms, 50):.2f} ms, p99 {percentile(ms, 99):.2f} ms "
        f"(mean {statistics.fmean(ms):.2f}, min {min(ms):.2f}, max {max(ms):.2f}; {len(ms):,} requests)"
    )


# --- (d): concurrent keep-alive clients -------------------------------------------------------------------------------

LOAD_PATHS = ("status", "topics", "offsets")
ORACLE_SAMPLE = 50
"""Connectors whose ``/status`` and ``/topics`` answers are compared with Connect's before the load."""


def compare_with_connect(ours: HttpTarget, connect: HttpTarget, names: Sequence[str], kinds: Sequence[str]) -> str:
    """Our ``/status`` and ``/topics`` answers equal Connect's (JSON-equal, both 200) for a sample of connectors;
    raise BenchError otherwise. ``/offsets`` answers were checked against the workload in (c)."""
    sample = names[:: max(1, len(names) // ORACLE_SAMPLE)][:ORACLE_SAMPLE]
    compared = 0
    for kind in (k for k in kinds if k != "offsets"):
        for name in sample:
            path = ConnectRestClient.connector_path(name, kind)
            answers = [target.get(path) for target in (ours, connect)]
            (our_status, our_body, _), (their_status, their_body, _) = answers
            if our_status != 200 or their_status != 200 or json.loads(our_body) != json.loads(their_body):
                raise BenchError(
                    f"oracle check failed on GET {path}: ours {our_status} {our_body[:300]!r}, "
                    f"Connect {their_status} {their_body[:300]!r}"
                )
            compared += 1
    return f"{compared:,} answers equal to Connect's ({len(sample)} connectors)"


def run_topics_job(spark: SparkSession, settings: Settings, timeout_s: float) -> str:
    """``jobs.active_topics`` (AvailableNow) over the worker's status topic into ``settings.delta_root``."""
    run = run_job(
        lambda: topics_job.start(spark, settings, available_now=True),
        timeout_s,
        (FoldWriter, "__call__"),
        (),
    )
    return f"active_topics folded in {run.seconds:.2f} s"


def concurrent_load(
    args: argparse.Namespace, targets: Sequence[tuple[str, str, int | None]], names: Sequence[str]
) -> list[tuple[str, int, LoadResult, LoadResult]]:
    """Per path kind and client count: our API's round, then Connect's; returns (kind, clients, ours, Connect).
    Each round also measures the CPU time the server's processes (``pid`` and its descendants) used: CPU per request
    moves less with the machine's load than requests per second do."""
    results = []
    for kind in load_paths(args):
        paths = [ConnectRestClient.connector_path(name, kind) for name in names]
        for clients in client_counts(args):
            rounds = []
            for label, url, pid in targets:
                result = run_load(f"{label} /{kind}", url, paths, clients, args.load_seconds, warmup=20, cpu_pid=pid)
                print(f"    {result.line()}; load average {load_average()}", flush=True)
                if result.failures:
                    raise BenchError(f"GET /{kind} under load: {result.line()}")
                rounds.append(result)
            results.append((kind, clients, rounds[0], rounds[1]))
    return results


def load_ratio_line(results: Sequence[tuple[str, int, LoadResult, LoadResult]]) -> str:
    return ", ".join(
        f"{kind}@{clients} {ours.rate / connect.rate:.2f} (p99 {ours.percentile_ms(99):.1f}/"
        f"{connect.percentile_ms(99):.1f} ms)"
        for kind, clients, ours, connect in results
    )


# --- the run ---------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/offsets.py", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=200_000, help="records in the offsets topic (default 200000)")
    parser.add_argument("--connectors", type=int, default=1_000, help="FileStream source connectors (default 1000)")
    parser.add_argument(
        "--partitions-per-connector", type=int, default=10, help="source partitions (files) per connector (default 10)"
    )
    parser.add_argument("--tombstone-ratio", type=float, default=0.05, help="share of tombstones (default 0.05)")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the workload (default 1)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of (a) and (b); medians are reported (default 1)")
    parser.add_argument("--requests", type=int, default=1_000, help="timed GET /offsets per server (default 1000)")
    parser.add_argument("--warmup-requests", type=int, default=50, help="untimed GETs per server first (default 50)")
    parser.add_argument("--warmup-records", type=int, default=2_000, help="records of the warm-up topic, 0: no warm-up")
    parser.add_argument("--create-threads", type=int, default=4, help="connector creations in flight (default 4)")
    parser.add_argument("--clients", default="4,8", help="(d): comma-separated concurrent client counts (default 4,8)")
    parser.add_argument("--load-seconds", type=float, default=10.0, help="(d): seconds per round, 0: no (d) (10)")
    parser.add_argument(
        "--load-paths", default="status,topics,offsets", help="(d): which GET /connectors/<name>/... (default all)"
    )
    parser.add_argument("--api-workers", type=int, default=1, help="connect-state-api --workers (default 1)")
    parser.add_argument("--api-threads", type=int, default=4, help="connect-state-api --threads (default 4)")
    add_cluster_arguments(parser)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (broker data, tables, logs)")
    add_config_arguments(parser)
    return parser


def validate(args: argparse.Namespace) -> None:
    check_arguments(
        (
            (args.records > 0, "--records must be positive"),
            (args.connectors > 0 and args.partitions_per_connector > 0, "--connectors and partitions must be > 0"),
            (0 <= args.tombstone_ratio < 1, "--tombstone-ratio must be in [0, 1)"),
            (args.repeat >= 1 and args.warmup_records >= 0, "--repeat must be >= 1, --warmup-records >= 0"),
            (args.requests >= 1 and args.warmup_requests >= 0, "--requests must be >= 1, --warmup-requests >= 0"),
            (args.create_threads >= 1, "--create-threads must be >= 1"),
            (all(n > 0 for n in client_counts(args)), "--clients must be positive integers, comma-separated"),
            (args.load_seconds >= 0, "--load-seconds must be >= 0"),
            (set(load_paths(args)) <= set(LOAD_PATHS), f"--load-paths must be among {', '.join(LOAD_PATHS)}"),
            (args.api_workers >= 1 and args.api_threads >= 1, "--api-workers and --api-threads must be >= 1"),
            (args.job_timeout > 0, "--job-timeout must be positive"),
        )
    )


def client_counts(args: argparse.Namespace) -> list[int]:
    try:
        return [int(n) for n in args.clients.split(",") if n.strip()]
    except ValueError:
        return [0]


def load_paths(args: argparse.Namespace) -> list[str]:
    return [kind.strip() for kind in args.load_paths.split(",") if kind.strip()]


def make_workload(args: argparse.Namespace, n: int, connectors: int, seed: int) -> Workload:
    return generate_workload(n, connectors, args.partitions_per_connector, args.tombstone_ratio, seed)


def rest_phase(
    spark: SparkSession,
    args: argparse.Namespace,
    stack: contextlib.ExitStack,
    cluster: Settings,
    work_dir: Path,
    job_run: Settings,
    work: Workload,
    topics: list[str],
) -> tuple[ApiProcess, str, int | None]:
    """Start the worker on the benchmark topic, create the connectors STOPPED, fold them into ``connectors`` next
    to the last job run's tables; return our API (not started yet) on those tables, the worker's REST URL and its
    process id. Both are stopped by ``stack``."""
    run_id = uuid.uuid4().hex[:8]
    worker = start_worker(cluster, work_dir, job_run.offset_storage_topic, run_id)
    topics += [worker.config_topic, worker.status_topic]
    print(f"starting a Connect worker on {worker.rest_url} (offset.storage.topic {worker.offset_topic})", flush=True)
    started = time.perf_counter()
    stack.callback(worker.stop)
    worker.start()
    client = worker.client(timeout=HTTP_TIMEOUT_S)
    version = client.server_info().get("version", "?")
    print(f"Connect {version} worker ready in {time.perf_counter() - started:.1f} s", flush=True)
    print(
        f"creating {len(work.connectors):,} FileStream source connectors STOPPED "
        f"(POST /connectors, initial_state STOPPED, {args.create_threads} in flight)",
        flush=True,
    )
    seconds = create_connectors(client, work, args.create_threads)
    print(f"created {len(work.connectors):,} connectors in {seconds:.1f} s", flush=True)
    states = job_run.with_overrides(
        **{"config.storage.topic": worker.config_topic, "status.storage.topic": worker.status_topic}
    )
    print(f"connectors table: {run_connector_states(spark, states, work, args.job_timeout)}", flush=True)
    if args.load_seconds and "topics" in load_paths(args):
        print(run_topics_job(spark, states, args.job_timeout), flush=True)
    api = ApiProcess(states, args, work_dir / "api.log")
    stack.callback(api.stop)
    return api, worker.rest_url, worker.pid


def measure(args: argparse.Namespace, cluster: Settings, work_dir: Path, topics: list[str]) -> None:
    """Generate, fill, warm up, (a) and (b) ``--repeat`` times, then the REST comparison (c); the ratios last."""
    started = time.perf_counter()
    work = make_workload(args, args.records, args.connectors, args.seed)
    n = len(work.records)
    print(
        f"workload: {n:,} records ({work.offsets:,} offsets, {work.tombstones:,} tombstones) over "
        f"{args.connectors:,} connectors x {args.partitions_per_connector} partitions, {len(work.live):,} live at the "
        f"end, seed {args.seed}; generated in {time.perf_counter() - started:.2f} s",
        flush=True,
    )
    topic = new_topic(
        cluster, "bench-offsets", work.records, PARTITIONS, args.replication_factor, topics, report_fill=True
    )

    with contextlib.ExitStack() as stack:
        spark = bench_session(work_dir, args.master, "connect-state-bench-offsets", args.conf)
        stack.callback(spark.stop)
        if args.warmup_records:
            warm = make_workload(args, args.warmup_records, min(args.connectors, 50), args.seed + 1)
            check_warm = partial(check_tables, work=warm)
            warm_up(spark, args, cluster, work_dir, topics, JOB, "bench-offsets", PARTITIONS, warm.records, check_warm)
        raw_times, job_times, last_run = run_rounds(
            spark, args, cluster, work_dir, topic, n, JOB, partial(check_tables, work=work)
        )
        api, connect_url, connect_pid = rest_phase(spark, args, stack, cluster, work_dir, last_run, work, topics)
        spark.stop()  # the API reads the tables with deltalake; no JVM of ours competes with the servers
        api.start(API_START_TIMEOUT_S)
        print(f"connect-state-api (gunicorn) ready on {api.url}, serving {last_run.delta_root}", flush=True)
        ours = HttpTarget("connect-state-api", api.url)
        connect = HttpTarget("Connect", connect_url)
        stack.callback(ours.close)
        stack.callback(connect.close)
        print(
            f"(c) GET /connectors/<name>/offsets: {args.warmup_requests} warm-up then {args.requests:,} timed "
            f"requests to each server, sequential, keep-alive; load average {load_average()}",
            flush=True,
        )
        expected = measure_latency([ours, connect], work, args.requests, args.warmup_requests)
        load: list[tuple[str, int, LoadResult, LoadResult]] = []
        if args.load_seconds:
            print(f"(d) oracle: {compare_with_connect(ours, connect, work.connectors, load_paths(args))}", flush=True)
            ours.close()
            connect.close()
            print(
                f"(d) concurrent keep-alive clients {args.clients}, {args.load_seconds:g} s a round, "
                f"connect-state-api --workers {args.api_workers} --threads {args.api_threads}",
                flush=True,
            )
            targets = [("ours", api.url, api.pid), ("Connect", connect_url, connect_pid)]
            load = concurrent_load(args, targets, work.connectors)
            rss_mib = api.rss_bytes() / 2**20
            print(f"(d) connect-state-api resident memory after the load: {rss_mib:,.0f} MiB", flush=True)

    raw, job_seconds = statistics.median(raw_times), statistics.median(job_times)
    print(f"(a) raw Kafka read to a count, median of {len(raw_times)}: {rate(n, raw)}")
    print(f"(b) source-offsets job, AvailableNow from empty state, median of {len(job_times)}: {rate(n, job_seconds)}")
    print(f"(c) ours    (connect-state-api, Delta via deltalake): {latency_line(ours)}")
    print(f"(c) Connect (the worker's REST API, same topic):     {latency_line(connect)}")
    bad = [(t.label, t.mismatches) for t in (ours, connect) if t.mismatches]
    if bad:
        details = "; ".join(f"{label}: {len(m):,} wrong answers, e.g. {m[0]}" for label, m in bad)
        raise BenchError(f"api check failed: {details}")
    entries = sum(len(v) for v in expected.values())
    print(f"api check: OK (every answer of both servers equals the expected offsets; {entries:,} partitions in all)")
    p50 = percentile(ours.latencies, 50) / percentile(connect.latencies, 50)
    p99 = percentile(ours.latencies, 99) / percentile(connect.latencies, 99)
    for _kind, _clients, ours_load, connect_load in load:
        print(f"(d) {ours_load.line()}")
        print(f"(d) {connect_load.line()}")
    load_part = f"; req/s ours/Connect {load_ratio_line(load)}" if load else ""
    print(
        f"ratios: job/raw read (b/a) {job_seconds / raw:.2f}; GET /offsets ours/Connect p50 {p50:.2f}, p99 {p99:.2f}"
        f"{load_part}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return bench_main("bench/offsets.py", args, measure, validate, keep=args.keep)


if __name__ == "__main__":
    sys.exit(main())
