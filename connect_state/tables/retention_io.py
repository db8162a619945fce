"""A history table's clean-up through ``deltalake`` (issue 33, finding 7): the rows before the cutoff read (only the
columns the choice needs, only the files whose statistics may hold one), the rows to delete chosen by
:func:`connect_state.tables.retention.expired_rows`, deleted by a MERGE on the table's key, then a vacuum. No Spark
(the jobs' Spark fallback is :mod:`connect_state.spark.retention`), no Flask.

**No conflict with the writers.** The delete is a MERGE matching only the rows chosen (by the table's key, null equal
to null), committed through :func:`connect_state.tables.small_writes.merge_rows`: under this process's commit lock of
the table (the jobs' ``deltalake`` writers of the table take turns with it) and read again and retried when another
driver's commit came first; a row appended meanwhile is not among those chosen. Running it again deletes nothing more.

**The vacuum** after a delete removes the data files the table's log stopped referencing longer ago than the table's
``delta.deletedFileRetentionDuration`` (Delta's default, 7 days; enforced), so the deleted rows leave the storage a
week later and readers of recent versions keep their files.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError

from connect_state.core.storage import Location
from connect_state.tables import small_writes
from connect_state.tables.compaction import vacuum
from connect_state.tables.merge_spec import MergeSpec, matched_delete
from connect_state.tables.retention import RetentionPolicy, expired_rows
from connect_state.tables.scan import DeltaFiles, TableScan
from connect_state.tables.schemas import timestamp

log = logging.getLogger("connect_state.retention")

__all__ = ["Cleaned", "clean_table", "delete_merge", "iso"]


def iso(ms: int) -> str:
    """Epoch ms as an ISO-8601 UTC time for the log and the API's messages."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Cleaned:
    """What a clean-up of one table did: the rows it deleted, and those before the cutoff it kept (the newest per
    key)."""

    table: str
    cutoff: int
    deleted: int
    kept: int

    def line(self) -> str:
        return (
            f"{self.table}: deleted {self.deleted} rows before {iso(self.cutoff)}, kept {self.kept} older rows "
            "(the newest per key)"
        )


def delete_merge(policy: RetentionPolicy) -> MergeSpec:
    """The MERGE that deletes the rows of a source of ``policy``'s table key values (null equal to null)."""
    condition = " AND ".join(f"(t.`{name}` IS NOT DISTINCT FROM s.`{name}`)" for name in policy.spec.key)
    return MergeSpec(condition, (matched_delete(),))


def old_rows(scan: TableScan, policy: RetentionPolicy, cutoff: int) -> pa.Table:
    """The rows before ``cutoff`` (epoch ms), :attr:`~RetentionPolicy.columns` only."""
    return scan.rows([(policy.time, "<", timestamp(cutoff))], policy.columns)


def clean_table(
    root: Location, policy: RetentionPolicy, cutoff: int, storage_options: Mapping[str, str] | None = None
) -> Cleaned:
    """Delete the rows of ``policy``'s table under ``root`` that a clean-up at ``cutoff`` deletes, then vacuum (see
    the module's docstring). A table that does not exist yet has nothing to delete."""
    path = str(root / policy.name)
    options = dict(storage_options or {}) or None
    try:
        table = DeltaTable(path, storage_options=options)
    except DeltaTableNotFoundError:
        return Cleaned(policy.name, cutoff, 0, 0)
    scan = TableScan(DeltaFiles(table, options, path if root.is_local else None))
    old = old_rows(scan, policy, cutoff)
    expired = expired_rows(old, policy, cutoff)
    if expired.num_rows:
        small_writes.merge_rows(expired.select(list(policy.spec.key)), path, delete_merge(policy), options)
        with small_writes.commit_lock(path):
            vacuum(small_writes.latest(path, options))
    return Cleaned(policy.name, cutoff, expired.num_rows, old.num_rows - expired.num_rows)
