"""Issue 11 §2 against the real Connect worker: GETs answer what the jobs have not folded yet.

The jobs run once (``Trigger.AvailableNow``) after the API's follower of the status and offsets topics has started;
then the connectors change through Connect (a sink commits the offset of a second topic and pauses, a source commits
a new offset) and no job runs again. Our status, task status, active topics and offsets (source and sink) answers
must become Connect's own while the tables still hold the state before the changes. Every wait is bounded (``WAIT_S``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from connect_state.api.resources import app_resources
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.progress.freshness import HEADER, parse_lag_header
from connect_state.spark import sink_offsets, source_offsets
from connect_state.tables.schemas import CONNECTORS, SINK_OFFSETS
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
def settings(stack_settings, tmp_path):
    return job_settings(stack_settings, tmp_path)


@pytest.mark.spark
def test_gets_answer_changes_the_jobs_have_not_folded(spark, connect, settings, app, api, created, tmp_path):
    source, sink = unique("live-source"), unique("live-sink")
    first, second = unique("live-a"), unique("live-b")
    for topic in (first, second):
        create_topic(settings, topic, 1)
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["a"])
    created += [source, sink]
    connect.create_connector(source, file_source_config(source, source_file, unique("live-lines")))
    connect.create_connector(sink, file_sink_config(sink, tmp_path / "out.txt", [first, second]))
    wait_state(connect, source, "RUNNING", 1, WAIT_S)
    wait_state(connect, sink, "RUNNING", 1, WAIT_S)
    produce_values(settings.bootstrap_servers, first, [(0, b"one")])
    connect.wait_for(lambda: connect.active_topics(sink) == {first}, WAIT_S, description=f"{sink} on {first}")
    connect.wait_for(lambda: connect_offsets(connect, source), WAIT_S, description=f"{source}'s first offset")

    # The follower starts at the topics' end (with the first GET, or here); the jobs then fold at least up to there.
    follower = app_resources(app).follower()
    assert follower is not None
    topics = (settings.status_storage_topic, settings.offset_storage_topic)
    connect.wait_for(lambda: all(follower.following(t) for t in topics), WAIT_S, description="the follower started")
    groups = app_resources(app).group_follower()
    assert groups is not None
    consumer_offsets = settings.consumer_offsets_topic
    connect.wait_for(lambda: groups.following(consumer_offsets), WAIT_S, description="the group follower started")
    connect.wait_for(lambda: connect_offsets(connect, sink), WAIT_S, description=f"{sink}'s first offset")
    run_connector_states(spark, settings)
    run_active_topics(spark, settings)
    await_query(source_offsets.start(spark, settings, available_now=True))
    await_query(sink_offsets.start(spark, settings, available_now=True))
    folded_offsets = connect_offsets(connect, source)
    folded_sink_offsets = connect_offsets(connect, sink)

    # Through Connect, after the jobs' last batch: a second topic, a pause, a new offset.
    produce_values(settings.bootstrap_servers, second, [(0, b"two")])
    connect.wait_for(lambda: connect.active_topics(sink) == {first, second}, WAIT_S, description="both topics")
    assert connect.put(connect.connector_path(sink, "pause"))[0] == 202
    wait_state(connect, sink, "PAUSED", 1, WAIT_S)
    append_lines(source_file, ["b"])
    connect.wait_for(lambda: connect_offsets(connect, source) != folded_offsets, WAIT_S, description="a new offset")
    connect.wait_for(
        lambda: connect_offsets(connect, sink) != folded_sink_offsets, WAIT_S, description="the sink's second topic"
    )

    def unordered(body: Any) -> Any:
        """Connect's offsets come in hash-set order, ours sorted: the same entries in any order."""
        if isinstance(body, dict) and isinstance(body.get("offsets"), list):
            return {**body, "offsets": sorted(body["offsets"], key=lambda entry: json.dumps(entry, sort_keys=True))}
        return body

    def same(path: str) -> bool:
        ours = api.get(path)
        return ours.status_code == 200 and unordered(ours.get_json()) == unordered(connect.get(path)[1])

    paths = (
        f"/connectors/{sink}/status",
        f"/connectors/{sink}/tasks/0/status",
        f"/connectors/{source}/offsets",
        f"/connectors/{sink}/offsets",
    )
    for path in paths:
        connect.wait_for(lambda path=path: same(path), WAIT_S, description=f"our {path} as Connect's")
    connect.wait_for(lambda: our_topics(api, sink) == {first, second}, WAIT_S, description="our topics as Connect's")

    def topics_lag() -> int | None:
        [lag] = parse_lag_header(api.get(f"/connectors/{sink}/topics").headers[HEADER])
        return lag.records

    # The header counts from the follower's positions (other tests' records keep coming: within a bounded wait).
    connect.wait_for(lambda: topics_lag() == 0, WAIT_S, description="no active-topics record behind the answer")

    # The tables themselves are still as the jobs left them.
    [row] = app_resources(app).tables.rows(CONNECTORS, filters=[("name", "=", sink)])
    assert row["connector_state"] == "RUNNING"
    # The sink commits every assigned partition (the second topic at 0 before its record): the table has that, our
    # answer (Connect's) the offset past the record.
    group_rows = app_resources(app).tables.rows(SINK_OFFSETS, filters=[("group_id", "=", f"connect-{sink}")])
    assert {(row["topic"], row["offset"]) for row in group_rows} <= {(first, 1), (second, 0)}
    assert {(e["partition"]["kafka_topic"], e["offset"]["kafka_offset"]) for e in connect_offsets(connect, sink)} == {
        (first, 1),
        (second, 1),
    }
