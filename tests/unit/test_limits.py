"""Bounded input (api/limits.py, issue 13): body size, JSON depth, malformed paths, Host headers; every refusal in
Connect's error JSON, nothing written, no traceback."""

from __future__ import annotations

import io
import json
import logging

import pytest
from flask import Flask
from flask.testing import FlaskClient

from connect_state.api.limits import json_depth, too_deep_message
from connect_state.api.server import gunicorn_options, request_timeout_s
from connect_state.core.settings import Settings
from tests.unit.conftest import MakeClient
from tests.unit.fakes import RecordingWriter
from tests.unit.helpers import assert_connect_error

WRITES = [
    ("put", "/connectors/c/stop"),
    ("put", "/connectors/c/pause"),
    ("put", "/connectors/c/resume"),
    ("post", "/connectors/c/restart"),
    ("patch", "/connectors/c/offsets"),
    ("delete", "/connectors/c/offsets"),
    ("delete", "/connectors/c"),
    ("put", "/connectors/c/topics/reset"),
]


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("", 0),
        ("1", 0),
        ('"[[[{{{"', 0),  # brackets in strings do not count
        ('"\\"[["', 0),  # nor after an escaped quote
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ("[[]][[[]]]", 3),
    ],
)
def test_json_depth(text: str, depth: int) -> None:
    assert json_depth(text.encode(), 100) == depth


def test_json_depth_stops_past_the_limit() -> None:
    assert json_depth(b"[" * 10_000_000, 64) == 65  # constant stack, stops early


@pytest.mark.parametrize(("method", "path"), WRITES)
def test_body_over_the_limit_is_413_before_anything(
    make_client: MakeClient, writer: RecordingWriter, method: str, path: str
) -> None:
    client = make_client(overrides={"api.max.body.bytes": "100"})
    response = getattr(client, method)(path, data=b"x" * 101, content_type="application/json")
    assert_connect_error(response, 413, "HTTP 413 Request Entity Too Large")
    assert writer.sends == []


def test_chunked_body_over_the_limit_is_413(make_client: MakeClient, writer: RecordingWriter) -> None:
    """No Content-Length: the stream is cut at the bound."""
    client = make_client(overrides={"api.max.body.bytes": "100"})
    response = client.patch(
        "/connectors/c/offsets",
        input_stream=io.BytesIO(b"[" + b" " * 1000 + b"]"),
        headers={"Transfer-Encoding": "chunked", "Content-Type": "application/json"},
        environ_overrides={"wsgi.input_terminated": True},  # as gunicorn serves a chunked body
    )
    assert_connect_error(response, 413, "HTTP 413 Request Entity Too Large")
    assert writer.sends == []


def test_body_at_the_limit_is_read(make_client: MakeClient) -> None:
    client = make_client(overrides={"api.max.body.bytes": "200"})
    offset = {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 1}}
    body = json.dumps({"offsets": [offset]}).encode().ljust(200)
    response = client.patch("/connectors/c/offsets", data=body, content_type="application/json")
    assert_connect_error(response, 404, "Connector c not found")  # the view ran


@pytest.mark.parametrize("depth", [65, 1_000, 100_000])
def test_deep_json_body_is_400_without_traceback(
    client: FlaskClient, writer: RecordingWriter, caplog: pytest.LogCaptureFixture, depth: int
) -> None:
    with caplog.at_level(logging.DEBUG):
        response = client.patch("/connectors/c/offsets", data="[" * depth, content_type="application/json")
    assert_connect_error(response, 400, too_deep_message(64))
    assert writer.sends == []
    assert not [r for r in caplog.records if r.exc_info], "no traceback in the log"
    assert all(len(r.getMessage()) < 2_000 for r in caplog.records)


def test_json_at_the_depth_limit_reaches_the_view(client: FlaskClient) -> None:
    body = "[" * 64 + "]" * 64
    response = client.patch("/connectors/c/offsets", data=body, content_type="application/json")
    assert response.status_code == 400
    assert response.get_json()["message"] != too_deep_message(64)  # the offsets parser's own 400


def test_deep_json_query_value_is_400(client: FlaskClient) -> None:
    response = client.get("/connectors/c/history/offsets/partition", query_string={"partition": "[" * 5_000})
    assert_connect_error(response, 400, "A query parameter is nested more than 64 levels deep (api.max.json.depth)")


def test_recursion_error_anywhere_is_a_one_line_400(make_client: MakeClient, caplog: pytest.LogCaptureFixture) -> None:
    client = make_client()
    app = client.application

    def deep() -> None:
        raise RecursionError("maximum recursion depth exceeded")

    app.add_url_rule("/deep", "deep", deep)
    with caplog.at_level(logging.DEBUG):
        response = client.get("/deep")
    assert_connect_error(response, 400, "Request is nested too deeply to process")
    assert not [r for r in caplog.records if r.exc_info]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("put", "/connectors//x/stop"),
        ("put", "//connectors/x/stop"),
        ("get", "/connectors//x/status"),
        ("delete", "/connectors//x"),
        ("patch", "/connectors/x//offsets"),
        ("get", "/static//dashboard.js"),
    ],
)
def test_malformed_paths_are_connect_404_not_redirects(
    client: FlaskClient, writer: RecordingWriter, method: str, path: str
) -> None:
    # as the server hands it over: the test client would read a leading "//x" as a host name
    response = getattr(client, method)("/", environ_overrides={"PATH_INFO": path})
    assert_connect_error(response, 404, "HTTP 404 Not Found")
    assert "Location" not in response.headers
    assert writer.sends == []


def test_trusted_hosts(make_client: MakeClient) -> None:
    client = make_client(overrides={"api.trusted.hosts": "api.example.com,.internal"})
    assert client.get("/connectors/c/topics", headers={"Host": "api.example.com"}).status_code != 400
    assert client.get("/connectors/c/topics", headers={"Host": "x.internal"}).status_code != 400
    response = client.get("/connectors/c/topics", headers={"Host": "evil.example.org"})
    assert response.status_code == 400
    assert response.get_json()["error_code"] == 400
    # On loopback, left empty: the loopback names only (DNS rebinding: a page's own name resolving to 127.0.0.1)
    loopback = make_client()
    assert loopback.get("/connectors/c/topics", headers={"Host": "evil.example.org:8090"}).status_code == 400
    for host in ("localhost:8090", "127.0.0.1:8090", "localhost"):
        assert loopback.get("/connectors/c/topics", headers={"Host": host}).status_code != 400, host


def test_request_timeout(settings: Settings) -> None:
    """api.request.timeout.ms sets gunicorn's worker timeout; 0 derives it from the bounded waits of a write."""
    app = Flask(__name__)
    assert settings.api_request_timeout_ms == 0
    # defaults: a 30 s Kafka write and two 10 s fresh reads, plus 10 s
    assert gunicorn_options(settings, app)["timeout"] == request_timeout_s(settings) == 60
    assert gunicorn_options(settings, app)["graceful_timeout"] == 55
    slow = settings.with_overrides(**{"api.kafka.write.timeout.ms": "100000"})
    assert request_timeout_s(slow) == 130
    assert request_timeout_s(settings.with_overrides(**{"api.request.timeout.ms": "90500"})) == 91
    assert gunicorn_options(settings.with_overrides(**{"api.request.timeout.ms": "5000"}), app)["timeout"] == 5
    assert callable(gunicorn_options(settings, app)["post_worker_init"])  # starts the audit flusher after the fork
