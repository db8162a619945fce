"""``connect-state-api``: serve the REST API on ``api.host:api.port``.

By default with gunicorn (one worker process with a few threads, access log on stdout); ``--dev`` uses Flask's
development server instead. SIGTERM and SIGINT stop it cleanly: requests in progress finish (gunicorn: within
``--graceful-timeout``), then the Kafka writer is flushed and closed. With ``api.tls.cert.file`` it serves HTTPS,
and with ``api.tls.client.auth`` mutual TLS (:mod:`connect_state.api.auth`); bound beyond loopback without
authentication it refuses to start (exit 2) unless ``api.auth.anonymous=true``: ``api.host`` is judged by the
addresses it resolves to when the app is created, and gunicorn's listening sockets by the addresses they are bound to
once bound (a socket systemd hands over included; :mod:`connect_state.api.network`).

    connect-state-api [--conf-file F] [--set key=value ...] [--workers N] [--threads N] [--dev]

Each worker process serves ``api.threads`` requests at once (``--threads`` overrides it), at most
``api.write.concurrency`` of them writes (:mod:`connect_state.api.write_slots`): slow writes never take every thread.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import ssl
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any

from flask import Flask
from gunicorn import glogging
from gunicorn.app.base import BaseApplication

from connect_state.api import close_app, create_app
from connect_state.api.audit import audit_trail
from connect_state.api.auth import ClientAuth, auth_config, tls_client_auth
from connect_state.api.network import UnprotectedApiError, check_listening
from connect_state.api.refusals import LIMITS, HeaderBudget, JettyRefusalsWorker
from connect_state.core.errors import ConnectStateError
from connect_state.core.settings import Settings, add_config_arguments, settings_from_args

log = logging.getLogger("connect_state.api")


def bind_address(host: str, port: int) -> str:
    """gunicorn's ``bind``: ``host:port``, with brackets around an IPv6 host."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


class AccessLogger(glogging.Logger):
    """gunicorn's logger, building an access line's atoms for its format only (issue 11 §5).

    gunicorn's ``atoms`` adds every request header, response header and WSGI environ entry (some 40 keys) to each
    line's atoms, a tenth of a ``GET /status``'s time in the worker; the default format (``%(h)s %(l)s %(u)s %(t)s
    "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"``) uses none of them. A format naming a header or environ entry
    (``%({name}i)s``, ``{name}o``, ``{name}e``) gets gunicorn's own atoms. The line is the same either way.
    """

    def atoms(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> dict[str, Any]:
        if "}" in self.cfg.access_log_format:
            return super().atoms(resp, req, environ, request_time)
        status = resp.status
        if isinstance(status, str):
            status = status.split(None, 1)[0]
        sent = getattr(resp, "sent", None)
        seconds, micros = request_time.seconds, request_time.microseconds
        return {
            "h": environ.get("REMOTE_ADDR", "-"),
            "l": "-",
            "u": self._get_user(environ) or "-",
            "t": self.now(),
            "r": f"{environ['REQUEST_METHOD']} {environ['RAW_URI']} {environ['SERVER_PROTOCOL']}",
            "s": status,
            "m": environ.get("REQUEST_METHOD"),
            "U": environ.get("PATH_INFO"),
            "q": environ.get("QUERY_STRING"),
            "H": environ.get("SERVER_PROTOCOL"),
            "b": str(sent) if sent is not None else "-",
            "B": sent,
            "f": environ.get("HTTP_REFERER", "-"),
            "a": environ.get("HTTP_USER_AGENT", "-"),
            "T": seconds,
            "D": seconds * 1_000_000 + micros,
            "M": seconds * 1000 + int(micros / 1000),
            "L": f"{seconds}.{micros:06d}",
            "p": f"<{os.getpid()}>",
        }


class ApiServer(BaseApplication):
    """gunicorn serving one Flask app object (no config file, no command line of its own)."""

    def __init__(self, app: Flask, options: dict[str, Any]) -> None:
        self.application = app
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        assert self.cfg is not None
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        """The app behind :class:`~connect_state.api.refusals.HeaderBudget` (Jetty's 8 KiB for line and headers)."""
        return HeaderBudget(self.application)


def gunicorn_options(settings: Settings, app: Flask, workers: int = 1, threads: int | None = None) -> dict[str, Any]:
    """gunicorn settings for ``app``: bound to ``api.host:api.port``, threads, access log to stdout."""

    def worker_exit(_server: Any, _worker: Any) -> None:
        audit_trail(app).summarise(every=True)  # the refusals counted but not written yet
        close_app(app)  # this worker's copy of the app: flush and close its Kafka writer

    def post_worker_init(_worker: Any) -> None:
        audit_trail(app).start()  # after the fork: replay the audit spool's unflushed rows into the audit table

    def when_ready(arbiter: Any) -> None:
        """Judge the sockets gunicorn listens on, as bound (not as ``api.host`` names them): exit 2 when exposed."""
        config = auth_config(app)
        try:
            check_listening((lnr.getsockname() for lnr in arbiter.LISTENERS), config.enabled or config.anonymous)
        except UnprotectedApiError as err:
            print(f"connect-state-api: {err}", file=sys.stderr)
            arbiter.halt(reason=str(err), exit_status=2)

    return {
        **tls_options(settings),
        "bind": [bind_address(settings.api_host, settings.api_port)],
        "workers": workers,
        "threads": threads if threads is not None else settings.api_threads,
        # gthread, answering its own 414 and 431 as Connect's Jetty does, with limits at Jetty's (api/refusals.py)
        "worker_class": JettyRefusalsWorker,
        **LIMITS,
        "accesslog": "-",
        "logger_class": AccessLogger,
        "errorlog": "-",
        "loglevel": "info",
        "proc_name": "connect-state-api",
        # A write may wait api.fresh.read.timeout.ms (the fresh read before it, the check after it) and
        # api.kafka.write.timeout.ms for Kafka; let it finish before a worker is recycled. api.request.timeout.ms
        # overrides it (README "Security": what this bounds with the gthread worker).
        "timeout": request_timeout_s(settings),
        "graceful_timeout": max(30, _request_bound_s(settings) + 5),
        # gunicorn >= 25 opens a control socket in $HOME/.gunicorn by default; two servers would share it.
        "control_socket_disable": True,
        # No SCRIPT_NAME or PATH_INFO from request headers (gunicorn takes them from forwarded_allow_ips peers,
        # loopback by default): the path a request is served, audited and cached under is its own (api/clusters.py).
        "forwarder_headers": "",
        "worker_exit": worker_exit,
        "post_worker_init": post_worker_init,
        "when_ready": when_ready,
    }


def request_timeout_s(settings: Settings) -> int:
    """gunicorn's worker timeout in seconds: ``api.request.timeout.ms`` (rounded up), or, when 0, the longest a write
    request's bounded waits add up to (``api.kafka.write.timeout.ms`` + 2 x ``api.fresh.read.timeout.ms``) plus 10 s,
    at least 30 s."""
    if settings.api_request_timeout_ms > 0:
        return max(1, -(-settings.api_request_timeout_ms // 1000))
    return max(30, _request_bound_s(settings) + 10)


def _request_bound_s(settings: Settings) -> int:
    """The longest a write request's bounded waits add up to, in seconds: the fresh read before the write and the
    check after it (``api.fresh.read.timeout.ms`` each) and Kafka's acknowledgment (``api.kafka.write.timeout.ms``)."""
    return (settings.api_kafka_write_timeout_ms + 2 * settings.api_fresh_read_timeout_ms) // 1000


def tls_options(settings: Settings) -> dict[str, Any]:
    """gunicorn's TLS settings from ``api.tls.*`` (none without ``api.tls.cert.file``): the server's certificate and
    key and, for mutual TLS, the clients' CA and whether a client certificate is ``requested`` or ``required``."""
    if not settings.api_tls_cert_file:
        return {}
    options: dict[str, Any] = {"certfile": settings.api_tls_cert_file, "keyfile": settings.api_tls_key_file}
    client_auth = tls_client_auth(settings)
    if settings.api_tls_ca_file:
        options["ca_certs"] = settings.api_tls_ca_file
    options["cert_reqs"] = _CERT_REQS[client_auth]
    return options


_CERT_REQS = {
    ClientAuth.NONE: ssl.CERT_NONE,
    ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
    ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
}


def ssl_context(settings: Settings) -> ssl.SSLContext | None:
    """The same TLS settings as an :class:`ssl.SSLContext` (for the development server)."""
    options = tls_options(settings)
    if not options:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=options.get("ca_certs"))
    context.load_cert_chain(options["certfile"], options["keyfile"])
    context.verify_mode = options["cert_reqs"]
    return context


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="connect-state-api", description=__doc__.split("\n\n")[0])
    add_config_arguments(parser)
    parser.add_argument("--workers", type=int, default=1, help="gunicorn worker processes (default 1)")
    parser.add_argument("--threads", type=int, default=None, help="threads per worker (default: api.threads)")
    parser.add_argument("--dev", action="store_true", help="use Flask's development server instead of gunicorn")
    return parser


def with_threads(settings: Settings, threads: int | None) -> Settings:
    """``settings`` with ``api.threads`` from ``--threads`` (when given), and ``api.write.concurrency`` lowered below
    it when it is not (writes must leave a thread to reads; one thread leaves none, said in the log)."""
    if threads is not None:
        settings = settings.with_overrides(**{"api.threads": str(threads)})
    threads = max(1, settings.api_threads)
    if settings.api_write_concurrency < threads:
        return settings
    slots = max(1, threads - 1)
    log.warning(
        "api.write.concurrency=%d with %d thread(s): writes may hold at most %d at once%s",
        settings.api_write_concurrency,
        threads,
        slots,
        "" if threads > 1 else " (one thread: a slow write still stalls reads; give the API more threads)",
    )
    return settings.with_overrides(**{"api.threads": str(threads), "api.write.concurrency": str(slots)})


def _stop_on_signal(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_dev(app: Flask, settings: Settings) -> int:
    """Flask's development server (threaded, no reloader) until SIGINT/SIGTERM. Both handlers are installed here: a
    process started with SIGINT ignored (a background job of a script, a pytest-xdist worker's child) would otherwise
    never see Python's KeyboardInterrupt."""
    previous = {sig: signal.signal(sig, _stop_on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        app.run(
            host=settings.api_host,
            port=settings.api_port,
            threaded=True,
            use_reloader=False,
            ssl_context=ssl_context(settings),
        )
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        audit_trail(app).summarise(every=True)
        close_app(app)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``connect-state-api``."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = settings_from_args(args)
    except ConnectStateError as err:
        print(f"connect-state-api: {err}", file=sys.stderr)
        return 2
    settings = with_threads(settings, args.threads)
    try:
        app = create_app(settings)
    except ConnectStateError as err:  # e.g. UnprotectedApiError: exposed without authentication
        print(f"connect-state-api: {err}", file=sys.stderr)
        return 2
    log.info(
        "connect-state API on %s://%s (delta.root %s)",
        "https" if settings.api_tls_cert_file else "http",
        bind_address(settings.api_host, settings.api_port),
        settings.delta_root,
    )
    if args.dev:
        return run_dev(app, settings)
    try:
        ApiServer(app, gunicorn_options(settings, app, args.workers)).run()
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        close_app(app)
    return 0


if __name__ == "__main__":
    sys.exit(main())
