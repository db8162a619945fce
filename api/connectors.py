"""KIP-875 connector lifecycle, with Connect's semantics (spec §3.4, §5.3, §7.3): reads from the ``connectors``
table, writes decided on the config topic read to its end.

* ``GET /connectors`` -> 200, the names of the connectors that have a config and are not deleted
  (``ClusterConfigState.connectors()``: the config snapshot). Connect's order is unspecified; ours is sorted.
* ``GET /connectors/<name>/status`` -> 200 ``ConnectorStateInfo``
  (:func:`~connect_state.connect.rest.connector_state_info`). Like ``AbstractHerder.connectorStatus`` it
  comes purely from the status store, with no config check: 404 ``"No status found for connector <name>"`` when there
  is no connector status. A deleted connector whose status records were not tombstoned yet still answers them, as
  Connect does until its leader tombstones the statuses.
* ``PUT /connectors/<name>/stop`` -> 204, ``PUT .../pause`` and ``PUT .../resume`` -> 202, all without a body, once
  the records Connect's herder writes for the operation (:func:`~connect_state.formats.config.stop_records` and so on)
  have been acknowledged (``acks=all``) by the config topic, in order, within ``api.kafka.write.timeout.ms``. Each
  answers 404 ``"Unknown connector <name>"`` when the connector has no config, as ``DistributedHerder.stopConnector``
  and ``AbstractHerder.pauseConnector`` / ``resumeConnector`` do. Connect writes a stop only from the leader
  (followers forward it); the records are the same whoever writes them, and every worker reading the config topic
  honours them.
* ``DELETE /connectors/<name>`` -> 204 without a body, once the tombstones Connect's leader writes
  (``KafkaConfigBackingStore.removeConnectorConfig``: ``connector-<name>`` then ``target-state-<name>``,
  :func:`~connect_state.formats.config.delete_records`) have been acknowledged; 404 ``"Connector <name> not found"``
  when the connector has no config (``DistributedHerder.deleteConnectorConfig``). Every worker honours the tombstones
  (it stops the connector, the leader tombstones its statuses); the cleanup job (``connect-state-cleanup``, KIP-883)
  then cleans up after it like after a deletion made through Connect.

Every write is decided by the herder (:class:`connect_state.herder.Herder`: the config topic read to its end, the
records Connect's herder writes, retries, a deletion landing between check and write); the views parse and render.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from connect_state.api.errors import ConnectRestException, no_content
from connect_state.api.herder_io import get_herder
from connect_state.api.openapi import STRING, array_of, documented, empty, json_answer, query_list, ref
from connect_state.api.resources import get_tables
from connect_state.api.rows import expanded_connectors, is_configured, status_row
from connect_state.api.verdicts import configured_verdicts
from connect_state.connect.rest import connector_state_info, status_not_found_message
from connect_state.tables.schemas import CONNECTORS

bp = Blueprint("connectors", __name__, url_prefix="/connectors")


@bp.get("")
@documented(
    "The configured connectors, or with expand=status/info/verdict a map of their expansions",
    {"200": json_answer({"oneOf": [array_of(STRING), {"type": "object"}]}, "names or expansions")},
    params=[query_list("expand", ["status", "info", "verdict"])],
)
def list_connectors() -> Response:
    """``GET /connectors``: a JSON list of the configured connectors' names, sorted; with ``expand``, their
    expansions (issue 14); ``expand=verdict`` adds each one's verdict (issue 35, :mod:`connect_state.api.verdicts`)."""
    if "expand" in request.args:
        expand = request.args.getlist("expand")
        body = expanded_connectors(expand)
        if "verdict" in expand:
            views = configured_verdicts()
            for name, expansions in body.items():
                expansions["verdict"] = views.get(name)
        return jsonify(body)
    rows = get_tables().rows(CONNECTORS, columns=["name", "config", "deleted"])
    return jsonify(sorted({row["name"] for row in rows if is_configured(row)}))


@bp.get("/<connector>/status")
@documented(
    "Connect's ConnectorStateInfo", {"200": json_answer(ref("ConnectorStateInfo"), "Connect's ConnectorStateInfo")}, 404
)
def get_connector_status(connector: str) -> Response:
    """``ConnectorStateInfo`` from the connector's status row; 404 when it has no connector status."""
    row = status_row(connector)
    if row is None or row.get("connector_state") is None:
        raise ConnectRestException(404, status_not_found_message(connector))
    return jsonify(connector_state_info({**row, "tasks": row.get("tasks") or []}))


@bp.put("/<connector>/stop")
@documented("Stop (KIP-875)", {"204": empty("Stopped")}, 404, 409)
def stop_connector(connector: str) -> Response:
    """``DistributedHerder.stopConnector``; 204 (a ``void`` resource method)."""
    get_herder().stop_connector(connector)
    return no_content(204)


@bp.put("/<connector>/pause")
@documented("Pause", {"202": empty("Paused")}, 404, 409)
def pause_connector(connector: str) -> Response:
    """``AbstractHerder.pauseConnector``; 202."""
    get_herder().pause_connector(connector)
    return no_content(202)


@bp.put("/<connector>/resume")
@documented("Resume", {"202": empty("Resumed")}, 404, 409)
def resume_connector(connector: str) -> Response:
    """``AbstractHerder.resumeConnector``; 202."""
    get_herder().resume_connector(connector)
    return no_content(202)


@bp.delete("/<connector>")
@documented("Delete (the tombstones Connect's leader writes)", {"204": empty("Deleted")}, 404, 409)
def delete_connector(connector: str) -> Response:
    """``DistributedHerder.deleteConnectorConfig``; 204."""
    get_herder().delete_connector(connector)
    return no_content(204)
