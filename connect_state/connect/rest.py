"""Connect's REST messages and response bodies, as Connect's resources and entities write them
(``connect/runtime/src/main/java/org/apache/kafka/connect/runtime/rest/resources/ConnectorsResource.java``,
``connect/runtime/src/main/java/org/apache/kafka/connect/runtime/rest/entities/``).

The Flask views (:mod:`connect_state.api`) answer with these; Connect's clients can read them unchanged. Error bodies
are Connect's ``ErrorMessage`` entity, ``{"error_code": <status>, "message": <text or null>}``
(:func:`error_message`). Messages that are connect-state's own (not Connect's) stay with their views.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal, cast

from connect_state.core.vocabulary import ConnectorType

__all__ = [
    "MIRRORED_CONNECT_VERSION",
    "RESET_DISABLED",
    "TRACKING_DISABLED",
    "UNDEFINED_VERSION",
    "ZOMBIE_FENCING_FAILED",
    "active_topics_info",
    "connector_config",
    "connector_info",
    "connector_not_found_message",
    "connector_offsets",
    "connector_state_info",
    "error_message",
    "expanded_connectors",
    "http_error_message",
    "modify_offsets_failed_message",
    "modify_offsets_unsupported_message",
    "not_stopped_message",
    "offsets_success_message",
    "restart_state_info",
    "restart_status_not_found_message",
    "server_info",
    "sink_alter_failed_message",
    "sink_alter_zombie_message",
    "sink_list_failed_message",
    "sink_reset_failed_message",
    "sink_reset_zombie_message",
    "source_modify_failed_message",
    "source_modify_timeout_message",
    "status_not_found_message",
    "task_infos",
    "task_state",
    "task_status_not_found_message",
    "unknown_connector_colon_message",
    "unknown_connector_message",
    "zombie_fencing_failed_message",
]

# ---------------------------------------------------------------------------------------------------------------------
# Errors (ConnectExceptionMapper, ErrorMessage)
# ---------------------------------------------------------------------------------------------------------------------


def error_message(status: int, message: str | None) -> dict[str, object]:
    """Connect's ``ErrorMessage`` entity: ``{"error_code": status, "message": message}`` (key order as written)."""
    return {"error_code": status, "message": message}


def http_error_message(status: int, reason: str) -> str:
    """Jersey's message for a routing or protocol error (an unknown route, a wrong method): ``"HTTP 404 Not
    Found"``."""
    return f"HTTP {status} {reason}"


def connector_not_found_message(name: str) -> str:
    """The 404 of ``DELETE /connectors/<name>`` and of the offsets endpoints
    (``NotFoundException("Connector " + connName + " not found")``)."""
    return f"Connector {name} not found"


def unknown_connector_message(name: str) -> str:
    """The 404 message of stop, pause and resume (``NotFoundException("Unknown connector " + connName)``)."""
    return f"Unknown connector {name}"


# ---------------------------------------------------------------------------------------------------------------------
# GET /connectors/<name>/status (ConnectorStateInfo)
# ---------------------------------------------------------------------------------------------------------------------

#: ``PluginUtils.UNDEFINED_VERSION``: a status version the REST layer leaves out (``PluginInfo.NoVersionFilter``).
UNDEFINED_VERSION = "undefined"


def shown_version(version: object) -> object:
    """A status's ``version`` as a value: None for ``"undefined"``, which the REST layer leaves out of a status
    (:func:`_state_body`), else as it is."""
    return None if version == UNDEFINED_VERSION else version


def status_not_found_message(name: str) -> str:
    """The 404 message of ``GET /connectors/<name>/status`` when the status store has no connector status."""
    return f"No status found for connector {name}"


def _state_body(
    state: object, worker_id: object, trace: object, version: object, with_version: bool
) -> dict[str, object]:
    """``ConnectorStateInfo.AbstractState`` as Jackson writes it: creator properties first (state, worker_id, version),
    then ``trace``. ``version`` is left out only when it is ``"undefined"`` (``PluginInfo.NoVersionFilter``; null is
    written), ``trace`` when null or empty (``NON_EMPTY``)."""
    body: dict[str, object] = {"state": state, "worker_id": worker_id}
    if with_version and version != UNDEFINED_VERSION:
        body["version"] = version
    if trace:
        body["trace"] = trace
    return body


def connector_state_info(row: Mapping[str, object], *, with_version: bool = True) -> dict[str, object] | None:
    """``GET /connectors/<name>/status`` (``ConnectorStateInfo``) from a ``connectors`` table row
    (:func:`connect_state.folds.connector_states.connector_row`, or a row read back from the table).

    ``AbstractHerder.connectorStatus``: None when there is no connector status (Connect answers 404,
    :func:`status_not_found_message`); tasks sorted by id; ``type`` from the config. Key order is Connect's::

        {"name":"c","connector":{"state":"RUNNING","worker_id":"w:8083","version":"4.3.1"},
         "tasks":[{"id":0,"state":"FAILED","worker_id":"w:8083","version":"4.3.1","trace":"..."}],"type":"sink"}

    ``with_version=False`` gives the body of workers before Kafka 4.3 (no ``version``).
    """
    if row["connector_state"] is None:
        return None
    connector = _state_body(
        row["connector_state"],
        row["connector_worker_id"],
        row["connector_trace"],
        row["connector_version"],
        with_version,
    )
    tasks = sorted(cast("Iterable[Mapping[str, Any]]", row["tasks"]), key=lambda task: task["id"])
    return {
        "name": row["name"],
        "connector": connector,
        "tasks": [
            {
                "id": task["id"],
                **_state_body(task["state"], task["worker_id"], task["trace"], task["version"], with_version),
            }
            for task in tasks
        ],
        "type": row["type"],
    }


# ---------------------------------------------------------------------------------------------------------------------
# KIP-558 active topics (ConnectorsResource.getConnectorActiveTopics / resetConnectorActiveTopics)
# ---------------------------------------------------------------------------------------------------------------------

#: 403 of both topic endpoints when ``topic.tracking.enable=false``.
TRACKING_DISABLED = "Topic tracking is disabled."
#: 403 of the reset when ``topic.tracking.allow.reset=false``.
RESET_DISABLED = "Topic tracking reset is disabled."


def active_topics_info(connector: str, topics: Iterable[str]) -> dict[str, object]:
    """``GET /connectors/<name>/topics``: Connect's ``ActiveTopicsInfo``, keyed by the connector name."""
    return {connector: {"topics": list(topics)}}


# ---------------------------------------------------------------------------------------------------------------------
# KIP-875 offsets (ConnectorsResource, DistributedHerder.modifyConnectorOffsetsChecks, Worker)
# ---------------------------------------------------------------------------------------------------------------------

_ZOMBIE_TAIL = (
    "could be successfully completed. If the connector is in a stopped state, this operation can be safely retried. "
    "If it doesn't eventually succeed, the Connect cluster may need to be restarted to get rid of the zombie sink "
    "tasks."
)


def connector_offsets(entries: Iterable[Mapping[str, object]]) -> dict[str, object]:
    """``GET /connectors/<name>/offsets``: ``ConnectorOffsets``, ``{"offsets":[{"partition":...,"offset":...}]}``."""
    return {"offsets": list(entries)}


def offsets_success_message(verb: Literal["altered", "reset"], connector_managed: bool) -> str:
    """``Worker.completeModifyOffsetsCallback``: the ``message`` of a successful ``PATCH`` (``altered``) or
    ``DELETE`` (``reset``). ``connector_managed`` is what the connector's ``alterOffsets`` returned (``false`` by
    default; ``true`` for the FileStream connectors).
    """
    if verb not in ("altered", "reset"):
        raise ValueError(f"verb must be 'altered' or 'reset', not {verb!r}")
    if connector_managed:
        return f"The offsets for this connector have been {verb} successfully"
    return (
        f"The Connect framework-managed offsets for this connector have been {verb} successfully. However, if this "
        f"connector manages offsets externally, they will need to be manually {verb} in the system that the connector "
        "uses."
    )


def not_stopped_message(name: str) -> str:
    """400 of PATCH / DELETE offsets for a connector that is not STOPPED with 0 tasks (``BadRequestException``)."""
    return (
        "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for the "
        f"specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint"
    )


def sink_alter_zombie_message(name: str) -> str:
    """500 of a sink PATCH whose group still has members (``UnknownMemberIdException``,
    ``GroupSubscribedToTopicException``; ``Worker.alterSinkConnectorOffsets``)."""
    return (
        f"Failed to alter consumer group offsets for connector {name} either because its tasks haven't stopped "
        f"completely yet or the connector was resumed before the request to alter its offsets {_ZOMBIE_TAIL}"
    )


def sink_alter_failed_message(name: str) -> str:
    """500 of a sink PATCH for any other admin error (timeouts included)."""
    return f"Failed to alter consumer group offsets for connector {name}"


def sink_list_failed_message(name: str) -> str:
    """500 of a sink DELETE whose group offsets cannot be listed (``Worker.modifySinkConnectorOffsets``)."""
    return f"Failed to list offsets prior to resetting offsets for sink connector {name}"


def sink_reset_zombie_message(name: str) -> str:
    """500 of a sink DELETE whose group still has members (``GroupNotEmptyException``;
    ``Worker.resetSinkConnectorOffsets``)."""
    return (
        f"Failed to reset consumer group offsets for connector {name} either because its tasks haven't stopped "
        f"completely yet or the connector was resumed before the request to reset its offsets {_ZOMBIE_TAIL}"
    )


def sink_reset_failed_message(name: str) -> str:
    """500 of a sink DELETE for any other admin error (timeouts included)."""
    return f"Failed to reset consumer group offsets for sink connector {name}"


def source_modify_timeout_message(name: str) -> str:
    """500 of a source PATCH / DELETE whose offsets were not flushed in time
    (``Worker.modifySourceConnectorOffsets``)."""
    return f"Timed out while attempting to modify offsets for source connector {name}"


#: Connect's 500 when the fencing before a source connector's offsets change fails, with exactly-once source support
#: enabled (``DistributedHerder.modifyConnectorOffsets``).
ZOMBIE_FENCING_FAILED = "Failed to perform zombie fencing for source connector prior to modifying offsets"


def zombie_fencing_failed_message(name: str, reason: str) -> str:
    """:data:`ZOMBIE_FENCING_FAILED`, then ours: why the connector's transactional producers could not be fenced, that
    nothing was written, and what to do."""
    return (
        f"{ZOMBIE_FENCING_FAILED}. connect-state could not fence the transactional producers of source connector "
        f"{name} ({reason}); no offsets were written. The principal of kafka.client.properties needs WRITE and "
        "DESCRIBE on the connector's transactional ids (TransactionalId <connect.group.id>-<connector>-<task>), the "
        "broker must support transactions, and connect.group.id must be the workers' group.id; retry once that is so "
        "(exactly.once.source.support=disabled is only right when the workers run without exactly-once source "
        "support)."
    )


def modify_offsets_failed_message(name: str, kind: ConnectorType) -> str:
    """500 of a PATCH / DELETE that failed: ``ConnectUtils.maybeWrap(t, "Failed to modify offsets for <type> connector
    <name>")``: an offsets write that failed, or an ``alterOffsets`` that threw something not a ``ConnectException``."""
    return f"Failed to modify offsets for {kind.value} connector {name}"


def modify_offsets_unsupported_message(name: str) -> str:
    """500 when the connector's ``alterOffsets`` throws ``UnsupportedOperationException``."""
    return f"Failed to modify offsets for connector {name} because it doesn't support external modification of offsets"


def source_modify_failed_message(name: str) -> str:
    """500 of a source PATCH / DELETE whose offsets write failed."""
    return modify_offsets_failed_message(name, ConnectorType.SOURCE)


# ---------------------------------------------------------------------------------------------------------------------
# Read API (RootResource, ConnectorsResource read endpoints; AbstractHerder / DistributedHerder, ClusterConfigState)
# ---------------------------------------------------------------------------------------------------------------------

#: The Connect version whose REST API connect-state mirrors: ``GET /``'s ``version`` unless ``api.connect.version``
#: says otherwise.
MIRRORED_CONNECT_VERSION = "4.3.1"


def server_info(version: str, commit: str, kafka_cluster_id: str | None) -> dict[str, object]:
    """``GET /``: Connect's ``ServerInfo``, ``{"version":...,"commit":...,"kafka_cluster_id":...}``."""
    return {"version": version, "commit": commit, "kafka_cluster_id": kafka_cluster_id}


def unknown_connector_colon_message(name: str) -> str:
    """The 404 of the restart endpoints (``NotFoundException("Unknown connector: " + connName)``)."""
    return f"Unknown connector: {name}"


def task_status_not_found_message(name: str, task: int) -> str:
    """The 404 of ``GET /connectors/<name>/tasks/<id>/status`` (``"No status found for task " + ConnectorTaskId``,
    whose ``toString`` is ``<connector>-<task>``)."""
    return f"No status found for task {name}-{task}"


def restart_status_not_found_message(name: str) -> str:
    """The 404 of a restart with ``includeTasks`` / ``onlyFailed`` when the status store has no connector status
    (``DistributedHerder.restartConnectorAndTasks``; the request was written all the same)."""
    return f"Status for connector {name} not found"


def _config(row: Mapping[str, object]) -> dict[str, object]:
    return cast("dict[str, object]", json.loads(cast(str, row["config"])))


def _task_configs(row: Mapping[str, object]) -> dict[int, object]:
    text = row.get("task_configs")
    return {int(task): config for task, config in json.loads(cast(str, text)).items()} if text else {}


def _task_ids(row: Mapping[str, object]) -> list[int]:
    """``ClusterConfigState.tasks``: ids 0..taskCount-1, none while the connector is inconsistent."""
    if row.get("inconsistent"):
        return []
    return list(range(cast(int, row.get("task_count") or 0)))


def connector_info(row: Mapping[str, object]) -> dict[str, object]:
    """``GET /connectors/<name>``: ``ConnectorInfo`` (``AbstractHerder.connectorInfo``) from a configured
    ``connectors`` row: ``{"name", "config", "tasks": [{"connector","task"}], "type"}``."""
    name = row["name"]
    return {
        "name": name,
        "config": _config(row),
        "tasks": [{"connector": name, "task": task} for task in _task_ids(row)],
        "type": row["type"],
    }


def connector_config(row: Mapping[str, object]) -> dict[str, object]:
    """``GET /connectors/<name>/config``: the raw connector config."""
    return _config(row)


def task_infos(row: Mapping[str, object]) -> list[dict[str, object]]:
    """``GET /connectors/<name>/tasks``: ``TaskInfo`` per id 0..taskCount-1 (``DistributedHerder.taskConfigs``: the
    committed count even when inconsistent, ``rawTaskConfig`` null for an id without an applied config)."""
    name = row["name"]
    configs = _task_configs(row)
    count = cast(int, row.get("task_count") or 0)
    return [{"id": {"connector": name, "task": task}, "config": configs.get(task)} for task in range(count)]


def task_state(row: Mapping[str, object], task: int, *, with_version: bool = True) -> dict[str, object] | None:
    """``GET /connectors/<name>/tasks/<id>/status``: ``ConnectorStateInfo.TaskState``, None without a status."""
    for status in cast("Iterable[Mapping[str, Any]]", row.get("tasks") or []):
        if status["id"] == task:
            body = _state_body(status["state"], status["worker_id"], status["trace"], status["version"], with_version)
            return {"id": task, **body}
    return None


def restart_state_info(row: Mapping[str, object], include_tasks: bool, only_failed: bool) -> dict[str, object] | None:
    """The 202 body of a restart with ``includeTasks`` or ``onlyFailed`` (``AbstractHerder.buildRestartPlan``): the
    connector's status with RESTARTING for what the request restarts (``RestartRequest.shouldRestartConnector``:
    ``!onlyFailed || FAILED``; ``shouldRestartTask``: ``includeTasks && (!onlyFailed || FAILED)``). None without a
    connector status (Connect's 404, :func:`restart_status_not_found_message`)."""
    info = connector_state_info({**row, "tasks": row.get("tasks") or []})
    if info is None:
        return None

    def restarted(body: Mapping[str, object], restart: bool) -> dict[str, object]:
        return {**body, "state": "RESTARTING"} if restart else dict(body)

    connector = cast("dict[str, object]", info["connector"])
    info["connector"] = restarted(connector, not only_failed or connector["state"] == "FAILED")
    info["tasks"] = [
        restarted(task, include_tasks and (not only_failed or task["state"] == "FAILED"))
        for task in cast("list[dict[str, object]]", info["tasks"])
    ]
    return info


def expanded_connectors(rows: Iterable[Mapping[str, object]], expand: Iterable[str]) -> dict[str, dict[str, object]]:
    """``GET /connectors?expand=status&expand=info`` (``ConnectorsResource.listConnectors``) from the configured
    connectors' rows: per connector, ``status`` (``ConnectorStateInfo``) and/or ``info`` (``ConnectorInfo``); unknown
    expansions are ignored. A connector whose status is asked for but missing is left out (Connect's
    ``NotFoundException`` is caught per connector)."""
    wanted = list(expand)
    out: dict[str, dict[str, object]] = {}
    for row in rows:
        expansions: dict[str, object] = {}
        missing = False
        for expansion in wanted:
            if expansion == "status":
                status = connector_state_info({**row, "tasks": row.get("tasks") or []})
                if status is None:
                    missing = True
                    break
                expansions["status"] = status
            elif expansion == "info":
                expansions["info"] = connector_info(row)
        if not missing:
            out[cast(str, row["name"])] = expansions
    return out
