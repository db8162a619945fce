"""No confused deputy: names a connector's config steers our privileged I/O to are checked before we act (issue 13).

connect-state writes and reads with its own Kafka principal, which may do more than a connector's author should. A
connector config names a heartbeat topic (``heartbeat.records.topic``: we create it and write to it), a consumer group
(``consumer.override.group.id``: PATCH and DELETE ``/offsets`` alter or delete it) and an offsets topic
(``offsets.storage.topic``: we read it as offsets and write offsets to it). Each is checked here, purely, against
Connect's internal topics and the patterns the operator allows; a refusal is a :class:`GuardRefusal` whose message
says what was refused and which setting allows it.

* a **heartbeat topic** may not be one of Connect's internal topics (config, offsets, status), the broker's
  ``__consumer_offsets`` or any other ``__``-prefixed topic;
* a **consumer group** must be the connector's default (``connect-<name>``), an override the connector's own tasks
  committed to (committed offsets exist, all for topics the connector's tasks consume, and it is not another
  connector's ``connect-<other>``), or match ``api.allowed.groups`` (an explicit allow-list, default empty);
* an **offsets topic** may be the worker's offsets topic or one matching ``api.allowed.offsets.topics``, never the
  config or status topic nor a ``__``-prefixed one; and a connector's own ``offsets.storage.topic`` is read as an
  offsets topic only if its records are offsets records: :func:`sampled_offsets_topics` reads the last
  ``OFFSETS_SAMPLE`` records of each partition (through the one Kafka layer, :class:`connect_state.kafka.log.
  TopicLog`) and refuses a topic whose sampled records all have keys that are not Connect's
  ``[connector, partition]`` JSON (:func:`connect_state.formats.offsets.parse_offset_key`); an empty topic passes
  (a new offsets topic). The offsets job never subscribes to a refused topic (no byte of it lands in a table) and
  records the refusal in ``rejected_records`` (partition and offset -1, the reason; ``GET /rejected-records``).

The jobs pass the same checks (issue 33), through :class:`Guards` (built from the settings): the cleanup job deletes a
deleted sink's group only when it is ``connect-<name>`` or matches ``cleanup.allowed.groups`` (no evidence is gathered
on a deletion: whoever may create and delete connectors in Connect triggers it), never the workers' group
(``connect.group.id``, refused to the API too) nor a live connector's ``connect-<other>``, and tombstones source
offsets only in permitted offsets topics; the heartbeats send only to ``heartbeat.records.topic`` or a topic matching
``heartbeat.allowed.topics`` (created only with ``heartbeat.topics.create``) and commit offsets only to permitted
offsets topics.

Patterns are comma-separated globs (``fnmatch``, case-sensitive like Kafka's names).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, NamedTuple, Protocol

from connect_state.connect.offset_stores import ConnectorOffsetStores, sink_consumer_group
from connect_state.core.errors import ConnectStateError, RecordFormatError
from connect_state.core.settings import Settings
from connect_state.formats.offsets import parse_offset_key

__all__ = [
    "GroupEvidence",
    "GuardRefusal",
    "Guards",
    "InternalTopics",
    "SampledTopics",
    "check_consumer_group",
    "check_heartbeat_topic",
    "check_offsets_records",
    "check_offsets_topic",
    "checked_stores",
    "internal_topics",
    "parse_globs",
    "permitted_offsets_topics",
    "reserved_groups",
    "sampled_offsets_topics",
]

log = logging.getLogger("connect_state.guards")


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


@dataclass(frozen=True)
class GroupEvidence:
    """What the tables say about a consumer group a connector's config names (the API gathers it:
    :meth:`connect_state.herder.Herder` over its I/O)."""

    #: the topics the group has committed offsets for (``sink_offsets``)
    committed_topics: frozenset[str]
    #: the topics the connector's tasks consume (KIP-558 active topics, reported by its tasks)
    connector_topics: frozenset[str]
    #: every other connector's name (``connect-<other>`` is that connector's group)
    other_connectors: frozenset[str]


def check_consumer_group(
    connector: str,
    group: str,
    allowed: str | Iterable[str],
    evidence: GroupEvidence | None = None,
    *,
    reserved: Iterable[str] = (),
    other_connectors: Iterable[str] = (),
    setting: str = "api.allowed.groups",
) -> str:
    """``group`` when the connector's offsets may be altered or deleted in it, else :class:`GuardRefusal`.

    Never a ``reserved`` group (the Connect workers' own ``connect.group.id``) nor the default group ``connect-<other>``
    of one of ``other_connectors``, whatever allows it. Otherwise:

    * the connector's default group ``connect-<name>``;
    * a group matching ``allowed`` (the operator's explicit allow-list named ``setting``, default empty);
    * an override the connector's own tasks committed to: with ``evidence`` (the API gathers it; the cleanup job does
      not, so there only the first two pass), a group that is not another connector's default group and has
      committed offsets, all of them for topics the connector's tasks consume.
    """
    what = f"consumer.override.group.id {group!r} of connector {connector} is not the connector's consumer group"
    if group in frozenset(reserved):
        raise GuardRefusal(
            f"consumer group {group!r} named by connector {connector} is the Connect workers' group (connect.group.id):"
            " connect-state never alters or deletes it"
        )
    owner = next((other for other in sorted(set(other_connectors)) if group == sink_consumer_group(other)), None)
    if owner is not None and owner != connector:
        raise GuardRefusal(
            f"{what}: it is the default consumer group of connector {owner}; connect-state never alters or deletes "
            "another connector's group"
        )
    if group == sink_consumer_group(connector) or _matches(group, parse_globs(allowed)):
        return group
    evidenced = f", a group whose committed offsets are all for topics {connector}'s tasks consume," if evidence else ""
    allows = (
        f"connect-state alters or deletes only {sink_consumer_group(connector)}{evidenced} and groups matching "
        f"{setting}"
    )
    if evidence is None:
        raise GuardRefusal(f"{what}: {allows}")
    owner = next((other for other in sorted(evidence.other_connectors) if group == sink_consumer_group(other)), None)
    if owner is not None:
        raise GuardRefusal(f"{what}: it is the default consumer group of connector {owner}; {allows}")
    if not evidence.committed_topics:
        raise GuardRefusal(f"{what}: it has no committed offsets (sink_offsets table); {allows}")
    foreign = sorted(evidence.committed_topics - evidence.connector_topics)
    if foreign:
        raise GuardRefusal(
            f"{what}: it has committed offsets for topics {connector} does not consume ({', '.join(foreign)}); {allows}"
        )
    return group


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


def reserved_groups(settings: Settings) -> frozenset[str]:
    """The consumer groups never altered or deleted whatever a connector config says: the Connect workers' group."""
    return frozenset({settings.connect_group_id})


@dataclass(frozen=True)
class Guards:
    """The same checks as the API's, as the jobs apply them (the cleanup job, the heartbeats), from the settings.

    ``allowed_groups``: ``cleanup.allowed.groups`` (the override groups a deletion may delete: no evidence is gathered
    on a deletion, anyone who may create and delete a connector in Connect triggers it); ``allowed_offsets_topics``:
    ``api.allowed.offsets.topics``; ``heartbeat_topics``: ``heartbeat.records.topic`` and the globs of
    ``heartbeat.allowed.topics``; ``create_heartbeat_topics``: ``heartbeat.topics.create``.
    """

    internal: InternalTopics
    reserved_groups: frozenset[str] = frozenset()
    allowed_groups: tuple[str, ...] = ()
    allowed_offsets_topics: tuple[str, ...] = ()
    heartbeat_topics: tuple[str, ...] = ()
    create_heartbeat_topics: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> Guards:
        return cls(
            internal=internal_topics(settings),
            reserved_groups=reserved_groups(settings),
            allowed_groups=parse_globs(settings.cleanup_allowed_groups),
            allowed_offsets_topics=parse_globs(settings.api_allowed_offsets_topics),
            heartbeat_topics=(settings.heartbeat_records_topic, *parse_globs(settings.heartbeat_allowed_topics)),
            create_heartbeat_topics=settings.heartbeat_topics_create,
        )

    def cleanup_group(self, connector: str, group: str, live_connectors: Iterable[str]) -> str:
        """``group`` when a deletion of ``connector`` may delete it (:func:`check_consumer_group` without evidence:
        the default group or ``cleanup.allowed.groups``, never the workers' group nor a live connector's own)."""
        return check_consumer_group(
            connector,
            group,
            self.allowed_groups,
            reserved=self.reserved_groups,
            other_connectors=set(live_connectors) - {connector},
            setting="cleanup.allowed.groups",
        )

    def offsets_topic(self, topic: str) -> str:
        """``topic`` when offsets may be written to it (:func:`check_offsets_topic`)."""
        return check_offsets_topic(topic, self.internal, self.allowed_offsets_topics)

    def offsets_stores(self, stores: ConnectorOffsetStores) -> ConnectorOffsetStores:
        """``stores`` when every topic of them passes :meth:`offsets_topic`."""
        for topic in stores.topics:
            self.offsets_topic(topic)
        return stores

    def heartbeat_topic(self, topic: str) -> str:
        """``topic`` when heartbeat records may be sent to it: not an internal topic (:func:`check_heartbeat_topic`)
        and ``heartbeat.records.topic`` or matching ``heartbeat.allowed.topics``."""
        check_heartbeat_topic(topic, self.internal)
        if not _matches(topic, self.heartbeat_topics):
            raise GuardRefusal(
                f"heartbeat.records.topic {topic!r} is neither connect-state's heartbeat.records.topic nor matches "
                "heartbeat.allowed.topics: heartbeats are not written there"
            )
        return topic


# --- offsets topics: their records must be offsets records ---------------------------------------------------------

#: how many of the newest records of each partition :func:`sampled_offsets_topics` reads
OFFSETS_SAMPLE = 20


def is_offsets_key(key: bytes | None) -> bool:
    """True when ``key`` is a Connect offsets key (``["<connector>", {partition}]`` JSON)."""
    try:
        parse_offset_key(key)
    except RecordFormatError:
        return False
    return True


def check_offsets_records(topic: str, keys: Sequence[bytes | None]) -> str:
    """``topic`` when the sampled ``keys`` of its records (none: an empty topic) include an offsets key; else
    :class:`GuardRefusal`."""
    if not keys or any(is_offsets_key(key) for key in keys):
        return topic
    raise GuardRefusal(
        f"offsets.storage.topic {topic!r} is not an offsets topic: none of its {len(keys)} newest records has a "
        "Connect offsets key ([connector, partition] JSON); connect-state does not read it"
    )


class SampleLog(Protocol):
    """What :func:`sampled_offsets_topics` needs of a topic reader (:class:`connect_state.kafka.log.TopicLog`)."""

    def offsets(self, topics: Sequence[str], timeout_ms: int) -> Any: ...

    def read(self, ranges: Mapping[tuple[str, int], tuple[int | None, int]], timeout_ms: int) -> Sequence[Any]: ...


def sample_keys(
    reader: SampleLog, topic: str, timeout_ms: int, per_partition: int = OFFSETS_SAMPLE
) -> list[bytes | None]:
    """The keys of the newest ``per_partition`` records of each partition of ``topic``."""
    positions = reader.offsets([topic], timeout_ms)
    ranges = {
        partition: (max(positions.starts.get(partition, 0), end - per_partition), end)
        for partition, end in positions.ends.items()
        if end > positions.starts.get(partition, 0)
    }
    return [record.key for record in reader.read(ranges, timeout_ms)] if ranges else []


class SampledTopics(NamedTuple):
    """What :func:`sampled_offsets_topics` found."""

    #: the topics that may be read as offsets topics: checked by their records (the worker's own always), or unsampled
    kept: set[str]
    #: the refused topics, with the reason
    refused: dict[str, str]
    #: the kept topics that could not be sampled (missing, Kafka away): to be checked again
    unsampled: set[str]


def sampled_offsets_topics(
    topics: Iterable[str], worker_topic: str, reader: SampleLog, timeout_ms: int
) -> SampledTopics:
    """The topics that may be read as offsets topics by their records, and the refused ones. A topic that cannot be
    sampled (missing, Kafka away) is kept, and said to be unsampled: the job's own read then waits or fails as for
    any topic, and the check is made again the next time."""
    kept: set[str] = set()
    refused: dict[str, str] = {}
    unsampled: set[str] = set()
    for topic in topics:
        if topic == worker_topic:
            kept.add(topic)
            continue
        try:
            kept.add(check_offsets_records(topic, sample_keys(reader, topic, timeout_ms)))
        except GuardRefusal as err:
            log.warning("Not reading %r as an offsets topic: %s", topic, err)
            refused[topic] = str(err)
        except ConnectStateError as err:
            log.info("Cannot sample %r to check it is an offsets topic (%s): read as configured", topic, err)
            kept.add(topic)
            unsampled.add(topic)
    return SampledTopics(kept, refused, unsampled)
