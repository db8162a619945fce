"""The fleet's tables (issue 37): one Delta table of each name over every Connect cluster of the deployment, under
``fleet.delta.root``, each cluster's partition listing its own table's files (connect_state/tables/fleet_tables.py).

``connect-state-jobs`` keeps them when ``fleet.tables`` is on (``auto``: with several clusters); this script runs the
job alone, for every cluster of the settings, or removes the partitions of a cluster the deployment no longer watches
(its own tables are left as they are)::

    connect-state-fleet-tables [--once | --available-now] [--conf-file F] [--set key=value ...]
    connect-state-fleet-tables --forget <cluster id> [--conf-file F] [--set key=value ...]
"""

from __future__ import annotations

import argparse
import sys

from connect_state.core.clusters import clusters
from connect_state.core.errors import ConfigError, ConnectStateError
from connect_state.core.settings import add_config_arguments, settings_from_args
from connect_state.core.storage import deltalake_options
from connect_state.spark.fleet_sync import FleetTablesJob
from connect_state.spark.streaming import job_main, setup_logging
from connect_state.tables.fleet_tables import forget_cluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="connect-state-fleet-tables", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--once", dest="available_now", action="store_true", help="one pass, then exit (scheduled runs)"
    )
    parser.add_argument("--available-now", dest="available_now", action="store_true", help="alias of --once")
    parser.add_argument("--forget", metavar="CLUSTER", help="remove this cluster's partitions from the fleet's tables")
    add_config_arguments(parser)
    args = parser.parse_args(argv)
    if args.forget is None:
        return job_main(FleetTablesJob(), args)
    setup_logging()
    try:
        settings = settings_from_args(args)
        watched = [cluster.id for cluster in clusters(settings)]
        if args.forget in watched:
            raise ConfigError(
                f"cluster {args.forget} is still watched ({', '.join(watched)}): remove it from the settings and "
                "restart the jobs without it first (a job still following it would list its files again)"
            )
        removed = forget_cluster(settings.fleet_delta_root, args.forget, deltalake_options(settings))
    except ConnectStateError as err:
        print(f"connect-state-fleet-tables: {err}", file=sys.stderr)
        return 2
    for table, files in removed.items():
        print(f"{table}: {files} files of cluster {args.forget} removed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
