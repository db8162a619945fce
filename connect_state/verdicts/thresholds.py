"""The verdicts' thresholds: the settings' ``verdict.*`` keys, overridden per connector by a glob in the settings
(``verdict.overrides``), and tightened (never loosened) by a ``connect-state.verdict.*`` key in the connector's own
config, which Connect ignores.

Defaults fit Connect's own: a sink commits its offsets every ``offset.flush.interval.ms`` (60 s) and a source flushes
its offsets as often, so 5 minutes without a commit is five missed commits; more than 3 failures or restarts in 10
minutes is a flap; any record sent to a dead-letter queue within 5 minutes is a drop.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from enum import StrEnum

from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings

__all__ = ["CONNECTOR_PREFIX", "Threshold", "Thresholds", "thresholds_for"]

#: The prefix of a threshold key in a connector's own config (Connect ignores unknown keys).
CONNECTOR_PREFIX = "connect-state.verdict."


class Threshold(StrEnum):
    """A threshold's key, after ``verdict.`` (settings) or ``connect-state.verdict.`` (a connector's config)."""

    SINK_STALL_MS = "sink.stall.ms"
    SOURCE_STALL_MS = "source.stall.ms"
    FLAPPING_COUNT = "flapping.count"
    FLAPPING_WINDOW_MS = "flapping.window.ms"
    DROPPING_RECORDS = "dropping.records"
    DROPPING_WINDOW_MS = "dropping.window.ms"


#: Thresholds a larger value tightens (a longer window sees more); for the others a smaller value is tighter.
_LARGER_IS_TIGHTER = frozenset({Threshold.FLAPPING_WINDOW_MS, Threshold.DROPPING_WINDOW_MS})
#: Thresholds that may be 0 (a count: "more than 0"); the others must be positive.
_MAY_BE_ZERO = frozenset({Threshold.FLAPPING_COUNT, Threshold.DROPPING_RECORDS})


@dataclass(frozen=True)
class Thresholds:
    """One connector's thresholds (field names are the :class:`Threshold` keys with ``_`` for ``.``)."""

    sink_stall_ms: int = 300_000
    source_stall_ms: int = 300_000
    flapping_count: int = 3
    flapping_window_ms: int = 600_000
    dropping_records: int = 0
    dropping_window_ms: int = 300_000

    def get(self, key: Threshold) -> int:
        return int(getattr(self, _field(key)))

    def with_value(self, key: Threshold, value: int) -> Thresholds:
        return replace(self, **{_field(key): value})

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_settings(cls, settings: Settings) -> Thresholds:
        """The settings' ``verdict.*`` thresholds; a bad one (or a bad ``verdict.overrides`` entry) is a
        :class:`ConfigError` naming the key."""
        base = cls()
        for key in Threshold:
            base = base.with_value(key, parse_threshold(f"verdict.{key}", key, str(getattr(settings, _setting(key)))))
        for pattern_key, value in settings.verdict_overrides.items():
            parse_override(pattern_key, value)
        return base


def _field(key: Threshold) -> str:
    return key.value.replace(".", "_")


def _setting(key: Threshold) -> str:
    return "verdict_" + _field(key)


def parse_threshold(where: str, key: Threshold, text: str) -> int:
    """``text`` as the value of ``key``: an integer, >= 0 for a count, > 0 for a time; else a :class:`ConfigError`
    that names ``where``."""
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"{where}: expected an integer, got {text!r}") from None
    least = 0 if key in _MAY_BE_ZERO else 1
    if value < least:
        raise ConfigError(f"{where}: expected an integer >= {least}, got {value}")
    return value


def parse_override(pattern_key: str, value: str) -> tuple[str, Threshold, int]:
    """One ``verdict.overrides`` entry, ``<connector glob>:<threshold>=<value>``: (glob, threshold, value); a bad one
    is a :class:`ConfigError`."""
    pattern, sep, key_text = pattern_key.rpartition(":")
    allowed = ", ".join(key.value for key in Threshold)
    if not sep or not pattern:
        raise ConfigError(f"verdict.overrides: expected <connector glob>:<threshold>=<value>, got {pattern_key!r}")
    try:
        key = Threshold(key_text.strip())
    except ValueError:
        raise ConfigError(f"verdict.overrides: unknown threshold {key_text!r} (one of {allowed})") from None
    return pattern.strip(), key, parse_threshold(f"verdict.overrides {pattern_key}", key, value)


def tighter(key: Threshold, current: int, proposed: int) -> bool:
    return proposed > current if key in _LARGER_IS_TIGHTER else proposed < current


def thresholds_for(
    base: Thresholds, overrides: Mapping[str, str], connector: str, config: Mapping[str, object] | None
) -> tuple[Thresholds, list[str]]:
    """``connector``'s thresholds: ``base``, then every ``verdict.overrides`` entry whose glob matches its name (in
    order; they may loosen or tighten), then its own ``connect-state.verdict.*`` keys where they tighten. The second
    value lists what was ignored in the connector's config (a looser value, a bad one, an unknown key): a connector
    cannot silence its own verdicts, and a bad key of one connector must not stop the judge."""
    result = base
    for pattern_key, value in overrides.items():
        pattern, key, number = parse_override(pattern_key, value)
        if fnmatch.fnmatchcase(connector, pattern):
            result = result.with_value(key, number)
    ignored: list[str] = []
    for name, raw in sorted((config or {}).items()):
        if not name.startswith(CONNECTOR_PREFIX):
            continue
        key_text = name[len(CONNECTOR_PREFIX) :]
        try:
            key = Threshold(key_text)
            number = parse_threshold(name, key, str(raw))
        except ValueError:
            ignored.append(f"{name}: unknown threshold")
            continue
        except ConfigError as err:
            ignored.append(str(err))
            continue
        if tighter(key, result.get(key), number):
            result = result.with_value(key, number)
        elif number != result.get(key):
            ignored.append(f"{name}={number}: looser than {result.get(key)}, a connector may only tighten")
    return result, ignored
