"""Bounded input (issue 13): every request is checked before a view reads it, and refused in Connect's error JSON.

* a body longer than ``api.max.body.bytes`` -> 413 before it is read (``Content-Length``, and a chunked body as soon
  as it passes the bound: Flask's ``MAX_CONTENT_LENGTH``);
* a JSON body nested deeper than ``api.max.json.depth`` -> 400, decided by a scan of the bytes that never recurses
  (:func:`json_depth`), so no parser ever overflows its stack (no 500, no traceback in the log);
* a path with an empty segment (``PUT /connectors//x/stop``) -> Connect's 404 ``"HTTP 404 Not Found"``, never a
  redirect to a merged path (routing does not merge slashes: :mod:`connect_state.api.routing`);

The ``Host`` names the API answers are :mod:`connect_state.api.same_origin`'s.

The request timeout is gunicorn's worker ``timeout`` (:func:`connect_state.api.server.gunicorn_options`).
"""

from __future__ import annotations

import logging

from flask import Flask, Response, request
from werkzeug.exceptions import NotFound, RequestEntityTooLarge

from connect_state.api.errors import ConnectRestException, error_response
from connect_state.core.settings import Settings

__all__ = ["init_app", "json_depth", "too_deep_message"]

log = logging.getLogger(__name__)

WRITE_METHODS = frozenset(("POST", "PUT", "PATCH", "DELETE"))  # the methods that write (and carry a body)


def json_depth(data: bytes, limit: int) -> int:  # noqa: C901, PLR0912 - a byte scanner, not a view
    """The nesting depth of the JSON text ``data`` (arrays and objects; strings skipped), scanning at most until it
    exceeds ``limit`` (then ``limit + 1``). Iterative: any input is scanned in constant stack."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


def too_deep_message(limit: int) -> str:
    """Ours: the 400 of a body nested too deep."""
    return f"Request body is nested more than {limit} levels deep (api.max.json.depth)"


def init_app(app: Flask, settings: Settings) -> None:
    """Bound ``app``'s input; call after the authentication's hook (:mod:`connect_state.api.auth`: a body is read only
    for an authorised request)."""
    app.config["MAX_CONTENT_LENGTH"] = settings.api_max_body_bytes
    app.before_request(check_empty_segments)
    app.before_request(check_body_size)
    limit = settings.api_max_json_depth
    app.before_request(lambda: check_json_depth(limit))
    app.register_error_handler(RecursionError, handle_recursion_error)


def check_empty_segments() -> None:
    """404 for a path with an empty segment: Werkzeug's matcher drops leading slashes, so ``//connectors/x/stop``
    would otherwise reach the view of ``/connectors/x/stop`` (an empty segment inside a path matches no rule)."""
    if "//" in request.environ.get("PATH_INFO", ""):
        raise NotFound()


def check_body_size() -> None:
    """413 for a declared body over the bound, before anything reads it (the first of the app's checks)."""
    length = request.content_length
    limit = request.max_content_length
    if length is not None and limit is not None and length > limit:
        raise RequestEntityTooLarge()


def check_json_depth(limit: int) -> None:
    """400 when the request's body (read once, bounded, and kept for the view) or a query value (``?partition=`` is
    JSON) is nested deeper than ``limit``."""
    if request.url_rule is None:
        return
    if any(json_depth(value.encode(), limit) > limit for value in request.args.values()):
        message = f"A query parameter is nested more than {limit} levels deep (api.max.json.depth)"
        raise ConnectRestException(400, message)
    if request.method not in WRITE_METHODS:
        return
    data = request.get_data(cache=True)
    bound = request.max_content_length
    if request.content_length is None and bound is not None and len(data) >= bound:
        request.stream.read(1)  # a streamed body cut at the bound: Werkzeug's stream raises the 413 here
    if data and json_depth(data, limit) > limit:
        raise ConnectRestException(400, too_deep_message(limit))


def handle_recursion_error(err: RecursionError) -> Response:
    """The last line of defence: input too deep for a parser is the client's error, logged in one line."""
    log.warning("Request %s %s too deeply nested to process: %s", request.method, request.path, err)
    return error_response(400, "Request is nested too deeply to process")
