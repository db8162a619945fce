"""KIP-875 offsets through our API against the real Connect worker (Connect's
``connect/runtime/src/test/java/org/apache/kafka/connect/integration/OffsetsApiIntegrationTest.java``).

Our ``PATCH``/``DELETE /connectors/<name>/offsets`` are refused exactly as Connect refuses them while a connector runs
or is paused; once the connector is stopped through our ``PUT /stop``, the offsets we write (offsets-topic records for
a FileStream source, consumer-group offsets for a FileStream sink) are the ones Connect shows in its own
``GET /offsets`` and resumes from. The ``connectors`` table comes from catch-up runs of the connector-state job.
The ``GET /offsets`` comparisons also run the offsets job (``jobs/offsets.py``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.connect.rest import offsets_success_message
from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.kafka import InternalTopicWriter
from connect_state.spark import sink_offsets, source_offsets
from tests.fixtures.spark import await_query
from tests.integration.helpers import (
    api_client,
    connect_offsets,
    create_topic,
    job_settings,
    produce_values,
    run_connector_states,
    unique,
    wait_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]
WAIT_S = 90.0
ALTERED = offsets_success_message("altered", True)
RESET = offsets_success_message("reset", True)
RETRYABLE = "If the connector is in a stopped state, this operation can be safely retried"


# --- helpers --------------------------------------------------------------------------------------------------------


def ours(api: FlaskClient, method: str, name: str, body: Any = None) -> tuple[int, Any]:
    response = api.open(f"/connectors/{name}/offsets", method=method, json=body)
    return response.status_code, response.get_json()


def theirs(connect: ConnectRestClient, method: str, name: str, body: Any = None) -> tuple[int, Any]:
    return connect.request(method, connect.connector_path(name, "offsets"), body)


def ours_retrying(api: FlaskClient, method: str, name: str, body: Any = None) -> tuple[int, Any]:
    """Like Connect's OffsetsApiIntegrationTest (KAFKA-15826): retry, for a bounded time, while the answer is the
    retriable zombie-task 500 (the stopped task may not have left the consumer group yet)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        status, payload = ours(api, method, name, body)
        retriable = status == 500 and RETRYABLE in (payload or {}).get("message", "")
        if not retriable or time.monotonic() > deadline:
            return status, payload
        time.sleep(0.25)


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def wait_lines(connect: ConnectRestClient, path: Path, expected: Counter[str]) -> None:
    connect.wait_for(lambda: Counter(lines_of(path)) == expected, WAIT_S, description=f"{path.name} = {expected}")


def assert_refused_like_connect(api: FlaskClient, connect: ConnectRestClient, name: str, body: Any) -> None:
    """PATCH and DELETE on a connector that is not stopped: our answer is Connect's (400 + its message)."""
    for method, payload in (("PATCH", body), ("DELETE", None)):
        mine, connects = ours(api, method, name, payload), theirs(connect, method, name, payload)
        assert mine == connects
        assert mine[0] == 400 and "STOPPED" in mine[1]["message"]


def stop_through_our_api(spark, api: FlaskClient, connect: ConnectRestClient, settings: Settings, *names: str) -> None:
    """Each connector stopped through our ``PUT /stop``; once Connect reports them all STOPPED, one catch-up run of
    the connector-state job (our ``connectors`` table then says STOPPED for each)."""
    for name in names:
        response = api.put(f"/connectors/{name}/stop")
        assert response.status_code == 204
    for name in names:
        wait_state(connect, name, "STOPPED", 0)
    run_connector_states(spark, settings)


def sorted_offsets(entries: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(entry, sort_keys=True) for entry in entries)


# --- source ---------------------------------------------------------------------------------------------------------


def test_source_offsets_altered_through_our_api(spark, connect, stack_settings, tmp_path):
    settings = job_settings(stack_settings, tmp_path)
    api = api_client(settings)
    source, sink, topic = unique("off-source"), unique("off-source-sink"), unique("off-source-topic")
    source_file, out_file = tmp_path / "in.txt", tmp_path / "out.txt"
    append_lines(source_file, ["a", "b", "c", "d"])
    connect.create_connector(source, file_source_config(source, source_file, topic))
    connect.create_connector(sink, file_sink_config(sink, out_file, [topic]))
    wait_state(connect, source, "RUNNING", 1)
    wait_lines(connect, out_file, Counter("abcd"))
    partition = {"filename": str(source_file)}
    connect.wait_for(
        lambda: connect_offsets(connect, source) == [{"partition": partition, "offset": {"position": 8}}],
        WAIT_S,
        description="source offset committed",
    )
    run_connector_states(spark, settings)

    # Running, then paused: refused with Connect's own answer.
    body = {"offsets": [{"partition": partition, "offset": {"position": 4}}]}
    assert_refused_like_connect(api, connect, source, body)
    assert connect.put(connect.connector_path(source, "pause"))[0] == 202
    wait_state(connect, source, "PAUSED", 1)
    run_connector_states(spark, settings)
    assert_refused_like_connect(api, connect, source, body)

    # Stopped through our API: our PATCH moves the FileStream source back to byte 4 (after "a\nb\n").
    stop_through_our_api(spark, api, connect, settings, source)
    assert ours(api, "PATCH", source, body) == (200, {"message": ALTERED})
    # A multi-key partition (FileStreamSource.alterOffsets only needs 'filename'): written in HashMap order, so
    # Connect's own GET finds its offset (not null).
    extra = {"offsets": [{"partition": {"zone": "z", "filename": "/elsewhere"}, "offset": {"position": 0}}]}
    assert ours(api, "PATCH", source, extra) == (200, {"message": ALTERED})
    expected = [
        {"partition": {"filename": "/elsewhere", "zone": "z"}, "offset": {"position": 0}},
        {"partition": partition, "offset": {"position": 4}},
    ]
    # Connect lists a source's offsets from its store's in-memory map without reading the topic to its end first,
    # so the partitions we just wrote appear once its consumer has read them.
    connect.wait_for(
        lambda: sorted_offsets(connect_offsets(connect, source)) == sorted_offsets(expected),
        WAIT_S,
        description="Connect's GET /offsets shows the offsets we wrote",
    )
    # Connect's own PATCH accepts the connector we stopped.
    assert theirs(connect, "PATCH", source, extra) == (200, {"message": ALTERED})

    # Resumed through Connect: the source re-reads from our position, so "c" and "d" arrive a second time.
    assert connect.put(connect.connector_path(source, "resume"))[0] == 202
    wait_lines(connect, out_file, Counter("abcdcd"))
    connect.wait_for(
        lambda: {"partition": partition, "offset": {"position": 8}} in connect_offsets(connect, source),
        WAIT_S,
        description="source offset back at 8",
    )
    for name in (source, sink):
        connect.delete_connector(name)


# --- sink -----------------------------------------------------------------------------------------------------------


def produce(settings: Settings, topic: str, partitions: int, per_partition: int) -> Counter[str]:
    """``per_partition`` records ``p<partition>-<i>`` in each partition; returns the lines a sink writes for them."""
    lines = [(p, f"p{p}-{i}") for p in range(partitions) for i in range(per_partition)]
    produce_values(settings.bootstrap_servers, topic, [(p, line.encode()) for p, line in lines])
    return Counter(line for _, line in lines)


def sink_entry(topic: str, partition: int, offset: int) -> dict[str, Any]:
    return {"partition": {"kafka_partition": partition, "kafka_topic": topic}, "offset": {"kafka_offset": offset}}


def test_sink_offsets_altered_and_reset_through_our_api(spark, connect, stack_settings, tmp_path):
    settings = job_settings(stack_settings, tmp_path)
    api = api_client(settings)
    sink, topic = unique("off-sink"), unique("off-sink-topic")
    out_file = tmp_path / "sink.txt"
    create_topic(settings, topic, 3)
    expected = produce(settings, topic, 3, 10)
    connect.create_connector(sink, file_sink_config(sink, out_file, [topic]))
    wait_state(connect, sink, "RUNNING", 1)
    wait_lines(connect, out_file, expected)
    full = [sink_entry(topic, p, 10) for p in range(3)]
    connect.wait_for(
        lambda: sorted_offsets(connect_offsets(connect, sink)) == sorted_offsets(full), WAIT_S, description="committed"
    )
    run_connector_states(spark, settings)

    body = {
        "offsets": [
            {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 5}},
            {"partition": {"kafka_topic": topic, "kafka_partition": 1}, "offset": None},
        ]
    }
    assert_refused_like_connect(api, connect, sink, body)

    # Stopped through our API: partition 0 back to 5, partition 1's offset deleted (re-read from the start).
    stop_through_our_api(spark, api, connect, settings, sink)
    assert ours_retrying(api, "PATCH", sink, body) == (200, {"message": ALTERED})
    assert sorted_offsets(connect_offsets(connect, sink)) == sorted_offsets(
        [sink_entry(topic, 0, 5), sink_entry(topic, 2, 10)]
    )
    assert connect.put(connect.connector_path(sink, "resume"))[0] == 202
    expected += Counter(f"p0-{i}" for i in range(5, 10)) + Counter(f"p1-{i}" for i in range(10))
    wait_lines(connect, out_file, expected)

    # Reset through our API, twice (idempotent: the group is gone the second time); Connect then shows no offsets.
    stop_through_our_api(spark, api, connect, settings, sink)
    assert ours_retrying(api, "DELETE", sink) == (200, {"message": RESET})
    assert ours(api, "DELETE", sink) == (200, {"message": RESET})
    assert connect_offsets(connect, sink) == []
    # Connect's own PATCH accepts the connector we stopped and reset.
    assert theirs(connect, "PATCH", sink, {"offsets": [body["offsets"][0]]}) == (200, {"message": ALTERED})
    assert connect_offsets(connect, sink) == [sink_entry(topic, 0, 5)]
    connect.delete_connector(sink)


# --- GET /offsets equals Connect's -----------------------------------------------------------------------------------


def test_get_offsets_match_connect(spark, connect, stack_settings, tmp_path):
    settings = job_settings(stack_settings, tmp_path)
    api = api_client(settings)
    source, sink = unique("get-source"), unique("get-sink")
    source_topic, sink_topic = unique("get-source-topic"), unique("get-sink-topic")
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["one", "two"])
    create_topic(settings, sink_topic, 3)
    produce(settings, sink_topic, 3, 4)
    connect.create_connector(source, file_source_config(source, source_file, source_topic))
    connect.create_connector(sink, file_sink_config(sink, tmp_path / "out.txt", [sink_topic]))

    def run_jobs() -> None:
        run_connector_states(spark, settings)
        await_query(source_offsets.start(spark, settings, available_now=True))
        await_query(sink_offsets.start(spark, settings, available_now=True))

    def agree(*expected: tuple[str, Callable[[list[dict[str, Any]]], bool]]) -> None:
        """Once Connect's offsets of each ``(name, settled)`` are settled, ours equal Connect's for each name, after
        one run of the jobs for all of them (a commit may land between the two reads: the jobs run again)."""
        for name, settled in expected:
            connect.wait_for(
                lambda name=name, settled=settled: settled(connect_offsets(connect, name)),
                WAIT_S,
                description=f"{name} offsets",
            )
        for _ in range(3):
            run_jobs()
            answers = {name: (ours(api, "GET", name), theirs(connect, "GET", name)) for name, _ in expected}
            if all(
                mine[0] == connects[0] and sorted_offsets(mine[1]["offsets"]) == sorted_offsets(connects[1]["offsets"])
                for mine, connects in answers.values()
            ):
                break
        for mine, connects in answers.values():
            assert mine[0] == connects[0] == 200
            assert sorted_offsets(mine[1]["offsets"]) == sorted_offsets(connects[1]["offsets"])

    def source_at(position: int) -> Callable[[list[dict[str, Any]]], bool]:
        return lambda entries: (
            {"partition": {"filename": str(source_file)}, "offset": {"position": position}} in entries
        )

    def sink_at(offset: int) -> Callable[[list[dict[str, Any]]], bool]:
        return lambda entries: (
            sorted_offsets(entries) == sorted_offsets([sink_entry(sink_topic, p, offset) for p in range(3)])
        )

    agree((source, source_at(8)), (sink, sink_at(4)))  # running
    for name in (source, sink):
        assert connect.put(connect.connector_path(name, "pause"))[0] == 202
    agree((source, source_at(8)), (sink, sink_at(4)))  # paused

    # Stopped; then a multi-key partition written in non-HashMap order by a plain producer: null in both answers.
    stop_through_our_api(spark, api, connect, settings, source, sink)
    odd_key = f'["{source}",{{"zone":"z","filename":"/odd"}}]'.encode()  # HashMap order is filename, zone
    with InternalTopicWriter(settings) as writer:
        writer.send(settings.offset_storage_topic, [(odd_key, b'{"position":1}')])
    null_entry = {"partition": {"filename": "/odd", "zone": "z"}, "offset": None}
    agree((source, lambda entries: null_entry in entries), (sink, sink_at(4)))

    # Reset the source through our API (twice, idempotent); the multi-key record written out of order survives in
    # the topic but its partition is unlisted once the HashMap-ordered tombstone lands: both answers agree.
    assert ours(api, "DELETE", source) == (200, {"message": RESET})
    run_jobs()
    assert ours(api, "DELETE", source) == (200, {"message": RESET})
    agree((source, lambda entries: all(entry["partition"].get("filename") != str(source_file) for entry in entries)))
    assert ours(api, "GET", "no-such-connector") == theirs(connect, "GET", "no-such-connector")
    for name in (source, sink):
        connect.delete_connector(name)


# --- the consumer-group admin against the real broker ---------------------------------------------------------------


def test_consumer_group_admin_against_the_broker(kafka_broker, stack_settings):
    """What the sink endpoints and the KIP-883 cleanup rely on: members make every change fail with
    GroupNotEmptyError; an empty group is altered, listed and deleted; deleting it again says it did not exist."""
    from kafka import KafkaConsumer

    from connect_state.kafka import ConsumerGroupAdmin, GroupNotEmptyError

    topic, group = unique("admin-topic"), unique("admin-group")
    create_topic(stack_settings, topic, 2)
    produce(stack_settings, topic, 2, 3)
    with ConsumerGroupAdmin(stack_settings) as admin:
        assert admin.list_group_offsets(group) == {}
        assert admin.delete_group(group) is False
        consumer = KafkaConsumer(
            topic,
            group_id=group,
            bootstrap_servers=stack_settings.bootstrap_servers,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            deadline = time.monotonic() + WAIT_S
            while not consumer.assignment() and time.monotonic() < deadline:
                consumer.poll(timeout_ms=500)
            assert consumer.assignment(), "the consumer never joined its group"
            consumer.commit()
            with pytest.raises(GroupNotEmptyError):
                admin.alter_group_offsets(group, {(topic, 0): 1})
            with pytest.raises(GroupNotEmptyError):
                admin.delete_group_offsets(group, [(topic, 0)])
            with pytest.raises(GroupNotEmptyError):
                admin.delete_group(group)
        finally:
            consumer.close()
        admin.alter_group_offsets(group, {(topic, 0): 1, (topic, 1): 2})
        assert admin.list_group_offsets(group) == {(topic, 0): 1, (topic, 1): 2}
        admin.delete_group_offsets(group, [(topic, 1)])
        assert admin.list_group_offsets(group) == {(topic, 0): 1}
        assert admin.delete_group(group) is True
        assert admin.list_group_offsets(group) == {}
        assert admin.delete_group(group) is False
