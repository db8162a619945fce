"""Routing as Connect's Jersey routes (api/routing.py, issue 32): every route of the app, for each of its methods,
is matched with a trailing slash as without it, with no redirect; a wrong method answers Connect's 405 either way.
Against the real worker: tests/integration/test_trailing_slash_connect.py."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient
from werkzeug.routing import IntegerConverter, Rule

from connect_state.api import create_app
from connect_state.core.settings import Settings
from tests.unit.fakes import RecordingWriter
from tests.unit.helpers import assert_connect_error

METHODS = {"GET", "PUT", "POST", "DELETE", "PATCH"}


def sample_values(rule: Rule) -> dict[str, Any]:
    """A value for each of the rule's variables: ``<int:task>`` 0, any other ``x``."""
    values: dict[str, Any] = {}
    for name, converter in rule._converters.items():
        if isinstance(converter, IntegerConverter):
            values[name] = 0
        else:
            values[name] = "x"
    return values


def toggled(path: str) -> str:
    """The path with a trailing slash added, or removed when it has one (``/ui/``)."""
    return path[:-1] if path.endswith("/") else f"{path}/"


def test_every_route_matches_with_and_without_a_trailing_slash(settings: Settings) -> None:
    adapter = create_app(settings).url_map.bind("localhost")
    checked = 0
    for rule in adapter.map.iter_rules():
        if rule.endpoint == "static":
            continue  # Flask's files: a trailing slash names a directory, as in any web server
        for method in sorted((rule.methods or set()) & METHODS):
            path = adapter.build(rule.endpoint, sample_values(rule), method=method)
            if path == "/":
                continue  # the root has no path without the slash
            # match() raises RequestRedirect where strict slashes would redirect, NotFound where they 404
            assert adapter.match(toggled(path), method) == adapter.match(path, method), (method, path)
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/connectors/c/stop"),
        ("post", "/connectors/c/status"),
        ("put", "/connectors"),
        ("patch", "/connectors/c/tasks/0/status"),
    ],
)
def test_a_wrong_method_is_connect_405_with_or_without_the_slash(
    client: FlaskClient, writer: RecordingWriter, method: str, path: str
) -> None:
    for variant in (path, f"{path}/"):
        response = getattr(client, method)(variant)
        assert_connect_error(response, 405, "HTTP 405 Method Not Allowed")
        assert "Location" not in response.headers
    assert writer.sends == []


def test_a_write_with_a_trailing_slash_is_answered_in_place(client: FlaskClient) -> None:
    """No 308 to the path without the slash (a client may not repeat the PUT): the view answers, here Connect's 404
    for a connector the config topic does not have."""
    response = client.put("/connectors/nope/stop/")
    assert_connect_error(response, 404, "Unknown connector nope")
    assert "Location" not in response.headers
