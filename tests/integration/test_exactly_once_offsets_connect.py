"""KIP-875 source offsets on a Connect cluster with exactly-once source support (KIP-618), through our API.

A worker of its own Connect cluster runs with ``exactly.once.source.support=enabled`` (Connect's
``testAlterSourceConnectorOffsetsExactlyOnceSupportEnabled`` and
``testResetSourceConnectorOffsetsExactlyOnceSupportEnabled`` in OffsetsApiIntegrationTest). Its leader writes a
``tasks-fencing-<name>`` record when the source first starts, so once the source is stopped a round of zombie fencing is
due before its offsets may change. A zombie, a transactional producer with the transactional id of a task the last
fencing record counts and an open transaction, is fenced by our PATCH: its transaction is aborted and its commit
refused; our offsets are written in a transaction (a commit marker follows them). Our offsets are then honoured by the
worker (its own ``GET /offsets``, and the position the source resumes from). When the broker refuses the fencing, our
answer is Connect's 500 and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kafka_errors

from connect_state.connect.rest import ZOMBIE_FENCING_FAILED, offsets_success_message
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.dev.local_stack import ConnectWorker
from connect_state.formats.config import serialize_task_count, task_count_key
from connect_state.kafka import InternalTopicWriter
from tests.integration.helpers import api_client, connect_offsets, job_settings, read_topic, unique, wait_state

pytestmark = [pytest.mark.integration]
WAIT_S = 90.0
ALTERED = offsets_success_message("altered", True)  # FileStreamSourceConnector.alterOffsets: true
RESET = offsets_success_message("reset", True)


@pytest.fixture
def eos_worker(extra_connect_worker) -> Iterator[ConnectWorker]:
    yield extra_connect_worker({"exactly.once.source.support": "enabled"})


def committed_values(bootstrap: str, topic: str) -> list[str]:
    """Every committed value of ``topic`` (``read_committed``: aborted and open transactions' records are left out)."""
    return [record.value.decode() for record in read_topic(bootstrap, topic, isolation_level="read_committed")]


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """The end offset of every partition of ``topic`` (``read_uncommitted``: open and aborted writes count too)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        return {tp.partition: offset for tp, offset in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


def position(connect: ConnectRestClient, name: str, path: Path) -> object:
    entries = connect_offsets(connect, name)
    return next((e["offset"] for e in entries if e["partition"] == {"filename": str(path)}), None)


def stop(connect: ConnectRestClient, name: str) -> None:
    assert connect.put(connect.connector_path(name, "stop"))[0] == 204
    wait_state(connect, name, "STOPPED", 0)


@pytest.mark.slow
def test_offsets_change_after_zombie_fencing_and_in_a_transaction(eos_worker, tmp_path):
    worker = eos_worker
    connect = worker.client()
    bootstrap = worker.bootstrap_servers
    settings = job_settings(
        worker.worker_settings(),
        tmp_path,
        **{"connect.group.id": worker.group_id, "exactly.once.source.support": "enabled"},
    )
    api = api_client(settings)
    source, topic = unique("eos-source"), unique("eos-topic")
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["a", "b", "c", "d"])
    connect.create_connector(source, file_source_config(source, source_file, topic))
    wait_state(connect, source, "RUNNING", 1)
    connect.wait_for(lambda: position(connect, source, source_file) == {"position": 8}, WAIT_S, description="at 8")
    assert committed_values(bootstrap, topic) == ["a", "b", "c", "d"]
    # As if the connector had run 2 tasks before: the leader's last fencing round recorded 2 task producers (the one
    # task of a FileStream source never uses task 1's transactional id, so only the fencing round can fence it).
    with InternalTopicWriter(settings) as writer:
        writer.send(worker.config_topic, [(task_count_key(source).encode(), serialize_task_count(2))])
    stop(connect, source)

    # A zombie of task 1: a producer with that task's transactional id, holding an open transaction.
    transactional_id = f"{worker.group_id}-{source}-1"
    zombie = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(topic, value=b"zombie", partition=0).get(timeout=30)

        body = {"offsets": [{"partition": {"filename": str(source_file)}, "offset": {"position": 4}}]}
        before = end_offsets(bootstrap, worker.offset_topic)
        response = api.patch(f"/connectors/{source}/offsets", json=body)
        assert (response.status_code, response.get_json()) == (200, {"message": ALTERED})
        # One offset record and the transaction's commit marker.
        after = end_offsets(bootstrap, worker.offset_topic)
        assert sum(after.values()) - sum(before.values()) == 2, (before, after)

        # Fenced: its transaction was aborted (read_committed never shows it) and it can no longer commit.
        with pytest.raises(kafka_errors.KafkaError) as fenced:
            zombie.commit_transaction()
        assert isinstance(fenced.value, kafka_errors.ProducerFencedError | kafka_errors.InvalidProducerEpochError)
    finally:
        zombie.close(timeout=0)
    assert "zombie" not in committed_values(bootstrap, topic)
    connect.wait_for(
        lambda: position(connect, source, source_file) == {"position": 4},
        WAIT_S,
        description="Connect's GET /offsets shows the offset we wrote in a transaction",
    )

    # Resumed: the source re-reads from byte 4, so "c" and "d" are produced a second time.
    assert connect.put(connect.connector_path(source, "resume"))[0] == 202
    wait_state(connect, source, "RUNNING", 1)
    connect.wait_for(
        lambda: committed_values(bootstrap, topic) == ["a", "b", "c", "d", "c", "d"],
        WAIT_S,
        description="c and d again after resuming from position 4",
    )
    connect.wait_for(lambda: position(connect, source, source_file) == {"position": 8}, WAIT_S, description="at 8")

    # Reset after another stop: fenced again, tombstoned in a transaction; Connect lists no offsets.
    stop(connect, source)
    response = api.delete(f"/connectors/{source}/offsets")
    assert (response.status_code, response.get_json()) == (200, {"message": RESET})
    connect.wait_for(lambda: connect_offsets(connect, source) == [], WAIT_S, description="offsets reset")

    # The broker refuses the fencing (a transaction timeout above its transaction.max.timeout.ms): Connect's 500,
    # our reason and advice, and nothing written.
    refusing = api_client(settings.with_overrides(**{"kafka.client.properties": "transaction.timeout.ms=3600000"}))
    before = end_offsets(bootstrap, worker.offset_topic)
    response = refusing.patch(f"/connectors/{source}/offsets", json=body)
    assert response.status_code == 500
    message = response.get_json()["message"]
    assert message.startswith(ZOMBIE_FENCING_FAILED)
    assert f"'{worker.group_id}-{source}-0'" in message and "no offsets were written" in message
    assert end_offsets(bootstrap, worker.offset_topic) == before
    connect.delete_connector(source)
