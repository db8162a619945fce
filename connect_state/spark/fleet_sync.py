"""The job that keeps the fleet's tables (issue 37, :mod:`connect_state.tables.fleet_tables`): for its cluster, a pass
every ``fleet.sync.interval.ms`` lists in that cluster's partition of each fleet table the data files its own table
has now (one ``deltalake`` commit per table that changed; nothing else is read or written). A catch-up run makes one
pass; a pass in which a table failed ends in an error naming them (a catch-up run exits 1), after the others were
committed. ``connect-state-jobs`` runs it last, for each cluster, when ``fleet.tables`` is on (``auto``: the deployment
watches several clusters); off, it does nothing. Its console script is ``connect-state-fleet-tables``
(``jobs/fleet_tables.py``), which also removes a cluster's partitions (``--forget``).

No Spark: a pass reads the logs of the cluster's tables (the commits since the last pass) and writes the fleet's.
No lease either: two instances of a cluster's job commit the same files, and the second finds nothing to add.
"""

from __future__ import annotations

from typing import Any

from connect_state.core.clusters import default_cluster, fleet_tables_on, listed_ids
from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings
from connect_state.core.storage import deltalake_options
from connect_state.core.vocabulary import FleetTables
from connect_state.spark.streaming import PeriodicTask, Run, job_logger
from connect_state.tables.fleet_tables import ClusterPartition

JOB_NAME = "fleet_tables"
log = job_logger(JOB_NAME)


def check_fleet_settings(settings: Settings) -> bool:
    """Whether the fleet's tables are kept (:func:`~connect_state.core.clusters.fleet_tables_on`): ConfigError for a
    ``fleet.sync.interval.ms`` below 1, or for ``fleet.tables=on`` with a ``fleet.delta.root`` or ``delta.root``
    ``deltalake`` cannot commit to (``dbfs:``, a FUSE mount); with ``auto`` and several clusters there, a warning."""
    if settings.fleet_sync_interval_ms < 1:
        raise ConfigError(f"fleet.sync.interval.ms: must be at least 1, got {settings.fleet_sync_interval_ms}")
    if settings.fleet_delta_root == settings.delta_root:
        raise ConfigError(f"fleet.delta.root: {settings.fleet_delta_root} is delta.root; the fleet's tables go apart")
    unfit = [str(root) for root in (settings.fleet_delta_root, settings.delta_root) if not root.deltalake_commits]
    what = f"the fleet's tables are written with deltalake, which cannot commit to {', '.join(unfit)}"
    if unfit and settings.fleet_tables is FleetTables.ON:
        raise ConfigError(f"fleet.tables=on: {what}; set fleet.delta.root elsewhere, or fleet.tables=off")
    if unfit and settings.fleet_tables is FleetTables.AUTO and listed_ids(settings):
        log.warning("no fleet tables: %s (fleet.tables=auto)", what)
    return fleet_tables_on(settings)


class FleetTablesJob:
    """The fleet tables' passes (:class:`~connect_state.spark.streaming.Job`) for one cluster."""

    name = JOB_NAME

    def check(self, settings: Settings) -> None:
        check_fleet_settings(settings)

    def start(self, spark: Any, settings: Settings, available_now: bool, max_offsets: int | None) -> Run:
        interval = settings.fleet_sync_interval_ms / 1000
        if not fleet_tables_on(settings):  # check_fleet_settings ran before any job started
            return Run([PeriodicTask(JOB_NAME, lambda: None, interval, once=available_now, logger=log)])
        partition = ClusterPartition(
            settings.delta_root, settings.fleet_delta_root, default_cluster(settings).id, deltalake_options(settings)
        )

        def run_pass() -> str | None:
            synced = partition.sync()
            return "; ".join(item.line() for item in synced) if synced else None

        return Run([PeriodicTask(JOB_NAME, run_pass, interval, once=available_now, logger=log)])
