"""The server's own refusals against the Connect worker's (issue 34, "the API's serving path"): the same raw requests
(a long request line, many headers, a long header) sent to the real worker (Jetty) and to our real server process
(gunicorn, ``tests/fixtures/api_server.py``), status and body compared.

Jetty refuses a request whose request line and headers together exceed its ``requestHeaderSize`` (8 KiB): 414 while
still reading the request line, 431 once in the headers. Below that, Connect answers the request (a long unknown
connector name: its JSON 404).
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.tables.schemas import ACTIVE_TOPICS, CONNECTORS
from tests.fixtures.api_server import no_kafka_settings, serving_api

READ_TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Our server with empty ``active_topics`` and ``connectors`` tables: ``GET /connectors/<name>/topics`` and
    ``.../status`` answer as Connect does for a connector it does not know."""
    settings = no_kafka_settings(Path(tmp_path_factory.mktemp("api")))
    for spec in (ACTIVE_TOPICS, CONNECTORS):
        write_deltalake(f"{settings['delta.root']}/{spec.name}", pa.Table.from_pylist([], schema=spec.schema))
    with serving_api(settings) as url:
        yield url


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


def raw_answer(url: str, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` as is on a new connection; the answer's status and body (read to the connection's close)."""
    with socket.create_connection(_host_port(url), timeout=READ_TIMEOUT_S) as sock:
        sock.sendall(request)
        received = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    match = re.match(rb"HTTP/1\.[01] (\d{3})", head)
    assert match is not None, received[:200]
    if re.search(rb"(?im)^transfer-encoding:\s*chunked", head):
        body = _unchunked(body)
    return int(match.group(1)), body


def _unchunked(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out, body = out + body[:size], body[size + 2 :]
    return out


def get(path: str, headers: Sequence[tuple[str, str]] = ()) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Accept: application/json", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join([*lines, "Connection: close", "", ""])).encode()


def many(count: int) -> list[tuple[str, str]]:
    return [(f"X-Probe-{i}", "v") for i in range(count)]


def sized(total: int) -> bytes:
    """A GET whose request line and headers are ``total`` bytes, blank line included."""
    base = len(get("/connectors/x/topics", [("X-Big", "")]))
    return get("/connectors/x/topics", [("X-Big", "v" * (total - base))])


CASES = {
    "name of 5,000 characters": get(f"/connectors/{'a' * 5000}/topics"),
    "name of 8,000 characters": get(f"/connectors/{'b' * 8000}/topics"),
    "name of 8,200 characters": get(f"/connectors/{'c' * 8200}/topics"),
    "name of 10,000 characters": get(f"/connectors/{'d' * 10000}/topics"),
    "name of 100,000 characters": get(f"/connectors/{'e' * 100000}/topics"),
    "status of a 5,000-character name": get(f"/connectors/{'f' * 5000}/status"),
    "120 headers": get("/connectors/x/topics", many(120)),
    "500 headers (6.5 KB)": get("/connectors/x/topics", many(500)),
    "700 headers (9 KB)": get("/connectors/x/topics", many(700)),
    "5,000 headers": get("/connectors/x/topics", many(5000)),
    "a header of 7,000 bytes": get("/connectors/x/topics", [("X-Big", "v" * 7000)]),
    "a header of 9,000 bytes": get("/connectors/x/topics", [("X-Big", "v" * 9000)]),
    "a header of 100,000 bytes": get("/connectors/x/topics", [("X-Big", "v" * 100000)]),
    "line and headers of 8,192 bytes": sized(8192),
    "line and headers of 8,193 bytes": sized(8193),
    "line and headers of 4,500 bytes each": get(f"/connectors/{'g' * 4500}/topics", [("X-Big", "v" * 4500)]),
}


#: Refused by gunicorn itself (one header line over 8 KiB, more than 1,024 lines): its parser gives up before it hands
#: the path on, so Jetty's page names ``/badMessage`` where Jetty names the request's path (api/refusals.py).
PATH_UNKNOWN = {"5,000 headers", "a header of 9,000 bytes", "a header of 100,000 bytes"}


@pytest.mark.parametrize("case", list(CASES))
def test_refusals_answer_as_connect_does(case: str, connect: ConnectRestClient, ours: str) -> None:
    request = CASES[case]
    theirs_status, theirs_body = raw_answer(connect.base_url, request)
    our_status, our_body = raw_answer(ours, request)
    print(f"{case}: Connect {theirs_status} {theirs_body[:400]!r} / ours {our_status} {our_body[:400]!r}")
    if case in PATH_UNKNOWN:
        theirs_body = theirs_body.replace(b"<td>/connectors/x/topics</td>", b"<td>/badMessage</td>", 1)
    assert (our_status, comparable(our_body)) == (theirs_status, comparable(theirs_body))


def comparable(body: bytes) -> object:
    """A JSON body as its value (ours ends with Flask's newline), any other body as its bytes."""
    return json.loads(body) if body[:1] in (b"{", b"[") else body
