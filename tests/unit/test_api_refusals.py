"""The server's own refusals as Jetty answers them (api/refusals.py); the real comparison with the worker is
tests/integration/test_api_server_refusals_connect.py."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from connect_state.api.refusals import REQUEST_HEADER_SIZE, HeaderBudget, header_bytes, jetty_error_page


def environ(path: str, headers: dict[str, str]) -> dict[str, Any]:
    env = {"REQUEST_METHOD": "GET", "RAW_URI": path, "PATH_INFO": path, "SERVER_PROTOCOL": "HTTP/1.1"}
    env.update({"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()})
    return env


def raw_size(path: str, headers: dict[str, str]) -> int:
    lines = [f"GET {path} HTTP/1.1", *(f"{name}: {value}" for name, value in headers.items())]
    return len("\r\n".join([*lines, "", ""]).encode())


def test_header_bytes_counts_the_request_as_sent() -> None:
    headers = {"Host": "127.0.0.1", "X-Probe": "v" * 100, "Accept": "application/json"}
    assert header_bytes(environ("/connectors/c/status", headers)) == raw_size("/connectors/c/status", headers)


def test_the_budget_refuses_beyond_jettys_buffer_with_its_page() -> None:
    answered: list[str] = []

    def app(_environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        return [b"answered"]

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answered.append(status)

    budget = HeaderBudget(app)
    fits = {"X-Big": "v" * (REQUEST_HEADER_SIZE - raw_size("/p", {"X-Big": ""}))}
    assert raw_size("/p", fits) == REQUEST_HEADER_SIZE
    assert list(budget(environ("/p", fits), start_response)) == [b"answered"]
    over = {"X-Big": fits["X-Big"] + "v"}
    body = list(budget(environ("/p", over), start_response))
    assert body == [jetty_error_page(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "/p")]
    assert answered == ["200 OK", "431 Request Header Fields Too Large"]
    assert b"<tr><th>URI:</th><td>/p</td></tr>" in body[0]
