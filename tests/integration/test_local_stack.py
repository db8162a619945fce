"""The embedded local stack against itself: a real KRaft broker and real Connect workers (as Connect's
ConnectorTopicsIntegrationTest and InternalTopicsIntegrationTest set theirs up)."""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from connect_state.core.errors import LocalStackError
from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient, ConnectRestError
from connect_state.dev.jvm_service import free_ports
from connect_state.dev.local_stack import ConnectWorker, KafkaBroker, LocalStack, ready_topics

pytestmark = pytest.mark.integration

POLL_TIMEOUT = 60.0
TRACKING_DISABLED = "Topic tracking is disabled."
RESET_DISABLED = "Topic tracking reset is disabled."


@pytest.fixture
def admin(kafka_broker: KafkaBroker) -> Iterator[object]:
    """kafka-python's admin client on the real broker (an oracle independent of local_stack's own probe)."""
    from kafka import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers, request_timeout_ms=30000)
    try:
        yield client
    finally:
        client.close()


def _topic_layout(admin: object, topics: list[str]) -> dict[str, tuple[int, set[int]]]:
    """``{topic: (partition count, replication factors seen)}`` for the topics that exist."""
    layout = {}
    for topic in admin.describe_topics(topics):
        if topic["error_code"] == 0:
            partitions = topic["partitions"]
            layout[topic["name"]] = (len(partitions), {len(p["replica_nodes"]) for p in partitions})
    return layout


def _cleanup_policy(admin: object, topic: str) -> str:
    from kafka.admin import ConfigResource, ConfigResourceType

    resource = ConfigResource(ConfigResourceType.TOPIC, topic, {"cleanup.policy": None})
    configs = admin.describe_configs([resource], config_filter="all")
    return configs["topic"][topic]["cleanup.policy"]["value"]


def _consume_values(bootstrap: str, topic: str, expected: int, timeout: float = POLL_TIMEOUT) -> list[bytes]:
    """Read ``topic`` from the beginning until ``expected`` values came back or ``timeout`` passed."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None)
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
    finally:
        consumer.close()
    return values


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:8]


# --- internal topics (§4.5, §7.4) -----------------------------------------------------------------------------------


def test_internal_topics_have_connect_default_layout(
    connect_worker: ConnectWorker, stack_settings: Settings, admin: object
) -> None:
    expected = {
        stack_settings.status_storage_topic: 5,
        stack_settings.offset_storage_topic: 25,
        stack_settings.config_storage_topic: 1,
    }
    layout = _topic_layout(admin, list(expected))
    assert {topic: count for topic, (count, _) in layout.items()} == expected
    assert all(replication == {1} for _, replication in layout.values())
    for topic in expected:
        assert _cleanup_policy(admin, topic) == "compact", topic


def test_readiness_probes_agree_with_kafka_python(
    connect_worker: ConnectWorker, kafka_broker: KafkaBroker, stack_settings: Settings, admin: object
) -> None:
    """What the local stack waits for (through the Kafka layer) against kafka-python's own admin client."""
    cluster = kafka_broker.describe_cluster()
    assert cluster.cluster_id == kafka_broker.cluster_id == admin.describe_cluster()["cluster_id"]
    assert cluster.brokers == ((KafkaBroker.node_id, "127.0.0.1", kafka_broker.port),)
    topics = connect_worker.internal_topics
    layout = _topic_layout(admin, topics)
    assert ready_topics(kafka_broker.bootstrap_servers, topics) == {t: count for t, (count, _) in layout.items()}
    assert ready_topics(kafka_broker.bootstrap_servers, ["never-created-by-anyone"]) == {}


def test_worker_answers_for_our_broker_and_has_file_connectors(
    connect: ConnectRestClient, kafka_broker: KafkaBroker
) -> None:
    info = connect.server_info()
    assert info["kafka_cluster_id"] == kafka_broker.cluster_id
    status, plugins = connect.get("/connector-plugins")
    assert status == 200
    assert {p["class"] for p in plugins} >= {
        "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "org.apache.kafka.connect.file.FileStreamSinkConnector",
    }


def test_services_log_at_info_to_files_under_the_data_dir(
    connect_worker: ConnectWorker, kafka_broker: KafkaBroker, stack_settings: Settings
) -> None:
    for service, started in ((kafka_broker, "Kafka Server started"), (connect_worker, "Kafka Connect started")):
        assert service.log_file.is_relative_to(stack_settings.local_data_dir)
        text = service.log_file.read_text(encoding="utf-8", errors="replace")
        assert started in text, service.log_file
        assert "] INFO " in text
        assert " INFO " not in service.out_file.read_text(encoding="utf-8", errors="replace")


# --- FileStream connectors and active topics (§7.1) -----------------------------------------------------------------


def test_file_source_to_topic_to_file_sink(
    connect: ConnectRestClient, kafka_broker: KafkaBroker, tmp_path: Path, unique: str
) -> None:
    topic, source, sink = f"lines-{unique}", f"file-source-{unique}", f"file-sink-{unique}"
    lines = [f"line {i} of {unique}" for i in range(5)]
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        connect.create_connector(
            source,
            {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "tasks.max": "1",
                "file": str(source_file),
                "topic": topic,
            },
        )
        values = _consume_values(kafka_broker.bootstrap_servers, topic, len(lines))
        assert [json.loads(v) for v in values] == lines  # JsonConverter, schemas disabled: JSON strings

        connect.create_connector(
            sink,
            {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "tasks.max": "1",
                "file": str(sink_file),
                "topics": topic,
            },
        )
        connect.wait_for(
            lambda: sink_file.is_file() and sink_file.read_text(encoding="utf-8").splitlines() == lines,
            POLL_TIMEOUT,
            description=f"{sink_file} to hold the {len(lines)} lines",
        )
        for name in (source, sink):
            assert connect.wait_for(lambda n=name: connect.active_topics(n) == {topic}, POLL_TIMEOUT)
        status, body = connect.get(f"/connectors/{source}/topics")
        assert (status, body) == (200, {source: {"topics": [topic]}})
    finally:
        connect.delete_connector(source, missing_ok=True)
        connect.delete_connector(sink, missing_ok=True)


def test_unknown_connector_has_no_active_topics(connect: ConnectRestClient) -> None:
    assert connect.get("/connectors/no-such-connector/topics") == (200, {"no-such-connector": {"topics": []}})


# --- a second Connect cluster on the same broker --------------------------------------------------------------------


def test_worker_with_topic_tracking_disabled_answers_403(extra_connect_worker, admin: object) -> None:
    worker = extra_connect_worker(topic_tracking_enable=False)
    client = worker.client()
    assert client.get("/connectors/x/topics") == (403, {"error_code": 403, "message": TRACKING_DISABLED})
    assert client.put("/connectors/x/topics/reset") == (403, {"error_code": 403, "message": TRACKING_DISABLED})
    # its own cluster: own internal topics with Connect's layout, and none of the shared worker's connectors
    layout = _topic_layout(admin, worker.internal_topics)
    assert {t: n for t, (n, _) in layout.items()} == {
        worker.config_topic: 1,
        worker.offset_topic: 25,
        worker.status_topic: 5,
    }
    assert client.list_connectors() == []


def test_worker_with_reset_disabled_answers_403_on_reset_only(extra_connect_worker) -> None:
    client = extra_connect_worker({"topic.tracking.allow.reset": "false"}).client()
    assert client.get("/connectors/x/topics") == (200, {"x": {"topics": []}})
    assert client.put("/connectors/x/topics/reset") == (403, {"error_code": 403, "message": RESET_DISABLED})


# --- failures are clear ---------------------------------------------------------------------------------------------


def test_missing_jars_say_make_jars(stack_settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(LocalStackError, match="make jars"):
        KafkaBroker(stack_settings, data_dir=tmp_path / "broker", lib_dir=tmp_path).start()


def test_port_in_use_is_reported(stack_settings: Settings, tmp_path: Path) -> None:
    broker_port, controller_port = free_ports(2)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", broker_port))
        squatter.listen()
        broker = KafkaBroker(
            stack_settings, port=broker_port, controller_port=controller_port, data_dir=tmp_path / "broker"
        )
        with pytest.raises(LocalStackError, match=f"port {broker_port} \\(local.broker.port\\).*already in use"):
            broker.start()
    assert not broker.is_running()


def test_worker_without_a_broker_says_start_the_broker(stack_settings: Settings, tmp_path: Path) -> None:
    broker_port, connect_port = free_ports(2)
    worker = ConnectWorker(
        stack_settings,
        port=connect_port,
        bootstrap_servers=f"127.0.0.1:{broker_port}",
        data_dir=tmp_path / "connect",
    )
    with pytest.raises(LocalStackError, match=r"no Kafka broker answers at .*start the broker before the worker"):
        worker.start()
    assert not worker.is_running()


def test_failed_start_reports_the_log_tail(stack_settings: Settings, tmp_path: Path) -> None:
    broker_port, controller_port = free_ports(2)
    broker = KafkaBroker(
        stack_settings,
        port=broker_port,
        controller_port=controller_port,
        data_dir=tmp_path / "broker",
        overrides={"process.roles": "no-such-role"},
        start_timeout=60,
    )
    with pytest.raises(LocalStackError) as failure:
        broker.start()
    assert "last lines of" in str(failure.value)
    assert not broker.is_running()


def test_rest_client_raises_without_an_answer() -> None:
    (port,) = free_ports(1)
    with pytest.raises(ConnectRestError, match="no answer"):
        ConnectRestClient(f"http://127.0.0.1:{port}", timeout=2).get("/")


def test_local_stack_stops_worker_then_broker(stack_settings: Settings, tmp_path: Path) -> None:
    broker_port, controller_port, connect_port = free_ports(3)
    settings = stack_settings.with_overrides(
        **{
            "local.data.dir": str(tmp_path / "local"),
            "local.broker.port": str(broker_port),
            "local.controller.port": str(controller_port),
            "local.connect.port": str(connect_port),
        }
    )
    with LocalStack(settings, fresh=True) as stack:
        assert ConnectRestClient(stack.connect_url).list_connectors() == []
        processes = (stack.worker._proc, stack.broker._proc)
    assert all(p is not None and p.poll() is not None for p in processes)
    assert not stack.worker.is_running() and not stack.broker.is_running()
