"""Authentication and roles (issue 13): who is asking, and whether their roles allow the route, before any view runs.

**Credentials** (configured in ``conf/``, read once when the app is created):

* HTTP basic against ``api.auth.basic.file`` (``user:hash`` lines, :mod:`connect_state.api.passwords`);
* bearer tokens against ``api.auth.token.file`` (``principal:hash`` lines);
* a client certificate (mutual TLS, ``api.tls.client.auth`` ``requested`` or ``required``, served by
  :mod:`connect_state.api.server`): the subject's common name is the principal.

Without any of them the API is open, as before: every request is the principal ``anonymous`` with every role. That is
allowed on a loopback address only; bound to any other address :func:`check_exposure` refuses to start
(:class:`UnprotectedApiError`) unless ``api.auth.anonymous=true`` says so explicitly. With authentication on, a request
without credentials answers 401 (with ``WWW-Authenticate``), or, with ``api.auth.anonymous=true``, is ``anonymous``
with the roles the roles file grants that name.

**Roles** (:class:`Role`): ``read``, ``operate`` (stop, pause, resume, restart, topics reset), ``offsets`` (PATCH and
DELETE offsets), ``delete`` (DELETE connector) and ``admin`` (all of them). :data:`ROUTE_ROLES` is the one table of
the role each route needs; :func:`check_routes` refuses an app with a route missing from it. ``api.auth.roles.file``
grants roles, one principal a line::

    alice: admin
    ops-bot: operate@orders-* read
    *: read                        # every authenticated principal

A grant ``role@glob`` holds only for connectors whose name matches the glob (routes without a connector need a grant
without one). Without a roles file every authenticated principal is ``admin``, and ``anonymous`` (where
``api.auth.anonymous=true`` lets a request without credentials in) is ``read`` only: no one unauthenticated gets a
role nobody granted (issue 33). The start-up warning says who has what. A refusal answers 403 before the view runs:
nothing is written.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from flask import Flask, g, request

from connect_state.api.errors import ConnectRestException
from connect_state.api.passwords import hash_token, verify_password
from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings

__all__ = [
    "ANONYMOUS",
    "PUBLIC_ENDPOINTS",
    "ROUTE_ROLES",
    "AuthConfig",
    "AuthMethod",
    "ClientAuth",
    "Grant",
    "Principal",
    "Role",
    "UnguardedRouteError",
    "UnprotectedApiError",
    "check_exposure",
    "check_routes",
    "current_principal",
    "init_app",
    "is_loopback",
    "load_auth_config",
    "parse_grants",
    "tls_client_auth",
]

log = logging.getLogger(__name__)

ANONYMOUS = "anonymous"
REALM = "connect-state"
EXTENSION = "connect_state.auth"


class Role(StrEnum):
    READ = "read"
    OPERATE = "operate"
    OFFSETS = "offsets"
    DELETE = "delete"
    ADMIN = "admin"


class AuthMethod(StrEnum):
    ANONYMOUS = "anonymous"
    BASIC = "basic"
    TOKEN = "token"
    CERTIFICATE = "certificate"


class ClientAuth(StrEnum):
    """``api.tls.client.auth``, as Connect's listeners' ``ssl.client.auth``."""

    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"


class UnprotectedApiError(ConfigError):
    """The API would be reachable beyond loopback without authentication, and anonymous access was not asked for."""


class UnguardedRouteError(ConfigError):
    """A route of the app has no entry in :data:`ROUTE_ROLES` (every route must say which role it needs)."""


#: The role each route (Flask endpoint) needs: the one place that decides it.
ROUTE_ROLES: Mapping[str, Role] = {
    # Connect's API, reads
    "connect_read.server_info": Role.READ,
    "connectors.list_connectors": Role.READ,
    "connect_read.get_connector": Role.READ,
    "connect_read.get_connector_config": Role.READ,
    "connect_read.get_task_configs": Role.READ,
    "connect_read.get_task_status": Role.READ,
    "connectors.get_connector_status": Role.READ,
    "topics.get_active_topics": Role.READ,
    "offsets.get_connector_offsets": Role.READ,
    # Connect's API, writes
    "connectors.stop_connector": Role.OPERATE,
    "connectors.pause_connector": Role.OPERATE,
    "connectors.resume_connector": Role.OPERATE,
    "restart.restart_connector": Role.OPERATE,
    "restart.restart_task": Role.OPERATE,
    "topics.reset_active_topics": Role.OPERATE,
    "offsets.alter_connector_offsets": Role.OFFSETS,
    "offsets.reset_connector_offsets": Role.OFFSETS,
    "connectors.delete_connector": Role.DELETE,
    # connect-state's own reads
    "deletions.get_deletions": Role.READ,
    "heartbeats.get_heartbeats": Role.READ,
    "history.get_events": Role.READ,
    "history.get_config_versions": Role.READ,
    "history.get_offsets_as_of": Role.READ,
    "history.get_partition_history": Role.READ,
    "history.get_topics_as_of": Role.READ,
    "history.get_rejected_records": Role.READ,
    "history.get_topic_connectors": Role.READ,
    "data_loss.get_data_loss": Role.READ,
    "leases.get_leases": Role.READ,
    "leases.get_lease": Role.READ,
    "metrics.metrics": Role.READ,
    "openapi.openapi_json": Role.READ,
    "dashboard.page": Role.READ,
    "dashboard.timeline": Role.READ,
    "static": Role.READ,
    "audit.get_audit": Role.ADMIN,
}

#: Routes anyone may call: the liveness/readiness probe.
PUBLIC_ENDPOINTS: frozenset[str] = frozenset({"health.health"})


@dataclass(frozen=True)
class Grant:
    """A role, for every connector or (``pattern``) only for connectors whose name matches the glob."""

    role: Role
    pattern: str | None = None

    def allows(self, role: Role, connector: str | None) -> bool:
        if self.role not in (role, Role.ADMIN):
            return False
        return self.pattern is None or (connector is not None and fnmatchcase(connector, self.pattern))


ALL_ROLES: tuple[Grant, ...] = (Grant(Role.ADMIN),)
#: What ``anonymous`` may do when credentials are configured and no roles file says otherwise.
ANONYMOUS_DEFAULT: tuple[Grant, ...] = (Grant(Role.READ),)


@dataclass(frozen=True)
class Principal:
    """Who a request is: a name, how it proved it, and its grants."""

    name: str
    method: AuthMethod
    grants: tuple[Grant, ...] = ()

    def allows(self, role: Role, connector: str | None) -> bool:
        return any(grant.allows(role, connector) for grant in self.grants)


def _read_lines(path: str, setting: str) -> list[tuple[int, str]]:
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{setting}: cannot read {path}: {err.strerror or err}") from None
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()  # "#" starts a comment
        if line:
            lines.append((number, line))
    return lines


def _credentials(path: str, setting: str, user_ids: bool = False) -> dict[str, str]:
    """``name:hash`` lines: name -> hash. A token's hash has no colon; a password's may (Werkzeug's), and a user-id
    has none (RFC 7617), so ``user_ids`` split at the first."""
    entries: dict[str, str] = {}
    for number, line in _read_lines(path, setting):
        name, sep, stored = line.partition(":") if user_ids else line.rpartition(":")
        if not sep or not name.strip() or not stored.strip():
            raise ConfigError(f"{setting}: line {number} of {path}: expected <name>:<hash>")
        entries[name.strip()] = stored.strip()
    return entries


def parse_grants(lines: Iterable[tuple[int, str]], source: str = "api.auth.roles.file") -> dict[str, tuple[Grant, ...]]:
    """``principal: role[@glob] ...`` lines (see the module docstring): principal -> grants."""
    grants: dict[str, tuple[Grant, ...]] = {}
    for number, line in lines:
        name, sep, roles = line.rpartition(":")
        if not sep or not name.strip():
            raise ConfigError(f"{source}: line {number}: expected <principal>: <role>[@<connector glob>] ...")
        parsed = []
        for item in roles.split():
            role, _, pattern = item.partition("@")
            try:
                parsed.append(Grant(Role(role.strip().lower()), pattern.strip() or None))
            except ValueError:
                known = ", ".join(r.value for r in Role)
                raise ConfigError(f"{source}: line {number}: unknown role {role!r} (roles: {known})") from None
        grants[name.strip()] = grants.get(name.strip(), ()) + tuple(parsed)
    return grants


@dataclass
class AuthConfig:
    """The credentials and grants of one app (read from the files once, when the app is created)."""

    passwords: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)  # token hash -> principal
    certificates: bool = False
    grants: dict[str, tuple[Grant, ...]] | None = None  # None: every authenticated principal is admin
    anonymous: bool = False
    _verified: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def enabled(self) -> bool:
        """Whether any kind of credential is configured (otherwise the API is open)."""
        return bool(self.passwords or self.tokens or self.certificates)

    def grants_of(self, name: str) -> tuple[Grant, ...]:
        if self.grants is None:
            return ANONYMOUS_DEFAULT if name == ANONYMOUS else ALL_ROLES
        return self.grants.get(name, ()) + (self.grants.get("*", ()) if name != ANONYMOUS else ())

    def describe(self) -> str:
        """Who has what, in a line: what the start-up warning says."""
        if not self.enabled:
            return "no credentials are configured: every request is anonymous with the role admin"
        if self.grants is None:
            who = "api.auth.roles.file is not set: every authenticated principal has the role admin"
        else:
            who = "roles as api.auth.roles.file grants them"
        if not self.anonymous:
            return f"{who}; a request without credentials answers 401"
        granted = ", ".join(
            sorted(str(g.role) + (f"@{g.pattern}" if g.pattern else "") for g in self.grants_of(ANONYMOUS))
        )
        return f"{who}; a request without credentials is anonymous with {granted or 'no role'} (api.auth.anonymous)"

    def check_password(self, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s; a verified pair is remembered (as a digest) so that a client sending
        it with every request pays the slow hash once."""
        stored = self.passwords.get(user)
        if stored is None:
            return False
        digest = hashlib.sha256(f"{user}\0{password}\0{stored}".encode()).hexdigest()
        with self._lock:
            if digest in self._verified:
                return True
        if not verify_password(password, stored):
            return False
        with self._lock:
            if len(self._verified) > 1024:
                self._verified.clear()
            self._verified.add(digest)
        return True


def load_auth_config(settings: Settings) -> AuthConfig:
    """The app's :class:`AuthConfig` from the settings and the files they name (a missing file: ConfigError)."""
    client_auth = tls_client_auth(settings)
    tokens: dict[str, str] = {}
    if settings.api_auth_token_file:
        for name, stored in _credentials(settings.api_auth_token_file, "api.auth.token.file").items():
            tokens[stored] = name
    roles_file, basic_file = settings.api_auth_roles_file, settings.api_auth_basic_file
    return AuthConfig(
        passwords=_credentials(basic_file, "api.auth.basic.file", user_ids=True) if basic_file else {},
        tokens=tokens,
        certificates=client_auth != ClientAuth.NONE,
        grants=parse_grants(_read_lines(roles_file, "api.auth.roles.file")) if roles_file else None,
        anonymous=settings.api_auth_anonymous,
    )


def tls_client_auth(settings: Settings) -> ClientAuth:
    """``api.tls.client.auth``, checked against the other TLS settings (:class:`ConfigError` when they disagree)."""
    try:
        client_auth = ClientAuth(settings.api_tls_client_auth.strip().lower())
    except ValueError:
        known = ", ".join(c.value for c in ClientAuth)
        got = settings.api_tls_client_auth
        raise ConfigError(f"api.tls.client.auth: expected one of {known}, got {got!r}") from None
    if bool(settings.api_tls_cert_file) != bool(settings.api_tls_key_file):
        raise ConfigError("api.tls.cert.file and api.tls.key.file: set both (TLS) or neither")
    if client_auth != ClientAuth.NONE and not (settings.api_tls_ca_file and settings.api_tls_cert_file):
        raise ConfigError(
            f"api.tls.client.auth={client_auth} needs TLS (api.tls.cert.file, api.tls.key.file) and the clients' CA "
            "(api.tls.ca.file)"
        )
    return client_auth


def is_loopback(host: str) -> bool:
    """Whether ``api.host`` is a loopback address (or ``localhost``)."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(settings: Settings, config: AuthConfig) -> None:
    """Refuse (:class:`UnprotectedApiError`) to serve beyond loopback without authentication unless
    ``api.auth.anonymous=true``."""
    if is_loopback(settings.api_host) or config.enabled or config.anonymous:
        return
    raise UnprotectedApiError(
        f"api.host={settings.api_host} is not a loopback address and no authentication is configured: anyone who "
        "reaches the port could stop, delete and rewrite connectors. Configure api.auth.basic.file, "
        "api.auth.token.file or mutual TLS (api.tls.client.auth), or set api.auth.anonymous=true to serve it open "
        "on purpose."
    )


def check_routes(app: Flask) -> None:
    """Every endpoint of ``app`` has a role in :data:`ROUTE_ROLES` or is public (:class:`UnguardedRouteError`)."""
    missing = sorted({rule.endpoint for rule in app.url_map.iter_rules()} - set(ROUTE_ROLES) - PUBLIC_ENDPOINTS)
    if missing:
        raise UnguardedRouteError(f"routes without a role in connect_state.api.auth.ROUTE_ROLES: {', '.join(missing)}")


# --- per request --------------------------------------------------------------------------------------------------


def _challenge(config: AuthConfig) -> str:
    schemes = []
    if config.passwords:
        schemes.append(f'Basic realm="{REALM}", charset="UTF-8"')
    if config.tokens:
        schemes.append(f'Bearer realm="{REALM}"')
    return ", ".join(schemes) or f'Bearer realm="{REALM}"'


def _unauthorized(config: AuthConfig, message: str) -> ConnectRestException:
    return ConnectRestException(401, message, headers={"WWW-Authenticate": _challenge(config)})


def _from_header(config: AuthConfig, header: str) -> Principal:
    """The principal of the ``Authorization`` header, as Werkzeug parses it (``request.authorization``)."""
    scheme, credentials = header.strip().partition(" ")[0], request.authorization
    if scheme.lower() == "basic" and config.passwords:
        if credentials is None:  # not base64, or not UTF-8
            raise _unauthorized(config, "Malformed basic credentials")
        user = credentials.username or ""
        if not config.check_password(user, credentials.password or ""):
            raise _unauthorized(config, "Invalid user name or password")
        return Principal(user, AuthMethod.BASIC, config.grants_of(user))
    if scheme.lower() == "bearer" and config.tokens and credentials is not None:
        name = config.tokens.get(hash_token(credentials.token or ""))
        if name is None:
            raise _unauthorized(config, "Invalid bearer token")
        return Principal(name, AuthMethod.TOKEN, config.grants_of(name))
    raise _unauthorized(config, f"Unsupported authorization scheme {scheme!r}")


def peer_certificate(environ: Mapping[str, Any]) -> dict[str, Any] | None:
    """The verified client certificate of the request's TLS connection (gunicorn's or Werkzeug's socket), or None."""
    sock = environ.get("gunicorn.socket") or environ.get("werkzeug.socket")
    getpeercert = getattr(sock, "getpeercert", None)
    if getpeercert is None:
        return None
    try:
        cert = getpeercert()
    except ValueError:  # the handshake is not done
        return None
    return cert or None


def certificate_principal_name(cert: Mapping[str, Any]) -> str | None:
    """The subject's common name of a certificate as ``ssl.SSLSocket.getpeercert()`` gives it."""
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def authenticate(config: AuthConfig) -> Principal:
    """The request's principal (401 for wrong or missing credentials where they are needed)."""
    header = request.headers.get("Authorization")
    if header and (config.passwords or config.tokens):
        return _from_header(config, header)
    if config.certificates:
        cert = peer_certificate(request.environ)
        name = certificate_principal_name(cert) if cert else None
        if name:
            return Principal(name, AuthMethod.CERTIFICATE, config.grants_of(name))
    if not config.enabled:
        return Principal(ANONYMOUS, AuthMethod.ANONYMOUS, ALL_ROLES)
    if config.anonymous:
        return Principal(ANONYMOUS, AuthMethod.ANONYMOUS, config.grants_of(ANONYMOUS))
    raise _unauthorized(config, "Authentication required")


def forbidden_message(principal: Principal, role: Role, connector: str | None) -> str:
    target = f" on connector {connector}" if connector is not None else ""
    return f"{principal.name} may not {request.method} {request.path}: it needs the role {role}{target}"


def current_principal() -> Principal | None:
    """The principal of the current request, once authenticated."""
    return g.get("principal")


def required_role() -> Role | None:
    """The role the current request's route needs (None: public, or no route matched)."""
    return g.get("required_role")


def init_app(app: Flask, settings: Settings) -> AuthConfig:
    """Load the credentials, refuse an unprotected exposure, and check every request before its view."""
    config = load_auth_config(settings)
    check_exposure(settings, config)
    if config.enabled and (config.grants is None or config.anonymous):
        log.warning("Who has what: %s", config.describe())
    if (config.passwords or config.tokens) and not settings.api_tls_cert_file and not is_loopback(settings.api_host):
        log.warning("Passwords and tokens cross the network in clear: serve TLS (api.tls.cert.file, api.tls.key.file)")
    app.extensions[EXTENSION] = config

    def authorize() -> None:
        endpoint = request.url_rule.endpoint if request.url_rule is not None else None
        if endpoint is None or endpoint in PUBLIC_ENDPOINTS:
            return  # unknown routes answer 404; the probe needs no credentials
        role = ROUTE_ROLES.get(endpoint, Role.ADMIN)  # a route added after check_routes: admins only
        g.required_role = role
        principal = authenticate(config)
        g.principal = principal
        connector = (request.view_args or {}).get("connector")
        if not principal.allows(role, connector):
            raise ConnectRestException(403, forbidden_message(principal, role, connector))

    app.before_request(authorize)
    return config
