"""``connect-state-jobs --available-now``: one catch-up run of every job in one driver fills every table."""

from __future__ import annotations

import pytest

from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.spark.all_jobs import every_job
from connect_state.spark.streaming import run_catch_up
from tests.integration.helpers import api_client, job_settings, unique

pytestmark = [pytest.mark.integration, pytest.mark.spark]

WAIT_S = 90.0


def test_catch_up_of_every_job_answers_like_connect(spark, connect, stack_settings, tmp_path):
    settings = job_settings(stack_settings, tmp_path, **{"heartbeat.interval.ms": "600000"})
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
    connect.delete_connector(name)
