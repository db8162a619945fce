"""A stand-in for the API over real HTTP, for the command line's unit tests: canned answers per method and path, every
request recorded (method, path, query, headers, JSON body). The integration tests drive the command line against the
real API (tests/integration/test_cli_connect.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeApi:
    """``answers[(method, path)] = (status, body)``; a path without an answer is Connect's 404."""

    url: str = ""
    answers: dict[tuple[str, str], tuple[int, Any]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)

    def answer(self, method: str, path: str, status: int, body: Any = None) -> None:
        self.answers[(method, path)] = (status, body)

    def connectors(self, states: dict[str, str], tasks: int = 1) -> None:
        """``GET /connectors`` and its expansion for connectors in ``states`` (each a source with ``tasks`` tasks)."""
        self.answer("GET", "/connectors", 200, sorted(states))
        expanded = {
            name: {
                "status": {
                    "name": name,
                    "connector": {"state": state, "worker_id": "w:8083"},
                    "tasks": [{"id": i, "state": state, "worker_id": "w:8083"} for i in range(tasks)],
                    "type": "source",
                },
                "info": {
                    "name": name,
                    "config": {"connector.class": "FileStreamSource"},
                    "tasks": [],
                    "type": "source",
                },
            }
            for name, state in states.items()
        }
        self.answer("GET", "/connectors?expand", 200, expanded)

    def writes(self) -> list[tuple[str, str]]:
        return [(s.method, s.path) for s in self.seen if s.method != "GET"]


def _handler(api: FakeApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            query = parse_qs(parts.query)
            api.seen.append(Seen(self.command, parts.path, query, dict(self.headers), json.loads(raw) if raw else None))
            key = (self.command, parts.path + ("?expand" if "expand" in query else ""))
            status, body = api.answers.get(key, (404, {"error_code": 404, "message": "HTTP 404 Not Found"}))
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def fake_api() -> Iterator[FakeApi]:
    api = FakeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
