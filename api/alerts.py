"""Alerts (issue 35): what the alerts job raised and sent, and the operators' silences.

* ``GET /alerts`` (``?state=pending|firing|resolved``, ``?connector=``, ``?id=``): the ``alerts`` table, newest first:
  ``{"alerts": [{"id", "rule", "kind", "connector", "subject", "severity", "summary", "detail", "labels", "values",
  "state", "started_at", "fired_at", "resolved_at", "notified", "silenced", "updated_at"}]}`` (times ISO-8601 UTC;
  ``labels`` and ``values`` JSON: what identifies the alert, and what it is now, e.g. the verdict).
* ``GET /alerts/deliveries`` (``?alert=<id>``, ``?status=pending|delivered|failed``, ``?channel=``): one row per
  notification and channel, newest first: attempts, the last error, when it was delivered and ``latency_ms`` (how
  long after the condition began, or ended, the receiver had it).
* ``POST /connectors/<connector>/silence?for=2h&comment=...`` (role ``operate`` on the connector): no notification for
  the connector's alerts until then (an alert that fires meanwhile is notified when the silence ends, if it still
  fires). 201 with the silence. ``for``: ``30m``, ``2h``, ``1d`` (at most 30 days; default 1h).
* ``DELETE /connectors/<connector>/silence`` (role ``operate``): lifts the connector's silences in force; 200 with them,
  404 when there is none.
* ``GET /silences`` (``?all=true`` with those ended or lifted) and ``GET /connectors/<connector>/silences``.

Both writes are audited as every write is (:mod:`connect_state.api.audit`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from flask import Blueprint, Response, jsonify, request

from connect_state.alerts.engine import Silence
from connect_state.alerts.rules import parse_duration
from connect_state.alerts.store import SilenceStore, silence_of, silence_row
from connect_state.api.auth import current_principal
from connect_state.api.errors import ConnectRestException
from connect_state.api.openapi import ANY, STRING, documented, json_answer, query
from connect_state.api.resources import get_settings, get_tables
from connect_state.core.errors import ConfigError, TableNotFoundError
from connect_state.tables.schemas import ALERT_DELIVERIES, ALERT_SILENCES, ALERTS, TableSpec, iso_utc, now_ms

bp = Blueprint("alerts", __name__)

MAX_SILENCE_MS = 30 * 86_400_000
DEFAULT_SILENCE = "1h"
_TIMES = {"started_at", "fired_at", "resolved_at", "updated_at", "created_at", "next_attempt_at", "delivered_at",
          "starts_at", "ends_at", "lifted_at"}  # fmt: skip


def _rows(spec: TableSpec, filters: list[tuple[str, str, Any]]) -> list[dict[str, Any]]:
    try:
        return get_tables().rows(spec, filters=filters or None)
    except TableNotFoundError:
        return []


def _view(row: Mapping[str, Any]) -> dict[str, Any]:
    return {key: iso_utc(value) if key in _TIMES else value for key, value in row.items()}


def _filters(*names: tuple[str, str]) -> list[tuple[str, str, Any]]:
    return [(column, "=", request.args[arg]) for arg, column in names if request.args.get(arg)]


@bp.get("/alerts")
@documented(
    "The alerts the alerts job raised, newest first",
    {"200": json_answer(ANY, "Alerts")},
    params=[query("state", STRING), query("connector", STRING), query("id", STRING)],
)
def get_alerts() -> Response:
    rows = _rows(ALERTS, _filters(("state", "state"), ("connector", "connector"), ("id", "id")))
    rows.sort(key=lambda row: (row.get("updated_at") is not None, row.get("updated_at")), reverse=True)
    return jsonify({"alerts": [_view(row) for row in rows]})


@bp.get("/alerts/deliveries")
@documented(
    "Each notification of an alert to a channel: pending, delivered or failed",
    {"200": json_answer(ANY, "Deliveries")},
    params=[query("alert", STRING), query("status", STRING), query("channel", STRING)],
)
def get_deliveries() -> Response:
    rows = _rows(ALERT_DELIVERIES, _filters(("alert", "alert_id"), ("status", "status"), ("channel", "channel")))
    rows.sort(key=lambda row: (row.get("created_at") is not None, row.get("created_at")), reverse=True)
    return jsonify({"deliveries": [_view(row) for row in rows]})


def _silences(connector: str | None) -> list[dict[str, Any]]:
    rows = _rows(ALERT_SILENCES, [("connector", "=", connector)] if connector else [])
    now = now_ms()
    if request.args.get("all", "").lower() != "true":
        rows = [row for row in rows if silence_of(row).lifted_at is None and silence_of(row).ends_at > now]
    rows.sort(key=lambda row: row["starts_at"], reverse=True)
    return [_view(row) for row in rows]


@bp.get("/silences")
@documented("The silences in force (?all=true: every one)", {"200": json_answer(ANY, "Silences")},
            params=[query("all", STRING)])  # fmt: skip
def get_silences() -> Response:
    return jsonify({"silences": _silences(None)})


@bp.get("/connectors/<connector>/silences")
@documented("The connector's silences in force (?all=true: every one)", {"200": json_answer(ANY, "Silences")},
            params=[query("all", STRING)])  # fmt: skip
def get_connector_silences(connector: str) -> Response:
    return jsonify({"silences": _silences(connector)})


def _principal() -> str:
    principal = current_principal()
    return principal.name if principal is not None else "anonymous"


@bp.post("/connectors/<connector>/silence")
@documented(
    "Mute the connector's alerts for a while",
    {"201": json_answer(ANY, "Silence")},
    400,
    params=[query("for", STRING), query("comment", STRING)],
)
def silence_connector(connector: str) -> tuple[Response, int]:
    text = request.args.get("for", DEFAULT_SILENCE)
    try:
        duration = parse_duration(text, "for")
    except ConfigError as err:
        raise ConnectRestException(400, str(err)) from None
    if not 0 < duration <= MAX_SILENCE_MS:
        raise ConnectRestException(400, f"for: expected a duration above 0 and at most 30d, got {text!r}")
    now = now_ms()
    silence = Silence(uuid.uuid4().hex, connector, now, now + duration, _principal(), request.args.get("comment", ""))
    SilenceStore(get_settings()).put([silence])
    return jsonify(_view(silence_row(silence))), 201


@bp.delete("/connectors/<connector>/silence")
@documented("Lift the connector's silences in force", {"200": json_answer(ANY, "Silences lifted")}, 404)
def lift_silence(connector: str) -> Response:
    store = SilenceStore(get_settings())
    now = now_ms()
    active = [s for s in store.all() if s.connector == connector and s.lifted_at is None and s.ends_at > now]
    if not active:
        raise ConnectRestException(404, f"Connector {connector} has no silence in force")
    lifted = [replace(s, lifted_at=now, lifted_by=_principal()) for s in active]
    store.put(lifted)
    return jsonify({"lifted": [_view(silence_row(s)) for s in lifted]})
