"""The API's side of :mod:`connect_state.guards` (issue 13 §5): the evidence from the tables that a consumer group a
connector's config names is the connector's own.

:func:`checked_group` lets the connector's default group ``connect-<name>`` and groups matching
``api.allowed.groups`` through without a lookup; for any other group it gathers a
:class:`~connect_state.guards.GroupEvidence`: the topics the group has committed offsets for (``sink_offsets``), the
topics the connector's tasks consume (its KIP-558 active topics, fresh: :func:`connect_state.api.fresh.
fresh_active_topics`) and the other connectors' names (``connectors``). A refusal is a
:class:`~connect_state.guards.GuardRefusal`: 400 in Connect's error JSON (api/errors.py), nothing written.
"""

from __future__ import annotations

from typing import Any

from connect_state.api.fresh import fresh_active_topics
from connect_state.api.resources import get_settings, get_tables
from connect_state.errors import TableNotFoundError
from connect_state.guards import GroupEvidence, GuardRefusal, check_consumer_group
from connect_state.tables import CONNECTORS, SINK_OFFSETS, TableSpec

Row = dict[str, Any]

__all__ = ["checked_group", "group_evidence"]


def _rows(spec: TableSpec, columns: list[str], filters: list[tuple[str, str, object]] | None = None) -> list[Row]:
    try:
        return get_tables().rows(spec, filters=filters, columns=columns)
    except TableNotFoundError:
        return []


def group_evidence(connector: str, group: str) -> GroupEvidence:
    """What the tables and the fresh active topics say about ``group`` and ``connector``."""
    committed = {str(row["topic"]) for row in _rows(SINK_OFFSETS, ["topic"], [("group_id", "=", group)])}
    others = {str(row["name"]) for row in _rows(CONNECTORS, ["name", "deleted"]) if not row.get("deleted")}
    topics = set(fresh_active_topics(connector)) if committed else set()
    return GroupEvidence(frozenset(committed), frozenset(topics), frozenset(others - {connector}))


def checked_group(connector: str, group: str) -> str:
    """``group`` when ``connector``'s offsets may be altered or deleted in it (:func:`connect_state.guards.
    check_consumer_group`); else :class:`~connect_state.guards.GuardRefusal`. The tables are read only for a group
    that is neither the default one nor allow-listed."""
    allowed = get_settings().api_allowed_groups
    try:
        return check_consumer_group(connector, group, allowed)
    except GuardRefusal:
        return check_consumer_group(connector, group, allowed, group_evidence(connector, group))
