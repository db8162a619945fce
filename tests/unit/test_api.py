"""The REST API with Flask's test client: KIP-558 endpoints, Connect's error model, resources, the server script.

Delta tables are created with ``deltalake`` under ``tmp_path`` (the Spark job writes the same schema for real).
Kafka is replaced by an in-memory recording writer, which places keys with the Java partitioner like the real one.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import requests
from deltalake import write_deltalake
from flask import Flask
from flask.testing import FlaskClient

import connect_state.api.resources as api_resources
from connect_state.api import close_app, create_app
from connect_state.api.errors import ConnectRestException
from connect_state.api.refusals import JettyRefusalsWorker
from connect_state.api.resources import get_settings, get_tables, get_writer
from connect_state.api.server import AccessLogger, bind_address, gunicorn_options
from connect_state.core.errors import KafkaWriteError, TableNotFoundError
from connect_state.core.settings import Settings
from connect_state.dev.jvm_service import free_port
from connect_state.kafka.partitioner import partition_for_key
from connect_state.progress.freshness import HEADER, parse_lag_header
from connect_state.tables.reader import TableReader
from connect_state.tables.schemas import ACTIVE_TOPICS, ALL_TABLES, TableSpec
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTopics, RecordingWriter
from tests.unit.helpers import assert_connect_error, topic_status_value, write_table

REPO_ROOT = Path(__file__).resolve().parents[2]
TRACKING_DISABLED = {"error_code": 403, "message": "Topic tracking is disabled."}
RESET_DISABLED = {"error_code": 403, "message": "Topic tracking reset is disabled."}


# --- helpers and fixtures -------------------------------------------------------------------------------------------


def write_active_topics(delta_root: Path, pairs: Iterable[tuple[str, str]], mode: str = "append") -> None:
    """Write ``(connector, topic)`` rows to the active_topics table the way the job's schema has them."""
    now = dt.datetime.now(dt.UTC)
    rows = [
        {
            "connector": connector,
            "topic": topic,
            "task": 0,
            "discover_timestamp": 1_746_009_337_985 + i,
            "updated_at": now,
            "kafka_partition": partition_for_key(f"status-topic-{topic}:connector-{connector}".encode(), 5),
            "kafka_offset": i,
        }
        for i, (connector, topic) in enumerate(pairs)
    ]
    write_table(delta_root, ACTIVE_TOPICS, rows, mode=mode)


def tracking(enable: bool = True, allow_reset: bool = True) -> dict[str, str]:
    """The topic-tracking settings (KIP-558's ``topic.tracking.enable`` and ``topic.tracking.allow.reset``)."""
    return {"topic.tracking.enable": str(enable).lower(), "topic.tracking.allow.reset": str(allow_reset).lower()}


@pytest.fixture
def topics_table(settings: Settings) -> Path:
    """active_topics with foo-source on foo-topic, baz-sink on foo-topic and bar-topic."""
    write_active_topics(
        settings.delta_root, [("foo-source", "foo-topic"), ("baz-sink", "foo-topic"), ("baz-sink", "bar-topic")]
    )
    return settings.delta_root / ACTIVE_TOPICS.name


# --- tables ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ALL_TABLES, ids=lambda spec: spec.name)
def test_every_table_schema_round_trips_through_deltalake(tmp_path: Path, spec: TableSpec) -> None:
    """The API reads what the spec's Arrow schema writes, type for type (the jobs write the same schema)."""
    write_deltalake(tmp_path / spec.name, spec.schema.empty_table())
    reader = TableReader(tmp_path)
    assert reader.table(spec).schema().to_arrow().names == spec.column_names
    assert reader.snapshot(spec).schema.equals(spec.schema)
    assert reader.rows(spec) == []


def test_rows_filters_and_columns(settings: Settings, topics_table: Path) -> None:
    reader = TableReader(settings.delta_root)
    assert reader.rows(ACTIVE_TOPICS, [("connector", "=", "foo-source")], ["connector", "topic"]) == [
        {"connector": "foo-source", "topic": "foo-topic"}
    ]
    rows = reader.rows(ACTIVE_TOPICS, [("connector", "=", "baz-sink")])
    assert sorted(r["topic"] for r in rows) == ["bar-topic", "foo-topic"]
    assert set(rows[0]) == set(ACTIVE_TOPICS.column_names)
    assert rows[0]["updated_at"].tzinfo is not None


def test_rows_see_new_commits(settings: Settings, topics_table: Path) -> None:
    reader = TableReader(settings.delta_root)
    assert len(reader.rows(ACTIVE_TOPICS)) == 3
    write_active_topics(settings.delta_root, [("new", "t")])
    assert len(reader.rows(ACTIVE_TOPICS)) == 4


def test_snapshot_is_reused_until_the_table_version_moves(settings: Settings, topics_table: Path) -> None:
    reader = TableReader(settings.delta_root)
    first = reader.snapshot(ACTIVE_TOPICS)
    assert reader.snapshot(ACTIVE_TOPICS) is first
    write_active_topics(settings.delta_root, [("other", "t")], mode="overwrite")
    assert [row["connector"] for row in reader.rows(ACTIVE_TOPICS)] == ["other"]
    assert reader.snapshot(ACTIVE_TOPICS) is not first


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ([("connector", "=", "baz-sink")], ["bar-topic", "foo-topic"]),
        ([("connector", "!=", "baz-sink")], ["foo-topic"]),
        ([("connector", "in", ["baz-sink", "foo-source"])], ["bar-topic", "foo-topic", "foo-topic"]),
        ([("connector", "not in", ["baz-sink"])], ["foo-topic"]),
        ([("connector", "=", "baz-sink"), ("topic", ">", "c")], ["foo-topic"]),
        ([("connector", "=", "nobody")], []),
    ],
)
def test_rows_filter_operators(settings: Settings, topics_table: Path, filters: list, expected: list[str]) -> None:
    rows = TableReader(settings.delta_root).rows(ACTIVE_TOPICS, filters, ["topic"])
    assert sorted(row["topic"] for row in rows) == expected


def test_unsupported_filter_operator_is_refused(settings: Settings, topics_table: Path) -> None:
    with pytest.raises(ValueError, match="unsupported filter operator 'like'"):
        TableReader(settings.delta_root).rows(ACTIVE_TOPICS, [("connector", "like", "foo%")])


def test_missing_table_names_table_and_job(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError) as info:
        TableReader(tmp_path / "nowhere").rows(ACTIVE_TOPICS)
    message = str(info.value)
    assert "active_topics" in message
    assert "connect-state-active-topics" in message
    assert str(tmp_path / "nowhere" / "active_topics") in message


# --- GET /connectors/<name>/topics ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("connector", "topics"),
    [
        ("foo-source", ["foo-topic"]),
        ("baz-sink", ["bar-topic", "foo-topic"]),
        ("unknown", []),  # no existence check: 200 with an empty list (ConnectorTopicsIntegrationTest)
    ],
)
@pytest.mark.parametrize("allow_reset", [True, False])
def test_get_topics(
    make_client: MakeClient, topics_table: Path, connector: str, topics: list[str], allow_reset: bool
) -> None:
    response = make_client(overrides=tracking(allow_reset=allow_reset)).get(f"/connectors/{connector}/topics")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.get_json() == {connector: {"topics": topics}}


@pytest.mark.parametrize("connector", ["my connector", "café-source", "a.b_c"])
def test_get_topics_connector_names_are_url_decoded(settings: Settings, client: FlaskClient, connector: str) -> None:
    write_active_topics(settings.delta_root, [(connector, "t1"), ("other", "t2")])
    response = client.get("/connectors/" + requests.utils.quote(connector) + "/topics")
    assert response.get_json() == {connector: {"topics": ["t1"]}}


@pytest.mark.parametrize("allow_reset", [True, False])
def test_get_topics_tracking_disabled(make_client: MakeClient, allow_reset: bool) -> None:
    # Checked before the table is read: no table needed.
    client = make_client(overrides=tracking(enable=False, allow_reset=allow_reset))
    response = client.get("/connectors/foo-source/topics")
    assert_connect_error(response, 403, TRACKING_DISABLED["message"])


def test_get_topics_table_missing_is_503(client: FlaskClient) -> None:
    response = client.get("/connectors/foo-source/topics")
    assert response.status_code == 503
    body = response.get_json()
    assert body["error_code"] == 503
    assert "active_topics" in body["message"]
    assert "connect-state-active-topics" in body["message"]


# --- PUT /connectors/<name>/topics/reset ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("enable", "allow_reset", "status", "body"),
    [
        (True, True, 202, None),
        (True, False, 403, RESET_DISABLED),
        (False, True, 403, TRACKING_DISABLED),
        (False, False, 403, TRACKING_DISABLED),  # "tracking disabled" is checked first
    ],
)
def test_reset_flags(
    make_client: MakeClient,
    writer: RecordingWriter,
    topics_table: Path,
    enable: bool,
    allow_reset: bool,
    status: int,
    body: dict[str, Any] | None,
) -> None:
    response = make_client(overrides=tracking(enable, allow_reset)).put("/connectors/baz-sink/topics/reset")
    assert response.status_code == status
    if body is None:
        assert writer.sends, "a 202 reset writes tombstones"
    else:
        assert response.get_json() == body
        assert writer.sends == []


def test_reset_tombstones_every_topic_of_the_connector(
    settings: Settings, client: FlaskClient, writer: RecordingWriter, topics_table: Path
) -> None:
    response = client.put("/connectors/baz-sink/topics/reset")

    assert response.status_code == 202
    assert response.get_data() == b""
    assert "Content-Type" not in response.headers
    [(topic, records, timeout_ms)] = writer.sends
    assert topic == settings.status_storage_topic == "connect-status"
    assert timeout_ms == settings.api_kafka_write_timeout_ms
    assert records == [
        (b"status-topic-bar-topic:connector-baz-sink", None),
        (b"status-topic-foo-topic:connector-baz-sink", None),
    ]


@pytest.mark.parametrize(
    ("connector", "topics"),
    [
        ("foo-source", ["foo-topic"]),
        ("baz-sink", ["bar-topic", "foo-topic"]),
        ("café-sink", ["topic-é", "t.1", "t_2"]),
    ],
)
def test_reset_keys_and_partitions(
    settings: Settings, client: FlaskClient, writer: RecordingWriter, connector: str, topics: list[str]
) -> None:
    write_active_topics(settings.delta_root, [(connector, t) for t in topics] + [("someone-else", "foo-topic")])

    assert client.put(f"/connectors/{requests.utils.quote(connector)}/topics/reset").status_code == 202

    expected = [f"status-topic-{t}:connector-{connector}".encode() for t in sorted(topics)]
    assert writer.keys == expected
    # Each tombstone goes to the partition the topic-status record was read from (Connect's Java placement).
    read_from = {
        f"status-topic-{row['topic']}:connector-{row['connector']}".encode(): row["kafka_partition"]
        for row in TableReader(settings.delta_root).rows(ACTIVE_TOPICS)
    }
    assert writer.placements == [(key, read_from[key]) for key in expected]


def test_reset_unknown_connector_is_202_without_a_write(
    client: FlaskClient, writer: RecordingWriter, topics_table: Path
) -> None:
    response = client.put("/connectors/unknown/topics/reset")
    assert response.status_code == 202
    assert writer.sends == []


def test_reset_without_table_reads_the_status_topic_from_its_start(
    client: FlaskClient, writer: RecordingWriter, kafka_log: InMemoryTopics
) -> None:
    """No ``active_topics`` table (the job never ran): nothing is folded yet, so the whole status topic is."""
    kafka_log.append_keyed(
        "connect-status", b"status-topic-t1:connector-baz-sink", topic_status_value("t1", "baz-sink")
    )
    kafka_log.append_keyed(
        "connect-status", b"status-topic-t2:connector-baz-sink", topic_status_value("t2", "baz-sink")
    )
    kafka_log.append_keyed("connect-status", b"status-topic-t2:connector-baz-sink", None)
    kafka_log.append_keyed("connect-status", b"status-topic-t3:connector-other", topic_status_value("t3", "other"))
    response = client.put("/connectors/baz-sink/topics/reset")
    assert response.status_code == 202
    assert writer.keys == [b"status-topic-t1:connector-baz-sink"]


def test_reset_write_failure_is_500_with_the_message(make_client: MakeClient, topics_table: Path) -> None:
    failing = RecordingWriter(fail=KafkaWriteError("timed out after 30000 ms waiting for Kafka"))
    response = make_client(writer=failing).put("/connectors/baz-sink/topics/reset")
    assert_connect_error(response, 500, "timed out after 30000 ms waiting for Kafka")


# --- error model ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/nope", "/nope/", "/connectorz", "/connectors/foo/topicz", "/connectors/a/b/topics"])
def test_unknown_route_is_connect_404(client: FlaskClient, path: str) -> None:
    assert_connect_error(client.get(path), 404, "HTTP 404 Not Found")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/connectors/foo/topics"),
        ("delete", "/connectors/foo/topics"),
        ("get", "/connectors/foo/topics/reset"),
        ("post", "/connectors/foo/topics/reset"),
    ],
)
def test_wrong_method_is_connect_405(client: FlaskClient, writer: RecordingWriter, method: str, path: str) -> None:
    response = getattr(client, method)(path)
    assert_connect_error(response, 405, "HTTP 405 Method Not Allowed")
    assert "Allow" in response.headers
    assert writer.sends == []


def _app_with_route(settings: Settings, view: Callable[[], Any]) -> Flask:
    app = create_app(settings, writer=RecordingWriter())
    app.add_url_rule("/boom", "boom", view)
    return app


@pytest.mark.parametrize(
    ("exc", "status", "message"),
    [
        (RuntimeError("boom"), 500, "boom"),
        (RuntimeError(), 500, None),  # no message: "message": null, as Java's getMessage()
        (KafkaWriteError("write to topic 'connect-status' failed"), 500, "write to topic 'connect-status' failed"),
        (ConnectRestException(409, "Cannot complete request momentarily"), 409, "Cannot complete request momentarily"),
        (ConnectRestException(404, None), 404, None),
        (TableNotFoundError("Delta table x not found"), 503, "Delta table x not found"),
    ],
    ids=["exception", "no-message", "kafka-write", "connect-rest", "connect-rest-null", "table-missing"],
)
def test_exceptions_map_to_connect_errors(
    settings: Settings, exc: Exception, status: int, message: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    def view() -> Any:
        raise exc

    app = _app_with_route(settings, view)
    response = app.test_client().get("/boom")
    assert_connect_error(response, status, message)
    if status == 500:
        assert any(r.exc_info and r.exc_info[1] is exc for r in caplog.records), "500s are logged with a traceback"


# --- resources and app lifecycle -----------------------------------------------------------------------------------


def test_resources_on_g(settings: Settings, writer: RecordingWriter) -> None:
    tables = TableReader(settings.delta_root)
    app = create_app(settings, table_reader=tables, writer=writer)
    with app.app_context():
        assert get_settings() is settings
        assert get_tables().tables is tables  # type: ignore[attr-defined]  # noting the tables a request reads
        assert get_writer() is writer


def test_default_resources(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONNECT_STATE_DELTA_ROOT", str(settings.delta_root))
    app = create_app()
    with app.app_context():
        tables = get_tables().tables  # type: ignore[attr-defined]
        assert isinstance(tables, TableReader)
        assert tables.delta_root == settings.delta_root


def test_writer_is_created_lazily_once_and_closed(
    settings: Settings, topics_table: Path, monkeypatch: pytest.MonkeyPatch, kafka_log: InMemoryTopics
) -> None:
    created: list[RecordingWriter] = []

    def factory(_settings: Settings) -> RecordingWriter:
        created.append(RecordingWriter())
        return created[-1]

    monkeypatch.setattr(api_resources, "create_writer", factory)
    app = create_app(settings, topics=kafka_log)
    client = app.test_client()

    assert client.get("/connectors/baz-sink/topics").status_code == 200
    assert client.put("/connectors/unknown/topics/reset").status_code == 202
    assert created == [], "no write, no Kafka client"

    assert client.put("/connectors/baz-sink/topics/reset").status_code == 202
    assert client.put("/connectors/foo-source/topics/reset").status_code == 202
    assert len(created) == 1, "one writer per app, shared by requests"
    assert len(created[0].sends) == 2

    close_app(app)
    assert created[0].closed
    close_app(app)  # idempotent


def test_injected_writer_is_not_closed_by_the_app(settings: Settings, writer: RecordingWriter) -> None:
    app = create_app(settings, writer=writer)
    close_app(app)
    assert not writer.closed


def test_api_imports_no_spark_and_no_jobs() -> None:
    """No JVM in the request path: importing and building the app loads neither pyspark, nor our Spark layer, nor a
    job (the table schemas the API shares with the jobs are Arrow's)."""
    code = (
        "import sys, connect_state.api, connect_state.api.server; connect_state.api.create_app(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'pyspark', 'py4j', 'delta', 'api', 'jobs'} "
        "or m.startswith(('connect_state.spark', 'connect_state.jobs'))))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_STATE_")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


# --- server ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        ("127.0.0.1", 8090, "127.0.0.1:8090"),
        ("::1", 80, "[::1]:80"),
        ("[::1]", 80, "[::1]:80"),
        ("0.0.0.0", 1, "0.0.0.0:1"),
    ],
)
def test_bind_address(host: str, port: int, expected: str) -> None:
    assert bind_address(host, port) == expected


def test_gunicorn_options(settings: Settings, writer: RecordingWriter) -> None:
    app = create_app(settings, writer=writer)
    options = gunicorn_options(settings, app, workers=2, threads=8)
    assert options["bind"] == [f"{settings.api_host}:{settings.api_port}"]
    assert (options["workers"], options["threads"], options["worker_class"]) == (2, 8, JettyRefusalsWorker)
    assert options["accesslog"] == "-"
    assert options["logger_class"] is AccessLogger
    assert options["control_socket_disable"] is True
    assert options["graceful_timeout"] * 1000 > settings.api_kafka_write_timeout_ms
    # A write: the fresh read before it, the write, the check after it.
    assert options["timeout"] * 1000 > settings.api_kafka_write_timeout_ms + 2 * settings.api_fresh_read_timeout_ms


class _Answer:
    status = "200 OK"
    sent = 1234
    headers = (("Content-Type", "application/json"), ("X-Connect-State-Lag", "connectors;records=0;age_ms=0"))


class _Asked:
    headers = (("Host", "api:8083"), ("User-Agent", "curl/8"), ("X-Request-Id", "r-1"))


_ENVIRON = {
    "REMOTE_ADDR": "10.0.0.7",
    "REQUEST_METHOD": "GET",
    "RAW_URI": "/connectors/a%20b/status?x=1",
    "PATH_INFO": "/connectors/a b/status",
    "QUERY_STRING": "x=1",
    "SERVER_PROTOCOL": "HTTP/1.1",
    "HTTP_USER_AGENT": "curl/8",
    "HTTP_AUTHORIZATION": "Basic " + base64.b64encode(b"alice:secret").decode(),
    "HTTP_X_REQUEST_ID": "r-1",
}


@pytest.mark.parametrize(
    "access_log_format",
    [
        None,  # gunicorn's default
        '%(h)s %(u)s %(m)s %(U)s %(q)s %(H)s %(s)s %(B)s %(T)s %(D)s %(M)s %(L)s %(p)s "%(f)s"',
        '%(h)s "%(r)s" %(s)s %({x-request-id}i)s %({content-type}o)s %({remote_addr}e)s',
    ],
)
def test_access_logger_writes_gunicorn_s_line(access_log_format: str | None) -> None:
    """Our access logger's atoms give the line gunicorn's own give, for any format (the oracle is gunicorn)."""
    from gunicorn import glogging
    from gunicorn.config import Config

    cfg = Config()
    cfg.set("accesslog", "-")
    if access_log_format is not None:
        cfg.set("access_log_format", access_log_format)
    ours, theirs = AccessLogger(cfg), glogging.Logger(cfg)
    ours.now = theirs.now = lambda: "[25/Nov/2026:10:00:00 +0000]"  # type: ignore[method-assign]
    took = dt.timedelta(seconds=1, microseconds=2345)
    line = cfg.access_log_format % glogging.SafeAtoms(ours.atoms(_Answer(), _Asked(), dict(_ENVIRON), took))
    expected = cfg.access_log_format % glogging.SafeAtoms(theirs.atoms(_Answer(), _Asked(), dict(_ENVIRON), took))
    assert line == expected
    assert "10.0.0.7" in line


def _wait_for_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> requests.Response:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}")
        try:
            return requests.get(url, timeout=2)
        except requests.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.parametrize("mode", [[], ["--dev"]], ids=["gunicorn", "dev"])
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_server_serves_and_stops_cleanly(
    settings: Settings, topics_table: Path, mode: list[str], stop_signal: int
) -> None:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "connect_state.api.server",
        *mode,
        "--set",
        f"delta.root={settings.delta_root}",
        "--set",
        "api.host=127.0.0.1",
        "--set",
        f"api.port={port}",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONNECT_STATE_")}
    proc = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        response = _wait_for_http(f"http://127.0.0.1:{port}/connectors/baz-sink/topics", proc)
        assert response.status_code == 200
        assert response.json() == {"baz-sink": {"topics": ["bar-topic", "foo-topic"]}}
        # The lag header even without a reachable Kafka (then "unknown", within api.lag.timeout.ms).
        [lag] = parse_lag_header(response.headers[HEADER])
        assert lag.table == "active_topics"
        missing = requests.get(f"http://127.0.0.1:{port}/nope", timeout=5)
        assert missing.status_code == 404
        assert missing.headers["Content-Type"] == "application/json"
        proc.send_signal(stop_signal)
        output, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, output.decode(errors="replace")
    if not mode:
        assert b"GET /connectors/baz-sink/topics" in output, "access log on stdout"
