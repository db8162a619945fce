"""Questions over every Connect cluster at once (ours, issue 37): one answer where each cluster's own API would need a
call per cluster.

* ``GET /fleet/connectors[?state=S][&verdict=V][&topic=T][&name=N][&version=P]`` -> 200 ``{"connectors":
  [{"cluster", "name", "type", "connector_class", "version", "state", "target_state", "tasks": [{"id", "state"}],
  "verdict", "topics"}], "unavailable": [{"cluster", "message"}]}``: every configured connector of every cluster, by
  cluster (in the order of ``GET /clusters``) then name, from each cluster's tables (``connectors``,
  ``connector_verdicts``, ``active_topics``, as ``/clusters/<id>/connectors?expand=status``,
  ``/clusters/<id>/verdicts`` and ``/clusters/<id>/connectors/<name>/topics`` answer them). ``state`` keeps the
  connectors in that Connect state (RUNNING, PAUSED, STOPPED, FAILED, UNASSIGNED, RESTARTING; any case), ``verdict``
  those with that verdict (issue 35), ``topic`` those whose active topics (KIP-558) hold that topic, ``name`` the
  connectors of that name (in whichever clusters have one), ``version`` those whose connector reports that plugin
  version (the ``version`` of its status, as Connect's ``GET /connectors/<name>/status`` shows it; null before it
  reports one). A bad ``state`` or ``verdict`` is a 400 naming the values. A cluster whose tables cannot be read (the
  jobs have not created them yet) is listed in ``unavailable`` with the reason, and the others are answered.

Role ``read`` without a connector pattern, as every route without a connector, in one cluster at least: the answer
holds the clusters the principal has it in (a ``<cluster>/read`` grant: that cluster's only).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flask import Blueprint, Response, jsonify, request

from connect_state.api.args import enum_arg
from connect_state.api.auth import clusters_allowed
from connect_state.api.clusters import known_clusters
from connect_state.api.openapi import ANY, STRING, array_of, documented, json_answer, obj, query
from connect_state.api.resources import get_tables, serving_cluster
from connect_state.api.rows import is_configured
from connect_state.api.verdicts import verdict_rows
from connect_state.connect import rest
from connect_state.core.errors import ConnectStateError, TableNotFoundError
from connect_state.core.vocabulary import State
from connect_state.tables.schemas import ACTIVE_TOPICS, CONNECTORS
from connect_state.verdicts.vocabulary import Verdict

__all__ = ["bp"]

bp = Blueprint("fleet", __name__, url_prefix="/fleet")

CONNECTOR_COLUMNS = [
    "name",
    "type",
    "connector_class",
    "connector_version",
    "target_state",
    "connector_state",
    "tasks",
    "config",
    "deleted",
]
FLEET_CONNECTOR = obj(
    cluster=STRING,
    name=STRING,
    type=STRING,
    connector_class={"type": "string", "nullable": True},
    version={"type": "string", "nullable": True},
    state={"type": "string", "nullable": True},
    target_state={"type": "string", "nullable": True},
    tasks=array_of(obj(id={"type": "integer"}, state=STRING)),
    verdict=STRING,
    topics=array_of(STRING),
)


def _topics() -> dict[str, list[str]]:
    """The active topics of the request's cluster by connector (none before the active-topics job ran)."""
    try:
        rows = get_tables().rows(ACTIVE_TOPICS, columns=["connector", "topic"])
    except TableNotFoundError:
        return {}
    found: dict[str, list[str]] = {}
    for row in rows:
        found.setdefault(str(row["connector"]), []).append(str(row["topic"]))
    return {name: sorted(topics) for name, topics in found.items()}


def _connectors(cluster: str) -> Iterator[dict[str, Any]]:
    """The configured connectors of the request's cluster, as the fleet lists them."""
    rows = sorted(
        (row for row in get_tables().rows(CONNECTORS, columns=CONNECTOR_COLUMNS) if is_configured(row)),
        key=lambda row: str(row["name"]),
    )
    verdicts, topics = verdict_rows(), _topics()
    for row in rows:
        name = str(row["name"])
        verdict = verdicts.get(name)
        yield {
            "cluster": cluster,
            "name": name,
            "type": row["type"],
            "connector_class": row["connector_class"],
            "version": rest.shown_version(row["connector_version"]),
            "state": row["connector_state"],
            "target_state": row["target_state"],
            "tasks": [{"id": task["id"], "state": task["state"]} for task in sorted(row["tasks"] or [], key=_task_id)],
            "verdict": verdict["verdict"] if verdict is not None else Verdict.UNKNOWN.value,
            "topics": topics.get(name, []),
        }


def _task_id(task: dict[str, Any]) -> int:
    return int(task["id"])


@bp.get("/connectors")
@documented(
    "Every cluster's connectors, or those in a state, with a verdict, on a topic, of a name or of a plugin version "
    "(issue 37)",
    {"200": json_answer(obj(connectors=array_of(FLEET_CONNECTOR), unavailable=array_of(ANY)), "The fleet")},
    400,
    params=[
        query("state", {**STRING, "enum": [member.value for member in State]}),
        query("verdict", {**STRING, "enum": [member.value for member in Verdict]}),
        query("topic", STRING, description="connectors whose active topics (KIP-558) hold this topic"),
        query("name", STRING, description="connectors of this name, in whichever clusters have one"),
        query("version", STRING, description="connectors whose status reports this plugin version"),
    ],
)
def fleet_connectors() -> Response:
    state = enum_arg("state", State, "connector state")
    verdict = enum_arg("verdict", Verdict, "verdict")
    topic, name, version = request.args.get("topic"), request.args.get("name"), request.args.get("version")
    found: list[dict[str, Any]] = []
    unavailable: list[dict[str, str]] = []
    for cluster in clusters_allowed(known_clusters()):  # those the principal may read
        with serving_cluster(cluster):
            try:
                entries = list(_connectors(cluster))
            except ConnectStateError as err:  # its tables cannot be read (not created yet, storage away)
                unavailable.append({"cluster": cluster, "message": str(err)})
                continue
        found.extend(
            entry
            for entry in entries
            if (state is None or entry["state"] == state.value)
            and (verdict is None or entry["verdict"] == verdict.value)
            and (topic is None or topic in entry["topics"])
            and (name is None or entry["name"] == name)
            and (version is None or entry["version"] == version)
        )
    return jsonify({"connectors": found, "unavailable": unavailable})
