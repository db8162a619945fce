"""Byte-compatibility with what a real Connect worker writes to its status topic.

Connectors go through start, pause, resume, stop and delete on the session's worker; then every record of the real
status topic must parse, serialize back to the very same bytes, and sit in the partition our murmur2 picks.
"""

from __future__ import annotations

import pytest

from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.formats.status import (
    Status,
    TopicStatus,
    TopicStatusKey,
    parse_status_record,
    serialize_status,
    serialize_topic_status,
)
from connect_state.kafka.partitioner import partition_for_key
from tests.integration.helpers import delete_and_wait, read_topic, unique

pytestmark = pytest.mark.integration


def test_every_record_connect_wrote_round_trips(connect, connect_worker, stack_settings, tmp_path):
    source, sink, topic = unique("compat-source"), unique("compat-sink"), unique("compat-topic")
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["a", "b"])
    connect.create_connector(source, file_source_config(source, source_file, topic))
    connect.create_connector(sink, file_sink_config(sink, tmp_path / "out.txt", [topic]))
    connect.wait_until_running(source)
    connect.wait_until_running(sink)
    connect.wait_for(lambda: connect.active_topics(sink) == {topic}, 60, description="sink sees its topic")
    for verb, state in (("pause", "PAUSED"), ("resume", "RUNNING"), ("stop", "STOPPED")):
        assert connect.put(connect.connector_path(source, verb))[0] in (202, 204)
        connect.wait_for(
            lambda state=state: (connect.connector_status(source) or {}).get("connector", {}).get("state") == state,
            60,
            description=f"{source} {state}",
        )
    delete_and_wait(connect, sink, 60)

    records = read_topic(stack_settings.bootstrap_servers, connect_worker.status_topic)
    seen = {"status": 0, "topic": 0, "tombstone": 0}
    for r in records:
        parsed = parse_status_record(r.key, r.value)  # raises on anything a worker would discard
        assert r.partition == partition_for_key(r.key, 5), f"{r.key!r} is not where murmur2 puts it"
        if r.value is None:
            seen["tombstone"] += 1
        elif isinstance(parsed.value, Status):
            seen["status"] += 1
            assert serialize_status(parsed.value) == r.value
        elif isinstance(parsed.value, TopicStatus):
            assert isinstance(parsed.key, TopicStatusKey)
            seen["topic"] += 1
            assert serialize_topic_status(parsed.value) == r.value
    # The scenario produced every kind: statuses, topic statuses, and tombstones (the deletion's reset).
    assert all(count > 0 for count in seen.values()), seen
