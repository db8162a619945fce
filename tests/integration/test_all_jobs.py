"""``connect-state-jobs``: every job in one driver, as one catch-up run (``--available-now``) and continuously (each job
on its own cloned session, one supervisor): the tables answer like Connect."""

from __future__ import annotations

import time

import pytest

from connect_state.connect.filestream import FILE_SOURCE_CLASS
from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.kafka.topic_positions import TopicPositions
from connect_state.spark.all_jobs import every_job
from connect_state.spark.streaming import run_catch_up, run_continuous
from connect_state.tables.schemas import TABLE_QUERIES, WATERMARKS
from tests.integration.helpers import api_client, delta_table, job_settings, running, unique

pytestmark = [pytest.mark.integration, pytest.mark.spark]

WAIT_S = 90.0
DEMO_PROVIDERS = f"{FILE_SOURCE_CLASS}=connect_state.dev.demo_heartbeats:provider"


def test_catch_up_of_every_job_answers_like_connect(spark, connect, stack_settings, tmp_path):
    # KIP-910: only connectors whose class has a heartbeat provider are eligible; the demo's provider is the source's
    settings = job_settings(
        stack_settings, tmp_path, **{"heartbeat.interval.ms": "600000", "heartbeat.providers": DEMO_PROVIDERS}
    )
    name, topic = unique("all-source"), unique("all-topic")
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["one", "two", "three"])
    connect.create_connector(name, file_source_config(name, source_file, topic))
    connect.wait_for(
        lambda: connect.get(connect.connector_path(name, "offsets"))[1].get("offsets"),
        WAIT_S,
        description=f"{name} committed offsets",
    )
    connect.wait_for(lambda: connect.active_topics(name) == {topic}, WAIT_S, description=f"{name} active topics")

    assert run_catch_up(every_job(hooks={}), spark, settings) == 0

    api = api_client(settings)
    for path in ("status", "offsets", "topics"):
        ours = api.get(f"/connectors/{name}/{path}")
        assert (ours.status_code, ours.get_json()) == connect.get(connect.connector_path(name, path)), path
    partitions = api.get(f"/connectors/{name}/heartbeats").get_json()["partitions"]
    assert [p["partition"] for p in partitions] == [{"filename": str(source_file)}]
    assert partitions[0]["eligible"] is True
    assert api.get(f"/connectors/{name}/deletions").get_json() == {"name": name, "deletions": []}
    # Every query recorded the Kafka position its tables reflect, and nothing was lost.
    marks = delta_table(spark, settings, WATERMARKS.name).collect()
    assert {r.query for r in marks} == set(TABLE_QUERIES.values())
    assert all(r.next_offset >= 0 and r.batch_id >= 0 and r.committed_at is not None for r in marks)
    status_marks = {(r.topic, r.partition): r.next_offset for r in marks if r.query == "active_topics"}
    positions = TopicPositions(settings)
    try:
        ends = positions.latest_offsets(status_marks)  # the topic may have moved on since: never below a watermark
    finally:
        positions.close()
    assert sum(status_marks.values()) > 0 and all(status_marks[tp] <= ends[tp] for tp in status_marks)
    assert api.get("/data-loss").get_json() == {"data_loss": []}
    connect.delete_connector(name)


def test_continuous_jobs_answer_like_connect_and_stop_cleanly(spark, connect, stack_settings, tmp_path):
    settings = job_settings(
        stack_settings, tmp_path, **{"heartbeat.interval.ms": "600000", "trigger.interval": "2 seconds"}
    )
    name, topic = unique("all-live"), unique("all-live-topic")
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["one", "two"])
    connect.create_connector(name, file_source_config(name, source_file, topic))
    connect.wait_for(lambda: connect.active_topics(name) == {topic}, WAIT_S, description=f"{name} active topics")
    connect.wait_for(
        lambda: connect.get(connect.connector_path(name, "offsets"))[1].get("offsets"),
        WAIT_S,
        description=f"{name} committed offsets",
    )

    api = api_client(settings)
    jobs = every_job(hooks={})
    with running("connect-state-jobs", lambda stop: run_continuous(jobs, spark, settings, stop=stop), 240) as runner:

        def agrees() -> bool:
            assert runner.is_alive(), "the jobs ended"
            for path in ("status", "offsets", "topics"):
                ours = api.get(f"/connectors/{name}/{path}")
                if (ours.status_code, ours.get_json()) != connect.get(connect.connector_path(name, path)):
                    return False
            return True

        deadline = time.monotonic() + 240
        while not agrees():
            assert time.monotonic() < deadline, "the continuous jobs did not catch up within 240 s"
            time.sleep(2)
    connect.delete_connector(name)
