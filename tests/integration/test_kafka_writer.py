"""InternalTopicWriter: Java key placement, tombstones, acknowledgements and errors.

The first part needs no Kafka (kafka-python's clients are replaced by fakes, to pin the writer's own logic); the
tests marked ``integration`` write to the session's real KRaft broker and read the records back with a
kafka-python consumer, and the last one checks against a real Connect worker that our tombstone lands where Connect's
own record for the same key is, and that Connect then forgets the topic.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kafka_errors
from kafka.admin import NewTopic

import connect_state.kafka_writer as kafka_writer
from connect_state.config import Settings, load_settings
from connect_state.errors import ConfigError, KafkaWriteError
from connect_state.filestream import append_lines, file_source_config
from connect_state.formats.status import topic_status_key
from connect_state.kafka_writer import InternalTopicWriter, RecordPosition, kafka_python_config
from connect_state.partitioner import partition_for_key

# --- without Kafka: fakes for kafka-python's clients -----------------------------------------------------------------


class FakeFuture:
    """A FutureRecordMetadata that is acknowledged, failed, or never completes."""

    def __init__(self, topic: str, partition: int, offset: int, error: Exception | None, hang: bool) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset
        self.error, self.hang = error, hang

    def get(self, timeout: float | None = None) -> Any:
        if self.hang:
            time.sleep(timeout or 0)
            raise kafka_errors.KafkaTimeoutError(f"Timeout after waiting for {timeout} secs.")
        if self.error is not None:
            raise self.error
        return type("RecordMetadata", (), {"topic": self.topic, "partition": self.partition, "offset": self.offset})


class FakeProducer:
    DEFAULT_CONFIG = KafkaProducer.DEFAULT_CONFIG
    instances: ClassVar[list[FakeProducer]] = []
    error: Exception | None = None
    hang = False

    def __init__(self, **config: Any) -> None:
        self.config = config
        self.sent: list[tuple[str, bytes, bytes | None, int]] = []
        self.closed = False
        FakeProducer.instances.append(self)

    def send(self, topic: str, key: bytes, value: bytes | None, partition: int) -> FakeFuture:
        self.sent.append((topic, key, value, partition))
        return FakeFuture(topic, partition, len(self.sent) - 1, self.error, self.hang)

    def flush(self, timeout: float | None = None) -> None:
        if self.hang:
            raise kafka_errors.KafkaTimeoutError("Timeout waiting for future")

    def close(self, timeout: float | None = None) -> None:
        self.closed = True


class FakeAdmin:
    instances: ClassVar[list[FakeAdmin]] = []
    topics: ClassVar[dict[str, int]] = {}
    errors: ClassVar[list[Exception]] = []

    def __init__(self, **config: Any) -> None:
        self.config = config
        self.described: list[str] = []
        self.closed = False
        FakeAdmin.instances.append(self)

    def describe_topics(self, topics: list[str]) -> list[dict[str, Any]]:
        self.described.extend(topics)
        if self.errors:
            raise self.errors.pop(0)
        return [
            {"name": t, "error_code": 0, "partitions": [{"partition_index": i} for i in range(self.topics[t])]}
            if t in self.topics
            else {"name": t, "error_code": 3, "partitions": []}
            for t in topics
        ]

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(overrides={"delta.root": str(tmp_path), "api.kafka.write.timeout.ms": "5000"}, environ={})


@pytest.fixture
def fake_kafka(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Replace the writer's kafka-python clients; the cluster has ``connect-status`` (5 partitions) and ``one`` (1)."""
    FakeProducer.instances, FakeProducer.error, FakeProducer.hang = [], None, False
    FakeAdmin.instances, FakeAdmin.topics, FakeAdmin.errors = [], {"connect-status": 5, "one": 1}, []
    monkeypatch.setattr(kafka_writer, "KafkaProducer", FakeProducer)
    monkeypatch.setattr(kafka_writer, "_MetadataClient", FakeAdmin)
    yield


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ({"bootstrap.servers": "b:9092"}, {"bootstrap_servers": "b:9092"}),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"},
        ),
        (
            {"request.timeout.ms": "1000", "metadata.max.age.ms": "60000"},
            {"request_timeout_ms": 1000, "metadata_max_age_ms": 60000},
        ),
        ({"receive.buffer.bytes": "65536"}, {"receive_buffer_bytes": 65536}),
        ({"ssl.check.hostname": "false"}, {"ssl_check_hostname": False}),
        ({"ssl.endpoint.identification.algorithm": ""}, {"ssl_check_hostname": False}),
        ({"ssl.endpoint.identification.algorithm": "https"}, {"ssl_check_hostname": True}),
        ({"ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca"}, {"ssl_cafile": "/ca"}),
        ({"ssl.truststore.location": "/ca.jks"}, {}),  # JKS: not readable by Python, warned and skipped
        (
            {"ssl.keystore.location": "/me.pem", "ssl.key.password": "pw"},
            {"ssl_certfile": "/me.pem", "ssl_password": "pw"},
        ),
        (
            {
                "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="al ice" password="s3=cr\\"et";'
            },
            {"sasl_plain_username": "al ice", "sasl_plain_password": 's3=cr"et'},
        ),
        (
            {
                "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                "username=u password=p;"
            },
            {"sasl_plain_username": "u", "sasl_plain_password": "p"},
        ),
        ({"compression.type": "none"}, {"compression_type": None}),
        ({"compression.type": "gzip", "linger.ms": "5"}, {"compression_type": "gzip", "linger_ms": 5}),
        ({"acks": "all"}, {"acks": -1}),
        ({"sasl.login.callback.handler.class": "x", "key.serializer": "y", "partitioner.class": "z"}, {}),
    ],
)
def test_kafka_python_config(properties: dict[str, str], expected: dict[str, Any]) -> None:
    assert kafka_python_config(properties, KafkaProducer.DEFAULT_CONFIG) == expected


def test_kafka_python_config_bad_number() -> None:
    with pytest.raises(ConfigError, match=r"request\.timeout\.ms"):
        kafka_python_config({"request.timeout.ms": "soon"}, KafkaProducer.DEFAULT_CONFIG)


def test_admin_config_keeps_only_what_the_admin_client_accepts(settings: Settings) -> None:
    props = "security.protocol=SSL,linger.ms=5,ssl.cafile=/ca"
    writer = InternalTopicWriter(settings.with_overrides(**{"kafka.client.properties": props}))
    config = writer.admin_config()
    assert set(config) <= set(KafkaAdminClient.DEFAULT_CONFIG)
    assert config["security_protocol"] == "SSL"
    assert config["ssl_cafile"] == "/ca"
    assert "linger_ms" not in config


def test_producer_config_forces_connect_settings(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    props = "acks=1,enable.idempotence=true,allow.auto.create.topics=true,security.protocol=SSL,linger.ms=5"
    writer = InternalTopicWriter(settings.with_overrides(**{"kafka.client.properties": props}))
    with caplog.at_level(logging.WARNING):
        config = writer.producer_config()
    assert set(config) <= set(KafkaProducer.DEFAULT_CONFIG)
    assert config["acks"] == -1
    assert config["enable_idempotence"] is False
    assert config["allow_auto_create_topics"] is False
    assert config["max_in_flight_requests_per_connection"] == 1
    assert config["bootstrap_servers"] == settings.bootstrap_servers
    assert (config["security_protocol"], config["linger_ms"]) == ("SSL", 5)
    assert config["max_block_ms"] == config["bootstrap_timeout_ms"] == 5000
    assert "enable_idempotence" in caplog.text and "acks" in caplog.text


def test_send_places_every_key_explicitly(settings: Settings, fake_kafka: None) -> None:
    keys = [topic_status_key(f"topic-{i}", "baz-sink").encode() for i in range(50)]
    with InternalTopicWriter(settings) as writer:
        positions = writer.send("connect-status", [(k, None) for k in keys])
    [producer] = FakeProducer.instances
    assert [(key, partition) for _, key, _, partition in producer.sent] == [(k, partition_for_key(k, 5)) for k in keys]
    assert len({p for *_, p in producer.sent}) == 5, "50 keys spread over the 5 partitions"
    assert positions == [RecordPosition("connect-status", partition_for_key(k, 5), i) for i, k in enumerate(keys)]
    assert producer.closed


def test_partition_count_is_cached_and_clients_are_created_once(settings: Settings, fake_kafka: None) -> None:
    writer = InternalTopicWriter(settings)
    assert writer.partition_count("connect-status") == 5
    assert writer.partition_count("one") == 1
    writer.send("connect-status", [(b"a", b"1")])
    writer.send("connect-status", [(b"b", None)])
    [admin] = FakeAdmin.instances
    assert admin.described == ["connect-status", "one"]
    assert len(FakeProducer.instances) == 1
    writer.close()
    assert admin.closed


def test_retriable_metadata_errors_are_retried(settings: Settings, fake_kafka: None) -> None:
    FakeAdmin.errors = [kafka_errors.NodeNotReadyError("No node_id provided"), kafka_errors.KafkaTimeoutError()]
    assert InternalTopicWriter(settings).partition_count("connect-status") == 5
    assert FakeAdmin.instances[0].described == ["connect-status"] * 3


def test_retriable_metadata_errors_give_up_at_the_timeout(settings: Settings, fake_kafka: None) -> None:
    FakeAdmin.errors = [kafka_errors.NodeNotReadyError("No node_id provided")] * 100
    started = time.monotonic()
    with pytest.raises(KafkaWriteError, match=r"cannot read the metadata of topic 'connect-status'.*NodeNotReadyError"):
        InternalTopicWriter(settings).partition_count("connect-status", timeout_ms=500)
    assert time.monotonic() - started < 2


def test_non_retriable_metadata_error(settings: Settings, fake_kafka: None) -> None:
    FakeAdmin.errors = [kafka_errors.TopicAuthorizationFailedError("connect-status")]
    with pytest.raises(KafkaWriteError, match="TopicAuthorizationFailedError"):
        InternalTopicWriter(settings).partition_count("connect-status")
    assert len(FakeAdmin.instances[0].described) == 1


def test_missing_topic_is_a_clear_error_and_never_reaches_the_producer(settings: Settings, fake_kafka: None) -> None:
    writer = InternalTopicWriter(settings)
    with pytest.raises(KafkaWriteError, match=r"topic 'connect-statuz' does not exist .*status\.storage\.topic"):
        writer.send("connect-statuz", [(b"k", None)])
    assert FakeProducer.instances == []


def test_timeout_is_a_write_error(settings: Settings, fake_kafka: None) -> None:
    FakeProducer.hang = True
    writer = InternalTopicWriter(settings)
    started = time.monotonic()
    with pytest.raises(KafkaWriteError, match=r"timed out after 300 ms .*0 of 2 records acknowledged"):
        writer.send("connect-status", [(b"a", None), (b"b", None)], timeout_ms=300)
    assert time.monotonic() - started < 2


def test_failed_write_is_a_write_error(settings: Settings, fake_kafka: None) -> None:
    FakeProducer.error = kafka_errors.NotEnoughReplicasError("not enough replicas")
    with pytest.raises(KafkaWriteError, match=r"write to topic 'connect-status' failed .*NotEnoughReplicasError"):
        InternalTopicWriter(settings).send("connect-status", [(b"a", None)])


@pytest.mark.parametrize("record", [(None, b"v"), ("text", None), (b"k", "text")])
def test_send_refuses_non_bytes(settings: Settings, fake_kafka: None, record: tuple[Any, Any]) -> None:
    with pytest.raises(TypeError, match="bytes"):
        InternalTopicWriter(settings).send("connect-status", [record])


def test_nothing_to_send_creates_no_client(settings: Settings, fake_kafka: None) -> None:
    assert InternalTopicWriter(settings).send("connect-status", []) == []
    assert FakeProducer.instances == FakeAdmin.instances == []


def test_closed_writer_refuses_to_send(settings: Settings, fake_kafka: None) -> None:
    writer = InternalTopicWriter(settings)
    writer.close()
    writer.close()
    with pytest.raises(KafkaWriteError, match="closed"):
        writer.send("connect-status", [(b"a", None)])


def test_unreachable_cluster_is_a_clear_error_without_leaking_threads(settings: Settings) -> None:
    from connect_state.local_stack import free_port

    address = f"127.0.0.1:{free_port()}"
    unreachable = settings.with_overrides(**{"bootstrap.servers": address, "api.kafka.write.timeout.ms": "1000"})
    before = set(threading.enumerate())
    with pytest.raises(KafkaWriteError, match=f"cannot reach Kafka at {address}"):
        InternalTopicWriter(unreachable).send("connect-status", [(b"a", None)])
    time.sleep(0.2)
    assert [t.name for t in set(threading.enumerate()) - before] == []


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
def make_topic(admin: KafkaAdminClient) -> Callable[[int], str]:
    """``make_topic(partitions)``: a new compacted topic with a unique name."""

    def make(partitions: int) -> str:
        name = f"writer-test-{uuid.uuid4().hex[:12]}"
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs={"cleanup.policy": "compact"})])
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
    with pytest.raises(KafkaWriteError, match=f"topic '{missing}' does not exist on the Kafka cluster at"):
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
    from api import close_app, create_app
    from api.tables import arrow_schema
    from connect_state.tables import ACTIVE_TOPICS

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
    write_deltalake(
        settings.delta_root / ACTIVE_TOPICS.name, pa.Table.from_pylist([row], schema=arrow_schema(ACTIVE_TOPICS))
    )
    app = create_app(settings)
    try:
        client = app.test_client()
        assert client.get(f"/connectors/{name}/topics").get_json() == {name: {"topics": [topic]}}
        response = client.put(f"/connectors/{name}/topics/reset")
        assert response.status_code == 202, response.get_data(as_text=True)
    finally:
        close_app(app)
    connect.wait_for(lambda: connect.active_topics(name) == set(), description=f"{name} topics reset")
