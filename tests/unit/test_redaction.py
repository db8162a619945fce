"""Secrets by Connect's own notion (issue 33, finding 5): the PASSWORD keys of Kafka's and Debezium's ConfigDefs (the
checked-in connect_state/password_keys.txt), under any prefix, plus patterns, plus credentials inside URIs; and the
quarantined records of ``GET /rejected-records`` redacted for every reader without the role ``admin``."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from connect_state.core.settings import Settings
from connect_state.security.redaction import (
    REDACTED,
    compile_patterns,
    is_secret,
    mask_credentials,
    password_keys,
    redact_config,
    redact_json,
    redact_record_value,
)
from connect_state.tables.schemas import REJECTED_RECORDS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables
from tests.unit.test_auth import basic, fast_hash

ROOT = Path(__file__).resolve().parents[2]
SECRET = "hunter2-very-secret"
DEFAULTS = compile_patterns()


def pinned(name: str) -> str:
    (line,) = [
        line for line in (ROOT / "conf" / "versions.env").read_text().splitlines() if line.startswith(f"{name}=")
    ]
    return line.split("=", 1)[1]


def test_the_checked_in_list_is_connects_password_keys_at_the_pinned_versions() -> None:
    keys = password_keys()
    # Kafka's clients and Connect (SslConfigs, SaslConfigs), Debezium's relational, MongoDB and JDBC connectors
    assert {
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.credentials.client.secret",
        "database.password",
        "database.sslpassword",
        "mongodb.password",
        "connection.password",
    } <= keys
    assert not {"ssl.keystore.location", "sasl.mechanism", "database.user", "topics"} & keys
    header = "".join(line for line in (ROOT / "connect_state" / "password_keys.txt").open() if line.startswith("#"))
    assert f"Apache Kafka {pinned('KAFKA_VERSION')} " in header  # regenerate (scripts/password_keys.py) on a bump
    assert f"Debezium {pinned('DEBEZIUM_VERSION')} " in header


@pytest.mark.parametrize(
    "key",
    [
        # the examples
        "key.converter.basic.auth.user.info",
        "value.converter.basic.auth.user.info",
        "schema.registry.basic.auth.user.info",
        "keyfile",
        "gcs.keyfile",
        "azblob.account.key",
        "hmac.key",
        "encryption.key",
        # Connect's PASSWORD keys, under Connect's and MirrorMaker's prefixes
        "ssl.truststore.certificates",
        "producer.override.ssl.key.password",
        "consumer.override.sasl.jaas.config",
        "admin.override.ssl.keystore.certificate.chain",
        "producer.ssl.truststore.certificates",
        "source.cluster.ssl.keystore.key",
        "target.cluster.sasl.jaas.config",
        "source.admin.ssl.truststore.certificates",
        "schema.history.internal.producer.sasl.jaas.config",
        # today's patterns still
        "aws.secret.access.key",
        "api.token",
        "ssh.passphrase",
        "odbc.pwd",
    ],
)
def test_secret_keys(key: str) -> None:
    assert is_secret(key, DEFAULTS)
    assert redact_config({key: SECRET}) == {key: REDACTED}


@pytest.mark.parametrize(
    "key",
    ["key.converter", "topic", "tasks.max", "ssl.keystore.location", "connection.url", "keystore.type", "key.ignore"],
)
def test_other_keys_are_shown(key: str) -> None:
    assert not is_secret(key, DEFAULTS)


def test_password_keys_apply_whatever_the_patterns() -> None:
    only_topic = compile_patterns("^topic$")
    config = {
        "topic": "t",
        "ssl.truststore.certificates": "pem",
        "producer.override.ssl.key.password": "k",
        "a.token": "x",
    }
    assert redact_config(config, only_topic) == {
        "topic": REDACTED,
        "ssl.truststore.certificates": REDACTED,
        "producer.override.ssl.key.password": REDACTED,
        "a.token": "x",  # a default pattern, replaced
    }


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "mongodb://user:pw@db1:27017,db2:27017/?replicaSet=rs0",
            f"mongodb://user:{REDACTED}@db1:27017,db2:27017/?replicaSet=rs0",
        ),
        (
            "mongodb+srv://app:p@ss:w@rd@cluster0.example.net/db",
            f"mongodb+srv://app:{REDACTED}@cluster0.example.net/db",
        ),
        ("redis://:pw@cache:6379/0", f"redis://:{REDACTED}@cache:6379/0"),
        ("jdbc:postgresql://u:pw@db/x", f"jdbc:postgresql://u:{REDACTED}@db/x"),
        (
            "jdbc:mysql://db:3306/x?user=u&password=pw&ssl=true",
            f"jdbc:mysql://db:3306/x?user=u&password={REDACTED}&ssl=true",
        ),
        (
            "jdbc:sqlserver://db:1433;user=sa;password=pw;encrypt=true",
            f"jdbc:sqlserver://db:1433;user=sa;password={REDACTED};encrypt=true",
        ),
        ("Driver={ODBC};Server=db;Uid=sa;Pwd=pw;", f"Driver={{ODBC}};Server=db;Uid=sa;Pwd={REDACTED};"),
        ("http://a:pw1@h1/x,http://b:pw2@h2/y", f"http://a:{REDACTED}@h1/x,http://b:{REDACTED}@h2/y"),
        # nothing to hide
        ("https://user@host/path", "https://user@host/path"),
        ("http://host:8080/path?a=b", "http://host:8080/path?a=b"),
        ("jdbc:postgresql://db:5432/x?user=u", "jdbc:postgresql://db:5432/x?user=u"),
        ("a plain value", "a plain value"),
        # ConfigProvider references hold no secret
        ("jdbc:mysql://db/x?password=${file:/s.properties:pw}", "jdbc:mysql://db/x?password=${file:/s.properties:pw}"),
        ("mongodb://u:${env:PW}@db/x", "mongodb://u:${env:PW}@db/x"),
    ],
)
def test_credentials_inside_uris(text: str, shown: str) -> None:
    assert mask_credentials(text) == shown
    assert redact_config({"connection.url": text}) == {"connection.url": shown}


def test_redact_json_masks_uris_at_any_depth() -> None:
    value = {"list": [{"mongodb.connection.string": "mongodb://u:pw@h/db"}], "s": "x"}
    assert redact_json(value) == {"list": [{"mongodb.connection.string": f"mongodb://u:{REDACTED}@h/db"}], "s": "x"}


def test_redact_record_value() -> None:
    config = b'{"properties":{"name":"c","database.password":"pw","hmac.key":"k","topic":"t"}}'
    value, changed = redact_record_value(config, DEFAULTS)
    assert changed and value is not None
    assert json.loads(value) == {
        "properties": {"name": "c", "database.password": REDACTED, "hmac.key": REDACTED, "topic": "t"}
    }
    plain = b'{"properties": {"name": "c"}}'
    assert redact_record_value(plain, DEFAULTS) == (plain, False)  # the bytes as quarantined
    assert redact_record_value(b'{"properties":{"database.password":"pw"', DEFAULTS) == (None, True)
    assert redact_record_value(b"\xff\xfe", DEFAULTS, withhold_unparsed=False) == (b"\xff\xfe", False)
    assert redact_record_value(None, DEFAULTS) == (None, False)
    session = b'{"key":"c2VjcmV0","algorithm":"HmacSHA256","creation-timestamp":1}'
    value, changed = redact_record_value(session, DEFAULTS, secret_fields=("key",))
    assert changed and value is not None and json.loads(value)["key"] == REDACTED


# --- GET /rejected-records -------------------------------------------------------------------------------------------

CONNECTOR_CONFIG = {
    "properties": {
        "name": "orders",
        "connector.class": "io.debezium.connector.mongodb.MongoDbConnector",
        "mongodb.connection.string": f"mongodb://app:{SECRET}@db1:27017/?replicaSet=rs0",
        "value.converter.basic.auth.user.info": f"sr-user:{SECRET}",
        "producer.override.ssl.key.password": SECRET,
    }
}


def rejected(topic: str, offset: int, key: bytes | None, value: bytes | None) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": 0,
        "offset": offset,
        "key": key,
        "value": value,
        "reason": "r",
        "seen_at": None,
    }


@pytest.fixture
def rejected_client(make_client: MakeClient, settings: Settings, tmp_path: Path) -> MakeClient:
    users = tmp_path / "users"
    users.write_text("".join(f"{user}:{fast_hash(user)}\n" for user in ("reader", "operator", "boss", "billing-boss")))
    roles = tmp_path / "roles"
    roles.write_text(
        "reader: read\noperator: read operate offsets delete\nboss: admin\nbilling-boss: billing/admin read\n"
    )
    configs, status = settings.config_storage_topic, settings.status_storage_topic
    rows = [
        rejected(configs, 1, b"connector-orders", json.dumps(CONNECTOR_CONFIG).encode()),
        rejected(configs, 2, b"connector-orders", f'{{"properties":{{"database.password":"{SECRET}"'.encode()),
        rejected(configs, 3, b"session-key", f'{{"key":"{SECRET}","algorithm":"HmacSHA256"}}'.encode()),
        rejected(status, 4, b"status-connector-orders", b"not json"),
    ]
    overrides = {
        "api.auth.basic.file": str(users),
        "api.auth.roles.file": str(roles),
        "clusters": "billing",  # a further cluster (issue 37), for a grant of admin there only
        "clusters.billing.connect.group.id": "connect-billing",
    }
    return make_client(tables=InMemoryTables({REJECTED_RECORDS.name: rows}), overrides=overrides)


def records(client: FlaskClient, user: str) -> list[dict[str, Any]]:
    response = client.get("/rejected-records", headers=basic(user))
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["records"]


def value_of(record: dict[str, Any]) -> Any:
    return json.loads(base64.b64decode(record["value"])) if record["value"] is not None else None


@pytest.mark.parametrize("user", ["reader", "operator", "billing-boss"])  # billing-boss: admin in another cluster
def test_rejected_records_are_redacted_without_admin(rejected_client: FlaskClient, user: str) -> None:
    answer = records(rejected_client, user)
    assert SECRET not in json.dumps([value_of(r) if r["offset"] != 4 else None for r in answer])
    config, truncated, session, status = answer
    assert value_of(config) == {
        "properties": {
            **CONNECTOR_CONFIG["properties"],
            "mongodb.connection.string": f"mongodb://app:{REDACTED}@db1:27017/?replicaSet=rs0",
            "value.converter.basic.auth.user.info": REDACTED,
            "producer.override.ssl.key.password": REDACTED,
        }
    }
    assert (truncated["value"], truncated["redacted"]) == (None, True)  # not JSON: withheld
    assert value_of(session) == {"key": REDACTED, "algorithm": "HmacSHA256"}
    assert (status["value"], status["redacted"]) == (base64.b64encode(b"not json").decode(), False)
    assert [r["redacted"] for r in answer] == [True, True, True, False]
    assert config["key"] == base64.b64encode(b"connector-orders").decode()


def test_rejected_records_are_whole_for_admin(rejected_client: FlaskClient) -> None:
    answer = records(rejected_client, "boss")
    assert value_of(answer[0]) == CONNECTOR_CONFIG
    assert SECRET in base64.b64decode(answer[1]["value"]).decode()
    assert SECRET in base64.b64decode(answer[2]["value"]).decode()
    assert not any(r["redacted"] for r in answer)
