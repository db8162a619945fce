"""Roles against the real broker and Connect worker (issue 13): every write endpoint refused for every principal whose
roles do not allow it leaves the real topics as they were (end offsets of the config, offsets and status topics);
the principal with the role writes, and Connect honours it. Every refusal and write is in the audit file."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from deltalake import DeltaTable
from flask import Flask
from flask.testing import FlaskClient

from connect_state.api import close_app, create_app
from connect_state.api.audit import audit_trail
from connect_state.api.passwords import HashScheme, hash_password
from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.kafka.log import TopicLogReader
from connect_state.tables.schemas import AUDIT
from tests.integration.helpers import job_settings, source_position, unique, wait_state

pytestmark = [pytest.mark.integration]
WAIT_S = 90.0
USERS = {"reader": "read", "operator": "operate", "offsetter": "offsets", "deleter": "delete", "admin": "admin"}


@pytest.fixture
def settings(stack_settings: Settings, tmp_path: Path) -> Settings:
    users = tmp_path / "users"
    users.write_text("".join(f"{u}:{hash_password(u, HashScheme.PBKDF2_SHA256)}\n" for u in USERS))
    roles = tmp_path / "roles"
    roles.write_text("".join(f"{u}: {r}\n" for u, r in USERS.items()))
    return job_settings(
        stack_settings,
        tmp_path,
        **{
            "api.auth.basic.file": str(users),
            "api.auth.roles.file": str(roles),
            "api.audit.file": str(tmp_path / "audit.jsonl"),
        },
    )


def basic(user: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{user}".encode()).decode()}


def ends(settings: Settings) -> dict[tuple[str, int], int]:
    topics = [settings.config_storage_topic, settings.offset_storage_topic, settings.status_storage_topic]
    reader = TopicLogReader(settings, client_id="test-auth-ends")
    try:
        return dict(reader.offsets(topics, 10_000).ends)
    finally:
        reader.close()


WRITES = [
    ("PUT", "stop", "operate"),
    ("PUT", "pause", "operate"),
    ("PUT", "resume", "operate"),
    ("POST", "restart", "operate"),
    ("PUT", "topics/reset", "operate"),
    ("PATCH", "offsets", "offsets"),
    ("DELETE", "offsets", "offsets"),
    ("DELETE", "", "delete"),
]


def test_refusals_write_nothing_and_roles_write(
    connect: ConnectRestClient, settings: Settings, app: Flask, api: FlaskClient, tmp_path: Path
) -> None:
    name = unique("auth-src")
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["a", "b"])
    connect.create_connector(name, file_source_config(name, source_file, unique("auth-topic")))
    wait_state(connect, name, "RUNNING", 1, WAIT_S)
    # Connect's own writes first (the task's offsets, its topic's status): then the topics stay quiet.
    size = source_file.stat().st_size
    connect.wait_for(lambda: source_position(connect, name) == size, WAIT_S, description=f"{name} committed")
    body = json.dumps({"offsets": [{"partition": {"filename": str(source_file)}, "offset": {"position": 0}}]})

    before = ends(settings)
    refusals = 0
    for method, action, role in WRITES:
        path = f"/connectors/{name}" + (f"/{action}" if action else "")
        for user, granted in USERS.items():
            if granted in (role, "admin"):
                continue
            response = api.open(path, method=method, headers=basic(user), data=body if method == "PATCH" else None)
            assert response.status_code == 403, (user, method, path, response.get_json())
            refusals += 1
        response = api.open(path, method=method, data=body if method == "PATCH" else None)
        assert response.status_code == 401
        refusals += 1
    assert ends(settings) == before, "no record reached Kafka on a refusal"
    assert connect.connector_status(name)["connector"]["state"] == "RUNNING"  # type: ignore[index]

    # With the role: stop, then offsets (a stopped connector), then delete; Connect honours each.
    assert api.put(f"/connectors/{name}/stop", headers=basic("operator")).status_code == 204
    wait_state(connect, name, "STOPPED", 0, WAIT_S)
    patched = api.patch(f"/connectors/{name}/offsets", headers=basic("offsetter"), data=body)
    assert patched.status_code == 200, patched.get_json()
    assert api.delete(f"/connectors/{name}", headers=basic("deleter")).status_code == 204
    connect.wait_for(lambda: name not in connect.list_connectors(), WAIT_S, description=f"{name} deleted")

    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert sum(row["outcome"] == "refused" for row in audit) == refusals
    stop = next(row for row in audit if row["status"] == 204 and row["path"].endswith("/stop"))
    assert stop["principal"] == "operator"
    assert [w["key"] for w in stop["written"]] == [f"commit-{name}", f"target-state-{name}"]
    assert all(w["offset"] >= before.get((w["topic"], w["partition"]), 0) for w in stop["written"])

    # The audit table (the file is its spool): every row once, also after a restart of the API on the same spool.
    audit_trail(app).stop()  # the flusher's last flush
    restarted = create_app(settings)
    try:
        assert audit_trail(restarted).flush() == 0, "a restart replays nothing that is already in the table"
    finally:
        close_app(restarted)
    table = DeltaTable(str(settings.delta_root / AUDIT.name)).to_pyarrow_table(columns=["id", "outcome"])
    assert sorted(table.column("id").to_pylist()) == sorted(row["id"] for row in audit)
    assert table.column("outcome").to_pylist().count("refused") == refusals
