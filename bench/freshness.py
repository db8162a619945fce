"""Benchmark: how soon our API answers a change after Kafka has it, with every job running (issue 11 §2).

On a real local broker and Connect worker with the demo connectors (:mod:`bench.live_stack`), the jobs' one driver
runs every job at ``--trigger`` (1 s) and the API serves beside it, both started as ``make run`` starts them. After
``--warmup`` seconds, for ``--seconds`` seconds, the trickle of ``bench/steady_state.py`` runs (a line for the demo
source every ``--trickle-interval`` s, whose offset the worker commits within a second; every fifth step the sink
paused or resumed through Connect's REST API), and a consumer of the status and offsets topics sees each record the
worker writes for them:

* **connector states**: each status record of the sink (connector or task: ``PAUSED``, ``RUNNING``) is answered when
  ``GET /connectors/demo-sink/status`` shows that state;
* **source offsets**: each offset record of the demo source is answered when ``GET /connectors/demo-source/offsets``
  shows that offset for its partition;
* **sink offsets**: each offset commit of the demo sink's consumer group (``connect-demo-sink``, read from
  ``__consumer_offsets`` as the group coordinator wrote it) is answered when ``GET /connectors/demo-sink/offsets``
  shows that offset for its topic partition.

A record's latency runs from its Kafka timestamp (the worker's producer's ``CreateTime``, taken before the broker
acknowledges it: the figure errs long by the acknowledgement's few milliseconds) to the first of our answers showing
it, or showing a later record of the same key (then this one is folded in too; counted as "superseded"); the API is
asked every ``--poll-ms`` (50) while a record waits, so figures err long by up to that too. Printed last: p50 and p95
per kind (issue 11 §2 asks p50 ≤ 1 s and p95 ≤ 2 s for connector states, p95 ≤ 3 s for the others, over at least 10
minutes). Nothing here is a pass/fail threshold.

    .venv/bin/python bench/freshness.py --seconds 600

``--cluster ID`` asks the API under ``/clusters/<ID>`` instead (issue 37): with ``--set clusters=shadow --set
clusters.shadow.connect.group.id=connect-shadow``, a second cluster folds the same topics in the same driver and
``--cluster shadow`` measures its answers while the driver runs both clusters' jobs. The records waited for are the
demo worker's (the default cluster's topics): the cluster named must fold those topics, as ``shadow`` does.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script (bench/ is not installed): make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka import KafkaConsumer, TopicPartition

from bench.common import BenchError, check_arguments, client_config, in_work_dir, load_average, machine_lines
from bench.http_load import percentile
from bench.live_stack import LiveRun, Trickle, add_live_arguments, live_run
from connect_state.connect.offset_stores import connector_consumer_group
from connect_state.core.errors import RecordFormatError
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.demo import DEMO_SINK, DEMO_SOURCE
from connect_state.formats.consumer_offsets import OffsetCommitKey, parse_consumer_offsets_record
from connect_state.formats.offsets import parse_offset_key, parse_offset_value
from connect_state.formats.status import ConnectorStatusKey, Status, TaskStatusKey, parse_status_record

STATES = "connector states"
OFFSETS = "source offsets"
SINK_OFFSETS = "sink offsets"
KINDS = (STATES, OFFSETS, SINK_OFFSETS)


@dataclass
class Waiting:
    """A record the API has not answered yet: ``shown(answer)`` says whether an answer shows it."""

    kind: str
    key: object
    kafka_ms: int
    shown: Callable[[Any], bool]


@dataclass
class Latencies:
    """Per kind: the measured latencies (ms), how many of them were seen through a later record of their key, and
    the records never seen."""

    seen: dict[str, list[float]] = field(default_factory=lambda: {kind: [] for kind in KINDS})
    superseded: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    unseen: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))


def _status_shown(key: ConnectorStatusKey | TaskStatusKey, state: str) -> Callable[[Any], bool]:
    def shown(answer: Any) -> bool:
        if isinstance(key, ConnectorStatusKey):
            return (answer.get("connector") or {}).get("state") == state
        return any(task.get("id") == key.task and task.get("state") == state for task in answer.get("tasks") or [])

    return shown


def _offset_shown(partition: Mapping[str, object], offset: Mapping[str, object]) -> Callable[[Any], bool]:
    def shown(answer: Any) -> bool:
        return any(
            entry.get("partition") == partition and entry.get("offset") == offset
            for entry in answer.get("offsets") or []
        )

    return shown


def waiting_for(
    topic: str, settings_topics: tuple[str, str, str], key: bytes | None, value: bytes | None, ts: int
) -> Waiting | None:
    """What a record of the status, offsets or consumer offsets topic makes us wait for (None: not a record this
    bench follows)."""
    status_topic, offsets_topic, consumer_offsets_topic = settings_topics
    try:
        if topic == status_topic:
            record = parse_status_record(key, value)
            if not isinstance(record.key, ConnectorStatusKey | TaskStatusKey) or record.key.connector != DEMO_SINK:
                return None
            if not isinstance(record.value, Status):
                return None  # a tombstone: not part of the trickle
            return Waiting(STATES, record.key, ts, _status_shown(record.key, record.value.state))
        if topic == offsets_topic:
            offset_key = parse_offset_key(key)
            offset = parse_offset_value(value)
            if offset_key.connector != DEMO_SOURCE or offset_key.partition is None or offset is None:
                return None
            partition = offset_key.partition
            return Waiting(OFFSETS, repr(sorted(partition.items())), ts, _offset_shown(partition, offset))
        if topic == consumer_offsets_topic:
            commit = parse_consumer_offsets_record(key, value)
            if not isinstance(commit.key, OffsetCommitKey) or commit.value is None:
                return None  # another coordinator record, or a deleted offset: not part of the trickle
            if commit.key.group != SINK_GROUP:
                return None
            sink_partition = {"kafka_topic": commit.key.topic, "kafka_partition": commit.key.partition}
            sink_offset = {"kafka_offset": commit.value.offset}
            waiting_key = (commit.key.topic, commit.key.partition)
            return Waiting(SINK_OFFSETS, waiting_key, ts, _offset_shown(sink_partition, sink_offset))
    except RecordFormatError:
        return None
    return None


#: The demo sink's consumer group (it sets no ``consumer.override.group.id``).
SINK_GROUP = connector_consumer_group(DEMO_SINK, {})


class Watch:
    """Follows the status, offsets and consumer offsets topics from their end; asks our API until each followed
    record shows."""

    def __init__(self, run: LiveRun, poll_ms: int, prefix: str = "") -> None:
        settings = run.settings
        self.topics = (settings.status_storage_topic, settings.offset_storage_topic, settings.consumer_offsets_topic)
        self.consumer = KafkaConsumer(**client_config(settings, KafkaConsumer.DEFAULT_CONFIG))
        partitions = [
            TopicPartition(topic, p)
            for topic in self.topics
            for p in sorted(self.consumer.partitions_for_topic(topic) or ())
        ]
        if not partitions:
            raise BenchError(f"no partitions found for {', '.join(self.topics)}")
        self.consumer.assign(partitions)
        self.consumer.seek_to_end(*partitions)
        for tp in partitions:
            self.consumer.position(tp)  # resolve the end now, before the trickle starts
        self.api = ConnectRestClient(run.api_url, timeout=10.0)
        self.poll_ms = poll_ms
        self.prefix = prefix
        self.waiting: list[Waiting] = []
        self.latencies = Latencies()

    def take_records(self) -> None:
        for tp, records in self.consumer.poll(timeout_ms=0).items():
            for r in records:
                waiting = waiting_for(tp.topic, self.topics, r.key, r.value, r.timestamp)
                if waiting is None:
                    continue
                self.waiting.append(waiting)

    def ask(self) -> None:
        paths = {
            STATES: f"{self.prefix}/connectors/{DEMO_SINK}/status",
            OFFSETS: f"{self.prefix}/connectors/{DEMO_SOURCE}/offsets",
            SINK_OFFSETS: f"{self.prefix}/connectors/{DEMO_SINK}/offsets",
        }
        for kind in {w.kind for w in self.waiting}:
            status, answer = self.api.get(paths[kind])
            now_ms = time.time() * 1000
            if status != 200 or not isinstance(answer, dict):
                continue  # e.g. 404 before the first batch: not shown yet
            shown = [w for w in self.waiting if w.kind == kind and w.shown(answer)]
            for waiting in shown:
                # Shown, or superseded: an answer showing a later record of the same key has this one folded in.
                at = self.waiting.index(waiting)
                for earlier in [w for w in self.waiting[: at + 1] if w.kind == kind and w.key == waiting.key]:
                    self.waiting.remove(earlier)
                    self.latencies.seen[kind].append(now_ms - earlier.kafka_ms)
                    if earlier is not waiting:
                        self.latencies.superseded[kind] += 1

    def follow(self, seconds: float, step: Callable[[], None] | None, every: float) -> None:
        """Follow for ``seconds`` (calling ``step()`` every ``every`` s), then up to 30 s more for the waiting ones."""
        deadline = time.monotonic() + seconds
        next_step = time.monotonic()
        while time.monotonic() < deadline:
            if step is not None and time.monotonic() >= next_step:
                step()
                next_step += every
            self.take_records()
            self.ask()
            time.sleep(self.poll_ms / 1000)
        drain = time.monotonic() + 30.0
        while self.waiting and time.monotonic() < drain:
            self.take_records()
            self.ask()
            time.sleep(self.poll_ms / 1000)
        for waiting in self.waiting:
            self.latencies.unseen[waiting.kind] += 1

    def close(self) -> None:
        self.consumer.close()


def summary(kind: str, latencies: Latencies) -> str:
    seen = latencies.seen[kind]
    counts = f"{len(seen)} seen, {latencies.superseded[kind]} superseded, {latencies.unseen[kind]} never seen"
    if not seen:
        return f"{kind}: {counts}"
    p50, p95 = percentile(seen, 50) / 1000, percentile(seen, 95) / 1000
    return f"{kind}: p50 {p50:.2f} s, p95 {p95:.2f} s, max {max(seen) / 1000:.2f} s ({counts})"


def measure(args: argparse.Namespace, work_dir: Path) -> None:
    for line in machine_lines(None, "local[2], in the jobs' own process"):
        print(line, flush=True)
    with live_run(args, work_dir, with_api=True) as run:
        watch = Watch(run, args.poll_ms, f"/clusters/{args.cluster}" if args.cluster else "")
        try:
            trickle = Trickle(run.connect, run.source_file)
            watch.follow(args.seconds, trickle, args.trickle_interval)
        finally:
            watch.close()
        print(
            f"trickle {args.seconds:g} s: {trickle.steps} lines, {trickle.steps // 5} pauses/resumes "
            f"(load average {load_average()})",
            flush=True,
        )
        for kind in KINDS:
            print(summary(kind, watch.latencies), flush=True)
        if not all(watch.latencies.seen.values()):
            raise BenchError("a kind of record was never seen; see the logs (--keep)")
    print("freshness: " + "; ".join(summary(kind, watch.latencies).split(" (")[0] for kind in KINDS))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench/freshness.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="seconds of the trickle measured (600)")
    parser.add_argument("--poll-ms", type=int, default=50, help="ms between our API's answers while one waits (50)")
    parser.add_argument("--cluster", help="ask the API under /clusters/<CLUSTER> (default: Connect's plain paths)")
    add_live_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def run(work_dir: Path) -> None:
        check_arguments(
            (
                (args.seconds > 0 and args.warmup >= 0, "--seconds must be positive, --warmup not negative"),
                (args.trickle_interval > 0 and args.poll_ms > 0, "--trickle-interval and --poll-ms must be positive"),
            )
        )
        measure(args, work_dir)

    return in_work_dir("bench/freshness.py", args.work_dir, run, keep=args.keep)


if __name__ == "__main__":
    sys.exit(main())
