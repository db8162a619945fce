"""Tables and checkpoints in a bucket of a real S3-compatible server (s3proxy on loopback): every job's catch-up writes
them through Hadoop's S3A, the API reads them through deltalake's object store, and its answers equal the Connect
worker's; a second catch-up finds every checkpoint in the bucket and keeps the tables, and a job whose checkpoint was
removed from the bucket rebuilds its tables from the start of the topics. The fleet's tables (``fleet.tables=on``)
list the bucket's files by their ``s3a://`` paths: Spark and delta-rs read them there, as the cluster's own tables,
before and after the rebuild.

The bucket stands in for a cloud account's (S3, and the same code paths for ABFS and GCS): the jobs never use the
local filesystem for a checkpoint or a table, so a checkpoint that lives only in the bucket is found or not found there.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from connect_state.core.clusters import default_cluster
from connect_state.core.storage import deltalake_options
from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.spark import connector_states, heartbeats, storage
from connect_state.spark.all_jobs import every_job
from connect_state.spark.fleet_sync import FleetTablesJob
from connect_state.spark.storage import configure_storage
from connect_state.spark.streaming import run_catch_up
from connect_state.tables.schemas import ACTIVE_TOPICS, CONNECTORS, SINK_OFFSETS, SOURCE_OFFSETS
from tests.fixtures.s3 import TEST_BUCKET
from tests.integration.helpers import api_client, unique

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

WAIT_S = 90.0
CURRENT_TABLES = (CONNECTORS, ACTIVE_TOPICS, SOURCE_OFFSETS, SINK_OFFSETS)
# The checkpoint directories of the jobs' queries.
CHECKPOINTS = ("active_topics", "connector_states", "source_offsets", "sink_offsets", heartbeats.CHECKPOINT_NAME)
NO_CHECKPOINT = "no checkpoint at"


def assert_answers_like_connect(api, connect, name: str) -> None:
    ours = api.get("/connectors")
    status, theirs = connect.get("/connectors")
    assert (ours.status_code, sorted(ours.get_json())) == (status, sorted(theirs))
    for path in ("status", "offsets", "topics"):
        ours = api.get(f"/connectors/{name}/{path}")
        assert (ours.status_code, ours.get_json()) == connect.get(connect.connector_path(name, path)), path


def test_catch_up_into_a_bucket_answers_like_connect_and_resumes_from_the_buckets_checkpoints(
    spark_on_s3, s3_server, connect, stack_settings, tmp_path, caplog
):
    prefix = unique("catch-up")
    settings = stack_settings.with_overrides(
        **s3_server.storage_settings(TEST_BUCKET, prefix), **{"heartbeat.interval.ms": "600000", "fleet.tables": "on"}
    )
    assert str(settings.delta_root) == f"s3a://{TEST_BUCKET}/{prefix}/delta"
    configure_storage(spark_on_s3, settings)
    name, topic = unique("s3-source"), unique("s3-topic")
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["one", "two", "three"])
    connect.create_connector(name, file_source_config(name, source_file, topic))
    connect.wait_for(
        lambda: connect.get(connect.connector_path(name, "offsets"))[1].get("offsets"),
        WAIT_S,
        description=f"{name} committed offsets",
    )
    connect.wait_for(lambda: connect.active_topics(name) == {topic}, WAIT_S, description=f"{name} active topics")

    caplog.set_level(logging.INFO, logger="connect_state")
    assert not any(storage.exists(spark_on_s3, settings.checkpoint_path(query)) for query in CHECKPOINTS)
    assert run_catch_up(every_job(hooks={}), spark_on_s3, settings) == 0

    checkpoints = {key.split("/")[2] for key in s3_server.list_keys(TEST_BUCKET, f"{prefix}/checkpoints/")}
    assert set(CHECKPOINTS) <= checkpoints
    assert all(storage.exists(spark_on_s3, settings.checkpoint_path(query)) for query in checkpoints)
    assert f"{prefix}/delta/connectors/_delta_log/00000000000000000000.json" in s3_server.list_keys(
        TEST_BUCKET, f"{prefix}/delta/connectors/_delta_log/"
    )
    api = api_client(settings)  # deltalake, with the storage options of the settings and the credentials of the env
    assert_answers_like_connect(api, connect, name)
    options = deltalake_options(settings)
    before = {spec.name: table_rows(settings.table_path(spec.name), options) for spec in CURRENT_TABLES}
    assert any(row["name"] == name for row in before[CONNECTORS.name])
    assert_fleet_is_the_clusters_own(spark_on_s3, settings, options)

    # The tables exist now: a job that did not find its checkpoint in the bucket would log it and empty them.
    caplog.clear()
    assert run_catch_up(every_job(hooks={}), spark_on_s3, settings) == 0
    assert NO_CHECKPOINT not in caplog.text, "a checkpoint in the bucket was not found: the tables were rebuilt"
    after = {spec.name: table_rows(settings.table_path(spec.name), options) for spec in CURRENT_TABLES}
    # The shared worker goes on writing for other tests' connectors between the runs: this connector's rows are fixed.
    assert set(own_rows(before, name)) == set(OWNER_COLUMNS)  # a row in each
    assert own_rows(after, name) == own_rows(before, name)
    assert_answers_like_connect(api_client(settings), connect, name)

    # And the converse: the checkpoint removed from the bucket, the job sees it gone and rebuilds its tables.
    checkpoint = settings.checkpoint_path(connector_states.JOB.name)
    assert storage.delete(spark_on_s3, checkpoint) and not s3_server.list_keys(
        TEST_BUCKET, f"{prefix}/checkpoints/connector_states/"
    )
    caplog.clear()
    assert run_catch_up([connector_states.JOB], spark_on_s3, settings) == 0
    assert f"{NO_CHECKPOINT} {checkpoint}: rebuilding {CONNECTORS.name}" in caplog.text
    rebuilt = table_rows(settings.table_path(CONNECTORS.name), options)
    assert without_updated_at(rebuilt) == without_updated_at(before[CONNECTORS.name])
    assert run_catch_up([FleetTablesJob()], spark_on_s3, settings) == 0  # the rebuilt table's files replace the old
    assert_fleet_is_the_clusters_own(spark_on_s3, settings, options)
    assert_answers_like_connect(api_client(settings), connect, name)
    connect.delete_connector(name)


OWNER_COLUMNS = {CONNECTORS.name: "name", ACTIVE_TOPICS.name: "connector", SOURCE_OFFSETS.name: "connector"}


def own_rows(tables: dict[str, list[dict]], name: str) -> dict[str, list[dict]]:
    """The rows of connector ``name`` in each table that has a connector column (not empty ones)."""
    own = {table: [row for row in tables[table] if row[column] == name] for table, column in OWNER_COLUMNS.items()}
    return {table: rows for table, rows in own.items() if rows}


def assert_fleet_is_the_clusters_own(spark, settings, options: dict[str, str]) -> None:
    """Each current table's fleet table, read by delta-rs (QueryBuilder) and by Spark from the bucket, holds the
    cluster's own table's rows, each with the cluster's id."""
    cluster = default_cluster(settings).id
    for spec in CURRENT_TABLES:
        own = table_rows(settings.table_path(spec.name), options)
        fleet = DeltaTable(str(settings.fleet_delta_root / spec.name), storage_options=options)
        read = pa.table(QueryBuilder().register("f", fleet).execute("SELECT * FROM f").read_all()).to_pylist()
        assert {row.pop("cluster") for row in read} <= {cluster}
        assert sorted(read, key=repr) == own, spec.name
        frame = spark.read.format("delta").load(str(settings.fleet_delta_root / spec.name))
        key = spec.key[0]  # Spark reads the s3a:// files themselves (a count alone comes from the log's row counts)
        by_spark = sorted(row[key] for row in frame.where(f"cluster = '{cluster}'").select(key).collect())
        assert by_spark == sorted(row[key] for row in own), spec.name


def table_rows(uri: object, options: dict[str, str]) -> list[dict]:
    rows = DeltaTable(str(uri), storage_options=options).to_pyarrow_table().to_pylist()
    return sorted(rows, key=repr)


def without_updated_at(rows: list[dict]) -> list[dict]:
    return sorted(({k: v for k, v in row.items() if k != "updated_at"} for row in rows), key=repr)
