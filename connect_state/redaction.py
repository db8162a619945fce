"""Secrets out of configs shown by the API: one pure function, patterns configurable (issue 14; issue 13 extends it).

A config key is secret when any pattern (a regular expression, searched case-insensitively) matches it; its value is
shown as :data:`REDACTED` (Connect's own placeholder for ``PASSWORD`` values in logs). The patterns default to
:data:`DEFAULT_PATTERNS`; ``api.redact.patterns`` replaces them (comma-separated regular expressions).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["DEFAULT_PATTERNS", "REDACTED", "compile_patterns", "is_secret", "redact_config"]

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
)


def compile_patterns(patterns: Iterable[str] | str | None = None) -> tuple[re.Pattern[str], ...]:
    """The patterns compiled; a string is comma-separated; None gives :data:`DEFAULT_PATTERNS`."""
    if patterns is None:
        patterns = DEFAULT_PATTERNS
    elif isinstance(patterns, str):
        patterns = [p.strip() for p in patterns.split(",") if p.strip()]
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


def is_secret(key: str, patterns: Iterable[re.Pattern[str]]) -> bool:
    return any(p.search(key) for p in patterns)


def redact_config(
    config: Mapping[str, object] | None, patterns: Iterable[re.Pattern[str]] | None = None
) -> dict[str, object] | None:
    """A copy of ``config`` whose secret keys' values are :data:`REDACTED` (null values stay null)."""
    if config is None:
        return None
    compiled = tuple(patterns) if patterns is not None else compile_patterns()
    return {k: (REDACTED if v is not None and is_secret(k, compiled) else v) for k, v in config.items()}
