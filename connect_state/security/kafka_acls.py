"""The Kafka ACLs each component of connect-state needs, in one place: the README's ``kafka-acls.sh`` commands and
table are rendered from here, and ``tests/integration/test_kafka_acls.py`` grants exactly these to SASL users of a
broker with an authorizer and watches each component do its work with them (and fail without a few of them).

What each component asks of Kafka, and the ACL the broker checks for it (Kafka 4.3; ``Read``, ``Write`` and
``Delete`` imply ``Describe``, so ``Describe`` is listed only where nothing else is needed):

* **jobs** (active topics, connector states, source and sink offsets; the heartbeats job's fold too): Spark's Kafka
  source lists, describes and reads the topics (``Describe`` for metadata and ``ListOffsets``, ``Read`` for
  ``Fetch``). Its executors assign partitions and never commit: no group ACL. But the sink-offsets job reads
  ``__consumer_offsets`` with Spark's consumer-based offset fetching (the Admin-based one drops internal topics), whose
  driver consumer subscribes, so joins a group of its own (``JoinGroup``: group ``Read``) named
  ``spark-kafka-source-<uuid>-...-driver-<n>`` (streaming) or ``spark-kafka-relation-...`` (the batch read of its
  reconcile): ``Read`` on the groups prefixed ``spark-kafka-`` (a ``group.id`` in the client properties is used
  instead, by every query). The jobs' own Kafka clients (log start/end offsets, sampling an own offsets topic) use no
  group. The watch job describes the Connect workers' group (``connect.group.id``: ``FindCoordinator`` and
  ``DescribeGroups``, group ``Describe``) for its live members: a task RUNNING on a worker that left is ``degraded``.
* **api**: reads the config topic to its end before every write, follows the status and offsets topics (and
  ``__consumer_offsets`` for sink offsets), writes target states, deletions and restarts to the config topic,
  tombstones to the status topic, source offsets to the offsets topics; for sink offsets, ``OffsetCommit`` (group
  ``Read``), ``OffsetDelete`` and ``DeleteGroups`` (group ``Delete``) and ``OffsetFetch`` (group ``Describe``), where
  the broker also checks ``Read`` on the sink's topics for a commit or a delete; with exactly-once source support,
  ``InitProducerId``/``AddPartitionsToTxn``/``EndTxn`` on the transactional id ``<connect.group.id>-<connector>-0``
  and the ids it fences.
* **cleanup**: reads the config topic and the live keys of the status and offsets topics, writes tombstones to them,
  deletes a sink's consumer group (``DeleteGroups``: group ``Delete``).
* **heartbeats**: folds the three topics, reads the offsets topic before each heartbeat, creates the heartbeat topic
  (``CreateTopics`` is refused without ``Create`` even when the topic exists), writes heartbeat records to it and
  offsets to the offsets topics.

Every producer is idempotent; since Kafka 3.0 ``Write`` on any topic allows that (no ``IdempotentWrite`` on the
cluster). ``GET /``'s cluster id (``DescribeCluster``) needs no ACL.

Names a connector's config brings (its own ``offsets.storage.topic``, the topics a sink consumes, a
``consumer.override.group.id``) are :class:`ConnectorNames`, shell-variable placeholders unless given.
``python -m connect_state.security.kafka_acls`` prints the commands for the settings in force.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from connect_state.core.settings import Settings, add_config_arguments, settings_from_args
from connect_state.core.vocabulary import ExactlyOnceSourceSupport

__all__ = [
    "DOCUMENTED_SETTINGS",
    "PRINCIPAL_PLACEHOLDERS",
    "Component",
    "ConnectorNames",
    "KafkaAcl",
    "Operation",
    "PatternType",
    "ResourceType",
    "acl_commands",
    "acl_table",
    "main",
    "required_acls",
]


class Component(StrEnum):
    """A connect-state process that talks to Kafka with a principal of its own (``connect-state-jobs`` runs every job
    in one driver: give it the union of jobs, cleanup and heartbeats)."""

    JOBS = "jobs"
    API = "api"
    CLEANUP = "cleanup"
    HEARTBEATS = "heartbeats"


class ResourceType(StrEnum):
    """Kafka ACL resource types, as ``kafka-acls.sh`` names their flags."""

    TOPIC = "topic"
    GROUP = "group"
    TRANSACTIONAL_ID = "transactional-id"


class PatternType(StrEnum):
    """``--resource-pattern-type``: the name exactly, or every name starting with it."""

    LITERAL = "literal"
    PREFIXED = "prefixed"


class Operation(StrEnum):
    """Kafka ACL operations, as ``kafka-acls.sh --operation`` spells them."""

    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DELETE = "Delete"
    DESCRIBE = "Describe"


@dataclass(frozen=True)
class KafkaAcl:
    """``operations`` allowed to ``component`` on each of ``names`` (resources of ``resource``, ``pattern``)."""

    component: Component
    resource: ResourceType
    names: tuple[str, ...]
    operations: tuple[Operation, ...]
    why: str
    pattern: PatternType = PatternType.LITERAL


@dataclass(frozen=True)
class ConnectorNames:
    """Names the connectors' configs bring: their own ``offsets.storage.topic``s, the topics sink connectors consume
    and their ``consumer.override.group.id``s (empty: none). Placeholders (shell variables) by default."""

    offsets_topics: tuple[str, ...] = ("$OWN_OFFSETS_TOPIC",)
    sink_topics: tuple[str, ...] = ("$SINK_TOPIC",)
    groups: tuple[str, ...] = ("$OVERRIDE_GROUP",)
    heartbeat_topics: tuple[str, ...] = field(default=())
    """``heartbeat.records.topic`` of connector configs, beside the setting's."""


#: The shell variables the rendered commands use for each component's principal (``User:<name>``).
PRINCIPAL_PLACEHOLDERS: Mapping[Component, str] = {
    Component.JOBS: "$JOBS",
    Component.API: "$API",
    Component.CLEANUP: "$CLEANUP",
    Component.HEARTBEATS: "$HEARTBEATS",
}

#: The settings the README's commands are rendered with: the defaults, plus the optional features that need ACLs.
DOCUMENTED_SETTINGS: Mapping[str, str] = {
    "exactly.once.source.support": "enabled",
    "api.audit.topic": "$AUDIT_TOPIC",
    "heartbeat.topics.create": "true",
}

#: The prefix of a sink connector's default consumer group (``connect-<name>``).
SINK_GROUP_PREFIX = "connect-"
#: The prefix of the groups Spark's Kafka source names for itself (``groupIdPrefix``: ``spark-kafka-source`` when
#: streaming, ``spark-kafka-relation`` in a batch read).
SPARK_GROUP_PREFIX = "spark-kafka-"

_READ, _WRITE, _CREATE, _DELETE, _DESCRIBE = (
    Operation.READ,
    Operation.WRITE,
    Operation.CREATE,
    Operation.DELETE,
    Operation.DESCRIBE,
)


def _jobs(settings: Settings, names: ConnectorNames) -> list[KafkaAcl]:
    topics = (
        settings.status_storage_topic,
        settings.config_storage_topic,
        settings.offset_storage_topic,
        settings.consumer_offsets_topic,
    )
    return [
        KafkaAcl(Component.JOBS, ResourceType.TOPIC, topics, (_READ,), "the fold jobs' Spark Kafka sources"),
        KafkaAcl(
            Component.JOBS,
            ResourceType.TOPIC,
            names.offsets_topics,
            (_READ,),
            "each connector's own offsets.storage.topic (offsets job, sampled first)",
        ),
        KafkaAcl(
            Component.JOBS,
            ResourceType.GROUP,
            (SPARK_GROUP_PREFIX,),
            (_READ,),
            "the sink-offsets job's driver consumer of __consumer_offsets joins a group (spark-kafka-source-*)",
            PatternType.PREFIXED,
        ),
        KafkaAcl(
            Component.JOBS,
            ResourceType.GROUP,
            (settings.connect_group_id,),
            (_DESCRIBE,),
            "the watch job's DescribeGroups of the workers' group (connect.group.id): a worker that left",
        ),
    ]


def _api(settings: Settings, names: ConnectorNames) -> list[KafkaAcl]:
    internal = (settings.config_storage_topic, settings.status_storage_topic, settings.offset_storage_topic)
    follow_groups = settings.api_follow_topics and settings.api_follow_consumer_offsets
    acls = [
        KafkaAcl(
            Component.API,
            ResourceType.TOPIC,
            internal,
            (_READ, _WRITE),
            "fresh reads and follower; target states, deletions, restarts, topic resets, source offsets",
        ),
        KafkaAcl(
            Component.API,
            ResourceType.TOPIC,
            (settings.consumer_offsets_topic,),
            (_READ,) if follow_groups else (_DESCRIBE,),
            "sink offsets followed (api.follow.consumer.offsets)" if follow_groups else "the lag header's end offsets",
        ),
        KafkaAcl(
            Component.API, ResourceType.TOPIC, names.offsets_topics, (_WRITE,), "source offsets of an own offsets topic"
        ),
        KafkaAcl(
            Component.API,
            ResourceType.GROUP,
            (SINK_GROUP_PREFIX,),
            (_READ, _DELETE),
            "sink offsets: alter (OffsetCommit), reset (OffsetDelete, DeleteGroups), GET (OffsetFetch)",
            PatternType.PREFIXED,
        ),
        KafkaAcl(
            Component.API, ResourceType.GROUP, names.groups, (_READ, _DELETE), "a sink's consumer.override.group.id"
        ),
        KafkaAcl(
            Component.API,
            ResourceType.TOPIC,
            names.sink_topics,
            (_READ,),
            "the broker checks Read on each topic of a group offset committed or deleted",
        ),
    ]
    if settings.exactly_once_source_support is ExactlyOnceSourceSupport.ENABLED:
        acls.append(
            KafkaAcl(
                Component.API,
                ResourceType.TRANSACTIONAL_ID,
                (f"{settings.connect_group_id}-",),
                (_WRITE,),
                "exactly.once.source.support=enabled: zombie fencing, the offsets transaction",
                PatternType.PREFIXED,
            )
        )
    if settings.api_audit_topic:
        acls.append(
            KafkaAcl(Component.API, ResourceType.TOPIC, (settings.api_audit_topic,), (_WRITE,), "api.audit.topic")
        )
    return acls


def _cleanup(settings: Settings, names: ConnectorNames) -> list[KafkaAcl]:
    return [
        KafkaAcl(
            Component.CLEANUP, ResourceType.TOPIC, (settings.config_storage_topic,), (_READ,), "deleted connectors"
        ),
        KafkaAcl(
            Component.CLEANUP,
            ResourceType.TOPIC,
            (settings.status_storage_topic, settings.offset_storage_topic, *names.offsets_topics),
            (_READ, _WRITE),
            "live keys read, tombstones written",
        ),
        KafkaAcl(
            Component.CLEANUP,
            ResourceType.GROUP,
            (SINK_GROUP_PREFIX,),
            (_DELETE,),
            "a deleted sink's consumer group (DeleteGroups)",
            PatternType.PREFIXED,
        ),
        KafkaAcl(
            Component.CLEANUP, ResourceType.GROUP, names.groups, (_DELETE,), "a sink's consumer.override.group.id"
        ),
    ]


def _heartbeats(settings: Settings, names: ConnectorNames) -> list[KafkaAcl]:
    return [
        KafkaAcl(
            Component.HEARTBEATS,
            ResourceType.TOPIC,
            (settings.config_storage_topic, settings.status_storage_topic),
            (_READ,),
            "the heartbeats fold",
        ),
        KafkaAcl(
            Component.HEARTBEATS,
            ResourceType.TOPIC,
            (settings.offset_storage_topic, *names.offsets_topics),
            (_READ, _WRITE),
            "the fold, the check before a heartbeat, the offsets committed",
        ),
        KafkaAcl(
            Component.HEARTBEATS,
            ResourceType.TOPIC,
            tuple(dict.fromkeys((settings.heartbeat_records_topic, *names.heartbeat_topics))),
            (_CREATE, _WRITE) if settings.heartbeat_topics_create else (_WRITE,),
            "heartbeat records (Create only with heartbeat.topics.create=true, which creates a missing topic)",
        ),
    ]


def required_acls(settings: Settings, names: ConnectorNames | None = None) -> list[KafkaAcl]:
    """Every ACL connect-state's components need on the cluster of ``settings``, in README order (an entry whose
    ``names`` came out empty is left out)."""
    names = ConnectorNames() if names is None else names
    acls = [*_jobs(settings, names), *_api(settings, names), *_cleanup(settings, names), *_heartbeats(settings, names)]
    return [acl for acl in acls if acl.names]


def _word(value: str) -> str:
    """A shell word: a placeholder (``$NAME``) in double quotes, anything else quoted if it needs it."""
    return f'"{value}"' if value.startswith("$") else shlex.quote(value)


def acl_commands(
    acls: Sequence[KafkaAcl],
    principals: Mapping[Component, str] = PRINCIPAL_PLACEHOLDERS,
    *,
    bootstrap: str = "$KAFKA",
    command_config: str = "admin.properties",
) -> str:
    """``kafka-acls.sh --add`` commands granting ``acls``, one per entry, each after a comment saying what it is for
    (``principals``: each component's principal, ``User:<name>`` or a placeholder)."""
    lines = []
    for acl in acls:
        command = (
            f"kafka-acls.sh --bootstrap-server {_word(bootstrap)} --command-config {_word(command_config)} --add "
            f"--allow-principal {_word(principals[acl.component])} \\"
        )
        what = [
            *(f"--operation {op}" for op in acl.operations),
            *(f"--{acl.resource} {_word(name)}" for name in acl.names),
        ]
        if acl.pattern is not PatternType.LITERAL:
            what.append(f"--resource-pattern-type {acl.pattern}")
        lines += [f"# {acl.component}: {acl.why}", command, "  " + " ".join(what)]
    return "\n".join(lines) + "\n"


def acl_table(acls: Sequence[KafkaAcl]) -> str:
    """The ACLs as a Markdown table: component, resource, names, pattern, operations, why."""
    rows = ["| component | resource | name | pattern | operations | what for |", "|---|---|---|---|---|---|"]
    for acl in acls:
        names = ", ".join(f"`{name}`" for name in acl.names)
        operations = ", ".join(acl.operations)
        rows.append(f"| {acl.component} | {acl.resource} | {names} | {acl.pattern} | {operations} | {acl.why} |")
    return "\n".join(rows) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m connect_state.security.kafka_acls",
        description="Print the kafka-acls.sh commands granting each connect-state component the ACLs it needs.",
    )
    add_config_arguments(parser)
    parser.add_argument("--offsets-topic", action="append", default=[], help="a connector's own offsets topic")
    parser.add_argument("--sink-topic", action="append", default=[], help="a topic a sink connector consumes")
    parser.add_argument("--group", action="append", default=[], help="a sink's consumer.override.group.id")
    parser.add_argument("--heartbeat-topic", action="append", default=[], help="a connector's heartbeat.records.topic")
    parser.add_argument("--principal", action="append", default=[], metavar="COMPONENT=PRINCIPAL")
    args = parser.parse_args(argv)
    principals = dict(PRINCIPAL_PLACEHOLDERS)
    for item in args.principal:
        component, _, principal = item.partition("=")
        if component not in set(Component) or not principal:
            parser.error(f"--principal {item!r}: expected one of {', '.join(Component)}=User:<name>")
        principals[Component(component)] = principal
    placeholders = ConnectorNames()  # a name not given stays a placeholder: no ACL is left out unseen
    names = ConnectorNames(
        tuple(args.offsets_topic) or placeholders.offsets_topics,
        tuple(args.sink_topic) or placeholders.sink_topics,
        tuple(args.group) or placeholders.groups,
        tuple(args.heartbeat_topic),
    )
    sys.stdout.write(acl_commands(required_acls(settings_from_args(args), names), principals))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
