"""``GET /connectors/<name>/availability`` and ``GET /availability`` (api/availability.py) over in-memory tables."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.api import availability as view
from connect_state.core.settings import Settings
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables, InMemoryTopics
from tests.unit.helpers import assert_connect_error
from tests.unit.test_api_connectors import connector
from tests.unit.test_api_history import event, ts

DAY = 86_400_000
NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z
T0 = NOW - 2 * DAY


def life(name: str, start: int) -> list[dict[str, Any]]:
    """Created at ``start``, RUNNING with its task an hour later, the task FAILED for 10 minutes a day later."""
    hour = 3_600_000
    return [
        event(name, "created", 1, start, connector_class="X"),
        event(name, "tasks_committed", 2, start, task_count=1),
        event(name, "status_changed", 3, start + hour, source="status", to="RUNNING"),
        event(name, "task_status_changed", 4, start + hour, source="status", task=0, to="RUNNING"),
        event(name, "task_status_changed", 5, start + DAY, source="status", task=0, to="FAILED", **{"from": "RUNNING"}),
        event(
            name, "task_status_changed", 6, start + DAY + 600_000, source="status", task=0, to="RUNNING",
            **{"from": "FAILED"},
        ),
    ]  # fmt: skip


TABLES = {
    "connectors": [connector("src"), connector("old")],
    "connector_events": [*life("src", T0), *life("old", T0 - 30 * DAY)],
    "data_loss": [],
}


@pytest.fixture
def client(make_client: MakeClient, monkeypatch: pytest.MonkeyPatch) -> FlaskClient:
    monkeypatch.setattr(view, "now_ms", lambda: NOW)
    monkeypatch.setattr(view, "_known_until", lambda now: None)
    return make_client(tables=InMemoryTables(TABLES))


def test_one_connector_over_the_default_week(client: FlaskClient) -> None:
    body = client.get("/connectors/src/availability").get_json()
    assert (body["since"], body["until"]) == (NOW - 7 * DAY, NOW)
    assert body["durations_ms"] == {
        "running": 2 * DAY - 3_600_000 - 600_000,
        "degraded": 3_600_000,
        "failed": 600_000,
        "paused": 0,
        "stopped": 0,
        "unknown": 5 * DAY,
    }
    assert body["unknown_ms"]["not_existing"] == 5 * DAY
    assert body["failures"] == 1 and body["restarts"] == 1
    assert body["recovery"] == {"count": 1, "mean_ms": 600_000, "worst_ms": 600_000, "unrecovered": 0}
    assert [s["state"] for s in body["segments"]] == ["unknown", "degraded", "running", "failed", "running"]
    assert body["kept_from"] is None and body["known_until"] is None


def test_iso_times_and_a_window_partly_before_the_retention_is_unknown_there(client: FlaskClient) -> None:
    since = dt.datetime.fromtimestamp((NOW - 40 * DAY) / 1000, dt.UTC).isoformat().replace("+00:00", "Z")
    body = client.get(f"/connectors/old/availability?since={since}&until={NOW}").get_json()
    assert body["kept_from"] == NOW - 35 * DAY
    assert body["unknown_ms"]["before_history"] == 5 * DAY
    assert body["since"] == NOW - 40 * DAY


def test_every_connector_added_up(client: FlaskClient) -> None:
    body = client.get(f"/availability?since={T0}&until={T0 + DAY}").get_json()
    assert body["connector_count"] == 2
    assert [c["connector"] for c in body["connectors"]] == ["old", "src"]
    assert body["durations_ms"]["running"] == DAY + (DAY - 3_600_000)
    assert body["failures"] == 0
    assert abs(sum(body["shares"].values()) - 1) < 1e-9
    assert "segments" not in body["connectors"][0]


def test_a_connector_that_did_not_exist_in_the_window_is_left_out(client: FlaskClient) -> None:
    body = client.get(f"/availability?since={T0 - 3 * DAY}&until={T0}").get_json()
    assert [c["connector"] for c in body["connectors"]] == ["old"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("since=yesterday", "Invalid since 'yesterday': expected epoch milliseconds or an ISO-8601 time"),
        ("until=1x", "Invalid until '1x': expected epoch milliseconds or an ISO-8601 time"),
        (
            f"since={NOW}&until={NOW}",
            f"Invalid window: since (2026-01-01T00:00:00Z, {NOW}) must be before until (2026-01-01T00:00:00Z, {NOW})",
        ),
        (
            f"since=0&until={NOW - 36 * DAY}",
            f"Invalid window: it ends at 2025-11-26T00:00:00Z ({NOW - 36 * DAY}), before the history kept: "
            "connector_events keeps 35 days of history (history.retention.ms); the oldest time still answerable is "
            f"2025-11-27T00:00:00Z ({NOW - 35 * DAY})",
        ),
    ],
)
@pytest.mark.parametrize("path", ["/connectors/src/availability", "/availability"])
def test_bad_windows_answer_400(client: FlaskClient, path: str, query: str, message: str) -> None:
    assert_connect_error(client.get(f"{path}?{query}"), 400, message)


def test_a_window_before_the_connector_s_first_record_answers_400(client: FlaskClient) -> None:
    until = T0 - DAY
    assert_connect_error(
        client.get(f"/connectors/src/availability?since={until - DAY}&until={until}"),
        400,
        f"Invalid window: it ends at 2025-12-29T00:00:00Z ({until}), before the history kept for connector src: it "
        f"starts at 2025-12-30T00:00:00Z ({T0}), its first record in connector_events (before it, the connector did "
        "not exist or its records are no longer kept)",
    )


def test_unknown_connector_404(client: FlaskClient) -> None:
    assert_connect_error(client.get("/connectors/nope/availability"), 404, "Connector nope not found")


def test_records_lost_and_jobs_behind_are_unknown(make_client: MakeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(view, "now_ms", lambda: NOW)
    monkeypatch.setattr(view, "_known_until", lambda now: now - 3_600_000)
    loss = {
        "query": "connector_states", "topic": "connect-status", "partition": 0, "expected_offset": 5,
        "earliest_offset": 7, "cause": "records_deleted", "batch_id": 3, "detected_at": ts(T0 + DAY + 1000),
    }  # fmt: skip
    client = make_client(tables=InMemoryTables({**TABLES, "data_loss": [loss]}))
    body = client.get(f"/connectors/src/availability?since={T0}").get_json()
    # from the last status event before offset 5 of connect-status partition 0 (offset 4, an hour after T0)
    assert body["unknown_ms"]["records_lost"] == DAY + 1000 - 3_600_000
    assert body["unknown_ms"]["jobs_behind"] == 3_600_000
    assert body["known_until"] == NOW - 3_600_000


@pytest.mark.parametrize("behind", [0, 2])
def test_known_until_is_the_job_s_last_batch_while_records_wait_past_its_watermark(
    make_client: MakeClient, kafka_log: InMemoryTopics, settings: Settings, monkeypatch: pytest.MonkeyPatch, behind: int
) -> None:
    monkeypatch.setattr(view, "now_ms", lambda: NOW)
    committed = NOW - 3_600_000
    config, status = settings.config_storage_topic, settings.status_storage_topic
    for _ in range(3):
        kafka_log.append(config, 0, b"k", b"v")
    marks = [
        {"query": "connector_states", "topic": config, "partition": 0, "next_offset": 3 - behind, "batch_id": 1,
         "committed_at": ts(committed)},
    ] + [
        {"query": "connector_states", "topic": status, "partition": p, "next_offset": 0, "batch_id": 1,
         "committed_at": ts(committed)}
        for p in range(kafka_log.partition_count(status))
    ]  # fmt: skip
    client = make_client(tables=InMemoryTables({**TABLES, "watermarks": marks}))
    body = client.get(f"/connectors/src/availability?since={T0}").get_json()
    assert body["known_until"] == (committed if behind else None)
    assert body["unknown_ms"]["jobs_behind"] == (3_600_000 if behind else 0)
