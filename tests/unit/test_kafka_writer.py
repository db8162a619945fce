"""The Kafka layer's own logic without Kafka: kafka-python's clients are replaced by fakes (or nothing listens).

The same writer against the real broker and Connect worker: tests/integration/test_kafka_writer.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka import errors as kafka_errors

import connect_state.kafka.admin as kafka_admin
import connect_state.kafka.producer as kafka_producer
from connect_state.core.errors import (
    ConfigError,
    ConsumerGroupAdminError,
    ConsumerGroupAdminTimeout,
    KafkaUnavailableError,
    KafkaWriteError,
    KafkaWriteTimeout,
    TopicNotFoundError,
)
from connect_state.core.settings import Settings, load_settings
from connect_state.formats.status import topic_status_key
from connect_state.kafka import (
    ConsumerGroupAdmin,
    InternalTopicWriter,
    KafkaAdmin,
    OffsetsTopicReader,
    RecordPosition,
    kafka_python_config,
)
from connect_state.kafka.partitioner import partition_for_key

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
        self.sent: list[tuple[str, bytes | None, bytes | None, int | None]] = []
        self.headers: list[list[Any]] = []
        self.closed = False
        FakeProducer.instances.append(self)

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, headers: list[Any], partition: int | None
    ) -> FakeFuture:
        self.sent.append((topic, key, value, partition))
        self.headers.append(headers)
        return FakeFuture(topic, -1 if partition is None else partition, len(self.sent) - 1, self.error, self.hang)

    def flush(self, timeout: float | None = None) -> None:
        if self.hang:
            raise kafka_errors.KafkaTimeoutError("Timeout waiting for future")

    def close(self, timeout: float | None = None) -> None:
        self.closed = True


class FakeAdmin:
    instances: ClassVar[list[FakeAdmin]] = []
    topics: ClassVar[dict[str, int]] = {}
    errors: ClassVar[list[Exception]] = []
    cluster: ClassVar[dict[str, Any]] = {}

    def __init__(self, **config: Any) -> None:
        self.config = config
        self.described: list[str] = []
        self.created: list[str] = []
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

    def create_topics(self, topics: dict[str, Any], timeout_ms: int, wait_for_metadata: bool) -> dict[str, Any]:
        [name] = topics
        self.created.append(name)
        if name in self.topics:
            raise kafka_errors.TopicAlreadyExistsError(name)
        self.topics[name] = 1
        return {}

    def describe_cluster(self) -> dict[str, Any]:
        if self.errors:
            raise self.errors.pop(0)
        return self.cluster

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
    FakeAdmin.cluster = {}
    monkeypatch.setattr(kafka_producer, "KafkaProducer", FakeProducer)
    monkeypatch.setattr(kafka_admin, "_AdminClient", FakeAdmin)
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
    config = writer.admin.config()
    assert set(config) <= set(KafkaAdminClient.DEFAULT_CONFIG)
    assert config["security_protocol"] == "SSL"
    assert config["ssl_cafile"] == "/ca"
    assert "linger_ms" not in config


def test_producer_config_forces_connect_settings(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    props = "acks=1,enable.idempotence=false,allow.auto.create.topics=true,security.protocol=SSL,linger.ms=5"
    writer = InternalTopicWriter(settings.with_overrides(**{"kafka.client.properties": props}))
    with caplog.at_level(logging.WARNING):
        config = writer.producer_config()
    assert set(config) <= set(KafkaProducer.DEFAULT_CONFIG)
    assert config["acks"] == -1
    assert config["enable_idempotence"] is False  # the client properties may turn idempotence off
    assert config["allow_auto_create_topics"] is False
    assert config["max_in_flight_requests_per_connection"] == 1
    assert config["bootstrap_servers"] == settings.bootstrap_servers
    assert (config["security_protocol"], config["linger_ms"]) == ("SSL", 5)
    assert config["max_block_ms"] == config["bootstrap_timeout_ms"] == 5000
    assert "acks" in caplog.text and "enable_idempotence" not in caplog.text


def test_producer_is_idempotent_by_default(settings: Settings) -> None:
    """Idempotence (kafka-python 3.x) with acks=all and one request in flight: a retried batch is written once."""
    config = InternalTopicWriter(settings).producer_config()
    assert (config["enable_idempotence"], config["acks"], config["max_in_flight_requests_per_connection"]) == (
        True,
        -1,
        1,
    )


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
    with pytest.raises(
        KafkaWriteTimeout, match=r"cannot read the metadata of topic 'connect-status'.*NodeNotReadyError"
    ):
        InternalTopicWriter(settings).partition_count("connect-status", timeout_ms=500)
    assert time.monotonic() - started < 2


def test_non_retriable_metadata_error(settings: Settings, fake_kafka: None) -> None:
    FakeAdmin.errors = [kafka_errors.TopicAuthorizationFailedError("connect-status")]
    with pytest.raises(KafkaWriteError, match="TopicAuthorizationFailedError") as raised:
        InternalTopicWriter(settings).partition_count("connect-status")
    assert type(raised.value) is KafkaWriteError
    assert len(FakeAdmin.instances[0].described) == 1


def test_missing_topic_is_a_clear_error_and_never_reaches_the_producer(settings: Settings, fake_kafka: None) -> None:
    writer = InternalTopicWriter(settings)
    with pytest.raises(TopicNotFoundError, match=r"topic 'connect-statuz' does not exist .*status\.storage\.topic"):
        writer.send("connect-statuz", [(b"k", None)])
    assert FakeProducer.instances == []


def test_timeout_is_a_write_error(settings: Settings, fake_kafka: None) -> None:
    FakeProducer.hang = True
    writer = InternalTopicWriter(settings)
    started = time.monotonic()
    with pytest.raises(KafkaWriteTimeout, match=r"timed out after 300 ms .*0 of 2 records acknowledged"):
        writer.send("connect-status", [(b"a", None), (b"b", None)], timeout_ms=300)
    assert time.monotonic() - started < 2


def test_failed_write_is_a_write_error(settings: Settings, fake_kafka: None) -> None:
    FakeProducer.error = kafka_errors.NotEnoughReplicasError("not enough replicas")
    with pytest.raises(
        KafkaWriteError, match=r"write to topic 'connect-status' failed .*NotEnoughReplicasError"
    ) as raised:
        InternalTopicWriter(settings).send("connect-status", [(b"a", None)])
    assert not isinstance(raised.value, KafkaWriteTimeout)


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
    from connect_state.dev.jvm_service import free_port

    address = f"127.0.0.1:{free_port()}"
    unreachable = settings.with_overrides(**{"bootstrap.servers": address, "api.kafka.write.timeout.ms": "1000"})
    before = set(threading.enumerate())
    with pytest.raises(KafkaUnavailableError, match=f"cannot reach Kafka at {address}") as raised:
        InternalTopicWriter(unreachable).send("connect-status", [(b"a", None)])
    assert isinstance(raised.value, KafkaWriteTimeout), "what Connect reports when Kafka cannot be reached"
    time.sleep(0.2)
    assert [t.name for t in set(threading.enumerate()) - before] == []


# --- the one send path: records with headers and optional keys -------------------------------------------------------


def test_send_messages_places_keys_like_send_and_passes_headers(settings: Settings, fake_kafka: None) -> None:
    headers = [("connect.heartbeat", b"1")]
    with InternalTopicWriter(settings) as writer:
        positions = writer.send_messages("connect-status", [(b"k", b"v", headers), (None, b"w", None)])
    [producer] = FakeProducer.instances
    assert producer.sent == [
        ("connect-status", b"k", b"v", partition_for_key(b"k", 5)),
        ("connect-status", None, b"w", None),
    ]
    assert producer.headers == [headers, []]
    assert [p.offset for p in positions] == [0, 1]


def test_send_messages_has_the_typed_errors_of_send(settings: Settings, fake_kafka: None) -> None:
    with pytest.raises(TopicNotFoundError):
        InternalTopicWriter(settings).send_messages("nope", [(None, b"v", None)])
    FakeProducer.hang = True
    with pytest.raises(KafkaWriteTimeout):
        InternalTopicWriter(settings).send_messages("one", [(None, b"v", None)], timeout_ms=100)


def test_a_broker_side_request_timeout_is_a_timeout(settings: Settings, fake_kafka: None) -> None:
    FakeProducer.error = kafka_errors.RequestTimedOutError("Request timed out after 30000 ms")
    with pytest.raises(KafkaWriteTimeout, match=r"write to topic 'one' failed .*RequestTimedOutError"):
        InternalTopicWriter(settings).send("one", [(b"a", None)])


def test_ensure_topic_creates_once_and_accepts_an_existing_topic(settings: Settings, fake_kafka: None) -> None:
    writer = InternalTopicWriter(settings)
    writer.ensure_topic("connect-heartbeats")
    writer.ensure_topic("connect-heartbeats")
    writer.ensure_topic("one")  # exists already: TopicAlreadyExistsError is not an error
    [admin] = FakeAdmin.instances
    assert admin.created == ["connect-heartbeats", "one"]
    assert writer.partition_count("connect-heartbeats") == 1


def test_the_writer_shares_one_admin_client_for_metadata_and_topics(settings: Settings, fake_kafka: None) -> None:
    writer = InternalTopicWriter(settings)
    writer.ensure_topic("connect-heartbeats")
    writer.send("connect-status", [(b"a", None)])
    assert len(FakeAdmin.instances) == 1
    assert FakeAdmin.instances[0].config["client_id"] == "connect-state-writer-metadata"


# --- the admin client -------------------------------------------------------------------------------------------------


def test_admin_describes_the_cluster(settings: Settings, fake_kafka: None) -> None:
    FakeAdmin.cluster = {
        "cluster_id": "abc",
        "controller_id": 1,
        "brokers": [{"broker_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
    }
    with KafkaAdmin({"bootstrap.servers": "b:9092"}, client_id="test", timeout_ms=1000) as admin:
        cluster = admin.describe_cluster()
    assert (cluster.cluster_id, cluster.controller_id, cluster.brokers) == ("abc", 1, ((1, "127.0.0.1", 9092),))
    FakeAdmin.errors = [kafka_errors.KafkaTimeoutError("Request timed out")]
    with pytest.raises(KafkaWriteTimeout, match="cannot describe the Kafka cluster at b:9092"):
        KafkaAdmin({"bootstrap.servers": "b:9092"}, client_id="test", timeout_ms=1000).describe_cluster()


def test_admin_ready_topics_leave_out_missing_topics_and_partitions_without_leader(
    settings: Settings, fake_kafka: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def describe_topics(self: FakeAdmin, topics: list[str]) -> list[dict[str, Any]]:
        leaders = {"ready": [1, 1], "electing": [1, -1]}
        return [
            {"name": t, "error_code": 0, "partitions": [{"error_code": 0, "leader_id": id} for id in leaders[t]]}
            if t in leaders
            else {"name": t, "error_code": 3, "partitions": []}
            for t in topics
        ]

    monkeypatch.setattr(FakeAdmin, "describe_topics", describe_topics)
    admin = KafkaAdmin({"bootstrap.servers": "b:9092"}, client_id="test", timeout_ms=1000)
    assert admin.ready_topics(["ready", "electing", "missing"]) == {"ready": 2}


def test_closed_admin_refuses_calls(fake_kafka: None) -> None:
    admin = KafkaAdmin({"bootstrap.servers": "b:9092"}, client_id="test", timeout_ms=1000, name="test admin")
    admin.close()
    with pytest.raises(KafkaWriteError, match="the test admin is closed"):
        admin.partition_count("one")


# --- typed errors with nothing listening (real kafka-python clients) --------------------------------------------------


@pytest.fixture
def unreachable(settings: Settings) -> Settings:
    from connect_state.dev.jvm_service import free_port

    return settings.with_overrides(
        **{"bootstrap.servers": f"127.0.0.1:{free_port()}", "api.kafka.write.timeout.ms": "1000"}
    )


def test_unreachable_cluster_for_the_admin_client(unreachable: Settings) -> None:
    before = set(threading.enumerate())
    admin = KafkaAdmin(unreachable.kafka_client_config(), client_id="test", timeout_ms=1000)
    with pytest.raises(KafkaUnavailableError, match=f"cannot reach Kafka at {unreachable.bootstrap_servers}"):
        admin.describe_cluster()
    time.sleep(0.2)
    assert [t.name for t in set(threading.enumerate()) - before] == []


def test_unreachable_cluster_for_the_group_admin(unreachable: Settings) -> None:
    admin = ConsumerGroupAdmin(unreachable)
    with pytest.raises(ConsumerGroupAdminTimeout, match=f"cannot reach Kafka at {unreachable.bootstrap_servers}"):
        admin.delete_group("g")
    admin.close()
    with pytest.raises(ConsumerGroupAdminError, match="the consumer-group admin client is closed"):
        admin.delete_group("g")


def test_unreachable_cluster_for_the_offsets_reader(unreachable: Settings) -> None:
    before = set(threading.enumerate())
    reader = OffsetsTopicReader(unreachable)
    with pytest.raises(KafkaUnavailableError, match=f"cannot reach Kafka at {unreachable.bootstrap_servers}"):
        reader.latest_offset(b'["c",{"p":1}]', 0, 0)
    reader.close()
    time.sleep(0.2)
    assert [t.name for t in set(threading.enumerate()) - before] == []
