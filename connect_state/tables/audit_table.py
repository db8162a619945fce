"""The Delta table ``audit`` (:data:`connect_state.tables.schemas.AUDIT`), fed from the API's audit spool file.

The API (:mod:`connect_state.api.audit`) appends one JSON line per write or refusal to the spool; :class:`AuditTable`
appends the lines past its mark (``<file>.flushed``: byte offset and inode) to the table with ``deltalake``, skipping
ids the table already has, then moves the mark, and answers the table's rows plus the spool's unflushed ones. No Flask
and no Spark here.

``GET /audit``'s page (:meth:`AuditTable.page`) is bounded by its filters and page before anything is read
(:class:`connect_state.tables.scan.TableScan`): rows are appended in time order, one data file per flush, so the newest
page is in the newest file or two, found from the files' ``time`` statistics; the total adds up the row counts of the
files every row of which matches, reading only the filtered columns of the others. The flusher compacts the table
(:meth:`AuditTable.compact`), so that the files past flushes left are few, each covering its own stretch of time.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from connect_state.core.errors import TableNotFoundError
from connect_state.core.settings import Settings
from connect_state.core.storage import deltalake_options
from connect_state.tables.compaction import Compacted, compact, plan
from connect_state.tables.reader import TableReader
from connect_state.tables.retention import RetentionPolicy
from connect_state.tables.retention_io import Cleaned, clean_table
from connect_state.tables.scan import Filter, TableScan, read_filtered
from connect_state.tables.schemas import AUDIT, iso_utc

__all__ = ["AuditQuery", "AuditTable", "audit_time", "from_table_row", "iso_time", "row_id", "to_table_rows"]


def row_id(row: Mapping[str, Any], line: str) -> str:
    """A row's id; a line written before rows had ids gets one derived from its bytes (stable across replays)."""
    value = row.get("id")
    return value if isinstance(value, str) and value else hashlib.sha256(line.encode("utf-8")).hexdigest()[:32]


def audit_time(text: str) -> int:
    """An audit row's ``time`` (ISO 8601, ``Z`` or an offset; naive is UTC) in epoch microseconds."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    delta = parsed - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def iso_time(value: datetime) -> str:
    """An audit row's time: UTC ISO-8601 to the microsecond, with ``Z``."""
    return iso_utc(value, "microseconds") or ""


def _json_or_none(value: object) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def to_table_rows(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Audit rows (the JSON form) as the table's Arrow rows."""
    columns: dict[str, list[Any]] = {name: [] for name in AUDIT.column_names}
    for row in rows:
        for name in AUDIT.column_names:
            value = row.get(name)
            if name == "time":
                value = audit_time(str(value))
            elif name in ("body", "written"):
                value = _json_or_none(value)
            elif name == "status":  # a hand-edited line must not block the spool
                value = value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1000 else None
            elif name == "repeated":
                value = value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31 else None
            elif value is not None:
                value = str(value)
            columns[name].append(value)
    return pa.Table.from_pydict(columns, schema=AUDIT.schema)


def from_table_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A table row in the JSON form of a spool line."""
    out = dict(row)
    at = out.get("time")
    out["time"] = iso_time(at) if isinstance(at, datetime) else at
    for name in ("body", "written"):
        text = out.get(name)
        out[name] = json.loads(text) if isinstance(text, str) else text
    if out["written"] is None:
        out["written"] = []
    return out


@dataclass(frozen=True)
class AuditQuery:
    """``GET /audit``'s filters (``since``/``until`` epoch ms, inclusive) and page size (the newest ``limit``)."""

    connector: str | None = None
    principal: str | None = None
    outcome: str | None = None
    since: int | None = None
    until: int | None = None
    limit: int = 100

    def table_filters(self) -> list[Filter]:
        """The filters on the table's columns: a row's ``time`` in epoch ms (truncated) within ``since``..``until``."""
        filters: list[Filter] = [
            (column, "=", value)
            for column, value in (
                ("connector", self.connector),
                ("principal", self.principal),
                ("outcome", self.outcome),
            )
            if value is not None
        ]
        if self.since is not None:
            filters.append(("time", ">=", _EPOCH + timedelta(milliseconds=self.since)))
        if self.until is not None:
            filters.append(("time", "<", _EPOCH + timedelta(milliseconds=self.until + 1)))
        return filters

    def matches(self, row: Mapping[str, Any]) -> bool:
        """Whether a row in the JSON form (a spool line's) matches."""
        for column, value in (("connector", self.connector), ("principal", self.principal), ("outcome", self.outcome)):
            if value is not None and row.get(column) != value:
                return False
        at = audit_time(str(row["time"])) // 1000
        return (self.since is None or at >= self.since) and (self.until is None or at <= self.until)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class AuditTable:
    """The Delta table ``audit`` fed from the spool file ``spool`` (see the module's docstring)."""

    def __init__(self, settings: Settings, spool: Path) -> None:
        self.reader = TableReader(settings.delta_root, deltalake_options(settings))
        self.location = str(self.reader.path(AUDIT))
        self.spool = spool
        self.mark = spool.with_name(spool.name + ".flushed")
        self.lock_file = spool.with_name(spool.name + ".lock")
        self._lock = threading.Lock()

    def forked(self) -> None:
        self._lock = threading.Lock()
        self.reader = TableReader(self.reader.delta_root, self.reader.storage_options)

    def flushed_offset(self) -> int:
        """The spool's byte offset up to which every line is in the table: the mark ``"<offset> <inode>"``, 0 when
        the spool is another file than the one marked (rotated) or shorter than the mark."""
        try:
            offset_text, _, inode_text = self.mark.read_text().strip().partition(" ")
            offset, inode = int(offset_text or 0), int(inode_text or -1)
            stat = self.spool.stat()
        except (OSError, ValueError):
            return 0
        return offset if inode == stat.st_ino and 0 <= offset <= stat.st_size else 0

    def spooled(self, start: int) -> tuple[list[dict[str, Any]], int]:
        """The spool's complete lines from byte ``start`` as rows (with ids), and the offset after the last one."""
        try:
            with self.spool.open("rb") as file:
                file.seek(start)
                data = file.read()
        except FileNotFoundError:
            return [], start
        end = data.rfind(b"\n") + 1
        rows = []
        for raw in data[:end].splitlines():
            line = raw.decode("utf-8", errors="replace")
            try:
                row = json.loads(line)
                audit_time(row["time"])
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a torn line after a crash (ended by the next start)
            if isinstance(row, dict):
                row["id"] = row_id(row, line)
                rows.append(row)
        return rows, start + end

    def ids_in_table(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        try:
            table = self.reader.table(AUDIT)
        except TableNotFoundError:
            return set()
        found = read_filtered(table.to_pyarrow_dataset(), ["id"], [("id", "in", list(ids))])
        return {value for value in found.column("id").to_pylist() if value is not None}

    def flush(self) -> int:
        """Append the spool's unflushed rows the table does not have yet, then move the mark; the rows appended."""
        if not self.spool.exists():
            return 0
        with self._lock, self.lock_file.open("a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            start = self.flushed_offset()
            rows, end = self.spooled(start)
            present = self.ids_in_table([row["id"] for row in rows])
            new: dict[str, dict[str, Any]] = {}
            for row in rows:
                if row["id"] not in present:
                    new.setdefault(row["id"], row)
            if new:
                write_deltalake(
                    self.location,
                    to_table_rows(list(new.values())),
                    mode="append",
                    schema_mode="merge",  # a table written before a column was added (repeated) gains it
                    storage_options=self.reader.storage_options or None,
                )
            if end != start:
                temporary = self.mark.with_name(self.mark.name + ".tmp")
                with temporary.open("w") as out:
                    out.write(f"{end} {self.spool.stat().st_ino}")
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(temporary, self.mark)
            return len(new)

    def clean(self, policy: RetentionPolicy, cutoff: int) -> Cleaned:
        """The retention's clean-up of the table (:func:`connect_state.tables.retention_io.clean_table`: the rows
        before ``cutoff``), under the spool's ``flock``, so that no process's flush interleaves."""
        with self._lock, self.lock_file.open("a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            return clean_table(self.reader.delta_root, policy, cutoff, self.reader.storage_options)

    def compact(self, small_files: int, file_bytes: int) -> Compacted | None:
        """The table's compaction (:mod:`connect_state.tables.compaction`: more than ``small_files`` small files
        older than the newest few rewritten as files of about ``file_bytes`` sorted by time, then a vacuum), under the
        spool's ``flock`` so that no process's flush interleaves; None: not due (a look at the file list only)."""
        if small_files <= 0:
            return None
        with self._lock, self.lock_file.open("a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                scan = self.reader.scan(AUDIT)
            except TableNotFoundError:
                return None
            stretch = plan(scan.source.stats(), "time", small_files, file_bytes)
            if stretch is None:
                return None
            return compact(scan, self.location, stretch, "time", file_bytes, self.reader.storage_options)

    def page(self, query: AuditQuery) -> tuple[int, list[dict[str, Any]]]:
        """How many rows match ``query`` (the table's and the spool's unflushed ones), and the newest ``limit`` of
        them, oldest first; the table read bounded by the query (see the module doc)."""
        start = self.flushed_offset()  # before the table: a flush in between leaves rows in both, deduplicated
        try:
            scan: TableScan | None = self.reader.scan(AUDIT)
        except TableNotFoundError:
            scan = None
        filters = query.table_filters()
        stored: list[dict[str, Any]] = []
        total = 0
        if scan is not None:
            total = scan.count(filters)
            newest = scan.newest("time", filters, query.limit, AUDIT.column_names)
            stored = [from_table_row(row) for row in newest.select(AUDIT.column_names).to_pylist()]
        pending = self._unflushed(scan, start)
        matching = [row for row in pending if query.matches(row)]
        rows = sorted([*stored, *matching], key=lambda row: audit_time(row["time"]))
        return total + len(matching), rows[-query.limit :] if query.limit else []

    def _unflushed(self, scan: TableScan | None, start: int) -> list[dict[str, Any]]:
        """The spool's rows past the mark that the table does not have (looked up in the files as new as they)."""
        pending = self.spooled(start)[0]
        if scan is None or not pending:
            return pending
        oldest = min(audit_time(row["time"]) for row in pending)
        since = _EPOCH + timedelta(microseconds=oldest)
        found = scan.rows([("time", ">=", since), ("id", "in", [row["id"] for row in pending])], ["id"])
        ids = set(found.column("id").to_pylist())
        return [row for row in pending if row["id"] not in ids]

    def rows(self) -> list[dict[str, Any]]:
        """Every row: the table's, then the spool's unflushed ones the table does not have, oldest first."""
        start = self.flushed_offset()  # before the table: a flush in between leaves rows in both, deduplicated
        try:
            stored = [from_table_row(row) for row in self.reader.rows(AUDIT)]
        except TableNotFoundError:
            stored = []
        ids = {row["id"] for row in stored}
        pending = [row for row in self.spooled(start)[0] if row["id"] not in ids]
        return sorted([*stored, *pending], key=lambda row: audit_time(row["time"]))
