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

Decided by the herder (:meth:`connect_state.herder.Herder.restart_connector`); the views parse and render.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from connect_state.api.errors import no_content
from connect_state.api.herder_io import get_herder
from connect_state.api.openapi import documented, empty, json_answer, query, ref

bp = Blueprint("restart", __name__, url_prefix="/connectors")


def jersey_boolean(name: str) -> bool:
    """A ``@DefaultValue("false") @QueryParam Boolean``: ``Boolean.valueOf`` of the first value."""
    value = request.args.get(name)
    return value is not None and value.lower() == "true"


@bp.post("/<connector>/restart")
@documented(
    "KIP-745 restart request on the config topic",
    {"202": json_answer(ref("ConnectorStateInfo"), "The restart plan"), "204": empty("Connector restart requested")},
    404,
    409,
    params=[query(name, {"type": "boolean", "default": False}) for name in ("includeTasks", "onlyFailed")],
)
def restart_connector(connector: str) -> Response:
    plan = get_herder().restart_connector(connector, jersey_boolean("includeTasks"), jersey_boolean("onlyFailed"))
    if plan is None:
        return no_content(204)
    response = jsonify(plan)
    response.status_code = 202
    return response


@bp.post("/<connector>/tasks/<int(signed=True):task>/restart")
@documented("Not expressible in the config topic: 501 says what to do instead", {}, 404, 409, 501)
def restart_task(connector: str, task: int) -> Response:
    get_herder().restart_task(connector, task)
