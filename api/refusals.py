"""The server's own refusals, answered as the Connect worker's Jetty answers them (issue 34, "the API's serving path").

Jetty reads a request's line and headers into one buffer of ``requestHeaderSize`` bytes (8 KiB, Connect's default):
a request line that does not fit is refused with 414, headers that do not fit with 431, each with Jetty's HTML error
page (:func:`jetty_error_page`); anything that fits is the application's, however many headers it has (a 5,000
character connector name gets Connect's JSON 404, 120 headers a 200). Checked against the real worker by
``tests/integration/test_api_server_refusals_connect.py``.

gunicorn limits the request line, the number of header lines and each header line instead, and its buffer grows to
their product. So (:data:`LIMITS`) its line limit is its largest (8,190 bytes, Jetty's 8 KiB less the CRLF), each
header line may be as long as Jetty's whole buffer, and the number of header lines is bounded at
:data:`MAX_HEADER_LINES` (a request holds at most about 8 MiB while its headers are read); :class:`HeaderBudget`
then refuses, before anything else sees the request, what exceeds Jetty's total, and :class:`JettyRefusalsWorker`
answers gunicorn's own 414 and 431 with Jetty's page. What stays different (stated in the README):

* more than :data:`MAX_HEADER_LINES` header lines that together fit in 8 KiB (tiny headers): Jetty answers the
  request, we answer 431;
* a request line of 8,191 or 8,192 bytes: Jetty's buffer may still hold it with nothing else, ours does not (414);
* headers gunicorn refuses itself (one header line over 8 KiB, more than :data:`MAX_HEADER_LINES` lines) get Jetty's
  page with ``/badMessage`` as its URI where Jetty names the request's path: gunicorn's parser gives up before it
  hands the path on;
* Jetty counts the bytes as received; we count them as gunicorn parsed them (the header names and values, ``: `` and
  CRLF), so a header written with extra spaces around its value counts a few bytes less here.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from gunicorn.http.errors import LimitRequestHeaders, LimitRequestLine
from gunicorn.util import write_nonblock
from gunicorn.workers.gthread import ThreadWorker

REQUEST_HEADER_SIZE = 8192
"""Jetty's ``HttpConfiguration.requestHeaderSize`` as Connect leaves it: the request line and headers, in bytes."""

MAX_HEADER_LINES = 1024
"""At most this many header lines (gunicorn's ``limit_request_fields``; Jetty has no count, only the size)."""

LIMITS = {
    "limit_request_line": REQUEST_HEADER_SIZE - 2,  # gunicorn's largest (8190)
    "limit_request_fields": MAX_HEADER_LINES,
    "limit_request_field_size": REQUEST_HEADER_SIZE,
}
"""gunicorn's limits: nothing that fits in Jetty's buffer is refused by them (up to :data:`MAX_HEADER_LINES`)."""


JETTY_VERSION = "12.0.34"
"""The Jetty the pinned Kafka ships (``jvm/kafka/lib/jetty-server-*.jar``): its error page names it."""

#: Jetty's reason phrases where Python's differ.
_PHRASES = {HTTPStatus.REQUEST_URI_TOO_LONG: "URI Too Long"}


def jetty_error_page(status: HTTPStatus, uri: str = "/badMessage") -> bytes:
    """The body of Jetty's ``ErrorHandler`` for a request refused before it reached the application: ``uri`` is the
    request's path when Jetty had read it (headers too large), ``/badMessage`` when it had not (line too long)."""
    phrase = _PHRASES.get(status, status.phrase)
    title = f"{status.value} {phrase}"
    return (
        "<html>\n<head>\n"
        '<meta http-equiv="Content-Type" content="text/html;charset=ISO-8859-1"/>\n'
        f"<title>Error {title}</title>\n"
        "</head>\n<body>\n"
        f"<h2>HTTP ERROR {title}</h2>\n"
        "<table>\n"
        f"<tr><th>URI:</th><td>{html.escape(uri, quote=False)}</td></tr>\n"
        f"<tr><th>STATUS:</th><td>{status.value}</td></tr>\n"
        f"<tr><th>MESSAGE:</th><td>{phrase}</td></tr>\n"
        "</table>\n"
        f'<hr/><a href="https://jetty.org/">Powered by Jetty:// {JETTY_VERSION}</a><hr/>\n'
        "\n</body>\n</html>\n"
    ).encode("latin-1", errors="replace")


def jetty_refusal(status: HTTPStatus) -> bytes:
    """The whole answer (status line, headers, body) Jetty writes for ``status``; it closes the connection after."""
    body = jetty_error_page(status)
    head = (
        f"HTTP/1.1 {status.value} {_PHRASES.get(status, status.phrase)}\r\n"
        "Content-Type: text/html;charset=iso-8859-1\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


_REFUSED = {
    LimitRequestLine: HTTPStatus.REQUEST_URI_TOO_LONG,
    LimitRequestHeaders: HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
}


class JettyRefusalsWorker(ThreadWorker):
    """gunicorn's threaded worker, answering its own 414 and 431 (a limit of :data:`LIMITS` exceeded) as Jetty does;
    its other refusals are gunicorn's."""

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        status = next((status for kind, status in _REFUSED.items() if isinstance(exc, kind)), None)
        if status is None:
            super().handle_error(req, client, addr, exc)
            return
        self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        try:
            write_nonblock(client, jetty_refusal(status))
        except OSError:
            self.log.debug("Failed to send error message.")


StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def header_bytes(environ: dict[str, Any]) -> int:
    """The size of the request line and headers as Jetty's buffer holds them (see the module docstring): the line
    (method, target, protocol, two spaces, CRLF), each header as ``name: value`` and CRLF, the blank line's CRLF."""
    line = sum(len(environ.get(key, "")) for key in ("REQUEST_METHOD", "RAW_URI", "SERVER_PROTOCOL")) + 4
    headers = [value for key, value in environ.items() if key.startswith("HTTP_")]
    headers += [environ[key] for key in ("CONTENT_TYPE", "CONTENT_LENGTH") if environ.get(key)]
    names = sum(len(key) - 5 for key in environ if key.startswith("HTTP_"))
    names += sum(len(key) for key in ("CONTENT_TYPE", "CONTENT_LENGTH") if environ.get(key))
    return line + names + sum(len(str(value)) + 4 for value in headers) + 2


class HeaderBudget:
    """WSGI middleware: a request whose line and headers exceed :data:`REQUEST_HEADER_SIZE` answers Jetty's 431 page
    before the application sees it (Connect's Jetty refuses it before any filter)."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if header_bytes(environ) <= REQUEST_HEADER_SIZE:
            return self.app(environ, start_response)
        status = HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE
        body = jetty_error_page(status, environ.get("PATH_INFO") or "/")
        start_response(
            f"{status.value} {status.phrase}",
            [
                ("Content-Type", "text/html;charset=iso-8859-1"),
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
            ],
        )
        return [body]
