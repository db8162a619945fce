"""/openapi.json (api/openapi.py, from the descriptions beside the views) is true: its paths and methods are exactly
the app's routes (a view left undescribed is missing from it), and schemathesis,
run over it against the app (in-memory tables and Kafka), finds every answer documented and conforming, with no 5xx
but the documented ones that do not depend on the request (503: a table missing, Kafka unreachable) and the 501 of a
single task's restart."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import CheckContext
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from connect_state.api import create_app
from connect_state.api.openapi import spec
from connect_state.core.settings import Settings
from connect_state.tables.schemas import ALL_TABLES
from tests.unit.fakes import InMemoryTables, InMemoryTopics, RecordingWriter
from tests.unit.helpers import mirror_connectors
from tests.unit.test_api_connect_read import READ_ROWS
from tests.unit.test_api_history import TABLES

METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}


def openapi_path(rule: str) -> str:
    """A Flask rule as an OpenAPI path: ``<int(signed=True):task>`` -> ``{task}``."""
    return re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule)


def routes(app: Flask) -> set[tuple[str, str]]:
    return {
        (openapi_path(rule.rule), method.lower())
        for rule in app.url_map.iter_rules()
        if rule.endpoint != "static"
        for method in (rule.methods or set()) & METHODS
    }


def documented(app: Flask) -> set[tuple[str, str]]:
    return {(path, method) for path, item in spec(app)["paths"].items() for method in item}


def test_spec_matches_routes(settings: Settings) -> None:
    app = create_app(settings)
    assert documented(app) == routes(app)


def test_spec_served(client: Any) -> None:
    response = client.get("/openapi.json")
    assert response.status_code == 200
    assert response.get_json() == json.loads(json.dumps(spec(client.application)))
    assert response.get_json()["openapi"].startswith("3.")


@pytest.fixture
def api_app(settings: Settings, kafka_log: InMemoryTopics) -> Flask:
    tables = {spec.name: [] for spec in ALL_TABLES} | {**TABLES, "connectors": [*READ_ROWS, *TABLES["connectors"]]}
    mirror_connectors(kafka_log, READ_ROWS)
    app = create_app(
        settings.with_overrides(**{"api.kafka.cluster.id": "cluster-1"}),
        table_reader=InMemoryTables(tables),
        writer=RecordingWriter(topics=kafka_log),
        topics=kafka_log,
    )
    app.testing = True
    return app


#: The operations that write offsets through the connector's ``alterOffsets``: Connect answers 500 with its message
#: when that refuses them (a ``ConnectException``, e.g. a FileStream source without ``file``), and so do we.
ALTER_OFFSETS = {
    ("PATCH", "/connectors/{connector}/offsets"),
    ("DELETE", "/connectors/{connector}/offsets"),
    ("POST", "/connectors/{connector}/offsets/restore"),
    ("POST", "/connectors/{connector}/restore"),
}


def no_undocumented_server_error(ctx: CheckContext, response: Any, case: Any) -> bool | None:
    """5xx only where they do not depend on the request: 503 (a table missing: some are left out on purpose), the
    501 of a single task's restart, Connect's 500 of a connector's ``alterOffsets`` refusal (:data:`ALTER_OFFSETS`,
    with Connect's error body); no other 500 (in memory, no write can time out: a 500 is a bug)."""
    allowed = {503} | ({501} if case.path.endswith("/tasks/{task}/restart") else set())
    connects = response.status_code == 500 and list(response.json()) == ["error_code", "message"]
    if connects and (case.method.upper(), case.path) in ALTER_OFFSETS:
        allowed.add(500)
    if response.status_code >= 500 and response.status_code not in allowed:
        raise AssertionError(f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:500]}")
    return None


CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance, no_undocumented_server_error]


@pytest.mark.slow
def test_api_conforms_to_its_spec(api_app: Flask) -> None:
    """Every operation of the spec, with generated parameters and bodies (schemathesis' pytest plugin needs the
    pytest internals of older releases, so the operations are driven with hypothesis directly)."""
    api_schema = schemathesis.openapi.from_wsgi("/openapi.json", api_app)
    operations = [result.ok() for result in api_schema.get_all_operations()]
    labels = {(op.path, op.method.lower()) for op in operations}
    # schemathesis leaves out the spec's own path and takes one of /ui and /ui/
    assert documented(api_app) - labels <= {("/openapi.json", "get"), ("/ui", "get"), ("/ui/", "get")}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case: Any) -> None:
            case.call_and_validate(checks=CHECKS)

        check()
