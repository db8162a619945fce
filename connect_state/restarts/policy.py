"""Auto-restart policy: who may be restarted, when, and how often (pure: no Spark, Kafka, Delta or Flask).

* **Opt-in.** ``restart.auto.connectors`` (comma-separated globs, default empty: off) names the connectors the job may
  restart. A connector's own config may only tighten what the operator allowed, with keys Connect ignores
  (:data:`CONNECTOR_PREFIX`): ``connect-state.restart.auto.enabled=false`` turns it off for that connector (``true``
  never turns it on), ``connect-state.restart.auto.max.attempts`` may lower the maximum, and the two backoffs and the
  reset period may only grow. A connector value that is not a number, or would loosen the policy, is ignored and said
  so (:attr:`Tightened.ignored`); it never fails the job.
* **Backoff** (Strimzi's ``n² + n`` minutes): after ``n`` restarts of the current series the next one waits
  ``(n² + n) × restart.auto.backoff.base.ms`` from the previous request (base 60000: immediately, then 2, 6, 12, 20, 30
  ... minutes), at most ``restart.auto.backoff.max.ms``.
* **Maximum.** At most ``restart.auto.max.attempts`` restarts in a series; then the job gives up until the count is
  reset.
* **Reset.** A failure that starts ``restart.auto.reset.after.ms`` or more after the outcome of the series' last restart
  (the connector went that long without needing one) starts a new series at 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings

__all__ = ["CONNECTOR_PREFIX", "RestartPolicy", "Tightened", "parse_globs", "policy_from_settings"]

#: The prefix of a connector's own keys (Connect passes unknown keys to the connector, which ignores them).
CONNECTOR_PREFIX = "connect-state."
ENABLED_KEY = "restart.auto.enabled"
MAX_ATTEMPTS_KEY = "restart.auto.max.attempts"
BACKOFF_BASE_KEY = "restart.auto.backoff.base.ms"
BACKOFF_MAX_KEY = "restart.auto.backoff.max.ms"
RESET_AFTER_KEY = "restart.auto.reset.after.ms"
CONNECTORS_KEY = "restart.auto.connectors"


def parse_globs(text: str) -> tuple[str, ...]:
    """``a,b*, c`` -> ``("a", "b*", "c")`` (blanks dropped)."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


@dataclass(frozen=True)
class Tightened:
    """The policy for one connector after its own config (:meth:`RestartPolicy.for_connector`): None when that config
    turned auto-restart off; ``ignored`` says which of its keys were not applied and why."""

    policy: RestartPolicy | None
    ignored: tuple[str, ...] = ()


@dataclass(frozen=True)
class RestartPolicy:
    """The operator's auto-restart settings (milliseconds)."""

    connectors: tuple[str, ...] = ()
    backoff_base_ms: int = 60_000
    backoff_max_ms: int = 3_600_000
    max_attempts: int = 10
    reset_after_ms: int = 3_600_000

    def __post_init__(self) -> None:
        checks = (
            (BACKOFF_BASE_KEY, self.backoff_base_ms, 0),
            (BACKOFF_MAX_KEY, self.backoff_max_ms, 0),
            (MAX_ATTEMPTS_KEY, self.max_attempts, 1),
            (RESET_AFTER_KEY, self.reset_after_ms, 0),
        )
        for key, value, least in checks:
            if value < least:
                raise ConfigError(
                    f"{key}: expected {'at least 1' if least else 'milliseconds, 0 or more'}, got {value}"
                )
        if self.backoff_max_ms < self.backoff_base_ms:
            raise ConfigError(
                f"{BACKOFF_MAX_KEY}: expected at least {BACKOFF_BASE_KEY} ({self.backoff_base_ms}), "
                f"got {self.backoff_max_ms}"
            )

    @property
    def enabled(self) -> bool:
        """Whether any connector is opted in."""
        return bool(self.connectors)

    def opted_in(self, connector: str) -> bool:
        """Whether ``connector`` matches one of the operator's globs."""
        return any(fnmatchcase(connector, pattern) for pattern in self.connectors)

    def delay_ms(self, previous: int) -> int:
        """The wait before the next restart after ``previous`` restarts of the series: ``(n² + n) × base``, capped."""
        return min(self.backoff_max_ms, (previous * previous + previous) * self.backoff_base_ms)

    def for_connector(self, config: Mapping[str, str] | None) -> Tightened:
        """This policy as ``config`` (the connector's own) tightens it; never loosened (see the module docstring)."""
        own = {
            k[len(CONNECTOR_PREFIX) :]: str(v).strip()
            for k, v in (config or {}).items()
            if k.startswith(CONNECTOR_PREFIX)
        }
        ignored: list[str] = []
        enabled = own.get(ENABLED_KEY)
        if enabled is not None:
            if enabled.lower() == "false":
                return Tightened(None)
            if enabled.lower() != "true":
                ignored.append(f"{CONNECTOR_PREFIX}{ENABLED_KEY}={enabled!r}: expected true or false")
        values = {
            "max_attempts": self.max_attempts,
            "backoff_base_ms": self.backoff_base_ms,
            "backoff_max_ms": self.backoff_max_ms,
            "reset_after_ms": self.reset_after_ms,
        }
        # key, field, whether a larger value is tighter
        for key, name, larger_is_tighter in (
            (MAX_ATTEMPTS_KEY, "max_attempts", False),
            (BACKOFF_BASE_KEY, "backoff_base_ms", True),
            (BACKOFF_MAX_KEY, "backoff_max_ms", True),
            (RESET_AFTER_KEY, "reset_after_ms", True),
        ):
            if key not in own:
                continue
            current = values[name]
            try:
                value = int(own[key])
            except ValueError:
                ignored.append(f"{CONNECTOR_PREFIX}{key}={own[key]!r}: expected an integer")
                continue
            tighter = value >= current if larger_is_tighter else value <= current
            if not tighter or value < (1 if name == "max_attempts" else 0):
                ignored.append(f"{CONNECTOR_PREFIX}{key}={value}: may only tighten the operator's {current}")
                continue
            values[name] = value
        policy = RestartPolicy(
            connectors=self.connectors,
            backoff_base_ms=values["backoff_base_ms"],
            backoff_max_ms=max(values["backoff_max_ms"], values["backoff_base_ms"]),
            max_attempts=values["max_attempts"],
            reset_after_ms=values["reset_after_ms"],
        )
        return Tightened(policy, tuple(ignored))


def policy_from_settings(settings: Settings) -> RestartPolicy:
    """The operator's policy (``restart.auto.*``); a value out of range is a :class:`ConfigError` naming its key."""
    return RestartPolicy(
        connectors=parse_globs(settings.restart_auto_connectors),
        backoff_base_ms=settings.restart_auto_backoff_base_ms,
        backoff_max_ms=settings.restart_auto_backoff_max_ms,
        max_attempts=settings.restart_auto_max_attempts,
        reset_after_ms=settings.restart_auto_reset_after_ms,
    )
