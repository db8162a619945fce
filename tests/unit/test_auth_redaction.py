"""Secrets redacted at the API's edge (connect_state/security/redaction.py, issue 13): every GET route is called with
tables whose configs hold a secret, and no answer may contain it; ConfigProvider references are shown as they are; a
config without secrets is answered as Connect answers it."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.security.redaction import REDACTED, is_provider_reference, redact_config, redact_json
from connect_state.tables.schemas import CONNECTOR_DELETIONS, CONNECTOR_EVENTS, CONNECTORS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables
from tests.unit.test_auth import ROUTES

SECRET = "hunter2-very-secret"
REFERENCE = "${file:/etc/connect/secrets.properties:db.password}"
NAME = "orders-src"


def config(**extra: str) -> dict[str, str]:
    return {
        "connector.class": "FileStreamSource",
        "name": NAME,
        "topic": "t",
        "database.password": SECRET,
        "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{SECRET}";',
        "aws.secret.access.key": SECRET,
        "api.token": SECRET,
        "ssl.keystore.key": SECRET,
        "vault.password": REFERENCE,
        **extra,
    }


NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TABLES: dict[str, list[dict[str, Any]]] = {
    CONNECTORS.name: [
        {
            "name": NAME,
            "type": "source",
            "connector_class": "FileStreamSource",
            "config": json.dumps(config()),
            "target_state": "STARTED",
            "task_count": 1,
            "task_configs": json.dumps({"0": config(**{"task.class": "X"})}),
            "connector_state": "RUNNING",
            "connector_worker_id": "w:8083",
            "tasks": [],
            "deleted": False,
        }
    ],
    CONNECTOR_EVENTS.name: [
        {
            "connector": NAME,
            "event": event,
            "details": json.dumps({"config": config(), "connector_class": "FileStreamSource"}),
            "source": "config",
            "kafka_partition": 0,
            "kafka_offset": offset,
            "kafka_timestamp": NOW,
        }
        for offset, event in enumerate(["created", "reconfigured", "deleted"])
    ],
    CONNECTOR_DELETIONS.name: [
        {
            "connector": NAME,
            "deletion_offset": 9,
            "deleted_at": NOW,
            "connector_type": "source",
            "config": json.dumps(config()),
            "step": "offsets",
            "status": "succeeded",
            "attempts": 1,
            "updated_at": NOW,
        }
    ],
}


@pytest.fixture
def secret_client(make_client: MakeClient) -> FlaskClient:
    return make_client(tables=InMemoryTables(TABLES), overrides={"api.kafka.cluster.id": "c"})


GETS = sorted(endpoint for endpoint, (method, _, _) in ROUTES.items() if method == "GET")


@pytest.mark.parametrize("endpoint", GETS)
def test_no_answer_shows_a_secret(secret_client: FlaskClient, endpoint: str) -> None:
    _, path, _ = ROUTES[endpoint]
    for query in ({}, {"expand": ["info", "status"]}):
        text = secret_client.get(path, query_string=query).get_data(as_text=True)
        assert SECRET not in text, f"{path} shows a secret"


@pytest.mark.parametrize(
    "path",
    [
        f"/connectors/{NAME}",
        f"/connectors/{NAME}/config",
        f"/connectors/{NAME}/tasks",
        "/connectors?expand=info",
        f"/connectors/{NAME}/deletions",
        f"/connectors/{NAME}/events",
        f"/connectors/{NAME}/history/configs",
    ],
)
def test_configs_are_shown_redacted(secret_client: FlaskClient, path: str) -> None:
    """Each of these shows the config (so the test above is not vacuous): the secrets redacted, the rest as is."""
    response = secret_client.get(path)
    assert response.status_code == 200, response.get_data(as_text=True)
    text = response.get_data(as_text=True)
    assert f'"database.password":"{REDACTED}"' in text.replace(" ", "")
    assert REFERENCE in text and '"topic":"t"' in text.replace(" ", "")


def test_a_config_without_secrets_is_answered_as_connect_does(make_client: MakeClient) -> None:
    plain = {"connector.class": "FileStreamSource", "name": NAME, "topic": "t", "file": "/in"}
    tables = {CONNECTORS.name: [{**TABLES[CONNECTORS.name][0], "config": json.dumps(plain), "task_configs": None}]}
    client = make_client(tables=InMemoryTables(tables))
    assert (
        client.get(f"/connectors/{NAME}/config").get_data() == json.dumps(plain, separators=(",", ":")).encode() + b"\n"
    )


def test_redaction_functions() -> None:
    assert is_provider_reference(REFERENCE)
    assert is_provider_reference("${vault:path:key}${env:X}")
    assert not is_provider_reference(f"{REFERENCE}-plus-literal")
    assert not is_provider_reference("plain") and not is_provider_reference(None)
    assert redact_config({"a.password": REFERENCE, "b.password": "x", "c.password": None, "d": "x"}) == {
        "a.password": REFERENCE,
        "b.password": REDACTED,
        "c.password": None,
        "d": "x",
    }
    nested = {"list": [{"token": "x", "deep": {"sasl.jaas.config": "y", "ok": 1}}], "password": {"k": "v"}}
    assert redact_json(nested) == {
        "list": [{"token": REDACTED, "deep": {"sasl.jaas.config": REDACTED, "ok": 1}}],
        "password": REDACTED,
    }
    assert redact_config({"ssl.keystore.location": "/k", "ssl.keystore.key": "pem"}) == {
        "ssl.keystore.location": "/k",
        "ssl.keystore.key": REDACTED,
    }
