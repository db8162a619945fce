"""The audit trail's Delta table (api/audit.py, issue 13 §3): the audit file is a write-ahead spool flushed to the
table ``audit``; nothing is lost or duplicated across a restart, a crash between the append and the mark, or a
table that cannot be written for a while; GET /audit serves the table plus the unflushed spool."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from connect_state.api.audit import audit_trail
from connect_state.core.settings import Settings
from connect_state.tables import audit_table
from connect_state.tables.schemas import AUDIT, CONNECTORS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables, InMemoryTopics
from tests.unit.helpers import mirror_connectors
from tests.unit.test_audit import basic
from tests.unit.test_auth import ROWS, fast_hash

CONNECTOR = "orders-src"


@pytest.fixture
def spool(tmp_path: Path) -> Path:
    return tmp_path / "audit" / "api.jsonl"


@pytest.fixture
def make(make_client: MakeClient, kafka_log: InMemoryTopics, tmp_path: Path, spool: Path) -> Any:
    mirror_connectors(kafka_log, ROWS)
    users = tmp_path / "users"
    users.write_text(f"alice:{fast_hash('alice')}\nbob:{fast_hash('bob')}\n")
    roles = tmp_path / "roles"
    roles.write_text("alice: admin\nbob: read\n")

    def make(interval_ms: str = "0") -> Any:
        overrides = {
            "api.auth.basic.file": str(users),
            "api.auth.roles.file": str(roles),
            "api.audit.file": str(spool),
            "api.audit.flush.interval.ms": interval_ms,
        }
        return make_client(tables=InMemoryTables({CONNECTORS.name: ROWS}), overrides=overrides)

    return make


def table_rows(settings: Settings) -> list[dict[str, Any]]:
    table = DeltaTable(str(settings.delta_root / AUDIT.name)).to_pyarrow_table()
    assert table.schema == AUDIT.schema
    return sorted(table.to_pylist(), key=lambda row: row["time"])


def spool_ids(spool: Path) -> list[str]:
    return [json.loads(line)["id"] for line in spool.read_text().splitlines()]


def test_writes_and_refusals_become_table_rows(make: Any, settings: Settings, spool: Path) -> None:
    client = make()
    assert client.put(f"/connectors/{CONNECTOR}/stop", headers=basic("alice")).status_code == 204
    assert client.put(f"/connectors/{CONNECTOR}/pause", headers=basic("bob")).status_code == 403
    assert client.delete(f"/connectors/{CONNECTOR}").status_code == 401
    assert client.get("/connectors", headers=basic("bob")).status_code == 200  # a read: no row
    rows = table_rows(settings)
    assert [row["id"] for row in rows] == spool_ids(spool)
    assert [(r["principal"], r["method"], r["status"], r["outcome"]) for r in rows] == [
        ("alice", "PUT", 204, "succeeded"),
        ("bob", "PUT", 403, "refused"),
        (None, "DELETE", 401, "refused"),
    ]
    stop = rows[0]
    assert (stop["connector"], stop["target_state_before"], stop["connector_state_before"]) == (
        CONNECTOR,
        "STARTED",
        "RUNNING",
    )
    assert [w["key"] for w in json.loads(stop["written"])] == [f"commit-{CONNECTOR}", f"target-state-{CONNECTOR}"]
    served = client.get("/audit", headers=basic("alice"), query_string={"connector": CONNECTOR}).get_json()
    assert [row["id"] for row in served["rows"]] == [row["id"] for row in rows]
    assert served["rows"][0]["written"] == json.loads(stop["written"])  # the JSON form, as in the spool


def test_nothing_lost_or_duplicated_across_a_restart(
    make: Any, settings: Settings, spool: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("object store unreachable")

    with monkeypatch.context() as patched:
        patched.setattr(audit_table, "write_deltalake", unreachable)
        client = make()
        assert client.put(f"/connectors/{CONNECTOR}/stop", headers=basic("alice")).status_code == 204
        assert client.put(f"/connectors/{CONNECTOR}/resume", headers=basic("bob")).status_code == 403
        assert not Path(str(settings.delta_root / AUDIT.name)).exists()
        served = client.get("/audit", headers=basic("alice")).get_json()  # the spool's unflushed rows
        assert [row["path"].rsplit("/", 1)[1] for row in served["rows"]] == ["stop", "resume"]

    restarted = make()  # a new app instance on the same spool and table: replays what is unflushed
    assert audit_trail(restarted.application).flush() == 2
    assert [row["id"] for row in table_rows(settings)] == spool_ids(spool)

    mark = spool.with_name(spool.name + ".flushed")
    mark.write_text(f"0 {spool.stat().st_ino}")  # a crash after the table's append and before the mark moved
    again = make()
    assert audit_trail(again.application).flush() == 0, "ids already in the table are skipped"
    assert again.put(f"/connectors/{CONNECTOR}/pause", headers=basic("alice")).status_code == 202
    ids = spool_ids(spool)
    assert [row["id"] for row in table_rows(settings)] == ids and len(ids) == 3
    served = again.get("/audit", headers=basic("alice")).get_json()
    assert [row["id"] for row in served["rows"]] == ids and served["total"] == 3  # a GET is not audited
    assert mark.read_text() == f"{spool.stat().st_size} {spool.stat().st_ino}"

    spool.rename(spool.with_name("api.jsonl.1"))  # rotated: a new spool, the old mark no longer applies
    assert again.put(f"/connectors/{CONNECTOR}/resume", headers=basic("alice")).status_code == 202
    assert len(table_rows(settings)) == 4 and mark.read_text() == f"{spool.stat().st_size} {spool.stat().st_ino}"


def test_the_flusher_thread_replays_on_start(make: Any, settings: Settings, spool: Path) -> None:
    spool.parent.mkdir(parents=True)
    yesterday = audit_table.iso_time(datetime.now(UTC) - timedelta(days=1))  # within the retention
    legacy = {"time": yesterday, "principal": "old", "method": "PUT", "path": "/x", "status": 204}
    spool.write_text(json.dumps(legacy) + "\n" + '{"time": "torn')  # a row without id, then a torn line
    client = make(interval_ms="50")
    trail = audit_trail(client.application)
    try:
        assert client.put(f"/connectors/{CONNECTOR}/stop", headers=basic("alice")).status_code == 204
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if len(table_rows(settings)) == 2:
                    break
            except Exception:  # not created yet, or being created
                pass
            time.sleep(0.05)
        rows = table_rows(settings)
        assert [row["principal"] for row in rows] == ["old", "alice"]
        assert len(rows[0]["id"]) == 32, "a line without id gets a stable one"
        assert trail.flush() == 0
    finally:
        trail.stop()


def test_a_table_written_before_the_repeated_column_gains_it(make: Any, settings: Settings, spool: Path) -> None:
    """An audit table an earlier version wrote (without ``repeated``) takes the new rows, summaries included."""
    import pyarrow as pa
    from deltalake import write_deltalake

    old_schema = pa.schema([f for f in AUDIT.schema if f.name != "repeated"])
    old_row = {"id": "old-1", "time": pa.scalar(0, pa.timestamp("us", tz="UTC")).as_py(), "status": 204}
    write_deltalake(str(settings.delta_root / AUDIT.name), pa.Table.from_pylist([old_row], schema=old_schema))
    client = make()
    for _ in range(3):
        assert client.delete(f"/connectors/{CONNECTOR}").status_code == 401
    audit_trail(client.application).stop()  # writes the pending summary, flushes
    rows = table_rows(settings)
    assert [(row["id"] == "old-1", row["status"], row["repeated"]) for row in rows] == [
        (True, 204, None),
        (False, 401, None),
        (False, 401, 2),
    ]
