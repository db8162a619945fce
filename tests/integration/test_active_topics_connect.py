"""KIP-558 against a real Connect worker: Connect's ConnectorTopicsIntegrationTest scenarios
(``connect/runtime/src/test/java/org/apache/kafka/connect/integration/ConnectorTopicsIntegrationTest.java``).

At every step the job runs a catch-up (``AvailableNow``) over the real status topic, and our
``GET /connectors/<name>/topics`` must equal Connect's own answer, compared as sets.
"""

from __future__ import annotations

import pytest

from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from tests.integration.helpers import api_client, delete_and_wait, job_settings, our_topics, run_active_topics, unique

pytestmark = [pytest.mark.integration, pytest.mark.spark]
WAIT_S = 60.0


def test_get_active_topics_matches_connect(spark, connect, stack_settings, tmp_path):
    """testGetActiveTopics, with the reset sent through our API and honoured by Connect."""
    settings = job_settings(stack_settings, tmp_path)
    api = api_client(settings)
    foo, bar, baz = unique("foo-source"), unique("bar-source"), unique("baz-sink")
    foo_topic, bar_topic = unique("foo-topic"), unique("bar-topic")
    foo_file, bar_file = tmp_path / "foo.txt", tmp_path / "bar.txt"
    append_lines(foo_file, ["foo 1", "foo 2"])
    append_lines(bar_file, ["bar 1"])

    def agree(name: str, expected: set[str]) -> None:
        connect.wait_for(lambda: connect.active_topics(name) == expected, WAIT_S, description=f"{name} {expected}")
        run_active_topics(spark, settings)
        assert our_topics(api, name) == connect.active_topics(name) == expected

    # An unknown connector: 200 with no topics, from both.
    agree(foo, set())

    connect.create_connector(foo, file_source_config(foo, foo_file, foo_topic))
    agree(foo, {foo_topic})
    connect.create_connector(bar, file_source_config(bar, bar_file, bar_topic))
    agree(bar, {bar_topic})

    connect.create_connector(baz, file_sink_config(baz, tmp_path / "baz.out", [foo_topic, bar_topic]))
    agree(baz, {foo_topic, bar_topic})

    # Deleting a connector resets its topics (the revoking worker tombstones them).
    delete_and_wait(connect, bar, WAIT_S)
    agree(bar, set())

    # Reset through our API: tombstones Connect honours.
    response = api.put(f"/connectors/{baz}/topics/reset")
    assert response.status_code == 202
    assert response.get_data() == b""
    agree(baz, set())

    # Only the topic that still carries records comes back.
    append_lines(foo_file, ["foo 3"])
    agree(baz, {foo_topic})
    agree(foo, {foo_topic})

    for name in (foo, baz):
        connect.delete_connector(name)


@pytest.mark.parametrize(
    ("worker_props", "method", "path"),
    [
        ({"topic.tracking.enable": "false"}, "get", "/connectors/{name}/topics"),
        ({"topic.tracking.enable": "false"}, "put", "/connectors/{name}/topics/reset"),
        (
            {"topic.tracking.enable": "false", "topic.tracking.allow.reset": "false"},
            "put",
            "/connectors/{name}/topics/reset",
        ),
        ({"topic.tracking.allow.reset": "false"}, "put", "/connectors/{name}/topics/reset"),
    ],
    ids=["get-disabled", "reset-disabled", "reset-both-disabled", "reset-not-allowed"],
)
def test_tracking_flags_answer_like_connect(extra_connect_worker, stack_settings, tmp_path, worker_props, method, path):
    """testTopicTrackingIsDisabled / testTopicTrackingResetIsDisabled: same status code and body as Connect."""
    worker = extra_connect_worker(**worker_props).client()
    settings = job_settings(stack_settings, tmp_path, **worker_props)
    name = unique("tracked")
    url = path.format(name=name)
    theirs = worker.request(method.upper(), url)
    ours = getattr(api_client(settings), method)(url)
    assert theirs[0] == 403
    assert (ours.status_code, ours.get_json()) == theirs
