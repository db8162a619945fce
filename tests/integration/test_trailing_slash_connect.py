"""Connect's paths as Jersey serves them (issue 32), against the real worker: every route of our API (walked from the
Flask URL map, every method of GET/PUT/POST/DELETE/PATCH) answers with a trailing slash as without it, and, where the
route is Connect's, as Connect answers both, status and body, with no redirect on either side.

A route is Connect's when the worker knows its path (it answers anything but Jersey's ``404 HTTP 404 Not Found``).
For Connect's routes and each method we serve, our answers equal Connect's, call for call: reads on a source, a sink
and a missing connector (the tables from a catch-up run of the folds), writes on a missing connector and on twin
connectors, ours written through our API and Connect's through Connect (the plain path first, then the slashed one:
a second DELETE answers 404 on both sides). For a method we do not serve, Connect's 405 is mirrored where Connect has
no such method either. Our own routes (and the two Connect routes whose answers differ from Connect's on purpose,
:data:`DIFFERENT_BY_DESIGN`) answer the slashed path as the plain one (status and content type: their bodies hold
clocks and counters); the worker answers its own both alike.

Connect's routes also answer under ``/clusters/<id>`` for the default cluster (issue 37): the reads and the writes
on a missing connector asked there, both slash variants, equal Connect's answers on its own paths.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.routing import IntegerConverter, Rule

from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.spark.all_jobs import every_job, select_jobs
from connect_state.spark.streaming import run_catch_up
from tests.integration.helpers import api_client, connect_offsets, create_topic, job_settings, unique, wait_state

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

WAIT_S = 90.0
METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH")
MISSING = "no-such-connector"
JERSEY_NO_METHOD = (405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"})
# Connect's routes whose answers are ours on purpose (README, "Connect's read API and restart" and "GET /health"):
# /health decides from the tables' lag and adds their details, a single task's restart has no config-topic record
# (501).
DIFFERENT_BY_DESIGN = {"health.health", "restart.restart_task"}
OFFSETS_BODY = {"offsets": [{"partition": {"filename": "/nowhere.txt"}, "offset": {"position": 0}}]}

Answer = tuple[int, Any]


def variants(path: str) -> list[str]:
    """The path without and with the trailing slash (the root has only the one)."""
    return [path] if path.endswith("/") else [path, f"{path}/"]


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
    """The body as JSON (a list of names sorted: Connect's ``GET /connectors`` has no order, ours is sorted), else the
    text."""
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        return raw
    return sorted(body) if isinstance(body, list) and all(isinstance(item, str) for item in body) else body


def our_answer(api: FlaskClient, method: str, path: str, body: Any = None) -> tuple[Answer, str | None, str]:
    """Our answer (status, parsed JSON or text), its Location header and its content type (without parameters)."""
    response = api.open(path, method=method, json=body)
    content_type = (response.content_type or "").split(";")[0]
    return (response.status_code, _parsed(response.get_data(as_text=True))), response.location, content_type


def sample_path(rule: Rule, connector: str, topic: str) -> str:
    """The rule's path with a value for each variable: the connector, task 0, the topic, else ``x``."""
    values: dict[str, Any] = {}
    for name, converter in rule._converters.items():
        if name == "connector":
            values[name] = connector
        elif name == "topic":
            values[name] = topic
        elif isinstance(converter, IntegerConverter):
            values[name] = 0
        else:
            values[name] = "x"
    built = rule.build(values)
    assert built is not None, rule
    return built[1]


def knows_path(answer: Answer) -> bool:
    """Whether Connect's answer is one of a route it has: anything but a 404 that is not about a connector or task."""
    status, body = answer
    return status != 404 or (isinstance(body, dict) and body.get("message") not in (None, "HTTP 404 Not Found"))


def renamed(answer: Answer, theirs: str, ours: str) -> Answer:
    """Connect's answer about its twin, as about ours: the twin's name replaced by our connector's."""
    status, body = answer
    return status, json.loads(json.dumps(body).replace(theirs, ours))


@dataclass(frozen=True)
class Route:
    """A path of the URL map and a method; ``endpoint`` is the view that serves it, None when no rule does."""

    rule: Rule  # a rule with the path, to build it
    method: str
    endpoint: str | None


def body_for(route: Route) -> Any:
    """Our PATCH's body (offsets); none for a method we do not serve (Connect's PATCH of a config gets no config)."""
    return OFFSETS_BODY if route.method == "PATCH" and route.endpoint is not None else None


def every_route(app: Flask) -> list[Route]:
    """Every path of the URL map with each of :data:`METHODS` (several rules may share a path, one per method); but
    Flask's ``static`` files, where a trailing slash names a directory, as in any web server."""
    by_path: dict[str, list[Rule]] = {}
    for rule in app.url_map.iter_rules():
        if rule.endpoint != "static":
            by_path.setdefault(rule.rule, []).append(rule)
    return [
        Route(rules[0], method, next((r.endpoint for r in rules if method in (r.methods or ())), None))
        for rules in by_path.values()
        for method in METHODS
    ]


@dataclass
class Probe:
    """One route asked about one connector, without and with the trailing slash, of us and of Connect."""

    route: Route
    path: str
    connects_path: bool  # Connect has the route's path
    ours: list[Answer]
    content_types: list[str]
    theirs: list[Answer]
    repeatable: bool = True  # the second call answers as the first (not so: a connector's deletion)

    @property
    def mirrors_connect(self) -> bool:
        """Our answers must be Connect's: Connect's path, a method we serve, not different by design."""
        return self.connects_path and self.route.endpoint is not None and self.route.endpoint not in DIFFERENT_BY_DESIGN

    def problems(self) -> list[str]:
        """What differs where it must not (empty: nothing)."""
        what = f"{self.route.method} {self.path}"
        found = []
        if self.repeatable and self.theirs[-1] != self.theirs[0]:  # the oracle: Jersey ignores the slash
            found.append(f"Connect: {what}: {self.theirs[0]} but with the slash {self.theirs[-1]}")
        if self.mirrors_connect or (self.connects_path and self.theirs[0] == JERSEY_NO_METHOD):
            if self.ours != self.theirs:  # incl. a method neither serves: Connect's 405, both ways
                found.append(f"{what}: ours {self.ours}, Connect's {self.theirs}")
        elif not self.connects_path or self.route.endpoint in DIFFERENT_BY_DESIGN:
            plain, slashed = (self.ours[0][0], self.content_types[0]), (self.ours[-1][0], self.content_types[-1])
            if plain != slashed:
                found.append(f"{what}: ours {plain} but with the slash {slashed}")
        # else: a method Connect serves and we do not (creating or updating a connector): nothing to mirror
        return found


def probe(
    api: FlaskClient,
    connect: ConnectRestClient,
    route: Route,
    connects_path: bool,
    path: str,
    their_path: str | None = None,
    repeatable: bool = True,
    our_prefix: str = "",
) -> Probe:
    """Ask both sides, the plain path then the slashed one (Connect's about ``their_path``, its name renamed; ours
    under ``our_prefix``: ``/clusters/<id>`` answers as Connect's own paths, issue 37)."""
    ours, content_types, theirs = [], [], []
    method = route.method
    for variant, their_variant in zip(variants(path), variants(their_path or path), strict=True):
        mine, location, content_type = our_answer(api, method, our_prefix + variant, body_for(route))
        assert location is None, f"ours redirects {method} {variant} to {location}"
        connects, their_location = connect_answer(connect, method, their_variant, body_for(route))
        assert their_location is None, f"Connect redirects {method} {their_variant} to {their_location}"
        ours.append(mine)
        content_types.append(content_type)
        theirs.append(connects)
    if their_path is not None:
        theirs = [renamed(answer, their_path.split("/")[2], path.split("/")[2]) for answer in theirs]
    return Probe(route, our_prefix + path, connects_path, ours, content_types, theirs, repeatable)


def test_every_route_answers_with_a_trailing_slash_as_connect_does(spark, connect, stack_settings, tmp_path, created):
    source, sink, topic = unique("slash-source"), unique("slash-sink"), unique("slash-topic")
    _, root = connect.get("/")
    settings = job_settings(stack_settings, tmp_path, **{"api.connect.commit": root["commit"]})
    create_topic(settings, topic, 1)
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["one", "two"])
    connect.create_connector(source, file_source_config(source, source_file, topic))
    connect.create_connector(sink, file_sink_config(sink, tmp_path / "out.txt", [topic]))
    api = api_client(settings)
    routes = every_route(api.application)
    cluster_prefix = f"/clusters/{api.get('/clusters').get_json()[0]['id']}"

    # Which paths are Connect's: the worker knows them (asked about a missing connector: nothing is written).
    connect_paths = {
        route.rule.rule
        for route in routes
        if knows_path(connect_answer(connect, route.method, sample_path(route.rule, MISSING, topic))[0])
    }
    assert len(connect_paths) >= 16, connect_paths  # Connect's reads, writes and /health, as of Kafka 4.3

    # The writes we serve on Connect's paths, each on twin connectors: one for our API, one for Connect.
    writes = [r for r in routes if r.rule.rule in connect_paths and r.endpoint is not None and r.method != "GET"]
    twins = {(route.rule.rule, route.method): (unique("slash-ours"), unique("slash-theirs")) for route in writes}
    names = [source, sink, *(name for pair in twins.values() for name in pair)]
    created.extend(names)  # deleted after the test
    for name in names[2:]:
        twin_file = tmp_path / f"{name}.txt"
        append_lines(twin_file, ["twin"])
        connect.create_connector(name, file_source_config(name, twin_file, topic))
    for name in names:
        wait_state(connect, name, "RUNNING", 1, WAIT_S)
    connect.wait_for(lambda: connect_offsets(connect, source), WAIT_S, description=f"{source} offsets")
    connect.wait_for(lambda: connect_offsets(connect, sink), WAIT_S, description=f"{sink} offsets")
    connect.wait_for(lambda: connect.active_topics(sink) == {topic}, WAIT_S, description=f"{sink} topics")

    # Reads, and the methods nobody serves on a path, before any write: on the source, the sink, a missing connector;
    # Connect's paths also under /clusters/<id> (the default cluster answers there as on Connect's own paths).
    def reads() -> list[Probe]:
        return [
            probe(api, connect, route, route.rule.rule in connect_paths, path, our_prefix=prefix)
            for route in routes
            if route.method == "GET" or route.endpoint is None
            for path in dict.fromkeys(sample_path(route.rule, c, topic) for c in (source, sink, MISSING))
            for prefix in ("", cluster_prefix)
            if not prefix or route.rule.rule in connect_paths
        ]

    jobs = select_jobs(every_job(hooks={}), "active_topics,connector_states,offsets")  # the tables Connect's GETs read
    for _ in range(3):  # a status or offsets record may land between our catch-up run and Connect's answer
        assert run_catch_up(jobs, spark, settings) == 0
        probes = reads()
        if all(item.ours == item.theirs for item in probes if item.mirrors_connect):
            break
    problems = [problem for item in probes for problem in item.problems()]

    # The writes: on a missing connector, then on the twins (the plain path, then the slashed one, on each side: a
    # second DELETE of a connector answers 404 on both).
    for route in writes:
        for prefix in ("", cluster_prefix):
            problems += probe(
                api, connect, route, True, sample_path(route.rule, MISSING, topic), our_prefix=prefix
            ).problems()
        path, their_path = (sample_path(route.rule, name, topic) for name in twins[(route.rule.rule, route.method)])
        problems += probe(api, connect, route, True, path, their_path, repeatable=False).problems()
    assert not problems, "\n".join(problems)
