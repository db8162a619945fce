"""The web dashboard at ``/ui`` (issue 14): one page served by the API itself, no runtime fetches from the internet.

The page (``api/static/dashboard.html``, ``dashboard.js``, ``dashboard.css``: vanilla JavaScript, the chart drawn
by hand in SVG) reads the API's own endpoints (``/connectors``, ``/status``, ``/topics``, ``/offsets``,
``/heartbeats``, ``/deletions``) and the timeline below, and acts through the API's write endpoints (stop, pause,
resume, restart when the app has it, topics reset, offsets reset), each behind a confirmation, showing the answer.

``GET /ui/timeline/<connector>``: what the chart draws, from the tables (JSON): ``events`` (the connector's
``connector_events``, oldest first: ``at`` epoch ms, ``event``, ``details``) and ``offsets`` (its
``source_offsets_history``: ``at``, ``partition``, ``offset``; ``null`` for a tombstone), each the newest
``limit`` (default 500, at most 5000).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from connect_state.api.args import limit_arg
from connect_state.api.clusters import cluster_of_request, root_of_request
from connect_state.api.openapi import ANY, documented, json_answer
from connect_state.api.resources import get_settings, get_tables
from connect_state.api.rows import json_or_text
from connect_state.core.errors import TableNotFoundError
from connect_state.security.redaction import redact_json, settings_patterns
from connect_state.tables.schemas import CONNECTOR_EVENTS, SOURCE_OFFSETS_HISTORY, TableSpec, epoch_ms

bp = Blueprint("dashboard", __name__)

DEFAULT_LIMIT = 500
MAX_LIMIT = 5000


def _rows(spec: TableSpec, connector: str) -> list[dict[str, Any]]:
    try:
        return get_tables().rows(spec, filters=[("connector", "=", connector)])
    except TableNotFoundError:
        return []


@bp.get("/ui")
@bp.get("/ui/")
@documented(
    "The dashboard",
    {"200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}},
    plain=True,
)
def page() -> Response:
    """The dashboard's page."""
    assert current_app.static_folder is not None
    text = (Path(current_app.static_folder) / "dashboard.html").read_text(encoding="utf-8")
    restart = any(
        rule.rule.startswith("/connectors/") and rule.rule.endswith("/restart") and "POST" in (rule.methods or ())
        for rule in current_app.url_map.iter_rules()
    )
    cluster = cluster_of_request()
    page_text = text.replace("__RESTART__", "1" if restart else "0")
    for marker, value in (
        ("__BASE__", request.script_root),
        ("__ROOT__", root_of_request()),
        ("__CLUSTER__", cluster.id),
    ):
        page_text = page_text.replace(marker, html.escape(value, quote=True))
    return Response(page_text, mimetype="text/html")


@bp.get("/ui/timeline/<connector>")
@documented("The dashboard's timeline data", {"200": json_answer(ANY, "Timeline")}, 400, 404)
def timeline(connector: str) -> Response:
    """The connector's state changes and source-offset movement, for the chart."""
    limit = limit_arg(DEFAULT_LIMIT, MAX_LIMIT)
    events = [
        {
            "at": epoch_ms(row["kafka_timestamp"]) or epoch_ms(row["recorded_at"]),
            "event": row["event"],
            "details": redact_json(
                json_or_text(row["details"]), settings_patterns(get_settings())
            ),  # configs: issue 13
        }
        for row in _rows(CONNECTOR_EVENTS, connector)
    ]
    events.sort(key=lambda e: e["at"] or 0)
    offsets = [
        {
            "at": epoch_ms(row["kafka_timestamp"]) or epoch_ms(row["recorded_at"]),
            "partition": row["partition"],
            "offset": json_or_text(row["offset"]),
            "kafka_offset": row["kafka_offset"],
        }
        for row in _rows(SOURCE_OFFSETS_HISTORY, connector)
    ]
    offsets.sort(key=lambda o: (o["at"] or 0, o["kafka_offset"] or 0))
    return jsonify({"name": connector, "events": events[-limit:], "offsets": offsets[-limit:]})
