"""The Kafka ACLs of ``connect_state/security/kafka_acls.py`` (the README's commands) are enough, and needed.

One broker for the module (``sasl_broker``: SASL/PLAIN, ``StandardAuthorizer``, nothing allowed without an ACL). The
super user creates the topics and writes what a Connect cluster would have written (connector configs, a topic
status, source offsets, a sink's group offsets); then every ACL :func:`required_acls` lists is granted to the user of
its component, and nothing else. Each component then does its work as its own user, through its own Kafka clients
and the client settings of ``kafka.client.config.file``: the fold jobs (Spark's Kafka source), the API's writes, the
cleanup job's and the heartbeats' Kafka I/O. A few ACLs are then taken away one at a time: the action that needs it
fails at once with the broker's authorization error, not after a timeout.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import NewTopic
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from connect_state.cleanup.reconciler import CleanupIO
from connect_state.core.errors import ConsumerGroupAdminError, KafkaWriteError
from connect_state.core.settings import Settings, load_settings
from connect_state.dev.demo_heartbeats import provider as filestream_heartbeats
from connect_state.formats.config import connector_config_key, serialize_connector_config, task_config_records
from connect_state.formats.offsets import offset_key_bytes, serialize_offset_value
from connect_state.formats.status import TopicStatus, serialize_topic_status, topic_status_key
from connect_state.heartbeats.emitter import HeartbeatOutcome
from connect_state.heartbeats.fold import DuePartition
from connect_state.kafka import ConsumerGroupAdmin, InternalTopicWriter
from connect_state.kafka.log import TopicLogReader
from connect_state.security.kafka_acls import (
    Component,
    ConnectorNames,
    KafkaAcl,
    Operation,
    ResourceType,
    required_acls,
)
from connect_state.spark import active_topics, sink_offsets
from connect_state.spark.cleanup import SparkCleanupIO
from connect_state.spark.heartbeats import HeartbeatSink
from connect_state.spark.offsets import OffsetsJob
from connect_state.spark.streaming import run_job
from tests.fixtures.sasl_broker import SUPER_USER, SaslBroker, acl_bindings
from tests.fixtures.spark import await_query
from tests.integration.helpers import api_client, delta_table, job_settings, run_active_topics, run_connector_states

pytestmark = pytest.mark.slow

SASL_USERS = {component.value: f"{component.value}-secret" for component in Component}
PRINCIPALS = {component: f"User:{component.value}" for component in Component}

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
SOURCE, OWN_SOURCE, HEARTBEAT_SOURCE, SINK = "source-a", "source-own", "source-quiet", "sink-a"
SINK_GROUP = f"connect-{SINK}"
SINK_TOPIC, OWN_OFFSETS, AUDIT_TOPIC = "orders", "own-offsets", "connect-state-audit"
NAMES = ConnectorNames(offsets_topics=(OWN_OFFSETS,), sink_topics=(SINK_TOPIC,), groups=("override-group",))
FAIL_FAST_S = 30.0
"""A refused action must answer within this (the write timeout is 20 s: a refusal taken for a retriable error would
show as a timeout)."""


@dataclass
class Cluster:
    """The module's SASL broker, the settings every component starts from, and the ACLs granted."""

    broker: SaslBroker
    base: Settings
    acls: list[KafkaAcl]

    def settings(self, component: Component | str, tmp_path: Path | None = None) -> Settings:
        """``base`` as ``component``'s user (its own Delta and checkpoint roots under ``tmp_path``)."""
        user = component.value if isinstance(component, Component) else component
        settings = self.broker.settings_for(user, self.base)
        return job_settings(settings, tmp_path) if tmp_path is not None else settings

    def binding(self, component: Component, resource: ResourceType, name: str, operation: Operation) -> set:
        """The one broker ACL of ``component`` for ``operation`` on ``name`` (it must be among the granted ones)."""
        for acl in self.acls:
            held = (acl.component, acl.resource) == (component, resource) and operation in acl.operations
            if held and name in acl.names:
                single = KafkaAcl(component, resource, (name,), (operation,), acl.why, acl.pattern)
                return acl_bindings(single, PRINCIPALS[component])
        raise AssertionError(f"{component} holds no {operation} on {resource} {name}")


def _file(name: str) -> str:
    return f"/tmp/connect-state-acls/{name}.txt"


def _seed(broker: SaslBroker, settings: Settings) -> None:
    """As the super user: the topics, and what a Connect cluster would have written to them."""
    topics = [
        NewTopic(settings.config_storage_topic, 1, 1, topic_configs={"cleanup.policy": "compact"}),
        NewTopic(settings.status_storage_topic, 2, 1, topic_configs={"cleanup.policy": "compact"}),
        NewTopic(settings.offset_storage_topic, 2, 1, topic_configs={"cleanup.policy": "compact"}),
        NewTopic(OWN_OFFSETS, 1, 1, topic_configs={"cleanup.policy": "compact"}),
        NewTopic(SINK_TOPIC, 2, 1),
        NewTopic(AUDIT_TOPIC, 1, 1),
    ]
    with broker.admin() as admin:
        admin.call(lambda client: client.create_topics(topics, wait_for_metadata=True))
    connectors = {
        SOURCE: {"connector.class": FILE_SOURCE, "file": _file(SOURCE), "topic": SINK_TOPIC},
        OWN_SOURCE: {
            "connector.class": FILE_SOURCE,
            "file": _file(OWN_SOURCE),
            "topic": SINK_TOPIC,
            "offsets.storage.topic": OWN_OFFSETS,
        },
        HEARTBEAT_SOURCE: {"connector.class": FILE_SOURCE, "file": _file(HEARTBEAT_SOURCE), "topic": SINK_TOPIC},
        SINK: {"connector.class": FILE_SINK, "file": _file(SINK), "topics": SINK_TOPIC},
    }
    config: list[tuple[str, bytes | None]] = []
    for name, props in connectors.items():
        config.append((connector_config_key(name), serialize_connector_config({"name": name, **props})))
        config.extend(task_config_records(name, [{**props, "task.class": props["connector.class"]}]))
    status = serialize_topic_status(TopicStatus(SINK_TOPIC, SINK, 0, int(time.time() * 1000)))
    with InternalTopicWriter(settings) as writer:
        writer.send(settings.config_storage_topic, [(key.encode(), value) for key, value in config])
        writer.send(settings.status_storage_topic, [(topic_status_key(SINK_TOPIC, SINK).encode(), status)])
        for name, topic in ((SOURCE, settings.offset_storage_topic), (HEARTBEAT_SOURCE, settings.offset_storage_topic),
                            (OWN_SOURCE, OWN_OFFSETS)):  # fmt: skip
            key = offset_key_bytes(name, {"filename": _file(name)})
            writer.send(topic, [(key, serialize_offset_value({"position": 7}))])
    with ConsumerGroupAdmin(settings) as groups:  # the sink's commits (and __consumer_offsets, created by the first)
        groups.alter_group_offsets(SINK_GROUP, {(SINK_TOPIC, 0): 1, (SINK_TOPIC, 1): 2})


@pytest.fixture(scope="module")
def cluster(sasl_broker: SaslBroker, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    base_dir = tmp_path_factory.mktemp("acls")
    base = load_settings(
        overrides={
            "delta.root": str(base_dir / "delta"),
            "checkpoint.root": str(base_dir / "checkpoints"),
            "exactly.once.source.support": "enabled",
            "api.audit.topic": AUDIT_TOPIC,
            "heartbeat.topics.create": "true",  # the widest heartbeat ACLs: Create as well as Write
            "api.kafka.write.timeout.ms": "20000",
            "api.fresh.read.timeout.ms": "20000",
        },
        environ={},
    )
    _seed(sasl_broker, sasl_broker.settings_for(SUPER_USER, base))
    acls = required_acls(base, NAMES)
    for acl in acls:
        sasl_broker.grant(acl_bindings(acl, PRINCIPALS[acl.component]))
    return Cluster(sasl_broker, base, acls)


def _records(cluster: Cluster, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of ``topic``, read by the super user."""
    reader = TopicLogReader(cluster.settings(SUPER_USER), client_id="test-acls-check", timeout_ms=20_000)
    with reader:
        ends = reader.offsets([topic]).ends
        return [(r.key, r.value) for r in reader.read({tp: (None, end) for tp, end in ends.items()})]


def _group_offsets(cluster: Cluster, group: str) -> dict[tuple[str, int], int]:
    with ConsumerGroupAdmin(cluster.settings(SUPER_USER)) as groups:
        return groups.list_group_offsets(group)


# --- the jobs ---------------------------------------------------------------------------------------------------------


def test_jobs_fold_every_topic_with_read_alone(spark: SparkSession, cluster: Cluster, tmp_path: Path) -> None:
    settings = cluster.settings(Component.JOBS, tmp_path)
    run_connector_states(spark, settings)
    run_active_topics(spark, settings)
    assert run_job(OffsetsJob(), spark, settings, available_now=True) == 0

    connectors = {row.name for row in delta_table(spark, settings, "connectors").collect()}
    assert {SOURCE, OWN_SOURCE, HEARTBEAT_SOURCE, SINK} <= connectors
    topics = {(row.connector, row.topic) for row in delta_table(spark, settings, "active_topics").collect()}
    assert (SINK, SINK_TOPIC) in topics
    sources = {(row.connector, row.offsets_topic) for row in delta_table(spark, settings, "source_offsets").collect()}
    assert {(SOURCE, settings.offset_storage_topic), (OWN_SOURCE, OWN_OFFSETS)} <= sources
    sinks = {
        (row.group_id, row.topic, row.partition): row.offset
        for row in delta_table(spark, settings, "sink_offsets").collect()
    }
    assert sinks[(SINK_GROUP, SINK_TOPIC, 0)] == 1


@pytest.mark.parametrize(
    ("resource", "name", "job", "reason"),
    [
        pytest.param(ResourceType.TOPIC, "connect-status", active_topics, "TopicAuthorization", id="topic-read"),
        pytest.param(ResourceType.GROUP, "spark-kafka-", sink_offsets, "Not authorized to access group", id="group"),
    ],
)
def test_a_job_without_read_fails_at_once(
    spark: SparkSession, cluster: Cluster, tmp_path: Path, resource: ResourceType, name: str, job: Any, reason: str
) -> None:
    settings = cluster.settings(Component.JOBS, tmp_path)
    started = time.monotonic()
    read = cluster.binding(Component.JOBS, resource, name, Operation.READ)
    with cluster.broker.without(read), pytest.raises(StreamingQueryException, match=reason):
        await_query(job.start(spark, settings, available_now=True), 120)
    assert time.monotonic() - started < 120


# --- the API ------------------------------------------------------------------------------------------------------


def _latest(cluster: Cluster, topic: str, key: bytes) -> bytes | None:
    values = [value for k, value in _records(cluster, topic) if k == key]
    assert values, f"no record with key {key!r} in {topic}"
    return values[-1]


def test_api_writes_with_its_acls(cluster: Cluster) -> None:
    settings = cluster.settings(Component.API)
    api = api_client(settings)

    info = api.get("/")  # the cluster id: DescribeCluster needs no ACL
    assert info.status_code == 200 and info.get_json()["kafka_cluster_id"], info.get_data(as_text=True)

    for name in (SOURCE, SINK):  # commit-<name> {"tasks":0}, target-state-<name> STOPPED
        response = api.put(f"/connectors/{name}/stop")
        assert response.status_code == 204, response.get_data(as_text=True)
        target = json.loads(_latest(cluster, settings.config_storage_topic, f"target-state-{name}".encode()) or b"")
        assert target == {"state": "PAUSED", "state.v2": "STOPPED"}

    # a source's offsets, in a transaction of connect-cluster-source-a-0 (exactly.once.source.support=enabled)
    partition = {"filename": _file(SOURCE)}
    body = {"offsets": [{"partition": partition, "offset": {"position": 3}}]}
    response = api.patch(f"/connectors/{SOURCE}/offsets", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    key = offset_key_bytes(SOURCE, partition)
    assert _latest(cluster, settings.offset_storage_topic, key) == serialize_offset_value({"position": 3})

    # a sink's group offsets: altered (OffsetCommit), then reset (OffsetFetch, DeleteGroups)
    body = {
        "offsets": [{"partition": {"kafka_topic": SINK_TOPIC, "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]
    }
    response = api.patch(f"/connectors/{SINK}/offsets", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert _group_offsets(cluster, SINK_GROUP)[(SINK_TOPIC, 0)] == 5
    body = {"offsets": [{"partition": {"kafka_topic": SINK_TOPIC, "kafka_partition": 1}, "offset": None}]}
    response = api.patch(f"/connectors/{SINK}/offsets", json=body)  # null: OffsetDelete
    assert response.status_code == 200, response.get_data(as_text=True)
    assert (SINK_TOPIC, 1) not in _group_offsets(cluster, SINK_GROUP)
    response = api.delete(f"/connectors/{SINK}/offsets")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert _group_offsets(cluster, SINK_GROUP) == {}

    audited = [json.loads(value or b"{}") for _key, value in _records(cluster, AUDIT_TOPIC)]
    assert {(row["method"], row["path"]) for row in audited} >= {
        ("PUT", f"/connectors/{SOURCE}/stop"),
        ("DELETE", f"/connectors/{SINK}/offsets"),
    }


_SINK_ALTER = {
    "offsets": [{"partition": {"kafka_topic": SINK_TOPIC, "kafka_partition": 0}, "offset": {"kafka_offset": 9}}]
}
_SOURCE_ALTER = {"offsets": [{"partition": {"filename": _file(SOURCE)}, "offset": {"position": 1}}]}


@pytest.mark.parametrize(
    ("resource", "name", "operation", "method", "path", "body", "status", "reason"),
    [
        pytest.param(
            ResourceType.TOPIC, "connect-configs", Operation.WRITE, "PUT", f"/connectors/{SOURCE}/stop", None, 500,
            "TopicAuthorizationFailed", id="stop-without-config-write",
        ),
        pytest.param(
            ResourceType.TOPIC, "connect-configs", Operation.READ, "PUT", f"/connectors/{SOURCE}/stop", None, 409,
            "TopicAuthorizationFailed", id="stop-without-config-read",
        ),
        pytest.param(
            ResourceType.GROUP, "connect-", Operation.READ, "PATCH", f"/connectors/{SINK}/offsets", _SINK_ALTER, 500,
            "GroupAuthorizationFailed", id="sink-alter-without-group-read",
        ),
        pytest.param(
            ResourceType.TOPIC, SINK_TOPIC, Operation.READ, "PATCH", f"/connectors/{SINK}/offsets", _SINK_ALTER, 500,
            "TopicAuthorizationFailed", id="sink-alter-without-topic-read",
        ),
        pytest.param(
            ResourceType.GROUP, "connect-", Operation.DELETE, "DELETE", f"/connectors/{SINK}/offsets", None, 500,
            "GroupAuthorizationFailed", id="sink-reset-without-group-delete",
        ),
        pytest.param(
            ResourceType.TRANSACTIONAL_ID, "connect-cluster-", Operation.WRITE, "PATCH",
            f"/connectors/{SOURCE}/offsets", _SOURCE_ALTER, 500, "TransactionalIdAuthorizationFailed",
            id="source-alter-without-transactional-id",
        ),
    ],
)  # fmt: skip
def test_api_refused_without_one_acl(
    cluster: Cluster,
    caplog: pytest.LogCaptureFixture,
    resource: ResourceType,
    name: str,
    operation: Operation,
    method: str,
    path: str,
    body: object,
    status: int,
    reason: str,
) -> None:
    settings = cluster.settings(Component.API)
    connector = path.split("/")[2]
    api = api_client(settings)
    stopped = api.put(f"/connectors/{connector}/stop")  # with every ACL: offsets may only change when STOPPED
    assert stopped.status_code == 204, stopped.get_data(as_text=True)
    api = api_client(settings)  # a new app: nothing cached from the request before
    with cluster.broker.without(cluster.binding(Component.API, resource, name, operation)):
        started = time.monotonic()
        with caplog.at_level(logging.ERROR):
            response = api.open(path, method=method, json=body)
        elapsed = time.monotonic() - started
    answer = response.get_data(as_text=True)
    assert response.status_code == status, answer
    assert reason in answer + caplog.text, answer  # in the answer, or (Connect's own message) in the log beside it
    assert elapsed < FAIL_FAST_S, f"refused after {elapsed:.1f} s"


# --- cleanup and heartbeats, through their Kafka I/O ------------------------------------------------------------------


def test_cleanup_io_with_its_acls(spark: SparkSession, cluster: Cluster, tmp_path: Path) -> None:
    settings = cluster.settings(Component.CLEANUP, tmp_path)
    group = "connect-sink-deleted"
    with ConsumerGroupAdmin(cluster.settings(SUPER_USER)) as groups:
        groups.alter_group_offsets(group, {(SINK_TOPIC, 0): 4})
    io: CleanupIO = SparkCleanupIO(spark, settings)
    try:
        assert any(key == connector_config_key(SINK).encode() for key, _value, _offset in io.config_records())
        status_key = topic_status_key(SINK_TOPIC, SINK).encode()
        assert status_key in io.live_keys(settings.status_storage_topic, contains=SINK)

        delete = cluster.binding(Component.CLEANUP, ResourceType.GROUP, "connect-", Operation.DELETE)
        with cluster.broker.without(delete), pytest.raises(ConsumerGroupAdminError, match="GroupAuthorizationFailed"):
            io.delete_group(group)
        assert io.delete_group(group) is True
        assert _group_offsets(cluster, group) == {}

        status = settings.status_storage_topic
        write = cluster.binding(Component.CLEANUP, ResourceType.TOPIC, status, Operation.WRITE)
        with cluster.broker.without(write), pytest.raises(KafkaWriteError, match="TopicAuthorizationFailed"):
            io.write_tombstones(status, [status_key])  # the writer replaces its fatal producer: the next call works
        io.write_tombstones(status, [status_key])
        assert _latest(cluster, status, status_key) is None
    finally:
        io.close()  # type: ignore[attr-defined]


def _due(settings: Settings) -> DuePartition:
    """The quiet source's one partition, due now, at the offsets-topic record the fold would have read it from."""
    partition = {"filename": _file(HEARTBEAT_SOURCE)}
    key = offset_key_bytes(HEARTBEAT_SOURCE, partition)
    reader = TopicLogReader(settings, client_id="test-acls-due", timeout_ms=20_000)
    with reader:
        ends = reader.offsets([settings.offset_storage_topic]).ends
        found = [r for r in reader.read({tp: (None, end) for tp, end in ends.items()}) if r.key == key]
    now = int(time.time() * 1000)
    props = {"connector.class": FILE_SOURCE, "file": _file(HEARTBEAT_SOURCE), "topic": SINK_TOPIC}
    return DuePartition(
        HEARTBEAT_SOURCE, FILE_SOURCE, dict(props), partition, key, {"position": 7}, now - 60_000, 60_000, 30_000,
        settings.heartbeat_records_topic, now, found[-1].partition, found[-1].offset,
    )  # fmt: skip


def test_heartbeats_with_their_acls(cluster: Cluster, tmp_path: Path) -> None:
    settings = cluster.settings(Component.HEARTBEATS, tmp_path)
    topic = settings.heartbeat_records_topic
    due = _due(cluster.settings(Component.HEARTBEATS))
    sink = HeartbeatSink(settings, providers={FILE_SOURCE: filestream_heartbeats})
    try:
        create = cluster.binding(Component.HEARTBEATS, ResourceType.TOPIC, topic, Operation.CREATE)
        with cluster.broker.without(create):
            refused = sink.emitter.emit(due, int(time.time() * 1000))
        assert [row.outcome for row in refused] == [HeartbeatOutcome.FAILED]
        assert "TopicAuthorizationFailed" in (refused[0].error or "")

        sent = sink.emitter.emit(due, int(time.time() * 1000))  # creates the topic, sends, commits the offset
        assert [(row.outcome, row.error) for row in sent] == [(HeartbeatOutcome.PRODUCED, None)]
        assert sent[0].committed_offset == '{"position":7}'
        assert [key for key, _value in _records(cluster, topic)] == [_file(HEARTBEAT_SOURCE).encode()]
    finally:
        sink.close()


def test_a_refused_write_leaves_the_writer_usable(cluster: Cluster) -> None:
    """kafka-python's idempotent producer holds a TopicAuthorizationFailed fatal (Java's fails the batch only): the
    writer replaces it, so one topic the process may not write does not stop its writes to the others."""
    record = [(b"test", b'{"method":"TEST","path":"/"}')]
    write = cluster.binding(Component.API, ResourceType.TOPIC, AUDIT_TOPIC, Operation.WRITE)
    with InternalTopicWriter(cluster.settings(Component.API)) as writer:
        writer.send(AUDIT_TOPIC, record)
        with cluster.broker.without(write), pytest.raises(KafkaWriteError, match="TopicAuthorizationFailed"):
            writer.send(AUDIT_TOPIC, record)
        writer.send(AUDIT_TOPIC, record)  # the ACL is back
