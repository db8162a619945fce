"""Reading connect-state's Delta tables with ``deltalake`` (delta-rs): no Spark, no JVM in the request path.

The jobs write the tables described in :mod:`connect_state.tables` (Spark SQL DDL); the API opens them read-only.
Each read opens the table afresh (``DeltaTable(path)`` reads the log from its last checkpoint), so an answer always
reflects the latest commit of the job, and no table object is shared between request threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError

from connect_state.errors import TableNotFoundError
from connect_state.tables import ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, REJECTED_RECORDS, TableSpec

Filter = tuple[str, str, Any]
"""A pyarrow-style filter, e.g. ``("connector", "=", "foo-source")``; a list of them is ANDed."""

# The Spark SQL types used in connect_state.tables, as Arrow types (Delta stores TIMESTAMP as UTC microseconds).
ARROW_TYPES: dict[str, pa.DataType] = {
    "STRING": pa.string(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "BINARY": pa.binary(),
    "BOOLEAN": pa.bool_(),
    "DOUBLE": pa.float64(),
}

# Which console script creates each table (the job's first run creates it, even when there is nothing to fold).
TABLE_JOBS: dict[str, str] = {
    ACTIVE_TOPICS.name: "connect-state-active-topics",
    ACTIVE_TOPICS_HISTORY.name: "connect-state-active-topics",
    REJECTED_RECORDS.name: "connect-state-active-topics",
}


def arrow_type(sql_type: str) -> pa.DataType:
    """The Arrow type of a Spark SQL DDL type of :mod:`connect_state.tables`."""
    try:
        return ARROW_TYPES[sql_type.strip().upper()]
    except KeyError:
        raise ValueError(f"no Arrow type for the SQL type {sql_type!r}") from None


def arrow_schema(spec: TableSpec) -> pa.Schema:
    """The Arrow schema of a table (all columns nullable, as Spark writes them)."""
    return pa.schema([pa.field(name, arrow_type(sql_type), nullable=True) for name, sql_type in spec.columns])


def missing_table_message(spec: TableSpec, path: Path) -> str:
    """What the API says when a table has not been created yet."""
    job = TABLE_JOBS.get(spec.name)
    created_by = f"the {job} job" if job else "the job that writes it"
    return (
        f"Delta table {spec.name} not found at {path}: it is created by {created_by}; "
        "start it (or run it once with --available-now) against the same delta.root"
    )


class TableReader:
    """Reads rows of the Delta tables under ``delta_root``."""

    def __init__(self, delta_root: str | Path) -> None:
        self.delta_root = Path(delta_root)

    def path(self, spec: TableSpec) -> Path:
        return self.delta_root / spec.name

    def table(self, spec: TableSpec) -> DeltaTable:
        """The table's latest version; raises TableNotFoundError when it does not exist."""
        path = self.path(spec)
        try:
            return DeltaTable(path)
        except DeltaTableNotFoundError:
            raise TableNotFoundError(missing_table_message(spec, path)) from None

    def rows(
        self,
        spec: TableSpec,
        filters: Sequence[Filter] | None = None,
        columns: Sequence[str] | None = None,
    ) -> list[dict[str, Any]]:
        """The rows matching every filter, as dicts of the requested columns (default: all of the spec's)."""
        selected = list(columns) if columns is not None else spec.column_names
        data = self.table(spec).to_pyarrow_table(columns=selected, filters=list(filters) if filters else None)
        return data.to_pylist()
