"""Two real Connect clusters in one deployment (issue 37): the session's worker (the default cluster) and a second
worker group on the same broker (its own ``group.id`` and internal topics), followed by one jobs run and answered by
one API. Connect is the oracle: each cluster's answers under ``/clusters/<id>`` equal that cluster's worker's, a
connector of one is unknown to the other as Connect says, a pause written through one cluster's path is honoured
by that cluster's worker and never by the other's, though both run a connector of that name, and a connector moved
from one cluster to the other is created there STOPPED with the offsets the first worker had, as the second worker
reports them. The fleet's ``connectors`` table, read by Spark, has each cluster's connectors in that cluster's
partition, in the state its own worker reports, the connector of one name in both.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.spark.all_jobs import every_job, select_jobs
from connect_state.spark.streaming import run_catch_up
from connect_state.tables.schemas import CONNECTORS
from tests.fixtures.stack import ExtraWorkerFactory
from tests.integration.helpers import (
    api_client,
    connect_offsets,
    connector_state,
    job_settings,
    source_position,
    unique,
    wait_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

WAIT_S = 90.0


def test_two_connect_clusters_answered_and_written_each_as_its_own_worker(
    spark: SparkSession,
    stack_settings: Settings,
    connect: ConnectRestClient,
    extra_connect_worker: ExtraWorkerFactory,
    created: list[str],
    tmp_path: Path,
) -> None:
    worker = extra_connect_worker()
    billing = worker.client()
    props = worker.properties
    twin, only = unique("twin"), unique("billing-only")
    for client, name, where in ((connect, twin, "default"), (billing, twin, "billing"), (billing, only, "billing")):
        (tmp_path / f"{name}-{where}.txt").touch()
        client.create_connector(name, file_source_config(name, tmp_path / f"{name}-{where}.txt", f"{name}-{where}"))
    created.append(twin)
    for client, name in ((connect, twin), (billing, twin), (billing, only)):
        wait_state(client, name, "RUNNING", 1, WAIT_S)
    # The connector that moves later: records read in the billing cluster, then STOPPED there (its offsets flushed).
    append_lines(tmp_path / f"{only}-billing.txt", ["one", "two", "three"])
    billing.wait_for(lambda: (source_position(billing, only) or 0) > 0, WAIT_S, description=f"{only} offsets")
    assert billing.put(f"/connectors/{only}/stop")[0] == 204
    wait_state(billing, only, "STOPPED", 0, WAIT_S)

    settings = job_settings(stack_settings, tmp_path).with_overrides(
        **{
            "clusters": "billing",
            "clusters.billing.connect.group.id": props["group.id"],
            "clusters.billing.config.storage.topic": props["config.storage.topic"],
            "clusters.billing.offset.storage.topic": props["offset.storage.topic"],
            "clusters.billing.status.storage.topic": props["status.storage.topic"],
            "clusters.billing.connect.rest.url": billing.base_url,
        }
    )
    # One catch-up run follows both clusters' topics, each into its own tables, and lists them in the fleet's.
    jobs = select_jobs(every_job(), "active_topics,connector_states,offsets,fleet_tables")
    assert run_catch_up(jobs, spark, settings) == 0
    assert (tmp_path / "delta" / "clusters" / "billing" / "connectors" / "_delta_log").is_dir()

    # The fleet's table: each worker's connectors in its cluster's partition, in the state that worker reports.
    fleet = spark.read.format("delta").load(str(settings.fleet_delta_root / CONNECTORS.name))
    rows = fleet.where("NOT deleted").select("cluster", "name", "connector_state").collect()
    for cluster_id, client in ((settings.connect_group_id, connect), ("billing", billing)):
        mine = {row["name"]: row["connector_state"] for row in rows if row["cluster"] == cluster_id}
        for name in (twin, only):  # the default's worker has no `only`: None both ways
            assert mine.get(name) == connector_state(client, name)[0], (cluster_id, name)
    billing_rows = sorted(row["name"] for row in rows if row["cluster"] == "billing")
    assert billing_rows == sorted(billing.get("/connectors")[1])  # this test's own worker: every connector

    api = api_client(settings)
    assert [entry["id"] for entry in api.get("/clusters").get_json()] == [settings.connect_group_id, "billing"]

    def ours(path: str) -> tuple[int, object]:
        response = api.get(path)
        return response.status_code, response.get_json()

    def sorted_list(answer: tuple[int, object]) -> tuple[int, object]:
        status, body = answer
        return status, sorted(body) if isinstance(body, list) else body

    assert sorted_list(ours("/clusters/billing/connectors")) == sorted_list(billing.get("/connectors"))
    for name in (twin, only):
        for path in (f"/connectors/{name}/status", f"/connectors/{name}", f"/connectors/{name}/config"):
            assert ours(f"/clusters/billing{path}") == billing.get(path), path
            assert ours(path) == connect.get(path), path  # the default cluster's: Connect's 404 for `only`

    # The fleet: the connector of one name in both clusters, each in the state its own worker reports.
    default_id = settings.connect_group_id
    twins = api.get(f"/fleet/connectors?name={twin}").get_json()["connectors"]
    assert [(entry["cluster"], entry["state"], [task["state"] for task in entry["tasks"]]) for entry in twins] == [
        (default_id, *connector_state(connect, twin)),
        ("billing", *connector_state(billing, twin)),
    ]
    # The plugin version each worker reports in the status (Kafka 4.3+), and the filter on it.
    versions = [(connect.connector_status(twin) or {}).get("connector", {}).get("version"),
                (billing.connector_status(twin) or {}).get("connector", {}).get("version")]  # fmt: skip
    assert [entry["version"] for entry in twins] == versions
    if versions[0] is not None:
        by_version = api.get(f"/fleet/connectors?name={twin}&version={versions[0]}").get_json()["connectors"]
        same = [
            cluster
            for cluster, version in zip((default_id, "billing"), versions, strict=True)
            if version == versions[0]
        ]
        assert [entry["cluster"] for entry in by_version] == same
        assert api.get(f"/fleet/connectors?name={twin}&version=0.0.0-none").get_json()["connectors"] == []
    stopped = api.get("/fleet/connectors?state=STOPPED").get_json()["connectors"]
    assert [(entry["cluster"], entry["name"]) for entry in stopped if entry["name"] in (twin, only)] == [
        ("billing", only)
    ]

    # A write through one cluster's path: that cluster's worker honours it, the other's twin keeps running.
    assert api.put(f"/clusters/billing/connectors/{twin}/pause").status_code == 202  # Connect's Accepted
    wait_state(billing, twin, "PAUSED", 1, WAIT_S)
    assert connector_state(connect, twin) == ("RUNNING", ["RUNNING"])
    # The default cluster's path does not know the billing cluster's connector, as the default worker does not.
    response = api.put(f"/connectors/{only}/pause")
    assert (response.status_code, response.get_json()) == connect.put(f"/connectors/{only}/pause")
    assert connector_state(connect, twin) == ("RUNNING", ["RUNNING"])

    # The billing cluster's STOPPED connector moved to the default cluster: created STOPPED there with the offsets
    # Connect's billing worker has for it, as Connect's default worker then reports them; resumed there on request.
    created.append(only)
    moved = api.post(f"/clusters/billing/connectors/{only}/move?to={default_id}")
    assert moved.status_code == 201, moved.get_json()
    assert [entry["change"] for entry in moved.get_json()["offsets"]] == ["restored"]  # the one file's position
    wait_state(connect, only, "STOPPED", 0, WAIT_S)
    assert connect_offsets(connect, only) == connect_offsets(billing, only)
    assert connector_state(billing, only) == ("STOPPED", [])  # the origin left as it was
    again = api.post(f"/clusters/billing/connectors/{only}/move?to={default_id}")
    assert (again.status_code, again.get_json()["message"]) == (409, f"Connector {only} already exists")
    assert api.put(f"/connectors/{only}/resume").status_code == 202
    wait_state(connect, only, "RUNNING", 1, WAIT_S)
