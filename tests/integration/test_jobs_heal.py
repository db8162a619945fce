"""Jobs that heal (issue 10), on topics of their own on the real broker: a lost checkpoint, records lost to retention,
a deleted connector offsets topic, tombstones compacted away while a job was down, and the watermarks the queries
record. Every run is a bounded ``Trigger.AvailableNow`` run, or a continuous query stopped within a bound.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable

import pytest
from delta.tables import DeltaTable
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from connect_state.core.settings import Settings
from connect_state.formats.status import TopicStatus, serialize_topic_status, topic_status_key
from connect_state.spark import active_topics, sink_offsets, source_offsets
from connect_state.spark.delta_io import ensure_table, schema_of
from connect_state.spark.streaming import Backoff, Supervisor, TaskStatus
from connect_state.tables.schemas import (
    ACTIVE_TOPICS,
    ACTIVE_TOPICS_HISTORY,
    CONNECTORS,
    DATA_LOSS,
    SINK_OFFSETS,
    SOURCE_OFFSETS,
    SOURCE_OFFSETS_HISTORY,
    WATERMARKS,
)
from tests.fixtures.spark import await_query
from tests.integration.helpers import (
    api_client,
    create_topic,
    delta_table,
    job_settings,
    produce_keyed,
    run_active_topics,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]
WAIT_S = 120.0


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s:.0f} s"
        time.sleep(1)


def topic_status(connector: str, topic: str, task: int = 0) -> tuple[bytes, bytes]:
    return topic_status_key(topic, connector).encode(), serialize_topic_status(TopicStatus(topic, connector, task, 1))


def tombstone(connector: str, topic: str) -> tuple[bytes, None]:
    return topic_status_key(topic, connector).encode(), None


def offsets_record(connector: str, file: str, position: int) -> tuple[bytes, bytes]:
    return json.dumps([connector, {"filename": file}]).encode(), json.dumps({"position": position}).encode()


def delete_records(settings: Settings, topic: str, partition: int, before: int) -> None:
    """Move the partition's log start to ``before`` (``deleteRecords``), as retention does."""
    admin = KafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    try:
        admin.delete_records({TopicPartition(topic, partition): before})
    finally:
        admin.close()


def delete_topic(settings: Settings, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    try:
        admin.delete_topics([topic])
        wait_until(lambda: topic not in admin.list_topics(), f"deleting {topic}", 60)
    finally:
        admin.close()


def rows(spark: SparkSession, settings: Settings, name: str, *drop: str) -> list:
    """Every row of a table, sorted, without the columns that say when a row was written."""
    return sorted(delta_table(spark, settings, name).drop(*drop).collect(), key=repr)


def active(spark: SparkSession, settings: Settings) -> set[tuple[str, str]]:
    return {(r.connector, r.topic) for r in delta_table(spark, settings, ACTIVE_TOPICS.name).collect()}


def losses(spark: SparkSession, settings: Settings) -> list[tuple]:
    return sorted(
        (r.query, r.topic, r.partition, r.expected_offset, r.earliest_offset, r.cause)
        for r in delta_table(spark, settings, DATA_LOSS.name).collect()
    )


def watermarks(spark: SparkSession, settings: Settings, query: str) -> dict[tuple[str, int], int]:
    table = delta_table(spark, settings, WATERMARKS.name).where(F.col("query") == query)
    return {(r.topic, r.partition): r.next_offset for r in table.collect()}


def append_rows(spark: SparkSession, settings: Settings, spec, values: list[dict]) -> None:
    """Rows written straight into a table (what a job that missed a tombstone leaves behind)."""
    frame = spark.createDataFrame([tuple(v.get(c) for c in spec.column_names) for v in values], schema_of(spec))
    frame.write.format("delta").mode("append").save(str(settings.delta_root / spec.name))


# --- a lost checkpoint ------------------------------------------------------------------------------------------------


def test_a_lost_checkpoint_rebuilds_current_tables_and_adds_no_history_twice(
    spark, kafka_broker, stack_settings, tmp_path
):
    status_topic, offsets_topic = unique("status-ckpt"), unique("offsets-ckpt")
    create_topic(stack_settings, status_topic, 2, compacted=True)
    create_topic(stack_settings, offsets_topic, 2, compacted=True)
    overrides = {"status.storage.topic": status_topic, "offset.storage.topic": offsets_topic}
    settings = job_settings(stack_settings, tmp_path / "kept", **overrides)
    bootstrap = settings.bootstrap_servers

    def run_both(job_settings_: Settings) -> None:
        run_active_topics(spark, job_settings_)
        await_query(source_offsets.start(spark, job_settings_, available_now=True), 240)

    produce_keyed(bootstrap, status_topic, [topic_status("c", f"t{i}") for i in range(4)], 2)
    produce_keyed(bootstrap, offsets_topic, [offsets_record("src", f"f{i}", i) for i in range(4)], 2)
    run_both(settings)
    produce_keyed(
        bootstrap, status_topic, [tombstone("c", "t1"), topic_status("c", "t4"), topic_status("c", "t0", 2)], 2
    )
    produce_keyed(
        bootstrap, offsets_topic, [offsets_record("src", "f0", 10), (offsets_record("src", "f1", 0)[0], None)], 2
    )
    run_both(settings)
    history_before = {
        name: rows(spark, settings, name, "changed_at", "recorded_at")
        for name in (ACTIVE_TOPICS_HISTORY.name, SOURCE_OFFSETS_HISTORY.name)
    }
    marks_before = watermarks(spark, settings, active_topics.JOB_NAME)
    assert sum(marks_before.values()) == 7 and set(marks_before) == {(status_topic, 0), (status_topic, 1)}

    for job in (active_topics.JOB_NAME, source_offsets.JOB_NAME):
        shutil.rmtree(settings.checkpoint_path(job))  # the checkpoints are lost, the tables kept
    run_both(settings)

    scratch = job_settings(stack_settings, tmp_path / "scratch", **overrides)
    run_both(scratch)
    for spec, drop in ((ACTIVE_TOPICS, ("updated_at",)), (SOURCE_OFFSETS, ("updated_at",))):
        assert rows(spark, settings, spec.name, *drop) == rows(spark, scratch, spec.name, *drop), spec.name
    assert active(spark, settings) == {("c", "t0"), ("c", "t2"), ("c", "t3"), ("c", "t4")}
    for name, before in history_before.items():
        after = rows(spark, settings, name, "changed_at", "recorded_at")
        assert after == before, f"{name}: a record's change was written again"
        assert after == rows(spark, scratch, name, "changed_at", "recorded_at")
    # The watermarks say where the rebuilt tables are: the same end offsets.
    assert watermarks(spark, settings, active_topics.JOB_NAME) == marks_before
    assert losses(spark, settings) == []


def test_history_is_appended_once_a_batch_starts_past_what_an_earlier_run_wrote(
    spark, kafka_broker, stack_settings, tmp_path
):
    """A continuous query whose checkpoint was lost re-folds the records an earlier run wrote into the history (the
    insert-only MERGE adds none of them again), then appends the rows of the batches that start past them."""
    topic = unique("status-append")
    create_topic(stack_settings, topic, 2, compacted=True)
    settings = job_settings(stack_settings, tmp_path, **{"status.storage.topic": topic, "trigger.interval": "1 second"})
    produce_keyed(settings.bootstrap_servers, topic, [topic_status("c", f"t{i}") for i in range(4)], 2)
    run_active_topics(spark, settings)
    shutil.rmtree(settings.checkpoint_path(active_topics.JOB_NAME))

    def coordinates() -> list[tuple[int, int]]:
        table = delta_table(spark, settings, ACTIVE_TOPICS_HISTORY.name)  # read again: the table's newest version
        return sorted((r.kafka_partition, r.kafka_offset) for r in table.collect())

    query = active_topics.start(spark, settings, available_now=False)
    try:
        wait_until(lambda: (query.lastProgress or {}).get("batchId", -1) >= 0, "the re-fold of the first 4 records")
        assert len(coordinates()) == 4
        produce_keyed(settings.bootstrap_servers, topic, [topic_status("c", f"t{i}") for i in range(4, 8)], 2)
        wait_until(lambda: len(coordinates()) >= 8, "the history of the next 4 records")
    finally:
        query.stop()
    written = coordinates()
    assert len(set(written)) == len(written) == 8
    history = DeltaTable.forPath(spark, str(settings.delta_root / ACTIVE_TOPICS_HISTORY.name))
    operations = [r.operation for r in history.history().orderBy("version").collect()]
    assert operations[-1] == "WRITE", operations  # an append, not a MERGE
    assert "MERGE" in operations, operations  # the first batch of the new checkpoint


# --- records lost to retention ----------------------------------------------------------------------------------------


def test_records_lost_to_retention_are_recorded_and_the_job_goes_on(spark, kafka_broker, stack_settings, tmp_path):
    topic = unique("status-retention")
    create_topic(stack_settings, topic, 1)  # cleanup.policy=delete: what retention removes, deleteRecords removes
    settings = job_settings(stack_settings, tmp_path, **{"status.storage.topic": topic})
    produce_keyed(settings.bootstrap_servers, topic, [topic_status("c", f"t{i}") for i in range(4)], 1)
    run_active_topics(spark, settings)
    assert watermarks(spark, settings, active_topics.JOB_NAME) == {(topic, 0): 4}

    # While the job is down: four more records, the log start moves past the checkpoint (4) to 6.
    produce_keyed(settings.bootstrap_servers, topic, [topic_status("c", f"t{i}") for i in range(4, 8)], 1)
    delete_records(settings, topic, 0, 6)
    run_active_topics(spark, settings)  # does not fail (failOnDataLoss=false): it goes on from offset 6

    assert losses(spark, settings) == [(active_topics.JOB_NAME, topic, 0, 4, 6, "records_deleted")]
    # t0..t3 are no longer in the topic at all (the reconcile pass), t4 and t5 were lost: what a fold of the topic
    # as it is now gives.
    assert active(spark, settings) == {("c", "t6"), ("c", "t7")}
    assert watermarks(spark, settings, active_topics.JOB_NAME) == {(topic, 0): 8}
    body = api_client(settings).get(f"/data-loss?topic={topic}").get_json()
    assert [(e["query"], e["expected_offset"], e["earliest_offset"], e["cause"]) for e in body["data_loss"]] == [
        (active_topics.JOB_NAME, 4, 6, "records_deleted")
    ]

    # The next run has nothing more to record.
    produce_keyed(settings.bootstrap_servers, topic, [topic_status("c", "t8")], 1)
    run_active_topics(spark, settings)
    assert len(losses(spark, settings)) == 1 and ("c", "t8") in active(spark, settings)


# --- a deleted connector offsets topic --------------------------------------------------------------------------------


def test_a_deleted_connector_offsets_topic_is_recorded_and_the_query_keeps_running(
    spark, kafka_broker, stack_settings, tmp_path
):
    worker_topic, own_topic = unique("worker-offsets"), unique("own-offsets")
    create_topic(stack_settings, worker_topic, 2, compacted=True)
    create_topic(stack_settings, own_topic, 1, compacted=True)
    settings = job_settings(
        stack_settings, tmp_path, **{"offset.storage.topic": worker_topic, "trigger.interval": "1 second"}
    )
    bootstrap = settings.bootstrap_servers
    ensure_table(spark, settings.delta_root, CONNECTORS)
    spark.createDataFrame(
        [("own", json.dumps({"offsets.storage.topic": own_topic}))], "name STRING, config STRING"
    ).write.format("delta").mode("append").save(str(settings.delta_root / CONNECTORS.name))
    produce_keyed(bootstrap, worker_topic, [offsets_record("worker", "w", 1)], 2)
    produce_keyed(bootstrap, own_topic, [offsets_record("own", "a", 1), offsets_record("own", "b", 2)], 1)

    def count(topic: str) -> int:
        return delta_table(spark, settings, SOURCE_OFFSETS.name).where(F.col("offsets_topic") == topic).count()

    task = source_offsets.SourceOffsetsTask(spark, settings, poll_seconds=1.0)
    stop = threading.Event()
    supervisor = Supervisor([task], stop, backoff=Backoff(initial_s=1.0, max_s=5.0))
    runner = threading.Thread(target=supervisor.run, daemon=True)
    runner.start()
    try:
        wait_until(lambda: count(own_topic) == 2 and count(worker_topic) == 1, "folding both topics")
        delete_topic(settings, own_topic)
        produce_keyed(bootstrap, worker_topic, [offsets_record("worker", "w2", 1)], 2)
        wait_until(
            lambda: count(worker_topic) == 2 and count(own_topic) == 0 and bool(losses(spark, settings)),
            "the loss recorded, the topic's rows reconciled away and the worker topic still folded",
        )
        state = supervisor.state()[task.name]
        assert task.query.isActive and state.status == TaskStatus.RUNNING
        assert state.failures == 0, state.last_error
    finally:
        stop.set()
        runner.join(180)
    assert not runner.is_alive()
    assert losses(spark, settings) == [(source_offsets.JOB_NAME, own_topic, 0, 2, None, "partition_gone")]
    assert set(watermarks(spark, settings, source_offsets.JOB_NAME)) == {(worker_topic, 0), (worker_topic, 1)}

    # A catch-up run afterwards (the connectors table still names the topic): it succeeds, nothing more is lost.
    await_query(source_offsets.start(spark, settings, available_now=True), 240)
    assert len(losses(spark, settings)) == 1 and count(worker_topic) == 2


# --- tombstones compacted away while the job was down -----------------------------------------------------------------


def test_rows_whose_keys_left_the_topic_are_reconciled_away(spark, kafka_broker, stack_settings, tmp_path):
    topic = unique("status-ghosts")
    create_topic(stack_settings, topic, 1)
    settings = job_settings(stack_settings, tmp_path, **{"status.storage.topic": topic})
    bootstrap = settings.bootstrap_servers
    produce_keyed(bootstrap, topic, [topic_status("c", "t1"), topic_status("c", "t0"), topic_status("c", "t2")], 1)
    run_active_topics(spark, settings)
    assert active(spark, settings) == {("c", "t0"), ("c", "t1"), ("c", "t2")}

    # Compaction, as it ends while the job is down: t1's tombstone and everything older than the latest t0 and t2
    # records are gone. (deleteRecords moves the log start too, so the job also records the tombstone's loss.)
    produce_keyed(bootstrap, topic, [tombstone("c", "t1"), topic_status("c", "t0", 1), topic_status("c", "t2", 1)], 1)
    delete_records(settings, topic, 0, 4)
    # A row the fold never removed although its key has not been in the topic for long (its tombstone compacted
    # away without moving the log start): written straight into the table.
    append_rows(spark, settings, ACTIVE_TOPICS, [{"connector": "ghost", "topic": "gone", "task": 0}])

    run_active_topics(spark, settings)

    assert active(spark, settings) == {("c", "t0"), ("c", "t2")}
    assert {(r.connector, r.topic, r.task) for r in delta_table(spark, settings, ACTIVE_TOPICS.name).collect()} == {
        ("c", "t0", 1),
        ("c", "t2", 1),
    }
    assert losses(spark, settings) == [(active_topics.JOB_NAME, topic, 0, 3, 4, "records_deleted")]


def test_sink_offsets_reconcile_reads_consumer_offsets(spark, kafka_broker, stack_settings, tmp_path):
    """The reconcile pass of ``sink_offsets`` reads ``__consumer_offsets`` (an internal topic) like the query: a
    ghost group goes, the committed offsets stay."""
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata

    settings = job_settings(stack_settings, tmp_path)
    topic, group = unique("sink-input"), unique("real-group")
    create_topic(settings, topic, 1)
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap_servers, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1)})
    finally:
        consumer.close()
    await_query(sink_offsets.start(spark, settings, available_now=True), 240)
    before = delta_table(spark, settings, SINK_OFFSETS.name).count()
    assert before >= 1
    ghost = {"group_id": "ghost-group", "topic": topic, "partition": 0, "offset": 9, "kafka_partition": 0}
    append_rows(spark, settings, SINK_OFFSETS, [ghost])

    await_query(sink_offsets.start(spark, settings, available_now=True), 240)

    groups = {r.group_id for r in delta_table(spark, settings, SINK_OFFSETS.name).collect()}
    assert "ghost-group" not in groups and group in groups
    assert delta_table(spark, settings, SINK_OFFSETS.name).count() >= before
