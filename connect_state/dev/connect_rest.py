"""A tiny Kafka Connect REST client on the standard library (urllib, json).

It is "Connect's own answer": the demo, the benchmarks and the tests compare what connect-state computes with what a
real worker says. The raw methods (``get``, ``put``, ``post``, ``patch``, ``delete``) never judge a status code: they
return ``(status, parsed JSON or None)`` for every HTTP answer, error statuses included, and raise
:class:`ConnectRestError` only when no HTTP answer came back (refused connection, timeout, ...). The helpers
(``create_connector``, ``active_topics``, ...) do check the status and raise :class:`ConnectRestError` with Connect's
message when it is not the expected one.

Proxies from the environment are ignored: Connect is reached directly.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from connect_state.core.errors import ConnectStateError

T = TypeVar("T")

Response = tuple[int, Any]
"""``(HTTP status, the body parsed as JSON, or None when it is empty or not JSON)``."""

DEFAULT_TIMEOUT = 30.0


class ConnectRestError(ConnectStateError):
    """Connect could not be reached, or answered a helper with an unexpected status.

    ``status`` and ``body`` are those of the answer, or ``None`` when there was no answer.
    """

    def __init__(self, message: str, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class ConnectRestTimeout(ConnectRestError, TimeoutError):
    """:meth:`ConnectRestClient.wait_for` gave up."""


def _parse_body(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _read_error_body(err: urllib.error.HTTPError) -> bytes:
    try:
        return err.read() if err.fp is not None else b""
    except OSError:
        return b""
    finally:
        err.close()


def _error_message(body: Any) -> str | None:
    """Connect's ``{"error_code":..,"message":..}`` message, if the body is one."""
    if isinstance(body, dict):
        message = body.get("message")
        return message if isinstance(message, str) else None
    return None


class ConnectRestClient:
    """A client for one Connect worker's REST API, e.g. ``ConnectRestClient("http://127.0.0.1:8083")``."""

    def __init__(self, base_url: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def __repr__(self) -> str:
        return f"ConnectRestClient({self.base_url!r}, timeout={self.timeout})"

    # --- raw requests ---------------------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Response:
        """Send one request; ``body`` (if not None) is sent as JSON. Raises ConnectRestError only without an answer."""
        url = self.base_url + (path if path.startswith("/") else "/" + path)
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with self._opener.open(req, timeout=self.timeout if timeout is None else timeout) as resp:
                return resp.status, _parse_body(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, _parse_body(_read_error_body(err))
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise ConnectRestError(f"{method} {url}: no answer from Connect ({reason})") from err

    def get(self, path: str) -> Response:
        return self.request("GET", path)

    def put(self, path: str, body: Any = None) -> Response:
        return self.request("PUT", path, body)

    def post(self, path: str, body: Any = None) -> Response:
        return self.request("POST", path, body)

    def patch(self, path: str, body: Any = None) -> Response:
        return self.request("PATCH", path, body)

    def delete(self, path: str) -> Response:
        return self.request("DELETE", path)

    # --- helpers --------------------------------------------------------------------------------------------------

    @staticmethod
    def connector_path(name: str, *rest: str) -> str:
        """``/connectors/<name>/<rest...>`` with the name URL-quoted."""
        return "/".join(["/connectors", urllib.parse.quote(name, safe=""), *rest])

    def _expect(self, response: Response, expected: tuple[int, ...], what: str) -> Any:
        status, body = response
        if status not in expected:
            message = _error_message(body) or (json.dumps(body) if body is not None else "no body")
            raise ConnectRestError(f"{what}: Connect answered {status}: {message}", status, body)
        return body

    def server_info(self) -> dict[str, Any]:
        """``GET /``: version, commit and kafka_cluster_id."""
        return self._expect(self.get("/"), (200,), "GET /")

    def list_connectors(self) -> list[str]:
        """``GET /connectors``: the connector names."""
        return self._expect(self.get("/connectors"), (200,), "GET /connectors")

    def create_connector(self, name: str, config: Mapping[str, str]) -> dict[str, Any]:
        """``PUT /connectors/<name>/config`` (create or update); returns the ConnectorInfo."""
        response = self.put(self.connector_path(name, "config"), dict(config))
        return self._expect(response, (200, 201), f"create connector {name!r}")

    def delete_connector(self, name: str, missing_ok: bool = False) -> None:
        """``DELETE /connectors/<name>``; a 404 is accepted when ``missing_ok``."""
        expected = (200, 204, 404) if missing_ok else (200, 204)
        self._expect(self.delete(self.connector_path(name)), expected, f"delete connector {name!r}")

    def connector_status(self, name: str) -> dict[str, Any] | None:
        """``GET /connectors/<name>/status``, or None when Connect says 404."""
        body = self._expect(self.get(self.connector_path(name, "status")), (200, 404), f"status of {name!r}")
        return body if isinstance(body, dict) and "connector" in body else None

    def resume_connector(self, name: str) -> None:
        """``PUT /connectors/<name>/resume`` (a STOPPED or PAUSED connector starts again; asynchronous: 202)."""
        self._expect(self.put(self.connector_path(name, "resume")), (202,), f"resume connector {name!r}")

    def active_topics(self, name: str) -> set[str]:
        """``GET /connectors/<name>/topics`` as a set (KIP-558)."""
        body = self._expect(self.get(self.connector_path(name, "topics")), (200,), f"active topics of {name!r}")
        return set(body.get(name, {}).get("topics", []))

    def reset_active_topics(self, name: str) -> None:
        """``PUT /connectors/<name>/topics/reset`` (asynchronous in Connect: 202)."""
        self._expect(self.put(self.connector_path(name, "topics", "reset")), (202,), f"reset topics of {name!r}")

    def is_running(self, name: str, min_tasks: int = 1) -> bool:
        """True when the connector and at least ``min_tasks`` tasks report RUNNING, and no task reports otherwise."""
        status = self.connector_status(name)
        if status is None or status.get("connector", {}).get("state") != "RUNNING":
            return False
        tasks = status.get("tasks", [])
        return len(tasks) >= min_tasks and all(t.get("state") == "RUNNING" for t in tasks)

    def wait_until_running(self, name: str, timeout: float = 60.0, min_tasks: int = 1) -> None:
        """Poll the status until :meth:`is_running`; raises ConnectRestTimeout after ``timeout`` seconds."""
        self.wait_for(lambda: self.is_running(name, min_tasks), timeout, description=f"connector {name!r} RUNNING")

    def wait_for(
        self,
        predicate: Callable[[], T],
        timeout: float = 60.0,
        interval: float = 0.5,
        description: str = "condition",
    ) -> T:
        """Call ``predicate`` until it returns a truthy value, and return that value.

        A ConnectRestError raised by the predicate (e.g. a 409 during a rebalance) counts as "not yet". After
        ``timeout`` seconds, raises ConnectRestTimeout naming the last value or error seen.
        """
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            try:
                value = predicate()
            except ConnectRestError as err:
                value, last = None, err
            else:
                last = value
            if value:
                return value
            if time.monotonic() >= deadline:
                raise ConnectRestTimeout(f"timed out after {timeout:g}s waiting for {description}; last: {last!r}")
            time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
