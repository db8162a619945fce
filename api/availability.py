"""Availability (issue 36, item 3): how much of a window each connector was RUNNING with every task RUNNING, its
failures, their time to recover, restarts, the time paused or stopped, and what is unknown; computed by
:mod:`connect_state.tables.availability` (pure) from ``connector_events``.

* ``GET /connectors/<name>/availability?since=<t>&until=<t>``: one connector, with its timeline (``segments``).
* ``GET /availability?since=<t>&until=<t>``: every connector that existed in the window, added up (connector-time),
  and each one's figures.

The window is ``[since, until)``, epoch milliseconds or ISO-8601 (default: the 7 days until now). 400 for a bad time,
``since`` not before ``until``, or a window wholly before what is kept (``connector_events``' retention; for one
connector also before its first event), saying what is kept; a window partly before it answers that part as
``unknown`` (``before_history``). 404 ``Connector <name> not found`` for a name never seen.

The reads are bounded by their filters: the connector (one connector), the event kinds the replay uses, the Kafka
time before ``until``, and the columns it needs (:mod:`connect_state.tables.scan`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify

from connect_state.api.args import time_arg
from connect_state.api.errors import ConnectRestException
from connect_state.api.lag import watermarks_by_query
from connect_state.api.openapi import (
    ANY,
    INT,
    NULLABLE_INT,
    STRING,
    TIME,
    array_of,
    documented,
    json_answer,
    obj,
    query,
)
from connect_state.api.resources import app_resources, get_settings, get_tables
from connect_state.api.rows import connector_row
from connect_state.connect.rest import connector_not_found_message
from connect_state.core.errors import TableNotFoundError
from connect_state.progress.freshness import query_topics, table_lag
from connect_state.tables import availability as av
from connect_state.tables import history_reads as reads
from connect_state.tables.retention import oldest_answerable, retention_ms
from connect_state.tables.retention_io import iso
from connect_state.tables.schemas import CONNECTOR_EVENTS, DATA_LOSS, epoch_ms, now_ms

bp = Blueprint("availability", __name__)

DEFAULT_WINDOW_MS = 7 * 86_400_000
QUERY = "connector_states"  # the query that writes connector_events
COLUMNS = ["connector", "event", "details", "source", "kafka_partition", "kafka_offset", "kafka_timestamp"]
PARAMS = [query("since", TIME), query("until", TIME)]
FIGURES: dict[str, Any] = {
    "since": INT,
    "until": INT,
    "shares": {"type": "object", "additionalProperties": {"type": "number"}},
    "durations_ms": {"type": "object", "additionalProperties": {"type": "integer"}},
    "unknown_ms": {"type": "object", "additionalProperties": {"type": "integer"}},
    "failures": INT,
    "recovery": obj(count=INT, mean_ms=NULLABLE_INT, worst_ms=NULLABLE_INT, unrecovered=INT),
    "restarts": INT,
}
SEGMENT = obj(start=INT, end=INT, state=STRING, reason={"type": "string", "nullable": True})


def _window() -> tuple[int, int, int]:
    """``since``, ``until`` and now; 400 when ``since`` is not before ``until``."""
    now = now_ms()
    until = time_arg("until")
    until = now if until is None else until
    since = time_arg("since")
    since = until - DEFAULT_WINDOW_MS if since is None else since
    if since >= until:
        raise ConnectRestException(
            400, f"Invalid window: since ({iso(since)}, {since}) must be before until ({iso(until)}, {until})"
        )
    return since, until, now


def _retention_cutoff(until: int, now: int) -> int | None:
    """The oldest time ``connector_events`` still answers for; 400 when the whole window is before it."""
    settings = get_settings()
    oldest = oldest_answerable(settings, CONNECTOR_EVENTS.name, now)
    if oldest is not None and until <= oldest:
        days = retention_ms(settings, CONNECTOR_EVENTS.name) / 86_400_000
        raise ConnectRestException(
            400,
            f"Invalid window: it ends at {iso(until)} ({until}), before the history kept: connector_events keeps "
            f"{days:g} days of history (history.retention.ms); the oldest time still answerable is {iso(oldest)} "
            f"({oldest})",
        )
    return oldest


def _known_until(now: int) -> int | None:
    """After this, the connector-state job has not folded the records yet (None: it has folded them all)."""
    marks = watermarks_by_query().get(QUERY, [])
    offsets, _reason = app_resources().offsets_cache().get(query_topics(QUERY, get_settings(), marks))
    starts, ends = (offsets.starts, offsets.ends) if offsets is not None else (None, None)
    lag = table_lag(CONNECTOR_EVENTS.name, marks, starts, ends, now)
    if lag.records == 0:
        return None
    if lag.age_ms is not None:
        return now - lag.age_ms
    committed = [mark.committed_at_ms for mark in marks if mark.committed_at_ms is not None]
    return max(committed) if committed else None


def _lost(since: int) -> tuple[tuple[int, int], ...]:
    """The stretches the connector-state job lost records in (``data_loss``): from the newest event before the lost
    offsets of that partition to when the loss was detected."""
    settings = get_settings()
    sources = {settings.config_storage_topic: "config", settings.status_storage_topic: "status"}
    try:
        losses = get_tables().rows(DATA_LOSS, filters=[("query", "=", QUERY)])
    except TableNotFoundError:
        return ()
    scan = get_tables().scan(CONNECTOR_EVENTS)
    spans = []
    for loss in losses:
        end = epoch_ms(loss.get("detected_at"))
        if end is None or end <= since:
            continue
        filters = [
            ("source", "=", sources.get(loss["topic"], loss["topic"])),
            ("kafka_partition", "=", loss["partition"]),
            ("kafka_offset", "<", loss["expected_offset"]),
        ]
        before = scan.newest("kafka_timestamp", filters, 1, ["kafka_timestamp"]).column("kafka_timestamp").to_pylist()
        start = max((epoch_ms(t) or since for t in before), default=since)
        spans.append((start, end))
    return tuple(spans)


def _events(connector: str | None, until: int) -> dict[str, list[av.Event]]:
    filters: list[Any] = [("event", "in", list(av.KINDS)), *reads.kafka_time_filters(None, until - 1)]
    if connector is not None:
        filters.insert(0, ("connector", "=", connector))
    scan = get_tables().scan(CONNECTOR_EVENTS)
    return av.events_of_rows(reads.table_rows(scan, CONNECTOR_EVENTS, filters, COLUMNS))


def _coverage(since: int, until: int, now: int) -> av.Coverage:
    cutoff = _retention_cutoff(until, now)
    kept_from = cutoff if cutoff is not None and cutoff > since else None
    return av.Coverage(now, kept_from, _known_until(now), _lost(since))


def _refuse_before_first(connector: str, until: int) -> None:
    """400 when the connector's first event is at or after ``until`` (it has no event before it)."""
    scan = get_tables().scan(CONNECTOR_EVENTS)
    times = scan.rows([("connector", "=", connector)], ["kafka_timestamp"]).column("kafka_timestamp").to_pylist()
    first = min((epoch_ms(t) for t in times if t is not None), default=None)
    if first is not None:
        raise ConnectRestException(
            400,
            f"Invalid window: it ends at {iso(until)} ({until}), before the history kept for connector {connector}: "
            f"it starts at {iso(first)} ({first}), its first record in connector_events (before it, the connector "
            "did not exist or its records are no longer kept)",
        )


def _kept(coverage: av.Coverage) -> dict[str, Any]:
    return {"kept_from": coverage.kept_from, "known_until": coverage.known_until}


@bp.get("/connectors/<connector>/availability")
@documented(
    "The connector's availability over a window, with its timeline",
    {
        "200": json_answer(
            obj(
                connector=STRING,
                **FIGURES,
                kept_from=NULLABLE_INT,
                known_until=NULLABLE_INT,
                segments=array_of(SEGMENT),
            ),
            "Availability",
        )
    },
    400,
    404,
    params=PARAMS,
)
def get_connector_availability(connector: str) -> Response:
    if connector_row(connector) is None:
        raise ConnectRestException(404, connector_not_found_message(connector))
    since, until, now = _window()
    coverage = _coverage(since, until, now)
    events = _events(connector, until).get(connector, [])
    if not events:
        _refuse_before_first(connector, until)
    report = av.connector_availability(events, since, until, coverage)
    return jsonify({"connector": connector, **av.report_json(report), **_kept(coverage)})


@bp.get("/availability")
@documented(
    "Every connector's availability over a window, added up",
    {
        "200": json_answer(
            obj(
                **FIGURES,
                connector_count=INT,
                kept_from=NULLABLE_INT,
                known_until=NULLABLE_INT,
                connectors=array_of(ANY),
            ),
            "Availability",
        )
    },
    400,
    params=PARAMS,
)
def get_availability() -> Response:
    since, until, now = _window()
    coverage = _coverage(since, until, now)
    reports = {
        name: av.connector_availability(events, since, until, coverage)
        for name, events in sorted(_events(None, until).items())
    }
    existed = {name: report for name, report in reports.items() if report.existed}
    summary = av.summarize(since, until, list(existed.values()))
    connectors = []
    for name, report in existed.items():
        figures = av.report_json(report)
        del figures["segments"], figures["since"], figures["until"]
        connectors.append({"connector": name, **figures})
    return jsonify({**summary.as_json(), **_kept(coverage), "connectors": connectors})
