"""Authentication and roles (api/auth.py, issue 13): every route x every role, every kind of credential, 401 and 403 in
Connect's error JSON with nothing written on a refusal, the route table's completeness, the exposure check."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.security import generate_password_hash

import connect_state.api.resources as api_resources
from connect_state.api import create_app
from connect_state.api.auth import (
    ANONYMOUS,
    PUBLIC_ENDPOINTS,
    ROUTE_ROLES,
    AuthMethod,
    Grant,
    Role,
    UnguardedRouteError,
    check_routes,
    load_auth_config,
    parse_grants,
)
from connect_state.api.network import UnprotectedApiError, is_loopback
from connect_state.api.passwords import METHODS, HashScheme, hash_password, hash_token, main, verify_password
from connect_state.api.server import main as server_main
from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings, load_settings
from connect_state.tables.schemas import CONNECTORS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables, InMemoryTopics, RecordingWriter
from tests.unit.helpers import assert_connect_error, mirror_connectors

CONNECTOR = "orders-src"
OTHER = "billing-src"

#: One request per route, and the role it needs, written out here (not taken from ROUTE_ROLES, which it checks).
ROUTES: dict[str, tuple[str, str, Role | None]] = {
    "connect_read.server_info": ("GET", "/", Role.READ),
    "connectors.list_connectors": ("GET", "/connectors", Role.READ),
    "connect_read.get_connector": ("GET", f"/connectors/{CONNECTOR}", Role.READ),
    "connect_read.get_connector_config": ("GET", f"/connectors/{CONNECTOR}/config", Role.READ),
    "connect_read.get_task_configs": ("GET", f"/connectors/{CONNECTOR}/tasks", Role.READ),
    "connect_read.get_task_status": ("GET", f"/connectors/{CONNECTOR}/tasks/0/status", Role.READ),
    "connectors.get_connector_status": ("GET", f"/connectors/{CONNECTOR}/status", Role.READ),
    "topics.get_active_topics": ("GET", f"/connectors/{CONNECTOR}/topics", Role.READ),
    "offsets.get_connector_offsets": ("GET", f"/connectors/{CONNECTOR}/offsets", Role.READ),
    "connectors.stop_connector": ("PUT", f"/connectors/{CONNECTOR}/stop", Role.OPERATE),
    "connectors.pause_connector": ("PUT", f"/connectors/{CONNECTOR}/pause", Role.OPERATE),
    "connectors.resume_connector": ("PUT", f"/connectors/{CONNECTOR}/resume", Role.OPERATE),
    "restart.restart_connector": ("POST", f"/connectors/{CONNECTOR}/restart", Role.OPERATE),
    "restart.restart_task": ("POST", f"/connectors/{CONNECTOR}/tasks/0/restart", Role.OPERATE),
    "topics.reset_active_topics": ("PUT", f"/connectors/{CONNECTOR}/topics/reset", Role.OPERATE),
    "offsets.alter_connector_offsets": ("PATCH", f"/connectors/{CONNECTOR}/offsets", Role.OFFSETS),
    "offsets.reset_connector_offsets": ("DELETE", f"/connectors/{CONNECTOR}/offsets", Role.OFFSETS),
    "offsets.restore_connector_offsets": ("POST", f"/connectors/{CONNECTOR}/offsets/restore", Role.OFFSETS),
    "connectors.delete_connector": ("DELETE", f"/connectors/{CONNECTOR}", Role.DELETE),
    "revive.restore_connector": ("POST", f"/connectors/{CONNECTOR}/restore", Role.ADMIN),
    "moves.move_connector": ("POST", f"/connectors/{CONNECTOR}/move", Role.ADMIN),
    "fleet.fleet_connectors": ("GET", "/fleet/connectors", Role.READ),
    "deletions.get_deletions": ("GET", f"/connectors/{CONNECTOR}/deletions", Role.READ),
    "restarts.get_connector_restarts": ("GET", f"/connectors/{CONNECTOR}/restarts", Role.READ),
    "restarts.get_restarts": ("GET", "/restarts", Role.READ),
    "heartbeats.get_heartbeats": ("GET", f"/connectors/{CONNECTOR}/heartbeats", Role.READ),
    "verdicts.get_verdict": ("GET", f"/connectors/{CONNECTOR}/verdict", Role.READ),
    "verdicts.list_verdicts": ("GET", "/verdicts", Role.READ),
    "availability.get_connector_availability": ("GET", f"/connectors/{CONNECTOR}/availability", Role.READ),
    "availability.get_availability": ("GET", "/availability", Role.READ),
    "history.get_events": ("GET", f"/connectors/{CONNECTOR}/events", Role.READ),
    "history.get_config_versions": ("GET", f"/connectors/{CONNECTOR}/history/configs", Role.READ),
    "history.get_offsets_as_of": ("GET", f"/connectors/{CONNECTOR}/history/offsets", Role.READ),
    "history.get_partition_history": ("GET", f"/connectors/{CONNECTOR}/history/offsets/partition", Role.READ),
    "history.get_topics_as_of": ("GET", f"/connectors/{CONNECTOR}/history/topics", Role.READ),
    "history.get_rejected_records": ("GET", "/rejected-records", Role.READ),
    "history.get_topic_connectors": ("GET", "/topics/t/connectors", Role.READ),
    "data_loss.get_data_loss": ("GET", "/data-loss", Role.READ),
    "leases.get_leases": ("GET", "/leases", Role.READ),
    "leases.get_lease": ("GET", "/leases/cleanup", Role.READ),
    "metrics.metrics": ("GET", "/metrics", Role.READ),
    "clusters.list_clusters": ("GET", "/clusters", Role.READ),
    "openapi.openapi_json": ("GET", "/openapi.json", Role.READ),
    "dashboard.page": ("GET", "/ui", Role.READ),
    "dashboard.timeline": ("GET", f"/ui/timeline/{CONNECTOR}", Role.READ),
    "static": ("GET", "/static/dashboard.js", Role.READ),
    "audit.get_audit": ("GET", "/audit", Role.ADMIN),
    "alerts.get_alerts": ("GET", "/alerts", Role.READ),
    "alerts.get_deliveries": ("GET", "/alerts/deliveries", Role.READ),
    "alerts.get_silences": ("GET", "/silences", Role.READ),
    "alerts.get_connector_silences": ("GET", f"/connectors/{CONNECTOR}/silences", Role.READ),
    "alerts.silence_connector": ("POST", f"/connectors/{CONNECTOR}/silence", Role.OPERATE),
    "alerts.lift_silence": ("DELETE", f"/connectors/{CONNECTOR}/silence", Role.OPERATE),
    "health.health": ("GET", "/health", None),  # public
}

#: A user per role (password = name), one with a connector-limited grant, one without any grant.
USERS: dict[str, str] = {
    "reader": "read",
    "operator": "operate",
    "offsetter": "offsets",
    "deleter": "delete",
    "admin": "admin",
    "orders-operator": "operate@orders-* read@orders-*",
    "nobody": "",
}
TOKEN = "t0ken-for-the-bot"
CERT_USER = "cert-operator"


def connector_row(name: str) -> dict[str, Any]:
    config = {"connector.class": "FileStreamSource", "file": "/tmp/in", "topic": "t", "name": name}
    return {
        "name": name,
        "type": "source",
        "connector_class": "FileStreamSource",
        "config": json.dumps(config),
        "target_state": "STARTED",
        "task_count": 0,
        "connector_state": "RUNNING",
        "connector_worker_id": "w1:8083",
        "tasks": [],
        "deleted": False,
    }


ROWS = [connector_row(CONNECTOR), connector_row(OTHER)]


def fast_hash(password: str) -> str:
    """A PBKDF2 hash with few iterations (the verification is the real one; only the cost is lowered)."""
    return generate_password_hash(password, "pbkdf2:sha256:1000")


#: Lines of the password "old-secret" as api/passwords.py wrote them before it used Werkzeug (made by that code).
LEGACY_HASHES = {
    "scrypt": "scrypt$16384$8$1$WUIHIVEjyqVRvILuai5Pjw==$i48xQGmpuK/Lnm7yxP0+/B5jLMLbeFkJATN1JAlx9Ic=",
    "pbkdf2": "pbkdf2_sha256$600000$MSTvw3cKPkeP8KJ8jAKFyA==$lg3q2obq86+AKHYrkWjBkFb3XfmQYVsvTZ8WLA78fZc=",
}


@pytest.fixture
def auth_files(tmp_path: Path) -> dict[str, str]:
    basic = tmp_path / "users"
    basic.write_text("# users\n" + "".join(f"{user}:{fast_hash(user)}\n" for user in USERS))
    tokens = tmp_path / "tokens"
    tokens.write_text(f"bot:{hash_token(TOKEN)}\n")
    roles = tmp_path / "roles"
    roles.write_text(
        "".join(f"{user}: {grants}\n" for user, grants in USERS.items() if grants)
        + "bot: operate\n"
        + f"cert:{CERT_USER}: operate read\n"
        + "anonymous: read\n"
    )
    return {
        "api.auth.basic.file": str(basic),
        "api.auth.token.file": str(tokens),
        "api.auth.roles.file": str(roles),
        "api.kafka.cluster.id": "test-cluster",  # GET / does not ask the (absent) cluster
    }


@pytest.fixture
def auth_client(make_client: MakeClient, auth_files: dict[str, str], kafka_log: InMemoryTopics) -> FlaskClient:
    mirror_connectors(kafka_log, ROWS)
    return make_client(tables=InMemoryTables({CONNECTORS.name: ROWS}), overrides=auth_files)


@pytest.fixture(autouse=True)
def admin(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A consumer-group admin that records its calls (a sink's offsets are written through it)."""
    calls: list[str] = []

    class Admin:
        def __getattr__(self, name: str) -> Any:
            def call(*args: Any) -> Any:
                if name != "close":
                    calls.append(name)
                return {} if name == "list_group_offsets" else True

            return call

    monkeypatch.setattr(api_resources, "create_admin", lambda _settings: Admin())
    yield calls


def basic(user: str, password: str | None = None) -> dict[str, str]:
    raw = f"{user}:{password if password is not None else user}".encode()
    return {"Authorization": "Basic " + base64.b64encode(raw).decode()}


def call(client: FlaskClient, endpoint: str, headers: dict[str, str] | None = None, **kwargs: Any) -> Any:
    method, path, _ = ROUTES[endpoint]
    body = None
    if method == "PATCH":
        offset = {"partition": {"filename": "/tmp/in"}, "offset": {"position": 1}}
        body = json.dumps({"offsets": [offset]})
    return client.open(path, method=method, headers=headers or {}, data=body, content_type="application/json", **kwargs)


#: What each user of USERS may do, written out (not derived with the grants parser under test): its roles (admin: all)
#: and whether they are limited to connectors matching ``orders-*``.
ALLOWED: dict[str, tuple[frozenset[Role], bool]] = {
    "reader": (frozenset({Role.READ}), False),
    "operator": (frozenset({Role.OPERATE}), False),
    "offsetter": (frozenset({Role.OFFSETS}), False),
    "deleter": (frozenset({Role.DELETE}), False),
    "admin": (frozenset(Role), False),
    "orders-operator": (frozenset({Role.OPERATE, Role.READ}), True),
    "nobody": (frozenset(), False),
}


def expected_allowed(user: str, role: Role | None, connector: str | None) -> bool:
    if role is None:  # a public route
        return True
    roles, orders_only = ALLOWED[user]
    return role in roles and (not orders_only or (connector is not None and connector.startswith("orders-")))


# --- the table of routes --------------------------------------------------------------------------------------------


def app_endpoints(app: Flask) -> set[str]:
    return {rule.endpoint for rule in app.url_map.iter_rules()}


def test_every_route_has_a_role_and_a_case_here(client: FlaskClient) -> None:
    endpoints = app_endpoints(client.application)
    assert endpoints == set(ROUTE_ROLES) | PUBLIC_ENDPOINTS, "ROUTE_ROLES must name exactly the app's routes"
    assert endpoints == set(ROUTES), "every route needs a case in this module's ROUTES"
    for endpoint, (_, _, role) in ROUTES.items():
        assert ROUTE_ROLES.get(endpoint) == role, endpoint


def test_an_unguarded_route_is_refused_at_creation(settings: Settings) -> None:
    app = create_app(settings, writer=RecordingWriter())
    app.add_url_rule("/new", "new_route", lambda: "x")
    with pytest.raises(UnguardedRouteError, match="new_route"):
        check_routes(app)


# --- every route x every role ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", sorted(ROUTES))
@pytest.mark.parametrize("user", sorted(USERS))
def test_route_by_role(
    auth_client: FlaskClient, writer: RecordingWriter, admin: list[str], endpoint: str, user: str
) -> None:
    _, path, role = ROUTES[endpoint]
    connector = CONNECTOR if f"/{CONNECTOR}" in path else None
    response = call(auth_client, endpoint, basic(user))
    if expected_allowed(user, role, connector):
        assert response.status_code not in (401, 403), response.get_data(as_text=True)
    else:
        assert_connect_error(
            response,
            403,
            f"{user} may not {ROUTES[endpoint][0]} {path}: it needs the role {role}"
            + (f" on connector {connector}" if connector else ""),
        )
        assert writer.sends == [] and admin == [], "nothing is written on a refusal"


@pytest.mark.parametrize("endpoint", sorted(e for e, (m, _, _) in ROUTES.items() if m != "GET"))
def test_writes_allowed_by_role_do_write(auth_client: FlaskClient, writer: RecordingWriter, endpoint: str) -> None:
    """The other side of "nothing written on a refusal": with the role, the write reaches Kafka (or answers as Connect
    would for the connector's state), so the refusals above are not vacuous."""
    response = call(auth_client, endpoint, basic("admin"))
    assert response.status_code not in (401, 403)
    if endpoint in ("connectors.stop_connector", "connectors.pause_connector", "connectors.delete_connector"):
        assert writer.sends, "the write was sent"


def test_connector_pattern_limits_a_grant(auth_client: FlaskClient, writer: RecordingWriter) -> None:
    assert auth_client.put(f"/connectors/{CONNECTOR}/stop", headers=basic("orders-operator")).status_code == 204
    refused = auth_client.put(f"/connectors/{OTHER}/stop", headers=basic("orders-operator"))
    assert_connect_error(
        refused,
        403,
        f"orders-operator may not PUT /connectors/{OTHER}/stop: it needs the role operate on connector {OTHER}",
    )
    assert len(writer.sends) == 1
    assert auth_client.get("/connectors", headers=basic("orders-operator")).status_code == 403  # no connector: no grant


# --- kinds of credential --------------------------------------------------------------------------------------------


class FakeTlsSocket:
    def __init__(self, cert: dict[str, Any] | None) -> None:
        self.cert = cert

    def getpeercert(self) -> dict[str, Any] | None:
        return self.cert


def cert_of(name: str) -> dict[str, Any]:
    return {"subject": ((("organizationName", "Acme"),), (("commonName", name),))}


@pytest.fixture
def tls_client(make_client: MakeClient, auth_files: dict[str, str], kafka_log: InMemoryTopics) -> FlaskClient:
    mirror_connectors(kafka_log, ROWS)
    overrides = {
        **auth_files,
        "api.tls.cert.file": "server.pem",
        "api.tls.key.file": "server.key",
        "api.tls.ca.file": "ca.pem",
        "api.tls.client.auth": "requested",
    }
    return make_client(tables=InMemoryTables({CONNECTORS.name: ROWS}), overrides=overrides)


STOP = f"/connectors/{CONNECTOR}/stop"


@pytest.mark.parametrize(
    ("headers", "cert", "status", "message"),
    [
        ({}, None, 401, "Authentication required"),
        (basic("operator", "wrong"), None, 401, "Invalid user name or password"),
        (basic("stranger"), None, 401, "Invalid user name or password"),
        ({"Authorization": "Basic !!notbase64"}, None, 401, "Malformed basic credentials"),
        ({"Authorization": "Bearer wrong-token"}, None, 401, "Invalid bearer token"),
        ({"Authorization": "Digest x"}, None, 401, "Unsupported authorization scheme 'Digest'"),
        (basic("reader"), None, 403, f"reader may not PUT {STOP}: it needs the role operate on connector {CONNECTOR}"),
        ({}, cert_of("cert-reader-unknown"), 403, None),  # a valid certificate, no grant
        (basic("operator"), None, 204, None),
        ({"Authorization": f"Bearer {TOKEN}"}, None, 204, None),
        ({}, cert_of(CERT_USER), 204, None),
        (basic("reader"), cert_of(CERT_USER), 403, None),  # credentials in the header win over the certificate
    ],
    ids=[
        "none",
        "wrong-password",
        "unknown-user",
        "malformed",
        "wrong-token",
        "unsupported",
        "basic-no-role",
        "cert-no-role",
        "basic",
        "token",
        "certificate",
        "header-wins",
    ],
)
def test_credentials(
    tls_client: FlaskClient,
    writer: RecordingWriter,
    headers: dict[str, str],
    cert: dict[str, Any] | None,
    status: int,
    message: str | None,
) -> None:
    environ = {"gunicorn.socket": FakeTlsSocket(cert)} if cert else {}
    response = tls_client.put(STOP, headers=headers, environ_overrides=environ)
    assert response.status_code == status
    if status >= 400:
        assert list(response.get_json()) == ["error_code", "message"]
        assert response.get_json()["error_code"] == status
        if message is not None:
            assert response.get_json()["message"] == message
        assert writer.sends == []
    else:
        assert writer.sends
    if status == 401:
        challenge = response.headers["WWW-Authenticate"]
        assert 'Basic realm="connect-state"' in challenge and 'Bearer realm="connect-state"' in challenge


def test_health_is_public_and_unknown_routes_404(auth_client: FlaskClient) -> None:
    assert auth_client.get("/health").status_code not in (401, 403)
    assert_connect_error(auth_client.get("/nope"), 404, "HTTP 404 Not Found")


def test_anonymous_with_authentication_on(make_client: MakeClient, auth_files: dict[str, str]) -> None:
    client = make_client(overrides={**auth_files, "api.auth.anonymous": "true"})
    assert client.get("/connectors/x/topics").status_code not in (401, 403)  # roles file: anonymous: read
    assert client.put("/connectors/x/stop").status_code == 403


def test_open_api_on_loopback_is_unchanged(client: FlaskClient) -> None:
    """No authentication configured, loopback: as before, every request may do everything."""
    assert client.put("/connectors/x/stop").status_code == 404  # the view ran: Connect's 404
    assert client.get("/connectors", headers=basic("whoever")).status_code not in (401, 403)


def test_without_roles_file_every_authenticated_principal_is_admin(
    make_client: MakeClient, auth_files: dict[str, str]
) -> None:
    client = make_client(overrides={**auth_files, "api.auth.roles.file": ""})
    assert client.delete("/connectors/x", headers=basic("nobody")).status_code == 404  # the view ran
    assert client.delete("/connectors/x").status_code == 401


def test_password_verification_is_cached_per_app(auth_client: FlaskClient, monkeypatch: pytest.MonkeyPatch) -> None:
    import connect_state.api.auth as auth

    calls: list[str] = []
    real = auth.verify_password
    monkeypatch.setattr(auth, "verify_password", lambda p, s: calls.append(p) or real(p, s))
    for _ in range(3):
        auth_client.get("/connectors", headers=basic("reader"))
    auth_client.get("/connectors", headers=basic("reader", "wrong"))
    assert calls == ["reader", "wrong"]


# --- exposure -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("api.example.com", False)],
)  # fmt: skip
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_refuses_to_serve_beyond_loopback_without_authentication(
    settings: Settings, auth_files: dict[str, str]
) -> None:
    exposed = settings.with_overrides(**{"api.host": "0.0.0.0"})
    with pytest.raises(UnprotectedApiError, match=r"api.host=0.0.0.0 .* api.auth.anonymous=true"):
        create_app(exposed, writer=RecordingWriter())
    create_app(exposed.with_overrides(**{"api.auth.anonymous": "true"}), writer=RecordingWriter())
    create_app(exposed.with_overrides(**auth_files), writer=RecordingWriter())


def test_server_exits_2_with_the_reason(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert server_main(["--set", "api.host=0.0.0.0", "--set", f"delta.root={tmp_path}"]) == 2
    assert "no authentication is configured" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"api.auth.basic.file": "/nonexistent/users"}, "api.auth.basic.file: cannot read"),
        ({"api.tls.client.auth": "required"}, "needs TLS"),
        ({"api.tls.client.auth": "maybe"}, "expected one of none, requested, required"),
        ({"api.tls.cert.file": "c.pem"}, "set both"),
    ],
)
def test_bad_auth_settings_are_config_errors(settings: Settings, overrides: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        create_app(settings.with_overrides(**overrides), writer=RecordingWriter())


def test_grants_file() -> None:
    grants = parse_grants([(1, "alice: admin"), (2, "CN=x, O=y: read operate@orders-*"), (3, "alice: read")])
    assert grants["alice"] == (Grant(Role.ADMIN), Grant(Role.READ))
    assert grants["CN=x, O=y"] == (Grant(Role.READ), Grant(Role.OPERATE, "orders-*"))
    with pytest.raises(ConfigError, match="unknown role 'superuser'"):
        parse_grants([(4, "bob: superuser")])
    assert Grant(Role.ADMIN, "a*").allows(Role.DELETE, "ab") and not Grant(Role.ADMIN, "a*").allows(Role.DELETE, "b")
    assert not Grant(Role.OPERATE, "a*").allows(Role.OPERATE, None)
    assert AuthMethod.CERTIFICATE == "certificate"


# --- hashes and the CLI ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", [HashScheme.SCRYPT, HashScheme.PBKDF2_SHA256])
def test_password_hashes(scheme: HashScheme) -> None:
    stored = hash_password("s3cret", scheme)
    assert stored.startswith(f"{METHODS[scheme]}$") and "s3cret" not in stored
    assert verify_password("s3cret", stored)
    assert not verify_password("s3cret!", stored)
    assert hash_password("s3cret", scheme) != stored  # salted
    assert not verify_password("s3cret", "md5$abc") and not verify_password("x", "scrypt$1$2")
    assert not verify_password("s3cret", "scrypt:3:8:1$salt$00") and not verify_password("s3cret", "sha256$00")


def test_the_scrypt_parameters_are_owasps() -> None:
    assert hash_password("s3cret").startswith("scrypt:131072:8:1$")  # N=2^17, r=8, p=1


@pytest.mark.parametrize("stored", LEGACY_HASHES.values(), ids=LEGACY_HASHES.keys())
def test_lines_written_before_werkzeug_still_verify(stored: str, make_client: MakeClient, tmp_path: Path) -> None:
    assert verify_password("old-secret", stored) and not verify_password("old-secret!", stored)
    users = tmp_path / "old-users"
    users.write_text(f"old:{stored}\n")
    client = make_client(overrides={"api.auth.basic.file": str(users), "api.kafka.cluster.id": "c"})
    assert client.get("/", headers=basic("old", "old-secret")).status_code == 200
    assert client.get("/", headers=basic("old", "new-secret")).status_code == 401


def test_tokens_are_looked_up_by_their_hash() -> None:
    assert hash_token("abc") == hash_token("abc") != hash_token("abd")


def test_passwords_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("pw\n"))
    assert main(["hash", "alice", "--scheme", "pbkdf2_sha256"]) == 0
    user, stored = capsys.readouterr().out.strip().split(":", 1)
    assert user == "alice" and verify_password("pw", stored)
    assert main(["token", "bot"]) == 0
    token, line = capsys.readouterr().out.strip().splitlines()
    assert line == f"bot:{hash_token(token)}"


def test_certificates_only(make_client: MakeClient, auth_files: dict[str, str]) -> None:
    """Mutual TLS without passwords or tokens: an Authorization header (a proxy's, a browser's) does not hide the
    certificate; without a certificate, 401."""
    overrides = {
        "api.auth.roles.file": auth_files["api.auth.roles.file"],
        "api.tls.cert.file": "server.pem",
        "api.tls.key.file": "server.key",
        "api.tls.ca.file": "ca.pem",
        "api.tls.client.auth": "requested",
    }
    client = make_client(overrides=overrides)
    environ = {"gunicorn.socket": FakeTlsSocket(cert_of(CERT_USER))}
    assert client.put("/connectors/x/stop", headers=basic("x"), environ_overrides=environ).status_code == 404
    assert client.put("/connectors/x/stop", headers=basic("x")).status_code == 401


@pytest.mark.parametrize(
    ("anonymous", "roles", "expected"),
    [
        ("true", False, "every authenticated principal has the role admin; a request without credentials is "
                        "anonymous with read (api.auth.anonymous)"),
        ("false", False, "every authenticated principal has the role admin; a request without credentials answers 401"),
        ("true", True, "roles as api.auth.roles.file grants them; a request without credentials is anonymous with "
                       "read"),
    ],
)  # fmt: skip
def test_the_start_up_warning_says_who_has_what(
    auth_files: dict[str, str], anonymous: str, roles: bool, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    files = auth_files if roles else {k: v for k, v in auth_files.items() if k != "api.auth.roles.file"}
    settings = load_settings(overrides={**files, "api.auth.anonymous": anonymous}, environ={})
    config = load_auth_config(settings)
    assert expected in config.describe()
    if not roles:
        assert config.grants_of(ANONYMOUS, AuthMethod.ANONYMOUS) == (Grant(Role.READ),)


# --- guessing (issue 33 finding 6) ----------------------------------------------------------------------------------


def from_address(address: str) -> dict[str, Any]:
    return {"REMOTE_ADDR": address}


@pytest.fixture
def limited(make_client: MakeClient, auth_files: dict[str, str]) -> FlaskClient:
    limits = {"api.auth.failures.per.principal": "3", "api.auth.failures.per.address": "5"}
    return make_client(overrides={**auth_files, **limits})


def test_a_guessed_name_answers_429_from_any_address(limited: FlaskClient) -> None:
    for i in range(3):
        answer = limited.get(
            "/connectors", headers=basic("reader", "guess"), environ_overrides=from_address(f"10.0.0.{i}")
        )
        assert answer.status_code == 401
    # the right password now, from an address that never failed: refused before it is checked
    answer = limited.get("/connectors", headers=basic("reader"), environ_overrides=from_address("10.0.0.99"))
    assert_connect_error(answer, 429, "Too many failed logins for the user reader: try again in 300 s")
    assert answer.headers["Retry-After"] == "300"
    # another user from that address is not concerned
    answer = limited.get("/connectors", headers=basic("operator"), environ_overrides=from_address("10.0.0.99"))
    assert answer.status_code not in (401, 429)


def test_an_address_guessing_names_answers_429_and_a_success_does_not_clear_it(limited: FlaskClient) -> None:
    attacker = from_address("192.0.2.66")
    for i in range(4):
        assert limited.get("/connectors", headers=basic(f"user{i}", "x"), environ_overrides=attacker).status_code == 401
    # a real user behind the same address logs in before the limit: it clears nothing
    assert limited.get("/connectors", headers=basic("reader"), environ_overrides=attacker).status_code != 401
    assert (
        limited.get("/connectors", headers={"Authorization": "Bearer nope"}, environ_overrides=attacker).status_code
        == 401
    )
    for headers in (
        basic("reader"),
        basic("someone", "x"),
        {"Authorization": "Bearer nope"},
        {"Authorization": "Basic !!"},
    ):
        answer = limited.get("/connectors", headers=headers, environ_overrides=attacker)
        assert answer.status_code == 429, headers
        assert answer.get_json()["message"].startswith("Too many failed logins from the address 192.0.2.66")
    assert (
        limited.get("/connectors", headers=basic("reader"), environ_overrides=from_address("192.0.2.67")).status_code
        != 429
    )


def test_the_limits_can_be_turned_off(make_client: MakeClient, auth_files: dict[str, str]) -> None:
    off = {"api.auth.failures.per.principal": "0", "api.auth.failures.per.address": "0"}
    client = make_client(overrides={**auth_files, **off})
    assert {client.get("/connectors", headers=basic("reader", "x")).status_code for _ in range(40)} == {401}
    with pytest.raises(ConfigError, match=r"api.auth.failures"):
        make_client(overrides={**auth_files, "api.auth.failures.tracked": "0"})


def test_an_unknown_user_costs_the_same_hash_as_a_known_one(
    auth_client: FlaskClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hash Werkzeug computes, spied at its one hashing function: a known user's wrong password and an unknown
    user's each cost one, with the same method (the file's: pbkdf2:sha256:1000 here)."""
    import werkzeug.security

    methods: list[str] = []
    real = werkzeug.security._hash_internal

    def spy(method: str, salt: str, password: str) -> tuple[str, str]:
        methods.append(method)
        return real(method, salt, password)

    monkeypatch.setattr(werkzeug.security, "_hash_internal", spy)
    assert auth_client.get("/connectors", headers=basic("reader", "wrong")).status_code == 401
    known = list(methods)
    methods.clear()
    assert auth_client.get("/connectors", headers=basic("no-such-user", "wrong")).status_code == 401
    assert known == methods == ["pbkdf2:sha256:1000"]


@pytest.mark.parametrize(
    ("hashes", "method"),
    [
        (["pbkdf2:sha256:1000$s$h", "pbkdf2:sha256:1000$t$i", "scrypt:16384:8:1$u$j"], "pbkdf2:sha256:1000"),
        ([LEGACY_HASHES["scrypt"]], "scrypt:16384:8:1"),
        ([LEGACY_HASHES["pbkdf2"]], "pbkdf2:sha256:600000"),
        (["md5$x", "pbkdf2:nosuchhash:5$s$h"], METHODS[HashScheme.SCRYPT]),  # nothing usable: Werkzeug's default
    ],
)
def test_the_dummy_hash_has_the_files_method(hashes: list[str], method: str) -> None:
    from connect_state.api.passwords import dummy_hash, method_of

    stored = dummy_hash(hashes)
    assert method_of(stored) == stored.split("$")[0] == method
    assert dummy_hash(hashes) != stored  # a random password, salted


# --- certificates and users are different principals (issue 33 finding 9) -------------------------------------------


def test_a_certificate_does_not_get_the_grants_of_a_user_of_the_same_name(
    make_client: MakeClient, auth_files: dict[str, str], tmp_path: Path
) -> None:
    roles = tmp_path / "typed-roles"
    roles.write_text("operator: admin\ncert:operator: read\n*: \n")
    overrides = {
        **auth_files,
        "api.auth.roles.file": str(roles),
        "api.tls.cert.file": "server.pem",
        "api.tls.key.file": "server.key",
        "api.tls.ca.file": "ca.pem",
        "api.tls.client.auth": "requested",
    }
    client = make_client(overrides=overrides)
    environ = {"gunicorn.socket": FakeTlsSocket(cert_of("operator"))}
    refused = client.put("/connectors/x/stop", environ_overrides=environ)
    assert_connect_error(
        refused, 403, "cert:operator may not PUT /connectors/x/stop: it needs the role operate on connector x"
    )
    assert client.get("/connectors/x/topics", environ_overrides=environ).status_code not in (401, 403)
    assert client.put("/connectors/x/stop", headers=basic("operator")).status_code == 404  # the user: admin, view ran
    # a certificate named like the anonymous principal is not it either
    anonymous = {"gunicorn.socket": FakeTlsSocket(cert_of(ANONYMOUS))}
    assert client.get("/connectors/x/topics", environ_overrides=anonymous).status_code == 403


# --- exposure judged by address (issue 33 finding 9) ----------------------------------------------------------------


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Names the resolver answers (an /etc/hosts of the test's own); any other name does not resolve."""
    import socket

    names: dict[str, list[str]] = {}

    def getaddrinfo(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host not in names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0)) for a in names[host]
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


@pytest.mark.parametrize(
    ("host", "addresses", "loopback"),
    [
        ("localhost", ["127.0.0.1", "::1"], True),
        ("localhost.", ["127.0.0.1"], True),
        ("localhost", ["10.9.8.7"], False),  # a tampered hosts file: the name is not the address
        ("api.internal", ["127.0.1.1"], True),
        ("api.internal", ["127.0.0.1", "10.9.8.7"], False),  # one address beyond loopback is enough
        ("0", ["0.0.0.0"], False),
        ("nowhere.invalid", None, False),
        ("", None, False),
    ],
)
def test_exposure_is_judged_by_the_resolved_addresses(
    resolver: dict[str, list[str]],
    settings: Settings,
    host: str,
    addresses: list[str] | None,
    loopback: bool,
) -> None:
    if addresses is not None:
        resolver[host] = addresses
    assert is_loopback(host) is loopback
    exposed = settings.with_overrides(**{"api.host": host})
    if loopback:
        create_app(exposed, writer=RecordingWriter())
    else:
        with pytest.raises(UnprotectedApiError, match=r"not a loopback address"):
            create_app(exposed, writer=RecordingWriter())
        create_app(exposed.with_overrides(**{"api.auth.anonymous": "true"}), writer=RecordingWriter())


def test_the_bound_sockets_are_judged_by_their_address() -> None:
    from connect_state.api.network import check_listening

    check_listening([("127.0.0.1", 8090), ("::1", 8090, 0, 0), "/run/connect-state.sock"], protected=False)
    for exposed in (("0.0.0.0", 8090), ("::", 8090, 0, 0), ("10.9.8.7", 8090)):
        with pytest.raises(UnprotectedApiError, match=rf"socket bound to {exposed[0]}:8090"):
            check_listening([("127.0.0.1", 8090), exposed], protected=False)
        check_listening([exposed], protected=True)


# --- behind a proxy (issue 33 finding 9) ----------------------------------------------------------------------------


@pytest.mark.parametrize(("proxies", "seen"), [("0", "127.0.0.1"), ("1", "203.0.113.9"), ("2", "198.51.100.4")])
def test_forwarded_for_is_trusted_from_the_configured_proxies_only(
    make_client: MakeClient, auth_files: dict[str, str], tmp_path: Path, proxies: str, seen: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    overrides = {**auth_files, "api.trusted.proxies": proxies, "api.audit.file": str(audit), "api.audit.table": "false"}
    client = make_client(overrides=overrides)
    headers = {**basic("reader", "wrong"), "X-Forwarded-For": "198.51.100.4, 203.0.113.9"}  # client, first proxy
    assert client.get("/connectors", headers=headers).status_code == 401
    (row,) = [json.loads(line) for line in audit.read_text().splitlines()]
    assert row["remote_addr"] == seen
    with pytest.raises(ConfigError, match=r"api\.trusted\.proxies"):
        make_client(overrides={**auth_files, "api.trusted.proxies": "-1"})
