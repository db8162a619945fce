"""Verdicts (issue 35): what is wrong with each connector, from the watch job's ``connector_verdicts`` table.

``GET /connectors/<name>/verdict`` -> 200::

    {"name": "orders-sink", "type": "sink", "verdict": "stalled", "since": "2026-01-01T00:05:00.000Z",
     "evidence": {"state": "RUNNING", "lag": 1200, "commits_moved_at": "...", "stalled_for_ms": 312000, ...},
     "tasks": [{"id": 0, "verdict": "stalled", "evidence": {...}}],
     "thresholds": {"sink_stall_ms": 300000, ...}, "updated": "2026-01-01T00:05:10.000Z"}

404 with Connect's body (``Connector <name> not found``) when the config snapshot has no such connector; a connector
the job has not judged yet (or no watch job: no table) is ``unknown`` with the reason. ``GET /verdicts[?state=<v>]``
lists them all (sorted by name), or those whose verdict is ``v``; a ``state`` outside the verdicts is 400 naming them.
``GET /connectors?expand=verdict`` adds each connector's verdict beside Connect's expansions.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, Response, jsonify

from connect_state.api.args import enum_arg
from connect_state.api.openapi import ANY, STRING, documented, json_answer, query
from connect_state.api.resources import AppResources, get_tables
from connect_state.api.rows import configured_row, is_configured
from connect_state.core.errors import TableNotFoundError
from connect_state.tables.schemas import CONNECTOR_VERDICTS, CONNECTORS, iso_utc
from connect_state.verdicts.vocabulary import Verdict

bp = Blueprint("verdicts", __name__)

NOT_JUDGED = "the watch job (connect-state-watch) has not judged this connector yet"


def verdict_rows(resources: AppResources | None = None) -> dict[str, dict[str, Any]]:
    """The ``connector_verdicts`` rows by connector of ``resources``'s cluster (default: the request's); none when the
    table does not exist yet."""
    tables = get_tables() if resources is None else resources.tables
    try:
        return {row["connector"]: row for row in tables.rows(CONNECTOR_VERDICTS)}
    except TableNotFoundError:
        return {}


def _json(text: str | None) -> Any:
    return {} if not text else json.loads(text)


def verdict_view(name: str, row: dict[str, Any] | None, kind: str | None = None) -> dict[str, Any]:
    """One connector's verdict as the API shows it (``unknown`` when ``row`` is None)."""
    if row is None:
        return {
            "name": name,
            "type": kind,
            "verdict": str(Verdict.UNKNOWN),
            "since": None,
            "evidence": {"reason": NOT_JUDGED},
            "tasks": [],
            "thresholds": None,
            "updated": None,
        }
    tasks = _json(row["tasks"])
    return {
        "name": name,
        "type": row["type"] or kind,
        "verdict": row["verdict"],
        "since": iso_utc(row["since"]),
        "evidence": _json(row["evidence"]),
        "tasks": [{"id": int(task), **tasks[task]} for task in sorted(tasks, key=int)],
        "thresholds": _json(row["thresholds"]),
        "updated": iso_utc(row["updated"]),
    }


def state_arg() -> Verdict | None:
    """``?state=``: a :class:`Verdict`, None when absent; 400 naming the verdicts otherwise."""
    return enum_arg("state", Verdict, "verdict")


def configured_verdicts() -> dict[str, dict[str, Any]]:
    """Every configured connector's verdict view, by name."""
    rows = verdict_rows()
    connectors = [row for row in get_tables().rows(CONNECTORS, columns=["name", "type", "config", "deleted"])]
    return {
        row["name"]: verdict_view(row["name"], rows.get(row["name"]), row["type"])
        for row in sorted(connectors, key=lambda row: str(row["name"]))
        if is_configured(row)
    }


@bp.get("/connectors/<connector>/verdict")
@documented("The connector's verdict and its evidence (issue 35)", {"200": json_answer(ANY, "Verdict")}, 404)
def get_verdict(connector: str) -> Response:
    row = configured_row(connector)
    return jsonify(verdict_view(connector, verdict_rows().get(connector), row.get("type")))


@bp.get("/verdicts")
@documented(
    "Every connector's verdict, or those with one verdict (issue 35)",
    {"200": json_answer(ANY, "Verdicts")},
    400,
    params=[query("state", {**STRING, "enum": [member.value for member in Verdict]})],
)
def list_verdicts() -> Response:
    wanted = state_arg()
    views = configured_verdicts().values()
    return jsonify({"verdicts": [view for view in views if wanted is None or view["verdict"] == wanted]})
