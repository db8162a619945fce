"""Connect's REST messages and response bodies (spec §5), as Connect's resources and entities write them.

The Flask views (:mod:`connect_state.api`) answer with these; Connect's clients can read them unchanged. Error bodies
are Connect's ``ErrorMessage`` entity, ``{"error_code": <status>, "message": <text or null>}``
(:func:`error_message`). Messages that are connect-state's own (not Connect's) stay with their views.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, cast

__all__ = [
    "RESET_DISABLED",
    "TRACKING_DISABLED",
    "UNDEFINED_VERSION",
    "active_topics_info",
    "connector_not_found_message",
    "connector_offsets",
    "connector_state_info",
    "error_message",
    "http_error_message",
    "not_stopped_message",
    "offsets_success_message",
    "sink_alter_failed_message",
    "sink_alter_zombie_message",
    "sink_list_failed_message",
    "sink_reset_failed_message",
    "sink_reset_zombie_message",
    "source_modify_failed_message",
    "source_modify_timeout_message",
    "status_not_found_message",
    "unknown_connector_message",
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

    ``with_version=False`` gives the body of workers before Kafka 4.3 (no ``version``, spec §5.3).
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


def source_modify_failed_message(name: str) -> str:
    """500 of a source PATCH / DELETE whose offsets write failed."""
    return f"Failed to modify offsets for source connector {name}"
