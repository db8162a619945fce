"""The contexts file: where each API is and how to reach it (kcctl's ``~/.kcctl``, kubectl's kubeconfig).

YAML, by default ``$XDG_CONFIG_HOME/connect-state/contexts.yaml`` (``~/.config/...``), else the path in
``CONNECT_STATE_CLI_CONFIG`` or ``--config``::

    current-context: prod
    contexts:
      prod:
        url: https://connect-state.example:8090
        username: alice
        password: ${env:CONNECT_STATE_PASSWORD}
        ca-file: /etc/ssl/our-ca.pem
      local:
        url: http://127.0.0.1:8090

Credentials are HTTP Basic (``username`` + ``password``) or a bearer ``token``; TLS takes ``ca-file``, a client
certificate (``cert-file``, ``key-file`` unless the key is in the certificate's file) and ``insecure`` (no
verification); relative paths are from the contexts file's folder. Any string may hold ``${env:NAME}`` or
``${file:path:key}`` references, resolved when a command uses the context
(:func:`connect_state.core.settings.resolve_references`, as the API resolves its settings), so the file need not hold
a secret. The file is written private (mode 0600, its folder 0700), atomically. Without a file, or with
no context in it, the commands talk to the API's default address (:data:`DEFAULT_URL`) without credentials.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from connect_state.cli.errors import UsageProblem
from connect_state.core.errors import ConfigError
from connect_state.core.settings import resolve_references

CONFIG_ENV = "CONNECT_STATE_CLI_CONFIG"
CLUSTER_ENV = "CONNECT_STATE_CLI_CLUSTER"
DEFAULT_URL = "http://127.0.0.1:8090"
"""The API's default address (``api.host``, ``api.port``), used when no context is defined."""
DEFAULT_CONTEXT = "default"
HIDDEN = "[hidden]"
CURRENT_KEY = "current-context"
CONTEXTS_KEY = "contexts"
_ONLY_REFERENCES = re.compile(r"(\$\{[^}]*\})+")


@dataclass(frozen=True)
class Context:
    """One context; field names are the file's keys with ``-`` for ``_``."""

    url: str
    cluster: str | None = None
    username: str | None = None
    password: str | None = None
    token: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False

    SECRETS = ("password", "token")

    @classmethod
    def from_yaml(cls, name: str, entry: object) -> Context:
        if not isinstance(entry, Mapping):
            raise UsageProblem(f"context {name}: expected a mapping of settings")
        known = {f.name.replace("_", "-"): f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in entry.items():
            if key not in known:
                raise UsageProblem(f"context {name}: unknown setting {key!r} (known: {', '.join(known)})")
            wanted = bool if key == "insecure" else str
            if value is not None and not isinstance(value, wanted):
                raise UsageProblem(f"context {name}: {key} must be {'true or false' if wanted is bool else 'text'}")
            values[known[key]] = value
        if not values.get("url"):
            raise UsageProblem(f"context {name}: url is missing")
        context = cls(**values)
        context.check(name)
        return context

    def check(self, name: str) -> None:
        """The settings go together: Basic needs both halves, Basic and a token exclude each other, a key needs its
        certificate."""
        if (self.username is None) != (self.password is None):
            raise UsageProblem(f"context {name}: username and password go together")
        if self.username is not None and self.token is not None:
            raise UsageProblem(f"context {name}: choose Basic (username, password) or a token, not both")
        if self.key_file is not None and self.cert_file is None:
            raise UsageProblem(f"context {name}: key-file needs cert-file")

    def to_yaml(self) -> dict[str, object]:
        """The file's entry: the settings that are set."""
        entry: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value is not False:
                entry[f.name.replace("_", "-")] = value
        return entry

    def shown(self) -> dict[str, object]:
        """The entry with its secrets hidden (a value made only of references is shown: it holds no secret)."""
        entry = self.to_yaml()
        for key in self.SECRETS:
            value = entry.get(key)
            if isinstance(value, str) and not _ONLY_REFERENCES.fullmatch(value):
                entry[key] = HIDDEN
        return entry

    def auth(self) -> str:
        """How the context authenticates, for listings."""
        if self.username is not None:
            return f"basic ({self.username})"
        if self.token is not None:
            return "token"
        return "certificate" if self.cert_file is not None else "none"

    def resolved(self, name: str, base: Path, environ: Mapping[str, str]) -> Context:
        """The context with its references resolved, its files found (relative paths from ``base``, the contexts
        file's folder) and its URL checked."""
        values: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str):
                try:
                    value = resolve_references(f"context {name}: {f.name.replace('_', '-')}", value, environ, base)
                except ConfigError as err:
                    raise UsageProblem(str(err)) from None
            values[f.name] = value
        for key in ("ca_file", "cert_file", "key_file"):  # relative to the contexts file, as kubeconfig's
            if values[key] is not None:
                path = base / Path(values[key]).expanduser()
                if not path.is_file():
                    raise UsageProblem(f"context {name}: {key.replace('_', '-')} {path} is not a file")
                values[key] = str(path)
        context = replace(self, **values)
        if not re.fullmatch(r"https?://[^/\s]+(/\S*)?", context.url):
            raise UsageProblem(
                f"context {name}: url must be http://host[:port] or https://host[:port], not {context.url!r}"
            )
        return context


@dataclass
class ContextsFile:
    """The file's contents; ``save`` writes them back."""

    path: Path
    current: str | None = None
    contexts: dict[str, Context] = field(default_factory=dict)

    def named(self, name: str) -> Context:
        if name not in self.contexts:
            known = ", ".join(sorted(self.contexts)) or "none"
            raise UsageProblem(f"unknown context {name!r} in {self.path} (known: {known})")
        return self.contexts[name]

    def chosen(self, name: str | None) -> tuple[str, Context]:
        """The context ``name`` (``--context``), else the current one, else the API's default address when the file
        defines none."""
        if name is not None:
            return name, self.named(name)
        if self.current is not None:
            return self.current, self.named(self.current)
        if self.contexts:
            raise UsageProblem(f"no current context in {self.path}: connect-state context use NAME, or --context NAME")
        return DEFAULT_CONTEXT, Context(url=DEFAULT_URL)

    def save(self) -> None:
        """Write the file atomically, private (0600) in a private folder (0700 when created here)."""
        body: dict[str, object] = {}
        if self.current is not None:
            body[CURRENT_KEY] = self.current
        body[CONTEXTS_KEY] = {name: context.to_yaml() for name, context in sorted(self.contexts.items())}
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)  # mode 0600
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                yaml.safe_dump(body, out, sort_keys=False, default_flow_style=False)
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def default_path(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/connect-state/contexts.yaml``, ``~/.config/...`` when that is not set."""
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "connect-state" / "contexts.yaml"


def _yaml_problem(err: yaml.YAMLError) -> str:
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        return f"{err.problem} (line {err.problem_mark.line + 1})"
    return str(err).splitlines()[0]


def load(path: Path) -> ContextsFile:
    """The file at ``path``; an empty one when it does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ContextsFile(path)
    except OSError as err:
        raise UsageProblem(f"cannot read {path}: {err.strerror or err}") from None
    try:
        body = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise UsageProblem(f"{path} is not YAML: {_yaml_problem(err)}") from None
    if not isinstance(body, dict):
        body = {CONTEXTS_KEY: body}
    entries, current = body.get(CONTEXTS_KEY) or {}, body.get(CURRENT_KEY)
    if not isinstance(entries, dict) or not (current is None or isinstance(current, str)):
        raise UsageProblem(f"{path}: expected {CURRENT_KEY}: NAME and {CONTEXTS_KEY}: a mapping of NAME to settings")
    contexts = {str(name): Context.from_yaml(str(name), entry) for name, entry in entries.items()}
    return ContextsFile(path, current, contexts)
