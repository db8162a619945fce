"""KIP-875 ``Connector.alterOffsets`` as a plug-in point per connector class.

Before it writes, Connect calls the connector's ``alterOffsets(config, offsets)``
(``Worker.modifySourceConnectorOffsets`` / ``modifySinkConnectorOffsets``); its answer decides the response:

* returns **true** → the short success message (the connector manages or has checked the offsets);
* returns **false** (``SourceConnector`` / ``SinkConnector``'s default) → the long "framework-managed" message;
* raises ``UnsupportedOperationException`` (:class:`~connect_state.core.errors.AlterOffsetsUnsupported`) → 500
  :func:`connect_state.connect.rest.modify_offsets_unsupported_message`;
* raises a ``ConnectException`` (:class:`~connect_state.core.errors.AlterOffsetsRejected`) → 500 with its message; a
  ``BadRequestException`` (:class:`~connect_state.core.errors.AlterOffsetsBadRequest`) → 400 with its message;
* raises anything else → 500 ``"Failed to modify offsets for source connector <name>"`` (``sink`` for a sink
  connector): ``ConnectUtils.maybeWrap``.

A **rule** stands in for a class's ``alterOffsets``: a callable ``rule(config, offsets) -> bool``, where ``config``
is the connector's config and ``offsets`` is

* for a source connector, the normalised ``(partition, offset)`` pairs (``Worker.normalizeSourceConnectorOffsets``:
  integers are longs, a null offset is a reset), in the order Connect's ``HashMap`` hands them over
  (:func:`java_map_order`);
* for a sink connector, ``{(topic, partition): offset or None}`` (``Map<TopicPartition, Long>``).

An object with an ``alter_offsets`` method, or a class with a no-argument constructor whose instances have one, is a
rule too (:func:`as_rule`). Kafka's own connectors have built-in rules (:data:`BUILT_IN_RULES`: FileStream source and
sink, the three MirrorMaker 2 connectors); rules configured with ``offsets.alter.rules=<class>=<module:attr>`` or
registered as entry points of group ``connect_state.alter_offsets`` (name = connector class) win over them
(:mod:`connect_state.connect.plugins`). A class without a rule gets the default, false. A class is matched by its full
name or a ``PluginUtils`` alias on either side. Pure: no Spark, Kafka, Delta or Flask.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from connect_state.connect.connector_types import registered_for
from connect_state.connect.filestream import (
    FILE_SINK_CLASS,
    FILE_SOURCE_CLASS,
    file_stream_sink_alter_offsets,
    file_stream_source_alter_offsets,
)
from connect_state.connect.mirror_maker import (
    MIRROR_CHECKPOINT_CLASS,
    MIRROR_HEARTBEAT_CLASS,
    MIRROR_SOURCE_CLASS,
    mirror_checkpoint_alter_offsets,
    mirror_heartbeat_alter_offsets,
    mirror_source_alter_offsets,
)
from connect_state.connect.rest import modify_offsets_failed_message, modify_offsets_unsupported_message
from connect_state.core.deadlines import DeadlineRunner, PluginTimeout, plugin_name
from connect_state.core.errors import (
    AlterOffsetsBadRequest,
    AlterOffsetsRejected,
    AlterOffsetsUnsupported,
    ConnectorOffsetsError,
)
from connect_state.core.vocabulary import ConnectorType
from connect_state.formats.javalang import java_hash_code, java_hashmap_order_by_hash
from connect_state.formats.offsets import OffsetPair

__all__ = [
    "BUILT_IN_RULES",
    "AlterOffsetsRule",
    "AlterOffsetsRules",
    "ModifyOffsetsRefused",
    "SinkOffsets",
    "as_rule",
    "java_map_order",
]

#: ``Map<TopicPartition, Long>``: a sink connector's offsets as its ``alterOffsets`` sees them (None: reset).
SinkOffsets = Mapping[tuple[str, int], int | None]
#: A connector class's ``alterOffsets``: ``(config, offsets) -> bool`` (offsets: source pairs or :data:`SinkOffsets`).
AlterOffsetsRule = Callable[[Mapping[str, Any], Any], bool]


class ModifyOffsetsRefused(Exception):
    """The answer Connect gives when the connector's ``alterOffsets`` did not return: ``status`` and ``message``.

    ``cause`` is what the rule raised (logged by the caller)."""

    def __init__(self, status: int, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.cause = cause


def java_map_order(pairs: Sequence[OffsetPair]) -> list[OffsetPair]:
    """The pairs (distinct partitions, by Java ``Map.equals``) in the iteration order of the ``HashMap`` Connect
    passes to ``alterOffsets``.

    ``ConnectorOffsets.toMap`` puts the request's pairs, in request order, into a ``HashMap`` keyed by the partitions
    as Jackson bound them (an int-range integer is an ``Integer``); ``Worker.normalizeSourceConnectorOffsets`` puts
    them, in that map's order, into a new ``HashMap`` keyed by the normalised partitions (every integer a ``Long``,
    whose hash differs for negative values). Iteration is by bucket, then insertion order within a bucket. A pair
    set whose order cannot be modelled (a tree bin) is kept in request order.
    """
    try:
        bound = [
            pairs[i] for i in java_hashmap_order_by_hash([java_hash_code(p, ints_as_integer=True) for p, _ in pairs])
        ]
        return [bound[i] for i in java_hashmap_order_by_hash([java_hash_code(p) for p, _ in bound])]
    except (ValueError, TypeError):
        return list(pairs)


class _MethodRule:
    def __init__(self, target: Any) -> None:
        self.target = target

    def __call__(self, config: Mapping[str, Any], offsets: Any) -> bool:
        return bool(self.target.alter_offsets(config, offsets))


def as_rule(plugin: object) -> AlterOffsetsRule:
    """A loaded plugin as a rule: a class (instantiated), an object with ``alter_offsets``, or a callable."""
    if isinstance(plugin, type):
        plugin = plugin()
    if callable(getattr(plugin, "alter_offsets", None)):
        return _MethodRule(plugin)
    if callable(plugin):
        return plugin
    raise TypeError(f"{plugin!r} is not an alterOffsets rule (no alter_offsets method, not callable)")


#: Kafka's own connectors that override ``alterOffsets``, each checked against Kafka 4.3.1.
BUILT_IN_RULES: Mapping[str, AlterOffsetsRule] = {
    FILE_SOURCE_CLASS: file_stream_source_alter_offsets,
    FILE_SINK_CLASS: file_stream_sink_alter_offsets,
    MIRROR_SOURCE_CLASS: mirror_source_alter_offsets,
    MIRROR_CHECKPOINT_CLASS: mirror_checkpoint_alter_offsets,
    MIRROR_HEARTBEAT_CLASS: mirror_heartbeat_alter_offsets,
}


@dataclass(frozen=True)
class AlterOffsetsRules:
    """The rules by connector class: ``configured`` (settings, entry points) over :data:`BUILT_IN_RULES`."""

    configured: Mapping[str, AlterOffsetsRule] = field(default_factory=dict)

    def rule_for(self, connector_class: str | None) -> AlterOffsetsRule | None:
        """The class's rule (configured first, then built in), None for the default (returns false)."""
        if connector_class is None:
            return None
        return registered_for(self.configured, connector_class) or registered_for(BUILT_IN_RULES, connector_class)

    def alter_offsets(
        self,
        name: str,
        connector_class: str | None,
        kind: ConnectorType,
        config: Mapping[str, Any],
        offsets: Sequence[OffsetPair] | SinkOffsets,
        deadlines: DeadlineRunner | None = None,
    ) -> bool:
        """Call the class's ``alterOffsets`` as Connect does; true or false picks the success message.

        Source pairs are handed over in Connect's ``HashMap`` order. Raises :class:`ModifyOffsetsRefused` with
        Connect's status and message when the rule raises; with ``deadlines`` (``offsets.alter.timeout.ms``), the
        rule runs with that deadline, one abandoned call per rule at most, and
        :class:`~connect_state.core.deadlines.PluginTimeout` is raised past it.
        """
        rule = self.rule_for(connector_class)
        if rule is None:
            return False
        argument: Any = java_map_order(offsets) if isinstance(offsets, Sequence) else dict(offsets)
        target = rule.target if isinstance(rule, _MethodRule) else rule
        label = f"alterOffsets rule {plugin_name(target)} of class {connector_class}"
        try:
            if deadlines is None:
                return bool(rule(dict(config), argument))
            return bool(deadlines.run(rule, label, lambda: rule(dict(config), argument)))
        except PluginTimeout:
            raise
        except AlterOffsetsUnsupported as err:
            raise ModifyOffsetsRefused(500, modify_offsets_unsupported_message(name), err) from err
        except AlterOffsetsBadRequest as err:
            raise ModifyOffsetsRefused(400, err.message, err) from err
        except AlterOffsetsRejected as err:
            raise ModifyOffsetsRefused(500, err.message, err) from err
        except ConnectorOffsetsError as err:
            raise ModifyOffsetsRefused(500, str(err) or modify_offsets_failed_message(name, kind), err) from err
        except Exception as err:  # a third-party rule's bug: Connect wraps what is not a ConnectException
            raise ModifyOffsetsRefused(500, modify_offsets_failed_message(name, kind), err) from err
