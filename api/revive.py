"""A deleted connector brought back (ours, issue 36).

* ``POST /connectors/<name>/restore[?at=<t>][&initial_state=<S>][&offsets=true]`` -> 201
  ``{"name", "connector_class", "initial_state", "config_offset", "config_timestamp", "deletion_offset", "deleted_at",
  "cleanup_hooks_ran", "offsets_at", "offsets", "message"}``: the connector created again with its last config at or
  before ``at`` (epoch ms or ISO-8601; default: the config its last deletion removed), secrets as Connect had them and
  never in the answer, in ``initial_state`` (KIP-980's ``RUNNING``, ``PAUSED`` or ``STOPPED``, any case; default
  ``STOPPED``); with ``offsets=true`` (STOPPED only) its offsets as of ``at`` (default: as of its deletion) written
  after the config, ``offsets`` listing each partition as the offsets restore does (``null`` without
  ``offsets=true``). 409 ``"Connector <name> already exists"``, 404 when the history holds no deletion of it; the
  decision is the herder's (:mod:`connect_state.herder.revive`). A bad ``at``, ``initial_state`` or ``offsets`` is a
  400 before anything else. Role ``admin`` (it writes a whole connector config, as ``POST /connectors`` would); the
  audit row's ``message`` names the time restored to and the records and group changes written are in its
  ``written``.

The history is read from ``connector_events`` and ``connector_deletions`` (:class:`TablesConnectorHistory`), the
offsets from the offsets history tables (:class:`~connect_state.api.offsets_history.TablesOffsetsHistory`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flask import Blueprint, Response, g, jsonify, request

from connect_state.api.args import flag_arg, time_arg
from connect_state.api.errors import ConnectRestException
from connect_state.api.herder_io import get_herder
from connect_state.api.offsets_history import TablesOffsetsHistory
from connect_state.api.openapi import (
    ANY,
    INT,
    NULLABLE_INT,
    NULLABLE_STRING,
    STRING,
    TIME,
    array_of,
    documented,
    json_answer,
    obj,
    query,
)
from connect_state.api.resources import get_tables
from connect_state.core.errors import TableNotFoundError
from connect_state.herder import InitialState
from connect_state.tables import history_reads as reads
from connect_state.tables.schemas import CONNECTOR_DELETIONS, CONNECTOR_EVENTS, epoch_ms, iso_utc

__all__ = ["TablesConnectorHistory", "bp"]

bp = Blueprint("revive", __name__, url_prefix="/connectors")

EVENT_COLUMNS = ["event", "details", "kafka_offset", "kafka_timestamp"]


class TablesConnectorHistory:
    """:class:`~connect_state.herder.revive.ConnectorHistory` on the current app's tables."""

    def config_events(self, name: str) -> Sequence[dict[str, Any]]:
        scan = get_tables().scan(CONNECTOR_EVENTS)
        filters = [("connector", "=", name), ("event", "in", ["created", "reconfigured", "deleted"])]
        rows = reads.table_rows(scan, CONNECTOR_EVENTS, filters, EVENT_COLUMNS)
        return [{**row, "kafka_timestamp": epoch_ms(row["kafka_timestamp"])} for row in rows]

    def deletion_steps(self, name: str, deletion_offset: int) -> Sequence[dict[str, Any]]:
        try:
            rows = get_tables().rows(CONNECTOR_DELETIONS, filters=[("connector", "=", name)])
        except TableNotFoundError:  # no KIP-883 cleanup configured: no hook ran
            return []
        return [row for row in rows if row.get("deletion_offset") == deletion_offset]


def _initial_state_arg() -> InitialState:
    """``initial_state``: ``RUNNING``, ``PAUSED`` or ``STOPPED`` in any case, as Connect reads it; default STOPPED."""
    text = request.args.get("initial_state")
    if text is None or text == "":
        return InitialState.STOPPED
    try:
        return InitialState(text.upper())
    except ValueError:
        choices = ", ".join(InitialState)
        raise ConnectRestException(400, f"Invalid initial_state {text!r}: expected one of {choices}") from None


RESTORE_ANSWER = obj(
    name=STRING,
    connector_class=NULLABLE_STRING,
    initial_state=STRING,
    config_offset=INT,
    config_timestamp=NULLABLE_INT,
    deletion_offset=NULLABLE_INT,
    deleted_at=NULLABLE_INT,
    cleanup_hooks_ran=array_of(STRING),
    offsets_at=NULLABLE_INT,
    offsets={
        "type": "array",
        "nullable": True,
        "items": obj(partition={"type": "object"}, current=ANY, restored=ANY, change=STRING),
    },
    message=STRING,
)


@bp.post("/<connector>/restore")
@documented(
    "Bring back a deleted connector with its last config (secrets as written, never shown), and its offsets",
    {"201": json_answer(RESTORE_ANSWER, "Written: the version restored, and the cleanup hooks that already ran")},
    400,
    404,
    409,
    500,  # as PATCH /offsets's: the connector's alterOffsets refused its offsets
    params=[
        query("at", TIME, description="the config at or before this time (default: before its last deletion)"),
        query("initial_state", {"type": "string", "enum": list(InitialState), "default": "STOPPED"}),
        query(
            "offsets",
            {"type": "boolean", "default": False},
            description="also its offsets as of at (default: as of its deletion); STOPPED only",
        ),
    ],
)
def restore_connector(connector: str) -> Response:
    """The connector's config at or before ``at`` written again in ``initial_state`` (see the module)."""
    at = time_arg("at")
    state = _initial_state_arg()
    with_offsets = flag_arg("offsets")
    when = "before its last deletion" if at is None else f"{iso_utc(at)} ({at})"
    g.audit_note = f"connector restore to {when}, {state.value}{', with its offsets' if with_offsets else ''}"
    offsets = TablesOffsetsHistory() if with_offsets else None
    restored = get_herder().restore_connector(connector, at, state, TablesConnectorHistory(), offsets)
    response = jsonify(restored.as_json())
    response.status_code = 201
    return response
