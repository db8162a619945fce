"""Attacks on the production server process (gunicorn), issue 33: what a stranger on the network can make it do.

No broker is needed (``tests/fixtures/api_server.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from http import HTTPMethod
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from connect_state.api.passwords import hash_password
from tests.fixtures.api_server import no_kafka_settings, serving_api

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
