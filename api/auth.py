"""Authentication and roles (issue 13): who is asking, and whether their roles allow the route, before any view runs.

**Credentials** (configured in ``conf/``, read once when the app is created):

* HTTP basic against ``api.auth.basic.file`` (``user:hash`` lines, :mod:`connect_state.api.passwords`);
* bearer tokens against ``api.auth.token.file`` (``principal:hash`` lines);
* a client certificate (mutual TLS, ``api.tls.client.auth`` ``requested`` or ``required``, served by
  :mod:`connect_state.api.server`): the subject's common name is the principal, granted roles as ``cert:<CN>``
  (:func:`roles_name`): a CA that signs a certificate for any CN must not hand out a Basic or Bearer user's grants.

Without any of them the API is open, as before: every request is the principal ``anonymous`` with every role. That is
allowed on a loopback address only; bound to any other address (judged by what the name resolves to and by the
bound socket) :mod:`connect_state.api.network` refuses to start (``UnprotectedApiError``) unless
``api.auth.anonymous=true`` says so explicitly. With authentication on, a request without credentials answers 401
(with ``WWW-Authenticate``), or, with ``api.auth.anonymous=true``, is ``anonymous`` with the roles the roles file
grants that name.

**Failed logins** (:mod:`connect_state.security.login_throttle`): a wrong password, an unknown user, a bad token or
malformed credentials count against the claimed name and the client's address; past
``api.auth.failures.per.principal`` or ``api.auth.failures.per.address`` failures in ``api.auth.failures.window.ms``
a request with credentials for that name or from that address answers 429 with ``Retry-After`` before they are
checked (:class:`TooManyFailedLogins`). An unknown user's password is checked against a dummy hash of the same method
(:func:`connect_state.api.passwords.dummy_hash`): it costs what a known user's does.

**Roles** (:class:`Role`): ``read``, ``operate`` (stop, pause, resume, restart, topics reset), ``offsets`` (PATCH and
DELETE offsets, their restore as of a time), ``delete`` (DELETE connector) and ``admin`` (all of them, and bringing
back a deleted connector).
:data:`ROUTE_ROLES` is the one table of
the role each route needs; :func:`check_routes` refuses an app with a route missing from it. ``api.auth.roles.file``
grants roles, one principal a line::

    alice: admin
    ops-bot: operate@orders-* read
    cert:backup-job: offsets       # the client certificate whose subject CN is backup-job
    *: read                        # every authenticated principal

A grant ``role@glob`` holds only for connectors whose name matches the glob (routes without a connector need a grant
without one). A grant ``<cluster>/role[@glob]`` holds only in the Connect cluster of that id (issue 37: a request
under ``/clusters/<id>/...``, or on Connect's plain paths for the default cluster); ``billing/operate@orders-*``. The
routes over every cluster (:data:`FLEET_ENDPOINTS`: ``GET /clusters``, ``GET /fleet/connectors``) need their role in
one cluster at least and answer for the clusters the principal holds it in (:func:`clusters_allowed`); those of the
whole deployment (:data:`DEPLOYMENT_ENDPOINTS`: ``GET /audit``, ``GET /metrics``) need it in every cluster; moving a
connector needs ``admin`` in both clusters.

Without a roles file every authenticated principal is ``admin``, and ``anonymous`` (where
``api.auth.anonymous=true`` lets a request without credentials in) is ``read`` only: no one unauthenticated gets a
role nobody granted (issue 33). The start-up warning says who has what. A refusal answers 403 before the view runs:
nothing is written.
"""

from __future__ import annotations

import hashlib
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
from connect_state.api.network import check_exposure, is_loopback
from connect_state.api.passwords import dummy_hash, hash_token, verify_password
from connect_state.api.resources import every_resources, request_cluster_id, whole_path
from connect_state.core.clusters import clusters
from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings
from connect_state.security.login_throttle import LimitKind, LoginThrottle, Throttled

__all__ = [
    "ANONYMOUS",
    "CERTIFICATE_PREFIX",
    "DEPLOYMENT_ENDPOINTS",
    "FLEET_ENDPOINTS",
    "PUBLIC_ENDPOINTS",
    "ROUTE_ROLES",
    "AuthConfig",
    "AuthMethod",
    "AuthenticationFailed",
    "ClientAuth",
    "Grant",
    "Principal",
    "Role",
    "TooManyFailedLogins",
    "UnguardedRouteError",
    "allowed_here",
    "auth_config",
    "check_routes",
    "clusters_allowed",
    "current_principal",
    "init_app",
    "load_auth_config",
    "login_throttle",
    "parse_grants",
    "require_in",
    "roles_name",
    "tls_client_auth",
]

log = logging.getLogger(__name__)

ANONYMOUS = "anonymous"
REALM = "connect-state"
EXTENSION = "connect_state.auth"
THROTTLE_EXTENSION = "connect_state.auth.throttle"
#: How the roles file names a client certificate's principal: ``cert:<CN>``.
CERTIFICATE_PREFIX = "cert:"


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


class UnguardedRouteError(ConfigError):
    """A route of the app has no entry in :data:`ROUTE_ROLES` (every route must say which role it needs)."""


class AuthenticationFailed(ConnectRestException):
    """401: credentials missing where they are needed, malformed, or wrong (with ``WWW-Authenticate``)."""


class TooManyFailedLogins(ConnectRestException):
    """429: too many failed logins for the claimed name or from the client's address lately (with ``Retry-After``)."""

    def __init__(self, throttled: Throttled) -> None:
        who = "for the user" if throttled.kind == LimitKind.PRINCIPAL else "from the address"
        super().__init__(
            429,
            f"Too many failed logins {who} {throttled.subject}: try again in {throttled.retry_after_s} s",
            headers={"Retry-After": str(throttled.retry_after_s)},
        )
        self.throttled = throttled


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
    "offsets.restore_connector_offsets": Role.OFFSETS,
    "connectors.delete_connector": Role.DELETE,
    "revive.restore_connector": Role.ADMIN,
    "moves.move_connector": Role.ADMIN,
    "fleet.fleet_connectors": Role.READ,
    "alerts.silence_connector": Role.OPERATE,  # issue 35: mute a connector's alerts, and lift it
    "alerts.lift_silence": Role.OPERATE,  # writes a whole connector config, as POST /connectors would
    # connect-state's own reads
    "deletions.get_deletions": Role.READ,
    "restarts.get_connector_restarts": Role.READ,
    "restarts.get_restarts": Role.READ,
    "heartbeats.get_heartbeats": Role.READ,
    "verdicts.get_verdict": Role.READ,
    "verdicts.list_verdicts": Role.READ,
    "history.get_events": Role.READ,
    "availability.get_connector_availability": Role.READ,
    "availability.get_availability": Role.READ,
    "history.get_config_versions": Role.READ,
    "history.get_offsets_as_of": Role.READ,
    "history.get_partition_history": Role.READ,
    "history.get_topics_as_of": Role.READ,
    "history.get_rejected_records": Role.READ,
    "history.get_topic_connectors": Role.READ,
    "data_loss.get_data_loss": Role.READ,
    "leases.get_leases": Role.READ,
    "leases.get_lease": Role.READ,
    "alerts.get_alerts": Role.READ,
    "alerts.get_deliveries": Role.READ,
    "alerts.get_silences": Role.READ,
    "alerts.get_connector_silences": Role.READ,
    "clusters.list_clusters": Role.READ,
    "metrics.metrics": Role.READ,
    "openapi.openapi_json": Role.READ,
    "dashboard.page": Role.READ,
    "dashboard.timeline": Role.READ,
    "static": Role.READ,
    "audit.get_audit": Role.ADMIN,
}

#: Routes over every cluster (issue 37): allowed with their role in any cluster; they answer for the clusters the
#: principal holds it in (:func:`clusters_allowed`).
FLEET_ENDPOINTS: frozenset[str] = frozenset({"clusters.list_clusters", "fleet.fleet_connectors"})

#: Routes of the whole deployment rather than of a cluster (the audit of every cluster's writes, the API's metrics):
#: their role is needed in every cluster.
DEPLOYMENT_ENDPOINTS: frozenset[str] = frozenset({"audit.get_audit", "metrics.metrics"})

#: Routes anyone may call: the liveness/readiness probe.
PUBLIC_ENDPOINTS: frozenset[str] = frozenset({"health.health"})


@dataclass(frozen=True)
class Grant:
    """A role, for every connector or (``pattern``) only for connectors whose name matches the glob, in every cluster
    or (``cluster``) only in the cluster of that id."""

    role: Role
    pattern: str | None = None
    cluster: str | None = None

    def allows(self, role: Role, connector: str | None, cluster: str | None = None) -> bool:
        """Whether it grants ``role`` on ``connector`` in ``cluster`` (None: in any cluster)."""
        if self.role not in (role, Role.ADMIN):
            return False
        if self.cluster is not None and cluster is not None and self.cluster != cluster:
            return False
        return self.pattern is None or (connector is not None and fnmatchcase(connector, self.pattern))

    def __str__(self) -> str:
        scope = f"{self.cluster}/" if self.cluster else ""
        return scope + str(self.role) + (f"@{self.pattern}" if self.pattern else "")


ALL_ROLES: tuple[Grant, ...] = (Grant(Role.ADMIN),)
#: What ``anonymous`` may do when credentials are configured and no roles file says otherwise.
ANONYMOUS_DEFAULT: tuple[Grant, ...] = (Grant(Role.READ),)


def roles_name(method: AuthMethod, name: str) -> str:
    """The name the roles file grants a principal by: a client certificate's CN as ``cert:<CN>`` (certificates and
    Basic/Bearer users are different namespaces: the same name does not share grants), any other name as it is."""
    return f"{CERTIFICATE_PREFIX}{name}" if method == AuthMethod.CERTIFICATE else name


@dataclass(frozen=True)
class Principal:
    """Who a request is: a name, how it proved it, and its grants."""

    name: str
    method: AuthMethod
    grants: tuple[Grant, ...] = ()

    @property
    def roles_name(self) -> str:
        """The name the roles file grants it by (:func:`roles_name`)."""
        return roles_name(self.method, self.name)

    def allows(self, role: Role, connector: str | None, cluster: str | None = None) -> bool:
        """Whether a grant holds ``role`` on ``connector`` in ``cluster`` (None: in any one cluster at least)."""
        return any(grant.allows(role, connector, cluster) for grant in self.grants)


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


def parse_grants(
    lines: Iterable[tuple[int, str]], source: str = "api.auth.roles.file", cluster_ids: Iterable[str] | None = None
) -> dict[str, tuple[Grant, ...]]:
    """``principal: [cluster/]role[@glob] ...`` lines (see the module docstring): principal -> grants. A cluster that
    is not one of ``cluster_ids`` (when given) is a ConfigError."""
    known_clusters = None if cluster_ids is None else list(cluster_ids)
    grants: dict[str, tuple[Grant, ...]] = {}
    for number, line in lines:
        name, sep, roles = line.rpartition(":")
        if not sep or not name.strip():
            raise ConfigError(f"{source}: line {number}: expected <principal>: <role>[@<connector glob>] ...")
        parsed = []
        for item in roles.split():
            head, _, pattern = item.partition("@")
            cluster, _, role = head.rpartition("/")
            if cluster and known_clusters is not None and cluster not in known_clusters:
                raise ConfigError(
                    f"{source}: line {number}: unknown cluster {cluster!r} in {item!r} (clusters: "
                    f"{', '.join(known_clusters)})"
                )
            try:
                parsed.append(Grant(Role(role.strip().lower()), pattern.strip() or None, cluster or None))
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
    unknown_user_hash: str = ""  # what an unknown user's password is checked against (load_auth_config sets it)
    _verified: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def enabled(self) -> bool:
        """Whether any kind of credential is configured (otherwise the API is open)."""
        return bool(self.passwords or self.tokens or self.certificates)

    def grants_of(self, name: str, method: AuthMethod) -> tuple[Grant, ...]:
        """The grants of the principal ``name`` authenticated by ``method`` (a certificate's by ``cert:<CN>``)."""
        anonymous = method == AuthMethod.ANONYMOUS
        if self.grants is None:
            return ANONYMOUS_DEFAULT if anonymous else ALL_ROLES
        if anonymous:
            return self.grants.get(ANONYMOUS, ())
        return self.grants.get(roles_name(method, name), ()) + self.grants.get("*", ())

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
        granted = ", ".join(sorted(str(g) for g in self.grants_of(ANONYMOUS, AuthMethod.ANONYMOUS)))
        return f"{who}; a request without credentials is anonymous with {granted or 'no role'} (api.auth.anonymous)"

    def check_password(self, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s; a verified pair is remembered (as a digest) so that a client sending
        it with every request pays the slow hash once. An unknown ``user`` costs the same hash: the password is checked
        against :attr:`unknown_user_hash` (and fails whatever it is)."""
        stored = self.passwords.get(user)
        if stored is None:
            verify_password(password, self.unknown_user_hash or dummy_hash(()))
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
    passwords = _credentials(basic_file, "api.auth.basic.file", user_ids=True) if basic_file else {}
    cluster_ids = [cluster.id for cluster in clusters(settings)]
    return AuthConfig(
        passwords=passwords,
        tokens=tokens,
        certificates=client_auth != ClientAuth.NONE,
        grants=parse_grants(_read_lines(roles_file, "api.auth.roles.file"), cluster_ids=cluster_ids)
        if roles_file
        else None,
        anonymous=settings.api_auth_anonymous,
        unknown_user_hash=dummy_hash(passwords.values()) if passwords else "",
    )


def load_login_throttle(settings: Settings) -> LoginThrottle:
    """The failed-login limits of ``api.auth.failures.*`` (:class:`ConfigError` for a negative one)."""
    try:
        return LoginThrottle(
            settings.api_auth_failures_window_ms / 1000,
            settings.api_auth_failures_per_principal,
            settings.api_auth_failures_per_address,
            settings.api_auth_failures_tracked,
        )
    except ValueError as err:
        raise ConfigError(f"api.auth.failures.*: {err}") from None


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


def _unauthorized(config: AuthConfig, message: str) -> AuthenticationFailed:
    return AuthenticationFailed(401, message, headers={"WWW-Authenticate": _challenge(config)})


def _verified(config: AuthConfig, scheme: str) -> Principal:
    """The principal of the ``Authorization`` header, as Werkzeug parses it (``request.authorization``)."""
    credentials = request.authorization
    if scheme.lower() == "basic" and config.passwords:
        if credentials is None:  # not base64, or not UTF-8
            raise _unauthorized(config, "Malformed basic credentials")
        user = credentials.username or ""
        if not config.check_password(user, credentials.password or ""):
            raise _unauthorized(config, "Invalid user name or password")
        return Principal(user, AuthMethod.BASIC, config.grants_of(user, AuthMethod.BASIC))
    if scheme.lower() == "bearer" and config.tokens and credentials is not None:
        name = config.tokens.get(hash_token(credentials.token or ""))
        if name is None:
            raise _unauthorized(config, "Invalid bearer token")
        return Principal(name, AuthMethod.TOKEN, config.grants_of(name, AuthMethod.TOKEN))
    raise _unauthorized(config, f"Unsupported authorization scheme {scheme!r}")


def _from_header(config: AuthConfig, throttle: LoginThrottle, header: str) -> Principal:
    """The header's principal, unless the claimed name or the client's address failed too often lately (429 before
    anything is checked); a failure is counted against both."""
    scheme = header.strip().partition(" ")[0]
    credentials = request.authorization if scheme.lower() == "basic" else None
    claimed = credentials.username if credentials is not None else None
    throttled = throttle.refused(claimed, request.remote_addr)
    if throttled is not None:
        raise TooManyFailedLogins(throttled)
    try:
        return _verified(config, scheme)
    except AuthenticationFailed:
        throttle.failed(claimed, request.remote_addr)
        raise


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


def authenticate(config: AuthConfig, throttle: LoginThrottle) -> Principal:
    """The request's principal (401 for wrong or missing credentials where they are needed, 429 after too many
    failures)."""
    header = request.headers.get("Authorization")
    if header and (config.passwords or config.tokens):
        return _from_header(config, throttle, header)
    if config.certificates:
        cert = peer_certificate(request.environ)
        name = certificate_principal_name(cert) if cert else None
        if name:
            return Principal(name, AuthMethod.CERTIFICATE, config.grants_of(name, AuthMethod.CERTIFICATE))
    if not config.enabled:
        return Principal(ANONYMOUS, AuthMethod.ANONYMOUS, ALL_ROLES)
    if config.anonymous:
        return Principal(ANONYMOUS, AuthMethod.ANONYMOUS, config.grants_of(ANONYMOUS, AuthMethod.ANONYMOUS))
    raise _unauthorized(config, "Authentication required")


def forbidden_message(principal: Principal, role: Role, connector: str | None) -> str:
    """The 403's message; it names the principal as the roles file would grant it (``cert:<CN>``)."""
    target = f" on connector {connector}" if connector is not None else ""
    path = whole_path()
    return f"{principal.roles_name} may not {request.method} {path}: it needs the role {role}{target}"


def route_allows(principal: Principal, endpoint: str, role: Role, connector: str | None) -> bool:
    """Whether ``principal`` may call the current request's route (``endpoint``, needing ``role``): in the request's
    cluster; for a route of the whole deployment in every cluster; for a route over every cluster in one at least
    (its view keeps those)."""
    if endpoint in DEPLOYMENT_ENDPOINTS:
        return all(principal.allows(role, connector, cluster) for cluster in every_resources())
    if endpoint in FLEET_ENDPOINTS:
        return principal.allows(role, connector)
    return principal.allows(role, connector, request_cluster_id())


def allowed_here(role: Role, connector: str | None = None) -> bool:
    """Whether the current request's principal holds ``role`` (on ``connector``) in the request's cluster."""
    principal = current_principal()
    return principal is not None and principal.allows(role, connector, request_cluster_id())


def clusters_allowed(cluster_ids: Iterable[str], role: Role = Role.READ) -> list[str]:
    """Those of ``cluster_ids`` the current request's principal holds ``role`` in (for a connector-less route): what
    a route over every cluster answers for. Every one when no principal was authenticated (a public route)."""
    principal = current_principal()
    return [cluster for cluster in cluster_ids if principal is None or principal.allows(role, None, cluster)]


def require_in(cluster: str, role: Role, connector: str | None) -> None:
    """403 unless the current request's principal holds ``role`` on ``connector`` in ``cluster`` too (a request that
    also acts in another cluster than its own: moving a connector)."""
    principal = current_principal()
    if principal is not None and not principal.allows(role, connector, cluster):
        target = f" on connector {connector}" if connector is not None else ""
        raise ConnectRestException(
            403,
            f"{principal.roles_name} may not {request.method} {whole_path()}: it needs "
            f"the role {role}{target} in cluster {cluster}",
        )


def current_principal() -> Principal | None:
    """The principal of the current request, once authenticated."""
    return g.get("principal")


def required_role() -> Role | None:
    """The role the current request's route needs (None: public, or no route matched)."""
    return g.get("required_role")


def auth_config(app: Flask) -> AuthConfig:
    """The credentials and grants of ``app``."""
    return app.extensions[EXTENSION]


def login_throttle(app: Flask) -> LoginThrottle:
    """The failed-login limits of ``app``."""
    return app.extensions[THROTTLE_EXTENSION]


def init_app(app: Flask, settings: Settings) -> AuthConfig:
    """Load the credentials, refuse an unprotected exposure, and check every request before its view."""
    config = load_auth_config(settings)
    throttle = load_login_throttle(settings)
    check_exposure(settings, protected=config.enabled or config.anonymous)
    if config.enabled and (config.grants is None or config.anonymous):
        log.warning("Who has what: %s", config.describe())
    named = config.grants or {}
    if config.certificates and named and not any(name.startswith(CERTIFICATE_PREFIX) for name in named):
        log.warning(
            "api.auth.roles.file grants no client certificate by name: a certificate's principal is granted by a "
            "'cert:<CN>: <roles>' line (a plain name is a Basic or Bearer user's)"
        )
    if (config.passwords or config.tokens) and not settings.api_tls_cert_file and not is_loopback(settings.api_host):
        log.warning("Passwords and tokens cross the network in clear: serve TLS (api.tls.cert.file, api.tls.key.file)")
    app.extensions[EXTENSION] = config
    app.extensions[THROTTLE_EXTENSION] = throttle

    def authorize() -> None:
        endpoint = request.url_rule.endpoint if request.url_rule is not None else None
        if endpoint is None or endpoint in PUBLIC_ENDPOINTS:
            return  # unknown routes answer 404; the probe needs no credentials
        role = ROUTE_ROLES.get(endpoint, Role.ADMIN)  # a route added after check_routes: admins only
        g.required_role = role
        principal = authenticate(config, throttle)
        g.principal = principal
        connector = (request.view_args or {}).get("connector")
        if not route_allows(principal, endpoint, role, connector):
            raise ConnectRestException(403, forbidden_message(principal, role, connector))

    app.before_request(authorize)
    return config
