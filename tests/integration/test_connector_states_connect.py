"""KIP-875 connector states against the real Connect worker: our GET /status equals Connect's at every step, and
PUT stop / pause / resume through our API are honoured by Connect (ConnectWorkerIntegrationTest.testPauseStopResume)."""

from __future__ import annotations

import pytest

from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from tests.integration.helpers import (
    api_client,
    create_topic,
    delete_and_wait,
    job_settings,
    run_connector_states,
    unique,
    wait_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]
WAIT_S = 60.0


def test_status_and_lifecycle_match_connect(spark, connect, stack_settings, tmp_path):
    settings = job_settings(stack_settings, tmp_path)
    api = api_client(settings)
    source, sink, topic = unique("state-source"), unique("state-sink"), unique("state-topic")
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["one", "two"])
    create_topic(settings, topic, 3)  # the sink reads several partitions
    connect.create_connector(source, file_source_config(source, source_file, topic))
    connect.create_connector(sink, file_sink_config(sink, tmp_path / "out.txt", [topic]))

    def agree(name: str, state: str, tasks: int) -> None:
        """Once Connect reports the connector and all its tasks in ``state``, our answer is Connect's.

        The status topic is read by both sides independently, so a status record may land between our catch-up run
        and Connect's answer: the comparison is retried (with a new catch-up run) a few times before it fails.
        """
        wait_state(connect, name, state, tasks, WAIT_S)
        for _ in range(3):
            run_connector_states(spark, settings)
            ours = api.get(f"/connectors/{name}/status")
            theirs = connect.get(f"/connectors/{name}/status")
            if (ours.status_code, ours.get_json()) == theirs:
                break
        assert (ours.status_code, ours.get_json()) == theirs

    agree(source, "RUNNING", 1)
    agree(sink, "RUNNING", 1)
    listed = api.get("/connectors").get_json()
    assert {source, sink} <= set(listed)

    # Connect's own lifecycle calls, mirrored in our table.
    assert connect.put(connect.connector_path(source, "pause"))[0] == 202
    agree(source, "PAUSED", 1)
    assert connect.put(connect.connector_path(source, "stop"))[0] == 204
    agree(source, "STOPPED", 0)
    assert connect.put(connect.connector_path(source, "resume"))[0] == 202
    agree(source, "RUNNING", 1)

    # Ours, honoured by Connect.
    response = api.put(f"/connectors/{sink}/stop")
    assert response.status_code == 204
    agree(sink, "STOPPED", 0)
    # Connect itself accepts offset changes only for a connector stopped with zero tasks: ours qualifies.
    status, body = connect.request("DELETE", connect.connector_path(sink, "offsets"))
    assert status == 200, body
    assert api.put(f"/connectors/{sink}/pause").status_code == 202
    agree(sink, "PAUSED", 0)
    assert api.put(f"/connectors/{sink}/resume").status_code == 202
    agree(sink, "RUNNING", 1)

    # Deleted through Connect: our row is flagged, the name leaves GET /connectors, unknown names answer 404.
    delete_and_wait(connect, source, WAIT_S)
    run_connector_states(spark, settings)
    assert source not in api.get("/connectors").get_json()
    assert api.put(f"/connectors/{source}/stop").status_code == 404
    theirs = connect.get(f"/connectors/{source}/status")
    ours = api.get(f"/connectors/{source}/status")
    assert (ours.status_code, ours.get_json()) == theirs
    connect.delete_connector(sink)
