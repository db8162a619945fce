"""Loading operator-supplied Python plugins: KIP-883 deletion hooks, KIP-910 heartbeat providers and KIP-875
``alterOffsets`` rules.

A plugin is registered either by a ``module:attribute`` path in ``conf/`` (``module.attribute`` is accepted too) or
by a Python entry point of the package that ships it (``[options.entry_points]`` in its ``setup.cfg``). Only the
standard library and the pure :mod:`connect_state.connect` are used, so jobs and the API can both load plugins.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points

from connect_state.connect.alter_offsets import AlterOffsetsRule, AlterOffsetsRules, as_rule
from connect_state.core.errors import ConfigError

DELETION_HOOKS_GROUP = "connect_state.deletion_hooks"
DELETION_HOOKS_BY_CLASS_GROUP = "connect_state.deletion_hooks_by_class"
HEARTBEAT_PROVIDERS_GROUP = "connect_state.heartbeat_providers"
ALTER_OFFSETS_GROUP = "connect_state.alter_offsets"


class PluginError(ConfigError):
    """A configured plugin path cannot be imported or does not name an attribute."""


def load_object(path: str) -> object:
    """The object named by ``"package.module:attribute"`` (or ``"package.module.attribute"``)."""
    text = path.strip()
    if ":" in text:
        module_name, _, attribute = text.partition(":")
    else:
        module_name, _, attribute = text.rpartition(".")
    if not module_name or not attribute:
        raise PluginError(f"plugin path {path!r}: expected 'module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise PluginError(f"plugin path {path!r}: cannot import module {module_name!r}: {err}") from err
    target: object = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise PluginError(f"plugin path {path!r}: module {module_name!r} has no attribute {attribute!r}") from None
    return target


def split_paths(value: str) -> list[str]:
    """A comma-separated setting as a list of non-empty, stripped items."""
    return [item.strip() for item in value.split(",") if item.strip()]


def entry_point_objects(group: str) -> dict[str, object]:
    """Every entry point of ``group`` in the installed distributions, loaded, by entry-point name."""
    loaded: dict[str, object] = {}
    for entry in entry_points(group=group):
        try:
            loaded[entry.name] = entry.load()
        except Exception as err:  # any import failure of a third-party plugin is a configuration problem
            raise PluginError(f"entry point {entry.name!r} of group {group!r} cannot be loaded: {err}") from err
    return loaded


def load_named_plugins(paths: Iterable[str], group: str) -> dict[str, object]:
    """Plugins from ``paths`` (named by their path) and from the entry points of ``group`` (named by entry name)."""
    plugins = entry_point_objects(group)
    for path in paths:
        plugins[path] = load_object(path)
    return plugins


def load_keyed_plugins(paths_by_key: Mapping[str, str], group: str) -> dict[str, object]:
    """Plugins keyed by something else than their path (e.g. heartbeat providers by connector class): the entry
    points of ``group`` by entry name, then ``paths_by_key`` (which win)."""
    plugins = entry_point_objects(group)
    for key, path in paths_by_key.items():
        plugins[key] = load_object(path)
    return plugins


def load_alter_offsets_rules(paths_by_class: Mapping[str, str]) -> AlterOffsetsRules:
    """KIP-875 ``alterOffsets`` rules by connector class (``offsets.alter.rules`` and the entry points of
    :data:`ALTER_OFFSETS_GROUP`, named by class), over the built-in rules of Kafka's own connectors."""
    configured: dict[str, AlterOffsetsRule] = {}
    for connector_class, plugin in load_keyed_plugins(paths_by_class, ALTER_OFFSETS_GROUP).items():
        try:
            configured[connector_class] = as_rule(plugin)
        except TypeError as err:
            raise PluginError(f"alterOffsets rule for {connector_class}: {err}") from err
    return AlterOffsetsRules(configured)
