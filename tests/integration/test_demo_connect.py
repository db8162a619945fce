"""The demo survives its own walk-through (issue 32), against the real worker: the README has the reader stop
``demo-source``; a reader who quits ``make run`` before the walk-through's resume step finds it STOPPED at the next
start. The demo's connector step (:func:`connect_state.dev.demo.create_demo_connectors`, step 2 of ``make run``) resumes
a demo connector left STOPPED or PAUSED through Connect's REST and says so; one that cannot reach RUNNING is named, and
the step returns instead of failing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connect_state.core.vocabulary import State
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.demo import DEMO_CONNECTORS, DEMO_SINK, DEMO_SOURCE, DemoConnectors, create_demo_connectors
from tests.integration.helpers import api_client, connector_state, delete_and_wait, job_settings, wait_state

pytestmark = [pytest.mark.integration]


@pytest.fixture
def demo_connectors(connect: ConnectRestClient) -> Iterator[None]:
    """The demo's connectors (fixed names) are deleted after the test, and Connect has forgotten their statuses."""
    yield
    for name in DEMO_CONNECTORS:
        if connect.connector_status(name) is not None:
            delete_and_wait(connect, name)


@pytest.mark.usefixtures("demo_connectors")
def test_demo_resumes_what_an_earlier_walk_through_left_stopped(connect, stack_settings, tmp_path):
    demo_dir = tmp_path / "demo"
    assert create_demo_connectors(connect, demo_dir) == DemoConnectors()  # a first start: nothing to resume
    # The walk-through's stop through our API, as the README has it; and a pause through Connect's own.
    api = api_client(job_settings(stack_settings, tmp_path))
    assert api.put(f"/connectors/{DEMO_SOURCE}/stop").status_code == 204
    assert connect.put(connect.connector_path(DEMO_SINK, "pause")) == (202, None)
    wait_state(connect, DEMO_SOURCE, "STOPPED", 0)
    wait_state(connect, DEMO_SINK, "PAUSED", 1)

    again = create_demo_connectors(connect, demo_dir)  # the next `make run`'s connector step

    assert again == DemoConnectors(resumed={DEMO_SOURCE: State.STOPPED, DEMO_SINK: State.PAUSED})
    assert again.report() == [
        f"      {DEMO_SOURCE} was STOPPED (left so by an earlier run): resumed through Connect's PUT .../resume",
        f"      {DEMO_SINK} was PAUSED (left so by an earlier run): resumed through Connect's PUT .../resume",
    ]
    for name in DEMO_CONNECTORS:
        assert connector_state(connect, name) == ("RUNNING", ["RUNNING"]), name


@pytest.mark.usefixtures("demo_connectors")
def test_demo_names_a_connector_that_does_not_reach_running(connect, tmp_path):
    demo_dir = tmp_path / "demo"
    (demo_dir / "output.txt").mkdir(parents=True)  # the sink's file is a directory: its task FAILS, reliably

    outcome = create_demo_connectors(connect, demo_dir, timeout=30.0)

    assert outcome.resumed == {}
    assert outcome.not_running == {DEMO_SINK: "connector RUNNING, task 0 FAILED"}
    assert outcome.report() == [
        f"      {DEMO_SINK} is not RUNNING (connector RUNNING, task 0 FAILED): the demo starts anyway"
    ]
    assert connect.is_running(DEMO_SOURCE)
