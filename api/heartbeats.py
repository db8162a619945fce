"""KIP-910 heartbeats of a connector's idle source partitions, from the heartbeats job's tables.

``GET /connectors/<name>/heartbeats[?limit=N]`` -> 200::

    {"name": "demo-source",
     "partitions": [{"partition": {"filename": "/in.txt"}, "offset": {"position": 42},
                     "last_moved_at": 1767225600000, "idle_ms": 61000, "last_heartbeat_at": 1767225660000,
                     "next_heartbeat_at": 1767225720000, "heartbeat_interval_ms": 60000,
                     "heartbeat_topic": "connect-heartbeats", "eligible": true, "reason": null}],
     "heartbeats": [{"partition": {"filename": "/in.txt"}, "outcome": "produced", "topic": "connect-heartbeats",
                     "kafka_partition": 0, "kafka_offset": 7, "key": "/in.txt", "value": "{...}",
                     "committed_offset": {"position": 42}, "error": null, "idle_ms": 60012,
                     "emitted_at": 1767225660000}]}

``partitions`` (from ``source_partition_activity``, sorted by partition) lists every source partition of the
connector that has an offset, with its idle age computed now (``idle_ms``: now minus ``last_moved_at``, the Kafka
timestamp of the offset record that last changed it), the effective interval and topic, and whether the connector is
eligible (``reason`` says why not). ``next_heartbeat_at`` is when the next heartbeat is due (null when not eligible).
``heartbeats`` (from ``heartbeats``) are the latest ``limit`` (default 20, at most 1000) heartbeat rows, newest first;
keys and values are shown as UTF-8 text (undecodable bytes replaced). Times are epoch milliseconds, as in Connect's
own entities. A connector without offsets (or unknown) has empty lists, as ``GET /connectors/<name>/topics`` answers
unknown connectors; ``limit`` that is not an integer in 1..1000 gives 400.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, Response, jsonify

from connect_state.api.args import limit_arg
from connect_state.api.openapi import ANY, documented, json_answer
from connect_state.api.resources import get_tables
from connect_state.heartbeats.fold import due_at, idle_ms
from connect_state.tables.history_reads import newest_heartbeats
from connect_state.tables.schemas import HEARTBEATS, SOURCE_PARTITION_ACTIVITY, epoch_ms, now_ms

bp = Blueprint("heartbeats", __name__, url_prefix="/connectors")

DEFAULT_LIMIT = 20
MAX_LIMIT = 1000


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _text(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", errors="replace")


def partition_view(row: dict[str, Any], now: int) -> dict[str, Any]:
    """One ``partitions`` entry from a ``source_partition_activity`` row."""
    last_moved = epoch_ms(row["last_moved_at"])
    last_heartbeat = epoch_ms(row["last_heartbeat_at"])
    interval = row["heartbeat_interval_ms"] or 0
    next_at = due_at(last_moved, last_heartbeat, interval) if row["eligible"] and last_moved is not None else None
    return {
        "partition": _json(row["partition"]),
        "offset": _json(row["offset"]),
        "last_moved_at": last_moved,
        "idle_ms": idle_ms(last_moved, now) if last_moved is not None else None,
        "last_heartbeat_at": last_heartbeat,
        "next_heartbeat_at": next_at,
        "heartbeat_interval_ms": row["heartbeat_interval_ms"],
        "heartbeat_topic": row["heartbeat_topic"],
        "eligible": row["eligible"],
        "reason": row["reason"],
    }


def heartbeat_view(row: dict[str, Any]) -> dict[str, Any]:
    """One ``heartbeats`` entry from a ``heartbeats`` row."""
    return {
        "partition": _json(row["partition"]),
        "outcome": row["outcome"],
        "topic": row["heartbeat_topic"],
        "kafka_partition": row["record_partition"],
        "kafka_offset": row["record_offset"],
        "key": _text(row["record_key"]),
        "value": _text(row["record_value"]),
        "committed_offset": _json(row["committed_offset"]),
        "error": row["error"],
        "idle_ms": row["idle_ms"],
        "emitted_at": epoch_ms(row["emitted_at"]),
    }


@bp.get("/<connector>/heartbeats")
@documented("KIP-910 heartbeats of the connector's idle partitions", {"200": json_answer(ANY, "Heartbeats")}, 400, 404)
def get_heartbeats(connector: str) -> Response:
    """Idle age per source partition and the latest heartbeats of ``connector``."""
    limit = limit_arg(DEFAULT_LIMIT, MAX_LIMIT)
    now = now_ms()
    tables = get_tables()
    activity = tables.rows(SOURCE_PARTITION_ACTIVITY, filters=[("connector", "=", connector)])
    heartbeats = newest_heartbeats(tables.scan(HEARTBEATS), connector, limit)  # bounded before it reads
    return jsonify(
        {
            "name": connector,
            "partitions": [partition_view(r, now) for r in sorted(activity, key=lambda r: r["partition"] or "")],
            "heartbeats": [heartbeat_view(r) for r in heartbeats],
        }
    )
