"""Reading connect-state's Delta tables with ``deltalake`` (delta-rs): no Spark, no JVM in the request path.

The jobs write the tables described in :mod:`connect_state.tables` (Spark SQL DDL); the API opens them read-only.
Each read opens the table afresh (``DeltaTable(path)`` reads the log from its last checkpoint), so an answer always
reflects the latest commit of the job, and no table object is shared between request threads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError

from connect_state.errors import TableNotFoundError
from connect_state.tables import (
    ACTIVE_TOPICS,
    ACTIVE_TOPICS_HISTORY,
    CONNECTOR_DELETIONS,
    CONNECTOR_EVENTS,
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
    REJECTED_RECORDS.name: "connect-state-active-topics or connect-state-connector-states",
    CONNECTORS.name: "connect-state-connector-states",
    CONNECTOR_EVENTS.name: "connect-state-connector-states",
    SOURCE_OFFSETS.name: "connect-state-offsets",
    SOURCE_OFFSETS_HISTORY.name: "connect-state-offsets",
    SINK_OFFSETS.name: "connect-state-offsets",
    SINK_OFFSETS_HISTORY.name: "connect-state-offsets",
    CONNECTOR_DELETIONS.name: "connect-state-cleanup",
    SOURCE_PARTITION_ACTIVITY.name: "connect-state-heartbeats",
    HEARTBEATS.name: "connect-state-heartbeats",
}


def _split_top_level(text: str) -> list[str]:
    """``text`` split on the commas outside any ``<...>``."""
    parts: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def _struct_field(sql_field: str, sql_type: str) -> pa.Field:
    """One ``name: TYPE`` (or ``name TYPE``) member of a Spark ``STRUCT<...>``."""
    text = sql_field.strip()
    match = re.fullmatch(r"`?([A-Za-z_][A-Za-z0-9_]*)`?\s*(?::\s*|\s+)(.+)", text, flags=re.DOTALL)
    if match is None:
        raise ValueError(f"no Arrow type for the SQL type {sql_type!r}: bad STRUCT field {text!r}")
    return pa.field(match.group(1), arrow_type(match.group(2)), nullable=True)


def arrow_type(sql_type: str) -> pa.DataType:
    """The Arrow type of a Spark SQL DDL type of :mod:`connect_state.tables`.

    Besides the scalar types of :data:`ARROW_TYPES`: ``ARRAY<T>`` is a list of ``T`` and ``STRUCT<a: T, b: U>`` (the
    colon is optional, as in Spark's DDL) a struct; every element and field is nullable, as Spark writes them.
    """
    text = sql_type.strip()
    upper = text.upper()
    if upper in ARROW_TYPES:
        return ARROW_TYPES[upper]
    match = re.fullmatch(r"(ARRAY|STRUCT)\s*<(.*)>", text, flags=re.IGNORECASE | re.DOTALL)
    if match is not None:
        kind, inner = match.group(1).upper(), match.group(2)
        if kind == "ARRAY" and inner.strip():
            return pa.list_(pa.field("element", arrow_type(inner), nullable=True))
        if kind == "STRUCT" and inner.strip():
            return pa.struct([_struct_field(member, sql_type) for member in _split_top_level(inner)])
    raise ValueError(f"no Arrow type for the SQL type {sql_type!r}")


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
