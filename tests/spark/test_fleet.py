"""One DataFrame over every cluster's tables (connect_state/spark/fleet.py, issue 37), and the ``fleet_<table>`` views
SQL over the fleet uses: Spark reading the fleet's tables the jobs keep (each cluster's partition listing its own
table's files, connect_state/tables/fleet_tables.py), or, without them, each cluster's table where that cluster keeps
it, with its id as ``cluster``. The answers are the rows each cluster's table was given."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from connect_state.core.clusters import clusters, default_cluster, fleet_tables_on
from connect_state.core.errors import TableNotFoundError
from connect_state.core.settings import Settings, load_settings
from connect_state.spark.fleet import fleet_table, register_fleet_views
from connect_state.tables.fleet_tables import ClusterPartition
from connect_state.tables.schemas import CONNECTOR_EVENTS, CONNECTORS, SOURCE_OFFSETS
from tests.unit.helpers import local_clusters, write_table

pytestmark = pytest.mark.spark


def three_clusters(tmp_path: Path, fleet_tables: str = "auto") -> Settings:
    return local_clusters(tmp_path, "billing", "empty", **{"fleet.tables": fleet_tables})


def connector(name: str, state: str, deleted: bool = False) -> dict[str, Any]:
    return {"name": name, "type": "source", "connector_class": "FileStreamSource", "connector_state": state,
            "target_state": state, "deleted": deleted}  # fmt: skip


def sync_fleet(settings: Settings) -> None:
    """What the fleet tables job's pass does for each cluster (FleetTablesJob), or nothing with fleet.tables=off."""
    for cluster in clusters(settings):
        if fleet_tables_on(cluster.settings):
            own = cluster.settings
            ClusterPartition(own.delta_root, own.fleet_delta_root, default_cluster(own).id).sync()


@pytest.mark.parametrize("fleet_tables", ["auto", "off"])
def test_the_fleet_reads_every_clusters_table_with_its_cluster(
    spark: SparkSession, tmp_path: Path, fleet_tables: str
) -> None:
    settings = three_clusters(tmp_path, fleet_tables)
    main, billing, _empty = clusters(settings)
    write_table(
        main.settings.delta_root, CONNECTORS, [connector("orders", "RUNNING"), connector("old", "UNASSIGNED", True)]
    )
    # billing's table was written before a column was added: its rows have it null
    older = pa.schema([field for field in CONNECTORS.schema if field.name != "connector_version"])
    rows = [connector("orders", "PAUSED"), connector("invoices", "RUNNING")]
    write_deltalake(str(billing.settings.table_path(CONNECTORS.name)), pa.Table.from_pylist(rows, schema=older))

    sync_fleet(settings)
    frame = fleet_table(spark, settings, CONNECTORS.name)
    plan = frame._jdf.queryExecution().analyzed().toString()
    # The fleet's table, where the jobs keep it: one relation whose partition column is the cluster (else a union).
    assert ("Union" not in plan and "Relation [cluster#" in plan) == (fleet_tables == "auto"), plan
    assert frame.columns[0] == "cluster" and "connector_version" in frame.columns
    got = sorted((r["cluster"], r["name"], r["connector_state"]) for r in frame.collect())
    assert got == [
        ("billing", "invoices", "RUNNING"),
        ("billing", "orders", "PAUSED"),
        ("connect-main", "old", "UNASSIGNED"),
        ("connect-main", "orders", "RUNNING"),
    ]  # the empty cluster, whose jobs have not run, is left out

    write_table(main.settings.delta_root, SOURCE_OFFSETS, [{"connector": "old", "partition": "{}", "offset": "{}"}])
    sync_fleet(settings)
    views = register_fleet_views(spark, settings)
    assert {"fleet_connectors", "fleet_source_offsets"} <= set(views)
    paused = spark.sql("SELECT cluster, name FROM fleet_connectors WHERE connector_state = 'PAUSED'").collect()
    assert [(r["cluster"], r["name"]) for r in paused] == [("billing", "orders")]
    left = spark.sql(
        "SELECT DISTINCT c.cluster, c.name FROM fleet_connectors c JOIN fleet_source_offsets o "
        "ON o.cluster = c.cluster AND o.connector = c.name WHERE c.deleted"
    ).collect()
    assert [(r["cluster"], r["name"]) for r in left] == [("connect-main", "old")]
    event = {"connector": "orders", "event": "target_state_changed", "details": '{"from": "STARTED", "to": "PAUSED"}',
             "source": "config", "kafka_partition": 0, "kafka_offset": 7,
             "kafka_timestamp": datetime(2026, 11, 20, tzinfo=UTC)}  # fmt: skip
    write_table(billing.settings.delta_root, CONNECTOR_EVENTS, [event])
    sync_fleet(settings)
    register_fleet_views(spark, settings)  # fleet_connector_events is there now
    since = spark.sql(  # the README's query
        "SELECT cluster, connector, max(kafka_timestamp) AS since FROM fleet_connector_events "
        "WHERE event = 'target_state_changed' AND get_json_object(details, '$.to') = 'PAUSED' "
        "GROUP BY cluster, connector"
    ).collect()
    assert [(r["cluster"], r["connector"], r["since"].date().isoformat()) for r in since] == [
        ("billing", "orders", "2026-11-20")
    ]


def test_a_table_no_cluster_has_is_not_found(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError, match="no cluster has a table connectors yet"):
        fleet_table(spark, three_clusters(tmp_path), CONNECTORS.name)


def test_spark_vacuum_of_a_fleet_table_keeps_the_clusters_files(spark: SparkSession, tmp_path: Path) -> None:
    """A fleet table holds no file of its own: Spark's VACUUM of it (retention 0) removes none of the files its
    partitions list or listed (those are the clusters' tables'); and a cluster the settings no longer list is left
    out of the view although its partition is still there (until it is forgotten)."""
    settings = three_clusters(tmp_path)
    main, billing, _empty = clusters(settings)
    write_table(main.settings.delta_root, CONNECTORS, [connector("orders", "RUNNING")])
    write_table(billing.settings.delta_root, CONNECTORS, [connector("invoices", "RUNNING")])
    sync_fleet(settings)
    write_table(billing.settings.delta_root, CONNECTORS, [connector("invoices", "PAUSED")], mode="overwrite")
    sync_fleet(settings)  # the billing partition's first file removed from the fleet table, still in billing's log

    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{settings.fleet_delta_root / CONNECTORS.name}` RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    for cluster in (main, billing):  # every version of the clusters' own tables reads: no file of theirs removed
        table = DeltaTable(str(cluster.settings.table_path(CONNECTORS.name)))
        for version in range(table.version() + 1):
            table.load_as_version(version)
            assert table.to_pyarrow_table().num_rows == 1
    got = sorted(
        (r["cluster"], r["name"], r["connector_state"]) for r in fleet_table(spark, settings, "connectors").collect()
    )
    assert got == [("billing", "invoices", "PAUSED"), ("connect-main", "orders", "RUNNING")]

    kept = {key: value for key, value in settings.raw.items() if not key.startswith("clusters.billing.")}
    without_billing = load_settings(overrides={**kept, "clusters": "empty"}, environ={})
    got = [(r["cluster"], r["name"]) for r in fleet_table(spark, without_billing, "connectors").collect()]
    assert got == [("connect-main", "orders")]
