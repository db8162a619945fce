"""Issue 10 against the real Connect worker: writes decided on fresh state, and recoverable writes.

Each stale-state case of the issue, with the tables made stale on purpose (a catch-up run of the job, then a change
through Connect the table does not know about), checked against Connect's own answers:

* a stop (pause, resume) sent right after a deletion through Connect: 404 like Connect, nothing written, and a
  connector created again under the name starts RUNNING;
* a PATCH / DELETE of offsets right after a resume through Connect: refused as Connect refuses it (400);
* a topics reset racing a topic recorded after the table's last batch, an offsets reset racing a partition recorded
  after it: everything is reset, as Connect then shows;
* a stop and a delete whose second record fails (a writer that writes the first record, then fails): the retry
  completes them, and Connect honours the result (the connector created again after the delete starts RUNNING).

Every wait is bounded (``WAIT_S``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest

from connect_state.api import close_app, create_app
from connect_state.connect.rest import not_stopped_message, offsets_success_message
from connect_state.core.errors import KafkaWriteError
from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.kafka import InternalTopicWriter
from connect_state.kafka.log import ConfigTopicTail, TopicLogReader
from connect_state.progress.freshness import HEADER, parse_lag_header
from connect_state.spark import source_offsets
from tests.fixtures.spark import await_query
from tests.integration.helpers import (
    connect_offsets,
    create_topic,
    job_settings,
    our_topics,
    produce_values,
    run_active_topics,
    run_connector_states,
    unique,
    wait_state,
)

pytestmark = [pytest.mark.integration]
WAIT_S = 90.0


@pytest.fixture
def settings(stack_settings: Settings, tmp_path) -> Settings:
    # GETs from the tables alone (no follower of the status and offsets topics): the tables are stale on purpose.
    return job_settings(stack_settings, tmp_path, **{"api.follow.topics": "false"})


def answer(response: Any) -> tuple[int, Any]:
    return response.status_code, response.get_json()


def create_source(connect: ConnectRestClient, tmp_path, name: str) -> None:
    source_file = tmp_path / f"{name}.txt"
    append_lines(source_file, ["a", "b"])
    connect.create_connector(name, file_source_config(name, source_file, unique("fresh-topic")))
    wait_state(connect, name, "RUNNING", 1, WAIT_S)


# --- decided on the config topic, not on the (stale) table ---------------------------------------------------------


def settled(ask: Any, timeout_s: float = 30.0) -> Any:
    """Connect's answer once it is not its momentary 409 (a worker that has not yet read the resume it was just sent
    answers "stale configuration" until it has): the answer the test compares ours with."""
    deadline = time.monotonic() + timeout_s
    answer_ = ask()
    while answer_[0] == 409 and time.monotonic() < deadline:
        time.sleep(0.2)
        answer_ = ask()
    return answer_


@pytest.mark.spark
def test_writes_decided_on_the_config_topic_not_on_the_table(spark, connect, settings, api, tmp_path):
    deleted, resumed = unique("fresh-deleted"), unique("fresh-resumed")
    create_source(connect, tmp_path, deleted)
    create_source(connect, tmp_path, resumed)
    assert connect.put(connect.connector_path(resumed, "stop"))[0] == 204
    wait_state(connect, resumed, "STOPPED", 0, WAIT_S)
    run_connector_states(spark, settings)  # the table: `deleted` RUNNING, `resumed` STOPPED with 0 tasks

    # Deleted through Connect: the table still lists it, our writes answer Connect's 404 and write nothing.
    connect.delete_connector(deleted)
    assert deleted in api.get("/connectors").get_json(), "the table is stale on purpose"
    for action in ("stop", "pause", "resume"):
        ours = answer(api.put(f"/connectors/{deleted}/{action}"))
        assert ours == (404, {"error_code": 404, "message": f"Unknown connector {deleted}"})
        assert ours == connect.put(connect.connector_path(deleted, action))
    assert answer(api.delete(f"/connectors/{deleted}")) == connect.delete(connect.connector_path(deleted))

    # Created again under the name: it starts (no STOPPED or PAUSED target state was left behind).
    create_source(connect, tmp_path, deleted)

    # Resumed through Connect: the table says STOPPED, our PATCH and DELETE of offsets are refused like Connect's.
    assert connect.put(connect.connector_path(resumed, "resume"))[0] == 202
    body = {"offsets": [{"partition": {"filename": "/x"}, "offset": {"position": 1}}]}
    ours = answer(api.patch(f"/connectors/{resumed}/offsets", json=body))
    assert ours == (400, {"error_code": 400, "message": not_stopped_message(resumed)})
    assert ours == settled(lambda: connect.patch(connect.connector_path(resumed, "offsets"), body))
    ours = answer(api.delete(f"/connectors/{resumed}/offsets"))
    assert ours == settled(lambda: connect.request("DELETE", connect.connector_path(resumed, "offsets")))
    assert ours[0] == 400
    wait_state(connect, resumed, "RUNNING", 1, WAIT_S)

    # The lag header of a GET is computed against the real broker's end offsets.
    [lag] = parse_lag_header(api.get(f"/connectors/{resumed}/status").headers[HEADER])
    assert lag.table == "connectors" and lag.records is not None and lag.records > 0
    for name in (deleted, resumed):
        connect.delete_connector(name)


def test_the_config_topic_tail_agrees_with_connect(connect, settings, tmp_path):
    """The API's fresh view of the real config topic: Connect's connectors, read incrementally."""
    name = unique("fresh-tail")
    with TopicLogReader(settings, client_id="test-config-tail") as reader:
        tail = ConfigTopicTail(reader, settings.config_storage_topic)
        before = tail.read_to_end(30_000, [name])
        assert not before.connector(name).exists
        connect.create_connector(name, file_source_config(name, tmp_path / "in.txt", unique("fresh-topic")))
        after = tail.read_to_end(30_000, [name])
        assert after.connector(name).exists
        assert set(connect.list_connectors()) <= set(after.configured)
        assert after.ends[(settings.config_storage_topic, 0)] > before.ends[(settings.config_storage_topic, 0)]
        connect.delete_connector(name)
        assert not tail.read_to_end(30_000, [name]).connector(name).exists


# --- resets racing records after the table's last batch ------------------------------------------------------------


@pytest.mark.spark
def test_topics_reset_racing_a_topic_recorded_after_the_last_batch(spark, connect, settings, api, tmp_path):
    sink, first, second = unique("fresh-sink"), unique("fresh-a"), unique("fresh-b")
    for topic in (first, second):
        create_topic(settings, topic, 1)
    connect.create_connector(sink, file_sink_config(sink, tmp_path / "out.txt", [first, second]))
    produce_values(settings.bootstrap_servers, first, [(0, b"one")])
    connect.wait_for(lambda: connect.active_topics(sink) == {first}, WAIT_S, description=f"{sink} on {first}")
    run_active_topics(spark, settings)
    produce_values(settings.bootstrap_servers, second, [(0, b"two")])
    connect.wait_for(lambda: connect.active_topics(sink) == {first, second}, WAIT_S, description="both topics")
    assert our_topics(api, sink) == {first}, "the table is stale on purpose"

    response = api.put(f"/connectors/{sink}/topics/reset")
    assert response.status_code == 202, response.get_data(as_text=True)
    connect.wait_for(lambda: connect.active_topics(sink) == set(), WAIT_S, description="every topic reset")
    run_active_topics(spark, settings)
    assert our_topics(api, sink) == set()
    connect.delete_connector(sink)


@pytest.mark.spark
def test_offsets_reset_racing_a_partition_recorded_after_the_last_batch(spark, connect, settings, api, tmp_path):
    source = unique("fresh-offsets")
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["a", "b"])
    connect.create_connector(source, file_source_config(source, source_file, unique("fresh-topic")))
    mine = {"partition": {"filename": str(source_file)}, "offset": {"position": 4}}
    connect.wait_for(lambda: connect_offsets(connect, source) == [mine], WAIT_S, description="offset committed")
    assert connect.put(connect.connector_path(source, "stop"))[0] == 204
    wait_state(connect, source, "STOPPED", 0, WAIT_S)
    await_query(source_offsets.start(spark, settings, available_now=True))  # the table: one partition

    # A partition recorded after the table's last batch (Connect's own PATCH on the stopped connector).
    other = {"partition": {"filename": "/other"}, "offset": {"position": 3}}
    status, body = connect.patch(connect.connector_path(source, "offsets"), {"offsets": [other]})
    assert status == 200, body
    connect.wait_for(lambda: len(connect_offsets(connect, source)) == 2, WAIT_S, description="two partitions")

    ours = answer(api.delete(f"/connectors/{source}/offsets"))
    assert ours == (200, {"message": offsets_success_message("reset", True)})
    connect.wait_for(lambda: connect_offsets(connect, source) == [], WAIT_S, description="every partition reset")
    connect.delete_connector(source)


# --- recoverable writes ---------------------------------------------------------------------------------------------


class FailingSecondRecord:
    """A writer that writes the first record of a multi-record send for real, then fails (as if Kafka failed the
    second): the half-written stop (``commit-`` without ``target-state-``) and delete (``connector-`` tombstone
    without the ``target-state-`` one)."""

    def __init__(self, settings: Settings) -> None:
        self.inner = InternalTopicWriter(settings)

    def send(self, topic: str, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int | None = None) -> Any:
        if len(records) < 2:
            return self.inner.send(topic, records, timeout_ms)
        self.inner.send(topic, records[:1], timeout_ms)
        raise KafkaWriteError(f"injected: the second of {len(records)} records to {topic} failed")

    def close(self) -> None:
        self.inner.close()


def test_retried_half_written_stop_and_delete_complete(connect, settings, api, tmp_path):
    name = unique("fresh-retried")
    create_source(connect, tmp_path, name)
    failing_writer = FailingSecondRecord(settings)
    failing_app = create_app(settings, writer=failing_writer)
    failing = failing_app.test_client()
    try:
        # Stop: the empty commit lands, the STOPPED target state does not; the retry completes the stop.
        assert failing.put(f"/connectors/{name}/stop").status_code == 500
        assert api.put(f"/connectors/{name}/stop").status_code == 204
        wait_state(connect, name, "STOPPED", 0, WAIT_S)

        # Delete: the connector tombstone lands, the target-state tombstone does not: Connect deletes the connector
        # but keeps its STOPPED target state, so the connector would come back STOPPED if created again.
        assert failing.delete(f"/connectors/{name}").status_code == 500
        connect.wait_for(lambda: name not in connect.list_connectors(), WAIT_S, description=f"{name} deleted")
        # The retry writes the missing tombstone (204, not Connect's 404); then it is gone for both.
        assert api.delete(f"/connectors/{name}").status_code == 204
        ours = answer(api.delete(f"/connectors/{name}"))
        assert ours == (404, {"error_code": 404, "message": f"Connector {name} not found"})
        assert ours == connect.delete(connect.connector_path(name))

        # Created again: it starts RUNNING (the STOPPED target state is gone).
        create_source(connect, tmp_path, name)
        connect.delete_connector(name)
    finally:
        close_app(failing_app)
        failing_writer.close()


def test_the_writer_is_idempotent_on_the_real_broker(settings):
    """kafka-python 3.x's idempotent producer with our acks=all and one request in flight: it initialises against the
    broker (a producer id) and writes; an explicit enable_idempotence=True would raise on a broker without support."""
    topic = unique("fresh-idempotent")
    create_topic(settings, topic, 1)
    with InternalTopicWriter(settings) as writer:
        positions = writer.send(topic, [(b"k", b"1"), (b"k", b"2")])
        assert [p.offset for p in positions] == [0, 1]
        config = writer._producer_client().config  # the kafka-python producer's effective configuration
        assert (config["enable_idempotence"], config["acks"], config["max_in_flight_requests_per_connection"]) == (
            True,
            -1,
            1,
        )
