"""KIP-883 cleanup results: ``GET /connectors/<name>/deletions`` from the ``connector_deletions`` table.

Connect has no such endpoint (it does no cleanup). The answer is 200 with every deletion of the name the cleanup job
(``connect-state-cleanup``) has seen, newest first (by config-topic offset of the tombstone), each with its steps::

    {"name": "c",
     "deletions": [{"deletion_offset": 42, "deleted_at": "2025-05-01T12:00:00.000Z", "type": "source",
                    "config": {...}, "status": "failed",
                    "steps": [{"step": "active_topics", "status": "succeeded", "attempts": 1, "detail": "...",
                               "error": null, "next_attempt_at": null, "updated_at": "..."}, ...]}]}

A deletion's ``status`` is ``failed`` when a step failed (it is retried), else ``pending`` when a step has yet to
run or waits, else ``complete`` (every step succeeded, was skipped, or was refused by a guard: ``refused``, with
the reason in ``detail``). Steps come in the order they run
(``active_topics``, ``offsets``, then the hooks by name); timestamps are UTC ISO-8601 with milliseconds. A name
without deletions gets an empty list, like ``GET /connectors/<name>/topics`` (no existence check); 503 until the
cleanup job has created the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flask import Blueprint, Response, jsonify

from connect_state.api.openapi import ANY, documented, json_answer
from connect_state.api.resources import get_settings, get_tables
from connect_state.api.rows import json_or_text
from connect_state.cleanup.reconciler import FAILED, PENDING, step_order
from connect_state.security.redaction import redact_config, settings_patterns
from connect_state.tables.schemas import CONNECTOR_DELETIONS, iso_utc

bp = Blueprint("deletions", __name__, url_prefix="/connectors")

COMPLETE = "complete"


def deletion_status(statuses: Iterable[str]) -> str:
    """``failed`` if a step failed, else ``pending`` if one is pending, else ``complete``."""
    seen = set(statuses)
    if FAILED in seen:
        return FAILED
    if PENDING in seen:
        return PENDING
    return COMPLETE


def deletions_body(name: str, rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The response body from the name's ``connector_deletions`` rows (see the module docstring)."""
    grouped: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(int(row["deletion_offset"]), []).append(row)
    deletions = []
    for offset in sorted(grouped, reverse=True):
        steps = sorted(grouped[offset], key=lambda row: step_order(str(row["step"])))
        first = steps[0]
        deletions.append(
            {
                "deletion_offset": offset,
                "deleted_at": iso_utc(first.get("deleted_at")),
                "type": first.get("connector_type"),
                "config": json_or_text(first.get("config")),
                "status": deletion_status(str(row["status"]) for row in steps),
                "steps": [
                    {
                        "step": row["step"],
                        "status": row["status"],
                        "attempts": row.get("attempts") or 0,
                        "detail": row.get("detail"),
                        "error": row.get("error"),
                        "next_attempt_at": iso_utc(row.get("next_attempt_at")),
                        "updated_at": iso_utc(row.get("updated_at")),
                    }
                    for row in steps
                ],
            }
        )
    return {"name": name, "deletions": deletions}


@bp.get("/<connector>/deletions")
@documented("KIP-883 cleanup steps of the connector's deletions", {"200": json_answer(ANY, "Deletions")}, 404)
def get_deletions(connector: str) -> Response:
    """Every deletion of ``connector`` and the outcome of each cleanup step, newest first."""
    rows = get_tables().rows(CONNECTOR_DELETIONS, filters=[("connector", "=", connector)])
    body = deletions_body(connector, rows)
    patterns = settings_patterns(get_settings())
    for deletion in body["deletions"]:  # the last config may hold secrets (issue 13)
        if isinstance(deletion["config"], dict):
            deletion["config"] = redact_config(deletion["config"], patterns)
    return jsonify(body)
