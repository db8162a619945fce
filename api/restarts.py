"""Auto-restart attempts (issue 35): ``GET /connectors/<name>/restarts`` and ``GET /restarts`` from the
``connector_restarts`` table the restarts job writes (``connect-state-restarts``).

Connect has no such endpoint. The answer is 200, newest request first::

    {"name": "orders-1",
     "restarts": [{"connector": "orders-1", "requested_at": "2026-11-28T13:30:00.000Z", "attempt": 1,
                   "reason": "task 0 FAILED", "trace": "org.apache.kafka.connect.errors.ConnectException: ...",
                   "failed_since": "2026-11-28T13:29:58.120Z", "outcome": "recovered",
                   "outcome_at": "2026-11-28T13:30:01.400Z", "detail": "RUNNING"}]}

``GET /restarts`` lists every connector's (``{"restarts": [...]}``), ``?outcome=`` keeping those with that outcome
(repeatable; ``pending``, ``recovered``, ``failed-again``, ``no-effect``, ``interrupted``, ``not-sent``; another
value is 400). A connector without restarts gets an empty list (no existence check, like ``/deletions``), and so
does every connector before the job's first attempt (no table yet: auto-restart is off by default). The rows are
turned into the answer by :func:`connect_state.restarts.reconciler.attempts_view`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flask import Blueprint, Response, jsonify, request

from connect_state.api.errors import ConnectRestException
from connect_state.api.openapi import ANY, documented, json_answer, query_list
from connect_state.api.resources import get_tables
from connect_state.core.errors import TableNotFoundError
from connect_state.restarts.reconciler import Outcome, attempts_view
from connect_state.tables.schemas import CONNECTOR_RESTARTS

bp = Blueprint("restarts", __name__)


def attempt_rows(filters: Sequence[tuple[str, str, Any]] | None) -> list[dict[str, Any]]:
    """The ``connector_restarts`` rows matching ``filters``; none before the table exists."""
    try:
        return get_tables().rows(CONNECTOR_RESTARTS, filters=filters)
    except TableNotFoundError:
        return []


OUTCOMES = [str(outcome) for outcome in Outcome]


@bp.get("/connectors/<connector>/restarts")
@documented("Auto-restart attempts of the connector, newest first", {"200": json_answer(ANY, "Restarts")})
def get_connector_restarts(connector: str) -> Response:
    rows = attempt_rows([("connector", "=", connector)])
    return jsonify({"name": connector, "restarts": attempts_view(rows)})


@bp.get("/restarts")
@documented(
    "Every auto-restart attempt, newest first",
    {"200": json_answer(ANY, "Restarts")},
    400,
    params=[query_list("outcome", OUTCOMES)],
)
def get_restarts() -> Response:
    wanted = request.args.getlist("outcome")
    unknown = sorted(set(wanted) - set(OUTCOMES))
    if unknown:
        raise ConnectRestException(400, f"Unknown outcome {unknown[0]}: expected one of {', '.join(OUTCOMES)}")
    filters = [("outcome", "in", wanted)] if wanted else None
    return jsonify({"restarts": attempts_view(attempt_rows(filters))})
