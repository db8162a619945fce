"""GETs answered as of the followed topics (issue 11 §2): the table's rows plus the records past its watermark.

The tables are stale on purpose; the in-memory topics (``kafka_log``) say what Kafka has now, and a
:class:`~connect_state.kafka.follower.TopicFollower` is fed from them as its background thread would be (no broker).
tests/integration/test_live_reads_connect.py checks the same answers against the real worker's.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from kafka import TopicPartition

from connect_state.api import close_app, create_app
from connect_state.connect.filestream import FILE_SINK_CLASS as FILE_STREAM_SINK_CLASS
from connect_state.core.settings import Settings
from connect_state.core.vocabulary import State
from connect_state.folds import source_offsets as offsets_fold
from connect_state.formats.connector_keys import record_connector
from connect_state.formats.consumer_offsets import (
    OffsetCommitValue,
    serialize_offset_commit_key,
    serialize_offset_commit_value,
)
from connect_state.formats.offsets import offset_key_bytes
from connect_state.formats.status import Status, connector_status_key, serialize_status, task_status_key
from connect_state.kafka.follower import TopicFollower
from connect_state.progress.freshness import HEADER, TableLag, parse_lag_header
from connect_state.tables.reader import COMMIT_CLOCK_MARGIN_S
from connect_state.tables.schemas import ACTIVE_TOPICS, CONNECTORS, SINK_OFFSETS, SOURCE_OFFSETS, WATERMARKS
from tests.unit.fakes import InMemoryTopics, RecordingWriter
from tests.unit.helpers import SOURCE_CONFIG, configure, connectors_row, topic_status_value
from tests.unit.helpers import write_table as write_delta

STATUS, OFFSETS, GROUPS = "connect-status", "connect-offsets", "__consumer_offsets"
PARTITIONS = {STATUS: 5, OFFSETS: 25, GROUPS: 3}
NOW = dt.datetime.now(dt.UTC)


def running(name: str, state: str = "RUNNING", task_state: str = "RUNNING") -> dict[str, Any]:
    """A ``connectors`` row with a connector status and one task status, both of worker ``w:8083``, generation 1."""
    task = {"id": 0, "state": task_state, "worker_id": "w:8083", "trace": None, "generation": 1}
    return connectors_row(
        name, connector_state=state, connector_worker_id="w:8083", connector_generation=1, tasks=[task]
    )


def watermarks(settings: Settings, kafka_log: InMemoryTopics, query: str, topic: str) -> None:
    """The query's watermark at the topic's end now: the table holds everything written so far."""
    marks = [
        {
            "query": query,
            "topic": topic,
            "partition": p,
            "next_offset": kafka_log.end(topic, p),
            "batch_id": 1,
            "committed_at": NOW,
        }
        for p in range(PARTITIONS[topic])
    ]
    write_delta(settings.delta_root, WATERMARKS, marks)


def status(state: str, generation: int = 2) -> bytes:
    value = serialize_status(Status(State(state), None, "w:8083", generation))
    assert value is not None
    return value


class Fed:
    """A follower of the in-memory topics: :meth:`catch_up` hands it what was appended since, as a poll would."""

    def __init__(
        self,
        settings: Settings,
        kafka_log: InMemoryTopics,
        max_bytes: int = 1_000_000,
        topics: tuple[str, ...] = (STATUS, OFFSETS),
    ) -> None:
        self.kafka_log = kafka_log
        self.topics = topics
        self.follower = TopicFollower(
            settings, list(topics), record_connector(STATUS, OFFSETS, GROUPS), max_bytes=max_bytes
        )
        self.follower.follow_from(self.ends())

    def ends(self) -> dict[tuple[str, int], int]:
        return {(t, p): self.kafka_log.end(t, p) for t in self.topics for p in range(PARTITIONS[t])}

    def catch_up(self) -> None:
        """Read to the end, then caught up as of now (as the thread says after reading to the end it asked)."""
        asked_at = time.time()
        positions = self.follower.positions()
        ranges = {tp: (positions[tp], end) for tp, end in self.ends().items() if end > positions[tp]}
        polled: dict[TopicPartition, list[Any]] = {}
        for record in self.kafka_log.read(ranges):
            polled.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
        self.follower.take(polled, self.ends())
        self.follower.caught_up(asked_at)


@pytest.fixture
def fed(settings: Settings, kafka_log: InMemoryTopics) -> Fed:
    return Fed(settings, kafka_log)


@pytest.fixture
def live_client(
    settings: Settings, writer: RecordingWriter, kafka_log: InMemoryTopics, fed: Fed
) -> Iterator[FlaskClient]:
    app = create_app(settings, writer=writer, topics=kafka_log, follower=fed.follower)
    app.testing = True
    yield app.test_client()
    close_app(app)


def test_status_answers_the_status_records_past_the_watermark(
    settings: Settings, kafka_log: InMemoryTopics, fed: Fed, live_client: FlaskClient
) -> None:
    write_delta(settings.delta_root, CONNECTORS, [running("c"), running("d")])
    watermarks(settings, kafka_log, "connector_states", STATUS)
    kafka_log.append_keyed(STATUS, connector_status_key("c").encode(), status("PAUSED"))
    kafka_log.append_keyed(STATUS, task_status_key("c", 0).encode(), status("PAUSED"))
    kafka_log.append_keyed(STATUS, connector_status_key("d").encode(), status("FAILED"))  # another connector
    # Rows loaded after the follower last caught up may reflect records it has not read: the table's answer.
    assert live_client.get("/connectors/c/status").get_json()["connector"]["state"] == "RUNNING"
    fed.catch_up()

    answer = live_client.get("/connectors/c/status")
    assert answer.status_code == 200
    body = answer.get_json()
    assert body["connector"]["state"] == "PAUSED"
    assert [(task["id"], task["state"]) for task in body["tasks"]] == [(0, "PAUSED")]
    assert live_client.get("/connectors/c/tasks/0/status").get_json()["state"] == "PAUSED"
    # The table is behind, the answer is not: the lag header counts from the follower's positions.
    assert parse_lag_header(answer.headers[HEADER]) == [TableLag("connectors", 0, 0)]


def test_a_stale_unassigned_past_the_watermark_is_ignored_as_the_job_ignores_it(
    settings: Settings, kafka_log: InMemoryTopics, fed: Fed, live_client: FlaskClient
) -> None:
    write_delta(settings.delta_root, CONNECTORS, [running("c")])
    watermarks(settings, kafka_log, "connector_states", STATUS)
    kafka_log.append_keyed(STATUS, connector_status_key("c").encode(), status("PAUSED"))
    kafka_log.append_keyed(STATUS, task_status_key("c", 0).encode(), status("UNASSIGNED", generation=0))
    assert live_client.get("/connectors/c/status").get_json()["connector"]["state"] == "RUNNING"  # loads the rows
    fed.catch_up()
    body = live_client.get("/connectors/c/status").get_json()
    assert (body["connector"]["state"], body["tasks"][0]["state"]) == ("PAUSED", "RUNNING")


def test_the_table_alone_when_the_follower_started_past_the_watermark(
    settings: Settings, kafka_log: InMemoryTopics, writer: RecordingWriter
) -> None:
    write_delta(settings.delta_root, CONNECTORS, [running("c")])
    watermarks(settings, kafka_log, "connector_states", STATUS)
    kafka_log.append_keyed(STATUS, connector_status_key("c").encode(), status("PAUSED"))  # before the follower
    late = Fed(settings, kafka_log)
    kafka_log.append_keyed(STATUS, task_status_key("c", 0).encode(), status("PAUSED"))
    late.catch_up()
    app = create_app(settings, writer=writer, topics=kafka_log, follower=late.follower)
    try:
        body = app.test_client().get("/connectors/c/status").get_json()
    finally:
        close_app(app)
    # The follower misses the connector's PAUSED: half an answer would be wrong, so the table's is given.
    assert (body["connector"]["state"], body["tasks"][0]["state"]) == ("RUNNING", "RUNNING")


def test_the_table_alone_when_the_follower_dropped_records_past_the_watermark(
    settings: Settings, kafka_log: InMemoryTopics, writer: RecordingWriter
) -> None:
    write_delta(settings.delta_root, CONNECTORS, [running("c")])
    watermarks(settings, kafka_log, "connector_states", STATUS)
    small = Fed(settings, kafka_log, max_bytes=700)
    for _ in range(3):
        kafka_log.append_keyed(STATUS, connector_status_key("c").encode(), status("PAUSED"))
        kafka_log.append_keyed(STATUS, connector_status_key("c").encode(), status("RUNNING"))
    kafka_log.append_keyed(STATUS, connector_status_key("c").encode(), status("FAILED"))
    small.catch_up()  # 7 records past the watermark (about 170 bytes each), more than it keeps
    app = create_app(settings, writer=writer, topics=kafka_log, follower=small.follower)
    try:
        assert app.test_client().get("/connectors/c/status").get_json()["connector"]["state"] == "RUNNING"
    finally:
        close_app(app)


def test_the_table_alone_when_its_rows_are_newer_than_what_the_follower_caught_up_with(
    settings: Settings, kafka_log: InMemoryTopics, fed: Fed, live_client: FlaskClient
) -> None:
    write_delta(settings.delta_root, CONNECTORS, [running("c")])
    watermarks(settings, kafka_log, "connector_states", STATUS)
    kafka_log.append_keyed(STATUS, connector_status_key("c").encode(), status("PAUSED"))
    assert live_client.get("/connectors/c/status").get_json()["connector"]["state"] == "RUNNING"  # loads the rows
    fed.catch_up()
    assert live_client.get("/connectors/c/status").get_json()["connector"]["state"] == "PAUSED"
    # The job folds the PAUSED and a FAILED the follower has not read (its table commits before its watermark).
    kafka_log.append_keyed(STATUS, connector_status_key("c").encode(), status("FAILED"))
    write_delta(settings.delta_root, CONNECTORS, [running("c", state="FAILED")], mode="overwrite")
    # Folding the PAUSED over the newer row would turn FAILED back to PAUSED: the table's answer instead.
    assert live_client.get("/connectors/c/status").get_json()["connector"]["state"] == "FAILED"
    fed.catch_up()
    assert live_client.get("/connectors/c/status").get_json()["connector"]["state"] == "FAILED"


def test_a_get_that_loads_rows_committed_before_the_follower_caught_up_folds(
    settings: Settings, kafka_log: InMemoryTopics, fed: Fed, live_client: FlaskClient
) -> None:
    """An operator's occasional GET: the table moved on since the last GET, and this GET loads it. Its rows were
    committed (with the margin for clocks) before the follower last caught up, so they reflect nothing it lacks."""
    write_delta(settings.delta_root, CONNECTORS, [running("c")])
    watermarks(settings, kafka_log, "connector_states", STATUS)
    kafka_log.append_keyed(STATUS, connector_status_key("c").encode(), status("PAUSED"))
    time.sleep(COMMIT_CLOCK_MARGIN_S + 0.05)
    fed.catch_up()
    body = live_client.get("/connectors/c/status").get_json()  # the first read: it loads the table now
    assert body["connector"]["state"] == "PAUSED"


def test_topics_answer_the_topic_records_past_the_watermark(
    settings: Settings, kafka_log: InMemoryTopics, fed: Fed, live_client: FlaskClient
) -> None:
    first = kafka_log.append_keyed(STATUS, b"status-topic-a:connector-s", topic_status_value("a", "s"))
    write_delta(
        settings.delta_root,
        ACTIVE_TOPICS,
        [{"connector": "s", "topic": "a", "task": 0, "kafka_partition": first[0], "kafka_offset": first[1]}],
    )
    watermarks(settings, kafka_log, "active_topics", STATUS)
    kafka_log.append_keyed(STATUS, b"status-topic-b:connector-s", topic_status_value("b", "s"))
    kafka_log.append_keyed(STATUS, b"status-topic-a:connector-s", None)  # a reset of a
    kafka_log.append_keyed(STATUS, b"status-topic-c:connector-other", topic_status_value("c", "other"))
    assert live_client.get("/connectors/s/topics").get_json() == {"s": {"topics": ["a"]}}  # loads the rows
    fed.catch_up()
    answer = live_client.get("/connectors/s/topics")
    assert answer.get_json() == {"s": {"topics": ["b"]}}
    assert parse_lag_header(answer.headers[HEADER]) == [TableLag("active_topics", 0, 0)]


def test_source_offsets_answer_the_offset_records_past_the_watermark(
    settings: Settings, kafka_log: InMemoryTopics, fed: Fed, live_client: FlaskClient
) -> None:
    configure(kafka_log, "src", SOURCE_CONFIG, tasks=1)
    write_delta(settings.delta_root, CONNECTORS, [{**running("src"), "task_count": 1}])
    key = offset_key_bytes("src", {"filename": "/a"})
    row = {
        "connector": "src",
        "offsets_topic": OFFSETS,
        "partition": json.dumps({"filename": "/a"}),
        "key": key,
        "offset": json.dumps({"position": 1}),
        "value": b'{"position":1}',
        "listed": True,
    }
    write_delta(settings.delta_root, SOURCE_OFFSETS, [row])
    watermarks(settings, kafka_log, "source_offsets", OFFSETS)
    kafka_log.append_keyed(OFFSETS, key, b'{"position":7}')
    kafka_log.append_keyed(OFFSETS, offset_key_bytes("src", {"filename": "/b"}), b'{"position":2}')
    kafka_log.append_keyed(OFFSETS, offset_key_bytes("other", {"filename": "/a"}), b'{"position":9}')
    assert len(live_client.get("/connectors/src/offsets").get_json()["offsets"]) == 1  # loads the rows
    fed.catch_up()
    body = live_client.get("/connectors/src/offsets").get_json()
    assert sorted(body["offsets"], key=lambda entry: entry["partition"]["filename"]) == [
        {"partition": {"filename": "/a"}, "offset": {"position": 7}},
        {"partition": {"filename": "/b"}, "offset": {"position": 2}},
    ]


def test_the_table_alone_when_a_followed_partition_has_no_watermark(
    settings: Settings, kafka_log: InMemoryTopics, fed: Fed, live_client: FlaskClient
) -> None:
    write_delta(settings.delta_root, CONNECTORS, [running("c")])
    watermarks(settings, kafka_log, "connector_states", STATUS)
    assert live_client.get("/connectors/c/status").get_json()["connector"]["state"] == "RUNNING"  # loads the rows
    folded = {p: kafka_log.end(STATUS, p) for p in range(PARTITIONS[STATUS])}
    paused_at, _offset = kafka_log.append_keyed(STATUS, connector_status_key("c").encode(), status("PAUSED"))
    task_at, _offset = kafka_log.append_keyed(STATUS, task_status_key("c", 0).encode(), status("PAUSED"))
    assert task_at != paused_at, "the two keys must live in different partitions for this test"
    fed.catch_up()
    body = live_client.get("/connectors/c/status").get_json()
    assert (body["connector"]["state"], body["tasks"][0]["state"]) == ("PAUSED", "PAUSED")
    # The PAUSED's partition has no watermark (nothing folded from it yet): the follower started at its end, not at
    # its start, so it may miss records of it. The table's answer.
    marks = [
        {"query": "connector_states", "topic": STATUS, "partition": p, "next_offset": next_offset}
        for p, next_offset in folded.items()
        if p != paused_at
    ]
    rows = [{**mark, "batch_id": 2, "committed_at": NOW} for mark in marks]
    write_delta(settings.delta_root, WATERMARKS, rows, mode="overwrite")
    body = live_client.get("/connectors/c/status").get_json()
    assert (body["connector"]["state"], body["tasks"][0]["state"]) == ("RUNNING", "RUNNING")  # not half of it


def test_a_source_connectors_fold_is_kept_while_its_rows_and_records_are_the_same(
    settings: Settings, kafka_log: InMemoryTopics, fed: Fed, live_client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    configure(kafka_log, "src", SOURCE_CONFIG, tasks=1)
    write_delta(settings.delta_root, CONNECTORS, [{**running("src"), "task_count": 1}])
    write_delta(settings.delta_root, SOURCE_OFFSETS, [])
    watermarks(settings, kafka_log, "source_offsets", OFFSETS)
    assert live_client.get("/connectors/src/offsets").get_json() == {"offsets": []}  # loads the rows
    folds: list[int] = []
    fold_past_rows = offsets_fold.fold_past_rows

    def counted(*args: Any) -> Any:
        folds.append(1)
        return fold_past_rows(*args)

    monkeypatch.setattr(offsets_fold, "fold_past_rows", counted)
    key = offset_key_bytes("src", {"filename": "/a"})
    kafka_log.append_keyed(OFFSETS, key, b'{"position":1}')
    fed.catch_up()
    for _ in range(3):
        assert live_client.get("/connectors/src/offsets").get_json()["offsets"][0]["offset"] == {"position": 1}
    assert len(folds) == 1
    kafka_log.append_keyed(OFFSETS, key, b'{"position":2}')  # a new record: folded again
    fed.catch_up()
    assert live_client.get("/connectors/src/offsets").get_json()["offsets"][0]["offset"] == {"position": 2}
    assert len(folds) == 2


def commit_record(group: str, topic: str, partition: int, offset: int | None) -> tuple[bytes, bytes | None]:
    """An offset commit of ``group`` as the coordinator writes it (``None``: the tombstone deleting it)."""
    key = serialize_offset_commit_key(group, topic, partition)
    if offset is None:
        return key, None
    return key, serialize_offset_commit_value(OffsetCommitValue(offset, "", 1_700_000_000_000))


def test_sink_offsets_answer_the_group_commits_past_the_watermark(
    settings: Settings, kafka_log: InMemoryTopics, writer: RecordingWriter
) -> None:
    kafka_log.create(GROUPS, PARTITIONS[GROUPS])
    groups = Fed(settings, kafka_log, topics=(GROUPS,))
    app = create_app(settings, writer=writer, topics=kafka_log, group_follower=groups.follower)
    app.testing = True
    client = app.test_client()
    try:
        sink_config = {"connector.class": FILE_STREAM_SINK_CLASS, "name": "snk", "file": "/tmp/out", "topics": "t"}
        configure(kafka_log, "snk", sink_config, tasks=1)
        sink_row = {"type": "sink", "connector_class": FILE_STREAM_SINK_CLASS, "config": json.dumps(sink_config)}
        write_delta(settings.delta_root, CONNECTORS, [{**running("snk"), **sink_row}])
        rows = [
            {"group_id": "connect-snk", "topic": "t", "partition": 0, "offset": 5},
            {"group_id": "connect-snk", "topic": "t", "partition": 1, "offset": 3},
            {"group_id": "connect-other", "topic": "t", "partition": 0, "offset": 8},
        ]
        write_delta(settings.delta_root, SINK_OFFSETS, rows)
        write_delta(settings.delta_root, SOURCE_OFFSETS, [])  # the offsets job creates both
        watermarks(settings, kafka_log, "sink_offsets", GROUPS)
        for group, partition, offset in [
            ("connect-snk", 0, 9),
            ("connect-snk", 1, None),  # DELETE /offsets: a tombstone
            ("connect-snk", 2, 4),
            ("connect-other", 0, 100),  # another group's commit
            ("connect-snk", 2, 6),
        ]:
            kafka_log.append(GROUPS, 1, *commit_record(group, "t", partition, offset))
        kafka_log.append(GROUPS, 2, b"\x00\x02junk", b"")  # a group-metadata key: no offset commit

        def offsets() -> list[tuple[int, int]]:
            answer = client.get("/connectors/snk/offsets")
            assert answer.status_code == 200
            entries = answer.get_json()["offsets"]
            return [(e["partition"]["kafka_partition"], e["offset"]["kafka_offset"]) for e in entries]

        # Rows loaded after the follower last caught up may reflect records it has not read: the table's answer.
        assert offsets() == [(0, 5), (1, 3)]
        groups.catch_up()
        assert offsets() == [(0, 9), (2, 6)]
        lags = parse_lag_header(client.get("/connectors/snk/offsets").headers[HEADER])
        assert TableLag("sink_offsets", 0, 0) in lags
    finally:
        close_app(app)
