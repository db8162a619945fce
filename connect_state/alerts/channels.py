"""Where notifications go (``alerts.channels``) and how a failed delivery is retried (pure).

``alerts.channels`` names each channel with its kind and URL, comma-separated: ``ops=webhook:https://hooks.example/x,
team=slack:https://hooks.slack.com/services/...,am=alertmanager:http://alertmanager:9093``. A URL is a secret where it
carries a token (Slack's): give it as ``${file:/etc/connect-state/secrets.properties:slack.url}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

from connect_state.core.errors import ConfigError


class ChannelKind(StrEnum):
    WEBHOOK = "webhook"
    """A generic JSON body (:func:`connect_state.alerts.render.webhook_body`), POSTed to the URL."""
    SLACK = "slack"
    """Slack's incoming-webhook body: ``{"text": ..., "blocks": [...]}``."""
    ALERTMANAGER = "alertmanager"
    """Alertmanager's ``POST /api/v2/alerts`` (the URL is Alertmanager's base, ``http://host:9093``)."""


ALERTMANAGER_PATH = "/api/v2/alerts"


@dataclass(frozen=True)
class Channel:
    name: str
    kind: ChannelKind
    url: str

    @property
    def endpoint(self) -> str:
        """The URL a notification is POSTed to."""
        if self.kind == ChannelKind.ALERTMANAGER and not self.url.rstrip("/").endswith(ALERTMANAGER_PATH):
            return self.url.rstrip("/") + ALERTMANAGER_PATH
        return self.url


def parse_channels(values: Mapping[str, str], key: str = "alerts.channels") -> list[Channel]:
    """The channels of ``alerts.channels`` (name -> ``kind:url``); a wrong kind or URL is a ConfigError naming it."""
    channels = []
    for name, value in values.items():
        kind_text, sep, url = value.partition(":")
        try:
            kind = ChannelKind(kind_text.strip().lower())
        except ValueError:
            allowed = ", ".join(k.value for k in ChannelKind)
            raise ConfigError(f"{key}: channel {name}: expected <kind>:<url> with kind one of {allowed}") from None
        parts = urlsplit(url.strip())
        if not sep or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"{key}: channel {name}: expected an http or https URL after {kind_text}:")
        channels.append(Channel(name, kind, url.strip()))
    return channels


@dataclass(frozen=True)
class Backoff:
    """After the ``n``-th failed attempt the next is ``first_ms * 2**(n-1)``, at most ``max_ms``, later;
    ``max_attempts`` 0: retried until delivered (a delivery is never given up)."""

    first_ms: int
    max_ms: int
    max_attempts: int = 0

    def __post_init__(self) -> None:
        if self.first_ms <= 0:
            raise ConfigError("alerts.retry.backoff.ms: expected milliseconds above 0")
        if self.max_ms < self.first_ms:
            raise ConfigError("alerts.retry.backoff.max.ms: expected at least alerts.retry.backoff.ms")
        if self.max_attempts < 0:
            raise ConfigError("alerts.retry.max.attempts: expected 0 (no limit) or more")

    def delay_ms(self, attempts: int) -> int:
        return min(self.max_ms, self.first_ms * 2 ** max(0, min(attempts - 1, 40)))

    def given_up(self, attempts: int) -> bool:
        return self.max_attempts > 0 and attempts >= self.max_attempts
