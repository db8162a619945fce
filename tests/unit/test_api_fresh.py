"""Writes decided on fresh state, recoverable writes and the lag header (issue 10), with Flask's test client.

The tables are stale on purpose (they say what a job folded a while ago); the in-memory topics (``kafka_log``) say
what Kafka has now. The writer appends what it sends to those topics, so the API reads its own writes back, as it
would from Kafka. Each stale-state case of the issue is here; tests/integration/test_fresh_writes_connect.py runs
them against the real worker.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.connect.rest import not_stopped_message
from connect_state.core.errors import KafkaUnavailableError, KafkaWriteError, KafkaWriteTimeout
from connect_state.core.settings import Settings
from connect_state.core.vocabulary import TargetState
from connect_state.folds.config_snapshot import ConfigSnapshot
from connect_state.formats.config import delete_records, resume_records, stop_records
from connect_state.formats.offsets import offset_key_bytes
from connect_state.progress.freshness import HEADER, TableLag, parse_lag_header
from connect_state.tables.schemas import ACTIVE_TOPICS, CONNECTOR_DELETIONS, CONNECTORS, SOURCE_OFFSETS, WATERMARKS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTopics, RecordingWriter
from tests.unit.helpers import (
    SOURCE_CONFIG,
    assert_connect_error,
    assert_no_content,
    configure,
    topic_status_value,
    write_config,
)
from tests.unit.helpers import connectors_row as row
from tests.unit.helpers import write_table as write_delta

CONFIGS, STATUS, OFFSETS = "connect-configs", "connect-status", "connect-offsets"
NOW = dt.datetime.now(dt.UTC)


def snapshot(kafka_log: InMemoryTopics) -> ConfigSnapshot:
    """The config topic as Connect's leader reads it, from the start."""
    folded = ConfigSnapshot()
    for record in kafka_log.read({(CONFIGS, 0): (None, kafka_log.end(CONFIGS, 0))}):
        folded.apply(record.key, record.value, record.partition, record.offset, record.timestamp)
    return folded


class FailingSecondRecord:
    """A writer whose multi-record sends write the first record only, then fail (a broker lost mid-write)."""

    def __init__(self, inner: RecordingWriter, error: Exception | None = None) -> None:
        self.inner = inner
        self.error = error or KafkaWriteError("write to topic 'connect-configs' failed (1 of 2 records acknowledged)")

    def send(self, topic: str, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int | None = None) -> Any:
        if len(records) < 2:
            return self.inner.send(topic, records, timeout_ms)
        self.inner.send(topic, records[:1], timeout_ms)
        raise self.error

    def close(self) -> None:
        pass


@pytest.fixture
def client(make_client: MakeClient) -> FlaskClient:
    return make_client()


# --- the connector, as of the config topic's end --------------------------------------------------------------------


def test_stop_right_after_a_deletion_through_connect_is_404_and_writes_nothing(
    settings: Settings, client: FlaskClient, writer: RecordingWriter, kafka_log: InMemoryTopics
) -> None:
    write_delta(settings.delta_root, CONNECTORS, [row("c")])  # the table still has it
    configure(kafka_log, "c", SOURCE_CONFIG, tasks=1)
    write_config(kafka_log, delete_records("c"))  # deleted through Connect since
    for action in ("stop", "pause", "resume"):
        assert_connect_error(client.put(f"/connectors/c/{action}"), 404, "Unknown connector c")
    assert_connect_error(client.delete("/connectors/c"), 404, "Connector c not found")
    assert writer.sends == []
    # ...so a connector created again under the name starts.
    configure(kafka_log, "c", SOURCE_CONFIG)
    assert snapshot(kafka_log).connector("c").target_state == TargetState.STARTED


def test_writes_need_no_table(client: FlaskClient, writer: RecordingWriter, kafka_log: InMemoryTopics) -> None:
    configure(kafka_log, "c", SOURCE_CONFIG, tasks=1)
    assert_no_content(client.put("/connectors/c/stop"), 204)
    view = snapshot(kafka_log).connector("c")
    assert (view.target_state, view.task_count) == (TargetState.STOPPED, 0)


def test_patch_offsets_right_after_a_resume_through_connect_is_refused(
    make_client: MakeClient, writer: RecordingWriter, kafka_log: InMemoryTopics, settings: Settings
) -> None:
    write_delta(settings.delta_root, CONNECTORS, [row("c", target_state="STOPPED", task_count=0)])
    configure(kafka_log, "c", SOURCE_CONFIG, tasks=1)
    write_config(kafka_log, stop_records("c"))
    write_config(kafka_log, resume_records("c"))  # resumed through Connect: the table does not know yet
    client = make_client()
    body = {"offsets": [{"partition": {"filename": "/tmp/in.txt"}, "offset": {"position": 4}}]}
    response = client.patch("/connectors/c/offsets", json=body)
    assert_connect_error(response, 400, not_stopped_message("c"))
    assert_connect_error(client.delete("/connectors/c/offsets"), 400, not_stopped_message("c"))
    assert writer.sends == []


def test_patch_offsets_of_a_connector_stopped_since_the_table_is_accepted(
    make_client: MakeClient, writer: RecordingWriter, kafka_log: InMemoryTopics, settings: Settings
) -> None:
    write_delta(settings.delta_root, CONNECTORS, [row("c")])  # the table says RUNNING
    configure(kafka_log, "c", SOURCE_CONFIG, tasks=1)
    write_config(kafka_log, stop_records("c"))
    body = {"offsets": [{"partition": {"filename": "/tmp/in.txt"}, "offset": {"position": 4}}]}
    response = make_client().patch("/connectors/c/offsets", json=body)
    assert response.status_code == 200, response.get_json()
    [(topic, [(key, value)])] = writer.batches
    assert (topic, key, value) == (OFFSETS, offset_key_bytes("c", {"filename": "/tmp/in.txt"}), b'{"position":4}')


def test_the_config_topic_is_read_incrementally(
    client: FlaskClient, writer: RecordingWriter, kafka_log: InMemoryTopics
) -> None:
    configure(kafka_log, "c", SOURCE_CONFIG, tasks=1)
    assert client.put("/connectors/c/pause").status_code == 202
    kafka_log.reads.clear()
    assert client.put("/connectors/c/resume").status_code == 202
    config_reads = [ranges[(CONFIGS, 0)] for ranges in kafka_log.reads if (CONFIGS, 0) in ranges]
    # Nothing new before the resume (the pause's check after its write read up to its record); then the resume record
    # alone, in the check after the write.
    assert config_reads == [(4, 5)]


@pytest.mark.parametrize(
    ("failure", "status"),
    [
        (KafkaWriteTimeout("timed out after 10 ms reading up to the end offsets of connect-configs-0"), 409),
        (KafkaUnavailableError("cannot reach Kafka at 127.0.0.1:1: KafkaTimeoutError"), 503),
    ],
)
def test_no_fresh_state_no_write(
    settings: Settings, make_client: MakeClient, writer: RecordingWriter, failure: Exception, status: int
) -> None:
    write_delta(settings.delta_root, CONNECTORS, [row("c", target_state="STOPPED", task_count=0)])
    write_delta(settings.delta_root, ACTIVE_TOPICS, [{"connector": "c", "topic": "t"}])
    client = make_client(topics=InMemoryTopics(fail=failure))
    requests = [
        ("PUT", "/connectors/c/stop"),
        ("PUT", "/connectors/c/pause"),
        ("PUT", "/connectors/c/resume"),
        ("DELETE", "/connectors/c"),
        ("DELETE", "/connectors/c/offsets"),
        ("PUT", "/connectors/c/topics/reset"),
    ]
    for method, path in requests:
        response = client.open(path, method=method)
        assert response.status_code == status, (path, response.get_json())
        message = response.get_json()["message"]
        assert message.startswith("Cannot complete the request: ")
        assert "within 10000 ms (api.fresh.read.timeout.ms)" in message
        assert str(failure) in message and message.endswith("Nothing was written; retry the request.")
    assert writer.sends == []


# --- recoverable writes ---------------------------------------------------------------------------------------------


def test_a_retried_half_written_stop_completes(
    make_client: MakeClient, writer: RecordingWriter, kafka_log: InMemoryTopics
) -> None:
    configure(kafka_log, "c", SOURCE_CONFIG, tasks=2)
    failing = make_client(writer=FailingSecondRecord(writer))
    assert failing.put("/connectors/c/stop").status_code == 500
    half = snapshot(kafka_log).connector("c")
    assert (half.target_state, half.task_count) == (TargetState.STARTED, 0)  # commit written, STOPPED not
    assert_no_content(make_client().put("/connectors/c/stop"), 204)
    done = snapshot(kafka_log).connector("c")
    assert (done.exists, done.target_state, done.task_count) == (True, TargetState.STOPPED, 0)


def test_a_retried_half_written_delete_completes(
    make_client: MakeClient, writer: RecordingWriter, kafka_log: InMemoryTopics
) -> None:
    configure(kafka_log, "c", SOURCE_CONFIG, tasks=1)
    write_config(kafka_log, stop_records("c"))
    assert make_client(writer=FailingSecondRecord(writer)).delete("/connectors/c").status_code == 500
    half = snapshot(kafka_log).connector("c")
    assert (half.exists, half.target_state_left, half.target_state) == (False, True, TargetState.STOPPED)
    writer.sends.clear()
    client = make_client()
    assert_no_content(client.delete("/connectors/c"), 204)  # not 404: the half that is left is written
    assert writer.keys == [b"target-state-c"]
    assert_connect_error(client.delete("/connectors/c"), 404, "Connector c not found")
    view = snapshot(kafka_log).connector("c")
    assert (view.exists, view.target_state) == (False, None)
    configure(kafka_log, "c", SOURCE_CONFIG)  # created again: it starts
    assert snapshot(kafka_log).connector("c").target_state == TargetState.STARTED


def test_a_stopped_target_state_left_after_a_deletion_is_removed_by_delete(
    client: FlaskClient, writer: RecordingWriter, kafka_log: InMemoryTopics
) -> None:
    """The issue's leftover: a STOPPED written after the deletion (by an older connect-state) is cleaned up."""
    configure(kafka_log, "c", SOURCE_CONFIG, tasks=1)
    write_config(kafka_log, delete_records("c"))
    write_config(kafka_log, stop_records("c"))
    assert_connect_error(client.put("/connectors/c/stop"), 404, "Unknown connector c")
    assert_no_content(client.delete("/connectors/c"), 204)
    assert writer.keys == [b"target-state-c"]


class DeletedMeanwhile:
    """A writer before whose records Connect's deletion lands (between our check and our write)."""

    def __init__(self, inner: RecordingWriter, kafka_log: InMemoryTopics, name: str) -> None:
        self.inner, self.kafka_log, self.name, self.done = inner, kafka_log, name, False

    def send(self, topic: str, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int | None = None) -> Any:
        if not self.done:
            write_config(self.kafka_log, delete_records(self.name))
            self.done = True
        return self.inner.send(topic, records, timeout_ms)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("action", ["stop", "pause"])
def test_no_target_state_is_left_for_a_connector_deleted_meanwhile(
    make_client: MakeClient, writer: RecordingWriter, kafka_log: InMemoryTopics, action: str
) -> None:
    configure(kafka_log, "c", SOURCE_CONFIG, tasks=1)
    client = make_client(writer=DeletedMeanwhile(writer, kafka_log, "c"))
    assert_connect_error(client.put(f"/connectors/c/{action}"), 404, "Unknown connector c")
    assert writer.keys[-1] == b"target-state-c" and writer.sends[-1][1] == [(b"target-state-c", None)]
    view = snapshot(kafka_log).connector("c")
    assert (view.exists, view.target_state) == (False, None)


def test_a_timed_out_stop_says_the_outcome_is_unknown_and_how_to_find_out(
    make_client: MakeClient, kafka_log: InMemoryTopics
) -> None:
    configure(kafka_log, "c", SOURCE_CONFIG, tasks=1)
    timing_out = RecordingWriter(fail=KafkaWriteTimeout("timed out after 30000 ms waiting for Kafka"))
    response = make_client(writer=timing_out).put("/connectors/c/stop")
    assert response.status_code == 500
    message = response.get_json()["message"]
    assert message.startswith(
        "Kafka did not acknowledge the stop of connector c within 30000 ms (api.kafka.write.timeout.ms): the outcome "
        "is unknown, the records may still be written."
    )
    assert "Retrying PUT /connectors/c/stop is safe" in message and "GET /connectors/c/status" in message
    deleting = make_client(writer=timing_out).delete("/connectors/c")
    assert "Retrying DELETE /connectors/c is safe" in deleting.get_json()["message"]


def test_kafka_unreachable_on_write_is_503_nothing_written(make_client: MakeClient, kafka_log: InMemoryTopics) -> None:
    configure(kafka_log, "c", SOURCE_CONFIG, tasks=1)
    unreachable = RecordingWriter(fail=KafkaUnavailableError("cannot reach Kafka at 127.0.0.1:1"))
    response = make_client(writer=unreachable).put("/connectors/c/stop")
    assert_connect_error(
        response, 503, "Nothing was written for the stop of connector c: cannot reach Kafka at 127.0.0.1:1"
    )


# --- resets: the table plus the records past its watermark ----------------------------------------------------------


def watermark(query: str, topic: str, partition: int, next_offset: int) -> dict[str, Any]:
    return {
        "query": query,
        "topic": topic,
        "partition": partition,
        "next_offset": next_offset,
        "batch_id": 1,
        "committed_at": NOW,
    }


def status_record(kafka_log: InMemoryTopics, connector: str, topic: str, active: bool = True) -> tuple[int, int]:
    key = f"status-topic-{topic}:connector-{connector}".encode()
    return kafka_log.append_keyed(STATUS, key, topic_status_value(topic, connector) if active else None)


def test_topics_reset_racing_topics_recorded_since_the_last_batch(
    settings: Settings, client: FlaskClient, writer: RecordingWriter, kafka_log: InMemoryTopics
) -> None:
    folded = [status_record(kafka_log, "s", "a"), status_record(kafka_log, "s", "gone")]
    gone_partition = folded[1][0]
    write_delta(
        settings.delta_root,
        ACTIVE_TOPICS,
        [
            {"connector": "s", "topic": "a", "task": 0, "kafka_partition": folded[0][0], "kafka_offset": folded[0][1]},
            {"connector": "s", "topic": "gone", "task": 0, "kafka_partition": gone_partition, "kafka_offset": 0},
        ],
    )
    marks = [watermark("active_topics", STATUS, p, kafka_log.end(STATUS, p)) for p in range(5)]
    write_delta(settings.delta_root, WATERMARKS, marks)
    status_record(kafka_log, "s", "b")  # recorded since the job's last batch
    status_record(kafka_log, "s", "gone", active=False)
    status_record(kafka_log, "other", "c")
    kafka_log.reads.clear()
    past = {(STATUS, p): (m["next_offset"], kafka_log.end(STATUS, p)) for p, m in enumerate(marks)}
    assert client.put("/connectors/s/topics/reset").status_code == 202
    assert writer.keys == [b"status-topic-a:connector-s", b"status-topic-b:connector-s"]
    # Only the records past the watermark were read.
    assert kafka_log.reads == [{tp: (start, end) for tp, (start, end) in past.items() if end > start}]


def test_topics_reset_without_watermarks_folds_the_whole_topic_over_the_table(
    settings: Settings, client: FlaskClient, writer: RecordingWriter, kafka_log: InMemoryTopics
) -> None:
    """No watermark yet (nothing folded as far as the API can tell): the whole topic is folded over the rows, which
    the replay guard makes harmless."""
    partition, offset = status_record(kafka_log, "s", "a")
    write_delta(
        settings.delta_root,
        ACTIVE_TOPICS,
        [{"connector": "s", "topic": "a", "task": 0, "kafka_partition": partition, "kafka_offset": offset}],
    )
    status_record(kafka_log, "s", "a", active=False)
    status_record(kafka_log, "s", "b")
    assert client.put("/connectors/s/topics/reset").status_code == 202
    assert writer.keys == [b"status-topic-b:connector-s"]


def source_table_row(name: str, filename: str, position: int, topic: str = OFFSETS) -> dict[str, Any]:
    return {
        "connector": name,
        "offsets_topic": topic,
        "partition": json.dumps({"filename": filename}),
        "key": offset_key_bytes(name, {"filename": filename}),
        "offset": json.dumps({"position": position}),
        "value": json.dumps({"position": position}).encode(),
        "listed": True,
    }


def test_offsets_reset_racing_partitions_recorded_since_the_last_batch(
    settings: Settings, make_client: MakeClient, writer: RecordingWriter, kafka_log: InMemoryTopics
) -> None:
    configure(kafka_log, "src", SOURCE_CONFIG, tasks=1)
    write_config(kafka_log, stop_records("src"))
    rows = [source_table_row("src", "/a", 1), source_table_row("src", "/b", 2)]
    write_delta(settings.delta_root, SOURCE_OFFSETS, rows)
    marks = [watermark("source_offsets", OFFSETS, p, kafka_log.end(OFFSETS, p)) for p in range(25)]
    write_delta(settings.delta_root, WATERMARKS, marks)
    for filename, value in (("/new", b'{"position":3}'), ("/b", None)):  # since the last batch
        kafka_log.append_keyed(OFFSETS, offset_key_bytes("src", {"filename": filename}), value)
    kafka_log.append_keyed(OFFSETS, offset_key_bytes("other", {"filename": "/x"}), b'{"position":1}')
    response = make_client().delete("/connectors/src/offsets")
    assert response.status_code == 200, response.get_json()
    [(topic, records)] = writer.batches
    assert topic == OFFSETS
    assert records == [
        (offset_key_bytes("src", {"filename": "/a"}), None),
        (offset_key_bytes("src", {"filename": "/new"}), None),
    ]


def test_offsets_reset_with_a_connector_topic_not_created_yet(
    make_client: MakeClient, writer: RecordingWriter, kafka_log: InMemoryTopics
) -> None:
    config = {**SOURCE_CONFIG, "offsets.storage.topic": "own-offsets"}
    configure(kafka_log, "src", config, tasks=0)
    write_config(kafka_log, stop_records("src"))
    kafka_log.append_keyed(OFFSETS, offset_key_bytes("src", {"filename": "/w"}), b'{"position":3}')
    response = make_client().delete("/connectors/src/offsets")  # no table, no watermark: both topics from the start
    assert response.status_code == 200, response.get_json()
    assert [(topic, [key for key, _ in records]) for topic, records in writer.batches] == [
        (OFFSETS, [offset_key_bytes("src", {"filename": "/w"})]),
        ("own-offsets", [offset_key_bytes("src", {"filename": "/w"})]),
    ]


# --- the lag header -------------------------------------------------------------------------------------------------


def test_every_get_says_how_far_behind_its_tables_are(
    settings: Settings, make_client: MakeClient, kafka_log: InMemoryTopics
) -> None:
    write_delta(settings.delta_root, CONNECTORS, [row("c")])
    write_delta(settings.delta_root, ACTIVE_TOPICS, [{"connector": "c", "topic": "t"}])
    for _ in range(3):
        status_record(kafka_log, "c", "t")
    configure(kafka_log, "c", SOURCE_CONFIG)  # 1 config record
    committed = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=30)
    marks = [
        {**watermark("active_topics", STATUS, p, kafka_log.end(STATUS, p)), "committed_at": committed} for p in range(5)
    ]
    marks.append({**watermark("connector_states", STATUS, 0, 0), "committed_at": committed})
    write_delta(settings.delta_root, WATERMARKS, marks)
    client = make_client()

    topics = client.get("/connectors/c/topics")
    assert parse_lag_header(topics.headers[HEADER]) == [TableLag("active_topics", 0, 0)]

    status_record(kafka_log, "c", "u")  # after the end offsets were cached: seen within api.lag.cache.ms
    status = client.get("/connectors/c/status")
    [connectors] = parse_lag_header(status.headers[HEADER])
    # config: 1 record without watermark; status: everything but what partition 0 of the job's watermark covers.
    assert connectors.table == "connectors" and connectors.records is not None and connectors.records >= 4
    assert connectors.age_ms is not None and 29_000 <= connectors.age_ms <= 120_000


def test_lag_header_without_kafka_or_watermarks(settings: Settings, make_client: MakeClient) -> None:
    write_delta(settings.delta_root, ACTIVE_TOPICS, [{"connector": "c", "topic": "t"}])
    down = make_client(topics=InMemoryTopics(fail=KafkaUnavailableError("cannot reach Kafka")))
    response = down.get("/connectors/c/topics")
    assert response.status_code == 200  # GETs answer from the tables while Kafka is away
    assert response.headers[HEADER] == "active_topics;records=unknown;age_ms=unknown"


def test_no_lag_header_on_writes_errors_without_tables_or_untracked_tables(
    settings: Settings, client: FlaskClient, kafka_log: InMemoryTopics
) -> None:
    configure(kafka_log, "c", SOURCE_CONFIG)
    assert HEADER not in client.put("/connectors/c/pause").headers
    assert HEADER not in client.get("/connectors").headers  # no table yet: 503
    assert HEADER not in client.get("/nope").headers
    write_delta(settings.delta_root, CONNECTORS, [])
    assert parse_lag_header(client.get("/connectors").headers[HEADER])[0].table == "connectors"
    write_delta(settings.delta_root, CONNECTOR_DELETIONS, [])
    assert client.get("/connectors/c/deletions").headers[HEADER] == "connector_deletions;untracked"
