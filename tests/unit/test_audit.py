"""The audit trail (api/audit.py, issue 13): a row for every write and every refusal, who and what and the outcome,
secrets redacted, appended durably to a file (kept across an API restart) and optionally sent to a Kafka topic."""

from __future__ import annotations

import base64
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from connect_state.api.audit import Outcome, audit_trail, outcome_of
from connect_state.security.redaction import REDACTED
from connect_state.tables.schemas import CONNECTORS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables, InMemoryTopics, RecordingWriter
from tests.unit.helpers import mirror_connectors
from tests.unit.test_auth import ROWS, fast_hash

CONNECTOR = "orders-src"


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def basic(user: str) -> dict[str, str]:
    return basic_as(user, user)


def basic_as(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture
def audit_file(tmp_path: Path) -> Path:
    return tmp_path / "audit" / "api.jsonl"


@pytest.fixture
def overrides(tmp_path: Path, audit_file: Path) -> dict[str, str]:
    users = tmp_path / "users"
    users.write_text(f"alice:{fast_hash('alice')}\nbob:{fast_hash('bob')}\n")
    roles = tmp_path / "roles"
    roles.write_text("alice: admin\nbob: read\n")
    return {
        "api.auth.basic.file": str(users),
        "api.auth.roles.file": str(roles),
        "api.audit.file": str(audit_file),
        "api.audit.flush.interval.ms": "0",  # flushed to the table after each request
    }


@pytest.fixture
def make(make_client: MakeClient, kafka_log: InMemoryTopics, overrides: dict[str, str]) -> Any:
    mirror_connectors(kafka_log, ROWS)

    def make(**extra: str) -> Any:
        return make_client(tables=InMemoryTables({CONNECTORS.name: ROWS}), overrides={**overrides, **extra})

    return make


def test_write_and_refusals_are_audited(make: Any, audit_file: Path, kafka_log: InMemoryTopics) -> None:
    client = make()
    assert client.put(f"/connectors/{CONNECTOR}/stop", headers=basic("alice")).status_code == 204
    assert client.put(f"/connectors/{CONNECTOR}/pause", headers=basic("bob")).status_code == 403
    assert client.delete(f"/connectors/{CONNECTOR}").status_code == 401
    assert client.get("/connectors", headers=basic("bob")).status_code == 200  # a read: not audited
    assert client.put("/connectors/missing/stop", headers=basic("alice")).status_code == 404
    stop, pause, delete, missing = rows(audit_file)
    assert [(w["topic"], w["key"], w["tombstone"]) for w in stop["written"]] == [
        ("connect-configs", f"commit-{CONNECTOR}", False),
        ("connect-configs", f"target-state-{CONNECTOR}", False),
    ]
    assert [w["offset"] for w in stop["written"]] == [
        record.offset for record in kafka_log.logs[("connect-configs", 0)][-2:]
    ], "the offsets Kafka gave the records"
    assert pause["written"] == delete["written"] == missing["written"] == []
    assert len({row["id"] for row in (stop, pause, delete, missing)}) == 4, "unique ids"
    assert {k: stop[k] for k in stop if k not in ("id", "time", "remote_addr", "written")} == {
        "principal": "alice",
        "auth": "basic",
        "method": "PUT",
        "path": f"/connectors/{CONNECTOR}/stop",
        "query": "",
        "endpoint": "connectors.stop_connector",
        "connector": CONNECTOR,
        "role": "operate",
        "body": None,
        "status": 204,
        "outcome": "succeeded",
        "message": None,
        "target_state_before": "STARTED",  # the connectors table's row when the request came
        "connector_state_before": "RUNNING",
        "repeated": None,  # a row of its own, not a summary of refusals
    }
    assert pause["target_state_before"] == "STARTED" and missing["target_state_before"] is None
    assert stop["time"].endswith("Z") and stop["remote_addr"] == "127.0.0.1"
    assert (pause["principal"], pause["status"], pause["outcome"], pause["role"]) == ("bob", 403, "refused", "operate")
    assert pause["message"].startswith("bob may not PUT")
    assert (delete["principal"], delete["status"], delete["outcome"]) == (None, 401, "refused")
    assert (missing["status"], missing["outcome"], missing["message"]) == (404, "failed", "Unknown connector missing")


def test_read_refusals_are_audited_too(make: Any, audit_file: Path) -> None:
    make().get("/connectors")
    assert [(r["method"], r["status"]) for r in rows(audit_file)] == [("GET", 401)]


def test_request_body_is_audited_with_secrets_redacted(make: Any, audit_file: Path) -> None:
    body = {"offsets": [{"partition": {"filename": "/x"}, "offset": {"position": 1}}], "db.password": "hunter2"}
    make().patch(f"/connectors/{CONNECTOR}/offsets", json=body, headers=basic("alice"), query_string={"a": "1"})
    (row,) = rows(audit_file)
    assert row["body"] == {**body, "db.password": REDACTED}
    assert row["query"] == "a=1" and row["status"] == 400  # not stopped
    assert "hunter2" not in audit_file.read_text()


def test_unparsable_and_deep_bodies_are_audited_by_size(make: Any, audit_file: Path) -> None:
    client = make()
    client.patch(f"/connectors/{CONNECTOR}/offsets", data=b"not json", headers=basic("alice"))
    client.patch(f"/connectors/{CONNECTOR}/offsets", data=b"[" * 100, headers=basic("alice"))
    assert [r["body"] for r in rows(audit_file)] == [{"unparsed_bytes": 8}, {"unparsed_bytes": 100}]


def test_audit_file_survives_an_api_restart(make: Any, audit_file: Path) -> None:
    make().put(f"/connectors/{CONNECTOR}/stop", headers=basic("alice"))
    make().put(f"/connectors/{CONNECTOR}/resume", headers=basic("alice"))  # a new app on the same file
    assert [r["path"].rsplit("/", 1)[1] for r in rows(audit_file)] == ["stop", "resume"]


def test_audit_topic(make: Any, writer: RecordingWriter, kafka_log: InMemoryTopics) -> None:
    kafka_log.create("connect-state-audit", 1)
    make(**{"api.audit.topic": "connect-state-audit"}).put(f"/connectors/{CONNECTOR}/stop", headers=basic("alice"))
    topic, records = writer.batches[-1]
    assert topic == "connect-state-audit"
    ((key, value),) = records
    assert key == CONNECTOR.encode() and json.loads(value or b"")["endpoint"] == "connectors.stop_connector"


def test_a_failing_audit_sink_never_changes_the_answer(
    make: Any, writer: RecordingWriter, caplog: pytest.LogCaptureFixture
) -> None:
    writer.fail = lambda topic: RuntimeError("down") if topic == "audit" else None
    client = make(**{"api.audit.topic": "audit"})
    assert client.put(f"/connectors/{CONNECTOR}/stop", headers=basic("alice")).status_code == 204
    assert any("Cannot audit" in r.getMessage() for r in caplog.records)


def test_audit_goes_to_the_log_always(make_client: MakeClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="connect_state.api.audit"):
        make_client().put("/connectors/x/stop")
    (record,) = [r for r in caplog.records if r.name == "connect_state.api.audit"]
    assert json.loads(record.getMessage())["principal"] == "anonymous"


@pytest.mark.parametrize(
    ("status", "outcome"), [(200, Outcome.SUCCEEDED), (204, Outcome.SUCCEEDED), (401, Outcome.REFUSED),
                            (403, Outcome.REFUSED), (429, Outcome.REFUSED), (404, Outcome.FAILED),
                            (500, Outcome.FAILED)]
)  # fmt: skip
def test_outcome(status: int, outcome: Outcome) -> None:
    assert outcome_of(status) == outcome


def test_consumer_group_changes_are_audited(
    make_client: MakeClient, kafka_log: InMemoryTopics, audit_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import connect_state.api.resources as api_resources

    class Admin:
        def list_group_offsets(self, group_id: str) -> dict[Any, int]:
            return {}

        def alter_group_offsets(self, group_id: str, offsets: Any) -> None: ...

        def delete_group_offsets(self, group_id: str, partitions: Any) -> None: ...

        def delete_group(self, group_id: str) -> bool:
            return True

        def close(self) -> None: ...

    monkeypatch.setattr(api_resources, "create_admin", lambda _settings: Admin())
    sink = {
        "name": "snk",
        "type": "sink",
        "connector_class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "config": json.dumps(
            {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "topics": "t"}
        ),
        "target_state": "STOPPED",
        "task_count": 0,
    }
    mirror_connectors(kafka_log, [sink])
    client = make_client(
        tables=InMemoryTables({CONNECTORS.name: [sink]}), overrides={"api.audit.file": str(audit_file)}
    )
    body = {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": {"kafka_offset": 5}}]}
    assert client.patch("/connectors/snk/offsets", json=body).status_code == 200
    assert client.delete("/connectors/snk/offsets").status_code == 200
    patch, reset = rows(audit_file)
    assert patch["written"] == [
        {"group": "connect-snk", "call": "alter_group_offsets", "partitions": ["t-1"]},
        {"group": "connect-snk", "call": "delete_group_offsets", "partitions": []},
    ]
    assert reset["written"] == [{"group": "connect-snk", "call": "delete_group", "partitions": None}]


def test_audit_endpoint(make: Any, audit_file: Path) -> None:
    client = make()
    alice = basic("alice")
    client.put(f"/connectors/{CONNECTOR}/stop", headers=alice)
    client.put("/connectors/billing-src/pause", headers=alice)
    client.put(f"/connectors/{CONNECTOR}/resume", headers=basic("bob"))  # refused
    with audit_file.open("a") as out:
        out.write('{"time": "torn')  # a torn last line (a crash mid-write) is skipped
    client = make()  # the API restarted after the crash
    assert client.get("/audit", headers=basic("bob")).status_code == 403  # admin only (audited too)
    body = client.get("/audit", headers=alice).get_json()
    assert body["total"] == 4
    assert [(r["principal"], r["path"].rsplit("/", 1)[1]) for r in body["rows"]] == [
        ("alice", "stop"),
        ("alice", "pause"),
        ("bob", "resume"),
        ("bob", "audit"),
    ]
    by_connector = client.get("/audit", headers=alice, query_string={"connector": CONNECTOR}).get_json()
    assert [r["path"].rsplit("/", 1)[1] for r in by_connector["rows"]] == ["stop", "resume"]
    refused = client.get("/audit", headers=alice, query_string={"outcome": "refused", "limit": "1"}).get_json()
    assert refused["total"] == 2 and [r["path"] for r in refused["rows"]] == ["/audit"]  # the newest
    assert client.get("/audit", headers=alice, query_string={"principal": "nobody"}).get_json() == {
        "total": 0,
        "rows": [],
    }
    first = body["rows"][1]["time"]  # the pause
    later = client.get("/audit", headers=alice, query_string={"since": first, "principal": "alice"}).get_json()
    assert [r["path"].rsplit("/", 1)[1] for r in later["rows"]] == ["pause"]
    before = str(int(time.time() * 1000) - 3_600_000)  # an hour before the rows, within the retention
    assert client.get("/audit", headers=alice, query_string={"until": before}).get_json()["total"] == 0


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"limit": "0"}, "limit must be an integer between 1 and 10000, got '0'"),
        ({"outcome": "maybe"}, "Unknown outcome 'maybe': expected one of succeeded, refused, failed"),
        ({"since": "yesterday"}, "Invalid since 'yesterday': expected epoch milliseconds or an ISO-8601 time"),
    ],
)
def test_audit_endpoint_bad_queries(make: Any, query: dict[str, str], message: str) -> None:
    response = make().get("/audit", headers=basic("alice"), query_string=query)
    assert response.status_code == 400 and response.get_json() == {"error_code": 400, "message": message}


def test_audit_endpoint_without_a_file(make_client: MakeClient) -> None:
    response = make_client().get("/audit")
    assert response.get_json() == {"error_code": 404, "message": "No audit file is configured (api.audit.file)"}


def test_refusals_are_audited_once_per_window_and_summarised(make: Any, audit_file: Path) -> None:
    """A flood of bad logins (issue 33 finding 6): the first 401 and the first 429 are written in full, the rest only
    counted; once the window has passed the next request writes one summary row per key, whose ``repeated`` is the
    count. Nothing of the flood is lost, and the file grows by four lines, not 200."""
    client = make(**{"api.auth.failures.per.address": "30"})
    trail = audit_trail(client.application)
    now = [0.0]
    trail.refusals.clock = lambda: now[0]
    answers = [client.get("/connectors", headers=basic_as(f"user{i}", "guess")).status_code for i in range(200)]
    assert answers == [401] * 30 + [429] * 170
    elsewhere = {"REMOTE_ADDR": "10.1.1.1"}  # the address the flood came from is refused whoever logs in
    pause = client.put(f"/connectors/{CONNECTOR}/pause", headers=basic("bob"), environ_overrides=elsewhere)
    assert pause.status_code == 403  # another key
    assert [(r["status"], r["repeated"]) for r in rows(audit_file)] == [(401, None), (429, None), (403, None)]
    now[0] += 60
    # any request closes the windows that have passed
    assert client.get("/connectors", headers=basic("bob"), environ_overrides=elsewhere).status_code == 200
    written = rows(audit_file)
    summaries = written[3:]
    assert [(r["status"], r["repeated"], r["outcome"], r["remote_addr"]) for r in summaries] == [
        (401, 29, "refused", "127.0.0.1"),
        (429, 169, "refused", "127.0.0.1"),
    ]  # bob's single 403 needs no summary
    assert sum(r["repeated"] or 1 for r in written if r["status"] in (401, 429)) == 200  # a summary: its count
    assert summaries[0]["message"].startswith(f"29 more refusals like the one at {written[0]['time']}")
    assert summaries[1]["endpoint"] == "connectors.list_connectors" and summaries[1]["path"] == "/connectors"


def test_pending_summaries_are_written_when_the_trail_stops(make: Any, audit_file: Path) -> None:
    client = make()
    for _ in range(5):
        client.delete(f"/connectors/{CONNECTOR}")
    assert len(rows(audit_file)) == 1
    audit_trail(client.application).stop()
    assert [r["repeated"] for r in rows(audit_file)] == [None, 4]


def test_refusals_one_row_each_with_window_zero(make: Any, audit_file: Path) -> None:
    client = make(**{"api.audit.refusals.window.ms": "0"})
    for _ in range(5):
        client.delete(f"/connectors/{CONNECTOR}")
    assert [r["status"] for r in rows(audit_file)] == [401] * 5
