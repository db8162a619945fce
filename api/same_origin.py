"""What a web page may make a browser do to the API (issue 33 finding 2): nothing it could not do from this origin.

* **Writes from another origin** (POST, PUT, PATCH, DELETE) answer 403 before anything else runs: a browser says where
  a request comes from (``Sec-Fetch-Site``, and ``Origin`` on every cross-origin write), so a request whose
  ``Sec-Fetch-Site`` is neither ``same-origin`` nor ``none`` (typed by the user), or whose ``Origin`` is not this
  API's own scheme, host and port nor in ``api.allowed.origins``, is refused. A page on another port of the same host
  is same-site but not same-origin: refused too. A request with neither header (curl, kcctl, Terraform, any Connect
  client) is no browser's and goes on. This covers what a page could fire with the browser's credentials (Basic,
  a client certificate) and what a ``<form>`` or ``fetch(..., {mode: "no-cors"})`` could send to an open API.
* **DNS rebinding**: the ``Host`` header must name this API. ``api.trusted.hosts`` lists the names; left empty on a
  loopback address it is the loopback names (``localhost``, ``127.0.0.1``; on ``::1`` none, Werkzeug's list cannot
  match an IPv6 literal), so a page whose own name resolves to 127.0.0.1 gets 400; on another address it is whatever
  is configured (empty: any, as the credentials required there protect it).
* **Framing**: every answer says it may not be framed (``X-Frame-Options: DENY``, CSP ``frame-ancestors 'none'``) and
  the dashboard loads nothing but its own files (CSP ``default-src 'self'``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Flask, Response, request

from connect_state.api.errors import ConnectRestException
from connect_state.api.limits import WRITE_METHODS
from connect_state.api.network import is_loopback
from connect_state.core.settings import Settings

LOOPBACK_NAMES = ("localhost", "127.0.0.1")
#: ``Sec-Fetch-Site`` values of a request this origin (or the user, typing or bookmarking) made.
OWN_FETCH_SITES = frozenset({"same-origin", "none"})
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
}


def _names(value: str) -> list[str]:
    return [name.strip() for name in value.split(",") if name.strip()]


def trusted_hosts(settings: Settings) -> list[str]:
    """The ``Host`` names the API answers: ``api.trusted.hosts``, or on loopback the loopback names."""
    configured = _names(settings.api_trusted_hosts)
    if configured or not is_loopback(settings.api_host) or ":" in settings.api_host:
        return configured  # Werkzeug's list cannot match an IPv6 literal ([::1]): on ::1 the check stays off
    return list(LOOPBACK_NAMES)


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, lower-case, default ports left out (as browsers serialise ``Origin``)."""
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port is not None and parts.port != default else ""
    return f"{parts.scheme}://{host}{port}".lower()


def cross_origin_refusal(allowed: frozenset[str]) -> str | None:
    """Why the current request is a write from another origin (None: it is not)."""
    if request.method not in WRITE_METHODS:
        return None
    site = request.headers.get("Sec-Fetch-Site")
    origin = request.headers.get("Origin")
    if origin is not None and (origin == origin_of(request.host_url) or origin.lower() in allowed):
        return None
    if origin is not None:
        return f"a write from the web page of another origin ({origin}) is refused; api.allowed.origins allows one"
    if site is not None and site not in OWN_FETCH_SITES:
        return f"a write from a web page of another site (Sec-Fetch-Site: {site}) is refused"
    return None


def init_app(app: Flask, settings: Settings) -> None:
    """Refuse cross-origin writes and foreign ``Host`` names, and mark every answer unframeable; call before the
    authentication's hook, so a refusal does not depend on credentials."""
    hosts = trusted_hosts(settings)
    if hosts:
        app.config["TRUSTED_HOSTS"] = hosts
    allowed = frozenset(origin_of(origin) for origin in _names(settings.api_allowed_origins))

    def refuse_cross_origin_writes() -> None:
        reason = cross_origin_refusal(allowed)
        if reason is not None:
            raise ConnectRestException(403, reason)

    def security_headers(response: Response) -> Response:
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    app.before_request(refuse_cross_origin_writes)
    app.after_request(security_headers)
