"""The herder on the app's resources: :class:`AppHerderIO` (:class:`~connect_state.herder.io.HerderIO` over the
config topic's tail, the tables, the fresh reads of :mod:`connect_state.api.fresh`, the app's Kafka writer and
consumer-group admin) and :func:`get_herder`, one per request on ``g`` (as the Flask tutorial's ``get_db``)."""

from __future__ import annotations

from typing import Any

from flask import g

from connect_state.api import rows
from connect_state.api.fresh import fresh_active_topics, fresh_connector, fresh_source_rows
from connect_state.api.resources import get_admin, get_settings, get_tables, get_writer
from connect_state.core.errors import TableNotFoundError
from connect_state.herder import Herder
from connect_state.tables.schemas import CONNECTORS, SINK_OFFSETS, TableSpec


def _rows(spec: TableSpec, columns: list[str], filters: list[tuple[str, str, object]] | None = None) -> list[Any]:
    try:
        return get_tables().rows(spec, filters=filters, columns=columns)
    except TableNotFoundError:
        return []


class AppHerderIO:
    """:class:`~connect_state.herder.io.HerderIO` on the current app's resources."""

    connector = staticmethod(fresh_connector)
    connector_row = staticmethod(rows.connector_row)
    active_topics = staticmethod(fresh_active_topics)
    source_rows = staticmethod(fresh_source_rows)
    writer = staticmethod(get_writer)
    admin = staticmethod(get_admin)

    def committed_topics(self, group: str) -> set[str]:
        return {str(row["topic"]) for row in _rows(SINK_OFFSETS, ["topic"], [("group_id", "=", group)])}

    def connector_names(self) -> set[str]:
        return {str(row["name"]) for row in _rows(CONNECTORS, ["name", "deleted"]) if not row.get("deleted")}


def get_herder() -> Herder:
    """The request's herder, on the app's settings and resources."""
    if "herder" not in g:
        g.herder = Herder(get_settings(), AppHerderIO())
    return g.herder
