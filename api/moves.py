"""A connector moved to another Connect cluster (ours, issue 37, item 5).

* ``POST /clusters/<from>/connectors/<name>/move?to=<cluster>`` (or ``/connectors/<name>/move?to=...`` for the
  default cluster) -> 201 ``{"name", "from", "to", "connector_class", "type", "initial_state": "STOPPED", "offsets":
  [{"partition", "before", "offset", "change"}], "message"}``: the connector's config (as the origin's config topic has
  it, secrets included and never shown) and its offsets (read at the end of the origin's topics) written to
  the cluster ``to``, the connector created there STOPPED; the message names the next steps (resume it there, delete
  it from the origin). The origin is read here; the target cluster's herder decides and writes
  (:mod:`connect_state.herder.move`).

Refused before anything is written: 400 without ``to``, or with the origin's own id; 404 ``Cluster <to> not found``;
Connect's 404 for a connector the origin does not have; 409 :func:`~connect_state.herder.move.not_stopped_message`
unless the origin has it STOPPED (its config topic read to its end); 409
:func:`~connect_state.herder.move.unreadable_offsets_message` for a source with an offset the origin cannot read; then
the herder's refusals (409 ``Connector
<name> already exists`` in the target, 409 for a sink whose group there has members). Role ``admin`` (it writes a
whole connector config, as ``POST /connectors`` would); the audit row has the records and group changes written.
"""

from __future__ import annotations

import json

from flask import Blueprint, Response, g, jsonify, request

from connect_state.api.auth import Role, require_in
from connect_state.api.clusters import cluster_of_request, known_clusters
from connect_state.api.errors import ConnectRestException
from connect_state.api.fresh import fresh_connector
from connect_state.api.herder_io import get_herder
from connect_state.api.openapi import ANY, STRING, array_of, documented, json_answer, obj, object_of, query
from connect_state.api.resources import serving_cluster
from connect_state.connect import rest
from connect_state.core.vocabulary import TargetState
from connect_state.herder.move import not_stopped_message

__all__ = ["bp"]

bp = Blueprint("moves", __name__, url_prefix="/connectors")

_MOVE_FIELDS = {
    "name": STRING,
    "from": STRING,
    "to": STRING,
    "connector_class": {"type": "string", "nullable": True},
    "type": STRING,
    "initial_state": STRING,
    "offsets": array_of(obj(partition={"type": "object"}, before=ANY, offset=ANY, change=STRING)),
    "message": STRING,
}
MOVE_ANSWER = object_of(_MOVE_FIELDS, list(_MOVE_FIELDS))


def _target_arg(origin: str) -> str:
    target = request.args.get("to", "")
    if not target:
        raise ConnectRestException(400, "Missing query parameter 'to': the id of the cluster to move the connector to")
    if target == origin:
        raise ConnectRestException(400, f"Cannot move a connector to its own cluster {origin}: 'to' names another")
    if target not in known_clusters():
        raise ConnectRestException(404, f"Cluster {target} not found")
    return target


@bp.post("/<connector>/move")
@documented(
    "Copy a STOPPED connector's config and offsets to another cluster, created there STOPPED (issue 37)",
    {"201": json_answer(MOVE_ANSWER, "Written in the target cluster: the connector, STOPPED, and its offsets")},
    400,
    404,
    409,
    params=[query("to", STRING, description="the id of the cluster to move the connector to (GET /clusters)")],
)
def move_connector(connector: str) -> Response:
    origin = cluster_of_request().id
    target = _target_arg(origin)
    require_in(target, Role.ADMIN, connector)  # the route's role holds in the origin; the target's is asked here
    view = fresh_connector(connector)
    if not view.exists:
        raise ConnectRestException(404, rest.connector_not_found_message(connector))
    if view.target_state is not TargetState.STOPPED:
        raise ConnectRestException(409, not_stopped_message(connector, origin))
    config = json.loads(view.row["config"])
    moved_offsets = get_herder().offsets_now(connector, view.row)  # the origin's, at the topics' end
    g.audit_note = f"connector move from cluster {origin} to cluster {target}"
    with serving_cluster(target):
        moved = get_herder().adopt_connector(connector, config, moved_offsets, origin, target)
    response = jsonify(moved.as_json())
    response.status_code = 201
    return response
