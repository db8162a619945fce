"""The verdicts' I/O (issue 35): a reconcile job in the driver that judges every connector each pass and keeps the
Delta tables ``connector_verdicts`` (current, one row per connector) and ``verdict_history`` (one row per change).

A pass reads, through ``deltalake`` (no Spark job: the tables are small or read incrementally by
:class:`~connect_state.tables.reader.TableReader`), ``connectors`` (config, target state, statuses, committed task
count), the status events of ``connector_events`` (since when each state holds; failures and restarts for flapping),
``sink_offsets`` (a sink group's commits), ``source_offsets`` (a source's offsets), ``active_topics`` (a source's output
topics, a sink's ``topics.regex`` topics), ``source_partition_activity`` and ``heartbeats`` (KIP-910: has the provider
answered?), and asks Kafka the log ends of the sinks' topics, the sources' output topics and the dead-letter queues
(:class:`~connect_state.kafka.topic_positions.TopicPositions`), and describes the Connect workers' group
(``connect.group.id``, one DescribeGroups per pass: :class:`~connect_state.kafka.connect_group.ConnectGroup`) for its
live workers: a connector or task whose status says RUNNING on a worker that is no live member is lost (a stopped
worker's UNASSIGNED write may never land). A describe that fails, or a group not Stable, gives no such evidence that
pass (logged), never a verdict. What changed between passes (commits, offsets, log
ends, dead-letter counts) is remembered in memory (:mod:`connect_state.verdicts.movement`): after a restart of this
job, a stall is seen at the earliest one threshold later. The judge (:func:`connect_state.verdicts.judge.judge`)
decides.

``connector_verdicts`` is written when a connector's or a task's verdict changed (a task's: e.g. the connectors table
caught up with a task lost while the connector's verdict already said degraded), and at least every
:data:`REFRESH_MS` (the evidence's numbers); ``verdict_history`` gets a row per change of a connector's verdict.
The job is their only writer: a second instance waits for the ``watch`` lease. The console script is
``connect-state-watch`` (jobs/watch.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from connect_state.core.errors import ConnectStateError, TableNotFoundError
from connect_state.core.partitions import Partition
from connect_state.core.settings import Settings, interval_seconds
from connect_state.core.storage import deltalake_options
from connect_state.folds.connector_states import STATUS_CHANGED, TASK_STATUS_CHANGED
from connect_state.kafka.connect_group import ConnectGroup
from connect_state.kafka.topic_positions import TopicPositions
from connect_state.leases.decisions import WATCH_LEASE
from connect_state.spark.leases import LeasedTask
from connect_state.spark.retention import maintained_passes
from connect_state.spark.streaming import PeriodicTask, Run, job_logger
from connect_state.tables import small_writes
from connect_state.tables.lease_store import keeper_for
from connect_state.tables.merge_spec import MergeSpec, matched_update, not_matched_insert, source_values
from connect_state.tables.reader import TableReader
from connect_state.tables.schemas import (
    ACTIVE_TOPICS,
    CONNECTOR_EVENTS,
    CONNECTOR_VERDICTS,
    CONNECTORS,
    HEARTBEATS,
    SINK_OFFSETS,
    SOURCE_OFFSETS,
    SOURCE_PARTITION_ACTIVITY,
    TABLE_PROPERTIES,
    VERDICT_HISTORY,
    epoch_ms,
    now_ms,
    timestamp,
)
from connect_state.verdicts.evidence import (
    ConnectorEvidence,
    DropEvidence,
    HeartbeatEvidence,
    SinkEvidence,
    SourceEvidence,
    TaskEvidence,
    WorkersEvidence,
)
from connect_state.verdicts.judge import Judgement, judge
from connect_state.verdicts.movement import Counter, Movement
from connect_state.verdicts.thresholds import Thresholds, thresholds_for

JOB_NAME = "watch"
CLIENT_ID = "connect-state-watch"
#: The longest ``connector_verdicts`` goes without a write while verdicts stay the same (the evidence's numbers).
REFRESH_MS = 60_000
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
log = job_logger(JOB_NAME)

_MERGE = MergeSpec(
    "t.connector = s.connector",
    (
        matched_update(source_values(CONNECTOR_VERDICTS.column_names)),
        not_matched_insert(source_values(CONNECTOR_VERDICTS.column_names)),
    ),
)


def _compact(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _config(row: Mapping[str, Any]) -> dict[str, Any]:
    try:
        config = json.loads(row.get("config") or "{}")
    except ValueError:
        return {}
    return config if isinstance(config, dict) else {}


def _workers_named(row: Mapping[str, Any]) -> list[str | None]:
    """The workers a connector's RUNNING status records name (its own and its tasks')."""
    named = [row.get("connector_worker_id")] if row.get("connector_state") == "RUNNING" else []
    return named + [t.get("worker_id") for t in row.get("tasks") or [] if t.get("state") == "RUNNING"]


class StatusEvents:
    """From ``connector_events``: since when each connector's and task's latest state holds, and the times of the
    transitions to FAILED and RESTARTING (flapping)."""

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.latest: dict[tuple[str, int | None], tuple[int, str | None]] = {}
        self.failures: dict[str, list[int]] = {}
        self.restarts: dict[str, list[int]] = {}
        for row in rows:
            try:
                details = json.loads(row["details"] or "{}")
            except ValueError:
                continue
            at = epoch_ms(row["kafka_timestamp"])
            if at is None:
                continue
            task = details.get("task") if row["event"] == TASK_STATUS_CHANGED else None
            key = (row["connector"], task)
            to = details.get("to")
            if key not in self.latest or self.latest[key][0] <= at:
                self.latest[key] = (at, to)
            if to == "FAILED":
                self.failures.setdefault(row["connector"], []).append(at)
            elif to == "RESTARTING":
                self.restarts.setdefault(row["connector"], []).append(at)

    def since(self, connector: str, task: int | None, state: str | None) -> int | None:
        found = self.latest.get((connector, task))
        return found[0] if found is not None and found[1] == state else None


class VerdictWatch:
    """One pass (:meth:`run_pass`): gather the evidence, judge, write the two tables."""

    def __init__(
        self,
        settings: Settings,
        *,
        positions: TopicPositions | None = None,
        group: ConnectGroup | None = None,
        clock: Callable[[], int] = now_ms,
        fence: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.options = deltalake_options(settings)
        self.reader = TableReader(settings.delta_root, self.options)
        self._positions = positions
        self._group = group
        self.missing_since: dict[str, int] = {}  # worker id -> first pass it was missing from the Connect group
        self.describe_failing = False
        self.clock = clock
        self.fence = fence or (lambda: None)
        self.base = Thresholds.from_settings(settings)
        self.overrides = dict(settings.verdict_overrides)
        self.movement = Movement()
        self.drops = Counter()
        self.current: dict[str, tuple[str, int]] | None = None  # connector -> (verdict, since ms), as written
        #: connector -> {task: verdict}, as written (empty after a restart: the first pass writes every row again)
        self.task_verdicts: dict[str, dict[int, str]] = {}
        self.last_write_ms = 0

    @property
    def positions(self) -> TopicPositions:
        if self._positions is None:
            self._positions = TopicPositions(self.settings, client_id=CLIENT_ID)
        return self._positions

    @property
    def group(self) -> ConnectGroup:
        if self._group is None:
            self._group = ConnectGroup(self.settings, client_id=CLIENT_ID)
        return self._group

    def close(self) -> None:
        if self._positions is not None:
            self._positions.close()
        if self._group is not None:
            self._group.close()

    def _workers(self, named: set[str], now: int) -> WorkersEvidence | None:
        """The Connect group's live workers (one DescribeGroups), and since which pass each worker ``named`` by a
        RUNNING status record has been missing from it; None (logged) when the describe fails or cannot tell."""
        try:
            members = self.group.members()
        except ConnectStateError as err:
            level = logging.DEBUG if self.describe_failing else logging.WARNING
            log.log(level, "no evidence of the Connect group's members this pass: %s", err)
            self.describe_failing = True
            return None
        if self.describe_failing:
            log.info("the Connect group %s answers again", self.settings.connect_group_id)
        self.describe_failing = False
        if members is None:
            return None
        live = frozenset(members.workers)
        self.missing_since = {w: self.missing_since.get(w, now) for w in sorted(named - live)}
        return WorkersEvidence(members.group, live, now, dict(self.missing_since))

    def _rows(self, spec: Any, filters: list | None = None, columns: list[str] | None = None) -> list[dict[str, Any]]:
        try:
            return self.reader.rows(spec, filters=filters, columns=columns)
        except TableNotFoundError:
            return []

    # --- a pass --------------------------------------------------------------------------------------------------

    def run_pass(self) -> str | None:
        now = self.clock()
        connectors = [row for row in self._rows(CONNECTORS) if not row["deleted"]]
        events = StatusEvents(
            self._rows(
                CONNECTOR_EVENTS,
                filters=[("event", "in", [STATUS_CHANGED, TASK_STATUS_CHANGED])],
                columns=["connector", "event", "details", "kafka_timestamp"],
            )
        )
        active = self._topics_by_connector()
        named = {str(w) for row in connectors for w in _workers_named(row) if w}
        workers = self._workers(named, now) if named else None
        judgements: dict[str, tuple[Judgement, Thresholds, list[str], str | None]] = {}
        for row in connectors:
            config = _config(row)
            thresholds, ignored = thresholds_for(self.base, self.overrides, row["name"], config)
            evidence = self._evidence(row, config, events, active, thresholds, now, workers)
            judgements[row["name"]] = (judge(evidence, thresholds, now), thresholds, ignored, row["type"])
        self._forget(set(judgements))
        return self._write(judgements, now)

    def _topics_by_connector(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for row in self._rows(ACTIVE_TOPICS, columns=["connector", "topic"]):
            found.setdefault(row["connector"], []).append(row["topic"])
        return found

    def _forget(self, names: set[str]) -> None:
        keys = {(kind, name) for name in names for kind in ("commits", "lag", "offsets", "out")}
        self.movement.forget_except(keys)  # type: ignore[arg-type]
        self.drops.forget_except(set(names))

    def _evidence(
        self,
        row: Mapping[str, Any],
        config: Mapping[str, Any],
        events: StatusEvents,
        active: Mapping[str, list[str]],
        thresholds: Thresholds,
        now: int,
        workers: WorkersEvidence | None = None,
    ) -> ConnectorEvidence:
        name = row["name"]
        tasks = tuple(
            TaskEvidence(
                t["id"], t["state"], t.get("trace"), events.since(name, t["id"], t["state"]), t.get("worker_id")
            )
            for t in sorted(row["tasks"] or [], key=lambda t: t["id"])
            if t.get("state")
        )
        state = row["connector_state"]
        running = [events.since(name, None, state)] if state == "RUNNING" else []
        running += [task.since_ms for task in tasks if task.state == "RUNNING"]
        kind = (row["type"] or "").lower()
        sink = source = drops = None
        if kind == "sink":
            sink = self._sink(name, config, active.get(name, []), now)
            drops = self._drops(name, config, thresholds, now)
        elif kind == "source":
            source = self._source(name, active.get(name, []), now)
        return ConnectorEvidence(
            name=name,
            type=row["type"],
            target_state=row["target_state"],
            state=state,
            trace=row["connector_trace"],
            state_since_ms=events.since(name, None, state),
            running_since_ms=max((ms for ms in running if ms is not None), default=None),
            tasks=tasks,
            task_count=row["task_count"],
            failures_ms=tuple(events.failures.get(name, [])),
            restarts_ms=tuple(events.restarts.get(name, [])),
            sink=sink,
            source=source,
            dead_letters=drops,
            worker_id=row.get("connector_worker_id"),
            workers=workers,
            config=config,
        )

    def _sink(self, name: str, config: Mapping[str, Any], active: list[str], now: int) -> SinkEvidence | None:
        group = str(config.get("consumer.override.group.id") or f"connect-{name}")
        listed = [t.strip() for t in str(config.get("topics") or "").split(",") if t.strip()]
        topics = sorted(set(listed) | set(active))
        partitions = self.positions.partitions(topics)
        if not partitions:
            return None
        commits = self._rows(SINK_OFFSETS, filters=[("group_id", "=", group)])
        committed: dict[Partition, int] = {
            (r["topic"], r["partition"]): r["offset"] for r in commits if r["offset"] is not None
        }
        ends = self.positions.latest_offsets(partitions)
        starts = self.positions.earliest_offsets([p for p in partitions if p not in committed])
        lag = sum(max(0, end - committed.get(p, starts.get(p, 0))) for p, end in ends.items())
        snapshot = tuple(sorted((p, committed[p]) for p in partitions if p in committed))
        last_commit = max((r["commit_timestamp"] for r in commits if r["commit_timestamp"]), default=None)
        moved = self.movement.observe(("commits", name), snapshot, now, last_commit)
        lag_since = self.movement.observe(("lag", name), snapshot if lag > 0 else None, now) if lag > 0 else None
        if lag <= 0:
            self.movement.observe(("lag", name), None, now)
        return SinkEvidence(group, tuple(topics), lag, moved, lag_since)

    def _drops(self, name: str, config: Mapping[str, Any], t: Thresholds, now: int) -> DropEvidence | None:
        topic = str(config.get(DLQ_TOPIC) or "").strip()
        if not topic:
            return None
        partitions = self.positions.partitions([topic])
        if not partitions:
            return None
        total = sum(self.positions.latest_offsets(partitions).values())
        grown, since = self.drops.observe(name, total, now, t.dropping_window_ms)
        return DropEvidence(topic, grown, since)

    def _source(self, name: str, topics: list[str], now: int) -> SourceEvidence:
        offsets = self._rows(SOURCE_OFFSETS, filters=[("connector", "=", name)])
        snapshot = tuple(sorted((r["offsets_topic"], bytes(r["key"]), r["offset"]) for r in offsets))
        last = max((epoch_ms(r["kafka_timestamp"]) for r in offsets if r["kafka_timestamp"] is not None), default=None)
        offsets_moved = self.movement.observe(("offsets", name), snapshot, now, last) if offsets else None
        topics_moved = None
        if topics:
            ends = self.positions.latest_offsets(self.positions.partitions(topics))
            topics_moved = self.movement.observe(("out", name), tuple(sorted(ends.items())), now)
        activity = self._rows(SOURCE_PARTITION_ACTIVITY, filters=[("connector", "=", name)], columns=["eligible"])
        beats = self._rows(HEARTBEATS, filters=[("connector", "=", name)], columns=["outcome", "error", "emitted_at"])
        latest = max(beats, key=lambda r: epoch_ms(r["emitted_at"]) or 0, default=None)
        beat = (
            HeartbeatEvidence(latest["outcome"], epoch_ms(latest["emitted_at"]), latest["error"])
            if latest is not None and latest["emitted_at"] is not None
            else None
        )
        return SourceEvidence(
            offsets_moved, tuple(sorted(topics)), topics_moved, beat, any(r["eligible"] for r in activity)
        )

    # --- the tables ----------------------------------------------------------------------------------------------

    def _path(self, spec: Any) -> str:
        return str(self.settings.table_path(spec.name))

    def _load_current(self) -> dict[str, tuple[str, int]]:
        path = self._path(CONNECTOR_VERDICTS)
        small_writes.open_or_create(path, CONNECTOR_VERDICTS, TABLE_PROPERTIES, self.options)
        small_writes.open_or_create(self._path(VERDICT_HISTORY), VERDICT_HISTORY, TABLE_PROPERTIES, self.options)
        rows = small_writes.read(path, ["connector", "verdict", "since"], self.options).to_pylist()
        return {r["connector"]: (r["verdict"], epoch_ms(r["since"]) or 0) for r in rows}

    def _write(
        self, judgements: Mapping[str, tuple[Judgement, Thresholds, list[str], str | None]], now: int
    ) -> str | None:
        if self.current is None:
            self.current = self._load_current()
        changes = []
        rows = []
        tasks_changed = False
        for name, (judgement, thresholds, ignored, kind) in sorted(judgements.items()):
            verdict = str(judgement.verdict)
            task_verdicts = {task: str(v) for task, (v, _e) in judgement.tasks.items()}
            tasks_changed |= self.task_verdicts.get(name) != task_verdicts
            self.task_verdicts[name] = task_verdicts
            previous = self.current.get(name)
            evidence = dict(judgement.evidence)
            if ignored:
                evidence["ignored_config"] = ignored
            if previous is None or previous[0] != verdict:
                since = judgement.began_at_ms if judgement.began_at_ms is not None else now
                changes.append((name, verdict, previous[0] if previous else None, now, _compact(evidence)))
            else:
                since = previous[1]
            self.current[name] = (verdict, since)
            tasks = {str(task): {"verdict": str(v), "evidence": e} for task, (v, e) in judgement.tasks.items()}
            rows.append(
                (name, kind, verdict, since, _compact(evidence), _compact(tasks), _compact(thresholds.as_dict()))
            )
        gone = sorted(set(self.current) - set(judgements))
        if not changes and not gone and not tasks_changed and now - self.last_write_ms < REFRESH_MS:
            return None
        self.fence()
        self._merge(rows, now)
        if gone:
            self._delete(gone)
            for name in gone:
                del self.current[name]
                self.task_verdicts.pop(name, None)
        if changes:
            history = pa.table(
                {
                    "connector": [c[0] for c in changes],
                    "verdict": [c[1] for c in changes],
                    "previous": [c[2] for c in changes],
                    "at": pa.array([timestamp(c[3]) for c in changes], VERDICT_HISTORY.schema.field("at").type),
                    "evidence": [c[4] for c in changes],
                },
                schema=VERDICT_HISTORY.schema,
            )
            small_writes.append(history, self._path(VERDICT_HISTORY), self.options)
        self.last_write_ms = now
        if not changes and not gone:
            return None
        return "; ".join(f"{c[0]}: {c[2] or '-'} -> {c[1]}" for c in changes) + (
            f"; gone: {', '.join(gone)}" if gone else ""
        )

    def _merge(self, rows: list[tuple], now: int) -> None:
        if not rows:
            return
        names = ["connector", "type", "verdict", "since", "evidence", "tasks", "thresholds"]
        columns: dict[str, Any] = {name: [r[i] for r in rows] for i, name in enumerate(names)}
        columns["since"] = [timestamp(ms) for ms in columns["since"]]
        columns["updated"] = [timestamp(now)] * len(rows)
        source = pa.table(columns, schema=CONNECTOR_VERDICTS.schema)
        small_writes.merge_rows(source, self._path(CONNECTOR_VERDICTS), _MERGE, self.options)

    def _delete(self, names: list[str]) -> None:
        path = self._path(CONNECTOR_VERDICTS)

        def delete() -> None:
            table = small_writes.latest(path, self.options)
            quoted = ", ".join("'" + name.replace("'", "''") + "'" for name in names)
            table.delete(f"connector IN ({quoted})")

        small_writes.with_retries(path, delete)


class WatchJob:
    """The verdict passes (:class:`~connect_state.spark.streaming.Job`): one every ``verdict.trigger.interval``, or a
    single one for a catch-up run."""

    name = JOB_NAME

    def check(self, settings: Settings) -> None:
        """Read the thresholds and the interval: a bad one fails here (ConfigError)."""
        interval_seconds(settings.verdict_trigger_interval, "verdict.trigger.interval")
        Thresholds.from_settings(settings)

    def start(self, spark: Any, settings: Settings, available_now: bool, max_offsets: int | None) -> Run:
        self.check(settings)
        lease = keeper_for(settings, WATCH_LEASE)
        watch = VerdictWatch(settings, fence=lease.fence)
        interval = interval_seconds(settings.verdict_trigger_interval, "verdict.trigger.interval")

        def passes() -> PeriodicTask:
            return maintained_passes(
                settings, JOB_NAME, watch.run_pass, interval, available_now, log, (CONNECTOR_VERDICTS, VERDICT_HISTORY)
            )

        task = LeasedTask(JOB_NAME, lease, passes, once=available_now)
        return Run([task], closers=[watch.close, lease.release])
