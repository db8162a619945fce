"""Several Connect clusters in one deployment (issue 37): the settings of each (connect_state/core/clusters.py), the
API answering each from its own tables and writing to its own topics (api/resources.py, api/clusters.py), and a
jobs driver running every job for each (connect_state/spark/streaming.py). Against two real Connect clusters:
``tests/integration/test_several_clusters_connect.py``.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from flask import Response
from flask.testing import FlaskClient
from werkzeug.security import generate_password_hash

from connect_state.api import create_app
from connect_state.api.audit import refusal_key
from connect_state.api.resources import CLUSTER_ENVIRON_KEY, AppResources
from connect_state.core.clusters import clusters
from connect_state.core.errors import ConfigError, KafkaUnavailableError
from connect_state.core.settings import Settings, load_settings
from connect_state.spark import streaming
from connect_state.tables.schemas import ACTIVE_TOPICS, CONNECTORS, SOURCE_OFFSETS
from tests.unit.fakes import InMemoryTopics, RecordingWriter
from tests.unit.helpers import assert_connect_error, assert_no_content, mirror_connectors, write_table
from tests.unit.test_api_connectors import ROWS
from tests.unit.test_api_offsets import source_row

POSITION = '{"filename":"/tmp/in.txt"}'


def active_topic(connector: str, topic: str) -> dict[str, Any]:
    """An ``active_topics`` row (KIP-558)."""
    return {"connector": connector, "topic": topic, "task": 0, "discover_timestamp": 1, "updated_at": None}


BILLING = {
    "clusters": "billing",
    "clusters.billing.connect.group.id": "connect-billing",
    "clusters.billing.status.storage.topic": "billing-status",
    "clusters.billing.config.storage.topic": "billing-configs",
    "clusters.billing.offset.storage.topic": "billing-offsets",
}


def test_a_further_cluster_has_the_deployments_settings_but_its_own(settings: Settings) -> None:
    two = settings.with_overrides(**BILLING, **{"clusters.billing.bootstrap.servers": "kafka-b:9092"})
    default, billing = clusters(two)
    assert (default.id, default.default, default.settings) == ("connect-cluster", True, two)
    assert (billing.id, billing.default, billing.group_id, billing.bootstrap_servers) == (
        "billing",
        False,
        "connect-billing",
        "kafka-b:9092",
    )
    own = billing.settings
    assert (own.status_storage_topic, own.config_storage_topic, own.offset_storage_topic) == (
        "billing-status",
        "billing-configs",
        "billing-offsets",
    )
    assert own.delta_root.uri == (two.delta_root / "clusters" / "billing").uri
    assert own.checkpoint_root.uri == (two.checkpoint_root / "clusters" / "billing").uri
    assert (own.cluster_id, own.clusters) == ("billing", "")
    assert own.api_port == two.api_port and own.trigger_interval == two.trigger_interval  # the deployment's


def test_each_query_of_the_jobs_driver_names_its_cluster_in_its_metrics(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fold job's query task carries the cluster the driver's metrics label its query with: each cluster's id with
    several clusters, none (no label) for a one-cluster deployment without ``cluster.id``."""
    from connect_state.spark import active_topics
    from connect_state.spark.foldjob import FoldJob

    monkeypatch.setattr(FoldJob, "start_query", lambda *_args, **_kwargs: _StartedQuery())
    default, billing = clusters(settings.with_overrides(**BILLING))

    named = {c.id: active_topics.JOB.start(None, c.settings, True, None).tasks[0].cluster for c in (default, billing)}
    [alone] = active_topics.JOB.start(None, settings, True, None).tasks  # type: ignore[arg-type]

    assert named == {"connect-cluster": "connect-cluster", "billing": "billing"}
    assert alone.cluster is None


class _StartedQuery:
    name, id = "active_topics", "q"


def test_a_one_cluster_deployment_is_unchanged(settings: Settings) -> None:
    [default] = clusters(settings)
    assert default.settings == settings and default.settings.delta_root == settings.delta_root


def test_cluster_keys_come_from_the_file_and_set_flags_and_other_keys_are_refused(tmp_path: Any) -> None:
    conf = tmp_path / "two.properties"
    conf.write_text("clusters=eu.west\nclusters.eu.west.bootstrap.servers=kafka-eu:9092\n")
    loaded = load_settings(conf, ["clusters.eu.west.connect.group.id=connect-eu"], environ={})
    [_, eu] = clusters(loaded)
    assert (eu.id, eu.bootstrap_servers, eu.group_id) == ("eu.west", "kafka-eu:9092", "connect-eu")
    with pytest.raises(ConfigError, match=r"unknown setting 'clusters\.eu\.api\.port' in --set .* clusters\.<id>"):
        load_settings(None, ["clusters=eu", "clusters.eu.api.port=1"], environ={})


def test_a_further_clusters_references_resolve_from_the_environment_the_settings_were_loaded_with() -> None:
    """``${env:...}`` in a further cluster's keys: from the environment given to ``load_settings`` (the process's by
    default), as the default cluster's are, also in settings derived from them."""
    environ = {"EU_GROUP": "connect-eu", "EU_KAFKA": "kafka-eu:9092"}
    overrides = {
        "clusters": "eu",
        "clusters.eu.connect.group.id": "${env:EU_GROUP}",
        "clusters.eu.bootstrap.servers": "${env:EU_KAFKA}",
    }
    loaded = load_settings(overrides=overrides, environ=environ)

    for settings in (loaded, loaded.with_overrides(**{"api.port": "0"})):
        [_, eu] = clusters(settings)
        assert (eu.group_id, eu.bootstrap_servers) == ("connect-eu", "kafka-eu:9092")
    with pytest.raises(ConfigError, match="environment variable EU_GROUP is not set"):
        clusters(load_settings(overrides=overrides, environ={"EU_KAFKA": "kafka-eu:9092"}))
    environ["EU_GROUP"] = "changed later"  # the settings keep a copy of the mapping they were given
    assert clusters(loaded)[1].group_id == "connect-eu"
    assert pickle.loads(pickle.dumps(loaded)).environ == loaded.environ  # into Spark's closures
    assert load_settings(environ=os.environ).environ is None  # the process's is not copied into the settings


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"clusters": "a/b"}, r"clusters: a cluster id is 1 to 128"),
        ({"clusters": "connect-cluster"}, r"'connect-cluster' is named twice"),
        ({"clusters": "b,b", "clusters.b.connect.group.id": "g"}, r"'b' is named twice"),
        ({"clusters.x.connect.group.id": "g"}, r"clusters\.x\.connect\.group\.id: 'x' is not one of clusters"),
        ({"clusters": "b"}, r"'b' has the same bootstrap\.servers, connect\.group\.id and status\.storage\.topic"),
        ({"clusters": "b", "clusters.b.exactly.once.source.support": "x"}, r"cluster b: exactly\.once\.source"),
    ],
)
def test_a_bad_cluster_list_is_refused_at_start(settings: Settings, overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        create_app(settings.with_overrides(**overrides), writer=RecordingWriter())


# --- The API: each cluster from its own tables, to its own topics ---------------------------------------------------


@dataclass
class Billing:
    client: FlaskClient
    writer: RecordingWriter  # the billing cluster's
    default_writer: RecordingWriter
    settings: Settings  # the billing cluster's
    topics: InMemoryTopics = field(default_factory=InMemoryTopics)


MakeBilling = Callable[..., Billing]


@pytest.fixture
def make_billing(settings: Settings, kafka_log: InMemoryTopics, writer: RecordingWriter) -> MakeBilling:
    """``make_billing(overrides)``: the default cluster and the billing cluster, each with its tables and topics."""

    def make(overrides: dict[str, str] | None = None) -> Billing:
        two = settings.with_overrides(**{**BILLING, "api.kafka.cluster.id": "kafka-1", **(overrides or {})})
        return _billing(two, settings, kafka_log, writer)

    return make


@pytest.fixture
def billing(make_billing: MakeBilling) -> Billing:
    return make_billing()


def _billing(two: Settings, settings: Settings, kafka_log: InMemoryTopics, writer: RecordingWriter) -> Billing:
    own = clusters(two)[1].settings
    rows = [
        dict(row, config=json.dumps({**json.loads(row["config"]), "file": "/tmp/in.txt"}))
        if row["name"] == "stopped"
        else row
        for row in ROWS
    ]
    mine = [row for row in rows if row["name"] in ("foo-source", "stopped")]
    write_table(settings.delta_root, CONNECTORS, rows)
    mirror_connectors(kafka_log, rows)
    theirs = [dict(row, name="billing-" + row["name"]) for row in mine]
    write_table(own.delta_root, CONNECTORS, theirs)
    write_table(settings.delta_root, SOURCE_OFFSETS, [source_row("stopped", POSITION, b'{"position":42}')])
    write_table(own.delta_root, SOURCE_OFFSETS, [])
    topics = InMemoryTopics()
    mirror_connectors(topics, theirs, topic="billing-configs")
    billing_writer = RecordingWriter()
    app = create_app(
        two,
        writer=writer,
        topics=kafka_log,
        cluster_resources={"billing": AppResources(own, writer=billing_writer, topics=topics)},
    )
    app.testing = True
    return Billing(app.test_client(), billing_writer, writer, own, topics)


def test_each_cluster_answers_from_its_own_tables(billing: Billing) -> None:
    default = billing.client.get("/connectors").get_json()
    theirs = billing.client.get("/clusters/billing/connectors").get_json()
    assert sorted(theirs) == ["billing-foo-source", "billing-stopped"]
    assert "billing-foo-source" not in default and "foo-source" in default
    assert billing.client.get("/clusters/connect-cluster/connectors").get_json() == default
    assert_connect_error(
        billing.client.get("/clusters/billing/connectors/foo-source/status"),
        404,
        "No status found for connector foo-source",
    )
    status = billing.client.get("/clusters/billing/connectors/billing-foo-source/status")
    assert status.status_code == 200 and status.get_json()["name"] == "billing-foo-source"


def test_a_write_goes_to_its_clusters_topics_only(billing: Billing) -> None:
    assert_no_content(billing.client.put("/clusters/billing/connectors/billing-foo-source/stop"), 204)
    [(topic, *_)] = billing.writer.sends
    assert topic == "billing-configs" and not billing.default_writer.sends
    # The default cluster's path does not know the billing cluster's connector: Connect's 404, nothing written.
    assert_connect_error(
        billing.client.put("/connectors/billing-foo-source/stop"), 404, "Unknown connector billing-foo-source"
    )
    assert not billing.default_writer.sends and len(billing.writer.sends) == 1


def test_clusters_lists_each_with_its_own_health(billing: Billing) -> None:
    listed = {entry["id"]: entry for entry in billing.client.get("/clusters").get_json()}
    assert list(listed) == ["connect-cluster", "billing"]
    assert (listed["billing"]["default"], listed["billing"]["group.id"]) == (False, "connect-billing")
    assert listed["billing"]["status.storage.topic"] == "billing-status"
    assert listed["billing"]["health"]["status"] == billing.client.get("/clusters/billing/health").get_json()["status"]


# --- The jobs: every job for each cluster --------------------------------------------------------------------------


@dataclass
class RecordedJob:
    name: str
    fail_for: str | None = None
    started: list[tuple[str, str]] = field(default_factory=list)  # (the cluster's delta root, its status topic)

    def check(self, settings: Settings) -> None:
        pass

    def start(self, spark: Any, settings: Settings, available_now: bool, max_offsets: int | None) -> streaming.Run:
        self.started.append((settings.delta_root.uri, settings.status_storage_topic))
        if settings.cluster_id == self.fail_for:
            raise RuntimeError("boom")
        return streaming.Run(tasks=[])


def test_a_catch_up_runs_every_job_for_each_cluster_and_a_failure_stops_no_other(settings: Settings) -> None:
    two = settings.with_overrides(**BILLING)
    folds, cleanup = RecordedJob("folds", fail_for="billing"), RecordedJob("cleanup")
    assert streaming.run_catch_up([folds, cleanup], None, two) == 1  # type: ignore[arg-type]
    billing_root = (two.delta_root / "clusters" / "billing").uri
    expected = [(two.delta_root.uri, "connect-status"), (billing_root, "billing-status")]
    assert folds.started == expected and cleanup.started == expected


def test_a_continuous_driver_supervises_each_clusters_jobs_under_its_own_name(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streaming, "cloned_session", lambda spark: spark)
    supervisors: list[streaming.Supervisor] = []
    stop = threading.Event()
    stop.set()
    job = RecordedJob("folds")
    streaming.run_continuous([job], None, settings.with_overrides(**BILLING), stop=stop, supervisors=supervisors)  # type: ignore[arg-type]
    states = supervisors[0].state()
    assert {name: state.cluster for name, state in states.items()} == {
        "billing/folds": "billing",
        "connect-cluster/folds": "connect-cluster",
    }
    assert len(job.started) == 2
    assert streaming.query_name(clusters(settings.with_overrides(**BILLING))[1].settings, "folds") == "billing/folds"
    assert streaming.query_name(settings, "folds") == "folds"


# --- Moving a connector between clusters ---------------------------------------------------------------------------


def test_a_stopped_connector_moves_to_the_other_cluster_created_stopped_there(billing: Billing) -> None:
    response = billing.client.post("/connectors/stopped/move?to=billing")
    assert response.status_code == 201, response.get_json()
    body = response.get_json()
    assert (body["name"], body["from"], body["to"], body["initial_state"]) == (
        "stopped",
        "connect-cluster",
        "billing",
        "STOPPED",
    )
    assert "PUT /clusters/billing/connectors/stopped/resume" in body["message"]
    assert body["offsets"] == [
        {"partition": {"filename": "/tmp/in.txt"}, "before": None, "offset": {"position": 42}, "change": "restored"}
    ]
    assert not billing.default_writer.sends  # the origin is left as it is
    [(config_topic, configs, *_), (offsets_topic, offsets, *_)] = billing.writer.sends
    assert config_topic == "billing-configs"
    assert [key for key, _value in configs] == [b"target-state-stopped", b"connector-stopped"]
    assert b'"state.v2":"STOPPED"' in configs[0][1]  # as Connect writes STOPPED
    assert (offsets_topic, offsets) == (
        "billing-offsets",
        [(b'["stopped",' + POSITION.encode() + b"]", b'{"position":42}')],
    )


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/connectors/stopped/move", 400, "Missing query parameter 'to'"),
        ("/connectors/stopped/move?to=connect-cluster", 400, "Cannot move a connector to its own cluster"),
        ("/connectors/stopped/move?to=nowhere", 404, "Cluster nowhere not found"),
        ("/connectors/no-such/move?to=billing", 404, "Connector no-such not found"),
        ("/connectors/foo-source/move?to=billing", 409, "it must be STOPPED there first"),
    ],
)
def test_a_move_that_cannot_be_is_refused_and_writes_nothing(
    billing: Billing, path: str, status: int, message: str
) -> None:
    response = billing.client.post(path)
    assert response.status_code == status and message in response.get_json()["message"], response.get_json()
    assert not billing.writer.sends and not billing.default_writer.sends


def test_a_source_whose_offsets_cannot_all_be_read_is_not_moved(billing: Billing, settings: Settings) -> None:
    """Connect's GET /offsets leaves out an offset value it cannot read; moved without it, the copy would start that
    partition over: 409 naming it, nothing written."""
    rows = [
        source_row("stopped", POSITION, b'{"position":42}'),
        source_row("stopped", '{"filename":"/tmp/b.txt"}', b"{"),
    ]
    write_table(settings.delta_root, SOURCE_OFFSETS, rows, mode="overwrite")
    response = billing.client.post("/connectors/stopped/move?to=billing")
    message = response.get_json()["message"]
    assert response.status_code == 409, message
    assert message.startswith("Cannot move connector stopped: the offsets of 1 source partition(s) cannot be read (")
    assert '{"filename": "/tmp/b.txt"}' in message and message.endswith("Nothing was written.")
    assert not billing.writer.sends and not billing.default_writer.sends


def test_a_move_to_a_cluster_that_has_the_name_answers_connects_409(
    billing: Billing, kafka_log: InMemoryTopics
) -> None:
    mirror_connectors(kafka_log, [dict(ROWS[2], name="billing-stopped")])  # the default cluster has it too
    assert_connect_error(
        billing.client.post("/clusters/billing/connectors/billing-stopped/move?to=connect-cluster"),
        409,
        "Connector billing-stopped already exists",
    )
    assert not billing.writer.sends and not billing.default_writer.sends


# --- The fleet: every cluster at once ------------------------------------------------------------------------------


def fleet(client: FlaskClient, query: str = "") -> list[tuple[str, str]]:
    response = client.get(f"/fleet/connectors{query}")
    assert response.status_code == 200, response.get_json()
    return [(entry["cluster"], entry["name"]) for entry in response.get_json()["connectors"]]


def test_the_fleet_lists_every_clusters_connectors_and_filters_them(billing: Billing) -> None:
    every = fleet(billing.client)
    assert [entry for entry in every if entry[0] == "billing"] == [
        ("billing", "billing-foo-source"),
        ("billing", "billing-stopped"),
    ]
    # the default cluster's configured connectors (not the status-only one, not the deleted one), by name
    assert [name for cluster, name in every if cluster == "connect-cluster"] == [
        "bar-sink",
        "foo-source",
        "no-status",
        "stopped",
    ]
    assert fleet(billing.client, "?state=stopped") == [("connect-cluster", "stopped"), ("billing", "billing-stopped")]
    assert fleet(billing.client, "?name=billing-stopped") == [("billing", "billing-stopped")]
    assert fleet(billing.client, "?verdict=UNKNOWN&name=stopped") == [("connect-cluster", "stopped")]
    write_table(billing.settings.delta_root, ACTIVE_TOPICS, [active_topic("billing-foo-source", "orders")])
    assert fleet(billing.client, "?topic=orders") == [("billing", "billing-foo-source")]
    [entry] = billing.client.get("/fleet/connectors?topic=orders").get_json()["connectors"]
    status = billing.client.get("/clusters/billing/connectors/billing-foo-source/status").get_json()
    assert entry["state"] == status["connector"]["state"]
    assert entry["tasks"] == [{"id": task["id"], "state": task["state"]} for task in status["tasks"]]
    assert entry["version"] == status["connector"]["version"] == "4.3.1"
    assert fleet(billing.client, "?version=4.3.1&name=billing-foo-source") == [("billing", "billing-foo-source")]
    assert fleet(billing.client, "?version=9.9.9") == []
    [bar] = billing.client.get("/fleet/connectors?name=bar-sink").get_json()["connectors"]
    assert bar["version"] is None and "version" not in billing.client.get("/connectors/bar-sink/status").get_json()[
        "connector"]  # fmt: skip
    assert fleet(billing.client, "?version=undefined") == []  # "undefined" is no version, as Connect leaves it out


def test_the_fleet_refuses_an_unknown_state_and_names_a_cluster_it_cannot_read(
    billing: Billing, settings: Settings, writer: RecordingWriter, kafka_log: InMemoryTopics
) -> None:
    response = billing.client.get("/fleet/connectors?state=asleep")
    assert response.status_code == 400 and "unknown connector state 'asleep'" in response.get_json()["message"]
    three = settings.with_overrides(
        **{**BILLING, "clusters": "billing,empty", "clusters.empty.connect.group.id": "connect-empty"}
    )
    app = create_app(three, writer=writer, topics=kafka_log)
    answer = app.test_client().get("/fleet/connectors").get_json()
    assert [entry["cluster"] for entry in answer["unavailable"]] == ["empty"]
    assert "connectors" in answer["unavailable"][0]["message"]
    assert {cluster for cluster, _name in fleet(app.test_client())} == {"connect-cluster", "billing"}


# --- Roles per cluster ---------------------------------------------------------------------------------------------


def basic(user: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:secret".encode()).decode()}


@pytest.fixture
def guarded(make_billing: MakeBilling, tmp_path: Path) -> Billing:
    users = tmp_path / "users"
    users.write_text("".join(f"{user}:{generate_password_hash('secret')}\n" for user in ("bob", "carol", "dave")))
    roles = tmp_path / "roles"
    roles.write_text("bob: billing/operate\ncarol: billing/read\ndave: connect-cluster/admin billing/read\n")
    return make_billing({"api.auth.basic.file": str(users), "api.auth.roles.file": str(roles)})


def test_a_grant_of_one_cluster_holds_there_only(guarded: Billing) -> None:
    client = guarded.client
    assert client.put("/clusters/billing/connectors/billing-foo-source/stop", headers=basic("bob")).status_code == 204
    assert_connect_error(
        client.put("/connectors/foo-source/stop", headers=basic("bob")),
        403,
        "bob may not PUT /connectors/foo-source/stop: it needs the role operate on connector foo-source",
    )
    assert not guarded.default_writer.sends and len(guarded.writer.sends) == 1


def test_the_routes_over_every_cluster_answer_for_the_clusters_granted(guarded: Billing) -> None:
    carol = basic("carol")
    assert [entry["id"] for entry in guarded.client.get("/clusters", headers=carol).get_json()] == ["billing"]
    listed = guarded.client.get("/fleet/connectors", headers=carol).get_json()["connectors"]
    assert {entry["cluster"] for entry in listed} == {"billing"}
    assert guarded.client.get("/connectors", headers=carol).status_code == 403
    assert guarded.client.get("/fleet/connectors", headers=basic("bob")).status_code == 403  # operate: no read


def test_a_move_needs_admin_in_the_target_cluster_too(guarded: Billing) -> None:
    assert_connect_error(
        guarded.client.post("/connectors/stopped/move?to=billing", headers=basic("dave")),
        403,
        "dave may not POST /connectors/stopped/move: it needs the role admin on connector stopped in cluster billing",
    )
    assert not guarded.writer.sends and not guarded.default_writer.sends


def test_a_grant_in_an_unknown_cluster_is_refused_at_start(settings: Settings, tmp_path: Path) -> None:
    roles = tmp_path / "roles"
    roles.write_text("bob: biling/operate\n")
    users = tmp_path / "users"
    users.write_text(f"bob:{generate_password_hash('secret')}\n")
    overrides = {**BILLING, "api.auth.basic.file": str(users), "api.auth.roles.file": str(roles)}
    with pytest.raises(ConfigError, match=r"line 1: unknown cluster 'biling' in 'biling/operate' \(clusters: "):
        create_app(settings.with_overrides(**overrides), writer=RecordingWriter())


def test_clusters_names_a_cluster_whose_kafka_is_away_and_answers_the_others(billing: Billing) -> None:
    billing.topics.fail = KafkaUnavailableError("cannot reach Kafka")
    listed = {entry["id"]: entry["health"]["kafka"] for entry in billing.client.get("/clusters").get_json()}
    assert listed == {
        "connect-cluster": {"reachable": True, "message": None},
        "billing": {"reachable": False, "message": "cannot reach Kafka"},
    }
    assert billing.client.get("/connectors/foo-source/status").status_code == 200
    refused = billing.client.put("/clusters/billing/connectors/billing-foo-source/stop")
    assert refused.status_code == 503 and "cannot reach Kafka" in refused.get_json()["message"]
    assert not billing.writer.sends


def test_clusters_asks_every_clusters_kafka_at_once(billing: Billing, kafka_log: InMemoryTopics) -> None:
    """Each cluster's first offsets request waits for the other's (a barrier of two): asked one after the other, the
    first would wait alone and its Kafka be reported unreachable."""
    barrier = threading.Barrier(2, timeout=10)

    def meet_once() -> Callable[[Any], Exception | None]:
        met: list[bool] = []

        def fail(_topics: Any) -> Exception | None:
            if met:
                return None
            met.append(True)
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                return KafkaUnavailableError("asked alone: the other cluster's Kafka was not asked meanwhile")
            return None

        return fail

    kafka_log.fail, billing.topics.fail = meet_once(), meet_once()
    listed = {entry["id"]: entry["health"]["kafka"] for entry in billing.client.get("/clusters").get_json()}
    assert listed == {
        "connect-cluster": {"reachable": True, "message": None},
        "billing": {"reachable": True, "message": None},
    }


def test_refusals_under_two_clusters_are_not_alike(billing: Billing) -> None:
    """The audit's refusal sampler summarises alike refusals: one cluster's do not hide another's."""
    app = billing.client.application
    keys = []
    for environ in ({}, {CLUSTER_ENVIRON_KEY: "billing"}):
        with app.test_request_context("/connectors/x/stop", method="PUT", environ_base=environ):
            keys.append(refusal_key(Response(status=403)))
    assert keys[0] != keys[1] and (keys[0].cluster, keys[1].cluster) == (None, "billing")


def test_the_routes_of_the_whole_deployment_need_their_role_in_every_cluster(guarded: Billing) -> None:
    """The audit holds every cluster's writes and the metrics every cluster's requests: admin (read) in one cluster
    is not enough."""
    assert guarded.client.get("/audit", headers=basic("dave")).status_code == 403  # admin in the default only
    assert guarded.client.get("/clusters/billing/metrics", headers=basic("carol")).status_code == 403  # billing's


def test_a_cluster_on_another_kafka_takes_neither_its_credentials_nor_its_id_from_the_default(
    settings: Settings,
) -> None:
    base = settings.with_overrides(
        **{
            "kafka.client.properties": "security.protocol=SASL_SSL,sasl.mechanism=PLAIN",
            "api.kafka.cluster.id": "default-kafka",
            "clusters": "eu,billing",
            "clusters.eu.bootstrap.servers": "kafka-eu:9092",
            "clusters.billing.connect.group.id": "connect-billing",
            "clusters.billing.status.storage.topic": "billing-status",
        }
    )
    _, eu, billing = clusters(base)
    assert (eu.settings.kafka_client_properties, eu.settings.api_kafka_cluster_id) == ({}, "")
    assert billing.settings.kafka_client_properties == base.kafka_client_properties  # the same Kafka: its clients'
    assert billing.settings.api_kafka_cluster_id == ""


class _Receiver(BaseHTTPRequestHandler):
    """A loopback webhook and Alertmanager receiver: every POSTed JSON body, by path."""

    got: list[tuple[str, Any]]

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        self.got.append((self.path, json.loads(self.rfile.read(length))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_the_alerts_of_a_connector_named_alike_in_two_clusters_name_their_cluster(
    settings: Settings, tmp_path: Path
) -> None:
    """Each cluster's alerts job (as the driver builds it) sends its own alert for ``orders``, labelled with its
    cluster, and links it where that cluster's alerts are; a one-cluster deployment's notifications have no label."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from connect_state.spark.alerts import alerts_reconciler
    from connect_state.tables.schemas import now_ms

    received: list[tuple[str, Any]] = []
    handler = type("Receiver", (_Receiver,), {"got": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        two = settings.with_overrides(
            **BILLING,
            **{
                "alerts.channels": f"hook=webhook:{base}/hook,am=alertmanager:{base}",
                "alerts.generator.url": "http://ui",
            },
        )
        verdict_schema = pa.schema(
            [("connector", pa.string()), ("verdict", pa.string()), ("since", pa.timestamp("ms", tz="UTC")),
             ("evidence", pa.string())]
        )  # fmt: skip
        failed = [{"connector": "orders", "verdict": "failed", "since": now_ms() - 600_000, "evidence": "{}"}]
        for cluster in clusters(two):
            table = str(cluster.settings.table_path("connector_verdicts"))
            write_deltalake(table, pa.Table.from_pylist(failed, schema=verdict_schema))
            alerts_reconciler(cluster.settings).run_pass()
        hooks = [body for path, body in received if path == "/hook"]
        assert sorted((b["cluster"], b["connector"], b["url"].split("?")[0]) for b in hooks) == [
            ("billing", "orders", "http://ui/clusters/billing/alerts"),
            ("connect-cluster", "orders", "http://ui/clusters/connect-cluster/alerts"),
        ]
        managed = [body[0]["labels"] for path, body in received if path == "/api/v2/alerts"]
        assert sorted((labels["connect_cluster"], labels["connector"]) for labels in managed) == [
            ("billing", "orders"),
            ("connect-cluster", "orders"),
        ]
        received.clear()
        alone = settings.with_overrides(
            **{"alerts.channels": f"hook=webhook:{base}/hook", "alerts.generator.url": "http://ui",
               "delta.root": str(tmp_path / "alone")}
        )  # fmt: skip
        write_deltalake(
            str(alone.table_path("connector_verdicts")), pa.Table.from_pylist(failed, schema=verdict_schema)
        )
        alerts_reconciler(alone).run_pass()
        [(_, body)] = received
        assert "cluster" not in body and body["url"].startswith("http://ui/alerts?id=")
    finally:
        server.shutdown()


def test_metrics_label_each_clusters_series_with_its_cluster(billing: Billing, settings: Settings) -> None:
    """``/metrics`` (and ``/clusters/<id>/metrics``, the same deployment-wide scrape) measures every cluster: a
    connector of one name in two clusters has a verdict series in each, and each table's lag one per cluster."""
    from prometheus_client.parser import text_string_to_metric_families

    from connect_state.tables.schemas import CONNECTOR_VERDICTS

    def verdict(name: str, value: str) -> dict[str, Any]:
        return {"connector": name, "type": "source", "verdict": value, "since": None, "evidence": "{}", "tasks": "{}",
                "thresholds": "{}", "updated": None}  # fmt: skip

    write_table(settings.delta_root, CONNECTOR_VERDICTS, [verdict("orders", "healthy")])
    write_table(billing.settings.delta_root, CONNECTOR_VERDICTS, [verdict("orders", "failed")])
    for path in ("/metrics", "/clusters/billing/metrics"):
        scrape = billing.client.get(path)
        assert scrape.status_code == 200, scrape.get_data(as_text=True)
        families = {f.name: f for f in text_string_to_metric_families(scrape.get_data(as_text=True))}
        current = sorted(
            (s.labels["connect_cluster"], s.labels["connector"], s.labels["verdict"])
            for s in families["connect_state_connector_verdict"].samples
            if s.value == 1
        )
        assert current == [("billing", "orders", "failed"), ("connect-cluster", "orders", "healthy")]
        lag_family = families["connect_state_table_lag_seconds"]
        lagged = {(s.labels["connect_cluster"], s.labels["table"]) for s in lag_family.samples}
        assert ("billing", "connectors") in lagged and ("connect-cluster", "connectors") in lagged


def test_a_cluster_that_cannot_be_measured_keeps_its_series_and_the_others_are_answered(
    billing: Billing, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from connect_state.api.resources import every_resources
    from connect_state.core.errors import ConnectStateError
    from connect_state.tables.schemas import CONNECTOR_VERDICTS

    def verdict(name: str, value: str) -> dict[str, Any]:
        return {"connector": name, "type": "source", "verdict": value, "evidence": "{}", "tasks": "{}",
                "thresholds": "{}"}  # fmt: skip

    def current() -> list[tuple[str, str, str]]:
        text = billing.client.get("/metrics").get_data(as_text=True)
        families = {f.name: f for f in text_string_to_metric_families(text)}
        samples = families["connect_state_connector_verdict"].samples
        return sorted((s.labels["connect_cluster"], s.labels["connector"], s.labels["verdict"]) for s in samples
                      if s.value == 1)  # fmt: skip

    write_table(settings.delta_root, CONNECTOR_VERDICTS, [verdict("orders", "healthy"), verdict("gone", "idle")])
    write_table(billing.settings.delta_root, CONNECTOR_VERDICTS, [verdict("orders", "failed")])
    assert current() == [("billing", "orders", "failed"), ("connect-cluster", "gone", "idle"),
                         ("connect-cluster", "orders", "healthy")]  # fmt: skip

    class Unreadable:
        def rows(self, *_args: Any, **_kwargs: Any) -> Any:
            raise ConnectStateError("storage away")

        def derived(self, *_args: Any, **_kwargs: Any) -> Any:
            raise ConnectStateError("storage away")

    with billing.client.application.app_context():
        monkeypatch.setattr(every_resources()["billing"], "tables", Unreadable())
    write_table(settings.delta_root, CONNECTOR_VERDICTS, [verdict("orders", "stalled")], mode="overwrite")
    assert current() == [("billing", "orders", "failed"), ("connect-cluster", "orders", "stalled")]


def test_a_one_cluster_deployments_metrics_have_no_cluster_label(make_client: Any) -> None:
    scrape = make_client().get("/metrics").get_data(as_text=True)
    assert "connect_state_table_lag_seconds{table=" in scrape and 'connect_cluster="' not in scrape
