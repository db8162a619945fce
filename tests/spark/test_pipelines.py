"""Each feature's Spark pipeline without a broker, in the style of Spark's own streaming tests.

Kafka-shaped rows (key, value, topic, partition, offset, timestamp) arrive through a file stream, one Parquet file per
micro-batch; the pipeline's parse step and ``applyInPandasWithState`` fold run over them and its ``foreachBatch`` writer
writes the Delta tables under ``tmp_path``. Every run is a bounded ``AvailableNow`` run; a second run over the same
checkpoint continues from the fold's state, as a restarted job does.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from connect_state.cleanup.reconciler import Deletion, StepOutcome, StepStatus
from connect_state.connect.filestream import FILE_SOURCE_CLASS
from connect_state.core.settings import Settings, load_settings
from connect_state.formats.config import (
    connector_config_key,
    serialize_connector_config,
    serialize_target_state,
    target_state_key,
)
from connect_state.formats.consumer_offsets import (
    OffsetCommitValue,
    serialize_offset_commit_key,
    serialize_offset_commit_value,
)
from connect_state.formats.offsets import offset_key_bytes, serialize_offset_value
from connect_state.formats.status import (
    Status,
    TopicStatus,
    connector_status_key,
    serialize_status,
    serialize_topic_status,
    topic_status_key,
)
from connect_state.heartbeats.emitter import HeartbeatEmitter
from connect_state.heartbeats.fold import HeartbeatDefaults
from connect_state.heartbeats.provider import HeartbeatRecord
from connect_state.kafka import RecordPosition
from connect_state.security.guards import Guards
from connect_state.spark import active_topics, connector_states, heartbeats, sink_offsets, source_offsets
from connect_state.spark.cleanup import SparkCleanupIO
from connect_state.spark.delta_io import table_exists
from connect_state.spark.foldjob import FoldSpec, FoldWriter, start_fold_query
from connect_state.tables.schemas import (
    ACTIVE_TOPICS,
    ACTIVE_TOPICS_HISTORY,
    CONNECTOR_DELETIONS,
    CONNECTOR_EVENTS,
    CONNECTORS,
    HEARTBEATS,
    REJECTED_RECORDS,
    SINK_OFFSETS,
    SINK_OFFSETS_HISTORY,
    SOURCE_OFFSETS,
    SOURCE_OFFSETS_HISTORY,
    SOURCE_PARTITION_ACTIVITY,
)
from tests.fixtures.spark import await_query
from tests.unit.helpers import WRITE_TIME_COLUMNS, write_table

pytestmark = pytest.mark.spark

KAFKA_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
    ]
)
KAFKA_DDL = "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP"
T0 = 1_700_000_000_000  # epoch ms of the first record


@dataclass
class KafkaTopics:
    """Kafka-shaped rows as a file stream: :meth:`batch` writes one Parquet file, read as one micro-batch. Offsets
    count per topic partition, as Kafka's do."""

    spark: SparkSession
    folder: Path
    _offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    _files: itertools.count = field(default_factory=itertools.count)

    def batch(
        self, records: Iterable[tuple[str, bytes | None, bytes | None]], partition: int = 0, ts: int = T0
    ) -> None:
        rows = []
        for topic, key, value in records:
            offset = self._offsets.get((topic, partition), 0)
            self._offsets[(topic, partition)] = offset + 1
            rows.append((key, value, topic, partition, offset, ts * 1000))
        columns = list(zip(*rows, strict=True))
        table = pa.Table.from_arrays(
            [pa.array(c, f.type) for c, f in zip(columns, KAFKA_SCHEMA, strict=True)], schema=KAFKA_SCHEMA
        )
        number = next(self._files)
        path = self.folder / f"batch-{number:04d}.parquet"
        self.folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        os.utime(path, (T0 / 1000 + number, T0 / 1000 + number))  # the file source reads files in modification order

    def stream(self) -> DataFrame:
        return self.spark.readStream.schema(KAFKA_DDL).option("maxFilesPerTrigger", 1).parquet(str(self.folder))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(
        overrides={
            "delta.root": str(tmp_path / "delta"),
            "checkpoint.root": str(tmp_path / "checkpoints"),
            "history.retention.ms": "-1",  # the records are of 2023 (T0): kept (tests/spark/test_retention.py)
        },
        environ={},
    )


@pytest.fixture
def topics(spark: SparkSession, tmp_path: Path) -> KafkaTopics:
    return KafkaTopics(spark, tmp_path / "kafka")


def table(spark: SparkSession, settings: Settings, name: str) -> DataFrame:
    return spark.read.format("delta").load(str(settings.delta_root / name))


@pytest.fixture
def started() -> datetime:
    return datetime.now(UTC) - timedelta(seconds=1)


def assert_write_times(spark: SparkSession, settings: Settings, since: datetime, *names: str) -> None:
    """Every row of the tables ``names`` has each of its write-time columns set, no earlier than ``since``."""
    for name in names:
        rows = table(spark, settings, name)
        for column in set(WRITE_TIME_COLUMNS) & set(rows.columns):
            stale = rows.where(F.col(column).isNull() | (F.col(column) < F.lit(since))).count()
            assert (name, column, stale) == (name, column, 0)
        assert rows.count() > 0, name


def rejected_reasons(spark: SparkSession, settings: Settings) -> list[str]:
    return [row.reason for row in table(spark, settings, REJECTED_RECORDS.name).collect()]


# --- active topics --------------------------------------------------------------------------------------------------


def run_fold(
    spark: SparkSession, settings: Settings, topics: KafkaTopics, fold: FoldSpec, writer: FoldWriter | None = None
) -> None:
    """``fold`` over the test's topics (its writer by default) until caught up, without a reconciler (no broker)."""
    writer = writer or FoldWriter(settings.delta_root, settings.checkpoint_path(fold.name), fold)
    query = start_fold_query(
        spark, settings, fold.name, fold.fold_stream(topics.stream()), writer, (fold.current, fold.history),
        (fold.current,), available_now=True,
    )  # fmt: skip
    await_query(query)


def run_active_topics(spark: SparkSession, settings: Settings, topics: KafkaTopics) -> None:
    run_fold(spark, settings, topics, active_topics.fold_spec(settings))


def topic_record(connector: str, topic: str, task: int = 0) -> tuple[str, bytes, bytes]:
    value = serialize_topic_status(TopicStatus(topic, connector, task, T0))
    return ("connect-status", topic_status_key(topic, connector).encode(), value)


def test_active_topics_pipeline(spark, settings, topics, started):
    topics.batch([topic_record("c", "t1"), topic_record("c", "t2", 1), topic_record("d", "t1")])
    topics.batch(
        [("connect-status", topic_status_key("t1", "c").encode(), None), ("connect-status", b"status-x", b"?")]
    )
    run_active_topics(spark, settings, topics)

    expected = spark.createDataFrame([("c", "t2", 1), ("d", "t1", 0)], "connector STRING, topic STRING, task INT")
    current = table(spark, settings, ACTIVE_TOPICS.name).select("connector", "topic", "task")
    assert_df_equality(current, expected, ignore_row_order=True, ignore_nullable=True)
    history = table(spark, settings, ACTIVE_TOPICS_HISTORY.name)
    assert sorted((r.connector, r.topic, r.change) for r in history.collect()) == [
        ("c", "t1", "added"),
        ("c", "t1", "removed"),
        ("c", "t2", "added"),
        ("d", "t1", "added"),
    ]
    assert len(rejected_reasons(spark, settings)) == 1

    # A restart from the checkpoint continues from the fold's state.
    topics.batch([topic_record("c", "t3")])
    run_active_topics(spark, settings, topics)
    current = table(spark, settings, ACTIVE_TOPICS.name).where("connector = 'c'").select("topic")
    assert sorted(r.topic for r in current.collect()) == ["t2", "t3"]
    assert table(spark, settings, ACTIVE_TOPICS_HISTORY.name).count() == 5
    assert_write_times(spark, settings, started, ACTIVE_TOPICS.name, ACTIVE_TOPICS_HISTORY.name, REJECTED_RECORDS.name)


def test_a_deleted_connectors_active_topics_are_read_as_they_were_at_its_deletion(spark, settings, topics):
    """KIP-883's hook context: the topics in use at a time, from active_topics_history, whatever Connect wrote
    after it (the reset that follows a deletion). A topic whose last change was an update is still in use."""
    topics.batch([topic_record("c", "t1"), topic_record("c", "t2"), topic_record("d", "t3")], ts=T0)
    topics.batch([topic_record("c", "t2", task=1)], ts=T0 + 10)  # reassigned: "updated"
    reset = [("connect-status", topic_status_key(t, "c").encode(), None) for t in ("t1", "t2")]
    topics.batch(reset, ts=T0 + 20)
    run_active_topics(spark, settings, topics)
    changes = table(spark, settings, ACTIVE_TOPICS_HISTORY.name).where("connector = 'c' AND topic = 't2'")
    assert sorted(r.change for r in changes.collect()) == ["added", "removed", "updated"]

    io = SparkCleanupIO(spark, settings, writer=object(), clock=lambda: T0)
    assert io.active_topics("c") == []  # reset
    assert io.active_topics_at("c", T0 - 1) == []
    assert io.active_topics_at("c", T0) == ["t1", "t2"]
    assert io.active_topics_at("c", T0 + 15) == ["t1", "t2"]
    assert io.active_topics_at("c", T0 + 20) == []
    assert io.active_topics_at("d", T0 + 20) == ["t3"]


# --- connector states -----------------------------------------------------------------------------------------------

SOURCE_CONFIG = {"connector.class": FILE_SOURCE_CLASS, "file": "/data/in.txt", "topic": "lines", "tasks.max": "1"}


def config_record(connector: str, config: dict[str, str] | None) -> tuple[str, bytes, bytes | None]:
    value = serialize_connector_config(config) if config is not None else None
    return ("connect-configs", connector_config_key(connector).encode(), value)


def target_state_record(connector: str, state: str) -> tuple[str, bytes, bytes]:
    return ("connect-configs", target_state_key(connector).encode(), serialize_target_state(state))


def status_record(connector: str, state: str) -> tuple[str, bytes, bytes | None]:
    return (
        "connect-status",
        connector_status_key(connector).encode(),
        serialize_status(Status(state, None, "w:8083", 1)),
    )


def run_connector_states(spark: SparkSession, settings: Settings, topics: KafkaTopics) -> None:
    assert settings.config_storage_topic == "connect-configs"
    run_fold(spark, settings, topics, connector_states.fold_spec(settings))


def test_connector_states_pipeline(spark, settings, topics, started):
    topics.batch([config_record("src", SOURCE_CONFIG), target_state_record("src", "STARTED")])
    topics.batch([status_record("src", "RUNNING"), ("connect-configs", b"connector-bad", b"not json")])
    run_connector_states(spark, settings, topics)

    (row,) = table(spark, settings, CONNECTORS.name).collect()
    assert (row.name, row.type, row.connector_state, row.target_state, row.deleted) == (
        "src",
        "source",
        "RUNNING",
        "STARTED",
        False,
    )
    events = {r.event for r in table(spark, settings, CONNECTOR_EVENTS.name).collect()}
    assert "created" in events
    assert len(rejected_reasons(spark, settings)) == 1

    topics.batch([config_record("src", None)])
    run_connector_states(spark, settings, topics)
    (row,) = table(spark, settings, CONNECTORS.name).collect()
    assert row.deleted is True
    assert "deleted" in {r.event for r in table(spark, settings, CONNECTOR_EVENTS.name).collect()}
    assert_write_times(spark, settings, started, CONNECTORS.name, CONNECTOR_EVENTS.name, REJECTED_RECORDS.name)


# --- offsets ----------------------------------------------------------------------------------------------------------


def offset_record(
    connector: str, position: int | None, topic: str = "connect-offsets"
) -> tuple[str, bytes, bytes | None]:
    value = serialize_offset_value({"position": position}) if position is not None else None
    return (topic, offset_key_bytes(connector, {"filename": f"/{connector}.txt"}), value)


def run_source_offsets(spark: SparkSession, settings: Settings, topics: KafkaTopics) -> None:
    writer = source_offsets.SourceOffsetsWriter(settings, ["connect-offsets"], watch_topics=False)
    run_fold(spark, settings, topics, source_offsets.fold_spec(settings), writer)


def test_source_offsets_pipeline(spark, settings, topics, started):
    topics.batch([offset_record("a", 1), offset_record("b", 5), offset_record("a", 2)])
    topics.batch([offset_record("b", None), ("connect-offsets", b'["only-a-name"]', b"{}")])
    topics.batch([offset_record("own", 7, topic="own-offsets")])
    run_source_offsets(spark, settings, topics)

    current = table(spark, settings, SOURCE_OFFSETS.name).select("connector", "offsets_topic", "offset")
    expected = spark.createDataFrame(
        [("a", "connect-offsets", '{"position":2}'), ("own", "own-offsets", '{"position":7}')],
        "connector STRING, offsets_topic STRING, offset STRING",
    )
    assert_df_equality(current, expected, ignore_row_order=True, ignore_nullable=True)
    assert table(spark, settings, SOURCE_OFFSETS_HISTORY.name).count() == 5
    (reason,) = rejected_reasons(spark, settings)
    assert reason.startswith("Ignoring offset partition key")
    assert_write_times(spark, settings, started, SOURCE_OFFSETS.name, SOURCE_OFFSETS_HISTORY.name)


def commit_record(group: str, partition: int, offset: int | None) -> tuple[str, bytes, bytes | None]:
    value = serialize_offset_commit_value(OffsetCommitValue(offset, "", T0)) if offset is not None else None
    return ("__consumer_offsets", serialize_offset_commit_key(group, "t", partition), value)


def run_sink_offsets(spark: SparkSession, settings: Settings, topics: KafkaTopics) -> None:
    run_fold(spark, settings, topics, sink_offsets.fold_spec(settings))


def test_sink_offsets_pipeline(spark, settings, topics, started):
    topics.batch([commit_record("connect-s", 0, 4), commit_record("connect-s", 1, 2), commit_record("g", 0, 1)])
    topics.batch([commit_record("connect-s", 1, 3), commit_record("g", 0, None), ("__consumer_offsets", b"\x00", b"")])
    run_sink_offsets(spark, settings, topics)

    current = table(spark, settings, SINK_OFFSETS.name).select("group_id", "topic", "partition", "offset")
    expected = spark.createDataFrame(
        [("connect-s", "t", 0, 4), ("connect-s", "t", 1, 3)],
        "group_id STRING, topic STRING, partition INT, offset BIGINT",
    )
    assert_df_equality(current, expected, ignore_row_order=True, ignore_nullable=True)
    history = table(spark, settings, SINK_OFFSETS_HISTORY.name)
    assert sorted(r.change for r in history.collect()) == ["removed", "set", "set", "set", "set"]
    assert len(rejected_reasons(spark, settings)) == 1
    assert_write_times(spark, settings, started, SINK_OFFSETS.name, SINK_OFFSETS_HISTORY.name)


# --- heartbeats -------------------------------------------------------------------------------------------------------


class FakeSender:
    """The emitter's Kafka writers: record what is sent, acknowledge at increasing offsets."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list]] = []

    def ensure_topic(self, topic: str) -> None:
        return None

    def send_messages(self, topic: str, messages, timeout_ms: int | None = None) -> list[RecordPosition]:
        self.sent.append((topic, list(messages)))
        return [RecordPosition(topic, 0, index) for index in range(len(messages))]

    def send(self, topic: str, records, timeout_ms: int | None = None) -> list[RecordPosition]:
        return self.send_messages(topic, records, timeout_ms)


class IdleProvider:
    def produce_heartbeat_records(self, connector, config, partition, last_offset):
        return [HeartbeatRecord(key=connector, value="idle", source_offset=dict(last_offset))]


def test_heartbeats_pipeline(spark, settings, topics):
    settings = settings.with_overrides(**{"heartbeat.interval.ms": "60000"})
    old = T0 - 3_600_000  # the offset last moved an hour before now: due at once
    topics.batch([config_record("src", SOURCE_CONFIG), target_state_record("src", "STARTED")], ts=old)
    topics.batch([status_record("src", "RUNNING"), offset_record("src", 10)], ts=old)
    sender = FakeSender()
    emitter = HeartbeatEmitter(
        {FILE_SOURCE_CLASS: IdleProvider()},
        sender,
        sender,
        settings.offset_storage_topic,
        guards=Guards.from_settings(settings.with_overrides(**{"heartbeat.topics.create": "true"})),
    )
    sink = heartbeats.HeartbeatSink(settings, emitter=emitter)
    defaults = HeartbeatDefaults(settings.heartbeat_interval_ms, settings.heartbeat_records_topic)
    scheduler = heartbeats.HeartbeatScheduler(settings, sink, defaults)
    assert scheduler.rebuild(spark) == 0  # no checkpoint yet

    def run_query() -> None:
        folded = heartbeats.fold_stream(topics.stream(), settings, defaults)
        writer = heartbeats.HeartbeatsWriter(settings, scheduler)
        query = start_fold_query(
            spark, settings, heartbeats.JOB_NAME, folded, writer, (SOURCE_PARTITION_ACTIVITY, HEARTBEATS),
            (SOURCE_PARTITION_ACTIVITY,), available_now=True, checkpoint_name=heartbeats.CHECKPOINT_NAME,
        )  # fmt: skip
        await_query(query)  # no timeouts: an AvailableNow query ends

    run_query()
    assert table(spark, settings, HEARTBEATS.name).count() == 0  # the fold sends nothing
    (emitted,) = scheduler.tick(spark)  # the timer does: due an hour ago
    assert (emitted.connector, emitted.outcome) == ("src", "produced")

    (activity,) = table(spark, settings, SOURCE_PARTITION_ACTIVITY.name).collect()
    assert (activity.connector, activity.eligible, activity.offset) == ("src", True, '{"position":10}')
    assert activity.last_heartbeat_at is not None
    (beat,) = table(spark, settings, HEARTBEATS.name).collect()
    assert (beat.connector, beat.outcome, beat.record_value) == ("src", "produced", b"idle")
    assert [topic for topic, _ in sender.sent] == [settings.heartbeat_records_topic, settings.offset_storage_topic]
    assert scheduler.tick(spark) == []  # not due again for an interval

    # A new scheduler (the job started again) rebuilds the schedule from the checkpoint's state and the recorded
    # heartbeat: due one interval after it, without a record of the connector in between.
    rebuilt = heartbeats.HeartbeatScheduler(settings, sink, defaults)
    assert rebuilt.rebuild(spark) == 1
    sent_at = (
        table(spark, settings, SOURCE_PARTITION_ACTIVITY.name).select(F.unix_millis("last_heartbeat_at")).first()[0]
    )
    assert rebuilt.schedule.next_due() == sent_at + 60_000
    assert rebuilt.tick(spark) == []

    # A record that makes the connector ineligible (paused) reaches the schedule through the writer.
    topics.batch([target_state_record("src", "PAUSED")], ts=T0)
    run_query()
    assert "src" in scheduler.schedule and scheduler.schedule.next_due() is None  # kept, not due


# --- cleanup: the Delta side of its I/O -------------------------------------------------------------------------------


def test_cleanup_outcomes_round_trip_through_delta(spark, settings):
    io = SparkCleanupIO(spark, settings, writer=object(), clock=lambda: T0)
    io.begin_pass()
    assert io.deletion_events() is None and io.read_outcomes() == {}
    deletion = Deletion("c", 12, T0, "source", {"connector.class": FILE_SOURCE_CLASS})
    pending = StepOutcome("offsets", StepStatus.PENDING, 0, None, None, T0, T0)
    io.record_outcomes([(deletion, pending)], insert_only=True)
    done = StepOutcome("offsets", StepStatus.SUCCEEDED, 1, "no source offsets", None, None, T0 + 1)
    io.record_outcomes([(deletion, done)], insert_only=True)  # insert-only: the planned row stays
    assert io.read_outcomes() == {("c", 12): {"offsets": pending}}
    io.record_outcomes([(deletion, done)], insert_only=False)
    assert io.read_outcomes() == {("c", 12): {"offsets": done}}
    (row,) = table(spark, settings, CONNECTOR_DELETIONS.name).collect()
    assert (row.status, row.connector_type, row.config) == (
        "succeeded",
        "source",
        f'{{"connector.class":"{FILE_SOURCE_CLASS}"}}',
    )
    assert io.connector_row("c") is None and io.active_topics("c") == [] and io.source_offsets_keys("c") == []


def test_a_table_seen_while_another_driver_created_it_is_read_once_committed(spark, settings):
    """The cleanup job looks at ``connector_events`` while ``connect-state-connector-states``, another driver, creates
    it: a ``_delta_log`` without a commit yet. Once the commit lands, the next pass reads the table. (Delta's cached
    log of that look said "no table" for as long as the driver ran: the cleanup never ran.)"""
    io = SparkCleanupIO(spark, settings, writer=object(), clock=lambda: T0)
    path = Path(str(settings.delta_root)) / CONNECTOR_EVENTS.name
    (path / "_delta_log").mkdir(parents=True)
    assert not table_exists(spark, str(path)) and io.deletion_events() is None
    assert not DeltaTable.isDeltaTable(spark, str(path))  # Delta now caches the table's log without a commit
    event = {"connector": "c", "event": "deleted", "source": "config", "kafka_partition": 0, "kafka_offset": 7}
    write_table(str(settings.delta_root), CONNECTOR_EVENTS, [event])  # the other driver's commit (delta-rs here)
    assert table_exists(spark, str(path))
    events = io.deletion_events() or []
    assert [(e["connector"], e["event"], e["kafka_offset"]) for e in events] == [("c", "deleted", 7)]
