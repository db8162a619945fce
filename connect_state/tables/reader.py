"""Reading connect-state's Delta tables with ``deltalake`` (delta-rs): no Spark, no JVM in the request path.

The jobs write the tables described in :mod:`connect_state.tables.schemas` (Arrow schemas); the API opens them
read-only.

Every answer reflects the latest commit of the job: each read first asks the table's log for new commits
(``DeltaTable.update_incremental``, about a millisecond; for a local table, two ``stat`` calls first say whether there
can be any) and reloads the table's rows only when the version moved. A reload reads only the data files the new
version added: Delta's data files are immutable, so the rows of a file the previous load read are kept (per file)
and served again while the version still has it (issue 11 §4: a commit that rewrites one file of a large table costs
that file, not the table). A partitioned table, and a table whose id or schema changed, is read whole.
Between commits the rows are served from an in-memory Arrow snapshot per table, filtered with ``pyarrow.compute``
(reopening and scanning the table on every request cost 15-20 ms; Connect answers from memory too). Snapshots are
immutable and shared by the request threads; refreshing one is serialised per table.

Turning Arrow rows into Python dicts (``to_pylist``) is most of a read's cost, so the dicts are kept with the
snapshot they came from: a connector's rows (an equality filter on a string column) the first time they are asked
for, and every row of a small table (at most :data:`ROW_CACHE_MAX_ROWS`, e.g. ``watermarks``, read on every GET for
the lag header). A read returns new dicts (shallow copies of the kept ones: a caller may add, remove or replace
keys, but nested values such as a connector's ``tasks`` list are shared and must not be modified). After a commit,
the dicts of a value are kept only if none of its rows was in a file the commit removed and no file it added has the
value; equality lookups use an index per data file, so the files a commit did not touch keep theirs. Bounds: a value
with more than :data:`VALUE_CACHE_MAX_ROWS` rows or none is never kept, and at most :data:`VALUE_CACHE_MAX_TOTAL_ROWS`
rows are kept per table and column.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError

from connect_state.core.errors import TableNotFoundError
from connect_state.core.storage import Location
from connect_state.tables.scan import (
    DeltaFiles,
    FileCounts,
    FileRows,
    RowGroupIndexes,
    TableScan,
    filter_expression,
)
from connect_state.tables.schemas import (
    ACTIVE_TOPICS,
    ACTIVE_TOPICS_HISTORY,
    CONNECTOR_DELETIONS,
    CONNECTOR_EVENTS,
    CONNECTOR_RESTARTS,
    CONNECTORS,
    HEARTBEATS,
    REJECTED_RECORDS,
    SINK_OFFSETS,
    SINK_OFFSETS_HISTORY,
    SOURCE_OFFSETS,
    SOURCE_OFFSETS_HISTORY,
    SOURCE_PARTITION_ACTIVITY,
    TableSpec,
)

T = TypeVar("T")

Filter = tuple[str, str, Any]
"""A pyarrow-style filter, e.g. ``("connector", "=", "foo-source")``; a list of them is ANDed."""

# Which console script creates each table (the job's first run creates it, even when there is nothing to fold).
TABLE_JOBS: dict[str, str] = {
    ACTIVE_TOPICS.name: "connect-state-active-topics",
    ACTIVE_TOPICS_HISTORY.name: "connect-state-active-topics",
    REJECTED_RECORDS.name: "connect-state-active-topics or connect-state-connector-states",
    CONNECTORS.name: "connect-state-connector-states",
    CONNECTOR_EVENTS.name: "connect-state-connector-states",
    SOURCE_OFFSETS.name: "connect-state-offsets",
    SOURCE_OFFSETS_HISTORY.name: "connect-state-offsets",
    SINK_OFFSETS.name: "connect-state-offsets",
    SINK_OFFSETS_HISTORY.name: "connect-state-offsets",
    CONNECTOR_DELETIONS.name: "connect-state-cleanup",
    CONNECTOR_RESTARTS.name: "connect-state-restarts",
    SOURCE_PARTITION_ACTIVITY.name: "connect-state-heartbeats",
    HEARTBEATS.name: "connect-state-heartbeats",
}


def missing_table_message(spec: TableSpec, path: str | os.PathLike[str]) -> str:
    """What the API says when a table has not been created yet."""
    job = TABLE_JOBS.get(spec.name)
    created_by = f"the {job} job" if job else "the job that writes it"
    return (
        f"Delta table {spec.name} not found at {path}: it is created by {created_by}; "
        "start it (or run it once with --available-now) against the same delta.root"
    )


@dataclass
class _Snapshot:
    table: DeltaTable
    version: int
    data: pa.Table
    #: (inode, mtime, size) of the log's ``<version>.json`` when the rows were loaded (local tables), else None.
    commit_file: tuple[int, int, int] | None = None
    #: Epoch seconds when ``data`` was loaded: every commit its rows reflect was made before then.
    loaded_at: float = 0.0
    #: Epoch seconds of the table's last commit when ``data`` was loaded (its ``commitInfo`` timestamp), if known.
    committed_at: float | None = None
    #: A local table's ``_delta_log/<version>.json`` and ``<version + 1>.json`` (see ``TableReader._unchanged``).
    commit_paths: tuple[str, str] | None = None
    #: ``data`` by data file, in order (``data`` is their concatenation); None when the table was read whole.
    files: _Files | None = None


class _Files:
    """A snapshot's rows by data file: ``parts`` in the order ``data`` concatenates them, read under ``layout`` (the
    table's id and Arrow schema: another layout reads every file again)."""

    def __init__(self, data: pa.Table, parts: Sequence[tuple[str, pa.Table]], layout: tuple[str, pa.Schema]) -> None:
        self.data = data
        self.parts = tuple(parts)
        self.layout = layout
        self.by_path = dict(self.parts)

    def changed_since(self, earlier: _Files) -> list[pa.Table] | None:
        """The rows of the files ``earlier`` had and this has not, and of those this has and ``earlier`` had not
        (None: another layout, every file counts as changed)."""
        if earlier.layout != self.layout:
            return None
        removed = [rows for path, rows in earlier.parts if path not in self.by_path]
        added = [rows for path, rows in self.parts if path not in earlier.by_path]
        return removed + added


class PartIndex:
    """One data file's equality index of a string column: its non-null values sorted (Arrow's byte order, which is
    Python's code point order for UTF-8), each with its row number; a value's rows are a binary search away. Built in
    Arrow's sort, not a Python loop over the rows."""

    def __init__(self, column: pa.ChunkedArray | pa.Array) -> None:
        order = pc.sort_indices(column, null_placement="at_end")
        valid = len(column) - column.null_count
        self.rows = order.to_numpy()[:valid].astype(np.int64)
        self.values = column.take(order).to_numpy(zero_copy_only=False)[:valid]

    def get(self, value: Any) -> np.ndarray | None:
        """The row numbers holding ``value``, in order (None: none)."""
        low = int(np.searchsorted(self.values, value, "left"))
        high = int(np.searchsorted(self.values, value, "right"))
        return self.rows[low:high] if high > low else None


class ValueIndex:
    """A snapshot's equality index of a column: one :class:`PartIndex` per data file, with that file's rows (in one
    chunk each, so that taking a few rows does not copy the file: Arrow's ``take`` joins the chunks first). The files
    a commit did not touch keep their index."""

    def __init__(self, parts: Sequence[tuple[pa.Table, PartIndex]]) -> None:
        self.parts = list(parts)

    def take(self, value: Any) -> pa.Table | None:
        """The rows holding ``value`` (None: no row has it)."""
        found = [rows.take(numbers) for rows, index in self.parts if (numbers := index.get(value)) is not None]
        if not found:
            return None
        return found[0] if len(found) == 1 else pa.concat_tables(found)


def file_rows(dataset: pads.FileSystemDataset, fragment: pads.Fragment, columns: Sequence[str]) -> pa.Table:
    """One data file's rows as the table's dataset reads them (its schema: a column the file lacks is null)."""
    one_file = pads.FileSystemDataset([fragment], dataset.schema, dataset.format, dataset.filesystem)
    return one_file.to_table(columns=list(columns))


def read_by_file(table: DeltaTable, columns: Sequence[str], previous: _Files | None) -> _Files | None:
    """The table's rows by data file, reading only the files ``previous`` has not (None: the table is partitioned,
    read it whole). A file's rows never change (Delta's data files are immutable; a removed one is gone from the
    version's list), so the kept ones serve as they are."""
    if table.metadata().partition_columns:
        return None
    dataset = table.to_pyarrow_dataset()
    layout = (str(table.metadata().id), dataset.schema)
    kept = previous.by_path if previous is not None and previous.layout == layout else {}
    parts: list[tuple[str, pa.Table]] = []
    for fragment in dataset.get_fragments():
        rows = kept.get(fragment.path)
        if rows is None:
            rows = file_rows(dataset, fragment, columns).combine_chunks()
        parts.append((fragment.path, rows))
    data = pa.concat_tables([rows for _path, rows in parts]) if parts else dataset.to_table(columns=list(columns))
    return _Files(data, tuple(parts), layout)


ROW_CACHE_MAX_ROWS = 10_000
"""A table with at most this many rows keeps all of them as dicts for reads without filters (see the module doc)."""
VALUE_CACHE_MAX_ROWS = 1_000
"""A value (a connector) with more rows than this is read through Arrow each time, never kept as dicts."""
VALUE_CACHE_MAX_TOTAL_ROWS = 200_000
"""At most this many rows of one table and column are kept as dicts per snapshot; further values are read through
Arrow each time."""


COMMIT_CLOCK_MARGIN_S = 0.25
"""How far the clock of a job's host may be behind ours when a commit's timestamp is compared with our time."""


def _last_commit_time(table: DeltaTable) -> float | None:
    """The timestamp of the table's last commit (epoch seconds; at or after the version just loaded), if readable."""
    try:
        history = table.history(1)
    except Exception:  # a log we cannot read the history of: the load time serves
        return None
    timestamp = history[0].get("timestamp") if history else None
    return timestamp / 1000 if isinstance(timestamp, int | float) else None


class TableReader:
    """Reads rows of the Delta tables under ``delta_root``, from per-table snapshots refreshed on every read.

    ``delta_root`` is a local directory or an object-store URI (``s3a://``, ``s3://``, ``abfss://``, ``gs://``), read
    through deltalake's object store with ``storage_options`` (:func:`connect_state.core.storage.deltalake_options`: the
    endpoint, region and plain-HTTP settings; credentials come from the environment or the instance).
    """

    def __init__(self, delta_root: str | os.PathLike[str], storage_options: Mapping[str, str] | None = None) -> None:
        self.delta_root = delta_root if isinstance(delta_root, Location) else Location.parse(os.fspath(delta_root))
        self.storage_options = dict(storage_options or {})
        self._snapshots: dict[str, _Snapshot] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        # (table, column) -> (the snapshot's data, value -> row numbers): see _filtered
        self._indexes: dict[tuple[str, str], tuple[pa.Table, ValueIndex]] = {}
        # (table, column) -> (the layout, data file -> its index of the column): reused for the files a commit kept
        self._part_indexes: dict[tuple[str, str], tuple[tuple[str, pa.Schema], dict[str, PartIndex]]] = {}
        # (table, column) -> the snapshot's data and its files, value -> that value's rows as dicts of every column,
        # [rows kept]: see rows
        self._value_rows: dict[tuple[str, str], _KeptValues] = {}
        # table -> (the snapshot's data, every row as a dict of every column), for small tables: see rows
        self._all_rows: dict[str, tuple[pa.Table, list[dict[str, Any]]]] = {}
        # (table, function) -> (the snapshot's data, the function of its rows): see derived
        self._derived: dict[tuple[str, Callable[..., Any]], tuple[pa.Table, Any]] = {}
        self._log_dirs: dict[str, str] = {}
        # table -> (its DeltaTable, the version scanned, the scan of that version, its commit file's identity): see scan
        self._scans: dict[str, tuple[DeltaTable, int, TableScan, tuple[int, int, int] | None]] = {}
        self._counts: dict[str, FileCounts] = {}
        self._kept: dict[str, FileRows] = {}  # table -> its small files' rows, decoded once (see scan)
        self._footers: dict[str, RowGroupIndexes] = {}  # table -> its large files' row-group statistics (see scan)
        self._views: dict[str, set[str]] = {}  # table -> its files Arrow cannot filter as it reads (see scan)

    def path(self, spec: TableSpec) -> Location:
        return self.delta_root / spec.name

    def table(self, spec: TableSpec) -> DeltaTable:
        """The table's latest version; raises TableNotFoundError when it does not exist."""
        path = self.path(spec)
        try:
            return DeltaTable(str(path), storage_options=self.storage_options or None)
        except DeltaTableNotFoundError:
            raise TableNotFoundError(missing_table_message(spec, path)) from None

    def _lock(self, name: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(name, threading.Lock())

    def _log_dir(self, spec: TableSpec) -> str:
        """A local table's ``_delta_log`` directory (kept: building the path is a good part of a check's cost)."""
        log_dir = self._log_dirs.get(spec.name)
        if log_dir is None:
            log_dir = self._log_dirs[spec.name] = os.path.join(os.fspath(self.path(spec)), "_delta_log")
        return log_dir

    def _commit_path(self, spec: TableSpec, version: int) -> str:
        return os.path.join(self._log_dir(spec), f"{version:020d}.json")

    def _commit_file(self, spec: TableSpec, version: int, path: str | None = None) -> tuple[int, int, int] | None:
        """The identity of a local table's commit file ``_delta_log/<version>.json`` (at ``path`` when given); None
        when absent or remote."""
        if not self.delta_root.is_local or version < 0:
            return None
        try:
            stat = os.stat(path if path is not None else self._commit_path(spec, version))
        except OSError:
            return None
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)

    def _unchanged(self, spec: TableSpec, snapshot: _Snapshot) -> bool:
        """True when a local table's log certainly has no commit after the snapshot's: the next commit's file is
        absent and the snapshot's own is the one it was loaded with (commits are files numbered in sequence; a table
        removed or recreated replaces the latter). Two ``stat`` calls (microseconds) instead of asking the log for new
        commits (about a millisecond). Tables in object stores always ask the log."""
        if snapshot.commit_paths is None:
            return False
        return self._no_commit_since(spec, snapshot.version, snapshot.commit_file, snapshot.commit_paths)

    def _no_commit_since(
        self,
        spec: TableSpec,
        version: int,
        commit_file: tuple[int, int, int] | None,
        paths: tuple[str, str] | None = None,
    ) -> bool:
        """True when a local table's log has no commit after ``version``, whose commit file had the identity
        ``commit_file`` when loaded (``paths``: that file's and the next one's, when kept); see :meth:`_unchanged`."""
        if commit_file is None:
            return False
        own, following = paths or (self._commit_path(spec, version), self._commit_path(spec, version + 1))
        if os.path.exists(following):
            return False
        return self._commit_file(spec, version, own) == commit_file

    def snapshot(self, spec: TableSpec) -> pa.Table:
        """Every row of the table at its latest version (all of the spec's columns)."""
        with self._lock(spec.name):
            snapshot = self._snapshots.get(spec.name)
            if snapshot is not None and self._unchanged(spec, snapshot):
                return snapshot.data
            if (
                snapshot is not None
                and snapshot.commit_file is not None
                and self._commit_file(spec, snapshot.version) != snapshot.commit_file
            ):
                snapshot = None  # the table was removed (and maybe written again): open it afresh
            if snapshot is not None:
                try:
                    snapshot.table.update_incremental()
                except Exception:  # the table was removed or rewritten under us: open it afresh
                    snapshot = None
            if snapshot is None:
                table = self.table(spec)
                snapshot = _Snapshot(table, -1, pa.table({}))
            version = snapshot.table.version()
            if version != snapshot.version:
                # The new version's rows first: a read that fails leaves the snapshot as it was, so the next read
                # tries again (its commit file must not say the new version was loaded).
                commit_file = self._commit_file(spec, version)
                files = read_by_file(snapshot.table, spec.column_names, snapshot.files)
                data = files.data if files is not None else snapshot.table.to_pyarrow_table(columns=spec.column_names)
                snapshot.commit_file = commit_file
                snapshot.commit_paths = (
                    (self._commit_path(spec, version), self._commit_path(spec, version + 1))
                    if commit_file is not None  # a local table's
                    else None
                )
                snapshot.files, snapshot.data = files, data
                snapshot.version = version
                snapshot.loaded_at = time.time()
                snapshot.committed_at = _last_commit_time(snapshot.table)
            self._snapshots[spec.name] = snapshot
            return snapshot.data

    def scan(self, spec: TableSpec) -> TableScan:
        """Bounded reads of the table's latest version (:mod:`connect_state.tables.scan`: the history and audit
        queries): nothing is loaded but the log's file list and statistics, rows are read per query. A local table
        whose log has no commit since the kept scan's version answers that scan without asking the log (whose
        listing grows with its commits)."""
        with self._lock(spec.name):
            kept = self._scans.get(spec.name)
            if kept is not None and self._no_commit_since(spec, kept[1], kept[3]):
                return kept[2]
            if kept is not None and kept[3] is not None and self._commit_file(spec, kept[1]) != kept[3]:
                kept = None  # the table was removed (and maybe written again): open it afresh
            table = kept[0] if kept is not None else None
            if table is not None:
                try:
                    table.update_incremental()
                except Exception:  # removed or rewritten under us: open it afresh
                    table = None
            if table is None:
                table = self.table(spec)
            version = table.version()
            if kept is not None and kept[0] is table and kept[1] == version:
                return kept[2]
            local = os.fspath(self.path(spec)) if self.delta_root.is_local else None
            counts = self._counts.setdefault(spec.name, FileCounts(spec.counted)) if spec.counted else None
            file_rows = self._kept.setdefault(spec.name, FileRows())
            footers = self._footers.setdefault(spec.name, RowGroupIndexes())
            views = self._views.setdefault(spec.name, set())
            files = DeltaFiles(table, self.storage_options, local, footers, views)
            scan = TableScan(files, counts, file_rows)
            self._scans[spec.name] = (table, version, scan, self._commit_file(spec, version))
            return scan

    def loaded_at(self, spec: TableSpec) -> float | None:
        """When the rows :meth:`rows` answers from were loaded (epoch seconds; None before any read): it identifies
        the load."""
        snapshot = self._snapshots.get(spec.name)
        return snapshot.loaded_at if snapshot is not None and snapshot.version >= 0 else None

    def loaded_version(self, spec: TableSpec) -> tuple[int, float | None] | None:
        """The version of the rows :meth:`rows` answers from and its commit's own timestamp (None before any read):
        the same in every process that loaded that version, and different for a table removed and written again."""
        snapshot = self._snapshots.get(spec.name)
        return (snapshot.version, snapshot.committed_at) if snapshot is not None and snapshot.version >= 0 else None

    def rows_as_of(self, spec: TableSpec) -> float | None:
        """A time (epoch seconds) before which every commit the rows of :meth:`rows` reflect was made (None before any
        read): the earlier of their load and their last commit's own timestamp plus :data:`COMMIT_CLOCK_MARGIN_S`
        (the job's clock may differ from ours by that much). :mod:`connect_state.api.live` compares it with when its
        follower last caught up with the topics."""
        snapshot = self._snapshots.get(spec.name)
        if snapshot is None or snapshot.version < 0:
            return None
        if snapshot.committed_at is None:
            return snapshot.loaded_at
        return min(snapshot.loaded_at, snapshot.committed_at + COMMIT_CLOCK_MARGIN_S)

    def rows(
        self,
        spec: TableSpec,
        filters: Sequence[Filter] | None = None,
        columns: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """The rows matching every filter, as dicts of the requested columns (default: all of the spec's)."""
        data = self.snapshot(spec)
        kept = self._kept_rows(spec, data, filters or ())
        if kept is not None:
            names = list(columns) if columns is not None else spec.column_names
            return [{name: row[name] for name in names} for row in kept]
        if filters:
            data = self._filtered(spec, data, filters)
        return data.select(list(columns) if columns is not None else spec.column_names).to_pylist()

    def derived(self, spec: TableSpec, build: Callable[[list[dict[str, Any]]], T]) -> T:
        """``build(every row of the table)``, computed once per table version and function (e.g. the watermarks of
        the lag header, wanted on every GET). ``build`` must not keep or modify the rows it is given; what it returns
        is shared by every caller until the next version. Results are kept per function object: pass a module-level
        function, not a new lambda per call."""
        data = self.snapshot(spec)
        cached = self._derived.get((spec.name, build))
        if cached is None or cached[0] is not data:
            rows = self._kept_rows(spec, data, ())
            cached = (data, build(rows if rows is not None else data.select(spec.column_names).to_pylist()))
            self._derived[(spec.name, build)] = cached
        return cached[1]

    def _kept_rows(self, spec: TableSpec, data: pa.Table, filters: Sequence[Filter]) -> list[dict[str, Any]] | None:
        """The snapshot's rows as dicts, kept with it, when the read is one a cache serves (see the module doc): one
        equality filter on a string column, or no filter on a small table; None otherwise (read through Arrow)."""
        if not filters:
            if data.num_rows > ROW_CACHE_MAX_ROWS:
                return None
            cached = self._all_rows.get(spec.name)
            if cached is None or cached[0] is not data:
                cached = (data, data.select(spec.column_names).to_pylist())
                self._all_rows[spec.name] = cached
            return cached[1]
        if len(filters) != 1:
            return None
        column, op, value = filters[0]
        if op not in ("=", "==") or not isinstance(value, str):
            return None
        if not pa.types.is_string(data.schema.field(column).type):
            return None
        by_value = self._value_rows.get((spec.name, column))
        if by_value is None or by_value.data is not data:
            if not self._is_latest(spec, data):  # a read that began before a newer version was loaded: kept nowhere
                taken = self._take(spec, data, column, value)
                return [] if taken is None else taken.select(spec.column_names).to_pylist()
            by_value = _KeptValues.carried(by_value, data, self._files_of(spec, data), column)
            self._value_rows[(spec.name, column)] = by_value
        kept, total = by_value.rows, by_value.total
        rows = kept.get(value)
        if rows is None:
            taken = self._take(spec, data, column, value)
            if taken is None:
                return []  # no row has it (e.g. a connector without active topics): nothing to convert
            rows = taken.select(spec.column_names).to_pylist()
            fits = 0 < len(rows) <= VALUE_CACHE_MAX_ROWS and total[0] + len(rows) <= VALUE_CACHE_MAX_TOTAL_ROWS
            if fits and kept.setdefault(value, rows) is rows:  # counted once when threads convert the same value
                total[0] += len(rows)
        return rows

    def _filtered(self, spec: TableSpec, data: pa.Table, filters: Sequence[Filter]) -> pa.Table:
        """``data`` filtered; a string column's equality (a connector's name, a group) goes through an index of the
        snapshot (value -> row numbers, built once per snapshot and column) instead of a scan of every row."""
        for i, (column, op, value) in enumerate(filters):
            if op in ("=", "==") and isinstance(value, str) and pa.types.is_string(data.schema.field(column).type):
                taken = self._take(spec, data, column, value)
                data = taken if taken is not None else data.slice(0, 0)
                rest = [f for j, f in enumerate(filters) if j != i]
                filters = rest
                break
        expression = filter_expression(filters)
        return data if expression is None else data.filter(expression)

    def _is_latest(self, spec: TableSpec, data: pa.Table) -> bool:
        """Whether ``data`` is the table's latest loaded snapshot (or the reader has loaded none: a caller's own)."""
        snapshot = self._snapshots.get(spec.name)
        return snapshot is None or snapshot.data is data

    def _take(self, spec: TableSpec, data: pa.Table, column: str, value: Any) -> pa.Table | None:
        """The rows of ``data`` whose ``column`` is ``value`` (None: none): through the latest snapshot's index, or
        a scan of an older snapshot a slow request still holds (whose index would replace the latest's)."""
        if self._is_latest(spec, data):
            return self._index(spec, data, column).take(value)
        found = data.filter(pc.field(column) == value)
        return found if found.num_rows else None

    def _files_of(self, spec: TableSpec, data: pa.Table) -> _Files | None:
        """The data files of ``data`` when it is the latest snapshot's and was read by file (else None)."""
        snapshot = self._snapshots.get(spec.name)
        files = snapshot.files if snapshot is not None else None
        return files if files is not None and files.data is data else None

    def _index(self, spec: TableSpec, data: pa.Table, column: str) -> ValueIndex:
        """``data``'s equality index of ``column``, built once per snapshot from one index per data file (a file the
        previous snapshot had keeps its index)."""
        cached = self._indexes.get((spec.name, column))
        if cached is not None and cached[0] is data:
            return cached[1]
        files = self._files_of(spec, data)
        if files is None:
            whole = data.combine_chunks()
            index = ValueIndex([(whole, PartIndex(whole.column(column)))])
        else:
            earlier = self._part_indexes.get((spec.name, column))
            reusable = earlier[1] if earlier is not None and earlier[0] == files.layout else {}
            by_path: dict[str, PartIndex] = {}
            parts: list[tuple[pa.Table, PartIndex]] = []
            for path, rows in files.parts:
                found = reusable.get(path)
                by_path[path] = found if found is not None else PartIndex(rows.column(column))
                parts.append((rows, by_path[path]))
            self._part_indexes[(spec.name, column)] = (files.layout, by_path)
            index = ValueIndex(parts)
        self._indexes[(spec.name, column)] = (data, index)
        return index


@dataclass
class _KeptValues:
    """The rows of one table and column kept as dicts, value by value, for one snapshot's ``data``."""

    data: pa.Table
    files: _Files | None
    rows: dict[Any, list[dict[str, Any]]]
    total: list[int]

    @classmethod
    def carried(cls, earlier: _KeptValues | None, data: pa.Table, files: _Files | None, column: str) -> _KeptValues:
        """The values kept for ``data``: those of ``earlier`` whose rows no file change touched (none of their rows
        was in a file the new snapshot removed, no file it added has the value); none when either snapshot was read
        whole or the layout changed."""
        if earlier is None or earlier.files is None or files is None or not earlier.rows:
            return cls(data, files, {}, [0])
        changed = files.changed_since(earlier.files)
        if changed is None:
            return cls(data, files, {}, [0])
        rows = dict(earlier.rows)
        kept_values = pa.array(list(rows))
        total = earlier.total[0]
        for part in changed:
            values = part.column(column)
            for value in pc.unique(values.filter(pc.is_in(values, value_set=kept_values))).to_pylist():
                total -= len(rows.pop(value, ()))
        return cls(data, files, rows, [total])
