"""Secrets out of configs shown by the API: the one home of redaction, pure, patterns configurable (issues 13, 14, 33).

A config key is secret when

* Connect says so: the key is one that Kafka's or Debezium's ConfigDefs declare with type ``PASSWORD``
  (:func:`password_keys`, the checked-in list ``connect_state/password_keys.txt`` that ``scripts/password_keys.py``
  extracts from their jars), alone or after any prefix ending in a dot: Connect's ``producer.override.``,
  ``consumer.``, ``admin.``, MirrorMaker's ``source.cluster.``, ``target.admin.``, a converter's ``key.converter.``;
* or any pattern (a regular expression, searched case-insensitively) matches it: :data:`DEFAULT_PATTERNS`, which
  ``api.redact.patterns`` replaces (comma-separated regular expressions; :func:`settings_patterns`). The list of
  ``PASSWORD`` keys always applies.

Its value is shown as :data:`REDACTED` (Connect's own placeholder: ``Password.toString()``), unless the value is only
ConfigProvider references (``${file:/etc/secrets.properties:db.password}``), which hold no secret and are shown as
they are. In every other string value, credentials inside a URI are masked (:func:`mask_credentials`): the password of
``mongodb://user:pw@host`` and a secret query or connection-string parameter (``jdbc:mysql://h/db?password=pw``,
``jdbc:sqlserver://h;password=pw``).

The API applies it at its edge, to every answer that shows a connector config (the Connect read API, deletions,
history, events) and to the audit trail (:func:`redact_json`: any JSON, configs nested anywhere). The Delta tables keep
what the config topic holds: cleanup hooks need the real config.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib.resources import files
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from connect_state.core.settings import Settings

__all__ = [
    "DEFAULT_PATTERNS",
    "REDACTED",
    "compile_patterns",
    "is_password_key",
    "is_provider_reference",
    "is_secret",
    "mask_credentials",
    "password_keys",
    "redact_config",
    "redact_json",
    "redact_record_value",
    "settings_patterns",
]

REDACTED = "[hidden]"

#: Keys that hold secrets in Connect and plug-in configs beyond the ``PASSWORD`` keys: passwords and passphrases,
#: secrets and tokens, JAAS configs (they embed credentials), credentials, API, private and access keys, the Schema
#: Registry client's ``basic.auth.user.info`` (``user:password``, under ``key.converter.`` / ``value.converter.``),
#: the key file of Google's connectors (``keyfile``: a service account's JSON key), Azure's account key
#: (``azblob.account.key``), HMAC and encryption keys, ODBC's ``pwd``.
DEFAULT_PATTERNS: tuple[str, ...] = (
    r"password",
    r"passphrase",
    r"secret",
    r"token",
    r"jaas\.config",
    r"credential",
    r"(^|[._-])api[._-]?key($|[._-])",
    r"private[._-]?key",
    r"access[._-]?key",
    r"keystore\.key$",
    r"basic\.auth\.user\.info$",
    r"key[._-]?file",
    r"account[._-]?key$",
    r"hmac[._-]?key",
    r"encryption[._-]?key",
    r"(^|[._-])pwd$",
)

#: ``ConfigTransformer.DEFAULT_PATTERN``: ``${provider:[path:]key}``.
_PROVIDER_REFERENCE = re.compile(r"\$\{[^}]*?:(?:[^}]*?:)?[^}]*?\}")

#: A URI's ``scheme://user:password@``: the password runs to the authority's last ``@`` (an unescaped ``@`` in a
#: password is common enough), never past its end (``/``, ``?``, ``#``).
_URI_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*:)(?P<password>[^/?#\s]*)@")
#: A parameter of a URI's query (``?password=pw&...``) or of a connection string (``;password=pw;``).
_URI_PARAMETER = re.compile(r"(?P<head>[?&;]\s*(?P<name>[A-Za-z][\w.-]*)\s*=)(?P<value>[^&;#\s]*)")


def compile_patterns(patterns: Iterable[str] | str | None = None) -> tuple[re.Pattern[str], ...]:
    """The patterns compiled; a string is comma-separated; None gives :data:`DEFAULT_PATTERNS`."""
    if patterns is None:
        patterns = DEFAULT_PATTERNS
    elif isinstance(patterns, str):
        patterns = [p.strip() for p in patterns.split(",") if p.strip()]
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


@lru_cache(maxsize=16)
def _cached(text: str) -> tuple[re.Pattern[str], ...]:
    return compile_patterns(text or None)


def settings_patterns(settings: Settings) -> tuple[re.Pattern[str], ...]:
    """The patterns ``settings`` configure (``api.redact.patterns``; empty: :data:`DEFAULT_PATTERNS`)."""
    return _cached(settings.api_redact_patterns)


@lru_cache(maxsize=1)
def password_keys() -> frozenset[str]:
    """The config keys of type ``PASSWORD`` in Kafka's and Debezium's ConfigDefs (``password_keys.txt``: first word of
    each line not a comment)."""
    text = files("connect_state").joinpath("password_keys.txt").read_text(encoding="utf-8")
    return frozenset(line.split()[0] for line in text.splitlines() if line.strip() and not line.startswith("#"))


def is_password_key(key: str) -> bool:
    """Whether ``key`` is a ``PASSWORD`` key of :func:`password_keys`, alone or after a prefix ending in a dot."""
    keys = password_keys()
    if key in keys:
        return True
    dot = key.find(".")
    while dot != -1:
        if key[dot + 1 :] in keys:
            return True
        dot = key.find(".", dot + 1)
    return False


def is_secret(key: str, patterns: Iterable[re.Pattern[str]]) -> bool:
    return is_password_key(key) or any(p.search(key) for p in patterns)


def mask_credentials(text: str, patterns: Iterable[re.Pattern[str]] | None = None) -> str:
    """``text`` with the credentials of every URI in it :data:`REDACTED`: a user's password
    (``mongodb://user:[hidden]@host``) and the value of any query or connection-string parameter whose name is secret
    (``?password=[hidden]``). ConfigProvider references stay."""
    if "=" not in text and "@" not in text:
        return text
    compiled = tuple(patterns) if patterns is not None else compile_patterns()

    def password(match: re.Match[str]) -> str:
        if is_provider_reference(match["password"]):
            return match[0]
        return f"{match['head']}{REDACTED}@"

    def parameter(match: re.Match[str]) -> str:
        if not match["value"] or not is_secret(match["name"], compiled) or is_provider_reference(match["value"]):
            return match[0]
        return f"{match['head']}{REDACTED}"

    return _URI_PARAMETER.sub(parameter, _URI_PASSWORD.sub(password, text))


def is_provider_reference(value: object) -> bool:
    """Whether ``value`` is only ConfigProvider references (``${vault:secret/db:password}``), shown as they are."""
    return isinstance(value, str) and bool(value.strip()) and not _PROVIDER_REFERENCE.sub("", value).strip()


def _hidden(key: str, value: object, patterns: Iterable[re.Pattern[str]]) -> bool:
    return value is not None and is_secret(key, patterns) and not is_provider_reference(value)


def redact_config(
    config: Mapping[str, object] | None, patterns: Iterable[re.Pattern[str]] | None = None
) -> dict[str, object] | None:
    """A copy of ``config`` whose secret keys' values are :data:`REDACTED` (null values stay null), and credentials
    inside URIs masked in the others."""
    if config is None:
        return None
    compiled = tuple(patterns) if patterns is not None else compile_patterns()
    return {k: (REDACTED if _hidden(k, v, compiled) else _masked(v, compiled)) for k, v in config.items()}


def _masked(value: object, patterns: tuple[re.Pattern[str], ...]) -> object:
    return mask_credentials(value, patterns) if isinstance(value, str) else value


def redact_json(value: object, patterns: Iterable[re.Pattern[str]] | None = None) -> object:
    """A copy of any JSON value with every object's secret keys redacted and credentials inside URIs masked, at any
    depth (request bodies, audit rows)."""
    compiled = tuple(patterns) if patterns is not None else compile_patterns()
    if isinstance(value, Mapping):
        return {k: (REDACTED if _hidden(str(k), v, compiled) else redact_json(v, compiled)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(item, compiled) for item in value]
    return _masked(value, compiled)


def redact_record_value(
    value: bytes | None,
    patterns: Iterable[re.Pattern[str]] | None = None,
    *,
    secret_fields: Iterable[str] = (),
    withhold_unparsed: bool = True,
) -> tuple[bytes | None, bool]:
    """A quarantined record's value for a reader who may not see secrets, and whether it was changed.

    A JSON value (Connect's ``{"properties":{...}}``, any other) is :func:`redact_json`-ed, and the top-level
    ``secret_fields`` of an object hidden too (the session key's ``key``); the bytes are kept when nothing was
    hidden, else written as compact JSON (as Connect's JsonConverter writes). A value that is not JSON cannot be told
    apart: with ``withhold_unparsed`` it is withheld (None), else kept."""
    if value is None:
        return None, False
    try:
        parsed = json.loads(value)
    except ValueError:  # not UTF-8, not JSON
        return (None, True) if withhold_unparsed else (value, False)
    redacted = redact_json(parsed, patterns)
    hidden = frozenset(secret_fields)
    if isinstance(redacted, dict) and hidden:
        redacted = {k: (REDACTED if k in hidden and v is not None else v) for k, v in redacted.items()}
    if redacted == parsed:
        return value, False
    return json.dumps(redacted, separators=(",", ":"), ensure_ascii=False).encode("utf-8"), True
