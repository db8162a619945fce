"""KIP-875 offsets job against the real broker and Connect worker: our tables answer what Connect's
``GET /connectors/<name>/offsets`` answers, for source connectors (worker and connector-specific offsets topics) and
sink connectors (``__consumer_offsets``); malformed records are quarantined; a rebuild equals the incremental tables.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from pyspark.sql import SparkSession

from connect_state.connect.offset_stores import sink_consumer_group
from connect_state.core.settings import Settings
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.formats.consumer_offsets import parse_consumer_offsets_record
from connect_state.formats.javalang import java_string_hashcode
from connect_state.spark import sink_offsets, source_offsets
from connect_state.spark.delta_io import ensure_table
from connect_state.spark.offsets import OffsetsJob
from connect_state.spark.streaming import run_job, stop_between_batches
from connect_state.tables.schemas import CONNECTORS, REJECTED_RECORDS, SINK_OFFSETS, SOURCE_OFFSETS
from tests.fixtures.spark import await_query
from tests.integration.helpers import (
    api_client,
    connect_offsets,
    create_topic,
    delta_table,
    job_settings,
    produce_keyed,
    produce_values,
    read_topic,
    run_connector_states,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]
WAIT_S = 90.0
OFFSETS_PARTITIONS = 25  # offset.storage.partitions default


def canonical(entries: list[dict]) -> list[tuple[str, str]]:
    """``{"partition":..,"offset":..}`` entries, order-insensitive."""
    return sorted(
        (json.dumps(e["partition"], sort_keys=True), json.dumps(e["offset"], sort_keys=True)) for e in entries
    )


def our_offsets(settings: Settings, name: str) -> list[dict]:
    """Our API's ``GET /connectors/<name>/offsets``, answered from the tables the jobs wrote."""
    response = api_client(settings).get(f"/connectors/{name}/offsets")
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["offsets"]


def run_source(spark: SparkSession, settings: Settings) -> None:
    await_query(source_offsets.start(spark, settings, available_now=True), 240)


def current_rows(spark: SparkSession, settings: Settings, name: str) -> list:
    return sorted(delta_table(spark, settings, name).drop("updated_at").collect())


def test_source_offsets_match_connect(spark, connect, stack_settings, tmp_path):
    settings = job_settings(stack_settings, tmp_path)
    bootstrap = settings.bootstrap_servers
    source, source_file = unique("offsets-source"), tmp_path / "in.txt"
    append_lines(source_file, ["one", "two", "three"])
    connect.create_connector(source, file_source_config(source, source_file, unique("offsets-lines")))
    expected_position = source_file.stat().st_size
    connect.wait_for(
        lambda: any(e["offset"] == {"position": expected_position} for e in connect_offsets(connect, source)),
        WAIT_S,
        description=f"{source} offsets flushed",
    )
    # Records a worker ignores with a WARN, written where Connect's own records are.
    # (Unique keys: other tests of the session write to the same topic.)
    tag = unique("bad")
    malformed = [
        (f'["{tag}"]'.encode(), b'{"position":1}'),
        (f"not json {tag}".encode(), b'{"position":2}'),
        (f'[1,{{"{tag}":1}}]'.encode(), b"{}"),
    ]
    produce_keyed(bootstrap, settings.offset_storage_topic, malformed, OFFSETS_PARTITIONS)

    run_connector_states(spark, settings)
    run_source(spark, settings)

    assert canonical(our_offsets(settings, source)) == canonical(connect_offsets(connect, source))
    rejected = [
        r
        for r in delta_table(spark, settings, REJECTED_RECORDS.name)
        .where(f"topic = '{settings.offset_storage_topic}'")
        .collect()
        if (bytes(r.key), bytes(r.value)) in set(malformed)
    ]
    assert {(bytes(r.key), bytes(r.value)) for r in rejected} == set(malformed)
    assert all(r.reason.startswith("Ignoring offset partition key") for r in rejected)

    # A second source connector with its own offsets topic: the connectors table names it, the next run of the
    # checkpointed query subscribes to it as well and reads it from the start.
    own, own_topic, own_file = unique("offsets-own"), unique("own-offsets"), tmp_path / "own.txt"
    append_lines(own_file, ["a", "b"])
    config = file_source_config(own, own_file, unique("offsets-lines"), **{"offsets.storage.topic": own_topic})
    connect.create_connector(own, config)
    own_position = own_file.stat().st_size
    connect.wait_for(
        lambda: any(e["offset"] == {"position": own_position} for e in connect_offsets(connect, own)),
        WAIT_S,
        description=f"{own} offsets flushed",
    )
    run_connector_states(spark, settings)
    assert source_offsets.source_topics(spark, settings) == sorted({settings.offset_storage_topic, own_topic})

    run_source(spark, settings)

    theirs = connect_offsets(connect, own)
    assert canonical(our_offsets(settings, own)) == canonical(theirs)
    own_rows = delta_table(spark, settings, SOURCE_OFFSETS.name).where(f"offsets_topic = '{own_topic}'").collect()
    assert {r.connector for r in own_rows} == {own} and all(r.listed for r in own_rows)
    assert canonical(our_offsets(settings, source)) == canonical(connect_offsets(connect, source))

    # Rebuilt from the start of every topic (no checkpoint), the current table is the same.
    before = current_rows(spark, settings, SOURCE_OFFSETS.name)
    n_rejected = delta_table(spark, settings, REJECTED_RECORDS.name).count()
    shutil.rmtree(settings.checkpoint_path(source_offsets.JOB_NAME))
    run_source(spark, settings)
    assert current_rows(spark, settings, SOURCE_OFFSETS.name) == before
    assert delta_table(spark, settings, REJECTED_RECORDS.name).count() == n_rejected
    connect.delete_connector(source)
    connect.delete_connector(own)


def new_topic(settings: Settings, partitions: int) -> str:
    name = unique("sink-input")
    create_topic(settings, name, partitions)
    return name


def consumer_offsets_records(bootstrap: str, group: str) -> list:
    """The raw ``__consumer_offsets`` records of ``group`` (its partition: ``abs(hashCode) % 50``)."""
    return read_topic(bootstrap, "__consumer_offsets", [abs(java_string_hashcode(group)) % 50])


def test_sink_offsets_match_connect(spark, connect, stack_settings, tmp_path):
    settings = job_settings(stack_settings, tmp_path)
    bootstrap = settings.bootstrap_servers
    topic = new_topic(settings, 3)
    produce_values(bootstrap, topic, [(i % 3, f"line-{i}".encode()) for i in range(12)])
    sink = unique("offsets-sink")
    connect.create_connector(sink, file_sink_config(sink, tmp_path / "out.txt", [topic]))
    expected = [
        {"partition": {"kafka_partition": p, "kafka_topic": topic}, "offset": {"kafka_offset": 4}} for p in range(3)
    ]
    connect.wait_for(
        lambda: canonical(connect_offsets(connect, sink)) == canonical(expected),
        WAIT_S,
        description=f"{sink} committed all 12 records",
    )

    run_connector_states(spark, settings)
    await_query(sink_offsets.start(spark, settings, available_now=True), 240)

    group = sink_consumer_group(sink)
    assert canonical(our_offsets(settings, sink)) == canonical(connect_offsets(connect, sink))
    # The broker's own bytes: every offset commit of the group parses, and the last ones are our rows.
    latest = {}
    for record in consumer_offsets_records(bootstrap, group):
        parsed = parse_consumer_offsets_record(record.key, record.value)
        if parsed.is_offset_commit and parsed.key.group == group:
            latest[(parsed.key.topic, parsed.key.partition)] = parsed.value.offset if parsed.value else None
    assert latest == {(topic, p): 4 for p in range(3)}

    # Connect resets a stopped sink's offsets by deleting the group's offsets: tombstones, and our rows go.
    assert connect.put(connect.connector_path(sink, "stop"))[0] == 204
    connect.wait_for(
        lambda: (
            (connect.connector_status(sink) or {}).get("connector", {}).get("state") == "STOPPED"
            and connect.connector_status(sink).get("tasks") == []
        ),
        WAIT_S,
        description=f"{sink} stopped",
    )
    status, body = connect.request("DELETE", connect.connector_path(sink, "offsets"))
    assert status == 200, body
    assert connect_offsets(connect, sink) == []

    await_query(sink_offsets.start(spark, settings, available_now=True), 240)

    assert our_offsets(settings, sink) == []
    history = delta_table(spark, settings, "sink_offsets_history").where(f"group_id = '{group}'")
    assert {r.change for r in history.collect()} == {"set", "removed"}
    connect.delete_connector(sink)


def test_continuous_source_query_notices_a_new_offsets_topic(spark, kafka_broker, stack_settings, tmp_path):
    """A running source query sees, after its next micro-batch, an ``offsets.storage.topic`` it does not read."""
    bootstrap = stack_settings.bootstrap_servers
    worker_topic = unique("offsets-topic")
    create_topic(stack_settings, worker_topic, 2, compacted=True)
    settings = job_settings(
        stack_settings, tmp_path, **{"offset.storage.topic": worker_topic, "trigger.interval": "1 second"}
    )
    task = source_offsets.SourceOffsetsTask(spark, settings)  # not run: it would restart the query
    query = task.query

    def wait_until(condition, what: str) -> None:
        deadline = time.monotonic() + 120
        while not condition():
            assert query.isActive, f"query ended: {query.exception()}"
            assert time.monotonic() < deadline, f"{what} did not happen within 120 s"
            time.sleep(0.5)

    def ghosts() -> int:
        return delta_table(spark, settings, SOURCE_OFFSETS.name).where("connector LIKE 'ghost%'").count()

    try:
        produce_keyed(bootstrap, worker_topic, [(b'["ghost-1",{"f":"x"}]', b'{"p":1}')], 2)
        wait_until(lambda: ghosts() == 1, "the first record's row")
        assert task.new_topics() == frozenset()
        ensure_table(spark, settings.delta_root, CONNECTORS)
        configs = [("late", json.dumps({"offsets.storage.topic": " late-offsets "})), ("plain", "{}")]
        spark.createDataFrame(configs, "name STRING, config STRING").write.format("delta").mode("append").save(
            str(settings.delta_root / CONNECTORS.name)
        )
        produce_keyed(bootstrap, worker_topic, [(b'["ghost-2",{"f":"x"}]', b'{"p":1}')], 2)
        wait_until(lambda: task.new_topics(), "noticing the new topic")
        assert task.new_topics() == {"late-offsets"}
        # The batch that noticed it may be a no-data batch ahead of the one with the second record.
        wait_until(lambda: ghosts() == 2, "the second record's row")
    finally:
        stop_between_batches(query)
    assert source_offsets.source_topics(spark, settings) == sorted({worker_topic, "late-offsets"})


def test_both_queries_catch_up_together(spark, kafka_broker, stack_settings, tmp_path):
    """What ``connect-state-offsets --available-now`` runs: both queries side by side, each to its own checkpoint."""
    from kafka.structs import OffsetAndMetadata

    settings = job_settings(stack_settings, tmp_path)
    bootstrap = settings.bootstrap_servers
    topic, group = new_topic(settings, 1), unique("plain-group")
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(7, "meta", -1)})
    finally:
        consumer.close()
    produce_keyed(bootstrap, settings.offset_storage_topic, [(b'["bad"]', b"{}")], OFFSETS_PARTITIONS)

    assert run_job(OffsetsJob(), spark, settings, available_now=True) == 0

    (row,) = delta_table(spark, settings, SINK_OFFSETS.name).where(f"group_id = '{group}'").collect()
    assert (row.topic, row.partition, row.offset, row.metadata) == (topic, 0, 7, "meta")
    rejected = delta_table(spark, settings, REJECTED_RECORDS.name).where(f"topic = '{settings.offset_storage_topic}'")
    assert b'["bad"]' in {bytes(r.key) for r in rejected.collect()}
    for job in (source_offsets.JOB_NAME, sink_offsets.JOB_NAME):
        assert Path(settings.checkpoint_path(job) / "commits").is_dir()
