"""KIP-883 cleanup on connector deletion: a reconcile job in the driver that keeps ``connector_deletions`` up to date.

Path of the feature: ``connect-configs`` → the connector-state job's ``deleted`` events (``connector_events``, with the
connector's last config) → this job: each pass plans the steps of every deletion it has not seen yet, runs the steps
that are due (:mod:`connect_state.cleanup` decides what and when), and merges each outcome into the Delta table
``connector_deletions`` right after the step ran (this job is the table's only writer: run one instance) → the API's
``GET /connectors/<name>/deletions``.

The steps act on the topics, like a worker would: tombstones for the connector's ``status-topic-*`` keys (status
topic), tombstones with the exact key bytes of its source offsets (offsets topics), deletion of a sink's consumer
group (:class:`connect_state.kafka_admin.ConsumerGroupAdmin`), and the deletion hooks. The keys to tombstone are the
union of what the ``active_topics`` / ``source_offsets`` tables list and what a batch read of the topic itself shows
live, so a step does not depend on how far the other jobs have got. A recreation of the name is looked up in
``connector_events`` and in the config topic itself.

Run continuously (a pass every ``trigger.interval``) or once, for a scheduled run::

    connect-state-cleanup [--once | --available-now] [--conf-file F] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from connect_state.cleanup import (
    FAILED,
    PENDING,
    SHARED_STEPS,
    STEP_ACTIVE_TOPICS,
    STEP_OFFSETS,
    Deletion,
    DeletionHook,
    Lifecycle,
    StepOutcome,
    StepResult,
    deletions_from_events,
    hook_action,
    hook_step,
    interval_seconds,
    is_due,
    live_statuses,
    load_deletion_hooks,
    plan_steps,
    planned_outcome,
    run_due_steps,
    shared_cleanup_blocker,
    sink_group_id,
    source_offsets_topics,
)
from connect_state.errors import ConnectStateError, KafkaWriteError, RecordFormatError
from connect_state.folds.connector_states import CREATED, DELETED, SINK
from connect_state.formats.config import CONNECTOR_PREFIX, parse_config_record
from connect_state.formats.offsets import parse_offset_key
from connect_state.formats.status import TOPIC_STATUS_SEPARATOR, TopicStatusKey, parse_status_key, topic_status_key
from connect_state.kafka_writer import InternalTopicWriter
from connect_state.plugins import PluginError
from connect_state.settings import Settings, add_config_arguments, settings_from_args
from connect_state.spark.delta_io import ensure_table
from connect_state.spark.kafka_source import read_topic_batch
from connect_state.spark.session import build_session
from connect_state.spark.streaming import restore_signals, stop_on_signals
from connect_state.tables import ACTIVE_TOPICS, CONNECTOR_DELETIONS, CONNECTOR_EVENTS, CONNECTORS, SOURCE_OFFSETS

JOB_NAME = "cleanup"
CLIENT_ID = "connect-state-cleanup"
log = logging.getLogger(f"connect_state.jobs.{JOB_NAME}")

GroupAdminFactory = Callable[[Settings], Any]
"""``settings -> admin`` with ``delete_group(group_id) -> bool`` (True: deleted, False: there was no such group)."""


def default_group_admin(settings: Settings) -> Any:
    """:class:`connect_state.kafka_admin.ConsumerGroupAdmin` (imported when a sink's group is first deleted)."""
    from connect_state.kafka_admin import ConsumerGroupAdmin

    return ConsumerGroupAdmin(settings)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _timestamp(ms: int | None) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, tz=UTC) if ms is not None else None


def _ms(value: datetime | None) -> int | None:
    return int(value.timestamp() * 1000) if value is not None else None


def _step_order(step: str) -> tuple[int, str]:
    return (SHARED_STEPS.index(step), "") if step in SHARED_STEPS else (len(SHARED_STEPS), step)


@dataclass
class PassSummary:
    """What one pass did, for the log."""

    deletions: int = 0
    planned: int = 0
    ran: int = 0
    succeeded: int = 0
    failed: int = 0
    waiting: int = 0
    skipped: int = 0

    def count(self, status: str) -> None:
        """Count a step that ran and ended with ``status``."""
        self.ran += 1
        name = "waiting" if status == PENDING else status
        setattr(self, name, getattr(self, name) + 1)

    def __str__(self) -> str:
        return (
            f"{self.deletions} deletions, {self.planned} newly planned; {self.ran} steps run: {self.succeeded} "
            f"succeeded, {self.failed} failed, {self.waiting} waiting, {self.skipped} skipped"
        )


class CleanupJob:
    """One reconcile pass at a time (:meth:`run_pass`) over the deletions of ``connector_events``.

    ``writer`` sends tombstones (default: an :class:`~connect_state.kafka_writer.InternalTopicWriter` created on first
    use and closed by :meth:`close`); ``group_admin_factory`` gives the consumer-group admin for sinks; ``clock``
    returns epoch ms.
    """

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        hooks: Mapping[str, DeletionHook],
        *,
        writer: Any | None = None,
        group_admin_factory: GroupAdminFactory = default_group_admin,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.hooks = dict(hooks)
        self._writer = writer
        self._owns_writer = writer is None
        self.group_admin_factory = group_admin_factory
        self.clock = clock
        self._schema = StructType.fromDDL(CONNECTOR_DELETIONS.ddl)
        self._pass_cache: dict[str, Any] = {}

    # --- resources -----------------------------------------------------------------------------------------------

    @property
    def writer(self) -> Any:
        if self._writer is None:
            self._writer = InternalTopicWriter(self.settings, client_id=CLIENT_ID)
        return self._writer

    def close(self) -> None:
        if self._owns_writer and self._writer is not None:
            self._writer.close()
            self._writer = None

    def _path(self, spec: Any) -> str:
        return str(self.settings.table_path(spec.name))

    def _table(self, spec: Any):  # -> DataFrame | None
        path = self._path(spec)
        if not DeltaTable.isDeltaTable(self.spark, path):
            return None
        return self.spark.read.format("delta").load(path)

    # --- one pass ------------------------------------------------------------------------------------------------

    def run_pass(self) -> PassSummary:
        """Plan new deletions, run the due steps, record every outcome."""
        self._pass_cache = {}
        summary = PassSummary()
        ensure_table(self.spark, self.settings.delta_root, CONNECTOR_DELETIONS)
        events = self._table(CONNECTOR_EVENTS)
        if events is None:
            log.info("no %s table yet: run connect-state-connector-states first", CONNECTOR_EVENTS.name)
            return summary
        rows = (
            events.filter(F.col("event").isin(CREATED, DELETED) & (F.col("source") == "config"))
            .select(
                "connector",
                "event",
                "details",
                "source",
                "kafka_offset",
                F.unix_millis("kafka_timestamp").alias("kafka_timestamp"),
            )
            .collect()
        )
        deletions, lifecycles = deletions_from_events(row.asDict() for row in rows)
        self._pass_cache["lifecycles"] = lifecycles
        summary.deletions = len(deletions)
        known = self._read_outcomes()
        now = self.clock()
        planned_rows: list[tuple[Deletion, StepOutcome]] = []
        for deletion in deletions:
            if deletion.key in known:
                continue
            plan = plan_steps(
                deletion, list(self.hooks), self.settings.cleanup_offsets_on_delete, lifecycles.get(deletion.connector)
            )
            outcomes = {p.step: planned_outcome(p, now) for p in plan}
            known[deletion.key] = outcomes
            planned_rows.extend((deletion, outcome) for outcome in outcomes.values())
            log.info(
                "deletion of %s at config offset %d: steps %s",
                deletion.connector,
                deletion.deletion_offset,
                ", ".join(f"{o.step}={o.status}" for o in outcomes.values()),
            )
        if planned_rows:
            self._merge(planned_rows, insert_only=True)
            summary.planned = len({d.key for d, _ in planned_rows})
        for deletion in deletions:
            outcomes = dict(sorted(known[deletion.key].items(), key=lambda item: _step_order(item[0])))
            if not any(is_due(o, self.clock()) for o in outcomes.values()):
                continue
            new = run_due_steps(
                outcomes,
                self._actions(deletion),
                lambda outcome, d=deletion: self._record(d, outcome),
                self.clock,
                self.settings.cleanup_retry_backoff_ms,
                self.settings.cleanup_retry_backoff_max_ms,
            )
            for outcome in new:
                summary.count(outcome.status)
        return summary

    # --- the table -----------------------------------------------------------------------------------------------

    def _read_outcomes(self) -> dict[tuple[str, int], dict[str, StepOutcome]]:
        table = self._table(CONNECTOR_DELETIONS)
        known: dict[tuple[str, int], dict[str, StepOutcome]] = {}
        if table is None:
            return known
        for row in table.collect():
            outcome = StepOutcome(
                row.step,
                row.status,
                row.attempts or 0,
                row.detail,
                row.error,
                _ms(row.next_attempt_at),
                _ms(row.updated_at),
            )
            known.setdefault((row.connector, row.deletion_offset), {})[row.step] = outcome
        return known

    def _record(self, deletion: Deletion, outcome: StepOutcome) -> None:
        log_level = logging.WARNING if outcome.status == FAILED else logging.INFO
        log.log(
            log_level,
            "deletion of %s at config offset %d: %s %s (attempt %d)%s%s",
            deletion.connector,
            deletion.deletion_offset,
            outcome.step,
            outcome.status,
            outcome.attempts,
            f": {outcome.detail}" if outcome.detail else "",
            f"; error: {outcome.error}" if outcome.error else "",
        )
        self._merge([(deletion, outcome)], insert_only=False)

    def _merge(self, rows: Iterable[tuple[Deletion, StepOutcome]], insert_only: bool) -> None:
        data = [
            (
                d.connector,
                d.deletion_offset,
                _timestamp(d.deleted_at),
                d.connector_type,
                json.dumps(d.config, sort_keys=True, separators=(",", ":")) if d.config is not None else None,
                o.step,
                o.status,
                o.attempts,
                o.detail,
                o.error,
                _timestamp(o.next_attempt_at),
                _timestamp(o.updated_at if o.updated_at is not None else self.clock()),
            )
            for d, o in rows
        ]
        source = self.spark.createDataFrame(data, self._schema)
        condition = " AND ".join(f"t.{k} = s.{k}" for k in CONNECTOR_DELETIONS.key)
        merge = (
            DeltaTable.forPath(self.spark, self._path(CONNECTOR_DELETIONS))
            .alias("t")
            .merge(source.alias("s"), condition)
        )
        if not insert_only:
            merge = merge.whenMatchedUpdateAll()
        merge.whenNotMatchedInsertAll().execute()

    # --- steps ---------------------------------------------------------------------------------------------------

    def _actions(self, deletion: Deletion) -> dict[str, Callable[[], StepResult]]:
        return {
            STEP_ACTIVE_TOPICS: lambda: self._shared(deletion, self._reset_active_topics),
            STEP_OFFSETS: lambda: self._shared(deletion, self._clean_offsets),
            **{hook_step(name): hook_action(hook, deletion) for name, hook in self.hooks.items()},
        }

    def _shared(self, deletion: Deletion, action: Callable[[Deletion], StepResult]) -> StepResult:
        """Run a step on the name's shared resources, unless the name was recreated (skip) or the deleted
        connector's tasks may still be writing (wait)."""
        lifecycles: dict[str, Lifecycle] = self._pass_cache.get("lifecycles", {})
        lifecycle = lifecycles.get(deletion.connector, Lifecycle())
        lifecycle = lifecycle.with_created(self._topic_creations().get(deletion.connector, ()))
        blocker = shared_cleanup_blocker(deletion, lifecycle)
        if blocker is not None:
            return StepResult.skipped(blocker)
        row = self._connector_row(deletion.connector)
        if row is not None and not row.get("deleted") and (row.get("config_offset") or -1) > deletion.deletion_offset:
            return StepResult.skipped(f"connector recreated at config offset {row['config_offset']}")
        live = live_statuses(row)
        if live:
            return StepResult.waiting(f"waiting for the deleted connector's tasks to stop ({', '.join(live)})")
        return action(deletion)

    def _topic_creations(self) -> dict[str, list[int]]:
        """Per name, the config-topic offsets of its live ``connector-<name>`` records (read once per pass)."""
        if "creations" not in self._pass_cache:
            rows = (
                read_topic_batch(self.spark, self.settings, self.settings.config_storage_topic)
                .filter(F.col("key").cast("string").startswith(CONNECTOR_PREFIX))
                .select("key", "value", "offset")
                .collect()
            )
            creations: dict[str, list[int]] = {}
            for row in rows:
                try:
                    record = parse_config_record(bytes(row.key), bytes(row.value) if row.value is not None else None)
                except RecordFormatError:
                    continue
                if record.value is not None:
                    creations.setdefault(record.key.connector, []).append(int(row.offset))  # type: ignore[union-attr]
            self._pass_cache["creations"] = creations
        return self._pass_cache["creations"]

    def _connector_row(self, name: str) -> dict[str, Any] | None:
        table = self._table(CONNECTORS)
        if table is None:
            return None
        rows = table.filter(F.col("name") == name).collect()
        return rows[0].asDict(recursive=True) if rows else None

    def _live_keys(self, topic: str, key_filter: Column | None) -> list[bytes]:
        """The keys of ``topic`` whose latest record is not a tombstone, among those ``key_filter`` keeps."""
        frame = read_topic_batch(self.spark, self.settings, topic).filter(F.col("key").isNotNull())
        if key_filter is not None:
            frame = frame.filter(key_filter)
        latest = frame.groupBy("partition", "key").agg(F.max_by(F.col("value").isNull(), F.col("offset")).alias("gone"))
        return [bytes(row.key) for row in latest.filter(~F.col("gone")).select("key").collect()]

    def _reset_active_topics(self, deletion: Deletion) -> StepResult:
        """Tombstones for every ``status-topic-<topic>:connector-<name>`` key the table or the status topic shows."""
        name, topic = deletion.connector, self.settings.status_storage_topic
        keys: set[bytes] = set()
        table = self._table(ACTIVE_TOPICS)
        if table is not None:
            for row in table.filter(F.col("connector") == name).select("topic").collect():
                keys.add(topic_status_key(row.topic, name).encode("utf-8"))
        suffix = TOPIC_STATUS_SEPARATOR + name
        for key in self._live_keys(topic, F.col("key").cast("string").endswith(suffix)):
            try:
                parsed = parse_status_key(key)
            except RecordFormatError:
                continue
            if isinstance(parsed, TopicStatusKey) and parsed.connector == name:
                keys.add(key)
        if not keys:
            return StepResult.succeeded("no active topics")
        self.writer.send(topic, [(key, None) for key in sorted(keys)], self.settings.api_kafka_write_timeout_ms)
        return StepResult.succeeded(f"{len(keys)} topic-status tombstones written to {topic}")

    def _clean_offsets(self, deletion: Deletion) -> StepResult:
        if deletion.connector_type == SINK:
            return self._delete_group(deletion)
        return self._tombstone_source_offsets(deletion)

    def _delete_group(self, deletion: Deletion) -> StepResult:
        group = sink_group_id(deletion.connector, deletion.config)
        admin = self.group_admin_factory(self.settings)
        try:
            deleted = admin.delete_group(group)
        finally:
            close = getattr(admin, "close", None)
            if callable(close):
                close()
        return StepResult.succeeded(f"consumer group {group} {'deleted' if deleted else 'did not exist'}")

    def _tombstone_source_offsets(self, deletion: Deletion) -> StepResult:
        """Tombstones with the exact key bytes of every live offsets-topic key of the connector's namespace."""
        name = deletion.connector
        targets: dict[str, set[bytes]] = {}
        table = self._table(SOURCE_OFFSETS)
        if table is not None:
            for row in table.filter(F.col("connector") == name).select("offsets_topic", "key").collect():
                targets.setdefault(row.offsets_topic, set()).add(bytes(row.key))
        coarse = (
            F.col("key").cast("string").contains(name)
            if name.isascii() and name.isprintable() and '"' not in name and "\\" not in name
            else None
        )
        for topic in source_offsets_topics(self.settings.offset_storage_topic, deletion.config):
            if topic != self.settings.offset_storage_topic and not self._topic_exists(topic):
                continue
            for key in self._live_keys(topic, coarse):
                try:
                    parsed = parse_offset_key(key)
                except RecordFormatError:
                    continue
                if parsed.connector == name:
                    targets.setdefault(topic, set()).add(key)
        written = []
        for topic, keys in sorted(targets.items()):
            if keys:
                self.writer.send(topic, [(key, None) for key in sorted(keys)], self.settings.api_kafka_write_timeout_ms)
                written.append(f"{len(keys)} to {topic}")
        if not written:
            return StepResult.succeeded("no source offsets")
        return StepResult.succeeded("source-offset tombstones written: " + ", ".join(written))

    def _topic_exists(self, topic: str) -> bool:
        try:
            self.writer.partition_count(topic)
        except KafkaWriteError as err:
            if "does not exist" in str(err):
                return False
            raise
        return True


# ---------------------------------------------------------------------------------------------------------------------
# Console script
# ---------------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="connect-state-cleanup", description=__doc__.split("\n\n")[0])
    parser.add_argument("--once", action="store_true", help="one pass, then exit (for scheduled runs)")
    parser.add_argument("--available-now", dest="once", action="store_true", help="alias of --once")
    add_config_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = settings_from_args(args)
        hooks = load_deletion_hooks(settings.cleanup_hooks)
        interval = interval_seconds(settings.trigger_interval)
    except (PluginError, ConnectStateError) as err:
        log.error("%s", err)
        return 2
    log.info("deletion hooks: %s", ", ".join(hooks) or "none")
    spark = build_session(f"connect-state-{JOB_NAME}", settings.spark_master)
    return run_cleanup(spark, settings, hooks, interval, once=args.once)


def run_cleanup(
    spark: SparkSession,
    settings: Settings,
    hooks: Mapping[str, DeletionHook],
    interval_s: float,
    *,
    once: bool = False,
    stop: threading.Event | None = None,
) -> int:
    """Cleanup passes every ``interval_s`` until SIGINT/SIGTERM (or ``stop`` is set: then the caller handles signals),
    or a single pass with ``once``. Returns 0, or 1 when the single pass failed."""
    job = CleanupJob(spark, settings, hooks)
    stop_requested = stop if stop is not None else threading.Event()
    previous = stop_on_signals(stop_requested, "after the current cleanup pass") if stop is None else {}
    try:
        while not stop_requested.is_set():
            try:
                log.info("pass: %s", job.run_pass())
            except Exception:
                log.exception("cleanup pass failed")
                if once:
                    return 1
            if once:
                return 0
            stop_requested.wait(interval_s)
        return 0
    finally:
        restore_signals(previous)
        job.close()


if __name__ == "__main__":
    raise SystemExit(main())
