"""The herder on the app's resources: :class:`AppHerderIO` (:class:`~connect_state.herder.io.HerderIO` over the
config topic's tail, the tables, the fresh reads of :mod:`connect_state.api.fresh`, the app's Kafka writer and
consumer-group admin) and :func:`get_herder`, one per request on ``g`` (as the Flask tutorial's ``get_db``)."""

from __future__ import annotations

from typing import Any

from flask import g

from connect_state.api import rows
from connect_state.api.fresh import fresh_active_topics, fresh_connector, fresh_source_rows
from connect_state.api.resources import get_admin, get_settings, get_tables, get_writer
from connect_state.connect.offset_stores import ConnectorOffsetStores
from connect_state.errors import TableNotFoundError
from connect_state.folds.config_snapshot import ConnectorConfigView
from connect_state.herder import GroupAdmin, Herder, RecordWriter
from connect_state.tables import CONNECTORS, SINK_OFFSETS, TableSpec


def _rows(spec: TableSpec, columns: list[str], filters: list[tuple[str, str, object]] | None = None) -> list[Any]:
    try:
        return get_tables().rows(spec, filters=filters, columns=columns)
    except TableNotFoundError:
        return []


class AppHerderIO:
    """:class:`~connect_state.herder.io.HerderIO` on the current app's resources."""

    def connector(self, name: str) -> ConnectorConfigView:
        return fresh_connector(name)

    def connector_row(self, name: str) -> dict[str, Any] | None:
        return rows.connector_row(name)

    def active_topics(self, name: str) -> list[str]:
        return fresh_active_topics(name)

    def source_rows(self, name: str, stores: ConnectorOffsetStores) -> list[dict[str, Any]]:
        return fresh_source_rows(name, stores)

    def committed_topics(self, group: str) -> set[str]:
        return {str(row["topic"]) for row in _rows(SINK_OFFSETS, ["topic"], [("group_id", "=", group)])}

    def connector_names(self) -> set[str]:
        return {str(row["name"]) for row in _rows(CONNECTORS, ["name", "deleted"]) if not row.get("deleted")}

    def writer(self) -> RecordWriter:
        return get_writer()

    def admin(self) -> GroupAdmin:
        return get_admin()


def get_herder() -> Herder:
    """The request's herder, on the app's settings and resources."""
    if "herder" not in g:
        g.herder = Herder(get_settings(), AppHerderIO())
    return g.herder
