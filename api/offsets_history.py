"""The history a restore reads (:class:`~connect_state.herder.restore.OffsetsHistory` on the app's tables): the
connector's first record in ``connector_events``, and its offsets as of a time, as
``GET /connectors/<name>/history/offsets?at=`` answers them (:mod:`connect_state.api.history`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_state.api.resources import get_settings, get_tables
from connect_state.connect.offset_stores import connector_consumer_group, connector_offset_stores
from connect_state.core.vocabulary import ConnectorType
from connect_state.tables import history
from connect_state.tables import history_reads as reads
from connect_state.tables.schemas import CONNECTOR_EVENTS, SINK_OFFSETS_HISTORY, SOURCE_OFFSETS_HISTORY, epoch_ms

__all__ = ["TablesOffsetsHistory"]


class TablesOffsetsHistory:
    """:class:`~connect_state.herder.restore.OffsetsHistory` on the current app's history tables."""

    def kept_from(self, name: str) -> int | None:
        scan = get_tables().scan(CONNECTOR_EVENTS)
        rows = reads.table_rows(scan, CONNECTOR_EVENTS, [("connector", "=", name)], ["kafka_timestamp"])
        times = [ms for row in rows if (ms := epoch_ms(row["kafka_timestamp"])) is not None]
        return min(times) if times else None

    def offsets_as_of(
        self, name: str, kind: ConnectorType, config: Mapping[str, Any], at: int
    ) -> list[dict[str, object]]:
        tables = get_tables()
        if kind == ConnectorType.SINK:
            group = connector_consumer_group(name, dict(config))
            spec = SINK_OFFSETS_HISTORY
            filters = [("group_id", "=", group), *reads.at_or_before(at)]
            return history.sink_offsets_as_of(reads.table_rows(tables.scan(spec), spec, filters), at)
        spec = SOURCE_OFFSETS_HISTORY
        filters = [("connector", "=", name), *reads.at_or_before(at)]
        entries = history.source_offsets_as_of(reads.table_rows(tables.scan(spec), spec, filters), at)
        # The value Connect reads is the one of the connector's value store (its own topic when it has one).
        stores = connector_offset_stores(get_settings().offset_storage_topic, dict(config))
        return [entry for entry in entries if entry.get("offsets_topic") == stores.value_topic]
