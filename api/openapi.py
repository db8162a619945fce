"""``GET /openapi.json``: the OpenAPI 3.0 description of every endpoint of the app (issue 14), kept beside the views.

As Connect's resource methods carry their annotations, each view carries its operation: ``@documented(summary,
responses, *errors, params=..., body=...)``. :func:`spec` walks the app's URL map and puts each rule's operation at
its path, with the path parameters the rule names (``<int(...):task>`` an integer, any other a string) and the 404 of
a path parameter that does not route (an encoded slash: Flask's 404, as Jersey's). The schemas several views share are
the ``components`` here. ``tests/unit/test_openapi.py`` checks that the paths and methods are exactly the app's routes
(a view without its description is missing) and runs schemathesis over the spec against the app. Every operation
documents Connect's error body (``ErrorMessage``) for its 4xx answers, 500, and 503 (a table not created yet, Kafka
unreachable).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from flask import Blueprint, Flask, Response, current_app, jsonify

from connect_state.connect.rest import MIRRORED_CONNECT_VERSION
from connect_state.folds.connector_states import EVENTS

bp = Blueprint("openapi", __name__)

Schema = dict[str, Any]
View = TypeVar("View", bound=Callable[..., Any])

ATTRIBUTE = "openapi_operation"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
#: A rule's path argument: its converter (``int(signed=True)``: ``int``) and its name.
PATH_ARGUMENT = re.compile(r"<(?:(\w+)(?:\([^)]*\))?:)?(\w+)>")


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def json_answer(schema: Schema, description: str) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def empty(description: str) -> Schema:
    return {"description": description}


def array_of(items: Schema) -> Schema:
    return {"type": "array", "items": items}


ANY: Schema = {}
STRING: Schema = {"type": "string"}
NULLABLE_STRING: Schema = {"type": "string", "nullable": True}
NULLABLE_INT: Schema = {"type": "integer", "nullable": True}
CONFIG: Schema = {"type": "object", "additionalProperties": {"type": "string", "nullable": True}}
PAGE: dict[str, Schema] = {
    "total": {"type": "integer"},
    "offset": {"type": "integer"},
    "limit": {"type": "integer"},
    "next_offset": NULLABLE_INT,
}
TIME: Schema = {"type": "string", "description": "epoch milliseconds or ISO-8601"}
PAGING: list[Schema] = [
    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}},
    {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}},
]
#: The text of each error status in the spec (always Connect's error body).
ERRORS = {
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
}
#: What every operation may answer: authentication (401), roles (403), the body bound (413) (issue 13); failed logins
#: limited (429, issue 33); a write whose outcome is unknown or an unexpected failure (500); a table not created yet or
#: Kafka unreachable (503).
ALWAYS = (401, 403, 413, 429, 500, 503)


def query(name: str, schema: Schema, **extra: Any) -> Schema:
    """A query parameter."""
    return {"name": name, "in": "query", "schema": schema, **extra}


def query_list(name: str, values: list[str]) -> Schema:
    """A repeatable query parameter (``?kind=a&kind=b``) taking ``values``."""
    return query(name, array_of({"type": "string", "enum": values}), style="form", explode=True)


def obj(required: list[str] | None = None, closed: bool = False, **properties: Schema) -> Schema:
    """An object schema of ``properties``, ``required`` (default: all of them); ``closed``: no other property."""
    return object_of(properties, list(properties) if required is None else required, closed)


def object_of(properties: dict[str, Schema], required: list[str], closed: bool = False) -> Schema:
    schema = {"type": "object", "required": required, "properties": properties}
    return {**schema, "additionalProperties": False} if closed else schema


def page_of(name: str, items: Schema, **fields: Schema) -> Schema:
    """A page of ``items`` under ``name``, with ``fields`` and the paging fields."""
    return object_of({**fields, **PAGE, name: array_of(items)}, [*fields, name, *PAGE])


def connector_answer(**fields: Schema) -> Schema:
    """An object naming the connector, with ``fields`` (every one required)."""
    return object_of({"connector": STRING, **fields}, ["connector", *fields])


INT: Schema = {"type": "integer"}
BOOLEAN: Schema = {"type": "boolean"}
STATE = obj(["state", "worker_id"], state=STRING, worker_id=NULLABLE_STRING, version=NULLABLE_STRING, trace=STRING)
TASK_ID = obj(closed=True, connector=STRING, task=INT)
SCHEMAS: dict[str, Schema] = {
    "ErrorMessage": obj(closed=True, error_code=INT, message=NULLABLE_STRING),
    "ServerInfo": obj(closed=True, version=STRING, commit=STRING, kafka_cluster_id=NULLABLE_STRING),
    "ConnectorState": STATE,
    "TaskState": {**STATE, "required": ["id", "state", "worker_id"], "properties": {"id": INT, **STATE["properties"]}},
    "ConnectorStateInfo": obj(
        closed=True, name=STRING, connector=ref("ConnectorState"), tasks=array_of(ref("TaskState")), type=STRING
    ),
    "ConnectorInfo": obj(closed=True, name=STRING, config=CONFIG, tasks=array_of(TASK_ID), type=STRING),
    "TaskInfo": obj(closed=True, id=TASK_ID, config={**CONFIG, "nullable": True}),
    "ConnectorOffsets": obj(offsets=array_of(obj(partition=ANY, offset=ANY))),
    "Message": obj(message=STRING),
    "RejectedRecord": obj(
        closed=True,
        topic=NULLABLE_STRING,
        partition=NULLABLE_INT,
        offset=NULLABLE_INT,
        key={**NULLABLE_STRING, "format": "byte"},
        value={**NULLABLE_STRING, "format": "byte", "description": "null: withheld (issue 33)"},
        reason=NULLABLE_STRING,
        seen_at=NULLABLE_INT,
        redacted={**BOOLEAN, "description": "the value was redacted for a reader without admin"},
    ),
    "Event": obj(
        event={"type": "string", "enum": list(EVENTS)},
        details={"type": "object"},
        source={"type": "string", "enum": ["config", "status"]},
        kafka_partition=INT,
        kafka_offset=INT,
        kafka_timestamp=INT,
    ),
    "HistoryOffset": obj(
        ["partition", "offset", "kafka_timestamp"],
        partition=ANY,
        offset=ANY,
        offsets_topic=STRING,
        kafka_timestamp=NULLABLE_INT,
    ),
    "ConfigVersion": obj(
        version={"type": "integer", "minimum": 1},
        event={"type": "string", "enum": ["created", "reconfigured", "deleted"]},
        config={**CONFIG, "nullable": True},
        changes={
            **obj(added={"type": "object"}, removed={"type": "object"}, changed={"type": "object"}),
            "nullable": True,
        },
        changed_keys=array_of(STRING),
        kafka_offset=INT,
        kafka_timestamp=NULLABLE_INT,
    ),
}


@dataclass(frozen=True)
class Operation:
    """One operation as a view describes it; :meth:`render` adds its path parameters and error answers."""

    summary: str
    responses: dict[str, Schema]
    errors: tuple[int, ...]
    params: tuple[Schema, ...]
    body: Schema | None
    plain: bool

    def render(self, path_params: list[Schema]) -> Schema:
        responses = dict(self.responses)
        if not self.plain:
            for status in sorted({*self.errors, *ALWAYS, *([404] if path_params else [])}):
                responses[str(status)] = json_answer(ref("ErrorMessage"), ERRORS[status])
        operation: Schema = {"summary": self.summary, "responses": responses}
        if path_params or self.params:
            operation["parameters"] = [*path_params, *self.params]
        if self.body is not None:
            operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": self.body}}}
        return operation


def documented(
    summary: str,
    responses: dict[str, Schema],
    *errors: int,
    params: tuple[Schema, ...] | list[Schema] = (),
    body: Schema | None = None,
    plain: bool = False,
) -> Callable[[View], View]:
    """Describe the view: its ``responses`` plus Connect's error body for ``errors`` and for what every operation may
    answer (:data:`ALWAYS`), unless ``plain`` (an answer that is not Connect's: health, metrics, the dashboard)."""

    def attach(view: View) -> View:
        setattr(view, ATTRIBUTE, Operation(summary, responses, errors, tuple(params), body, plain))
        return view

    return attach


def path_parameters(rule: str) -> list[Schema]:
    return [
        {"name": name, "in": "path", "required": True, "schema": {"type": "integer" if kind == "int" else "string"}}
        for kind, name in PATH_ARGUMENT.findall(rule)
    ]


def spec(app: Flask) -> dict[str, Any]:
    """The OpenAPI document of ``app``'s routes (those whose view is :func:`documented`)."""
    paths: dict[str, Schema] = {}
    for rule in app.url_map.iter_rules():
        operation = getattr(app.view_functions[rule.endpoint], ATTRIBUTE, None)
        if isinstance(operation, Operation):
            item = paths.setdefault(PATH_ARGUMENT.sub(r"{\2}", rule.rule), {})
            for method in METHODS:
                if method in (rule.methods or ()):
                    item[method.lower()] = operation.render(path_parameters(rule.rule))
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "connect-state",
            "version": MIRRORED_CONNECT_VERSION,
            "description": (
                "Kafka Connect's REST API answered from connect-state's Delta tables, plus history and operations."
            ),
        },
        "paths": paths,
        "components": {"schemas": SCHEMAS},
    }


@bp.get("/openapi.json")
@documented("This description", {"200": json_answer({"type": "object"}, "OpenAPI 3.0")}, plain=True)
def openapi_json() -> Response:
    return jsonify(spec(current_app))
