"""A connector's class and type: ``connector.class``, the class's ``PluginUtils`` aliases, and whether it is a source
or a sink connector.

Connect knows a connector's type by loading its plugin class (``AbstractHerder.connectorType``,
``ConnectorType.from``); a reader of the internal topics cannot, so :func:`config_connector_type` guesses from the
config (see there). A connector config may name its class by the full name or by an alias: ``PluginUtils`` gives every
plugin its simple name and its simple name without the ``Connector`` suffix (``FileStreamSource`` for
``org.apache.kafka.connect.file.FileStreamSourceConnector``).
"""

from __future__ import annotations

from collections.abc import Mapping

from connect_state.connect.vocabulary import ConnectorType

__all__ = [
    "CONNECTOR_CLASS_CONFIG",
    "KNOWN_CONNECTOR_TYPES",
    "SINK_TOPICS_CONFIGS",
    "config_connector_type",
    "connector_class",
    "is_alias_of",
    "plugin_aliases",
]

#: ``ConnectorConfig.CONNECTOR_CLASS_CONFIG``.
CONNECTOR_CLASS_CONFIG = "connector.class"
#: ``SinkConnectorConfig.TOPICS_CONFIG`` / ``TOPICS_REGEX_CONFIG``: a config naming its input topics is a sink's.
SINK_TOPICS_CONFIGS = ("topics", "topics.regex")

#: Apache Kafka's own connectors, whose type the ``topics`` rule would get wrong or that need no guess. A configured
#: class→type map wins over these. Mirror source connectors have a ``topics`` setting (the topics to replicate).
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


def _mapped_type(class_name: str, class_types: Mapping[str, str]) -> str | None:
    """The type ``class_types`` gives ``class_name``: an exact entry, else an entry whose class has it as alias."""
    if class_name in class_types:
        return class_types[class_name]
    for mapped, kind in class_types.items():
        if is_alias_of(class_name, mapped):
            return kind
    return None


def config_connector_type(
    config: Mapping[str, object] | None, class_type_map: Mapping[str, str] | None = None
) -> ConnectorType:
    """``source``, ``sink`` or ``unknown`` (:class:`~connect_state.connect.vocabulary.ConnectorType`).

    Connect asks the plugin class (``AbstractHerder.connectorType``), which a reader of the topics cannot load; this
    guesses. ``unknown`` without config or without ``connector.class`` (Connect's answer too); then the class's entry
    in ``class_type_map``, then in :data:`KNOWN_CONNECTOR_TYPES` (a full class name, or a class whose alias is used);
    else ``sink`` when the config has ``topics`` or ``topics.regex`` (what every sink needs,
    ``SinkConnectorConfig.validate``), else ``source``. Raises ValueError for a map entry that is neither ``source``
    nor ``sink``.
    """
    class_name = connector_class(config)
    if config is None or class_name is None:
        return ConnectorType.UNKNOWN
    for class_types in (class_type_map or {}, KNOWN_CONNECTOR_TYPES):
        kind = _mapped_type(class_name, class_types)
        if kind is not None:
            if kind not in (ConnectorType.SOURCE, ConnectorType.SINK):
                raise ValueError(
                    f"connector type of {class_name} must be {ConnectorType.SOURCE.value!r} or "
                    f"{ConnectorType.SINK.value!r}, not {kind!r}"
                )
            return ConnectorType(kind)
    if any(config.get(name) is not None for name in SINK_TOPICS_CONFIGS):
        return ConnectorType.SINK
    return ConnectorType.SOURCE
