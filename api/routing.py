"""Routing as Connect's Jersey routes its paths (issue 32): the app's URL map, set once for every rule.

* A trailing slash changes nothing: ``GET /connectors/<name>/``, ``GET /connectors/``, ``PUT /connectors/<name>/stop/``
  answer as without it, for every method, with no redirect, as a Kafka 4.3 worker answers both alike, status and
  body (``tests/integration/test_trailing_slash_connect.py``). Werkzeug's ``strict_slashes=False``: a rule matches
  with or without the slash and is answered in place, where the default would 308-redirect or 404.
* Slashes are never merged: a path with an empty segment (``PUT /connectors//x/stop``) is no route (404 in Connect's
  error JSON, :mod:`connect_state.api.errors`), never a redirect to the merged path.

Set on the map class, so every rule has them, blueprints' and Flask's own ``static`` alike.
"""

from __future__ import annotations

from typing import Any

from flask import Flask
from werkzeug.routing import Map

__all__ = ["ConnectStateFlask", "JerseyPathMap"]


class JerseyPathMap(Map):
    """A URL map whose rules ignore a trailing slash and never merge slashes (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("strict_slashes", False)
        kwargs.setdefault("merge_slashes", False)
        super().__init__(*args, **kwargs)


class ConnectStateFlask(Flask):
    """The API's Flask app: routed by :class:`JerseyPathMap`."""

    url_map_class = JerseyPathMap
