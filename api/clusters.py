"""The Connect clusters the API answers for (issue 37): ``GET /clusters``, and every path of the API under
``/clusters/<id>``: ``/clusters/<id>`` itself is Connect's root (``GET /``: the server's version and Kafka cluster id),
so a Connect client given ``http://<api>/clusters/<id>`` as its base URL talks to that cluster as to a worker.

Connect's own paths (``/connectors``, ...) answer for the default cluster, unchanged, so Connect clients keep
working; ``/clusters/<id>/connectors`` answers the same for cluster ``<id>``. The prefix is taken off before routing
by :class:`ClusterPaths` (the WSGI ``SCRIPT_NAME``/``PATH_INFO`` split, as an application mounted under a prefix):
each view, its role (:data:`connect_state.api.auth.ROUTE_ROLES`), its metrics label and its OpenAPI entry are the
unprefixed route's, and the audit and the ETags keep the whole path. An id that names no cluster answers 404
``Cluster <id> not found`` to an authenticated caller; a request no authentication ran for (a path that is no route,
or the public ``/health``) gets Connect's plain ``HTTP 404 Not Found`` instead, so the message tells ids to no one
who may not read them (``/clusters/<id>/health`` is public as ``/health`` is: whether it answers 404 does).
Each cluster has the API's resources of its own (:mod:`connect_state.api.resources`: its settings, Kafka clients and
tables), so a request under ``/clusters/<id>`` reads that cluster's tables and writes to its Kafka with its fresh-read
checks, and never another's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, request

from connect_state.api.auth import clusters_allowed, current_principal
from connect_state.api.errors import ConnectRestException
from connect_state.api.health import HTTP_STATUS, health_and_kafka
from connect_state.api.openapi import ANY, array_of, documented, json_answer
from connect_state.api.resources import (
    CLUSTER_ENVIRON_KEY,
    AppResources,
    add_cluster,
    default_resources,
    each_at_once,
    every_resources,
    request_cluster_id,
)
from connect_state.connect.rest import http_error_message
from connect_state.core.clusters import Cluster, clusters

__all__ = [
    "PREFIX",
    "ClusterPaths",
    "bp",
    "cluster_of_request",
    "init_app",
    "known_clusters",
    "root_of_request",
]

bp = Blueprint("clusters", __name__)

PREFIX = "/clusters/"
EXTENSION = "connect_state.clusters"
NO_ROUTE_MESSAGE = http_error_message(404, "Not Found")


class ClusterPaths:
    """WSGI middleware: ``/clusters/<id>/<rest>`` is served as ``/<rest>`` (``SCRIPT_NAME`` gains the prefix, so
    every URL the app builds keeps it), the id left in the environ under :data:`CLUSTER_ENVIRON_KEY`.
    ``/clusters/<id>`` itself is served as ``/``; ``/clusters`` is left to its own route."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        path: str = environ.get("PATH_INFO", "")
        if path.startswith(PREFIX):
            cluster, _slash, rest = path[len(PREFIX) :].partition("/")
            if cluster:
                environ[CLUSTER_ENVIRON_KEY] = cluster
                environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + PREFIX + cluster
                environ["PATH_INFO"] = "/" + rest
        return self.app(environ, start_response)


def known_clusters() -> dict[str, Cluster]:
    """The app's clusters by id, the default first."""
    found: dict[str, Cluster] = current_app.extensions[EXTENSION]
    return found


def cluster_of_request() -> Cluster:
    """The cluster this request is for: the one its ``/clusters/<id>`` prefix names, else the default; 404 for an id
    that names none (see the module's docstring for who is told why)."""
    every, named = known_clusters(), request_cluster_id()
    try:
        return every[named]
    except KeyError:
        told = current_principal() is not None
        raise ConnectRestException(404, f"Cluster {named} not found" if told else NO_ROUTE_MESSAGE) from None


def root_of_request() -> str:
    """The API's own root for this request: its ``SCRIPT_NAME`` without the ``/clusters/<id>`` prefix."""
    named = request.environ.get(CLUSTER_ENVIRON_KEY)
    prefix = f"{PREFIX}{named}" if named is not None else ""
    root = request.script_root
    return root[: -len(prefix)] if prefix and root.endswith(prefix) else root


def init_app(app: Flask, resources: Mapping[str, AppResources] | None = None) -> None:
    """Serve every path under ``/clusters/<id>/`` and refuse an unknown id; call after the authentication's hook.
    Each further cluster is served with its ``resources`` (default: created on its settings), the default cluster
    with the app's."""
    given = resources or {}
    default = default_resources(app)
    every = clusters(default.settings)
    app.extensions[EXTENSION] = {cluster.id: cluster for cluster in every}
    for cluster in every:
        if cluster.default:
            add_cluster(app, cluster.id, default, owned=False)  # the app's own, closed as such
        elif cluster.id in given:
            add_cluster(app, cluster.id, given[cluster.id], owned=False)  # the caller's
        else:
            add_cluster(app, cluster.id, AppResources(cluster.settings))
    app.wsgi_app = ClusterPaths(app.wsgi_app)  # type: ignore[method-assign]

    def refuse_unknown_cluster() -> None:
        cluster_of_request()

    app.before_request(refuse_unknown_cluster)


def cluster_view(cluster: Cluster, health: dict[str, Any]) -> dict[str, Any]:
    """A cluster as ``GET /clusters`` lists it: the workers' own property names for where its state is."""
    return {
        "id": cluster.id,
        "default": cluster.default,
        "bootstrap.servers": cluster.bootstrap_servers,
        "group.id": cluster.group_id,
        "config.storage.topic": cluster.config_storage_topic,
        "offset.storage.topic": cluster.offset_storage_topic,
        "status.storage.topic": cluster.status_storage_topic,
        "health": health,
    }


def _health(resources: AppResources) -> dict[str, Any]:
    state, kafka_error = health_and_kafka(resources)
    return {
        "status": str(state.status),
        "message": state.message,
        "http_status": HTTP_STATUS[state.status],
        "kafka": {"reachable": kafka_error is None, "message": kafka_error},
    }


@bp.get("/clusters")
@documented("The Connect clusters this API answers for, each with its health (issue 37)", {
    "200": json_answer(array_of(ANY), "Clusters")
})  # fmt: skip
def list_clusters() -> Response:
    resources, every = every_resources(), known_clusters()
    allowed = list(clusters_allowed(every))
    healths = each_at_once(_health, [resources[key] for key in allowed])  # their Kafkas asked at once
    return jsonify([cluster_view(every[key], health) for key, health in zip(allowed, healths, strict=True)])
