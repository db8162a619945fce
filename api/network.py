"""The API's network edge (issue 33 finding 9): where it listens, judged by address rather than by name, and whose
address a request comes from behind a proxy.

* **Exposure**: without authentication the API may listen on loopback only. :func:`check_exposure` judges every
  address ``api.host`` resolves to (``localhost.``, ``0``, a host name: whatever the resolver answers, not how the
  setting is spelled), and :func:`check_listening` judges the sockets the server actually listens on (gunicorn's,
  after it bound them: a socket handed over by systemd, ``LISTEN_FDS``, included), so that neither a name resolving
  elsewhere nor an inherited socket serves an open API beyond loopback. Either refuses with
  :class:`UnprotectedApiError` unless ``api.auth.anonymous=true`` asked for it.
* **Proxies**: ``api.trusted.proxies`` (default 0) is the number of reverse proxies in front of the API. With N > 0
  the client's address is the N-th from the right of ``X-Forwarded-For`` (werkzeug's ``ProxyFix``), so the audit and
  the failed-login limits see the client, not the proxy; with 0 the header is ignored (a client cannot name its own
  address).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings

__all__ = [
    "UnprotectedApiError",
    "check_exposure",
    "check_listening",
    "init_proxies",
    "is_loopback",
    "resolved_addresses",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UnprotectedApiError(ConfigError):
    """The API would be reachable beyond loopback without authentication, and anonymous access was not asked for."""


def resolved_addresses(host: str) -> list[IPAddress]:
    """The addresses ``host`` (an address, or a name the resolver knows) stands for; empty when it resolves to none."""
    literal = host.strip().strip("[]")
    if not literal:
        return []  # gunicorn binds every interface
    try:
        return [ipaddress.ip_address(literal.split("%", 1)[0])]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(literal, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` resolves to is a loopback address (and it resolves to one at least)."""
    addresses = resolved_addresses(host)
    return bool(addresses) and all(address.is_loopback for address in addresses)


def _refusal(where: str) -> UnprotectedApiError:
    return UnprotectedApiError(
        f"{where} is not a loopback address and no authentication is configured: anyone who reaches the port could "
        "stop, delete and rewrite connectors. Configure api.auth.basic.file, api.auth.token.file or mutual TLS "
        "(api.tls.client.auth), or set api.auth.anonymous=true to serve it open on purpose."
    )


def check_exposure(settings: Settings, protected: bool) -> None:
    """Refuse (:class:`UnprotectedApiError`) to serve ``api.host`` unless every address it resolves to is loopback or
    the API is ``protected`` (authentication configured, or ``api.auth.anonymous=true``)."""
    if protected or is_loopback(settings.api_host):
        return
    resolved = ", ".join(sorted({str(address) for address in resolved_addresses(settings.api_host)})) or "nothing"
    shown = settings.api_host if resolved == settings.api_host else f"{settings.api_host} (resolved: {resolved})"
    raise _refusal(f"api.host={shown}")


def _is_loopback_socket(address: Any) -> bool:
    """Whether a ``getsockname()`` answer is a loopback address (a Unix socket's path: local, so yes)."""
    if isinstance(address, (str, bytes)):
        return True
    try:
        return ipaddress.ip_address(str(address[0]).split("%", 1)[0]).is_loopback
    except (ValueError, IndexError, TypeError):
        return False


def check_listening(addresses: Iterable[Any], protected: bool) -> None:
    """Refuse (:class:`UnprotectedApiError`) sockets bound beyond loopback (their ``getsockname()``) unless the API is
    ``protected``."""
    if protected:
        return
    exposed = [address for address in addresses if not _is_loopback_socket(address)]
    if exposed:
        shown = ", ".join(f"{address[0]}:{address[1]}" for address in exposed)
        raise _refusal(f"the API's socket bound to {shown}")


def init_proxies(app: Flask, settings: Settings) -> None:
    """Trust ``X-Forwarded-For`` from ``api.trusted.proxies`` proxies (werkzeug's ``ProxyFix``); 0: not at all."""
    hops = settings.api_trusted_proxies
    if hops < 0:
        raise ConfigError(f"api.trusted.proxies: expected 0 or more proxies, got {hops}")
    if hops:
        # X-Forwarded-For only: the Host and scheme stay the request's own (api.trusted.hosts, the Origin check)
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=0)  # type: ignore[method-assign]
