"""The history queries' reads (issue 33, finding 7), bounded by their filters and page before they read: the filters
go to the Delta scan (:class:`connect_state.tables.scan.TableScan`: files pruned by their statistics, rows filtered
in the Parquet reader), only the columns a query orders by are read for every matching row, and the wide columns
(an event's details, a record's bytes) only for the rows of the page. No Flask, no Spark.

The views (:mod:`connect_state.api.history`, :mod:`connect_state.api.heartbeats`) answer from these rows as they did
from whole tables: same order, same totals.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from connect_state.tables.scan import Filter, TableScan
from connect_state.tables.schemas import CONNECTOR_EVENTS, HEARTBEATS, REJECTED_RECORDS, TableSpec

__all__ = ["at_or_before", "events_page", "kafka_time_filters", "newest_heartbeats", "rejected_page", "table_rows"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
EVENT_ORDER = ["kafka_timestamp", "config_last", "kafka_partition", "kafka_offset"]
EVENT_KEY = ["source", "kafka_partition", "kafka_offset", "event"]
REJECTED_ORDER = ["topic", "partition", "offset"]


def as_time(ms: int) -> datetime:
    """Epoch milliseconds as a TIMESTAMP column's value."""
    return EPOCH + timedelta(milliseconds=ms)


def kafka_time_filters(since: int | None, until: int | None, column: str = "kafka_timestamp") -> list[Filter]:
    """``column`` (a TIMESTAMP) at or after ``since`` and at or before ``until`` (epoch ms, truncated), when given."""
    filters: list[Filter] = []
    if since is not None:
        filters.append((column, ">=", as_time(since)))
    if until is not None:
        filters.append((column, "<", as_time(until + 1)))
    return filters


def at_or_before(at: int | None) -> list[Filter]:
    """An as-of query's filter: the records at or before ``at`` (None: every record)."""
    return kafka_time_filters(None, at)


def table_rows(
    scan: TableScan, spec: TableSpec, filters: Sequence[Filter], columns: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """The rows matching ``filters`` as dicts of ``columns`` (default: every column of ``spec``)."""
    names = list(columns) if columns is not None else spec.column_names
    return scan.rows(filters, names).select(names).to_pylist()


def _page_of(keys: pa.Table, order: list[str], offset: int, limit: int) -> pa.Table:
    """The rows of ``keys`` at ``offset`` .. ``offset + limit`` in ``order`` (ascending, nulls first as 0 would be)."""
    indices = pc.sort_indices(keys, sort_keys=[(name, "ascending") for name in order], null_placement="at_start")
    return keys.take(indices[offset : offset + limit])


def _with_wide_columns(
    scan: TableScan, page: pa.Table, filters: list[Filter], by: str, key: list[str], columns: list[str]
) -> list[dict[str, Any]]:
    """``page``'s rows (in its order) with every column of ``columns``, read for the page's rows only (``by`` in the
    page's values narrows the scan; ``key`` identifies a row)."""
    if page.num_rows == 0:
        return []
    narrowed = filters
    if page.column(by).null_count == 0:
        narrowed = [*filters, (by, "in", pc.unique(page.column(by)).to_pylist())]
    wide = scan.rows(narrowed, columns)
    found = {tuple(row[name] for name in key): row for row in wide.to_pylist()}
    return [found[tuple(row[name] for name in key)] for row in page.select(key).to_pylist()]


def events_page(
    scan: TableScan, connector: str, kinds: Sequence[str], since: int | None, until: int | None, offset: int, limit: int
) -> tuple[int, list[dict[str, Any]]]:
    """A connector's ``connector_events`` matching the kinds and Kafka times, ordered by Kafka timestamp, config
    records before status records, partition and offset: how many, and the rows at ``offset`` .. ``offset + limit``."""
    filters: list[Filter] = [("connector", "=", connector)]
    if kinds:
        filters.append(("event", "in", list(kinds)))
    filters += kafka_time_filters(since, until)
    keys = scan.rows(filters, ["kafka_timestamp", *EVENT_KEY])
    keys = keys.append_column("config_last", pc.not_equal(keys.column("source"), "config"))
    page = _page_of(keys, EVENT_ORDER, offset, limit)
    rows = _with_wide_columns(scan, page, filters, "kafka_offset", EVENT_KEY, CONNECTOR_EVENTS.column_names)
    return keys.num_rows, rows


def rejected_page(scan: TableScan, topic: str | None, offset: int, limit: int) -> tuple[int, list[dict[str, Any]]]:
    """The quarantined records (of ``topic`` when given) ordered by topic, partition and offset: how many, and the
    rows at ``offset`` .. ``offset + limit``."""
    filters: list[Filter] = [("topic", "=", topic)] if topic else []
    keys = scan.rows(filters, REJECTED_ORDER)
    page = _page_of(keys, REJECTED_ORDER, offset, limit)
    rows = _with_wide_columns(scan, page, filters, "offset", REJECTED_ORDER, REJECTED_RECORDS.column_names)
    return keys.num_rows, rows


def newest_heartbeats(scan: TableScan, connector: str, limit: int) -> list[dict[str, Any]]:
    """A connector's latest ``limit`` heartbeat rows, newest first (by emission time, then record index)."""
    newest = scan.newest("emitted_at", [("connector", "=", connector)], limit, HEARTBEATS.column_names)
    rows = newest.select(HEARTBEATS.column_names).to_pylist()
    rows.sort(key=lambda r: (r["emitted_at"], r["record_index"] or 0), reverse=True)
    return rows[:limit]
