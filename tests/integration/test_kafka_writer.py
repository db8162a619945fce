"""The Kafka layer (InternalTopicWriter, KafkaAdmin) against the session's real KRaft broker and Connect worker.

Records are read back with a kafka-python consumer; the last tests check that our tombstone lands where Connect's own
record for the same key is, and that Connect then forgets the topic. (The writer's own logic: tests/unit.)
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

from connect_state.core.errors import TopicNotFoundError
from connect_state.core.settings import Settings
from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.formats.offsets import offset_key_bytes
from connect_state.formats.status import topic_status_key
from connect_state.kafka import InternalTopicWriter, KafkaAdmin, OffsetsTopicReader, RecordPosition
from connect_state.kafka.partitioner import partition_for_key
from tests.integration.helpers import create_topic

# --- with the real broker -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker_settings(kafka_broker: Any, stack_settings: Settings) -> Settings:
    return stack_settings


@pytest.fixture(scope="module")
def admin(broker_settings: Settings) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker_settings.bootstrap_servers)
    yield client
    client.close()


@pytest.fixture
def make_topic(broker_settings: Settings) -> Callable[[int], str]:
    """``make_topic(partitions)``: a new compacted topic with a unique name, known to the broker's metadata."""

    def make(partitions: int) -> str:
        name = f"writer-test-{uuid.uuid4().hex[:12]}"
        create_topic(broker_settings, name, partitions, compacted=True)
        return name

    return make


@pytest.fixture(scope="module")
def real_writer(broker_settings: Settings) -> Iterator[InternalTopicWriter]:
    writer = InternalTopicWriter(broker_settings)
    yield writer
    writer.close()


def read_back(
    settings: Settings,
    topic: str,
    expected: int = 0,
    until: Callable[[list[Any]], bool] | None = None,
    timeout: float = 30.0,
) -> list[Any]:
    """The records of ``topic`` from the beginning, read with kafka-python until ``expected`` of them (or ``until``)."""
    done = until or (lambda records: len(records) >= expected)
    consumer = KafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        records: list[Any] = []
        deadline = time.monotonic() + timeout
        while not done(records) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


@pytest.mark.integration
@pytest.mark.parametrize("partitions", [1, 5, 25])
def test_records_land_in_the_java_partition(
    broker_settings: Settings, real_writer: InternalTopicWriter, make_topic: Callable[[int], str], partitions: int
) -> None:
    topic = make_topic(partitions)
    keys = [topic_status_key(f"topic-{i}", "baz-sink").encode() for i in range(100)]
    keys += ["status-connector-café".encode(), b"status-task-x-0", b"", b"\x00\xff\xfe"]

    positions = real_writer.send(topic, [(k, b"v") for k in keys])

    assert real_writer.partition_count(topic) == partitions
    assert [p.partition for p in positions] == [partition_for_key(k, partitions) for k in keys]
    records = read_back(broker_settings, topic, len(keys))
    assert sorted((r.key, r.partition, r.offset) for r in records) == sorted(
        (k, p.partition, p.offset) for k, p in zip(keys, positions, strict=True)
    )
    assert {r.key: r.partition for r in records} == {k: partition_for_key(k, partitions) for k in keys}


@pytest.mark.integration
def test_tombstones_arrive_as_null_values_in_order(
    broker_settings: Settings, real_writer: InternalTopicWriter, make_topic: Callable[[int], str]
) -> None:
    topic = make_topic(5)
    records = [
        (b"status-topic-t1:connector-c", b'{"topic":{"name":"t1","connector":"c","task":0,"discoverTimestamp":1}}'),
        (b"status-topic-t2:connector-c", b'{"topic":{"name":"t2","connector":"c","task":0,"discoverTimestamp":2}}'),
        (b"status-topic-t1:connector-c", None),
        (b"status-topic-t2:connector-c", None),
        (b"status-topic-t1:connector-c", b"{}"),
    ]
    positions = real_writer.send(topic, records)

    got = read_back(broker_settings, topic, len(records))
    by_position = {(r.partition, r.offset): (r.key, r.value) for r in got}
    assert [by_position[(p.partition, p.offset)] for p in positions] == records
    for key in {k for k, _ in records}:
        offsets = [p.offset for (k, _), p in zip(records, positions, strict=True) if k == key]
        assert offsets == sorted(offsets), "records of one key keep their send order"


@pytest.mark.integration
def test_missing_topic_fails_fast_without_creating_it(
    broker_settings: Settings,
    real_writer: InternalTopicWriter,
    admin: KafkaAdminClient,
    make_topic: Callable[[int], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    missing = f"writer-test-missing-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    with pytest.raises(TopicNotFoundError, match=f"topic '{missing}' does not exist on the Kafka cluster at"):
        real_writer.send(missing, [(b"status-topic-t:connector-c", None)])
    assert time.monotonic() - started < 5, "answered from one metadata request, not after max.block.ms"
    assert missing not in admin.list_topics(), "never auto-created"

    # The producer never heard of the missing topic: no metadata refresh loop, and it still writes elsewhere.
    with caplog.at_level(logging.ERROR, logger="kafka"):
        topic = make_topic(2)
        assert real_writer.send(topic, [(b"k", None)])[0].partition == partition_for_key(b"k", 2)
        time.sleep(1)
    assert missing not in caplog.text


@pytest.mark.integration
def test_messages_with_headers_and_null_keys_on_a_created_topic(
    broker_settings: Settings, real_writer: InternalTopicWriter, admin: KafkaAdminClient
) -> None:
    """The heartbeat topic's path: ``ensure_topic`` creates it (broker defaults), ``send_messages`` the records."""
    topic = f"writer-test-created-{uuid.uuid4().hex[:8]}"
    real_writer.ensure_topic(topic)
    real_writer.ensure_topic(topic)
    assert topic in admin.list_topics()
    headers = [("connect.heartbeat", b"1"), ("connect.connector", b"c")]
    positions = real_writer.send_messages(topic, [(b"k", b"v", headers), (None, b"no key", None)])
    got = {(r.partition, r.offset): r for r in read_back(broker_settings, topic, 2)}
    first, second = (got[(p.partition, p.offset)] for p in positions)
    assert (first.key, first.value, list(first.headers)) == (b"k", b"v", headers)
    assert (second.key, second.value, list(second.headers)) == (None, b"no key", [])
    assert first.partition == partition_for_key(b"k", real_writer.partition_count(topic))


@pytest.mark.integration
def test_admin_describes_the_cluster_and_ready_topics(
    broker_settings: Settings, kafka_broker: Any, make_topic: Callable[[int], str]
) -> None:
    topic = make_topic(3)
    with KafkaAdmin(broker_settings.kafka_client_config(), client_id="test", timeout_ms=10000) as admin:
        cluster = admin.describe_cluster()
        assert cluster.cluster_id == kafka_broker.cluster_id
        assert [(host, port) for _, host, port in cluster.brokers] == [("127.0.0.1", kafka_broker.port)]
        deadline = time.monotonic() + 10
        while admin.ready_topics([topic]) != {topic: 3} and time.monotonic() < deadline:
            time.sleep(0.1)
        assert admin.ready_topics([topic, "writer-test-never-created"]) == {topic: 3}


@pytest.mark.integration
def test_one_writer_shared_by_threads(
    broker_settings: Settings, real_writer: InternalTopicWriter, make_topic: Callable[[int], str]
) -> None:
    topic = make_topic(5)

    def write(n: int) -> list[RecordPosition]:
        return real_writer.send(topic, [(f"key-{n}-{i}".encode(), b"v") for i in range(20)])

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(write, range(16)))
    for n, positions in enumerate(results):
        assert [p.partition for p in positions] == [partition_for_key(f"key-{n}-{i}".encode(), 5) for i in range(20)]
    assert len(read_back(broker_settings, topic, 16 * 20)) == 16 * 20


@pytest.fixture
def tracked_source(connect: Any, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A running FileStream source whose topic the shared Connect worker tracks (KIP-558): ``(connector, topic)``."""
    name, topic = f"writer-src-{uuid.uuid4().hex[:8]}", f"writer-out-{uuid.uuid4().hex[:8]}"
    source = tmp_path / "in.txt"
    source.write_text("")
    creation = {"topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "1"}
    connect.create_connector(name, file_source_config(name, source, topic, **creation))
    try:
        connect.wait_until_running(name)
        append_lines(source, ["hello"])
        connect.wait_for(lambda: connect.active_topics(name) == {topic}, description=f"{name} topics")
        yield name, topic
    finally:
        connect.delete_connector(name, missing_ok=True)


@pytest.mark.integration
def test_tombstone_lands_where_connect_wrote_and_connect_forgets_the_topic(
    stack_settings: Settings, connect: Any, real_writer: InternalTopicWriter, tracked_source: tuple[str, str]
) -> None:
    """Our tombstone for a topic-status key goes to the partition of Connect's own record, and resets the topic."""
    name, topic = tracked_source
    key = topic_status_key(topic, name).encode()
    status_topic = stack_settings.status_storage_topic
    records = read_back(stack_settings, status_topic, until=lambda rs: any(r.key == key for r in rs))
    written_by_connect = [r for r in records if r.key == key and r.value is not None]
    assert written_by_connect, "Connect wrote the topic status"

    [position] = real_writer.send(status_topic, [(key, None)])

    assert (
        position.partition
        == written_by_connect[0].partition
        == partition_for_key(key, real_writer.partition_count(status_topic))
    )
    connect.wait_for(lambda: connect.active_topics(name) == set(), description=f"{name} topics reset")


@pytest.mark.integration
def test_api_reset_through_the_real_writer_resets_connect(
    stack_settings: Settings, connect: Any, tracked_source: tuple[str, str], tmp_path: Path
) -> None:
    """``PUT /connectors/<name>/topics/reset`` on our API (own writer) has the effect of Connect's own reset."""
    from connect_state.api import close_app, create_app
    from connect_state.tables.schemas import ACTIVE_TOPICS

    name, topic = tracked_source
    settings = stack_settings.with_overrides(**{"delta.root": str(tmp_path / "delta")})
    row = {
        "connector": name,
        "topic": topic,
        "task": 0,
        "discover_timestamp": 0,
        "updated_at": None,
        "kafka_partition": 0,
        "kafka_offset": 0,
    }
    table = pa.Table.from_pylist([row], schema=ACTIVE_TOPICS.schema)
    write_deltalake(str(settings.delta_root / ACTIVE_TOPICS.name), table)
    app = create_app(settings)
    try:
        client = app.test_client()
        assert client.get(f"/connectors/{name}/topics").get_json() == {name: {"topics": [topic]}}
        response = client.put(f"/connectors/{name}/topics/reset")
        assert response.status_code == 202, response.get_data(as_text=True)
    finally:
        close_app(app)
    connect.wait_for(lambda: connect.active_topics(name) == set(), description=f"{name} topics reset")


@pytest.mark.integration
def test_offsets_reader_finds_a_key_written_after_an_offset(
    broker_settings: Settings, real_writer: InternalTopicWriter, make_topic: Callable[[int], str]
) -> None:
    """The heartbeat emitter's check: the last value of a key written after a record, keys compared as Connect looks
    them up (a differently spaced key is the same key), nothing when the key was not written since."""
    topic = make_topic(1)
    key = offset_key_bytes("c", {"p": 1})
    positions = real_writer.send(
        topic,
        [
            (key, b'{"o":1}'),
            (offset_key_bytes("c", {"p": 2}), b'{"o":9}'),
            (b'[ "c", {"p": 1} ]', b'{"o":2}'),
            (offset_key_bytes("other", {"p": 1}), b'{"o":3}'),
        ],
    )
    reader = OffsetsTopicReader(broker_settings.with_overrides(**{"offset.storage.topic": topic}))
    try:
        assert reader.latest_offset(key, 0, positions[0].offset) == (True, b'{"o":2}')
        assert reader.latest_offset(key, 0, positions[2].offset) == (False, None)
        assert reader.latest_offset(key, 0, positions[3].offset) == (False, None)
    finally:
        reader.close()
