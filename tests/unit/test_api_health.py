"""``GET /health``, ``GET /metrics`` and the dashboard's own routes (issue 14), with Flask's test client.

The tables are written with ``deltalake``; Kafka is the in-memory ``kafka_log`` (tests/unit/conftest.py), so "how far
behind" is each topic's end offset minus the watermark the test writes.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from connect_state.api.health import HEALTHY_MESSAGE, STARTING_MESSAGE, UNHEALTHY_MESSAGE, HealthStatus, decide
from connect_state.core.errors import KafkaUnavailableError
from connect_state.core.settings import Settings
from connect_state.progress.freshness import TableLag
from connect_state.tables.schemas import CONNECTOR_EVENTS, SOURCE_OFFSETS_HISTORY, TABLE_QUERIES, WATERMARKS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTopics
from tests.unit.helpers import configure
from tests.unit.helpers import write_table as write_delta

CONFIGS, STATUS = "connect-configs", "connect-status"
SOURCE_CONFIG = {"connector.class": "FileStreamSource", "file": "/tmp/in.txt", "topic": "t"}
ALL_QUERIES = sorted(set(TABLE_QUERIES.values()))


def watermark(query: str, topic: str, partition: int, next_offset: int, age_s: float = 0.0) -> dict[str, Any]:
    committed = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=age_s)
    return {
        "query": query,
        "topic": topic,
        "partition": partition,
        "next_offset": next_offset,
        "batch_id": 1,
        "committed_at": committed,
    }


def metric_samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


# --- /health ---------------------------------------------------------------------------------------------------------


def test_decide_is_connects_three_answers() -> None:
    current = [TableLag("connectors", 0, 0), TableLag("source_offsets", 0, 0)]
    assert decide(current, set(), 1000).status is HealthStatus.HEALTHY  # nothing to fold: current without a batch
    behind = [TableLag("connectors", 3, 10), TableLag("source_offsets", 0, 0)]
    starting = decide(behind, {"source_offsets"}, 1000)
    assert starting.status is HealthStatus.STARTING
    assert starting.message == f"{STARTING_MESSAGE} Tables not yet folded from their topics: connectors."
    assert decide(behind, {"connector_states", "source_offsets"}, 1000).status is HealthStatus.HEALTHY
    stale = decide([TableLag("connectors", 3, 5000)], {"connector_states"}, 1000)
    assert stale.status is HealthStatus.UNHEALTHY and stale.message.startswith(UNHEALTHY_MESSAGE)
    assert "connectors" in stale.message
    assert decide([TableLag("connectors", 3, 5000)], {"connector_states"}, 0).status is HealthStatus.HEALTHY
    unknown = decide([TableLag("connectors")], {"connector_states"}, 1000)
    assert unknown.status is HealthStatus.UNHEALTHY and "end offsets" in unknown.message


def test_health_with_nothing_to_fold_is_healthy(make_client: MakeClient) -> None:
    response = make_client().get("/health")
    assert response.status_code == 200
    body = response.get_json()
    assert list(body)[:2] == ["status", "message"]
    assert body["status"] == "healthy" and body["message"] == HEALTHY_MESSAGE
    assert body["tables"]["connectors"] == {"records_behind": 0, "age_ms": 0}
    assert set(body["tables"]) == set(TABLE_QUERIES)


def test_health_is_503_until_the_jobs_fold_their_first_batch(
    settings: Settings, make_client: MakeClient, kafka_log: InMemoryTopics
) -> None:
    configure(kafka_log, "c", SOURCE_CONFIG)  # a config record no job has folded
    response = make_client().get("/health")
    assert response.status_code == 503
    body = response.get_json()
    assert body["status"] == "starting"
    assert body["message"].startswith(STARTING_MESSAGE) and "connectors" in body["message"]
    assert body["tables"]["connectors"]["records_behind"] >= 1

    marks = [watermark(query, CONFIGS, 0, kafka_log.end(CONFIGS, 0)) for query in ("connector_states", "heartbeats")]
    write_delta(settings.delta_root, WATERMARKS, marks)
    healthy = make_client().get("/health")
    assert healthy.status_code == 200, healthy.get_json()
    assert healthy.get_json()["tables"]["connector_events"] == {"records_behind": 0, "age_ms": 0}


def test_health_is_500_when_a_job_stopped_folding(
    settings: Settings, make_client: MakeClient, kafka_log: InMemoryTopics
) -> None:
    configure(kafka_log, "c", SOURCE_CONFIG)
    marks = [watermark("connector_states", CONFIGS, 0, 0, age_s=600), watermark("heartbeats", CONFIGS, 0, 1)]
    write_delta(settings.delta_root, WATERMARKS, marks)
    response = make_client(overrides={"api.health.max.age.ms": "60000"}).get("/health")
    assert response.status_code == 500
    body = response.get_json()
    assert body["status"] == "unhealthy" and body["message"].startswith(UNHEALTHY_MESSAGE)
    assert body["tables"]["connectors"]["age_ms"] >= 600_000


def test_health_is_500_without_kafka(settings: Settings, make_client: MakeClient) -> None:
    marks = [watermark(query, "connect-status", 0, 0) for query in ALL_QUERIES]
    write_delta(settings.delta_root, WATERMARKS, marks)
    down = make_client(topics=InMemoryTopics(fail=KafkaUnavailableError("cannot reach Kafka")))
    response = down.get("/health")
    assert response.status_code == 500
    assert response.get_json()["tables"]["connectors"] == {"records_behind": None, "age_ms": None}


# --- /metrics --------------------------------------------------------------------------------------------------------


def test_metrics_count_requests_by_url_rule_and_write_failures(make_client: MakeClient) -> None:
    client = make_client()
    client.get("/connectors/a/status")
    client.get("/connectors/b/status")
    client.get("/no/such/path")
    down = make_client(topics=InMemoryTopics(fail=KafkaUnavailableError("cannot reach Kafka")))
    assert down.put("/connectors/c/pause").status_code == 503
    response = client.get("/metrics")
    assert response.status_code == 200 and response.mimetype == "text/plain"
    samples = metric_samples(response.get_data(as_text=True))
    status_rule = (("endpoint", "/connectors/<connector>/status"), ("method", "GET"))
    assert sum(v for (name, labels), v in samples.items() if name == "connect_state_api_requests_total" and
               set(status_rule) <= set(labels)) == 2  # fmt: skip
    assert samples[("connect_state_api_request_duration_seconds_count", status_rule)] == 2
    assert any(name == "connect_state_api_requests_total" and ("endpoint", "<unmatched>") in labels
               for name, labels in samples)  # fmt: skip
    # Each app counts its own requests: the failed write is in the other app's registry.
    assert not any(name == "connect_state_api_write_failures_total" for name, _ in samples)
    failed = metric_samples(down.get("/metrics").get_data(as_text=True))
    key = (
        "connect_state_api_write_failures_total",
        (("endpoint", "/connectors/<connector>/pause"), ("method", "PUT"), ("status", "503")),
    )
    assert failed[key] == 1


def test_metrics_report_each_tables_lag_and_age(
    settings: Settings, make_client: MakeClient, kafka_log: InMemoryTopics
) -> None:
    configure(kafka_log, "c", SOURCE_CONFIG)
    write_delta(settings.delta_root, WATERMARKS, [watermark("connector_states", CONFIGS, 0, 0, age_s=30)])
    samples = metric_samples(make_client().get("/metrics").get_data(as_text=True))
    assert samples[("connect_state_table_records_behind", (("table", "connectors"),))] >= 1
    assert 29 <= samples[("connect_state_table_lag_seconds", (("table", "connectors"),))] <= 120
    assert 29 <= samples[("connect_state_table_last_commit_age_seconds", (("table", "connectors"),))] <= 120
    assert samples[("connect_state_table_records_behind", (("table", "active_topics"),))] == 0
    assert math.isnan(samples[("connect_state_table_last_commit_age_seconds", (("table", "active_topics"),))])


# --- the dashboard's routes ------------------------------------------------------------------------------------------


def test_dashboard_page_and_assets_are_served_by_the_app(make_client: MakeClient) -> None:
    client = make_client()
    page = client.get("/ui")
    assert page.status_code == 200 and page.mimetype == "text/html"
    text = page.get_data(as_text=True)
    assert 'data-restart="' in text and "__RESTART__" not in text
    assert "http://" not in text and "https://" not in text  # nothing fetched from elsewhere
    for asset in ("/static/dashboard.js", "/static/dashboard.css"):
        response = client.get(asset)
        assert response.status_code == 200, asset
        body = response.get_data(as_text=True)
        assert "https://" not in body and "http://" not in body.replace("http://www.w3.org/2000/svg", "")
        response.close()


def test_dashboard_timeline_has_state_changes_and_offset_movement(settings: Settings, make_client: MakeClient) -> None:
    t0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    events = [
        {
            "connector": "c",
            "event": "created",
            "details": json.dumps({"target_state": "STARTED"}),
            "kafka_timestamp": t0,
        },
        {
            "connector": "c",
            "event": "status_changed",
            "details": json.dumps({"from": None, "to": "RUNNING"}),
            "kafka_timestamp": t0 + dt.timedelta(seconds=5),
        },
        {"connector": "other", "event": "created", "details": "{}", "kafka_timestamp": t0},
    ]
    write_delta(settings.delta_root, CONNECTOR_EVENTS, events)
    offsets = [
        {
            "connector": "c",
            "partition": '{"filename":"/tmp/in.txt"}',
            "offset": json.dumps({"position": 10 * i}),
            "kafka_offset": i,
            "kafka_timestamp": t0 + dt.timedelta(seconds=10 * i),
        }
        for i in (2, 1)
    ]
    write_delta(settings.delta_root, SOURCE_OFFSETS_HISTORY, offsets)
    body = make_client().get("/ui/timeline/c").get_json()
    assert [e["event"] for e in body["events"]] == ["created", "status_changed"]
    assert body["events"][1]["details"]["to"] == "RUNNING"
    assert body["events"][0]["at"] == int(t0.timestamp() * 1000)
    assert [o["offset"] for o in body["offsets"]] == [{"position": 10}, {"position": 20}]
    assert make_client().get("/ui/timeline/c?limit=1").get_json()["offsets"] == body["offsets"][-1:]
    assert make_client().get("/ui/timeline/c?limit=0").status_code == 400
    assert make_client().get("/ui/timeline/none").get_json() == {"name": "none", "events": [], "offsets": []}
