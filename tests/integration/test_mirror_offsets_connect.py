"""KIP-875 ``alterOffsets`` of the MirrorMaker 2 connectors: our offsets answers against the real worker's.

The worker runs with ``connect-mirror`` on its classpath (``jvm/kafka/pom.xml``). Each MM2 connector is created
STOPPED (KIP-980 ``initial_state``), so it has no tasks and needs no second cluster. Every ``PATCH`` below, valid or
not, and a ``DELETE``, is sent to our API and to the worker; the status and body must be the same. The refusals are
``MirrorUtils``' messages (Java ``Map.toString`` of the normalised maps, the first bad entry in Connect's ``HashMap``
order); the successes are the short message (MM2's ``alterOffsets`` returns true). ``MirrorSourceConnector`` has a
``topics`` setting: taking its type from its class is what keeps it from being answered as a sink.
"""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.api.offsets import CONNECTOR_TYPE_HEADER
from connect_state.connect.mirror_maker import MIRROR_CHECKPOINT_CLASS, MIRROR_HEARTBEAT_CLASS, MIRROR_SOURCE_CLASS
from connect_state.connect.rest import offsets_success_message
from connect_state.dev.connect_rest import ConnectRestClient
from tests.integration.helpers import api_client, connect_offsets, job_settings, unique

pytestmark = [pytest.mark.integration]
WAIT_S = 60.0


def ours(api: FlaskClient, method: str, name: str, body: Any = None) -> tuple[int, Any]:
    response = api.open(f"/connectors/{name}/offsets", method=method, json=body)
    assert CONNECTOR_TYPE_HEADER not in response.headers  # the type came from the class, not from a guess
    return response.status_code, response.get_json()


def theirs(connect: ConnectRestClient, method: str, name: str, body: Any = None) -> tuple[int, Any]:
    return connect.request(method, connect.connector_path(name, "offsets"), body)


def create_stopped(connect: ConnectRestClient, name: str, config: dict[str, str]) -> None:
    status, body = connect.post("/connectors", {"name": name, "config": config, "initial_state": "STOPPED"})
    assert status == 201, body
    connect.wait_for(
        lambda: (connect.connector_status(name) or {}).get("connector", {}).get("state") == "STOPPED",
        WAIT_S,
        description=f"{name} STOPPED",
    )


def mirror_config(connector_class: str, bootstrap: str) -> dict[str, str]:
    return {
        "connector.class": connector_class,
        "tasks.max": "1",
        "source.cluster.alias": "east",
        "target.cluster.alias": "west",
        "source.cluster.bootstrap.servers": bootstrap,
        "target.cluster.bootstrap.servers": bootstrap,
        "topics": "orders.*",
        "groups": "billing.*",
    }


def entry(partition: Any, offset: Any) -> dict[str, Any]:
    return {"partition": partition, "offset": offset}


def body(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"offsets": list(entries)}


SOURCE_OK = {"cluster": "east", "topic": "orders", "partition": 0}
CHECKPOINT_OK = {"group": "billing", "topic": "orders", "partition": 2}
HEARTBEAT_OK = {"sourceClusterAlias": "east", "targetClusterAlias": "west"}

CASES: dict[str, list[dict[str, Any]]] = {
    MIRROR_SOURCE_CLASS: [
        body(entry(SOURCE_OK, {"offset": 5})),
        body(entry({"topic": "orders", "partition": 0}, {"offset": 5})),
        body(entry({**SOURCE_OK, "cluster": 7}, {"offset": 5})),
        body(entry({**SOURCE_OK, "cluster": {"nested": [1, 2.5, None, True]}}, {"offset": 5})),
        body(entry({"cluster": "east", "topic": "orders"}, {"offset": 5})),
        body(entry({**SOURCE_OK, "partition": "0"}, {"offset": 5})),
        body(entry({**SOURCE_OK, "partition": -1}, {"offset": 5})),
        body(entry({**SOURCE_OK, "partition": 3000000000}, {"offset": 5})),
        body(entry({**SOURCE_OK, "partition": 1.5}, {"offset": 5})),
        body(entry({**SOURCE_OK, "partition": -3000000000}, {"offset": 5})),  # intValue() is positive: accepted
        body(entry(SOURCE_OK, {"position": 5})),
        body(entry(SOURCE_OK, {"offset": -1})),
        body(entry(SOURCE_OK, {"offset": "5"})),
        body(entry(SOURCE_OK, {"offset": 1e3})),
        body(entry(None, {"offset": 5})),
        body(entry({"garbage": True}, None)),  # tombstones are allowed for anything
        body(*(entry({"cluster": "east", "topic": f"t{i}", "partition": -i}, {"offset": i}) for i in range(1, 7))),
    ],
    MIRROR_CHECKPOINT_CLASS: [
        body(entry(CHECKPOINT_OK, {"offset": 0})),
        body(entry(CHECKPOINT_OK, {"offset": 5})),
        body(entry({"topic": "orders", "partition": 2}, {"offset": 0})),
        body(entry({**CHECKPOINT_OK, "group": None}, {"offset": 0})),
        body(entry({**CHECKPOINT_OK, "partition": 2**40}, {"offset": 0})),
        body(entry(CHECKPOINT_OK, {})),
        body(entry(None, None), entry(CHECKPOINT_OK, {"offset": 0})),
    ],
    MIRROR_HEARTBEAT_CLASS: [
        body(entry(HEARTBEAT_OK, {"offset": 0})),
        body(entry(HEARTBEAT_OK, {"offset": 1})),
        body(entry({"sourceClusterAlias": "east"}, {"offset": 0})),
        body(entry({**HEARTBEAT_OK, "targetClusterAlias": ["west"]}, {"offset": 0})),
        body(entry({**HEARTBEAT_OK, "partition": -5}, {"offset": 0})),  # no partition check for heartbeats
        body(entry(HEARTBEAT_OK, {"offset": False})),
    ],
}


@pytest.mark.parametrize("connector_class", list(CASES), ids=lambda c: c.rsplit(".", 1)[-1])
def test_mirror_maker_alter_offsets_answers_match_the_worker(connect, stack_settings, tmp_path, connector_class):
    settings = job_settings(stack_settings, tmp_path)
    api = api_client(settings)
    name = unique("mm2-" + connector_class.rsplit(".", 1)[-1].lower())
    create_stopped(connect, name, mirror_config(connector_class, settings.bootstrap_servers))

    answers = []
    for request in CASES[connector_class]:
        mine, connects = ours(api, "PATCH", name, request), theirs(connect, "PATCH", name, request)
        assert mine == connects, request
        answers.append(mine)
    # Both kinds of answer were seen: MM2's short success message and its refusals (500s).
    assert (200, {"message": offsets_success_message("altered", True)}) in answers
    assert any(status == 500 for status, _ in answers)

    # What was written is what Connect reads back; a reset is the short message too, and leaves nothing.
    valid = CASES[connector_class][0]["offsets"][0]
    assert ours(api, "PATCH", name, body(valid)) == (200, {"message": offsets_success_message("altered", True)})
    assert valid in connect_offsets(connect, name)
    mine = ours(api, "DELETE", name)
    assert mine == (200, {"message": offsets_success_message("reset", True)})
    connect.wait_for(lambda: connect_offsets(connect, name) == [], WAIT_S, description=f"{name} offsets reset")
    assert theirs(connect, "DELETE", name) == mine
    connect.delete_connector(name)
