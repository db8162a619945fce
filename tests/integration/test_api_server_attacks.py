"""Attacks on the production server process (gunicorn), issue 33: what a stranger on the network can make it do.

No broker is needed (``tests/fixtures/api_server.py``).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from collections.abc import Iterator
from http import HTTPMethod
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from werkzeug.security import generate_password_hash

from connect_state.api.passwords import hash_password
from tests.fixtures.api_server import START_TIMEOUT_S, no_kafka_settings, serving_api, start_api

REQUESTS_METRIC = "connect_state_api_requests"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving_api(no_kafka_settings(tmp_path_factory.mktemp("api"))) as url:
        yield url


def request_series(url: str) -> set[tuple[str, str, str]]:
    """The (method, endpoint, status) label sets of the request counter at ``/metrics``."""
    text = requests.get(f"{url}/metrics", timeout=10).text
    (family,) = (family for family in text_string_to_metric_families(text) if family.name == REQUESTS_METRIC)
    return {
        (sample.labels["method"], sample.labels["endpoint"], sample.labels["status"])
        for sample in family.samples
        if sample.name.endswith("_total")
    }


def test_made_up_methods_add_no_metric_series(server: str) -> None:
    """gunicorn accepts any upper-case token as a method; a request no route matches is counted before any
    authentication. Each made-up name must land in one bucket, not a series of its own."""
    for i in range(40):
        for path in ("/connectors", f"/no-such-path-{i}"):
            answer = requests.request(f"PROBE{i}X", f"{server}{path}", timeout=10)
            assert answer.status_code in (400, 404, 405), (i, path, answer.status_code)
    series = request_series(server)
    methods = {method for method, _, _ in series}
    assert methods <= {*HTTPMethod.__members__, "OTHER"}, methods
    assert "OTHER" in methods
    other = {(endpoint, status) for method, endpoint, status in series if method == "OTHER"}
    assert len(other) <= 4, other  # a handful of (rule, status) pairs, not one per name or path
    assert all(not endpoint.startswith("/no-such-path") for _, endpoint, _ in series)


def test_known_methods_keep_their_label(server: str, tmp_path: Path) -> None:
    requests.get(f"{server}/connectors", timeout=10)
    requests.delete(f"{server}/no-such-path", timeout=10)
    series = request_series(server)
    assert any(method == "GET" and endpoint == "/connectors" for method, endpoint, _ in series), series
    assert ("DELETE", "<unmatched>", "404") in series, series


def test_anonymous_reads_but_may_not_write_where_credentials_are_configured(tmp_path: Path) -> None:
    """Users configured, anonymous access allowed, no roles file: the users are admins, anonymous reads only."""
    users = tmp_path / "users"
    users.write_text(f"alice:{hash_password('wonderland')}\n")
    settings = {**no_kafka_settings(tmp_path), "api.auth.basic.file": str(users), "api.auth.anonymous": "true"}
    with serving_api(settings) as url:
        read = requests.get(f"{url}/connectors", timeout=10)
        assert read.status_code == 503, read.text  # authorised; no table yet
        for method, path in (("PUT", "/connectors/x/stop"), ("DELETE", "/connectors/x"), ("GET", "/audit")):
            answer = requests.request(method, f"{url}{path}", timeout=10)
            assert answer.status_code == 403, (method, path, answer.status_code, answer.text)
            assert answer.json()["message"].startswith("anonymous may not"), answer.text
        stop = requests.put(f"{url}/connectors/x/stop", auth=("alice", "wonderland"), timeout=30)
        assert stop.status_code not in (401, 403), stop.text  # alice is admin: the write is tried (no Kafka)


def test_a_page_of_another_origin_may_not_write(server: str) -> None:
    """A page on another port of the same host is same-site, not same-origin: its writes are refused before anything
    runs; the same write without browser headers (curl, a Connect client) or from the API's own page goes on."""
    port = int(server.rsplit(":", 1)[1])
    foreign = (
        {"Origin": f"http://127.0.0.1:{port + 1}"},
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "same-site"},
        {"Sec-Fetch-Site": "cross-site"},
    )
    for headers in foreign:
        for method, path in (
            ("PUT", "/connectors/x/stop"),
            ("POST", "/connectors/x/restart"),
            ("DELETE", "/connectors/x"),
        ):
            answer = requests.request(method, f"{server}{path}", headers=headers, timeout=30)
            assert answer.status_code == 403, (headers, method, answer.status_code, answer.text)
            assert "refused" in answer.json()["message"], answer.text
    own = ({}, {"Origin": server, "Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"})
    for headers in own:
        answer = requests.put(f"{server}/connectors/x/stop", headers=headers, timeout=30)
        assert answer.status_code != 403, (headers, answer.status_code, answer.text)  # tried: no Kafka, 409/503
    # reads are no concern of the origin check
    assert (
        requests.get(f"{server}/connectors", headers={"Origin": "http://evil.example"}, timeout=10).status_code == 503
    )


def test_a_rebound_name_gets_400_and_no_answer_can_be_framed(server: str) -> None:
    """DNS rebinding: a page whose own name resolves to 127.0.0.1 sends its own name as Host."""
    rebound = requests.get(f"{server}/connectors", headers={"Host": "attacker.example:80"}, timeout=10)
    assert rebound.status_code == 400, rebound.text
    page = requests.get(f"{server}/ui", timeout=10)
    assert page.status_code == 200
    assert page.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]


# --- guessing and flooding (issue 33 finding 6) ---------------------------------------------------------------------


def users_file(tmp_path: Path) -> Path:
    """alice/wonderland and bob/builder, hashed cheaply (the checks are Werkzeug's; only the cost is lowered)."""
    users = tmp_path / "users"
    users.write_text(
        "".join(
            f"{u}:{generate_password_hash(p, 'pbkdf2:sha256:1000')}\n"
            for u, p in (("alice", "wonderland"), ("bob", "builder"))
        )
    )
    return users


def audit_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_429(answer: requests.Response, message: str) -> None:
    assert answer.status_code == 429, (answer.status_code, answer.text)
    assert answer.headers["Content-Type"] == "application/json"
    body = answer.json()
    assert list(body) == ["error_code", "message"] and body["error_code"] == 429, body
    assert re.fullmatch(message + r": try again in (\d+) s", body["message"]), body
    retry_after = int(answer.headers["Retry-After"])
    assert 0 < retry_after <= 300 and body["message"].endswith(f" {retry_after} s")


def test_guessing_is_limited_per_name_and_per_address_behind_a_trusted_proxy(tmp_path: Path) -> None:
    """One proxy in front (api.trusted.proxies=1): X-Forwarded-For is the client's address, for the limits and the
    audit. A name guessed from many addresses, and an address guessing many names, both answer 429 before any
    password is checked, the right one included; others are not concerned."""
    settings = {
        **no_kafka_settings(tmp_path),
        "api.auth.basic.file": str(users_file(tmp_path)),
        "api.trusted.proxies": "1",
        "api.auth.failures.per.principal": "3",
        "api.auth.failures.per.address": "5",
    }
    with serving_api(settings) as url, requests.Session() as session:

        def get(user: str, password: str, client: str) -> requests.Response:
            headers = {"X-Forwarded-For": client}
            return session.get(f"{url}/connectors", auth=(user, password), headers=headers, timeout=10)

        for i in range(3):
            assert get("alice", f"guess{i}", f"198.51.100.{i}").status_code == 401
        assert_429(get("alice", "wonderland", "198.51.100.50"), "Too many failed logins for the user alice")
        assert get("bob", "builder", "198.51.100.50").status_code == 503  # authorised; no table yet

        for i in range(5):
            assert get(f"user{i}", "x", "203.0.113.9").status_code == 401
        for user, password in (("bob", "builder"), ("carol", "x")):
            assert_429(get(user, password, "203.0.113.9"), "Too many failed logins from the address 203.0.113.9")
        assert get("bob", "builder", "203.0.113.10").status_code == 503  # the next address is another client
    addresses = {row["remote_addr"] for row in audit_rows(tmp_path / "audit.jsonl")}
    assert addresses == {"198.51.100.0", "198.51.100.1", "198.51.100.2", "198.51.100.50", "203.0.113.9"}


def test_x_forwarded_for_is_ignored_without_a_trusted_proxy(tmp_path: Path) -> None:
    """No proxy configured (the default): a client naming a new address in each request is still one address."""
    settings = {
        **no_kafka_settings(tmp_path),
        "api.auth.basic.file": str(users_file(tmp_path)),
        "api.auth.failures.per.address": "5",
    }
    with serving_api(settings) as url, requests.Session() as session:
        for i in range(5):
            spoofed = {"X-Forwarded-For": f"192.0.2.{i}"}
            answer = session.get(f"{url}/connectors", auth=(f"user{i}", "x"), headers=spoofed, timeout=10)
            assert answer.status_code == 401
        spoofed = {"X-Forwarded-For": "192.0.2.99"}
        answer = session.get(f"{url}/connectors", auth=("bob", "builder"), headers=spoofed, timeout=10)
        assert_429(answer, "Too many failed logins from the address 127.0.0.1")
    assert {row["remote_addr"] for row in audit_rows(tmp_path / "audit.jsonl")} == {"127.0.0.1"}


def test_a_script_name_header_does_not_move_a_request(tmp_path: Path) -> None:
    """gunicorn takes SCRIPT_NAME from a header of a loopback peer unless told not to: a client could then have a
    request served for the default cluster while the audit records another path (issue 37's /clusters/<id> prefix).
    The server takes a request's path as sent."""
    settings = {**no_kafka_settings(tmp_path), "api.auth.basic.file": str(users_file(tmp_path))}
    with serving_api(settings) as url, requests.Session() as session:
        forged = {"SCRIPT_NAME": "/clusters/other"}
        refused = session.get(f"{url}/clusters/other/connectors", auth=("bob", "x"), headers=forged, timeout=10)
        assert refused.status_code == 401
        unknown = session.get(f"{url}/clusters/other/connectors", auth=("bob", "builder"), headers=forged, timeout=10)
        assert (unknown.status_code, unknown.json()["message"]) == (404, "Cluster other not found")
    assert [row["path"] for row in audit_rows(tmp_path / "audit.jsonl")][:1] == ["/clusters/other/connectors"]


def test_a_thousand_bad_logins_grow_the_audit_by_a_few_lines(tmp_path: Path) -> None:
    """Anyone can make the API refuse: 1,000 guesses (each a new name, so only the address limit stops them) leave
    the first 401 and the first 429 in full and, when the worker stops, one summary row each counting the rest."""
    audit = tmp_path / "audit.jsonl"
    settings = {**no_kafka_settings(tmp_path), "api.auth.basic.file": str(users_file(tmp_path))}
    with serving_api(settings) as url, requests.Session() as session:
        statuses = [
            session.get(f"{url}/connectors", auth=(f"guess{i}", "x"), timeout=10).status_code for i in range(1000)
        ]
        assert statuses == [401] * 30 + [429] * 970  # api.auth.failures.per.address's default
        assert len(audit_rows(audit)) == 2
    rows = audit_rows(audit)  # the server has stopped: its pending summaries are written
    assert [(row["status"], row["repeated"]) for row in rows] == [(401, None), (429, None), (401, 29), (429, 969)]
    assert sum(row["repeated"] or 1 for row in rows) == 1000
    assert {(row["outcome"], row["remote_addr"], row["endpoint"]) for row in rows} == {
        ("refused", "127.0.0.1", "connectors.list_connectors")
    }


# --- exposure judged by the bound socket (issue 33 finding 9) -------------------------------------------------------


@pytest.fixture
def socket_on_every_interface() -> Iterator[socket.socket]:
    """A listening socket bound to 0.0.0.0, as systemd's socket activation would hand it over."""
    with socket.create_server(("0.0.0.0", 0)) as listening:
        yield listening


def test_a_socket_bound_beyond_loopback_is_refused_whatever_api_host_says(
    tmp_path: Path, socket_on_every_interface: socket.socket
) -> None:
    """api.host says 127.0.0.1, but the socket gunicorn is handed listens on every interface: without
    authentication the server exits 2 before answering anyone."""
    server = start_api(no_kafka_settings(tmp_path), listening=socket_on_every_interface)
    try:
        code = server.proc.wait(timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        code = None
    output = server.stop()
    assert code == 2, output
    assert "the API's socket bound to 0.0.0.0:" in output and "not a loopback address" in output, output


def test_a_socket_bound_beyond_loopback_serves_with_authentication(
    tmp_path: Path, socket_on_every_interface: socket.socket
) -> None:
    settings = {**no_kafka_settings(tmp_path), "api.auth.basic.file": str(users_file(tmp_path))}
    with serving_api(settings, listening=socket_on_every_interface) as url:
        assert requests.get(f"{url}/connectors", timeout=30).status_code == 401
        assert requests.get(f"{url}/connectors", auth=("bob", "builder"), timeout=30).status_code == 503


def test_a_loopback_socket_serves_open(tmp_path: Path) -> None:
    with (
        socket.create_server(("127.0.0.1", 0)) as listening,
        serving_api(no_kafka_settings(tmp_path), listening=listening) as url,
    ):
        assert requests.put(f"{url}/connectors/x/stop", timeout=30).status_code not in (401, 403)
