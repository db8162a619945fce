"""How far behind the internal topics' end a table is: the ``X-Connect-State-Lag`` header of every GET (issue 10).

Pure: the API reads the ``watermarks`` table (:data:`connect_state.tables.schemas.WATERMARKS`: per streaming query,
topic and partition, the next offset not yet folded into the query's tables, and when its batch was committed) and asks
Kafka for the topics' start and end offsets; :func:`table_lag` turns them into a :class:`TableLag` per table served, and
:func:`format_lag_header` into the header. The format, one entry per table the answer was read from::

    X-Connect-State-Lag: connectors;records=0;age_ms=0, source_offsets;records=12;age_ms=4100

* ``records``: records of the query's topics not yet folded into the table: per partition, the end offset (the last
  stable offset, as the jobs read ``read_committed``) minus the watermark's next offset (a partition without a
  watermark counts from its log start: nothing folded yet), summed; ``unknown`` when the end offsets could not be
  read (Kafka unreachable within ``api.lag.timeout.ms``);
* ``age_ms``: ``0`` when ``records`` is 0 (the answer is current, as of end offsets at most ``api.lag.cache.ms``
  old); else the milliseconds since the query last committed a batch (the newest ``committed_at`` of its watermarks):
  the answer shows the topics as they were at least that long ago; ``unknown`` when the query never committed one
  (or ``records`` is unknown);
* a table no streaming query folds from Kafka (``connector_deletions``, ``heartbeats``, ``rejected_records``; not in
  :data:`~connect_state.tables.schemas.TABLE_QUERIES`) is listed as ``<table>;untracked``.

Entries are separated by ``", "`` and their parameters by ``";"``, as an RFC 8941 list of tokens with parameters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from connect_state.core.partitions import Partition
from connect_state.core.settings import Settings
from connect_state.tables.schemas import TABLE_QUERIES

HEADER = "X-Connect-State-Lag"
UNKNOWN = "unknown"
UNTRACKED = "untracked"


@dataclass(frozen=True)
class Watermark:
    """One row of the ``watermarks`` table: ``committed_at_ms`` is epoch milliseconds (None when unknown)."""

    query: str
    topic: str
    partition: int
    next_offset: int
    committed_at_ms: int | None = None


@dataclass(frozen=True)
class TableLag:
    """How far behind its topics' end one table is; ``None`` is unknown; ``tracked`` False: no query folds it."""

    table: str
    records: int | None = None
    age_ms: int | None = None
    tracked: bool = True

    @property
    def current(self) -> bool:
        return self.records == 0


def query_topics(query: str, settings: Settings, watermarks: Iterable[Watermark] = ()) -> list[str]:
    """The topics a streaming query folds: its fixed topics (from the settings) and any other topic its watermarks
    name (the source-offsets query also reads connector-specific offsets topics)."""
    fixed = {
        "active_topics": [settings.status_storage_topic],
        "connector_states": [settings.config_storage_topic, settings.status_storage_topic],
        "source_offsets": [settings.offset_storage_topic],
        "sink_offsets": [settings.consumer_offsets_topic],
        "heartbeats": [settings.config_storage_topic, settings.status_storage_topic, settings.offset_storage_topic],
    }.get(query, [])
    named = sorted({mark.topic for mark in watermarks if mark.query == query} - set(fixed))
    return [*fixed, *named]


def records_behind(
    watermarks: Mapping[Partition, int], starts: Mapping[Partition, int], ends: Mapping[Partition, int]
) -> int:
    """Records between each partition's watermark (its log start when it has none) and its end offset, summed."""
    total = 0
    for partition, end in ends.items():
        start = starts.get(partition, 0)
        folded = max(watermarks.get(partition, start), start)
        total += max(end - folded, 0)
    return total


def table_lag(
    table: str,
    watermarks: Sequence[Watermark],
    starts: Mapping[Partition, int] | None,
    ends: Mapping[Partition, int] | None,
    now_ms: int,
) -> TableLag:
    """The lag of ``table`` from every row of the ``watermarks`` table (other queries' rows are ignored) and the
    start and end offsets of its query's topics (None: they could not be read)."""
    query = TABLE_QUERIES.get(table)
    if query is None:
        return TableLag(table, tracked=False)
    if ends is None:
        return TableLag(table)
    mine = [mark for mark in watermarks if mark.query == query]
    positions = {(mark.topic, mark.partition): mark.next_offset for mark in mine}
    records = records_behind(positions, starts or {}, ends)
    if records == 0:
        return TableLag(table, 0, 0)
    committed = [mark.committed_at_ms for mark in mine if mark.committed_at_ms is not None]
    return TableLag(table, records, max(now_ms - max(committed), 0) if committed else None)


def _value(value: int | None) -> str:
    return UNKNOWN if value is None else str(value)


def format_lag_header(lags: Iterable[TableLag]) -> str:
    """The header value: one entry per table, in the order given (see the module docstring)."""
    entries = []
    for lag in lags:
        if not lag.tracked:
            entries.append(f"{lag.table};{UNTRACKED}")
        else:
            entries.append(f"{lag.table};records={_value(lag.records)};age_ms={_value(lag.age_ms)}")
    return ", ".join(entries)


def parse_lag_header(text: str) -> list[TableLag]:
    """The inverse of :func:`format_lag_header` (for clients and tests); ValueError on a malformed value."""
    lags = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        table, *params = [part.strip() for part in entry.split(";")]
        if params == [UNTRACKED]:
            lags.append(TableLag(table, tracked=False))
            continue
        values: dict[str, int | None] = {}
        for param in params:
            name, sep, raw = param.partition("=")
            if not sep or name not in ("records", "age_ms"):
                raise ValueError(f"malformed {HEADER} entry {entry!r}")
            values[name] = None if raw == UNKNOWN else int(raw)
        if set(values) != {"records", "age_ms"}:
            raise ValueError(f"malformed {HEADER} entry {entry!r}")
        lags.append(TableLag(table, values["records"], values["age_ms"]))
    return lags
