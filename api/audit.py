"""Audit trail (issue 13): every write, and every refusal, becomes one JSON line: who, when, from where, what, the
outcome.

A row is written after the answer is decided, for every request whose method writes (``POST``, ``PUT``, ``PATCH``,
``DELETE``: allowed, refused or failed) and for every 401 or 403 of any method::

    {"time": "2026-01-01T12:00:00.000Z", "principal": "alice", "auth": "basic", "remote_addr": "10.0.0.7",
     "method": "PUT", "path": "/connectors/orders/stop", "query": "", "endpoint": "connectors.stop_connector",
     "connector": "orders", "role": "operate", "body": null, "status": 204, "outcome": "succeeded", "message": null,
     "written": [{"topic": "connect-configs", "partition": 0, "offset": 42, "key": "commit-orders", "tombstone": false},
                 {"topic": "connect-configs", "partition": 0, "offset": 43, "key": "target-state-orders", ...}]}

``outcome`` is :class:`Outcome`: ``succeeded`` (2xx), ``refused`` (401, 403) or ``failed`` (anything else, with the
error's message), and ``written``: each Kafka record the request wrote (topic, partition, offset, key, tombstone)
and each consumer-group change (group, call, partitions). The body is the request's JSON with secrets redacted
(:func:`connect_state.redaction.redact_json`). Rows go to the log (logger ``connect_state.api.audit``, always), to
``api.audit.file`` (appended and synced before the answer leaves, so a row survives a restart) and to the Kafka
topic ``api.audit.topic`` (keyed by connector), each when set. A failing sink is logged and never changes the answer.

``GET /audit`` (role ``admin``) answers the newest rows of ``api.audit.file``, oldest first, filtered by
``connector``, ``principal``, ``outcome``, ``since`` and ``until`` (epoch ms or ISO-8601), at most ``limit`` (default
100, at most 10000): ``{"total": <rows matching>, "rows": [...]}``; 404 when no audit file is configured.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from flask import Blueprint, Flask, Response, g, jsonify, request
from werkzeug.exceptions import HTTPException

from connect_state.api.auth import current_principal, required_role
from connect_state.api.errors import ConnectRestException
from connect_state.api.limits import json_depth
from connect_state.api.resources import app_resources, get_settings
from connect_state.errors import ConnectStateError
from connect_state.history import parse_time
from connect_state.redaction import redact_json, settings_patterns
from connect_state.settings import Settings

__all__ = ["AuditTrail", "Outcome", "bp", "init_app", "outcome_of", "read_audit"]

log = logging.getLogger("connect_state.api.audit")

bp = Blueprint("audit", __name__)

WRITE_METHODS = frozenset(("POST", "PUT", "PATCH", "DELETE"))
REFUSALS = frozenset((401, 403))


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    REFUSED = "refused"
    FAILED = "failed"


def outcome_of(status: int) -> Outcome:
    if status in REFUSALS:
        return Outcome.REFUSED
    return Outcome.SUCCEEDED if 200 <= status < 300 else Outcome.FAILED


class AuditTrail:
    """Where rows go: the log, and the file and topic the settings name."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.path = Path(settings.api_audit_file).expanduser() if settings.api_audit_file else None
        self.topic = settings.api_audit_topic or None
        self._lock = threading.Lock()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._end_torn_line(self.path)

    @staticmethod
    def _end_torn_line(path: Path) -> None:
        """After a crash mid-write the file may end inside a row: end that line, so the next row stands alone."""
        if not path.is_file() or path.stat().st_size == 0:
            return
        with path.open("rb+") as file:
            file.seek(-1, os.SEEK_END)
            if file.read(1) != b"\n":
                file.write(b"\n")

    def write(self, row: Mapping[str, Any]) -> None:
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
        log.info("%s", line)
        if self.path is not None:
            try:
                with self._lock, self.path.open("a", encoding="utf-8") as out:
                    out.write(line + "\n")
                    out.flush()
                    os.fsync(out.fileno())
            except OSError as err:
                log.error("Cannot append to the audit file %s: %s", self.path, err)
        if self.topic is not None:
            key = str(row.get("connector") or "").encode("utf-8")
            try:
                app_resources().writer().send(
                    self.topic, [(key, line.encode("utf-8"))], self.settings.api_kafka_write_timeout_ms
                )
            except ConnectStateError as err:
                log.error("Cannot send the audit row to topic %s: %s", self.topic, err)


class RecordingProxy:
    """What a write request wrote, for its audit row: every record sent (topic, partition, offset, key, tombstone)
    and every change to a consumer group. Installed on ``g`` for a write request as the request's writer and admin
    (where :func:`~connect_state.api.resources.get_writer` and ``get_admin`` look first); the app's real ones are
    created on first use, as without it."""

    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []


class AuditedWriter:
    """The app's Kafka writer, noting each acknowledged record in ``proxy``."""

    def __init__(self, proxy: RecordingProxy) -> None:
        self.proxy = proxy

    def send(self, topic: str, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int | None = None) -> Any:
        positions = list(app_resources().writer().send(topic, records, timeout_ms))
        for (key, value), position in zip(records, positions, strict=False):
            self.proxy.written.append(
                {
                    "topic": topic,
                    "partition": _position(position, "partition", 0),
                    "offset": _position(position, "offset", 1),
                    "key": key.decode("utf-8", errors="replace"),
                    "tombstone": value is None,
                }
            )
        return positions

    def close(self) -> None:  # the app's writer is closed by the app
        pass


class AuditedAdmin:
    """The app's consumer-group admin, noting each change to a group in ``proxy``."""

    def __init__(self, proxy: RecordingProxy) -> None:
        self.proxy = proxy

    def __getattr__(self, name: str) -> Any:
        call = getattr(app_resources().admin(), name)
        if name not in _GROUP_WRITES:
            return call

        def noted(group_id: str, *args: Any) -> Any:
            result = call(group_id, *args)
            self.proxy.written.append({"group": group_id, "call": name, "partitions": _group_partitions(args)})
            return result

        return noted


_GROUP_WRITES = frozenset(("alter_group_offsets", "delete_group_offsets", "delete_group"))


def _position(position: object, name: str, index: int) -> int | None:
    value = getattr(position, name, None)
    if value is None and isinstance(position, tuple) and len(position) == 2:
        value = position[index]
    return value if isinstance(value, int) else None


def _group_partitions(args: tuple[Any, ...]) -> list[str] | None:
    if not args:
        return None
    return sorted(f"{topic}-{partition}" for topic, partition in args[0])


def _body(settings: Settings) -> object:
    """The request's body, read bounded, as JSON with secrets redacted (else its size)."""
    try:
        data = request.get_data(cache=True)
    except HTTPException:  # too large: never read
        return None
    if not data:
        return None
    limit = settings.api_max_json_depth
    if json_depth(data, limit) <= limit:
        try:
            return redact_json(json.loads(data), settings_patterns(settings))
        except (ValueError, UnicodeDecodeError):
            pass
    return {"unparsed_bytes": len(data)}


def _message(response: Response) -> str | None:
    if response.status_code < 400 or not response.is_json:
        return None
    body = response.get_json(silent=True)
    return body.get("message") if isinstance(body, dict) else None


def audit_row(settings: Settings, response: Response) -> dict[str, Any]:
    """The row of the current request and its ``response``."""
    principal = current_principal()
    role = required_role()
    return {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "principal": principal.name if principal else None,
        "auth": principal.method.value if principal else None,
        "remote_addr": request.remote_addr,
        "method": request.method,
        "path": request.path,
        "query": request.query_string.decode("latin-1"),
        "endpoint": request.url_rule.endpoint if request.url_rule is not None else None,
        "connector": (request.view_args or {}).get("connector"),
        "role": role.value if role else None,
        "body": _body(settings) if response.status_code != 401 else None,  # no body read for the unauthenticated
        "status": response.status_code,
        "outcome": outcome_of(response.status_code).value,
        "message": _message(response),
        "written": proxy.written if isinstance(proxy := g.get("audit_proxy"), RecordingProxy) else [],
    }


def init_app(app: Flask, settings: Settings) -> AuditTrail:
    """Audit every write and every refusal of ``app``."""
    trail = AuditTrail(settings)

    def install_proxy() -> None:
        if request.method in WRITE_METHODS and request.url_rule is not None:
            proxy = RecordingProxy()
            g.audit_proxy, g.writer, g.admin = proxy, AuditedWriter(proxy), AuditedAdmin(proxy)

    app.before_request(install_proxy)

    def record(response: Response) -> Response:
        if request.method in WRITE_METHODS or response.status_code in REFUSALS:
            try:
                trail.write(audit_row(settings, response))
            except Exception as err:  # the audit never changes the answer
                log.error("Cannot audit %s %s: %s", request.method, request.path, err, exc_info=err)
        return response

    app.after_request(record)
    return trail


# --- GET /audit -----------------------------------------------------------------------------------------------------

DEFAULT_LIMIT, MAX_LIMIT = 100, 10_000


def read_audit(
    path: Path,
    *,
    connector: str | None = None,
    principal: str | None = None,
    outcome: str | None = None,
    since: int | None = None,
    until: int | None = None,
    limit: int = DEFAULT_LIMIT,
) -> tuple[int, list[dict[str, Any]]]:
    """The rows of the audit file matching the filters: how many, and the newest ``limit`` of them, oldest first."""
    matched: list[dict[str, Any]] = []
    total = 0
    if not path.is_file():
        return 0, []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            try:
                row = json.loads(line)
                at = parse_time(row["time"])
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line after a crash
            if connector is not None and row.get("connector") != connector:
                continue
            if principal is not None and row.get("principal") != principal:
                continue
            if outcome is not None and row.get("outcome") != outcome:
                continue
            if (since is not None and at < since) or (until is not None and at > until):
                continue
            total += 1
            matched.append(row)
            if len(matched) > limit:
                del matched[0]
    return total, matched


def _arg_time(name: str) -> int | None:
    text = request.args.get(name)
    if not text:
        return None
    try:
        return parse_time(text)
    except (ValueError, OverflowError, OSError):
        raise ConnectRestException(
            400, f"Invalid {name} {text!r}: expected epoch milliseconds or an ISO-8601 time"
        ) from None


@bp.get("/audit")
def get_audit() -> Response:
    settings = get_settings()
    if not settings.api_audit_file:
        raise ConnectRestException(404, "No audit file is configured (api.audit.file)")
    text = request.args.get("limit", str(DEFAULT_LIMIT))
    if not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise ConnectRestException(400, f"limit must be an integer between 1 and {MAX_LIMIT}, got {text!r}")
    outcome = request.args.get("outcome") or None
    if outcome is not None and outcome not in {o.value for o in Outcome}:
        raise ConnectRestException(400, f"Unknown outcome {outcome!r}: expected one of {', '.join(Outcome)}")
    total, found = read_audit(
        Path(settings.api_audit_file).expanduser(),
        connector=request.args.get("connector") or None,
        principal=request.args.get("principal") or None,
        outcome=outcome,
        since=_arg_time("since"),
        until=_arg_time("until"),
        limit=int(text),
    )
    return jsonify({"total": total, "rows": found})
