"""Helpers shared by the integration tests: per-test settings, job runs, our API's and Connect's answers, Kafka
producers and readers."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from flask import Flask
from flask.testing import FlaskClient
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from pyspark.sql import DataFrame, SparkSession

from connect_state.api import close_app, create_app
from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.kafka.partitioner import partition_for_key
from connect_state.spark import active_topics, connector_states
from connect_state.spark.streaming import Job, run_job
from tests.fixtures.spark import await_query

CONNECT_WAIT_S = 90.0
"""How long a test waits for the Connect worker to reach a state (connectors start, stop, commit offsets)."""


def unique(prefix: str) -> str:
    """A name no other test of the session uses (they share one Connect worker)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def job_settings(base: Settings, tmp_path: Path, **overrides: str) -> Settings:
    """The session's cluster settings with this test's own Delta and checkpoint roots."""
    return base.with_overrides(
        **{"delta.root": str(tmp_path / "delta"), "checkpoint.root": str(tmp_path / "checkpoints")},
        **overrides,
    )


def run_active_topics(spark: SparkSession, settings: Settings, timeout_s: float = 180.0) -> None:
    """One catch-up run of the active-topics job (``Trigger.AvailableNow``), bounded in time."""
    await_query(active_topics.start(spark, settings, available_now=True), timeout_s)


def run_connector_states(spark: SparkSession, settings: Settings, timeout_s: float = 240.0) -> None:
    """One catch-up run of the connector-states job: the ``connectors`` table our API reads each connector from."""
    await_query(connector_states.start(spark, settings, available_now=True), timeout_s)


@contextmanager
def running(
    name: str, run: Callable[[threading.Event], int], stop_timeout_s: float = 180.0
) -> Iterator[threading.Thread]:
    """``run(stop)`` (a continuous run) in a thread for the block, which gets the thread; stopped at the block's end,
    where a run that failed, or did not stop within ``stop_timeout_s``, fails the test."""
    stop = threading.Event()
    status: list[int] = []
    thread = threading.Thread(target=lambda: status.append(run(stop)), name=f"test-{name}", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(stop_timeout_s)
    assert not thread.is_alive(), f"{name} did not stop within {stop_timeout_s} s"
    assert status == [0], f"{name} ended with {status}"


def continuous_job(job: Job, spark: SparkSession, settings: Settings) -> AbstractContextManager[threading.Thread]:
    """``job`` running continuously (as its console script runs it) for the block (:func:`running`)."""
    return running(job.name, lambda stop: run_job(job, spark, settings, False, stop=stop))


def delta_table(spark: SparkSession, settings: Settings, name: str) -> DataFrame:
    """The Delta table ``name`` under the settings' ``delta.root``, read with Spark."""
    return spark.read.format("delta").load(str(settings.delta_root / name))


_OPEN_APPS: list[Flask] = []


def api_client(settings: Settings) -> FlaskClient:
    """A test client of our API on ``settings``; the app (its Kafka clients, its follower thread) is closed after the
    test by :func:`close_api_clients` (an autouse fixture of tests/integration/conftest.py)."""
    app = create_app(settings)
    _OPEN_APPS.append(app)
    return app.test_client()


def close_api_clients() -> None:
    """Close every app :func:`api_client` made."""
    while _OPEN_APPS:
        close_app(_OPEN_APPS.pop())


def our_topics(client: FlaskClient, name: str) -> set[str]:
    response = client.get(f"/connectors/{name}/topics")
    assert response.status_code == 200, response.get_data(as_text=True)
    return set(response.get_json()[name]["topics"])


def create_topic(settings: Settings, topic: str, partitions: int, *, compacted: bool = False) -> None:
    """Create ``topic`` with ``partitions`` partitions (replication 1) on the session's broker; returns once the broker
    describes it with a leader for every partition (KRaft acknowledges the creation before its metadata cache knows
    the topic: a producer asking right away may be told it does not exist)."""
    configs = {"cleanup.policy": "compact"} if compacted else {}
    admin = KafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)], wait_for_metadata=True)
    finally:
        admin.close()


# --- Connect's answers ----------------------------------------------------------------------------------------------


def connector_state(connect: ConnectRestClient, name: str) -> tuple[str | None, list[str]]:
    """The connector's state and its task states, as Connect reports them (``GET /connectors/<name>/status``)."""
    status = connect.connector_status(name) or {}
    return status.get("connector", {}).get("state"), [task.get("state") for task in status.get("tasks", [])]


def wait_state(
    connect: ConnectRestClient, name: str, state: str, tasks: int, timeout_s: float = CONNECT_WAIT_S
) -> None:
    """Until Connect reports the connector and exactly ``tasks`` tasks in ``state``."""
    expected = (state, [state] * tasks)
    connect.wait_for(lambda: connector_state(connect, name) == expected, timeout_s, description=f"{name} {expected}")


def delete_and_wait(connect: ConnectRestClient, name: str, timeout_s: float = CONNECT_WAIT_S) -> None:
    """Delete the connector through Connect and wait until Connect no longer reports a status for it."""
    connect.delete_connector(name)
    connect.wait_for(lambda: connect.connector_status(name) is None, timeout_s, description=f"{name} deleted")


def connect_offsets(connect: ConnectRestClient, name: str) -> list[dict[str, Any]]:
    """Connect's ``GET /connectors/<name>/offsets`` entries (the answer must be a 200)."""
    status, body = connect.get(connect.connector_path(name, "offsets"))
    assert status == 200, body
    return body["offsets"]


def source_position(connect: ConnectRestClient, name: str) -> int | None:
    """The position of a FileStreamSource's (only) partition as Connect reports it, None while it has none."""
    status, body = connect.get(connect.connector_path(name, "offsets"))
    if status != 200 or not body or not body.get("offsets"):
        return None
    return body["offsets"][0]["offset"]["position"]


# --- Kafka ----------------------------------------------------------------------------------------------------------


def _produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes | None, int]]) -> None:
    """Send ``(key, value, partition)`` records with a real producer (acks=all); wait until each is acknowledged."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        futures = [producer.send(topic, key=k, value=v, partition=partition) for k, v, partition in records]
        producer.flush(30)
        for future in futures:
            future.get(timeout=30)
    finally:
        producer.close()


def produce_keyed(bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes | None]], partitions: int) -> None:
    """Send ``(key, value)`` records with a real producer (acks=all), each to the partition the Java producer picks
    for its key on a topic of ``partitions`` partitions, as Connect's workers write their internal topics."""
    _produce(bootstrap, topic, [(k, v, partition_for_key(k, partitions)) for k, v in records])


def produce_values(bootstrap: str, topic: str, records: Sequence[tuple[int, bytes]]) -> None:
    """Send values without a key with a real producer (acks=all), each ``(partition, value)`` to its partition."""
    _produce(bootstrap, topic, [(None, value, partition) for partition, value in records])


def read_topic(
    bootstrap: str,
    topic: str,
    partitions: Sequence[int] | None = None,
    timeout_s: float = 60.0,
    isolation_level: str = "read_uncommitted",
) -> list[Any]:
    """Every record of ``topic`` (of its ``partitions``, default all), from the beginning up to the end offsets at the
    call, in the order polled (each partition's in offset order); fails after ``timeout_s``. A topic that does not
    exist (nothing was ever produced to it, with auto-creation off) has no records. With ``read_committed``, records
    of open and aborted transactions are left out (and the end is the last stable offset)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation_level)
    try:
        # partitions_for_topic asks the broker when its cache lacks the topic: empty means there is no such topic
        numbers = sorted(consumer.partitions_for_topic(topic)) if partitions is None else partitions
        if not numbers:
            return []
        parts = [TopicPartition(topic, p) for p in numbers]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        end = consumer.end_offsets(parts)
        records: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in parts):
            assert time.monotonic() < deadline, f"reading {topic} took over {timeout_s:.0f} s"
            for batch in consumer.poll(timeout_ms=1000).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()
