"""No confused deputy: names a connector's config steers our privileged I/O to are checked before we act (issue 13).

connect-state writes and reads with its own Kafka principal, which may do more than a connector's author should. A
connector config names a heartbeat topic (``heartbeat.records.topic``: we create it and write to it), a consumer group
(``consumer.override.group.id``: PATCH and DELETE ``/offsets`` alter or delete it) and an offsets topic
(``offsets.storage.topic``: we read it as offsets and write offsets to it). Each is checked here, purely, against
Connect's internal topics and the patterns the operator allows; a refusal is a :class:`GuardRefusal` whose message
says what was refused and which setting allows it.

* a **heartbeat topic** may not be one of Connect's internal topics (config, offsets, status), the broker's
  ``__consumer_offsets`` or any other ``__``-prefixed topic;
* a **consumer group** must be the connector's default (``connect-<name>``) or match ``api.allowed.groups``
  (default ``connect-*``);
* an **offsets topic** may be the worker's offsets topic or one matching ``api.allowed.offsets.topics``, never the
  config or status topic nor a ``__``-prefixed one.

Patterns are comma-separated globs (``fnmatch``, case-sensitive like Kafka's names).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from connect_state.connect.offset_stores import ConnectorOffsetStores
from connect_state.errors import ConnectStateError
from connect_state.settings import Settings

__all__ = [
    "GuardRefusal",
    "InternalTopics",
    "check_consumer_group",
    "check_heartbeat_topic",
    "check_offsets_topic",
    "checked_group",
    "checked_stores",
    "internal_topics",
    "parse_globs",
    "permitted_offsets_topics",
]

log = logging.getLogger(__name__)


class GuardRefusal(ConnectStateError):
    """A name from a connector's config that we refuse to act on (the message says why and what allows it)."""


@dataclass(frozen=True)
class InternalTopics:
    """Connect's internal topics (the worker's ``config``/``offset``/``status.storage.topic``)."""

    config: str
    offsets: str
    status: str

    @property
    def names(self) -> frozenset[str]:
        return frozenset((self.config, self.offsets, self.status))


def parse_globs(value: str | Iterable[str]) -> tuple[str, ...]:
    """Comma-separated globs (blank items dropped), or the given ones."""
    items = value.split(",") if isinstance(value, str) else value
    return tuple(item.strip() for item in items if item.strip())


def _matches(name: str, globs: Iterable[str]) -> bool:
    return any(fnmatchcase(name, glob) for glob in globs)


def _is_broker_internal(topic: str) -> bool:
    return topic.startswith("__")


def check_heartbeat_topic(topic: str, internal: InternalTopics | Iterable[str]) -> str:
    """``topic`` when a heartbeat topic may be it (not one of the ``internal`` topics nor ``__``-prefixed); else
    :class:`GuardRefusal`."""
    names = internal.names if isinstance(internal, InternalTopics) else frozenset(internal)
    if topic in names or _is_broker_internal(topic):
        raise GuardRefusal(
            f"heartbeat.records.topic {topic!r} is one of Kafka's or Connect's internal topics: heartbeats are never "
            "written there"
        )
    return topic


def check_consumer_group(connector: str, group: str, allowed: str | Iterable[str]) -> str:
    """``group`` when the connector's offsets may be altered or deleted in it: the connector's default group
    ``connect-<name>`` or one matching ``allowed`` (``api.allowed.groups``); else :class:`GuardRefusal`."""
    if group == f"connect-{connector}" or _matches(group, parse_globs(allowed)):
        return group
    raise GuardRefusal(
        f"consumer.override.group.id {group!r} of connector {connector} is not an allowed consumer group: "
        f"connect-state alters or deletes only connect-{connector} and groups matching api.allowed.groups"
    )


def check_offsets_topic(topic: str, internal: InternalTopics, allowed: str | Iterable[str]) -> str:
    """``topic`` when it may be read and written as a connector's offsets topic: the worker's offsets topic, or one
    matching ``allowed`` (``api.allowed.offsets.topics``) that is neither Connect's config or status topic nor a
    ``__``-prefixed one; else :class:`GuardRefusal`."""
    if topic == internal.offsets:
        return topic
    if topic in (internal.config, internal.status) or _is_broker_internal(topic):
        raise GuardRefusal(
            f"offsets.storage.topic {topic!r} is one of Kafka's or Connect's internal topics, not an offsets topic"
        )
    if not _matches(topic, parse_globs(allowed)):
        raise GuardRefusal(
            f"offsets.storage.topic {topic!r} does not match api.allowed.offsets.topics: connect-state does not read "
            "or write it"
        )
    return topic


# --- the call sites' forms: with the settings ------------------------------------------------------------------------


def internal_topics(settings: Settings) -> InternalTopics:
    return InternalTopics(settings.config_storage_topic, settings.offset_storage_topic, settings.status_storage_topic)


def checked_group(connector: str, group: str, settings: Settings) -> str:
    """:func:`check_consumer_group` with ``api.allowed.groups``."""
    return check_consumer_group(connector, group, settings.api_allowed_groups)


def checked_stores(stores: ConnectorOffsetStores, settings: Settings) -> ConnectorOffsetStores:
    """``stores`` when every topic of them passes :func:`check_offsets_topic` (``api.allowed.offsets.topics``)."""
    for topic in stores.topics:
        check_offsets_topic(topic, internal_topics(settings), settings.api_allowed_offsets_topics)
    return stores


def permitted_offsets_topics(topics: Iterable[str], settings: Settings) -> set[str]:
    """The topics that may be read as offsets topics; each refused one is logged and left out."""
    kept = set()
    for topic in topics:
        try:
            kept.add(check_offsets_topic(topic, internal_topics(settings), settings.api_allowed_offsets_topics))
        except GuardRefusal as err:
            log.warning("Not reading %r as an offsets topic: %s", topic, err)
    return kept
