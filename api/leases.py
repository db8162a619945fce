"""Who runs the jobs that must not run twice: ``GET /leases`` and ``GET /leases/<name>`` from the ``leases`` table.

Connect has no such endpoint. The cleanup and heartbeats jobs act only while they hold their lease
(:mod:`connect_state.leases.decisions`); a second instance waits. The answer is 200::

    {"leases": [{"name": "cleanup", "holder": "cleanup@host-1:4242:9f2c1a7e", "epoch": 3,
                 "acquired_at": 1767225600000, "renewed_at": 1767225660000, "expires_at": 1767225690000,
                 "state": "held", "expires_in_ms": 21000}, ...]}

sorted by name. Times are epoch milliseconds; ``epoch`` is the fencing token (one more at every change of holder);
``state`` is ``held`` (unexpired), ``expired`` (its holder stopped renewing: crashed or cut off; the next instance
takes it over) or ``released`` (its holder stopped cleanly); ``expires_in_ms`` is negative once expired. No lease
taken yet (or no ``leases`` table yet): an empty list. ``GET /leases/<name>`` answers one lease, or 404.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Response, jsonify

from connect_state.api.errors import ConnectRestException
from connect_state.api.openapi import ANY, documented, json_answer
from connect_state.api.resources import app_resources
from connect_state.core.errors import TableNotFoundError
from connect_state.leases.decisions import Lease, current_lease
from connect_state.tables.schemas import LEASES, epoch_ms, now_ms

bp = Blueprint("leases", __name__)


def lease_of(row: Mapping[str, Any]) -> Lease:
    return Lease(
        str(row["name"]),
        str(row["holder"]),
        int(row["epoch"]),
        epoch_ms(row["acquired_at"]),
        epoch_ms(row["renewed_at"]),
        epoch_ms(row["expires_at"]),
    )


def lease_view(lease: Lease, now_ms: int) -> dict[str, Any]:
    """One lease as the API shows it."""
    if not lease.expired(now_ms):
        state = "held"
    elif lease.renewed_at >= lease.expires_at:
        state = "released"
    else:
        state = "expired"
    return {
        "name": lease.name,
        "holder": lease.holder,
        "epoch": lease.epoch,
        "acquired_at": lease.acquired_at,
        "renewed_at": lease.renewed_at,
        "expires_at": lease.expires_at,
        "state": state,
        "expires_in_ms": lease.expires_at - now_ms,
    }


def current_leases() -> dict[str, Lease]:
    """Every lease by name (none while the ``leases`` table does not exist)."""
    try:
        rows = app_resources().tables.rows(LEASES)
    except TableNotFoundError:
        return {}
    by_name: dict[str, list[Lease]] = {}
    for row in rows:
        if row.get("name") is not None and row.get("epoch") is not None:
            by_name.setdefault(str(row["name"]), []).append(lease_of(row))
    return {name: lease for name, leases in by_name.items() if (lease := current_lease(leases)) is not None}


@bp.get("/leases")
@documented("Every lease", {"200": json_answer(ANY, "Leases")})
def get_leases() -> Response:
    """Every lease: holder, epoch and expiry."""
    now = now_ms()
    leases = current_leases()
    return jsonify({"leases": [lease_view(leases[name], now) for name in sorted(leases)]})


@bp.get("/leases/<name>")
@documented("One lease", {"200": json_answer(ANY, "Lease")}, 404)
def get_lease(name: str) -> Response:
    """One lease, 404 when it was never taken."""
    lease = current_leases().get(name)
    if lease is None:
        raise ConnectRestException(404, f"Lease {name} not found")
    return jsonify(lease_view(lease, now_ms()))
