"""``ETag`` / ``304`` and encoded bodies kept per table version for the hot GETs (issue 34, "the API's serving path").

``GET /connectors/<name>/status``, ``.../topics``, ``.../offsets`` and ``GET /connectors?expand=...`` are answered
from tables and, past their watermarks, from the records the API's followers hold (:mod:`connect_state.api.live`).
Before such a GET runs its view, its *state* is taken: for each table the view may read (:data:`HOT`, and the
watermarks table), its loaded version (:meth:`~connect_state.tables.reader.TableReader.loaded_version`, refreshed as a
read refreshes it) and whether the follower has caught up past those rows (the test ``live`` makes before folding
followed records over them), and the followers' positions. The answer is a function of that state and the request's
path and query string, so:

* the same state as the body kept for that path: the kept body is answered again, the view not run;
* ``If-None-Match`` naming the ``ETag`` of the current state: 304 without a body;
* otherwise the view answers; when the state taken again after it is unchanged, its 200 body is kept (at most
  :data:`MAX_BODIES` paths, the oldest dropped first) and carries the ``ETag``; when it changed meanwhile, the answer
  carries no ``ETag`` and is not kept.

The ``ETag`` is a hash of the path, query string and state: the same in every server process that loaded the same
table versions and holds the same records. This hook runs after every other ``before_request`` (authentication and
authorisation, limits, metrics' clock): a 304 or a kept body is still refused to a principal who may not read it, is
counted in the metrics, and gets the lag header (the tables the kept body was read from count as read). Only 200
answers are kept; answers of errors always run the view.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from flask import Flask, Response, current_app, g, request

from connect_state.api.live import followed_positions
from connect_state.api.resources import app_resources, note_served, tables_served, whole_path
from connect_state.core.errors import TableNotFoundError
from connect_state.tables.reader import TableReader
from connect_state.tables.schemas import (
    ACTIVE_TOPICS,
    CONNECTORS,
    SINK_OFFSETS,
    SOURCE_OFFSETS,
    WATERMARKS,
    TableSpec,
)

HOT: dict[str, tuple[TableSpec, ...]] = {
    "connectors.get_connector_status": (CONNECTORS,),
    "topics.get_active_topics": (ACTIVE_TOPICS,),
    "offsets.get_connector_offsets": (CONNECTORS, SOURCE_OFFSETS, SINK_OFFSETS),
    "connectors.list_connectors": (CONNECTORS,),
}
"""The hot GETs (endpoint -> the tables their answer is made of, besides the watermarks)."""

#: The hot GETs whose answer may fold the records of ``__consumer_offsets`` (sink connectors' offsets).
GROUP_FOLLOWED = frozenset({"offsets.get_connector_offsets"})

MAX_BODIES = 4096
"""At most this many paths keep their last body per server process."""

EXTENSION = "connect_state.etags"

State = tuple[Any, ...]


@dataclass(frozen=True)
class Kept:
    """A 200 answer kept with the state it was made of."""

    state: State
    etag: str
    body: bytes
    headers: tuple[tuple[str, str], ...]
    served: tuple[str, ...]
    followed: dict[str, dict[tuple[str, int], int]]


class KeptBodies:
    """The last body per path (least recently used dropped first), shared by a process's threads."""

    def __init__(self, limit: int = MAX_BODIES) -> None:
        self.limit = limit
        self._bodies: OrderedDict[str, Kept] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str) -> Kept | None:
        with self._lock:
            kept = self._bodies.get(path)
            if kept is not None:
                self._bodies.move_to_end(path)
            return kept

    def put(self, path: str, kept: Kept) -> None:
        with self._lock:
            self._bodies[path] = kept
            self._bodies.move_to_end(path)
            while len(self._bodies) > self.limit:
                self._bodies.popitem(last=False)


def _table_state(tables: TableReader, spec: TableSpec, caught_up: float | None) -> tuple[Any, ...] | None:
    """The table's loaded version (refreshed) and whether followed records may be folded over it; ``("absent",)``
    for a table not created yet; None when its version is unknown (nothing can be kept)."""
    try:
        tables.snapshot(spec)
    except TableNotFoundError:
        return ("absent",)
    version = tables.loaded_version(spec)
    if version is None:
        return None
    as_of = tables.rows_as_of(spec)
    return (*version, caught_up is not None and as_of is not None and caught_up >= as_of)


def current_state(endpoint: str) -> State | None:
    """The state the answer of ``endpoint`` is made of now (see the module docstring); None when it cannot be told."""
    resources = app_resources()
    tables = resources.tables
    if not isinstance(tables, TableReader):
        return None
    follower = resources.follower()
    positions = tuple(sorted(follower.positions().items())) if follower is not None else ()
    caught_up = follower.caught_up_as_of() if follower is not None else None
    state: list[Any] = [positions]
    if endpoint in GROUP_FOLLOWED:
        group = resources.group_follower()
        if group is not None:
            state.append(tuple(sorted(group.positions().items())))
            group_caught_up = group.caught_up_as_of()
            table = _table_state(tables, SINK_OFFSETS, group_caught_up)
            if table is None:
                return None
            state.append(table)
    for spec in (*HOT[endpoint], WATERMARKS):
        table = _table_state(tables, spec, caught_up)
        if table is None:
            return None
        state.append((spec.name, table))
    return tuple(state)


def etag_of(path: str, state: State) -> str:
    """The (strong) entity tag of ``path``'s answer made of ``state``, unquoted."""
    return hashlib.blake2b(repr((path, state)).encode(), digest_size=16).hexdigest()


def _hot_path() -> tuple[str, str] | None:
    """(endpoint, path with query string) of a hot GET, else None."""
    endpoint = request.endpoint
    if request.method != "GET" or endpoint not in HOT:
        return None
    if endpoint == "connectors.list_connectors" and "expand" not in request.args:
        return None
    return endpoint, whole_path(query=True)  # /clusters/<id>/... is another answer


def _bodies() -> KeptBodies:
    return current_app.extensions[EXTENSION]


def _not_modified(etag: str) -> Response:
    response = Response(status=304)
    response.set_etag(etag)
    return response


def answer_from_kept() -> Response | None:
    """``before_request`` (the last): a 304 or the kept body when the state is that of the path's kept answer."""
    hot = _hot_path()
    if hot is None:
        return None
    endpoint, path = hot
    state = current_state(endpoint)
    if state is None:
        return None
    g.etag_state = state
    etag = etag_of(path, state)
    kept = _bodies().get(path)
    if request.if_none_match.contains(etag) and (kept is None or kept.state == state):
        if kept is not None:
            _note(kept)
        # Without a kept answer the view runs (for its status and the tables it reads); keep_answer makes it a 304.
        return _not_modified(etag) if kept is not None else None
    if kept is None or kept.state != state:
        return None
    _note(kept)
    response = Response(kept.body, status=200, headers=list(kept.headers))
    response.set_etag(kept.etag)
    return response


def _note(kept: Kept) -> None:
    note_served(kept.served)
    if kept.followed:
        g.setdefault("followed", {}).update(kept.followed)


def keep_answer(response: Response) -> Response:
    """``after_request``: a hot GET's 200 answer made while its state stayed the same carries its ``ETag`` and is
    kept; a 304 when ``If-None-Match`` names it."""
    state = g.pop("etag_state", None)
    hot = _hot_path()
    if state is None or hot is None or response.status_code != 200 or response.direct_passthrough:
        return response
    endpoint, path = hot
    if response.headers.get("ETag") is not None:  # answered from the kept body
        return response
    if current_state(endpoint) != state:
        return response
    etag = etag_of(path, state)
    body = response.get_data()
    headers = tuple((k, v) for k, v in response.headers.items() if k.lower() not in _PER_ANSWER)
    _bodies().put(path, Kept(state, etag, body, headers, tuple(tables_served()), followed_positions()))
    if request.if_none_match.contains(etag):
        return _not_modified(etag)
    response.set_etag(etag)
    return response


_PER_ANSWER = frozenset({"content-length", "etag", "x-connect-state-lag"})


def init_app(app: Flask) -> None:
    """Register the hooks; call after every other ``before_request`` (they must run first) and after
    :func:`connect_state.api.lag.init_app` (its ``after_request`` then runs after :func:`keep_answer`)."""
    app.extensions[EXTENSION] = KeptBodies()
    app.before_request(answer_from_kept)
    app.after_request(keep_answer)
