"""The fleet's tables (issue 37): one Delta table of each name over every Connect cluster of a deployment, partitioned
by a first column, ``cluster``, the cluster's id, under ``fleet.delta.root`` (default ``<delta.root>/fleet``).

**Each cluster's jobs keep folding into its own tables**, as in a one-cluster deployment (the default cluster's at
``delta.root``, a further one's under ``<delta.root>/clusters/<id>``): every fold, reconciliation, retention pass and
lease reads and writes that cluster's rows alone, and adding or removing a cluster leaves the others' tables and
checkpoints as they are. **A fleet table lists those tables' data files**, each in its cluster's partition: an ``add``
action takes an absolute URI (Delta's protocol: "a relative path ... or an absolute path to a file", what a shallow
clone's log holds), and a partition's value is in the log, not in its files. So no row is copied, and a cluster's
partition is its table as of the last :func:`sync_partition`: the job keeping the fleet's tables
(:class:`connect_state.spark.fleet_sync.FleetTablesJob`) calls it for each table of its cluster every
``fleet.sync.interval.ms``. Each call commits the difference: the files the cluster's table added since (``add``),
and those it removed (``remove``: a MERGE's rewrite, a retention pass, a compaction), in one commit written by
``deltalake`` (``create_write_transaction``), never more than one partition's. Two clusters' calls never touch the
same partition, so a commit that loses to another's is read again and its difference committed once more
(:func:`connect_state.tables.small_writes.commit`).

**Reading them.** Spark (``spark.read.format("delta").load(...)``, SQL on ``delta.`<path>```, Databricks) and
``deltalake``'s DataFusion reader (``QueryBuilder``) read absolute paths. ``deltalake``'s ``to_pyarrow_table`` and
``to_pandas`` do not (they look for every file inside the table): read a fleet table with ``QueryBuilder`` there.
A filter on ``cluster`` reads that partition's files only. A fleet table holds no file of its own, so vacuuming it
removes nothing; a version of it stays readable while its clusters' tables keep the files it lists (their own
``VACUUM`` horizon, 7 days by default).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Field
from deltalake.exceptions import CommitFailedError
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError
from deltalake.transaction import AddAction, RemoveAction

from connect_state.core.clusters import checked_id
from connect_state.core.errors import ConfigError, DeltaWriteError
from connect_state.core.storage import Location
from connect_state.tables import small_writes
from connect_state.tables.schemas import (
    ALERTS,
    ALL_TABLES,
    CONNECTOR_VERDICTS,
    LEASES,
    TABLE_PROPERTIES,
    VERDICT_HISTORY,
    TableSpec,
)

__all__ = [
    "CLUSTER_COLUMN",
    "FLEET_TABLES",
    "ClusterPartition",
    "Synced",
    "absolute_file",
    "file_stats",
    "fleet_schema",
    "forget_cluster",
    "partition_files",
    "sync_partition",
]

log = logging.getLogger("connect_state.fleet_tables")

#: The partition column of a fleet table: the id of the Connect cluster whose table lists the row's file.
CLUSTER_COLUMN = "cluster"

#: The tables of a cluster the fleet has one of: every table its jobs write but the ``leases`` (a commit every few
#: seconds, its files vacuumed within the hour: a fleet version would soon list files gone). The audit is the
#: deployment's own, not a cluster's.
FLEET_TABLES: tuple[TableSpec, ...] = (
    *(spec for spec in ALL_TABLES if spec is not LEASES),
    CONNECTOR_VERDICTS,
    VERDICT_HISTORY,
    ALERTS,
)


def fleet_schema(spec: TableSpec) -> pa.Schema:
    """``spec``'s schema with :data:`CLUSTER_COLUMN` first (a non-null string): the schema of its fleet table."""
    if CLUSTER_COLUMN in spec.schema.names:
        raise ValueError(f"the {spec.name} table already has a {CLUSTER_COLUMN!r} column")
    return spec.schema.insert(0, pa.field(CLUSTER_COLUMN, pa.string(), nullable=False))


@dataclass(frozen=True)
class Synced:
    """What one :func:`sync_partition` committed: the table, the cluster, the version of the cluster's table its
    partition now lists, and how many files it added and removed."""

    table: str
    cluster: str
    version: int
    added: int
    removed: int

    def line(self) -> str:
        return f"{self.table}[{self.cluster}] at version {self.version}: +{self.added} -{self.removed} files"


def absolute_file(table: Location, path: str) -> str:
    """The absolute URI of a data file of the table at ``table`` from its ``add`` action's ``path`` (relative, or
    absolute already), as deltalake takes a path: not percent-encoded (it encodes the log's, and decodes what it
    reads): ``file://<absolute path>`` for a local table, ``<table URI>/<path>`` for an object store's."""
    if "://" in path or path.startswith("file:"):
        return path
    if table.is_local:
        return f"file://{PurePosixPath(table.uri, path)}"
    return f"{table.uri.rstrip('/')}/{path}"


def partition_files(fleet: DeltaTable, cluster_id: str) -> dict[str, int]:
    """The files ``cluster_id``'s partition of the fleet table lists, with their sizes (paths decoded: the log's are
    percent-encoded, and deltalake encodes those it is given)."""
    actions = pa.table(fleet.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return {}
    paths, sizes = actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist()
    clusters = actions.column(f"partition.{CLUSTER_COLUMN}").to_pylist()
    return {
        unquote(path): size for path, size, cluster in zip(paths, sizes, clusters, strict=True) if cluster == cluster_id
    }


def _source_files(source: DeltaTable, root: Location) -> dict[str, tuple[int, int, str]]:
    """The data files of the cluster's table: absolute URI -> (size, modification time, the statistics its ``add``
    action has, as JSON: :func:`file_stats`)."""
    actions = pa.table(source.get_add_actions(flatten=False))
    if actions.num_rows == 0:
        return {}
    names = ("path", "size_bytes", "modification_time", "num_records", "min", "max", "null_count")
    columns = (actions.column(name).to_pylist() if name in actions.column_names else [None] * actions.num_rows
               for name in names)  # fmt: skip
    return {
        absolute_file(root, unquote(path)): (size, _epoch_ms(modified), file_stats(records, low, high, nulls))
        for path, size, modified, records, low, high, nulls in zip(*columns, strict=True)
    }


def file_stats(
    records: int | None, low: Mapping[str, Any] | None, high: Mapping[str, Any] | None, nulls: Mapping[str, Any] | None
) -> str:
    """A data file's statistics for its ``add`` action in the fleet table, from the cluster's table's: the row count,
    and the minimum, maximum and null count of the top-level string and integer columns, as that table has them
    (readers skip a file with them: Spark answers a COUNT(*) from ``numRecords``, and a filter skips the files whose
    bounds rule it out). Others (timestamps, booleans, nested columns) are left out, so never skipped on: a bound
    given in another form than its writer's could skip a file that holds a match."""

    def plain(values: Mapping[str, Any] | None) -> dict[str, Any]:
        kept = (values or {}).items()
        return {name: value for name, value in kept if isinstance(value, str | int) and not isinstance(value, bool)}

    stats: dict[str, Any] = {} if records is None else {"numRecords": records}
    for key, values in (("minValues", low), ("maxValues", high), ("nullCount", nulls)):
        if kept := plain(values):
            stats[key] = kept
    return json.dumps(stats)


def _epoch_ms(value: object) -> int:
    if isinstance(value, int):
        return value
    return int(value.timestamp() * 1000)  # type: ignore[attr-defined]  # a datetime


def _open_fleet(path: str, spec: TableSpec, storage_options: Mapping[str, str] | None) -> DeltaTable:
    """The fleet table at ``path``, created empty (partitioned by ``cluster``) when absent."""
    options = dict(storage_options or {}) or None
    try:
        table = DeltaTable(path, storage_options=options)
    except DeltaTableNotFoundError:
        try:
            DeltaTable.create(
                path,
                fleet_schema(spec),
                mode="ignore",
                partition_by=[CLUSTER_COLUMN],
                description=f"The fleet's {spec.name}, every cluster's, partitioned by cluster. {spec.description}",
                configuration=dict(TABLE_PROPERTIES),
                storage_options=options,
            )
        except CommitFailedError as err:  # another writer created it meanwhile
            log.info("creating the fleet's %s table: %s", spec.name, err)
        table = DeltaTable(path, storage_options=options)
    if list(table.metadata().partition_columns) != [CLUSTER_COLUMN]:
        raise ConfigError(f"{path}: not a fleet table (partitioned by {CLUSTER_COLUMN} alone); fleet.delta.root?")
    _add_new_columns(table, spec)
    return table


def _add_new_columns(table: DeltaTable, spec: TableSpec) -> None:
    """Add to the fleet table the columns ``spec`` has gained since it was created (an upgrade's), nullable: the older
    files of the clusters' tables read them as null, as those tables' own readers do."""
    have = set(pa.schema(table.schema().to_arrow()).names)
    missing = [field.with_nullable(True) for field in fleet_schema(spec) if field.name not in have]
    if not missing:
        return
    try:
        table.alter.add_columns([Field.from_arrow(field) for field in missing])
    except CommitFailedError as err:  # another cluster's pass added them meanwhile
        log.info("the fleet's %s table: adding %s: %s", spec.name, [field.name for field in missing], err)
    table.update_incremental()


def sync_partition(
    source_root: Location,
    fleet_root: Location,
    spec: TableSpec,
    cluster_id: str,
    storage_options: Mapping[str, str] | None = None,
) -> Synced | None:
    """List the data files of the cluster's table ``spec`` (under ``source_root``) in its partition of the fleet's
    (under ``fleet_root``), in one commit; None when the cluster has no such table yet or the partition lists its
    files already (nothing committed). The fleet table is created at the first call."""
    checked_id(cluster_id, "a fleet partition")
    options = dict(storage_options or {}) or None
    try:
        source = DeltaTable(str(source_root / spec.name), storage_options=options)
    except DeltaTableNotFoundError:
        return None
    _open_fleet(str(fleet_root / spec.name), spec, storage_options)
    return _sync(source, source_root / spec.name, fleet_root, spec, cluster_id, storage_options)


def _sync(
    source: DeltaTable,
    source_path: Location,
    fleet_root: Location,
    spec: TableSpec,
    cluster_id: str,
    storage_options: Mapping[str, str] | None,
) -> Synced | None:
    """:func:`sync_partition` of an open table of the cluster, into the fleet table (it exists)."""
    version = source.version()
    wanted = _source_files(source, source_path)
    fleet_path = str(fleet_root / spec.name)
    partition: dict[str, str | None] = {CLUSTER_COLUMN: cluster_id}
    done: list[Synced] = []

    def write(fleet: DeltaTable, properties: CommitProperties) -> None:
        done.clear()
        listed = partition_files(fleet, cluster_id)
        now = int(time.time() * 1000)
        adds = [
            AddAction(path, size, partition, modified, True, stats)
            for path, (size, modified, stats) in wanted.items()
            if path not in listed
        ]
        removes = [
            RemoveAction(path, True, now, size, partition) for path, size in listed.items() if path not in wanted
        ]
        if not adds and not removes:
            return
        fleet.create_write_transaction(
            [*adds, *removes],
            mode="append",
            schema=fleet.schema(),  # its own: this process's spec may be another release's
            partition_by=[CLUSTER_COLUMN],
            commit_properties=properties,
        )
        done.append(Synced(spec.name, cluster_id, version, len(adds), len(removes)))

    small_writes.commit(fleet_path, write, storage_options)
    return done[0] if done else None


class ClusterPartition:
    """One cluster's partition of every fleet table (:data:`FLEET_TABLES`), kept in step with its tables by
    :meth:`sync`: its tables stay open (each call reads the commits since), and a table whose version has not moved
    since its last sync costs no read of the fleet's."""

    def __init__(
        self,
        source_root: Location,
        fleet_root: Location,
        cluster_id: str,
        storage_options: Mapping[str, str] | None = None,
        tables: Sequence[TableSpec] = FLEET_TABLES,
    ) -> None:
        self.source_root = source_root
        self.fleet_root = fleet_root
        self.cluster_id = checked_id(cluster_id, "a fleet partition")
        self.storage_options = dict(storage_options or {})
        self.tables = tuple(tables)
        self._sources: dict[str, DeltaTable] = {}
        self._synced: dict[str, int] = {}
        self._fleet_ready: set[str] = set()

    def _source(self, spec: TableSpec) -> DeltaTable | None:
        table = self._sources.get(spec.name)
        if table is not None:
            table.update_incremental()
            return table
        try:
            table = DeltaTable(str(self.source_root / spec.name), storage_options=self.storage_options or None)
        except DeltaTableNotFoundError:
            return None  # its jobs have not created it yet
        self._sources[spec.name] = table
        return table

    def sync(self) -> list[Synced]:
        """Sync every table whose version moved since its last sync (all of them at the first call): what was
        committed. A table that fails is logged, forgotten (its tables are opened again at the next call, so a fleet
        table removed meanwhile is built again) and tried again at the next call; the others go on, then a
        :class:`~connect_state.core.errors.DeltaWriteError` names the failed ones, after what was committed is
        logged."""
        done, failed = [], []
        for spec in self.tables:
            try:
                source = self._source(spec)
                if source is None or self._synced.get(spec.name) == source.version():
                    continue
                version = source.version()
                if spec.name not in self._fleet_ready:  # created, or its new columns added, once per process
                    _open_fleet(str(self.fleet_root / spec.name), spec, self.storage_options)
                    self._fleet_ready.add(spec.name)
                synced = _sync(
                    source, self.source_root / spec.name, self.fleet_root, spec, self.cluster_id, self.storage_options
                )
            except Exception:
                log.warning("fleet %s: syncing cluster %s failed; tried again at the next pass", spec.name,
                            self.cluster_id, exc_info=True)  # fmt: skip
                self._forget(spec)
                failed.append(spec.name)
                continue
            self._synced[spec.name] = version
            if synced is not None:
                done.append(synced)
        if failed:
            if done:
                log.info("fleet, cluster %s: %s", self.cluster_id, "; ".join(item.line() for item in done))
            raise DeltaWriteError(f"fleet tables of cluster {self.cluster_id}: {', '.join(failed)} failed (logged)")
        return done

    def _forget(self, spec: TableSpec) -> None:
        """Open the table and its fleet table again at the next call, as if this process had never seen them."""
        self._sources.pop(spec.name, None)
        self._synced.pop(spec.name, None)
        self._fleet_ready.discard(spec.name)
        small_writes.forget(str(self.fleet_root / spec.name))


def forget_cluster(
    fleet_root: Location, cluster_id: str, storage_options: Mapping[str, str] | None = None
) -> dict[str, int]:
    """Remove ``cluster_id``'s partition from every fleet table (a cluster the deployment no longer watches; its own
    tables are left as they are): the number of files removed per table."""
    checked_id(cluster_id, "a fleet partition")
    removed: dict[str, int] = {}
    for spec in FLEET_TABLES:
        fleet_path = str(fleet_root / spec.name)
        try:
            DeltaTable(fleet_path, storage_options=dict(storage_options or {}) or None)
        except DeltaTableNotFoundError:
            continue

        def write(fleet: DeltaTable, properties: CommitProperties, spec: TableSpec = spec) -> None:
            listed = partition_files(fleet, cluster_id)
            removed[spec.name] = len(listed)
            if not listed:
                return
            now = int(time.time() * 1000)
            partition: dict[str, str | None] = {CLUSTER_COLUMN: cluster_id}
            removes = [RemoveAction(path, True, now, size, partition) for path, size in listed.items()]
            fleet.create_write_transaction(
                list(removes),
                mode="append",
                schema=fleet.schema(),
                partition_by=[CLUSTER_COLUMN],
                commit_properties=properties,
            )

        small_writes.commit(fleet_path, write, storage_options)
    return removed
