"""A connector's class and type: ``connector.class``, the class's ``PluginUtils`` aliases, and whether it is a source
or a sink connector.

Connect knows a connector's type by loading its plugin class (``AbstractHerder.connectorType``,
``ConnectorType.from``); a reader of the internal topics cannot, so :func:`connector_type_basis` takes it from the
class where the class is known (a configured map, then Kafka's own connectors) and guesses from the config only for
an unknown class, saying so (:class:`TypeBasis`). A connector config may name its class by the full name or by an
alias: ``PluginUtils`` gives every plugin its simple name and its simple name without the ``Connector`` suffix
(``FileStreamSource`` for ``org.apache.kafka.connect.file.FileStreamSourceConnector``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import TypeVar

from connect_state.core.vocabulary import ConnectorType

__all__ = [
    "CONNECTOR_CLASS_CONFIG",
    "KNOWN_CONNECTOR_TYPES",
    "SINK_TOPICS_CONFIGS",
    "TypeBasis",
    "config_connector_type",
    "connector_class",
    "connector_type_basis",
    "is_alias_of",
    "plugin_aliases",
]

#: ``ConnectorConfig.CONNECTOR_CLASS_CONFIG``.
CONNECTOR_CLASS_CONFIG = "connector.class"
#: ``SinkConnectorConfig.TOPICS_CONFIG`` / ``TOPICS_REGEX_CONFIG``: a config naming its input topics is a sink's.
SINK_TOPICS_CONFIGS = ("topics", "topics.regex")

#: Apache Kafka's own connector classes (every ``Connector`` in connect-file, connect-mirror and connect-runtime 4.3.1).
#: A configured class→type map wins over these. Mirror source connectors have a ``topics`` setting (the topics to
#: replicate), which the config guess would take for a sink's.
KNOWN_CONNECTOR_TYPES: Mapping[str, ConnectorType] = {
    "org.apache.kafka.connect.file.FileStreamSourceConnector": ConnectorType.SOURCE,
    "org.apache.kafka.connect.file.FileStreamSinkConnector": ConnectorType.SINK,
    "org.apache.kafka.connect.mirror.MirrorSourceConnector": ConnectorType.SOURCE,
    "org.apache.kafka.connect.mirror.MirrorCheckpointConnector": ConnectorType.SOURCE,
    "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector": ConnectorType.SOURCE,
}


def connector_class(config: Mapping[str, object] | None) -> str | None:
    """The config's ``connector.class`` (None without config, or when it is not a string)."""
    value = config.get(CONNECTOR_CLASS_CONFIG) if config is not None else None
    return value if isinstance(value, str) else None


def plugin_aliases(class_name: str) -> tuple[str, ...]:
    """``PluginUtils`` aliases of a connector class, with the class itself: the class name, its simple name, and the
    simple name without a ``Connector`` suffix (``simpleName`` / ``prunedName``)."""
    simple = class_name.rsplit(".", 1)[-1]
    pruned = simple[: -len("Connector")] if simple.endswith("Connector") and simple != "Connector" else simple
    return class_name, simple, pruned


def is_alias_of(name: str | None, class_name: str) -> bool:
    """Whether a config's ``connector.class`` value ``name`` names ``class_name`` (the class or one of its
    aliases)."""
    return name is not None and name in plugin_aliases(class_name)


def same_plugin(name: str | None, registered: str) -> bool:
    """Whether a connector's ``connector.class`` value and a class name registered with us (a provider, hook or
    ``alterOffsets`` rule) name the same plugin: equal, or either a ``PluginUtils`` alias of the other."""
    return name is not None and (name == registered or is_alias_of(name, registered) or is_alias_of(registered, name))


def names_any(name: str | None, registered: Collection[str]) -> bool:
    """Whether ``name`` names one of the ``registered`` classes (:func:`same_plugin`)."""
    return any(same_plugin(name, entry) for entry in registered)


T = TypeVar("T")


def registered_for(registry: Mapping[str, T], connector_class: str | None) -> T | None:
    """What ``registry`` holds for a connector's class: its exact entry, else the first entry naming the same plugin
    (:func:`same_plugin`); None when there is none. The one lookup of providers, hooks and rules by class."""
    if connector_class is None:
        return None
    if connector_class in registry:
        return registry[connector_class]
    return next((value for entry, value in registry.items() if same_plugin(connector_class, entry)), None)


def _mapped_type(class_name: str, class_types: Mapping[str, str]) -> str | None:
    """The type ``class_types`` gives ``class_name``: an exact entry, else an entry whose class has it as alias."""
    if class_name in class_types:
        return class_types[class_name]
    for mapped, kind in class_types.items():
        if is_alias_of(class_name, mapped):
            return kind
    return None


class TypeBasis(StrEnum):
    """How a connector's type was decided (:func:`connector_type_basis`)."""

    #: the class's entry in the configured map (``connector.class.types``)
    CONFIGURED = "configured"
    #: the class is one of Kafka's own connectors (:data:`KNOWN_CONNECTOR_TYPES`)
    BUILT_IN = "built-in"
    #: the class is unknown: guessed from the config (``topics`` / ``topics.regex`` make a sink)
    GUESSED = "guessed-from-config"
    #: no config or no ``connector.class``: the type is ``unknown`` (Connect's answer too)
    NO_CLASS = "no-class"


def connector_type_basis(
    config: Mapping[str, object] | None, class_type_map: Mapping[str, str] | None = None
) -> tuple[ConnectorType, TypeBasis]:
    """The connector's type and how it was decided: from the class when it is known (``class_type_map``, then
    :data:`KNOWN_CONNECTOR_TYPES`; a full class name, or a class whose alias is used), else guessed from the config.

    Connect asks the plugin class (``AbstractHerder.connectorType``), which a reader of the topics cannot load. The
    guess is ``sink`` when the config has ``topics`` or ``topics.regex`` (what every sink needs,
    ``SinkConnectorConfig.validate``), else ``source``. Raises ValueError for a map entry that is neither ``source``
    nor ``sink``.
    """
    class_name = connector_class(config)
    if config is None or class_name is None:
        return ConnectorType.UNKNOWN, TypeBasis.NO_CLASS
    for class_types, basis in (
        (class_type_map or {}, TypeBasis.CONFIGURED),
        (KNOWN_CONNECTOR_TYPES, TypeBasis.BUILT_IN),
    ):
        kind = _mapped_type(class_name, class_types)
        if kind is not None:
            if kind not in (ConnectorType.SOURCE, ConnectorType.SINK):
                raise ValueError(
                    f"connector type of {class_name} must be {ConnectorType.SOURCE.value!r} or "
                    f"{ConnectorType.SINK.value!r}, not {kind!r}"
                )
            return ConnectorType(kind), basis
    if any(config.get(name) is not None for name in SINK_TOPICS_CONFIGS):
        return ConnectorType.SINK, TypeBasis.GUESSED
    return ConnectorType.SOURCE, TypeBasis.GUESSED


def config_connector_type(
    config: Mapping[str, object] | None, class_type_map: Mapping[str, str] | None = None
) -> ConnectorType:
    """``source``, ``sink`` or ``unknown`` (:class:`~connect_state.core.vocabulary.ConnectorType`): the type of
    :func:`connector_type_basis`."""
    return connector_type_basis(config, class_type_map)[0]
