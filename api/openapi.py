"""``GET /openapi.json``: the OpenAPI 3.0 description of every endpoint of the app (issue 14).

:func:`spec` builds it; ``tests/unit/test_openapi.py`` checks that its paths and methods are exactly the app's routes
(Flask's ``static`` route aside) and runs schemathesis over it against the app. An endpoint added without its entry
here fails that test. Connect's endpoints carry Connect's entity schemas; every operation documents Connect's error
body (``ErrorMessage``) for its 4xx answers, and 503 (a table not created yet, Kafka unreachable) where it reads a
table or Kafka.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify

from connect_state.connect.rest import MIRRORED_CONNECT_VERSION
from connect_state.folds.connector_states import EVENTS

bp = Blueprint("openapi", __name__)

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


ANY: Schema = {}
NULLABLE_STRING: Schema = {"type": "string", "nullable": True}
NULLABLE_INT: Schema = {"type": "integer", "nullable": True}
STATE: Schema = {
    "type": "object",
    "required": ["state", "worker_id"],
    "properties": {
        "state": {"type": "string"},
        "worker_id": NULLABLE_STRING,
        "version": NULLABLE_STRING,
        "trace": {"type": "string"},
    },
}
TASK_ID: Schema = {
    "type": "object",
    "required": ["connector", "task"],
    "properties": {"connector": {"type": "string"}, "task": {"type": "integer"}},
    "additionalProperties": False,
}
CONFIG: Schema = {"type": "object", "additionalProperties": {"type": "string", "nullable": True}}
PAGE: dict[str, Schema] = {
    "total": {"type": "integer"},
    "offset": {"type": "integer"},
    "limit": {"type": "integer"},
    "next_offset": NULLABLE_INT,
}

SCHEMAS: dict[str, Schema] = {
    "ErrorMessage": {
        "type": "object",
        "required": ["error_code", "message"],
        "properties": {"error_code": {"type": "integer"}, "message": NULLABLE_STRING},
        "additionalProperties": False,
    },
    "ServerInfo": {
        "type": "object",
        "required": ["version", "commit", "kafka_cluster_id"],
        "properties": {
            "version": {"type": "string"},
            "commit": {"type": "string"},
            "kafka_cluster_id": NULLABLE_STRING,
        },
        "additionalProperties": False,
    },
    "ConnectorState": STATE,
    "TaskState": {
        **STATE,
        "required": ["id", "state", "worker_id"],
        "properties": {"id": {"type": "integer"}, **STATE["properties"]},
    },
    "ConnectorStateInfo": {
        "type": "object",
        "required": ["name", "connector", "tasks", "type"],
        "properties": {
            "name": {"type": "string"},
            "connector": _ref("ConnectorState"),
            "tasks": {"type": "array", "items": _ref("TaskState")},
            "type": {"type": "string"},
        },
        "additionalProperties": False,
    },
    "ConnectorInfo": {
        "type": "object",
        "required": ["name", "config", "tasks", "type"],
        "properties": {
            "name": {"type": "string"},
            "config": CONFIG,
            "tasks": {"type": "array", "items": TASK_ID},
            "type": {"type": "string"},
        },
        "additionalProperties": False,
    },
    "TaskInfo": {
        "type": "object",
        "required": ["id", "config"],
        "properties": {"id": TASK_ID, "config": {**CONFIG, "nullable": True}},
        "additionalProperties": False,
    },
    "ConnectorOffsets": {
        "type": "object",
        "required": ["offsets"],
        "properties": {
            "offsets": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["partition", "offset"],
                    "properties": {"partition": ANY, "offset": ANY},
                },
            }
        },
    },
    "Message": {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}},
    "Event": {
        "type": "object",
        "required": ["event", "details", "source", "kafka_partition", "kafka_offset", "kafka_timestamp"],
        "properties": {
            "event": {"type": "string", "enum": list(EVENTS)},
            "details": {"type": "object"},
            "source": {"type": "string", "enum": ["config", "status"]},
            "kafka_partition": {"type": "integer"},
            "kafka_offset": {"type": "integer"},
            "kafka_timestamp": {"type": "integer"},
        },
    },
    "HistoryOffset": {
        "type": "object",
        "required": ["partition", "offset", "kafka_timestamp"],
        "properties": {
            "partition": ANY,
            "offset": ANY,
            "offsets_topic": {"type": "string"},
            "kafka_timestamp": NULLABLE_INT,
        },
    },
    "ConfigVersion": {
        "type": "object",
        "required": ["version", "event", "config", "changes", "changed_keys", "kafka_offset", "kafka_timestamp"],
        "properties": {
            "version": {"type": "integer", "minimum": 1},
            "event": {"type": "string", "enum": ["created", "reconfigured", "deleted"]},
            "config": {**CONFIG, "nullable": True},
            "changes": {
                "type": "object",
                "nullable": True,
                "required": ["added", "removed", "changed"],
                "properties": {
                    "added": {"type": "object"},
                    "removed": {"type": "object"},
                    "changed": {"type": "object"},
                },
            },
            "changed_keys": {"type": "array", "items": {"type": "string"}},
            "kafka_offset": {"type": "integer"},
            "kafka_timestamp": NULLABLE_INT,
        },
    },
}

CONNECTOR: Schema = {"name": "connector", "in": "path", "required": True, "schema": {"type": "string"}}
TASK: Schema = {"name": "task", "in": "path", "required": True, "schema": {"type": "integer"}}
TOPIC: Schema = {"name": "topic", "in": "path", "required": True, "schema": {"type": "string"}}
LEASE: Schema = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
TIME = {"type": "string", "description": "epoch milliseconds or ISO-8601"}
PAGING = [
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
    {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}},
]


def _json(schema: Schema, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> Schema:
    return _json(_ref("ErrorMessage"), description)


def _empty(description: str) -> Schema:
    return {"description": description}


def op(
    summary: str, ok: dict[str, Schema], *errors: int, params: list[Schema] | None = None, body: Schema | None = None
) -> Schema:
    """An operation: its answers (``ok``) plus Connect's error body for each of ``errors``, always with 503 (a table
    not created yet, Kafka unreachable) and 500 (a write whose outcome is unknown, an unexpected failure)."""
    responses = dict(ok)
    # A path parameter that does not route (an encoded slash) is Flask's 404, as Jersey's.
    routed = {404} if any(p.get("in") == "path" for p in params or []) else set()
    # Issue 13: authentication (401), roles (403), the body bound (413), on every operation; issue 33: failed logins
    # limited (429).
    for status in sorted({*errors, *routed, 401, 403, 413, 429, 500, 503}):
        responses[str(status)] = _error(
            {
                400: "Bad request (Connect's error body)",
                401: "No valid credentials (with WWW-Authenticate)",
                403: "Forbidden by the settings or by the principal's roles",
                413: "Request body larger than api.max.body.bytes",
                429: "Too many failed logins for the claimed user or from the client's address (with Retry-After)",
                404: "Not found (Connect's message)",
                409: "The config topic could not be read to its end in time; nothing was written",
                500: "A write whose outcome is unknown, or an unexpected failure",
                501: "Not expressible in Connect's internal topics (the message says what to do instead)",
                503: "A table not created yet by its job, or Kafka unreachable",
            }[status]
        )
    operation: Schema = {"summary": summary, "responses": responses}
    if params:
        operation["parameters"] = params
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return operation


def _paths() -> dict[str, Schema]:
    status = {"200": _json(_ref("ConnectorStateInfo"), "Connect's ConnectorStateInfo")}
    return {
        "/": {"get": op("Connect's ServerInfo", {"200": _json(_ref("ServerInfo"), "version, commit, cluster id")})},
        "/openapi.json": {
            "get": {"summary": "This description", "responses": {"200": _json({"type": "object"}, "OpenAPI 3.0")}}
        },
        "/connectors": {
            "get": op(
                "The configured connectors, or with expand=status/info a map of their expansions",
                {
                    "200": _json(
                        {"oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "object"}]},
                        "names or expansions",
                    )
                },
                params=[
                    {
                        "name": "expand",
                        "in": "query",
                        "schema": {"type": "array", "items": {"type": "string", "enum": ["status", "info"]}},
                        "style": "form",
                        "explode": True,
                    }
                ],
            )
        },
        "/connectors/{connector}": {
            "get": op(
                "Connect's ConnectorInfo",
                {"200": _json(_ref("ConnectorInfo"), "ConnectorInfo")},
                404,
                params=[CONNECTOR],
            ),
            "delete": op(
                "Delete (the tombstones Connect's leader writes)",
                {"204": _empty("Deleted")},
                404,
                409,
                params=[CONNECTOR],
            ),
        },
        "/connectors/{connector}/config": {
            "get": op("The connector's config", {"200": _json(CONFIG, "config")}, 404, params=[CONNECTOR])
        },
        "/connectors/{connector}/tasks": {
            "get": op(
                "The task configs",
                {"200": _json({"type": "array", "items": _ref("TaskInfo")}, "TaskInfo list")},
                404,
                params=[CONNECTOR],
            )
        },
        "/connectors/{connector}/tasks/{task}/status": {
            "get": op(
                "One task's status", {"200": _json(_ref("TaskState"), "TaskState")}, 404, params=[CONNECTOR, TASK]
            )
        },
        "/connectors/{connector}/tasks/{task}/restart": {
            "post": op(
                "Not expressible in the config topic: 501 says what to do instead",
                {},
                404,
                409,
                501,
                params=[CONNECTOR, TASK],
            )
        },
        "/connectors/{connector}/status": {"get": op("Connect's ConnectorStateInfo", status, 404, params=[CONNECTOR])},
        "/connectors/{connector}/restart": {
            "post": op(
                "KIP-745 restart request on the config topic",
                {
                    "202": _json(_ref("ConnectorStateInfo"), "The restart plan"),
                    "204": _empty("Connector restart requested"),
                },
                404,
                409,
                params=[
                    CONNECTOR,
                    {"name": "includeTasks", "in": "query", "schema": {"type": "boolean", "default": False}},
                    {"name": "onlyFailed", "in": "query", "schema": {"type": "boolean", "default": False}},
                ],
            )
        },
        "/connectors/{connector}/stop": {
            "put": op("Stop (KIP-875)", {"204": _empty("Stopped")}, 404, 409, params=[CONNECTOR])
        },
        "/connectors/{connector}/pause": {"put": op("Pause", {"202": _empty("Paused")}, 404, 409, params=[CONNECTOR])},
        "/connectors/{connector}/resume": {
            "put": op("Resume", {"202": _empty("Resumed")}, 404, 409, params=[CONNECTOR])
        },
        "/connectors/{connector}/topics": {
            "get": op(
                "KIP-558 active topics",
                {"200": _json({"type": "object"}, "ActiveTopicsInfo by connector")},
                403,
                404,
                params=[CONNECTOR],
            )
        },
        "/connectors/{connector}/topics/reset": {
            "put": op("KIP-558 reset of the active topics", {"202": _empty("Reset")}, 403, 404, 409, params=[CONNECTOR])
        },
        "/connectors/{connector}/offsets": {
            "get": op(
                "KIP-875 offsets",
                {"200": _json(_ref("ConnectorOffsets"), "ConnectorOffsets")},
                400,
                404,
                params=[CONNECTOR],
            ),
            "patch": op(
                "KIP-875 alter offsets",
                {"200": _json(_ref("Message"), "Altered")},
                400,
                404,
                409,
                params=[CONNECTOR],
                body={"type": "object"},
            ),
            "delete": op(
                "KIP-875 reset offsets", {"200": _json(_ref("Message"), "Reset")}, 400, 404, 409, params=[CONNECTOR]
            ),
        },
        "/connectors/{connector}/deletions": {
            "get": op(
                "KIP-883 cleanup steps of the connector's deletions",
                {"200": _json(ANY, "Deletions")},
                404,
                params=[CONNECTOR],
            )
        },
        "/connectors/{connector}/heartbeats": {
            "get": op(
                "KIP-910 heartbeats of the connector's idle partitions",
                {"200": _json(ANY, "Heartbeats")},
                400,
                404,
                params=[CONNECTOR],
            )
        },
        "/connectors/{connector}/events": {
            "get": op(
                "The connector's event timeline, oldest first",
                {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["connector", "events", *PAGE],
                            "properties": {
                                "connector": {"type": "string"},
                                **PAGE,
                                "events": {"type": "array", "items": _ref("Event")},
                            },
                        },
                        "A page of events",
                    )
                },
                400,
                404,
                params=[
                    CONNECTOR,
                    {
                        "name": "kind",
                        "in": "query",
                        "schema": {"type": "array", "items": {"type": "string", "enum": list(EVENTS)}},
                        "style": "form",
                        "explode": True,
                    },
                    {"name": "since", "in": "query", "schema": TIME},
                    {"name": "until", "in": "query", "schema": TIME},
                    *PAGING,
                ],
            )
        },
        "/connectors/{connector}/history/topics": {
            "get": op(
                "Active topics as of a time",
                {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["connector", "at", "topics"],
                            "properties": {
                                "connector": {"type": "string"},
                                "at": NULLABLE_INT,
                                "topics": {"type": "array", "items": {"type": "string"}},
                            },
                        },
                        "Topics",
                    )
                },
                400,
                404,
                params=[CONNECTOR, {"name": "at", "in": "query", "schema": TIME}],
            )
        },
        "/connectors/{connector}/history/offsets": {
            "get": op(
                "Offsets as of a time",
                {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["connector", "at", "offsets"],
                            "properties": {
                                "connector": {"type": "string"},
                                "at": NULLABLE_INT,
                                "offsets": {"type": "array", "items": _ref("HistoryOffset")},
                            },
                        },
                        "Offsets",
                    )
                },
                400,
                404,
                params=[CONNECTOR, {"name": "at", "in": "query", "schema": TIME}],
            )
        },
        "/connectors/{connector}/history/offsets/partition": {
            "get": op(
                "One partition's offset history",
                {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["connector", "partition", "history"],
                            "properties": {
                                "connector": {"type": "string"},
                                "partition": {"type": "object"},
                                "history": {
                                    "type": "array",
                                    "items": {"type": "object", "required": ["change", "offset", "kafka_timestamp"]},
                                },
                            },
                        },
                        "History",
                    )
                },
                400,
                404,
                params=[
                    CONNECTOR,
                    {
                        "name": "partition",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": "the partition as JSON",
                    },
                ],
            )
        },
        "/connectors/{connector}/history/configs": {
            "get": op(
                "Config versions with diffs, secrets redacted",
                {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["connector", "versions"],
                            "properties": {
                                "connector": {"type": "string"},
                                "versions": {"type": "array", "items": _ref("ConfigVersion")},
                            },
                        },
                        "Versions",
                    )
                },
                404,
                params=[CONNECTOR],
            )
        },
        "/topics/{topic}/connectors": {
            "get": op(
                "Which connectors use or used a topic",
                {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["topic", "connectors"],
                            "properties": {
                                "topic": {"type": "string"},
                                "connectors": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["connector", "first_seen", "last_seen", "active"],
                                    },
                                },
                            },
                        },
                        "Connectors",
                    )
                },
                params=[TOPIC],
            )
        },
        "/rejected-records": {
            "get": op(
                "Quarantined records of the internal topics",
                {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["records", *PAGE],
                            "properties": {**PAGE, "records": {"type": "array", "items": {"type": "object"}}},
                        },
                        "A page of records",
                    )
                },
                400,
                params=[{"name": "topic", "in": "query", "schema": {"type": "string"}}, *PAGING],
            )
        },
        "/data-loss": {"get": op("Records the jobs expected and could not read", {"200": _json(ANY, "Data loss")})},
        "/health": {
            "get": {
                "summary": "Connect 3.9+ health: 200 healthy, 503 starting, 500 unhealthy",
                "responses": {
                    str(code): _json({"type": "object", "required": ["status", "message"]}, "Health")
                    for code in (200, 500, 503)
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics",
                "responses": {
                    "200": {
                        "description": "Prometheus text format",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/audit": {
            "get": op(
                "The audit trail of writes and refusals (the audit table and unflushed spool rows; role admin)",
                {"200": _json(ANY, "Audit rows")},
                400,
                404,
                params=[
                    {"name": name, "in": "query", "schema": {"type": "string"}}
                    for name in ("connector", "principal", "outcome", "since", "until", "limit")
                ],
            )
        },
        "/leases": {"get": op("Every lease", {"200": _json(ANY, "Leases")})},
        "/leases/{name}": {"get": op("One lease", {"200": _json(ANY, "Lease")}, 404, params=[LEASE])},
        "/ui": {
            "get": {
                "summary": "The dashboard",
                "responses": {"200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}},
            }
        },
        "/ui/": {
            "get": {
                "summary": "The dashboard",
                "responses": {"200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}}},
            }
        },
        "/ui/timeline/{connector}": {
            "get": op("The dashboard's timeline data", {"200": _json(ANY, "Timeline")}, 400, 404, params=[CONNECTOR])
        },
    }


def spec() -> dict[str, Any]:
    """The OpenAPI document."""
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "connect-state",
            "version": MIRRORED_CONNECT_VERSION,
            "description": (
                "Kafka Connect's REST API answered from connect-state's Delta tables, plus history and operations."
            ),
        },
        "paths": _paths(),
        "components": {"schemas": SCHEMAS},
    }


@bp.get("/openapi.json")
def openapi_json() -> Response:
    return jsonify(spec())
