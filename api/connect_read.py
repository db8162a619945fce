"""Connect's read API from the ``connectors`` table, with Connect's shapes, codes and messages (issue 14).

* ``GET /`` -> ``ServerInfo`` ``{"version", "commit", "kafka_cluster_id"}``: ``version`` is ``api.connect.version``
  (default :data:`~connect_state.connect.rest.MIRRORED_CONNECT_VERSION`, the Connect version whose API we mirror),
  ``commit`` ``api.connect.commit`` (default ``"unknown"``, what Connect reports without a build commit),
  ``kafka_cluster_id`` ``api.kafka.cluster.id`` when set, else asked of the cluster once (503 while Kafka cannot be
  reached).
* ``GET /connectors?expand=status&expand=info`` (:mod:`connect_state.api.connectors`, with
  :func:`connect_state.api.rows.expanded_connectors`).
* ``GET /connectors/<name>`` (``ConnectorInfo``), ``/config``, ``/tasks`` (``TaskInfo`` list, task configs from the
  config topic's ``task-<name>-<n>`` records applied on commit) -> 404 ``"Connector <name> not found"`` unless the
  config snapshot has the connector (``DistributedHerder.connectorInfo`` / ``taskConfigs``).
* ``GET /connectors/<name>/tasks/<id>/status`` -> ``TaskState``; 404 ``"No status found for task <name>-<id>"``
  (``AbstractHerder.taskStatus``: the status store only, no config check).

Like ``GET /connectors/<name>/status``, these read the tables, which lag the topics by a micro-batch. Unlike Connect,
configs come with their secrets redacted (:mod:`connect_state.security.redaction`, issue 13): a config without secret
keys is answered byte for byte as Connect answers it.
"""

from __future__ import annotations

import threading

from flask import Blueprint, Response, current_app, jsonify

from connect_state.api.errors import ConnectRestException
from connect_state.api.openapi import CONFIG, array_of, documented, json_answer, ref
from connect_state.api.resources import get_settings
from connect_state.api.rows import configured_row, redacted, redacted_info, status_row
from connect_state.connect import rest
from connect_state.core.errors import KafkaWriteError

bp = Blueprint("connect_read", __name__)

_CLUSTER_ID = "connect_state.kafka_cluster_id"
_lock = threading.Lock()


def _kafka_cluster_id() -> str | None:
    settings = get_settings()
    configured = settings.api_kafka_cluster_id
    if configured:
        return configured
    known: dict[str, str | None] = current_app.extensions.setdefault(_CLUSTER_ID, {})  # by bootstrap.servers
    with _lock:
        if settings.bootstrap_servers not in known:
            from connect_state.kafka import KafkaAdmin

            try:
                with KafkaAdmin(
                    settings.kafka_client_config(),
                    client_id="connect-state-api-cluster",
                    timeout_ms=settings.api_fresh_read_timeout_ms,
                ) as admin:
                    known[settings.bootstrap_servers] = admin.describe_cluster().cluster_id
            except KafkaWriteError as err:
                raise ConnectRestException(503, f"Cannot read the Kafka cluster id: {err}") from err
        return known[settings.bootstrap_servers]


@bp.get("/")
@documented("Connect's ServerInfo", {"200": json_answer(ref("ServerInfo"), "version, commit, cluster id")})
def server_info() -> Response:
    """``RootResource.serverInfo``."""
    settings = get_settings()
    version = settings.api_connect_version or rest.MIRRORED_CONNECT_VERSION
    commit = settings.api_connect_commit or "unknown"
    return jsonify(rest.server_info(version, commit, _kafka_cluster_id()))


@bp.get("/connectors/<connector>")
@documented("Connect's ConnectorInfo", {"200": json_answer(ref("ConnectorInfo"), "ConnectorInfo")}, 404)
def get_connector(connector: str) -> Response:
    return jsonify(redacted_info(rest.connector_info(configured_row(connector))))


@bp.get("/connectors/<connector>/config")
@documented("The connector's config", {"200": json_answer(CONFIG, "config")}, 404)
def get_connector_config(connector: str) -> Response:
    return jsonify(redacted(rest.connector_config(configured_row(connector))))


@bp.get("/connectors/<connector>/tasks")
@documented("The task configs", {"200": json_answer(array_of(ref("TaskInfo")), "TaskInfo list")}, 404)
def get_task_configs(connector: str) -> Response:
    tasks = rest.task_infos(configured_row(connector))
    return jsonify([{**task, "config": redacted(task["config"])} for task in tasks])


@bp.get("/connectors/<connector>/tasks/<int(signed=True):task>/status")
@documented("One task's status", {"200": json_answer(ref("TaskState"), "TaskState")}, 404)
def get_task_status(connector: str, task: int) -> Response:
    row = status_row(connector)
    body = rest.task_state(row, task) if row is not None else None
    if body is None:
        raise ConnectRestException(404, rest.task_status_not_found_message(connector, task))
    return jsonify(body)
