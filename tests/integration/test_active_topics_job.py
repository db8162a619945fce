"""The active-topics job on its own topics of the real broker: rejected records, restarts, idempotent writes."""

from __future__ import annotations

import random
import time

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from connect_state.folds.active_topics import TopicRecord, active_topics, fold_all
from connect_state.formats.status import (
    Status,
    TopicStatus,
    TopicStatusKey,
    parse_status_record,
    serialize_status,
    serialize_topic_status,
    topic_status_key,
)
from connect_state.spark import active_topics as job
from connect_state.spark.delta_io import ensure_table, spark_schema
from connect_state.spark.foldjob import FoldWriter
from connect_state.tables.schemas import ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, REJECTED_RECORDS
from tests.fixtures.spark import await_query
from tests.integration.helpers import (
    create_topic,
    delta_table,
    job_settings,
    produce_keyed,
    read_topic,
    run_active_topics,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]
PARTITIONS = 5


def create_status_topic(settings) -> str:
    """A fresh compacted topic shaped like connect-status (5 partitions)."""
    name = unique("status")
    create_topic(settings, name, PARTITIONS, compacted=True)
    return name


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    """Send records with a real producer, each in the partition the Java producer would pick for its key.

    (A compacted topic refuses records without a key, so null keys never reach a status topic.)"""
    produce_keyed(bootstrap, topic, records, PARTITIONS)


def read_back(bootstrap: str, topic: str) -> list[TopicRecord]:
    """Every topic-status record of ``topic`` as the fold's input: the reference the job must agree with."""
    out: list[TopicRecord] = []
    for msg in read_topic(bootstrap, topic):
        record = parse_status_record(msg.key, msg.value)
        if isinstance(record.key, TopicStatusKey):
            status = record.value
            out.append(
                TopicRecord(
                    record.key.connector,
                    record.key.topic,
                    status.task if status else None,
                    status.discover_timestamp if status else None,
                    msg.partition,
                    msg.offset,
                    msg.timestamp,
                )
            )
    return out


def synthetic_records(n: int, seed: int) -> list[tuple[bytes, bytes | None]]:
    """Topic-status puts and tombstones over a few connectors, plus connector statuses the job must ignore."""
    rng = random.Random(seed)
    records: list[tuple[bytes, bytes | None]] = []
    for i in range(n):
        connector, topic = f"conn-{rng.randrange(8)}", f"topic-{rng.randrange(20)}"
        key = topic_status_key(topic, connector).encode()
        roll = rng.random()
        if roll < 0.25:
            records.append((key, None))
        elif roll < 0.3:
            status = Status("RUNNING", None, "127.0.0.1:8083", 1)
            records.append((f"status-connector-{connector}".encode(), serialize_status(status)))
        else:
            value = serialize_topic_status(TopicStatus(topic, connector, rng.randrange(3), 1_700_000_000_000 + i))
            records.append((key, value))
    return records


def expected_active(spark: SparkSession, records: list[TopicRecord]):
    rows = [
        (connector, topic, entry.task, entry.discover_timestamp)
        for connector, state in fold_all(records).items()
        for topic, entry in active_topics(state).items()
    ]
    return spark.createDataFrame(rows, "connector STRING, topic STRING, task INT, discover_timestamp BIGINT")


INVALID_KEYS = [
    "status-unknown",
    "status-connector-",
    "status-task-",
    "status-task-foo-source-#",
    "status-topic-",
    "status-topic-:connector-",
    "status-topic-foo-topic:",
    "status-topic-foo-topic:connector-",
]


def test_invalid_records_are_quarantined_and_valid_ones_still_fold(spark, kafka_broker, stack_settings, tmp_path):
    bootstrap = stack_settings.bootstrap_servers
    topic = create_status_topic(stack_settings)
    settings = job_settings(stack_settings, tmp_path, **{"status.storage.topic": topic})
    good = TopicStatus("orders", "sink-a", 0, 1_746_009_337_985)
    invalid: list[tuple[bytes, bytes | None]] = [(k.encode(), b"invalid") for k in INVALID_KEYS]
    invalid += [
        (topic_status_key("payments", "sink-a").encode(), b"invalid"),  # valid key, value not JSON
        (topic_status_key("payments", "sink-a").encode(), b'{"topic":{"name":"payments"}}'),  # fields missing
        (b"status-connector-sink-a", b'{"state":"SLEEPING","trace":null,"worker_id":"w","generation":1}'),
    ]
    produce(bootstrap, topic, [(topic_status_key("orders", "sink-a").encode(), serialize_topic_status(good))])
    produce(bootstrap, topic, invalid)

    run_active_topics(spark, settings)

    rejected = delta_table(spark, settings, REJECTED_RECORDS.name)
    assert rejected.count() == len(invalid)
    assert rejected.filter("reason IS NULL OR reason = ''").count() == 0
    assert {(r.key, r.value) for r in rejected.collect()} == set(invalid)
    assert_df_equality(
        delta_table(spark, settings, ACTIVE_TOPICS.name).select("connector", "topic", "task", "discover_timestamp"),
        spark.createDataFrame(
            [("sink-a", "orders", 0, 1_746_009_337_985)],
            "connector STRING, topic STRING, task INT, discover_timestamp BIGINT",
        ),
        ignore_nullable=True,
    )

    # A second run over the same topic adds nothing: rejects are keyed by their Kafka coordinates.
    produce(bootstrap, topic, [(b"status-unknown", b"again")])
    run_active_topics(spark, settings)
    assert delta_table(spark, settings, REJECTED_RECORDS.name).count() == len(invalid) + 1


def test_restart_from_checkpoint_equals_fold_of_whole_topic(spark, kafka_broker, stack_settings, tmp_path):
    bootstrap = stack_settings.bootstrap_servers
    topic = create_status_topic(stack_settings)
    settings = job_settings(stack_settings, tmp_path, **{"status.storage.topic": topic})
    produce(bootstrap, topic, synthetic_records(3000, seed=1))

    # First run: small batches, stopped after two of them have been written.
    query = job.start(spark, settings, available_now=True, max_offsets_per_trigger=400)
    deadline = time.monotonic() + 180
    while (query.lastProgress or {}).get("batchId", -1) < 1:
        assert query.isActive, f"query ended early: {query.exception()}"
        assert time.monotonic() < deadline, "no progress within 180 s"
        time.sleep(0.5)
    query.stop()
    partial = delta_table(spark, settings, ACTIVE_TOPICS_HISTORY.name).count()
    assert partial > 0

    # More records arrive while the job is down; the restart resumes from the checkpoint.
    produce(bootstrap, topic, synthetic_records(1000, seed=2))
    await_query(job.start(spark, settings, available_now=True, max_offsets_per_trigger=1500))

    records = read_back(bootstrap, topic)
    assert_df_equality(
        delta_table(spark, settings, ACTIVE_TOPICS.name).select("connector", "topic", "task", "discover_timestamp"),
        expected_active(spark, records),
        ignore_row_order=True,
        ignore_nullable=True,
    )
    history = delta_table(spark, settings, ACTIVE_TOPICS_HISTORY.name)
    coordinates = history.select("kafka_partition", "kafka_offset")
    assert coordinates.count() == coordinates.distinct().count(), "a change was written twice"
    # Replaying the history gives the current table: nothing lost between the two runs.
    net = (
        history.withColumn("rank", F.row_number().over(_latest_first()))
        .filter("rank = 1 AND change != 'removed'")
        .select("connector", "topic", "task", "discover_timestamp")
    )
    assert_df_equality(net, expected_active(spark, records), ignore_row_order=True, ignore_nullable=True)


def _latest_first():
    from pyspark.sql import Window

    return Window.partitionBy("connector", "topic").orderBy(F.desc("kafka_partition"), F.desc("kafka_offset"))


def test_writer_replay_of_a_committed_batch_changes_nothing(spark, tmp_path, stack_settings):
    """A batch replayed after a crash (same batch id) is skipped by every table write."""
    settings = job_settings(stack_settings, tmp_path)
    for spec in (ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, REJECTED_RECORDS):
        ensure_table(spark, settings.delta_root, spec)
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"00000000-0000-0000-0000-000000000001"}\n')
    writer = FoldWriter(settings.delta_root, checkpoint, job.fold_spec(settings))
    batch = spark.createDataFrame(
        [
            ("change", "c", "t1", "added", False, 0, 10, "s", 1, 5, 100, None, None, None),
            ("change", "c", "t2", "added", True, 0, 11, "s", 2, 6, 100, None, None, None),
            ("change", "c", "t1", "removed", True, 0, 10, "s", 1, 7, 100, None, None, None),
            ("rejected", None, None, None, None, None, None, "s", 3, 8, 100, b"k", b"v", "bad"),
        ],
        spark_schema(job.OUTPUT_SCHEMA),
    )
    writer(batch, 0)
    snapshot = {
        name: delta_table(spark, settings, name).drop("updated_at", "changed_at", "seen_at").collect()
        for name in (ACTIVE_TOPICS.name, ACTIVE_TOPICS_HISTORY.name, REJECTED_RECORDS.name)
    }
    writer(batch, 0)
    for name, rows in snapshot.items():
        assert sorted(
            delta_table(spark, settings, name).drop("updated_at", "changed_at", "seen_at").collect()
        ) == sorted(rows)
    assert [(r.connector, r.topic) for r in delta_table(spark, settings, ACTIVE_TOPICS.name).collect()] == [("c", "t2")]
    assert delta_table(spark, settings, ACTIVE_TOPICS_HISTORY.name).count() == 3


def test_tables_stay_readable_by_delta_rs(spark, tmp_path, stack_settings):
    """The API reads with deltalake (no JVM): the tables must not need reader features delta-rs lacks."""
    import deltalake

    settings = job_settings(stack_settings, tmp_path)
    for spec in (ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, REJECTED_RECORDS):
        path = ensure_table(spark, settings.delta_root, spec)
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
        assert detail.minReaderVersion == 1, (spec.name, detail.minReaderVersion, detail.tableFeatures)
        assert deltalake.DeltaTable(path).to_pyarrow_table().column_names == spec.column_names
