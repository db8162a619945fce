"""Audit trail (issue 13): every write, and every refusal, becomes one row: who, when, from where, what, the outcome,
the connector's state before the write; kept in the Delta table ``audit`` (:data:`connect_state.tables.schemas.AUDIT`).

A row is written after the answer is decided, for every request whose method writes (``POST``, ``PUT``, ``PATCH``,
``DELETE``: allowed, refused or failed) and for refusals (401, 403, 429) of any method, these in summary: the first
refusal per principal, client address, method, route and status in ``api.audit.refusals.window.ms`` is written in
full, the others only counted, and written as one row once the window has passed (:mod:`connect_state.security.
refusal_sampler`; at the next request, the flusher's next round, or when the worker stops): its ``repeated`` says
how many refusals it stands for, its ``time`` is the last one's, its ``path`` the first's. Anyone can make the API
refuse; no one can make it write a line per refusal::

    {"id": "5f0c...", "time": "2026-01-01T12:00:00.000123Z", "principal": "alice", "auth": "basic",
     "remote_addr": "10.0.0.7", "method": "PUT", "path": "/connectors/orders/stop", "query": "",
     "endpoint": "connectors.stop_connector", "connector": "orders", "role": "operate", "body": null, "status": 204,
     "outcome": "succeeded", "message": null, "target_state_before": "STARTED", "connector_state_before": "RUNNING",
     "written": [{"topic": "connect-configs", "partition": 0, "offset": 42, "key": "commit-orders", "tombstone": false},
                 {"topic": "connect-configs", "partition": 0, "offset": 43, "key": "target-state-orders", ...}]}

``outcome`` is :class:`Outcome`: ``succeeded`` (2xx), ``refused`` (401, 403, 429) or ``failed`` (anything else, with the
error's message; a view may put what it does first: an offsets restore names the time restored to,
``offsets restore to 2026-11-22T10:00:00.000Z (1763805600000)``), and ``written``: each Kafka record the request
wrote (topic, partition, offset, key, tombstone;
plus ``transactional_id`` for a record written in a transaction), each consumer-group change (group, call,
partitions) and each round of zombie fencing (``fenced``: the transactional ids). The body is the request's JSON
with secrets redacted (:func:`connect_state.security.redaction.redact_json`). ``target_state_before`` /
``connector_state_before``: the connector's row of the ``connectors`` table when the request arrived (authorized
requests: before anything is written; null when the connector or the table is unknown). ``id`` is unique per row.

Where rows go: the log (logger ``connect_state.api.audit``, always); ``api.audit.file``, appended and fsynced before
the answer leaves; the Kafka topic ``api.audit.topic`` (keyed by connector), when set; and, with a file and
``api.audit.table=true`` (the default), the Delta table ``audit`` under ``delta.root`` (local or object store, opened
with the API's storage options: :class:`connect_state.tables.reader.TableReader`). The file is the table's write-ahead
spool: :class:`~connect_state.tables.audit_table.AuditTable` appends the lines past its mark (``<file>.flushed``: byte
offset and inode) to the table, skipping ids the table already has, then moves the mark; a background thread does it
every ``api.audit.flush.interval.ms`` (``0``: after each audited request), starting in each serving process (replaying
what an earlier process left unflushed). A crash between the append and the mark replays rows the id check then
skips; Kafka or the object store being away only delays the flush. Processes sharing a spool serialise their
flushes with ``flock`` on ``<file>.lock``. A failing sink is logged and never changes the answer. After a flush the
background thread also runs the table's retention and, when due, its compaction (``api.audit.compact.*``: the small
files of past flushes rewritten as few large ones sorted by time, :mod:`connect_state.tables.compaction`).

``GET /audit`` (role ``admin``) answers the table's rows plus the spool's unflushed ones (the file's, without the
table), oldest first, filtered by ``connector``, ``principal``, ``outcome``, ``since`` and ``until`` (epoch ms or
ISO-8601), at most ``limit`` newest (default 100, at most 10000): ``{"total": <rows matching>, "rows": [...]}``;
404 when no audit file is configured.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from flask import Blueprint, Flask, Response, current_app, g, jsonify, request
from werkzeug.exceptions import HTTPException

from connect_state.api.args import limit_arg, time_arg
from connect_state.api.auth import current_principal, required_role
from connect_state.api.errors import ConnectRestException
from connect_state.api.limits import WRITE_METHODS, json_depth
from connect_state.api.openapi import ANY, STRING, documented, json_answer, query
from connect_state.api.resources import (
    CLUSTER_ENVIRON_KEY,
    app_resources,
    default_resources,
    get_settings,
    whole_path,
)
from connect_state.api.retained import AuditRetention, kept_time_arg
from connect_state.core.errors import ConnectStateError
from connect_state.core.settings import Settings
from connect_state.security.login_throttle import address_key
from connect_state.security.redaction import redact_json, settings_patterns
from connect_state.security.refusal_sampler import RefusalKey, RefusalSampler, Summary
from connect_state.tables.audit_table import AuditQuery, AuditTable, iso_time
from connect_state.tables.history import parse_time
from connect_state.tables.schemas import AUDIT, CONNECTORS

__all__ = ["AuditTrail", "Outcome", "bp", "init_app", "outcome_of"]

log = logging.getLogger("connect_state.api.audit")

bp = Blueprint("audit", __name__)

EXTENSION = "connect_state.audit"
REFUSALS = frozenset((401, 403, 429))


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
        self.table = AuditTable(settings, self.path) if self.path is not None and settings.api_audit_table else None
        self.interval_s = settings.api_audit_flush_interval_ms / 1000
        self._flusher: tuple[int, threading.Thread, threading.Event] | None = None
        self.upkeep = AuditRetention(settings)
        self._pid = os.getpid()
        self.refusals = RefusalSampler(settings.api_audit_refusals_window_ms / 1000)
        self._start_lock = threading.Lock()

    def start(self) -> None:
        """Start this process's flusher (idempotent; again in a forked child): it first replays what is unflushed.
        Never called before gunicorn forks (deltalake's runtime does not survive a fork)."""
        if self.table is None or self.interval_s <= 0:
            return
        if self._pid != os.getpid():  # a forked child: the parent's locks and thread are not this process's
            self._pid, self._lock, self._start_lock, self._flusher = (
                os.getpid(),
                threading.Lock(),
                threading.Lock(),
                None,
            )
            self.refusals = RefusalSampler(self.refusals.window_s)
            self.table.forked()
        with self._start_lock:
            if self._flusher is not None and self._flusher[1].is_alive():
                return
            stop = threading.Event()
            thread = threading.Thread(target=self._run, args=(stop,), name="audit-flusher", daemon=True)
            self._flusher = (os.getpid(), thread, stop)
            thread.start()

    def _run(self, stop: threading.Event) -> None:
        while True:
            self.summarise()
            self.flush()
            if self.table is not None:
                self.upkeep.maybe_run(self.table)
                self.compact()
            if stop.wait(self.interval_s):
                return

    def stop(self) -> None:
        """Stop the flusher, write every pending summary of refusals and flush once more (at shutdown)."""
        flusher, self._flusher = self._flusher, None
        if flusher is not None and flusher[0] == os.getpid():
            flusher[2].set()
            flusher[1].join(timeout=self.interval_s + 10)
        self.summarise(every=True)
        self.flush()

    def flush(self) -> int:
        """Flush the spool to the table now (errors logged); how many rows were appended."""
        if self.table is None:
            return 0
        try:
            return self.table.flush()
        except Exception as err:  # the object store is away, the table unreadable: the spool keeps the rows
            log.error("Cannot flush the audit spool %s to %s: %s", self.path, self.table.location, err)
            return 0

    def compact(self) -> None:
        """Compact the table when due (:meth:`AuditTable.compact`, ``api.audit.compact.*``); errors logged."""
        if self.table is None:
            return
        try:
            done = self.table.compact(
                self.settings.api_audit_compact_small_files, self.settings.api_audit_compact_file_bytes
            )
        except Exception as err:  # the object store is away: the next round tries again
            log.warning("Cannot compact the audit table %s: %s", self.table.location, err)
            return
        if done is not None:
            log.info("audit table %s: %s", self.table.location, done.line())

    @staticmethod
    def _end_torn_line(path: Path) -> None:
        """After a crash mid-write the file may end inside a row: end that line, so the next row stands alone."""
        if not path.is_file() or path.stat().st_size == 0:
            return
        with path.open("rb+") as file:
            file.seek(-1, os.SEEK_END)
            if file.read(1) != b"\n":
                file.write(b"\n")

    def record(self, settings: Settings, response: Response) -> None:
        """Write the current request's row, unless it is a refusal like one written in its window (then counted);
        and the summaries of the windows that have passed."""
        at = iso_time(datetime.now(UTC))
        written: bool = True
        due: list[Summary] = []
        if response.status_code in REFUSALS:
            written, due = self.refusals.admit(refusal_key(response), at, whole_path())
        for summary in due:
            self.write(summary_row(summary))
        if written:  # built only when written: a refusal counted costs no table read
            self.write(audit_row(settings, response, at))

    def summarise(self, every: bool = False) -> None:
        """Write the summaries of the refusal windows that have passed (``every``: of all, when the worker stops)."""
        try:
            for summary in self.refusals.due(every):
                self.write(summary_row(summary))
        except Exception as err:  # the audit never changes the answer
            log.error("Cannot write the audit's summaries of refusals: %s", err, exc_info=err)

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
                default_resources().writer().send(  # the deployment's audit: the default cluster's Kafka
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

    follows_cluster = True  # the request's cluster's writer at each call (api.resources.serving_cluster)

    def __init__(self, proxy: RecordingProxy) -> None:
        self.proxy = proxy

    def send(self, topic: str, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int | None = None) -> Any:
        positions = list(app_resources().writer().send(topic, records, timeout_ms))
        self._note(topic, records, positions)
        return positions

    def begin_transaction(self, transactional_id: str, timeout_ms: int | None = None) -> AuditedTransaction:
        return AuditedTransaction(self, app_resources().writer().begin_transaction(transactional_id, timeout_ms))

    def fence_producers(self, transactional_ids: Sequence[str], timeout_ms: int | None = None) -> None:
        app_resources().writer().fence_producers(transactional_ids, timeout_ms)
        self.proxy.written.append({"fenced": list(transactional_ids)})

    def _note(
        self,
        topic: str,
        records: Sequence[tuple[bytes, bytes | None]],
        positions: Sequence[Any],
        **extra: str,
    ) -> None:
        for (key, value), position in zip(records, positions, strict=False):
            self.proxy.written.append(
                {
                    "topic": topic,
                    "partition": _position(position, "partition", 0),
                    "offset": _position(position, "offset", 1),
                    "key": key.decode("utf-8", errors="replace"),
                    "tombstone": value is None,
                    **extra,
                }
            )

    def close(self) -> None:  # the app's writer is closed by the app
        pass


class AuditedTransaction:
    """A transaction of the app's Kafka writer, noting each committed record (with its transactional id)."""

    def __init__(self, writer: AuditedWriter, transaction: Any) -> None:
        self.writer = writer
        self.transaction = transaction

    def commit(self, topic: str, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int | None = None) -> Any:
        positions = list(self.transaction.commit(topic, records, timeout_ms))
        self.writer._note(topic, records, positions, transactional_id=self.transaction.transactional_id)
        return positions

    def close(self) -> None:
        self.transaction.close()


class AuditedAdmin:
    """The app's consumer-group admin, noting each change to a group in ``proxy``."""

    follows_cluster = True  # the request's cluster's admin at each call (api.resources.serving_cluster)

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
    """The error's message; for a write whose view noted what it does (``g.audit_note``: a restore's time), the note
    first."""
    note = g.get("audit_note")
    error = _error_message(response)
    if note is None:
        return error
    return note if error is None else f"{note}: {error}"


def _error_message(response: Response) -> str | None:
    if response.status_code < 400 or not response.is_json:
        return None
    body = response.get_json(silent=True)
    return body.get("message") if isinstance(body, dict) else None


def refusal_key(response: Response) -> RefusalKey:
    """What makes the current refusal like others (:class:`~connect_state.security.refusal_sampler.RefusalKey`)."""
    principal, role = current_principal(), required_role()
    return RefusalKey(
        principal=principal.name if principal else None,
        auth=principal.method.value if principal else None,
        address=address_key(request.remote_addr),
        method=request.method,
        endpoint=request.url_rule.endpoint if request.url_rule is not None else None,
        role=role.value if role else None,
        status=response.status_code,
        cluster=request.environ.get(CLUSTER_ENVIRON_KEY),
    )


def summary_row(summary: Summary) -> dict[str, Any]:
    """The row standing for refusals counted in a window: ``repeated`` of them, the last at its ``time``."""
    key = summary.key
    return {
        "id": uuid.uuid4().hex,
        "time": summary.last_time,
        "principal": key.principal,
        "auth": key.auth,
        "remote_addr": key.address,
        "method": key.method,
        "path": summary.path,
        "query": None,
        "endpoint": key.endpoint,
        "connector": None,
        "role": key.role,
        "body": None,
        "status": key.status,
        "outcome": Outcome.REFUSED.value,
        "message": f"{summary.repeated} more refusals like the one at {summary.first_time}, up to this time "
        "(api.audit.refusals.window.ms)",
        "written": [],
        "target_state_before": None,
        "connector_state_before": None,
        "repeated": summary.repeated,
    }


def audit_row(settings: Settings, response: Response, at: str | None = None) -> dict[str, Any]:
    """The row of the current request and its ``response`` (at ``at``, default now)."""
    principal = current_principal()
    role = required_role()
    target_state, connector_state = g.get("audit_state_before") or connector_state_before()
    return {
        "id": uuid.uuid4().hex,
        "time": at or iso_time(datetime.now(UTC)),
        "principal": principal.name if principal else None,
        "auth": principal.method.value if principal else None,
        "remote_addr": request.remote_addr,
        "method": request.method,
        "path": whole_path(),  # /clusters/<id>/... kept whole
        "query": request.query_string.decode("latin-1"),
        "endpoint": request.url_rule.endpoint if request.url_rule is not None else None,
        "connector": (request.view_args or {}).get("connector"),
        "role": role.value if role else None,
        "body": _body(settings) if response.status_code != 401 else None,  # no body read for the unauthenticated
        "status": response.status_code,
        "outcome": outcome_of(response.status_code).value,
        "message": _message(response),
        "written": proxy.written if isinstance(proxy := g.get("audit_proxy"), RecordingProxy) else [],
        "target_state_before": target_state,
        "connector_state_before": connector_state,
        "repeated": None,
    }


def connector_state_before() -> tuple[str | None, str | None]:
    """The request's connector's target and connector state in the ``connectors`` table (None when unknown)."""
    connector = (request.view_args or {}).get("connector")
    if not connector:
        return None, None
    try:
        found = app_resources().tables.rows(
            CONNECTORS, filters=[("name", "=", connector)], columns=["target_state", "connector_state"]
        )
    except Exception as err:  # no table yet, unreadable: the row says unknown
        log.debug("No state of connector %s for the audit row: %s", connector, err)
        return None, None
    return (found[0].get("target_state"), found[0].get("connector_state")) if found else (None, None)


def init_app(app: Flask, settings: Settings) -> AuditTrail:
    """Audit every write and every refusal of ``app``."""
    trail = AuditTrail(settings)
    app.extensions[EXTENSION] = trail

    def install_proxy() -> None:
        trail.start()  # in the serving process (after gunicorn's fork), on its first request at the latest
        if request.method in WRITE_METHODS and request.url_rule is not None:
            g.audit_state_before = connector_state_before()  # authorized (auth's hook ran first): before the write
            proxy = RecordingProxy()
            g.audit_proxy, g.writer, g.admin = proxy, AuditedWriter(proxy), AuditedAdmin(proxy)

    app.before_request(install_proxy)

    def record(response: Response) -> Response:
        if request.method in WRITE_METHODS or response.status_code in REFUSALS:
            try:
                trail.record(settings, response)
            except Exception as err:  # the audit never changes the answer
                log.error("Cannot audit %s %s: %s", request.method, request.path, err, exc_info=err)
            if trail.interval_s <= 0:
                trail.flush()
        else:
            trail.summarise()
        return response

    app.after_request(record)
    return trail


def audit_trail(app: Flask | None = None) -> AuditTrail:
    """The audit trail of ``app`` (default: the current app)."""
    return (app if app is not None else current_app).extensions[EXTENSION]


# --- GET /audit -----------------------------------------------------------------------------------------------------

DEFAULT_LIMIT, MAX_LIMIT = 100, 10_000


def select_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    connector: str | None = None,
    principal: str | None = None,
    outcome: str | None = None,
    since: int | None = None,
    until: int | None = None,
    limit: int = DEFAULT_LIMIT,
) -> tuple[int, list[dict[str, Any]]]:
    """The rows matching the filters (``since``/``until`` epoch ms): how many, and the last ``limit`` of them."""
    matched: deque[dict[str, Any]] = deque(maxlen=limit)
    total = 0
    for row in rows:
        try:
            at = parse_time(row["time"])
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        if connector is not None and row.get("connector") != connector:
            continue
        if principal is not None and row.get("principal") != principal:
            continue
        if outcome is not None and row.get("outcome") != outcome:
            continue
        if (since is not None and at < since) or (until is not None and at > until):
            continue
        total += 1
        matched.append(dict(row))
    return total, list(matched)


def file_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of an audit file (a torn line after a crash skipped)."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                yield row


@bp.get("/audit")
@documented(
    "The audit trail of writes and refusals (the audit table and unflushed spool rows; role admin)",
    {"200": json_answer(ANY, "Audit rows")},
    400,
    404,
    params=[query(name, STRING) for name in ("connector", "principal", "outcome", "since", "until", "limit")],
)
def get_audit() -> Response:
    settings = get_settings()
    if not settings.api_audit_file:
        raise ConnectRestException(404, "No audit file is configured (api.audit.file)")
    limit = limit_arg(DEFAULT_LIMIT, MAX_LIMIT)
    outcome = request.args.get("outcome") or None
    if outcome is not None and outcome not in {o.value for o in Outcome}:
        raise ConnectRestException(400, f"Unknown outcome {outcome!r}: expected one of {', '.join(Outcome)}")
    query = AuditQuery(
        connector=request.args.get("connector") or None,
        principal=request.args.get("principal") or None,
        outcome=outcome,
        since=time_arg("since"),
        until=time_arg("until"),
        limit=limit,
    )
    trail = audit_trail()
    if trail.table is not None:  # the table keeps history.retention.ms of it (the file alone keeps every row)
        kept_time_arg("since", AUDIT)
        kept_time_arg("until", AUDIT)
    if trail.table is not None:  # bounded by the query before it reads
        total, found = trail.table.page(query)
    else:
        total, found = select_rows(file_rows(Path(settings.api_audit_file).expanduser()), **vars(query))
    return jsonify({"total": total, "rows": found})
