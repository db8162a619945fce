"""KIP-745 restarts, written as the config-topic restart request Connect's leader writes.

* ``POST /connectors/<name>/restart?includeTasks=<bool>&onlyFailed=<bool>`` (both default false, parsed like Jersey's
  ``Boolean``: ``true`` in any case is true, anything else false): 404 ``"Unknown connector: <name>"`` unless the
  config topic read to its end has the connector (``DistributedHerder.restartConnectorAndTasks``; 409/503 when it
  cannot be read in time, :mod:`connect_state.api.fresh`). Then ``restart-connector-<name>``
  ``{"include-tasks":<bool>,"only-failed":<bool>}`` (``KafkaConfigBackingStore.putRestartRequest``) is written and
  acknowledged; every worker reading the config topic executes it for what it runs (``processRestartRequests``).
  With ``includeTasks`` or ``onlyFailed`` the answer is 202 with the restart plan's ``ConnectorStateInfo`` (what is
  restarted shown RESTARTING, :func:`~connect_state.connect.rest.restart_state_info`; 404
  ``"Status for connector <name> not found"`` without a status, the request written all the same, as in Connect);
  without either, 204 and no body.

  *Differs from Connect:* with both flags false Connect's herder restarts the connector in memory
  (``restartConnector``) instead of writing a request; we write the equivalent request (the connector alone, whatever
  its state), which every worker honours.
* ``POST /connectors/<name>/tasks/<id>/restart``: the config topic has no record for one task (the restart request
  names a connector), so this answers 404 ``"Unknown connector: <name>"`` for an unknown connector, else **501** with
  Connect's error body saying what to do instead (restart the connector's failed tasks, or ask a Connect worker).
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from connect_state.api.connectors import connector_row, send_config_records
from connect_state.api.errors import ConnectRestException, no_content
from connect_state.api.fresh import fresh_connector
from connect_state.connect import rest
from connect_state.formats.config import RestartRequest, restart_request_key, serialize_restart_request

bp = Blueprint("restart", __name__, url_prefix="/connectors")


def jersey_boolean(name: str) -> bool:
    """A ``@DefaultValue("false") @QueryParam Boolean``: ``Boolean.valueOf`` of the first value."""
    value = request.args.get(name)
    return value is not None and value.lower() == "true"


def task_restart_message(connector: str, task: int) -> str:
    """Ours: why a single task cannot be restarted through the config topic, and what to do instead."""
    return (
        f"connect-state cannot restart task {connector}-{task} alone: Connect's config topic carries restart requests "
        "for a connector (KIP-745), not for one task. Use POST "
        f"/connectors/{connector}/restart?includeTasks=true&onlyFailed=true to restart the connector's failed tasks "
        "(and the connector if it failed), or send this request to a Connect worker's REST API."
    )


@bp.post("/<connector>/restart")
def restart_connector(connector: str) -> Response:
    include_tasks, only_failed = jersey_boolean("includeTasks"), jersey_boolean("onlyFailed")
    if not fresh_connector(connector).exists:
        raise ConnectRestException(404, rest.unknown_connector_colon_message(connector))
    restart = RestartRequest(include_tasks=include_tasks, only_failed=only_failed)
    check = (
        f"Retrying POST /connectors/{connector}/restart is safe: the workers act on the latest request. "
        f"GET /connectors/{connector}/status shows the restart."
    )
    record = (restart_request_key(connector), serialize_restart_request(restart))
    send_config_records([record], f"the restart of connector {connector}", check)
    if not include_tasks and not only_failed:
        return no_content(204)
    row = connector_row(connector)
    body = rest.restart_state_info(row, include_tasks, only_failed) if row is not None else None
    if body is None:
        raise ConnectRestException(404, rest.restart_status_not_found_message(connector))
    response = jsonify(body)
    response.status_code = 202
    return response


@bp.post("/<connector>/tasks/<int(signed=True):task>/restart")
def restart_task(connector: str, task: int) -> Response:
    if not fresh_connector(connector).exists:
        raise ConnectRestException(404, rest.unknown_connector_colon_message(connector))
    raise ConnectRestException(501, task_restart_message(connector, task))
