"""Secrets out of configs shown by the API: the one home of redaction, pure, patterns configurable (issues 13, 14).

A config key is secret when any pattern (a regular expression, searched case-insensitively) matches it; its value is
shown as :data:`REDACTED` (Connect's own placeholder for ``PASSWORD`` values in logs), unless the value is only
ConfigProvider references (``${file:/etc/secrets.properties:db.password}``), which hold no secret and are shown as
they are. The patterns default to :data:`DEFAULT_PATTERNS`; ``api.redact.patterns`` replaces them (comma-separated
regular expressions; :func:`settings_patterns`).

The API applies it at its edge, to every answer that shows a connector config (the Connect read API, deletions,
history, events) and to the audit trail (:func:`redact_json`: any JSON, configs nested anywhere). The Delta tables keep
what the config topic holds: cleanup hooks need the real config.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from connect_state.settings import Settings

__all__ = [
    "DEFAULT_PATTERNS",
    "REDACTED",
    "compile_patterns",
    "is_provider_reference",
    "is_secret",
    "redact_config",
    "redact_json",
    "settings_patterns",
]

REDACTED = "[hidden]"

#: Keys that hold secrets in Connect and client configs: passwords (``ssl.keystore.password``,
#: ``connection.password``), secrets and tokens, JAAS configs (they embed credentials), API keys, private keys,
#: credentials.
DEFAULT_PATTERNS: tuple[str, ...] = (
    r"password",
    r"secret",
    r"token",
    r"jaas\.config",
    r"credential",
    r"(^|[._-])api[._-]?key($|[._-])",
    r"private[._-]?key",
    r"access[._-]?key",
    r"keystore\.key$",
)

#: ``ConfigTransformer.DEFAULT_PATTERN``: ``${provider:[path:]key}``.
_PROVIDER_REFERENCE = re.compile(r"\$\{[^}]*?:(?:[^}]*?:)?[^}]*?\}")


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


def is_secret(key: str, patterns: Iterable[re.Pattern[str]]) -> bool:
    return any(p.search(key) for p in patterns)


def is_provider_reference(value: object) -> bool:
    """Whether ``value`` is only ConfigProvider references (``${vault:secret/db:password}``), shown as they are."""
    return isinstance(value, str) and bool(value.strip()) and not _PROVIDER_REFERENCE.sub("", value).strip()


def _hidden(key: str, value: object, patterns: Iterable[re.Pattern[str]]) -> bool:
    return value is not None and is_secret(key, patterns) and not is_provider_reference(value)


def redact_config(
    config: Mapping[str, object] | None, patterns: Iterable[re.Pattern[str]] | None = None
) -> dict[str, object] | None:
    """A copy of ``config`` whose secret keys' values are :data:`REDACTED` (null values stay null)."""
    if config is None:
        return None
    compiled = tuple(patterns) if patterns is not None else compile_patterns()
    return {k: (REDACTED if _hidden(k, v, compiled) else v) for k, v in config.items()}


def redact_json(value: object, patterns: Iterable[re.Pattern[str]] | None = None) -> object:
    """A copy of any JSON value with every object's secret keys redacted, at any depth (request bodies, audit rows)."""
    compiled = tuple(patterns) if patterns is not None else compile_patterns()
    if isinstance(value, Mapping):
        return {k: (REDACTED if _hidden(str(k), v, compiled) else redact_json(v, compiled)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(item, compiled) for item in value]
    return value
