"""The API's side of the history tables' retention (api/retained.py): a time before what is kept answers 400 in
Connect's error JSON, saying what is kept; the audit table's clean-up by its spool's flusher."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from flask.testing import FlaskClient

from connect_state.api import retained
from connect_state.api.retained import AuditRetention
from connect_state.core.settings import Settings
from connect_state.tables.audit_table import AuditTable, iso_time
from connect_state.tables.schemas import AUDIT
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables
from tests.unit.helpers import assert_connect_error
from tests.unit.test_api_history import TABLES

DAY = 86_400_000
NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z
OLDEST = NOW - 35 * DAY  # 2025-11-27T00:00:00Z


@pytest.fixture
def client(make_client: MakeClient, monkeypatch: pytest.MonkeyPatch) -> FlaskClient:
    monkeypatch.setattr(retained, "now_ms", lambda: NOW)
    return make_client(tables=InMemoryTables(TABLES))  # the shipped 35 days


def refusal(name: str, value: str, table: str, days: int = 35, oldest: int = OLDEST) -> str:
    iso = datetime.fromtimestamp(oldest / 1000, tz=UTC).isoformat().replace("+00:00", "Z")
    return (
        f"Invalid {name} {value!r}: {table} keeps {days} days of history (history.retention.ms); the oldest time "
        f"still answerable is {iso} ({oldest})"
    )


@pytest.mark.parametrize(
    ("path", "name", "table"),
    [
        ("/connectors/src/history/topics", "at", "active_topics_history"),
        ("/connectors/src/history/offsets", "at", "source_offsets_history"),  # a deleted source
        ("/connectors/snk/history/offsets", "at", "sink_offsets_history"),
        ("/connectors/src/events", "since", "connector_events"),
        ("/connectors/src/events", "until", "connector_events"),
    ],
)
def test_a_time_before_the_retention_answers_400_saying_what_is_kept(
    client: FlaskClient, path: str, name: str, table: str
) -> None:
    assert_connect_error(client.get(path, query_string={name: "1500"}), 400, refusal(name, "1500", table))
    before = "2025-11-26T23:59:59Z"
    assert_connect_error(client.get(path, query_string={name: before}), 400, refusal(name, before, table))
    assert client.get(path, query_string={name: str(OLDEST)}).status_code == 200  # the edge is answered
    assert client.get(path).status_code == 200  # now


def test_a_table_kept_for_ever_answers_any_time(make_client: MakeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retained, "now_ms", lambda: NOW)
    client = make_client(
        tables=InMemoryTables(TABLES), overrides={"history.retention.ms.by.table": "active_topics_history=-1"}
    )
    assert client.get("/connectors/src/history/topics?at=1500").get_json()["topics"] == ["a"]
    body = client.get("/connectors/src/history/offsets?at=1500")
    assert_connect_error(body, 400, refusal("at", "1500", "source_offsets_history"))


def audit_line(principal: str, at: datetime) -> str:
    row = {"time": iso_time(at), "principal": principal, "method": "PUT", "path": "/x", "status": 204}
    return json.dumps(row) + "\n"


def test_the_audit_flusher_deletes_the_rows_older_than_the_retention(settings: Settings, tmp_path: Path) -> None:
    spool = tmp_path / "audit" / "api.jsonl"
    spool.parent.mkdir()
    now = datetime.now(UTC)
    spool.write_text(
        audit_line("old", datetime.fromtimestamp((now.timestamp() * 1000 - 40 * DAY) / 1000, tz=UTC))
        + audit_line("recent", now)
    )
    table = AuditTable(settings, spool)
    assert table.flush() == 2
    upkeep = AuditRetention(settings)
    cleaned = upkeep.maybe_run(table)
    assert cleaned is not None and (cleaned.deleted, cleaned.kept) == (1, 0)
    rows = DeltaTable(str(settings.delta_root / AUDIT.name)).to_pyarrow_table().to_pylist()
    assert [row["principal"] for row in rows] == ["recent"]
    assert upkeep.maybe_run(table) is None  # the next pass is an interval away
    assert table.flush() == 0  # the mark is past the old row: not flushed again


def test_get_audit_refuses_a_since_before_the_tables_retention(
    make_client: MakeClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retained, "now_ms", lambda: NOW)
    overrides: dict[str, Any] = {"api.audit.file": str(tmp_path / "audit.jsonl"), "api.audit.flush.interval.ms": "0"}
    client = make_client(overrides=overrides)
    assert_connect_error(client.get("/audit?since=1500"), 400, refusal("since", "1500", "audit"))
    assert client.get("/audit", query_string={"since": str(OLDEST)}).status_code == 200
    file_only = make_client(overrides={**overrides, "api.audit.table": "false"})  # the file keeps every row
    assert file_only.get("/audit?since=1500").status_code == 200
