"""History that Connect cannot answer (issue 14), from the tables' history rows (:mod:`connect_state.tables.history`).

* ``GET /connectors/<name>/events?kind=<event>&since=<t>&until=<t>&limit=<n>&offset=<n>``: the connector's timeline
  from ``connector_events`` (state changes, config changes, task commits, deletions), oldest first, paged
  (``limit`` 1..1000, default 100) and filtered by kind (repeatable) and Kafka time (``since`` / ``until``
  inclusive). Times are epoch milliseconds or ISO-8601.
* ``GET /connectors/<name>/history/topics?at=<t>``: its active topics as of ``t`` (default: now), from
  ``active_topics_history``.
* ``GET /connectors/<name>/history/offsets?at=<t>``: its offsets as of ``t``, from ``source_offsets_history`` or, for
  a sink, its consumer group's ``sink_offsets_history``.
* ``GET /connectors/<name>/history/offsets/partition?partition=<json>``: every offset record of one partition (a
  source partition map, or ``{"kafka_topic":...,"kafka_partition":...}`` for a sink).
* ``GET /connectors/<name>/history/configs``: the config versions with what changed between them, secrets redacted
  (:func:`connect_state.security.redaction.redact_config`, patterns from ``api.redact.patterns``).
* ``GET /topics/<topic>/connectors``: which connectors use or used a topic, first and last seen.
* ``GET /rejected-records?topic=<t>&limit=<n>&offset=<n>``: the quarantined records (``rejected_records``), key and
  value base64, values redacted for a reader without ``admin`` (:mod:`connect_state.api.redacted_records`).

404 ``"Connector <name> not found"`` when no ``connectors`` row was ever written for the name (deleted connectors
keep theirs); 400 with Connect's error body for a bad parameter; 503 while a table does not exist yet.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from flask import Blueprint, Response, jsonify, request

from connect_state.api.errors import ConnectRestException
from connect_state.api.openapi import (
    ANY,
    BOOLEAN,
    NULLABLE_INT,
    PAGING,
    STRING,
    TIME,
    array_of,
    connector_answer,
    documented,
    json_answer,
    obj,
    page_of,
    query,
    query_list,
    ref,
)
from connect_state.api.redacted_records import redact_rejected_records
from connect_state.api.resources import get_settings, get_tables
from connect_state.api.retained import kept_time_arg
from connect_state.api.rows import connector_row
from connect_state.connect.offset_stores import connector_consumer_group
from connect_state.connect.rest import connector_not_found_message
from connect_state.folds.connector_states import EVENTS
from connect_state.security.redaction import redact_config, settings_patterns
from connect_state.tables import history
from connect_state.tables import history_reads as reads
from connect_state.tables.scan import Filter, TableScan
from connect_state.tables.schemas import (
    ACTIVE_TOPICS,
    ACTIVE_TOPICS_HISTORY,
    CONNECTOR_EVENTS,
    REJECTED_RECORDS,
    SINK_OFFSETS_HISTORY,
    SOURCE_OFFSETS_HISTORY,
    TableSpec,
    epoch_ms,
)

bp = Blueprint("history", __name__)

MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
CONFIG_EVENTS = ("created", "reconfigured", "deleted")


def _bad(message: str) -> ConnectRestException:
    return ConnectRestException(400, message)


def _int_arg(name: str, default: int, low: int, high: int) -> int:
    text = request.args.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise _bad(f"Invalid {name} {text!r}: expected an integer from {low} to {high}")
    return value


def _page() -> tuple[int, int]:
    return _int_arg("limit", DEFAULT_LIMIT, 1, MAX_LIMIT), _int_arg("offset", 0, 0, 2**31 - 1)


def _known_row(connector: str) -> dict[str, Any]:
    row = connector_row(connector)
    if row is None:
        raise ConnectRestException(404, connector_not_found_message(connector))
    return row


def _scan(spec: TableSpec) -> TableScan:
    return get_tables().scan(spec)


def _events(connector: str, kinds: Sequence[str]) -> list[dict[str, Any]]:
    filters = [("connector", "=", connector), ("event", "in", list(kinds))]
    return reads.table_rows(_scan(CONNECTOR_EVENTS), CONNECTOR_EVENTS, filters)


@bp.get("/connectors/<connector>/events")
@documented(
    "The connector's event timeline, oldest first",
    {"200": json_answer(page_of("events", ref("Event"), connector=STRING), "A page of events")},
    400,
    404,
    params=[query_list("kind", list(EVENTS)), query("since", TIME), query("until", TIME), *PAGING],
)
def get_events(connector: str) -> Response:
    _known_row(connector)
    kinds = request.args.getlist("kind")
    unknown = [k for k in kinds if k not in EVENTS]
    if unknown:
        raise _bad(f"Unknown event kind {unknown[0]!r}: expected one of {', '.join(EVENTS)}")
    since, until = kept_time_arg("since", CONNECTOR_EVENTS), kept_time_arg("until", CONNECTOR_EVENTS)
    limit, offset = _page()
    total, rows = reads.events_page(_scan(CONNECTOR_EVENTS), connector, kinds, since, until, offset, limit)
    page = [
        {
            "event": row["event"],
            "details": json.loads(row["details"]) if row.get("details") else {},
            "source": row["source"],
            "kafka_partition": row["kafka_partition"],
            "kafka_offset": row["kafka_offset"],
            "kafka_timestamp": epoch_ms(row["kafka_timestamp"]) or 0,
        }
        for row in rows
    ]
    for event in page:  # configs in details may hold secrets
        details = event["details"]
        if isinstance(details, dict) and isinstance(details.get("config"), dict):
            event["details"] = {**details, "config": _redact(details["config"])}
    next_offset = offset + limit if offset + limit < total else None
    return jsonify(
        {
            "connector": connector,
            "total": total,
            "offset": offset,
            "limit": limit,
            "next_offset": next_offset,
            "events": page,
        }
    )


def _patterns() -> Any:
    return settings_patterns(get_settings())


def _redact(config: dict[str, object]) -> dict[str, object] | None:
    return redact_config(config, _patterns())


@bp.get("/connectors/<connector>/history/topics")
@documented(
    "Active topics as of a time",
    {"200": json_answer(connector_answer(at=NULLABLE_INT, topics=array_of(STRING)), "Topics")},
    400,
    404,
    params=[query("at", TIME)],
)
def get_topics_as_of(connector: str) -> Response:
    _known_row(connector)
    at = kept_time_arg("at", ACTIVE_TOPICS_HISTORY)
    filters = [("connector", "=", connector), *reads.at_or_before(at)]
    rows = reads.table_rows(_scan(ACTIVE_TOPICS_HISTORY), ACTIVE_TOPICS_HISTORY, filters)
    return jsonify({"connector": connector, "at": at, "topics": history.topics_as_of(rows, at)})


def _is_sink(connector: str, row: dict[str, Any]) -> bool:
    if row.get("type") in ("sink", "source"):
        return bool(row["type"] == "sink")
    # Deleted (no config left): the type its deletion recorded.
    for event in _events(connector, ["deleted"]):
        if event.get("details"):
            return bool(json.loads(event["details"]).get("connector_type") == "sink")
    return False


def _sink_rows(connector: str, row: dict[str, Any], filters: Sequence[Filter]) -> list[dict[str, Any]]:
    config = json.loads(row["config"]) if row.get("config") else None
    group = connector_consumer_group(connector, config)
    return reads.table_rows(_scan(SINK_OFFSETS_HISTORY), SINK_OFFSETS_HISTORY, [("group_id", "=", group), *filters])


def _source_rows(connector: str, filters: Sequence[Filter]) -> list[dict[str, Any]]:
    spec = SOURCE_OFFSETS_HISTORY
    return reads.table_rows(_scan(spec), spec, [("connector", "=", connector), *filters])


@bp.get("/connectors/<connector>/history/offsets")
@documented(
    "Offsets as of a time",
    {"200": json_answer(connector_answer(at=NULLABLE_INT, offsets=array_of(ref("HistoryOffset"))), "Offsets")},
    400,
    404,
    params=[query("at", TIME)],
)
def get_offsets_as_of(connector: str) -> Response:
    row = _known_row(connector)
    sink = _is_sink(connector, row)
    at = kept_time_arg("at", SINK_OFFSETS_HISTORY if sink else SOURCE_OFFSETS_HISTORY)
    if sink:
        offsets = history.sink_offsets_as_of(_sink_rows(connector, row, reads.at_or_before(at)), at)
    else:
        offsets = history.source_offsets_as_of(_source_rows(connector, reads.at_or_before(at)), at)
    return jsonify({"connector": connector, "at": at, "offsets": offsets})


@bp.get("/connectors/<connector>/history/offsets/partition")
@documented(
    "One partition's offset history",
    {
        "200": json_answer(
            connector_answer(
                partition={"type": "object"},
                history=array_of(obj(change=STRING, offset=ANY, kafka_timestamp=NULLABLE_INT)),
            ),
            "History",
        )
    },
    400,
    404,
    params=[query("partition", STRING, required=True, description="the partition as JSON")],
)
def get_partition_history(connector: str) -> Response:
    row = _known_row(connector)
    text = request.args.get("partition")
    try:
        partition = json.loads(text) if text is not None else None
    except ValueError:
        partition = None
    if not isinstance(partition, dict):
        raise _bad(
            "The partition parameter must be a JSON object (a source partition, or a sink's "
            '{"kafka_topic":...,"kafka_partition":...})'
        )
    if _is_sink(connector, row):
        topic, number = partition.get("kafka_topic"), partition.get("kafka_partition")
        if not isinstance(topic, str) or not isinstance(number, int) or isinstance(number, bool):
            raise _bad('A sink partition is {"kafka_topic":<string>,"kafka_partition":<integer>}')
        rows = _sink_rows(connector, row, [("topic", "=", topic), ("partition", "=", number)])
        changes = history.offset_history(rows, sink=True)
    else:
        rows = [
            r for r in _source_rows(connector, []) if r.get("partition") and json.loads(r["partition"]) == partition
        ]
        changes = history.offset_history(rows, sink=False)
    return jsonify({"connector": connector, "partition": partition, "history": changes})


@bp.get("/connectors/<connector>/history/configs")
@documented(
    "Config versions with diffs, secrets redacted",
    {"200": json_answer(connector_answer(versions=array_of(ref("ConfigVersion"))), "Versions")},
    404,
)
def get_config_versions(connector: str) -> Response:
    _known_row(connector)
    versions = history.config_versions(_events(connector, CONFIG_EVENTS), _patterns())
    return jsonify({"connector": connector, "versions": versions})


@bp.get("/topics/<topic>/connectors")  # a Kafka topic name has no slash
@documented(
    "Which connectors use or used a topic",
    {
        "200": json_answer(
            obj(
                topic=STRING,
                connectors=array_of(
                    obj(connector=STRING, first_seen=NULLABLE_INT, last_seen=NULLABLE_INT, active=BOOLEAN)
                ),
            ),
            "Connectors",
        )
    },
)
def get_topic_connectors(topic: str) -> Response:
    tables = get_tables()
    spec = ACTIVE_TOPICS_HISTORY
    rows = reads.table_rows(_scan(spec), spec, [("topic", "=", topic)], ["connector", "kafka_timestamp"])
    active = tables.rows(ACTIVE_TOPICS, filters=[("topic", "=", topic)], columns=["connector"])
    return jsonify({"topic": topic, "connectors": history.topic_usage(rows, active)})


def _b64(value: bytes | None) -> str | None:
    return base64.b64encode(value).decode("ascii") if value is not None else None


@bp.get("/rejected-records")
@documented(
    "Quarantined records of the internal topics",
    {"200": json_answer(page_of("records", ref("RejectedRecord")), "A page of records")},
    400,
    params=[query("topic", STRING), *PAGING],
)
def get_rejected_records() -> Response:
    limit, offset = _page()
    total, rows = reads.rejected_page(_scan(REJECTED_RECORDS), request.args.get("topic"), offset, limit)
    page = [
        {
            "topic": r["topic"],
            "partition": r["partition"],
            "offset": r["offset"],
            "key": _b64(r["key"]),
            "value": _b64(r["value"]),
            "reason": r["reason"],
            "seen_at": epoch_ms(r["seen_at"]),
        }
        for r in rows
    ]
    page = redact_rejected_records(page)  # issue 33
    next_offset = offset + limit if offset + limit < total else None
    return jsonify({"total": total, "offset": offset, "limit": limit, "next_offset": next_offset, "records": page})
