"""Bounded reads of a Delta table (issue 33, finding 7): only the data files whose statistics say they may hold a
matching row, only the columns asked for, only the rows a page needs. No Flask, no Spark.

The history and audit tables only grow; the API's current-state reads keep whole tables in memory
(:mod:`connect_state.tables.reader`), which a history query must not. A :class:`TableScan` works from each data file's
``add`` action in the Delta log (row count, per-column minimum, maximum and null count: the statistics every Delta
writer records, Spark's and delta-rs'):

* :meth:`TableScan.rows`: the rows matching ANDed ``(column, op, value)`` filters, reading only the files whose
  statistics may hold one (the others are never opened), with the filter and the columns pushed down to the Parquet
  reader (which skips row groups by their own statistics);
* :meth:`TableScan.count`: how many rows match, adding up the row counts of files whose statistics prove every row
  matches (never opened) and counting in the others, reading only the filtered columns;
* :meth:`TableScan.newest`: at least the ``limit`` rows with the greatest ``order`` (a time) that match: files are
  read newest first (by their maximum) until ``limit`` rows are found and no file left can hold a newer one. On a
  table appended in time order (the audit table, the history tables) a page reads a file or two, whatever the
  table's size.

Statistics are conservative: a column without them, or a file without any, is read. Spark truncates a timestamp's
statistics to milliseconds, so a timestamp's maximum is taken as up to a millisecond later than recorded.

:attr:`TableScan.files_read` names every file read (what the tests and ``bench/audit_page.py`` check).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pa_fs
from deltalake import DeltaTable
from deltalake.fs import DeltaStorageHandler

__all__ = ["ArrowFiles", "DataFile", "DeltaFiles", "Filter", "TableScan", "all_match", "filter_expression", "may_match"]

Filter = tuple[str, str, Any]
"""``(column, op, value)``; a list of them is ANDed. Ops: ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``."""

TIMESTAMP_SLACK = dt.timedelta(milliseconds=1)


@dataclass(frozen=True)
class DataFile:
    """One data file and its statistics (a column absent from ``low``/``high``/``nulls``: unknown)."""

    path: str
    rows: int | None
    size: int
    low: Mapping[str, Any] = field(default_factory=dict)
    high: Mapping[str, Any] = field(default_factory=dict)
    nulls: Mapping[str, int] = field(default_factory=dict)

    def bounds(self, column: str) -> tuple[Any, Any] | None:
        """The column's (minimum, maximum) here, widened for Spark's millisecond timestamps; None when unknown."""
        low, high = self.low.get(column), self.high.get(column)
        if low is None or high is None:
            return None
        if isinstance(high, dt.datetime):
            high = high + TIMESTAMP_SLACK
        return low, high


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "=": lambda field_, value: field_ == value,
    "==": lambda field_, value: field_ == value,
    "!=": lambda field_, value: field_ != value,
    "<": lambda field_, value: field_ < value,
    "<=": lambda field_, value: field_ <= value,
    ">": lambda field_, value: field_ > value,
    ">=": lambda field_, value: field_ >= value,
    "in": lambda field_, value: field_.isin(list(value)),
}


def filter_expression(filters: Sequence[Filter]) -> pc.Expression | None:
    """The pyarrow expression of ANDed filters (None: no filter)."""
    expression: pc.Expression | None = None
    for column, op, value in filters:
        if op not in _OPS:
            raise ValueError(f"unsupported filter operator {op!r} (supported: {', '.join(_OPS)})")
        term = _OPS[op](pc.field(column), value)
        expression = term if expression is None else expression & term
    return expression


def _may(low: Any, high: Any, op: str, value: Any) -> bool:
    """Whether some value in [low, high] may satisfy ``op value``."""
    if op in ("=", "=="):
        return bool(low <= value <= high)
    if op == "in":
        return any(low <= v <= high for v in value)
    if op == "<":
        return bool(low < value)
    if op == "<=":
        return bool(low <= value)
    if op == ">":
        return bool(high > value)
    if op == ">=":
        return bool(high >= value)
    return True  # "!=": a file of one value only could be excluded; not worth it


def _every(low: Any, high: Any, op: str, value: Any) -> bool:
    """Whether every value in [low, high] satisfies ``op value``."""
    if op in ("=", "=="):
        return bool(low == value == high)
    if op == "in":
        return bool(low == high and low in value)
    if op == "<":
        return bool(high < value)
    if op == "<=":
        return bool(high <= value)
    if op == ">":
        return bool(low > value)
    if op == ">=":
        return bool(low >= value)
    return bool(high < value or low > value)  # "!="


def may_match(file: DataFile, filters: Sequence[Filter]) -> bool:
    """Whether the file's statistics allow a row matching every filter (unknown statistics: yes)."""
    for column, op, value in filters:
        bounds = file.bounds(column)
        if bounds is None:
            if file.rows is not None and file.nulls.get(column) == file.rows:
                return False  # the column is null on every row: no comparison holds
            continue
        try:
            if not _may(*bounds, op, value):
                return False
        except TypeError:  # a value of another type than the statistics: read the file
            continue
    return True


def all_match(file: DataFile, filters: Sequence[Filter]) -> bool:
    """Whether the file's statistics prove that every row matches every filter (and its row count is known)."""
    if file.rows is None:
        return False
    for column, op, value in filters:
        bounds = file.bounds(column)
        if bounds is None or file.nulls.get(column) != 0:
            return False
        try:
            if not _every(*bounds, op, value):
                return False
        except TypeError:
            return False
    return True


class FileSource(Protocol):
    """Where a scan's files and rows come from (a Delta table's version, or Arrow rows in memory)."""

    schema: pa.Schema

    def files(self) -> list[DataFile]: ...

    def read(self, files: Sequence[DataFile], columns: Sequence[str], where: pc.Expression | None) -> pa.Table: ...


_FORMAT = pads.ParquetFileFormat(default_fragment_scan_options=pads.ParquetFragmentScanOptions(pre_buffer=True))


class DeltaFiles:
    """The data files of one version of a Delta table, with their ``add`` actions' statistics; read by path (local
    files natively, an object store through deltalake's own storage, sizes known: no extra requests)."""

    def __init__(self, table: DeltaTable, storage_options: Mapping[str, str] | None, local_root: str | None) -> None:
        self.table = table
        self.schema = pa.schema(table.schema().to_arrow())
        self.storage_options = dict(storage_options or {})
        self.local_root = local_root
        self._files = _add_actions(table)

    def files(self) -> list[DataFile]:
        return self._files

    def read(self, files: Sequence[DataFile], columns: Sequence[str], where: pc.Expression | None) -> pa.Table:
        if not files:
            return self.schema.empty_table().select(list(columns))
        filesystem: pa_fs.FileSystem
        if self.local_root is not None:
            filesystem = pa_fs.LocalFileSystem()
            paths = [f"{self.local_root}/{unquote(file.path)}" for file in files]
        else:
            handler = DeltaStorageHandler(
                self.table.table_uri, self.storage_options or None, {file.path: file.size for file in files}
            )
            filesystem = pa_fs.PyFileSystem(handler)
            paths = [file.path for file in files]
        fragments = [_FORMAT.make_fragment(path, filesystem=filesystem) for path in paths]
        dataset = pads.FileSystemDataset(fragments, self.schema, _FORMAT, filesystem)
        return dataset.to_table(columns=list(columns), filter=where)


def _add_actions(table: DeltaTable) -> list[DataFile]:
    """The table's data files with the statistics of their ``add`` actions."""
    actions = pa.table(table.get_add_actions(flatten=True))
    names = set(actions.column_names)
    data = actions.to_pylist()
    stats_columns = [name[4:] for name in names if name.startswith("min.")]
    files = []
    for row in data:
        files.append(
            DataFile(
                path=row["path"],
                rows=row.get("num_records"),
                size=int(row.get("size_bytes") or 0),
                low={c: row[f"min.{c}"] for c in stats_columns if row.get(f"min.{c}") is not None},
                high={c: row[f"max.{c}"] for c in stats_columns if f"max.{c}" in names and row[f"max.{c}"] is not None},
                nulls={c: row[f"null_count.{c}"] for c in stats_columns if row.get(f"null_count.{c}") is not None},
            )
        )
    return files


class ArrowFiles:
    """Rows in memory as data files of ``file_rows`` rows each, with exact statistics (the unit tests' tables)."""

    def __init__(self, data: pa.Table, file_rows: int = 1_000) -> None:
        self.schema = data.schema
        self.parts = {
            f"part-{i:05d}": data.slice(start, file_rows) for i, start in enumerate(range(0, len(data), file_rows))
        }
        self._files = [_arrow_stats(path, rows) for path, rows in self.parts.items()]

    def files(self) -> list[DataFile]:
        return self._files

    def read(self, files: Sequence[DataFile], columns: Sequence[str], where: pc.Expression | None) -> pa.Table:
        parts = [self.parts[file.path] for file in files]
        data = pa.concat_tables(parts) if parts else self.schema.empty_table()
        return (data.filter(where) if where is not None else data).select(list(columns))


def _arrow_stats(path: str, rows: pa.Table) -> DataFile:
    low, high, nulls = {}, {}, {}
    for name in rows.column_names:
        column = rows.column(name)
        nulls[name] = column.null_count
        typ = column.type
        if pa.types.is_binary(typ) or pa.types.is_nested(typ) or column.null_count == len(column):
            continue
        bounds = pc.min_max(column)
        low[name], high[name] = bounds["min"].as_py(), bounds["max"].as_py()
    return DataFile(path=path, rows=len(rows), size=rows.nbytes, low=low, high=high, nulls=nulls)


class TableScan:
    """Bounded reads of one table version (see the module doc)."""

    def __init__(self, source: FileSource) -> None:
        self.source = source
        self.files_read: list[str] = []
        self._lock = threading.Lock()

    @property
    def schema(self) -> pa.Schema:
        return self.source.schema

    def _read(self, files: Sequence[DataFile], columns: Sequence[str], filters: Sequence[Filter]) -> pa.Table:
        with self._lock:
            self.files_read.extend(file.path for file in files)
        return self.source.read(files, columns, filter_expression(filters))

    def candidates(self, filters: Sequence[Filter]) -> list[DataFile]:
        """The files whose statistics allow a matching row."""
        return [file for file in self.source.files() if may_match(file, filters)]

    def rows(self, filters: Sequence[Filter], columns: Sequence[str]) -> pa.Table:
        """Every row matching ``filters``, ``columns`` only, from the files that may hold one."""
        return self._read(self.candidates(filters), columns, filters)

    def count(self, filters: Sequence[Filter]) -> int:
        """How many rows match: files proven to match whole counted from their statistics, the others read (only the
        filtered columns)."""
        total, partial = 0, []
        for file in self.candidates(filters):
            if all_match(file, filters):
                total += file.rows or 0
            else:
                partial.append(file)
        if partial:
            columns = sorted({column for column, _, _ in filters}) or [self.schema.names[0]]
            total += self._read(partial, columns, filters).num_rows
        return total

    def newest(self, order: str, filters: Sequence[Filter], limit: int, columns: Sequence[str]) -> pa.Table:
        """The matching rows with the ``limit`` greatest values of ``order`` (and any row tied with the last of
        them), ``columns`` plus ``order``, in no particular order. Files are read newest first, one, then two, four...
        at a time, until ``limit`` rows are found and every file left ends before the ``limit``-th newest."""
        wanted = list(dict.fromkeys([*columns, order]))
        files = sorted(self.candidates(filters), key=lambda f: _newest_first(f, order))
        found: list[pa.Table] = []
        count, threshold, start, step = 0, None, 0, 1
        while start < len(files):
            if threshold is not None:
                bounds = files[start].bounds(order)
                if bounds is not None and bounds[1] < threshold:
                    break  # this file and every later one end before the page's oldest row
            batch = files[start : start + step]
            start, step = start + step, step * 2
            rows = self._read(batch, wanted, filters)
            if rows.num_rows:
                found.append(rows)
                count += rows.num_rows
            if count >= limit:
                data = pa.concat_tables(found)
                threshold = _kth_greatest(data.column(order), limit)
                found, count = [data.filter(pc.greater_equal(data.column(order), threshold))], limit
        if not found:
            return self.schema.empty_table().select(wanted)
        data = pa.concat_tables(found)
        if threshold is not None:
            data = data.filter(pc.greater_equal(data.column(order), threshold))
        return data


def _newest_first(file: DataFile, order: str) -> tuple[int, Any]:
    bounds = file.bounds(order)
    if bounds is None:
        return (0, 0)  # unknown: read first
    high = bounds[1]
    return (1, -high.timestamp() if isinstance(high, dt.datetime) else -high)


def _kth_greatest(column: pa.ChunkedArray, k: int) -> Any:
    """The ``k``-th greatest non-null value of ``column`` (its least when it has fewer)."""
    values = column.drop_null()
    if len(values) == 0:
        return None
    top = pc.select_k_unstable(values, k=min(k, len(values)), sort_keys=[("dummy", "descending")])
    return pc.min(values.take(top)).as_py()
