"""The verdicts' API (issue 35): GET /connectors/<name>/verdict, GET /verdicts, ?expand=verdict, the gauge."""

from __future__ import annotations

import datetime as dt
import json

from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables

AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
CONNECTORS = [
    {"name": "orders-sink", "type": "sink", "config": json.dumps({"connector.class": "FileStreamSink"})},
    {"name": "files-source", "type": "source", "config": json.dumps({"connector.class": "FileStreamSource"})},
    {"name": "gone", "type": "source", "config": json.dumps({}), "deleted": True},
]
VERDICTS = [
    {
        "connector": "orders-sink",
        "type": "sink",
        "verdict": "stalled",
        "since": AT,
        "evidence": json.dumps({"lag": 12}),
        "tasks": json.dumps({"0": {"verdict": "stalled", "evidence": {"lag": 12}}}),
        "thresholds": json.dumps({"sink_stall_ms": 300000}),
        "updated": AT,
    },
    {"connector": "gone", "verdict": "healthy", "evidence": "{}", "tasks": "{}", "thresholds": "{}", "updated": AT},
]


def tables(with_verdicts: bool = True) -> InMemoryTables:
    rows = {"connectors": CONNECTORS, **({"connector_verdicts": VERDICTS} if with_verdicts else {})}
    return InMemoryTables(rows)


def test_a_connectors_verdict(make_client: MakeClient) -> None:
    response = make_client(tables=tables()).get("/connectors/orders-sink/verdict")
    assert response.status_code == 200
    assert response.get_json() == {
        "name": "orders-sink",
        "type": "sink",
        "verdict": "stalled",
        "since": "2026-01-01T00:00:00.000Z",
        "evidence": {"lag": 12},
        "tasks": [{"id": 0, "verdict": "stalled", "evidence": {"lag": 12}}],
        "thresholds": {"sink_stall_ms": 300000},
        "updated": "2026-01-01T00:00:00.000Z",
    }


def test_not_judged_yet_is_unknown_and_an_unknown_connector_is_connects_404(make_client: MakeClient) -> None:
    for client in (make_client(tables=tables()), make_client(tables=tables(with_verdicts=False))):
        body = client.get("/connectors/files-source/verdict").get_json()
        assert body["verdict"] == "unknown" and "has not judged" in body["evidence"]["reason"]
        for name in ("nope", "gone"):
            missing = client.get(f"/connectors/{name}/verdict")
            assert (missing.status_code, missing.get_json()) == (
                404,
                {"error_code": 404, "message": f"Connector {name} not found"},
            )


def test_the_list_and_its_filter(make_client: MakeClient) -> None:
    client = make_client(tables=tables())
    every = client.get("/verdicts").get_json()["verdicts"]
    assert [(v["name"], v["verdict"]) for v in every] == [("files-source", "unknown"), ("orders-sink", "stalled")]
    stalled = client.get("/verdicts?state=STALLED").get_json()["verdicts"]
    assert [v["name"] for v in stalled] == ["orders-sink"]
    assert client.get("/verdicts?state=healthy").get_json() == {"verdicts": []}
    bad = client.get("/verdicts?state=sleepy")
    assert bad.status_code == 400
    assert bad.get_json()["message"] == (
        "state: unknown verdict 'sleepy'; the verdicts are failed, flapping, stalled, dropping, degraded, restarting, "
        "quiet, idle, paused, stopped, healthy, unknown"
    )


def test_expand_verdict(make_client: MakeClient) -> None:
    body = make_client(tables=tables()).get("/connectors?expand=verdict&expand=info").get_json()
    assert sorted(body) == ["files-source", "orders-sink"]
    assert body["orders-sink"]["verdict"]["verdict"] == "stalled" and "info" in body["orders-sink"]
    assert body["files-source"]["verdict"]["verdict"] == "unknown"


def test_the_gauge(make_client: MakeClient) -> None:
    text = make_client(tables=tables()).get("/metrics").get_data(as_text=True)
    lines = [line for line in text.splitlines() if line.startswith("connect_state_connector_verdict{")]
    assert 'connect_state_connector_verdict{connector="orders-sink",verdict="stalled"} 1.0' in lines
    assert 'connect_state_connector_verdict{connector="orders-sink",verdict="healthy"} 0.0' in lines
    assert len([line for line in lines if 'connector="orders-sink"' in line]) == 12  # one per verdict
    assert sum(line.endswith(" 1.0") for line in lines) == 2  # one current verdict per connector in the table
