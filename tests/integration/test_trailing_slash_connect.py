"""Connect's paths as Jersey serves them (issue 32), against the real worker: every route of our API (walked from the
Flask URL map, every method of GET/PUT/POST/DELETE/PATCH) answers with a trailing slash as without it, and, where the
route is Connect's, as Connect answers both, status and body, with no redirect on either side.

A route is Connect's when the worker knows its path (it answers anything but Jersey's ``404 HTTP 404 Not Found``).
For Connect's routes and each method we serve, our answers equal Connect's, call for call: reads on a source, a sink
and a missing connector (the tables from a catch-up run of every job), writes on a missing connector and on twin
connectors, ours written through our API and Connect's through Connect (the plain path first, then the slashed one:
a second DELETE answers 404 on both sides). For a method we do not serve, Connect's 405 is mirrored where Connect has
no such method either. Our own routes (and the two Connect routes whose answers differ from Connect's on purpose,
:data:`DIFFERENT_BY_DESIGN`) answer the slashed path as the plain one (status and content type: their bodies hold
clocks and counters); the worker answers its own both alike.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.routing import IntegerConverter, PathConverter, Rule

from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.spark.all_jobs import every_job
from connect_state.spark.streaming import run_catch_up
from tests.integration.helpers import api_client, connect_offsets, create_topic, job_settings, unique, wait_state

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

WAIT_S = 90.0
METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH")
MISSING = "no-such-connector"
JERSEY_NO_ROUTE = (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
JERSEY_NO_METHOD = (405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"})
# Connect's routes whose answers are ours on purpose (README, "Differences from Connect"): /health adds per-table
# details to Connect's message, a single task's restart cannot be written to the internal topics (501).
DIFFERENT_BY_DESIGN = {"health.health", "restart.restart_task"}
OFFSETS_BODY = {"offsets": [{"partition": {"filename": "/nowhere.txt"}, "offset": {"position": 0}}]}

Answer = tuple[int, Any]


def variants(path: str) -> list[str]:
    """The path without and with the trailing slash (the root has only the one)."""
    return [path] if path.endswith("/") else [path, f"{path}/"]


def body_for(method: str) -> Any:
    return OFFSETS_BODY if method == "PATCH" else None


def connect_answer(connect: ConnectRestClient, method: str, path: str, body: Any = None) -> tuple[Answer, str | None]:
    """Connect's answer, without following a redirect (urllib would): status, parsed JSON (or the text), Location."""
    url = urllib.parse.urlsplit(connect.base_url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=60)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json", **({"Content-Type": "application/json"} if data else {})}
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        raw = response.read().decode()
        return (response.status, _parsed(raw)), response.getheader("Location")
    finally:
        conn.close()


def _parsed(raw: str) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw


def our_answer(api: FlaskClient, method: str, path: str, body: Any = None) -> tuple[Answer, str | None, str]:
    """Our answer (status, parsed JSON or text), its Location header and its content type (without parameters)."""
    response = api.open(path, method=method, json=body)
    content_type = (response.content_type or "").split(";")[0]
    return (response.status_code, _parsed(response.get_data(as_text=True))), response.location, content_type


def sample_path(app: Flask, rule: Rule, method: str, connector: str, topic: str) -> str:
    """The rule's path for ``method`` with a value for each variable: the connector, task 0, the topic, else ``x``."""
    values: dict[str, Any] = {}
    for name, converter in rule._converters.items():
        if name == "connector":
            values[name] = connector
        elif name == "topic":
            values[name] = topic
        elif isinstance(converter, IntegerConverter):
            values[name] = 0
        elif isinstance(converter, PathConverter):
            values[name] = "dashboard.js"
        else:
            values[name] = "x"
    return app.url_map.bind("localhost").build(rule.endpoint, values, method=method)


def routes(app: Flask) -> Iterator[tuple[Rule, str]]:
    for rule in app.url_map.iter_rules():
        for method in METHODS:
            yield rule, method


def renamed(answer: Answer, theirs: str, ours: str) -> Answer:
    """Connect's answer about its twin, as about ours: the twin's name replaced by our connector's."""
    status, body = answer
    return status, json.loads(json.dumps(body).replace(theirs, ours))


@dataclass
class Probe:
    """One route, method and connector, asked without and with the trailing slash of us and of Connect."""

    endpoint: str
    method: str
    path: str
    served: bool  # by us
    ours: list[Answer]
    content_types: list[str]
    theirs: list[Answer]


def probe(
    api: FlaskClient, connect: ConnectRestClient, rule: Rule, method: str, path: str, their_path: str | None = None
) -> Probe:
    """Ask both sides, the plain path then the slashed one (Connect's about ``their_path``, its name renamed)."""
    ours, content_types, theirs = [], [], []
    their_variants = variants(their_path or path)
    for variant, their_variant in zip(variants(path), their_variants, strict=True):
        mine, location, content_type = our_answer(api, method, variant, body_for(method))
        assert location is None, f"ours redirects {method} {variant} to {location}"
        connects, their_location = connect_answer(connect, method, their_variant, body_for(method))
        assert their_location is None, f"Connect redirects {method} {their_variant} to {their_location}"
        ours.append(mine)
        content_types.append(content_type)
        theirs.append(connects)
    if their_path is not None:
        theirs = [renamed(answer, their_path.split("/")[2], path.split("/")[2]) for answer in theirs]
    return Probe(rule.endpoint, method, path, method in (rule.methods or ()), ours, content_types, theirs)


def mirrors_connect(item: Probe, connect_endpoints: set[str]) -> bool:
    """Whether our answers must be Connect's: a route of Connect's, a method we serve, not different by design."""
    return item.endpoint in connect_endpoints and item.endpoint not in DIFFERENT_BY_DESIGN and item.served


def check(item: Probe, connect_endpoints: set[str]) -> None:
    what = f"{item.method} {item.path}"
    assert item.theirs[-1] == item.theirs[0], f"Connect: {what} with the slash"  # the oracle: Jersey ignores it
    if mirrors_connect(item, connect_endpoints):
        assert item.ours == item.theirs, what
    elif item.endpoint in connect_endpoints and item.theirs[0] == JERSEY_NO_METHOD:
        assert item.ours == item.theirs, what  # a method neither Connect nor we serve: Connect's 405, both ways
    elif item.endpoint not in connect_endpoints or item.endpoint in DIFFERENT_BY_DESIGN:
        assert (item.ours[-1][0], item.content_types[-1]) == (item.ours[0][0], item.content_types[0]), what
    # else: a method Connect serves and we do not (creating or updating a connector): nothing to mirror


def test_every_route_answers_with_a_trailing_slash_as_connect_does(spark, connect, stack_settings, tmp_path):
    source, sink, topic = unique("slash-source"), unique("slash-sink"), unique("slash-topic")
    _, root = connect.get("/")
    settings = job_settings(stack_settings, tmp_path, **{"api.connect.commit": root["commit"]})
    create_topic(settings, topic, 1)
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["one", "two"])
    connect.create_connector(source, file_source_config(source, source_file, topic))
    connect.create_connector(sink, file_sink_config(sink, tmp_path / "out.txt", [topic]))
    api = api_client(settings)
    app: Flask = api.application
    every_route = [(rule, method) for rule in app.url_map.iter_rules() for method in METHODS]

    # Which routes are Connect's: the worker knows their path.
    connect_endpoints = {
        rule.endpoint
        for rule, method in every_route
        if connect_answer(connect, method, sample_path(app, rule, method, MISSING, topic))[0] != JERSEY_NO_ROUTE
    }
    assert len(connect_endpoints) >= 19, connect_endpoints  # Connect's reads, writes and /health, as of Kafka 4.3

    # The writes we serve on Connect's routes, each on twin connectors: one for our API, one for Connect.
    writes = [
        (rule, method)
        for rule, method in every_route
        if rule.endpoint in connect_endpoints and method != "GET" and method in (rule.methods or ())
    ]
    twins = {(rule.endpoint, method): (unique("slash-ours"), unique("slash-theirs")) for rule, method in writes}
    names = [source, sink, *(name for pair in twins.values() for name in pair)]
    for name in names[2:]:
        twin_file = tmp_path / f"{name}.txt"
        append_lines(twin_file, ["twin"])
        connect.create_connector(name, file_source_config(name, twin_file, topic))
    for name in names:
        wait_state(connect, name, "RUNNING", 1, WAIT_S)
    connect.wait_for(lambda: connect_offsets(connect, source), WAIT_S, description=f"{source} offsets")
    connect.wait_for(lambda: connect_offsets(connect, sink), WAIT_S, description=f"{sink} offsets")
    connect.wait_for(lambda: connect.active_topics(sink) == {topic}, WAIT_S, description=f"{sink} topics")

    # Reads, and the methods we do not serve, before any write: on the source, the sink and a missing connector.
    def reads() -> list[Probe]:
        return [
            probe(api, connect, rule, method, path)
            for rule, method in every_route
            if method == "GET" or method not in (rule.methods or ())
            for path in dict.fromkeys(sample_path(app, rule, method, c, topic) for c in (source, sink, MISSING))
        ]

    for _ in range(3):  # a status or offsets record may land between our catch-up run and Connect's answer
        assert run_catch_up(every_job(hooks={}), spark, settings) == 0
        probes = reads()
        if all(p.ours == p.theirs for p in probes if mirrors_connect(p, connect_endpoints)):
            break
    for item in probes:
        check(item, connect_endpoints)

    # The writes: on a missing connector, then on the twins (the plain path, then the slashed one, on each side: a
    # second DELETE of a connector answers 404 on both).
    for rule, method in writes:
        ours_name, their_name = twins[(rule.endpoint, method)]
        check(probe(api, connect, rule, method, sample_path(app, rule, method, MISSING, topic)), connect_endpoints)
        path, their_path = (sample_path(app, rule, method, name, topic) for name in (ours_name, their_name))
        check(probe(api, connect, rule, method, path, their_path), connect_endpoints)

    for name in names:
        connect.delete_connector(name, missing_ok=True)
