"""The API's clusters (api/clusters.py, issue 37): ``GET /clusters``, and every path under ``/clusters/<id>/...``
answered as the plain path for the default cluster, with Flask's test client. Against the real worker,
``tests/integration/test_trailing_slash_connect.py`` asks Connect's routes under the prefix too.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from werkzeug.security import generate_password_hash

from connect_state.api import create_app
from connect_state.api.clusters import ClusterPaths
from connect_state.api.resources import CLUSTER_ENVIRON_KEY
from connect_state.core.clusters import clusters, default_cluster
from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings
from connect_state.tables.schemas import CONNECTORS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTopics, RecordingWriter
from tests.unit.helpers import assert_connect_error, assert_no_content, mirror_connectors, write_table
from tests.unit.test_api_connectors import ROWS

PREFIX = "/clusters/connect-cluster"  # the default id: connect.group.id's default, cluster.id being empty


@pytest.fixture
def client(make_client: MakeClient, settings: Settings, kafka_log: InMemoryTopics) -> FlaskClient:
    write_table(settings.delta_root, CONNECTORS, ROWS)
    mirror_connectors(kafka_log, ROWS)
    return make_client(overrides={"api.kafka.cluster.id": "kafka-1"})  # GET / does not ask the (absent) Kafka


def test_the_default_cluster_is_the_one_the_settings_describe(settings: Settings) -> None:
    cluster = default_cluster(settings)
    assert (cluster.id, cluster.group_id, cluster.default) == ("connect-cluster", "connect-cluster", True)
    assert (cluster.bootstrap_servers, cluster.config_storage_topic) == (
        settings.bootstrap_servers,
        settings.config_storage_topic,
    )
    assert clusters(settings.with_overrides(**{"cluster.id": "prod-eu"}))[0].id == "prod-eu"
    assert default_cluster(settings.with_overrides(**{"connect.group.id": "workers"})).id == "workers"


@pytest.mark.parametrize("bad", ["a/b", "-x", "x y", "é", "x" * 129])
def test_a_cluster_id_that_is_no_path_segment_is_refused_at_start(settings: Settings, bad: str) -> None:
    with pytest.raises(ConfigError, match=r"cluster\.id: a cluster id is"):
        create_app(settings.with_overrides(**{"cluster.id": bad}), writer=RecordingWriter())


def test_clusters_lists_the_default_with_its_health(client: FlaskClient, settings: Settings) -> None:
    response = client.get("/clusters")
    assert response.status_code == 200
    [listed] = response.get_json()
    health = client.get("/health")
    assert listed["health"] == {
        "status": health.get_json()["status"],
        "message": health.get_json()["message"],
        "http_status": health.status_code,
        "kafka": {"reachable": True, "message": None},
    }
    assert {key: value for key, value in listed.items() if key != "health"} == {
        "id": "connect-cluster",
        "default": True,
        "bootstrap.servers": settings.bootstrap_servers,
        "group.id": "connect-cluster",
        "config.storage.topic": settings.config_storage_topic,
        "offset.storage.topic": settings.offset_storage_topic,
        "status.storage.topic": settings.status_storage_topic,
    }
    assert_connect_error(client.get("/clusters/other"), 404, "Cluster other not found")


@pytest.mark.parametrize(
    "path",
    [
        "",  # /clusters/<id> is Connect's root: a Connect client's base URL
        "/",
        "/connectors",
        "/connectors?expand=status&expand=info",
        "/connectors/foo-source",
        "/connectors/foo-source/status",
        "/connectors/foo-source/config",
        "/connectors/no-such/status",
        "/connectors/foo-source/status/",
        "/no-such-route",
    ],
)
def test_a_path_under_the_default_cluster_answers_as_the_plain_path(client: FlaskClient, path: str) -> None:
    plain, prefixed = client.get(path or "/"), client.get(PREFIX + path)
    assert (prefixed.status_code, prefixed.get_json()) == (plain.status_code, plain.get_json())


def test_a_write_under_the_default_cluster_writes_what_the_plain_path_does(
    client: FlaskClient, writer: RecordingWriter, settings: Settings
) -> None:
    assert_no_content(client.put("/connectors/foo-source/stop"), 204)
    assert_no_content(client.put(f"{PREFIX}/connectors/foo-source/stop"), 204)
    plain, prefixed = writer.sends
    assert plain == prefixed and plain[0] == settings.config_storage_topic


def test_an_unknown_cluster_answers_404_and_writes_nothing(client: FlaskClient, writer: RecordingWriter) -> None:
    assert_connect_error(client.put("/clusters/other/connectors/foo-source/stop"), 404, "Cluster other not found")
    assert_connect_error(client.get("/clusters/other/connectors"), 404, "Cluster other not found")
    assert not writer.sends


def test_the_audit_keeps_the_whole_path(
    make_client: MakeClient, settings: Settings, kafka_log: InMemoryTopics, tmp_path: Path
) -> None:
    write_table(settings.delta_root, CONNECTORS, ROWS)
    mirror_connectors(kafka_log, ROWS)
    audit_file = tmp_path / "audit.jsonl"
    client = make_client(overrides={"api.audit.file": str(audit_file), "api.audit.table": "false"})
    assert_no_content(client.put(f"{PREFIX}/connectors/foo-source/stop"), 204)
    rows = [json.loads(line) for line in audit_file.read_text().splitlines()]
    assert [row["path"] for row in rows] == [f"{PREFIX}/connectors/foo-source/stop"]


def test_an_unknown_cluster_is_named_only_to_an_authenticated_caller(make_client: MakeClient, tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text(f"alice:{generate_password_hash('secret')}\n")
    client = make_client(overrides={"api.auth.basic.file": str(users), "api.kafka.cluster.id": "c"})
    assert client.get("/clusters/other/connectors").status_code == 401
    alice = {"Authorization": "Basic " + base64.b64encode(b"alice:secret").decode()}
    assert_connect_error(client.get("/clusters/other/connectors", headers=alice), 404, "Cluster other not found")
    for path in ("/clusters/other/health", "/clusters/other/no-such-route", "/clusters/connect-cluster/no-such-route"):
        for headers in ({}, alice):  # no route or the public probe: no one was authenticated, no id told
            assert_connect_error(client.get(path, headers=headers), 404, "HTTP 404 Not Found")


def test_the_middleware_moves_the_prefix_to_the_script_name() -> None:
    seen: dict[str, str] = {}

    def app(environ: dict[str, str], start_response: object) -> list[bytes]:
        seen.update({key: environ.get(key, "") for key in ("SCRIPT_NAME", "PATH_INFO", CLUSTER_ENVIRON_KEY)})
        return []

    middleware = ClusterPaths(app)
    for path, expected in [
        ("/clusters/a/connectors/x", ("/clusters/a", "/connectors/x", "a")),
        ("/clusters/a/", ("/clusters/a", "/", "a")),
        ("/clusters/a", ("/clusters/a", "/", "a")),  # the cluster's root, as a worker's
        ("/clusters/", ("", "/clusters/", "")),  # the list's own route
        ("/clusters", ("", "/clusters", "")),
        ("/connectors", ("", "/connectors", "")),
    ]:
        seen.clear()
        middleware({"PATH_INFO": path, "SCRIPT_NAME": ""}, None)
        assert (seen["SCRIPT_NAME"], seen["PATH_INFO"], seen[CLUSTER_ENVIRON_KEY]) == expected, path


def test_the_dashboard_asks_under_the_cluster_it_is_served_for(client: FlaskClient) -> None:
    plain, prefixed = client.get("/ui").get_data(as_text=True), client.get(f"{PREFIX}/ui").get_data(as_text=True)
    assert 'data-base="" data-root="" data-cluster="connect-cluster"' in plain
    assert f'data-base="{PREFIX}" data-root="" data-cluster="connect-cluster"' in prefixed
    behind = client.get(f"{PREFIX}/ui", base_url="http://localhost/tools/cs").get_data(as_text=True)
    assert f'data-base="/tools/cs{PREFIX}" data-root="/tools/cs"' in behind  # mounted under a path of its own
