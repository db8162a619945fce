"""Retention of the history tables (issue 33, finding 7): how long each keeps its rows, and which rows a clean-up
deletes. Pure (pyarrow compute, no Delta, Spark or Flask); the deletes are :mod:`connect_state.tables.retention_io`'s
(``deltalake``) and :mod:`connect_state.spark.retention`'s (the jobs' passes between batches).

**The settings.** ``history.retention.ms`` (default 35 days: a month of as-of answers and some margin), overridden per
table by ``history.retention.ms.by.table`` (``<table>=<ms>``; -1 keeps every row), checked every
``history.retention.check.interval.ms`` by the job that writes the table (:attr:`RetentionPolicy.owner`).

**Which rows go.** The *cutoff* is the pass's time minus the table's retention. Every row whose time (:attr:`time`:
the record's Kafka timestamp, or when the row was written) is before the cutoff is deleted, except, per as-of key
(:attr:`key`: the ``(connector, topic)`` of an active topic, the ``(offsets topic, key bytes)`` of a source offset...),
the newest such row, by the order the as-of queries use (:attr:`order`, :mod:`connect_state.tables.history`): it is
the state at the cutoff, so every as-of answer at or after the cutoff is the same after the clean-up as before. A key
whose newest row before the cutoff is a removal (:attr:`removal`: a topic left the active set, an offset's tombstone)
has no state then, and loses that row too. A table without a key (quarantined records, data losses, the audit) loses
every row before the cutoff.

The API refuses (400) an ``at``, ``since`` or ``until`` before :func:`oldest_answerable`: now minus the retention.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from connect_state.core.errors import ConfigError
from connect_state.core.settings import KEEP_FOREVER, Settings
from connect_state.tables.schemas import (
    ACTIVE_TOPICS_HISTORY,
    ALERT_DELIVERIES,
    ALERT_SILENCES,
    ALERTS,
    AUDIT,
    CONNECTOR_EVENTS,
    CONNECTOR_RESTARTS,
    DATA_LOSS,
    HEARTBEATS,
    REJECTED_RECORDS,
    SINK_OFFSETS_HISTORY,
    SOURCE_OFFSETS_HISTORY,
    VERDICT_HISTORY,
    TableSpec,
)

__all__ = [
    "API_OWNER",
    "PERIODIC_OWNERS",
    "POLICIES",
    "SHARED",
    "RetentionPolicy",
    "cutoff_ms",
    "expired_rows",
    "oldest_answerable",
    "owned_by",
    "retention_ms",
    "retentions_line",
    "table_retentions",
]

#: :attr:`RetentionPolicy.owner` of a table every fold query writes (each query's pass cleans it; the deletes are
#: idempotent and a conflict is retried).
SHARED = "*"
#: :attr:`RetentionPolicy.owner` of the tables the API writes (the audit: its spool's flusher cleans it).
API_OWNER = "api"
#: The owners that are periodic passes, not fold queries (the watch, restarts and alerts jobs): they clean only their
#: own tables (they write neither ``rejected_records`` nor ``data_loss``).
PERIODIC_OWNERS = frozenset({"watch", "restarts", "alerts"})
_COORDINATES = ("kafka_partition", "kafka_offset")


@dataclass(frozen=True)
class RetentionPolicy:
    """How a history table is cleaned: its ``time`` column (a TIMESTAMP), the as-of ``key`` (empty: none, every row
    before the cutoff goes) with the ``order`` that follows ``time`` among a key's rows, the ``removal`` that leaves a
    key without state (``(column, value)``), and the ``owner``: the streaming query (checkpoint name) whose job cleans
    it, :data:`SHARED` or :data:`API_OWNER`."""

    spec: TableSpec
    time: str
    owner: str
    key: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    removal: tuple[str, str] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def columns(self) -> list[str]:
        """The columns :func:`expired_rows` needs, then those that identify a row (the table's key) for the delete."""
        names = [self.time, *self.key, *self.order, *([self.removal[0]] if self.removal else []), *self.spec.key]
        return list(dict.fromkeys(names))


POLICIES: tuple[RetentionPolicy, ...] = (
    RetentionPolicy(
        ACTIVE_TOPICS_HISTORY, "kafka_timestamp", "active_topics", ("connector", "topic"), _COORDINATES,
        ("change", "removed"),
    ),
    # The newest event of each kind per connector stays: its last config, deletion (its type, for the history of a
    # deleted connector; the cleanup job's plan), target state and status before the cutoff.
    RetentionPolicy(
        CONNECTOR_EVENTS, "kafka_timestamp", "connector_states", ("connector", "source", "event"), _COORDINATES
    ),
    RetentionPolicy(
        SOURCE_OFFSETS_HISTORY, "kafka_timestamp", "source_offsets", ("connector", "offsets_topic", "key"),
        _COORDINATES, ("change", "removed"),
    ),
    RetentionPolicy(
        SINK_OFFSETS_HISTORY, "kafka_timestamp", "sink_offsets", ("group_id", "topic", "partition"), _COORDINATES,
        ("change", "removed"),
    ),
    # A partition's last heartbeat before the cutoff stays (every record of it: same emission time).
    RetentionPolicy(HEARTBEATS, "emitted_at", "heartbeats", ("connector", "source_key")),
    RetentionPolicy(REJECTED_RECORDS, "seen_at", SHARED),
    RetentionPolicy(DATA_LOSS, "detected_at", SHARED),
    RetentionPolicy(AUDIT, "time", API_OWNER),
    # The periodic jobs' logs (issue 35): a connector's newest verdict change and newest restart before the cutoff
    # stay (its verdict then; the restart series' last request); an alert goes once resolved before the cutoff, a
    # notification once delivered before it (a firing alert and a pending notification stay whatever their age); a
    # silence once it ended before it.
    RetentionPolicy(VERDICT_HISTORY, "at", "watch", ("connector",)),
    RetentionPolicy(CONNECTOR_RESTARTS, "requested_at", "restarts", ("connector",)),
    RetentionPolicy(ALERTS, "updated_at", "alerts", ("id",), removal=("state", "resolved")),
    RetentionPolicy(
        ALERT_DELIVERIES, "created_at", "alerts", ("alert_id", "event", "channel"), removal=("status", "delivered")
    ),
    RetentionPolicy(ALERT_SILENCES, "ends_at", "alerts"),
)  # fmt: skip
_BY_NAME = {policy.name: policy for policy in POLICIES}


def table_retentions(settings: Settings) -> dict[str, int]:
    """Every history table's retention in ms (-1: kept for ever): ``history.retention.ms`` unless
    ``history.retention.ms.by.table`` names the table. A name there that is no history table is a ConfigError."""
    overrides = settings.history_retention_ms_by_table
    unknown = sorted(set(overrides) - _BY_NAME.keys())
    if unknown:
        raise ConfigError(
            f"history.retention.ms.by.table: {unknown[0]!r} is not a history table (tables: {', '.join(_BY_NAME)})"
        )
    return {name: int(overrides.get(name, settings.history_retention_ms)) for name in _BY_NAME}


def retention_ms(settings: Settings, table: str) -> int:
    """The retention of the history table ``table`` (-1: kept for ever)."""
    return table_retentions(settings)[table]


def owned_by(owner: str) -> list[RetentionPolicy]:
    """The policies of the tables ``owner`` cleans: its own, and the shared ones for a fold query."""
    shared = owner != API_OWNER and owner not in PERIODIC_OWNERS
    return [policy for policy in POLICIES if policy.owner == owner or (shared and policy.owner == SHARED)]


def cutoff_ms(now_ms: int, retention: int) -> int | None:
    """The time before which rows go (None: kept for ever)."""
    return None if retention == KEEP_FOREVER else now_ms - retention


def oldest_answerable(settings: Settings, table: str, now_ms: int) -> int | None:
    """The oldest time an as-of or a range query on ``table`` is answered for (None: any time): now minus the
    retention. A pass ran at most one check interval ago, so it deleted nothing at or after this."""
    return cutoff_ms(now_ms, retention_ms(settings, table))


def _same_as_next(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Per position of a sorted column: whether the next value equals it (null equal to null; False for the last)."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n = len(values)
    if n == 0:
        return pa.array([], pa.bool_())
    this, after = values.slice(0, n - 1), values.slice(1)
    equal = pc.fill_null(pc.equal(this, after), False)
    both_null = pc.and_(pc.is_null(this), pc.is_null(after))
    return pa.concat_arrays([pc.or_(equal, both_null), pa.array([False])])


def expired_rows(rows: pa.Table, policy: RetentionPolicy, cutoff: int) -> pa.Table:
    """The rows of ``rows`` (at least :attr:`RetentionPolicy.columns`) that a clean-up at ``cutoff`` (epoch ms)
    deletes: those before the cutoff, but the newest per key (ties in time and order: all of them) unless it is a
    removal (see the module's docstring)."""
    micros = pc.cast(pc.cast(rows.column(policy.time), pa.timestamp("us", tz="UTC")), pa.int64())
    before = pc.fill_null(pc.less(micros, cutoff * 1000), False)  # a row without a time is kept
    old = rows.filter(before)
    if not policy.key or old.num_rows == 0:
        return old
    ranking = [*policy.key, policy.time, *policy.order]
    old = old.take(pc.sort_indices(old, sort_keys=[(name, "ascending") for name in ranking], null_placement="at_start"))
    # In key order, a row is its key's newest when the next row has another key; rows tied with it in time and order
    # are the newest too.
    same_key = _all(_same_as_next(old.column(name)) for name in policy.key)
    same_rank = pc.and_(same_key, _all(_same_as_next(old.column(name)) for name in (policy.time, *policy.order)))
    last_of_key = pc.invert(same_key)
    newest = _tied_with_next(same_rank, last_of_key)
    if policy.removal is not None:
        column, value = policy.removal
        removed = pc.fill_null(pc.equal(old.column(column), value), False)
        # A key's newest row is a removal: the key loses every row before the cutoff.
        gone = _spread_back(pc.and_(last_of_key, removed), same_key)
        newest = pc.and_(newest, pc.invert(gone))
    return old.filter(pc.invert(newest))


def _all(masks: object) -> pa.Array:
    result: pa.Array | None = None
    for mask in masks:  # type: ignore[attr-defined]
        result = mask if result is None else pc.and_(result, mask)
    assert result is not None
    return result


def _tied_with_next(tied: pa.Array, marked: pa.Array) -> pa.Array:
    """``marked``, plus every position tied (``tied[i]``: position i equals i + 1) with a marked one after it."""
    flags = marked.to_pylist()
    ties = tied.to_pylist()
    for i in range(len(flags) - 2, -1, -1):
        if ties[i] and flags[i + 1]:
            flags[i] = True
    return pa.array(flags, pa.bool_())


def _spread_back(marked: pa.Array, same_key: pa.Array) -> pa.Array:
    """``marked`` (a key's last position) spread to every position of the same key before it."""
    return _tied_with_next(same_key, marked)


def retentions_line(retentions: Mapping[str, int]) -> str:
    """The retentions for a log line: ``active_topics_history 35 d, audit for ever``."""
    return ", ".join(
        f"{name} {'for ever' if ms == KEEP_FOREVER else f'{ms / 86_400_000:g} d'}" for name, ms in retentions.items()
    )
