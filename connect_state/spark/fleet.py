"""One DataFrame over every Connect cluster of a deployment (issue 37), for SQL over the fleet in Spark (a notebook, a
Databricks job): the fleet's table of a name (:mod:`connect_state.tables.fleet_tables`, kept by the jobs when
``fleet.tables`` is on), with the cluster's id as a first column ``cluster``.

Where the jobs keep no fleet table of that name (``fleet.tables=off``, or not synced yet), each cluster's own table is
read where that cluster keeps it (under ``<delta.root>/clusters/<id>`` for a further cluster) and the frames are put
together at query time, with the same columns. A cluster whose table does not exist yet (its jobs have not run) is
left out and named in the log; a table no cluster has yet is a :class:`~connect_state.core.errors.TableNotFoundError`.

    from connect_state.core.settings import load_settings
    from connect_state.spark.fleet import register_fleet_views

    register_fleet_views(spark, load_settings("conf/connect-state.properties"))
    spark.sql("SELECT cluster, name FROM fleet_connectors WHERE connector_state = 'PAUSED'").show()
"""

from __future__ import annotations

import logging
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from connect_state.core.clusters import clusters, fleet_tables_on
from connect_state.core.errors import TableNotFoundError
from connect_state.core.settings import Settings
from connect_state.spark.delta_io import table_exists
from connect_state.tables.fleet_tables import CLUSTER_COLUMN, FLEET_TABLES

__all__ = ["CLUSTER_COLUMN", "FLEET_TABLES", "FLEET_VIEW_PREFIX", "fleet_table", "register_fleet_views"]

log = logging.getLogger("connect_state.fleet")

#: The temporary views :func:`register_fleet_views` creates are named ``fleet_<table>``.
FLEET_VIEW_PREFIX = "fleet_"


def fleet_table(spark: SparkSession, settings: Settings, name: str) -> DataFrame:
    """Every cluster's table ``name`` as one DataFrame, ``cluster`` first, then the table's columns (by name; a
    column one cluster's table lacks, as an older table before a schema change, is null in its rows): the fleet's
    table when the jobs keep it, else each cluster's read together."""
    fleet_path = (settings.fleet_delta_root / name).uri
    if fleet_tables_on(settings) and table_exists(spark, fleet_path):
        # The clusters of the settings: a cluster removed from them keeps its partition until it is forgotten.
        watched = [cluster.id for cluster in clusters(settings)]
        return spark.read.format("delta").load(fleet_path).where(F.col(CLUSTER_COLUMN).isin(watched))
    frames = []
    for cluster in clusters(settings):
        path = cluster.settings.table_path(name).uri
        if not table_exists(spark, path):
            log.info("fleet %s: cluster %s has no table at %s yet; left out", name, cluster.id, path)
            continue
        frame = spark.read.format("delta").load(path)
        frames.append(frame.select(F.lit(cluster.id).alias(CLUSTER_COLUMN), *frame.columns))
    if not frames:
        raise TableNotFoundError(f"no cluster has a table {name} yet (the jobs create it at their first run)")
    return reduce(lambda one, other: one.unionByName(other, allowMissingColumns=True), frames)


def register_fleet_views(spark: SparkSession, settings: Settings) -> list[str]:
    """A temporary view ``fleet_<table>`` of :func:`fleet_table` for each of :data:`FLEET_TABLES` some cluster has;
    the names of the views created."""
    created = []
    for spec in FLEET_TABLES:
        try:
            frame = fleet_table(spark, settings, spec.name)
        except TableNotFoundError:
            continue
        view = FLEET_VIEW_PREFIX + spec.name
        frame.createOrReplaceTempView(view)
        created.append(view)
    return created
