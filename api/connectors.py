"""KIP-875 connector lifecycle, with Connect's semantics (spec §3.4, §5.3, §7.3), from the ``connectors`` table.

* ``GET /connectors`` -> 200, the names of the connectors that have a config and are not deleted
  (``ClusterConfigState.connectors()``: the config snapshot). Connect's order is unspecified; ours is sorted.
* ``GET /connectors/<name>/status`` -> 200 ``ConnectorStateInfo``
  (:func:`~connect_state.connect.rest.connector_state_info`). Like ``AbstractHerder.connectorStatus`` it
  comes purely from the status store, with no config check: 404 ``"No status found for connector <name>"`` when there
  is no connector status. A deleted connector whose status records were not tombstoned yet still answers them, as
  Connect does until its leader tombstones the statuses.
* ``PUT /connectors/<name>/stop`` -> 204, ``PUT .../pause`` and ``PUT .../resume`` -> 202, all without a body, once
  the records Connect's herder writes for the operation (:func:`~connect_state.formats.config.stop_records` and so on)
  have been acknowledged (``acks=all``) by the config topic, in order, within ``api.kafka.write.timeout.ms``. Each
  answers 404 ``"Unknown connector <name>"`` when the config snapshot has no such connector (no row, a deleted one,
  or one without config), as ``DistributedHerder.stopConnector`` and ``AbstractHerder.pauseConnector`` /
  ``resumeConnector`` do. Connect writes a stop only from the leader (followers forward it); the records are the
  same whoever writes them, and every worker reading the config topic honours them.

All three writes are idempotent, as in Connect: stopping a STOPPED connector writes the same records again.

* ``DELETE /connectors/<name>`` -> 204 without a body, once the tombstones Connect's leader writes
  (``KafkaConfigBackingStore.removeConnectorConfig``: ``connector-<name>`` then ``target-state-<name>``,
  :func:`~connect_state.formats.config.delete_records`) have been acknowledged; 404 ``"Connector <name> not found"``
  when the config snapshot has no such connector (``DistributedHerder.deleteConnectorConfig``). Every worker honours
  the tombstones (it stops the connector, the leader tombstones its statuses); the cleanup job
  (``connect-state-cleanup``, KIP-883) then cleans up after it like after a deletion made through Connect.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, jsonify

from connect_state.api.errors import ConnectRestException, no_content
from connect_state.api.resources import get_settings, get_tables, get_writer
from connect_state.connect.rest import (
    connector_not_found_message,
    connector_state_info,
    status_not_found_message,
    unknown_connector_message,
)
from connect_state.formats.config import ConfigWrite, delete_records, pause_records, resume_records, stop_records
from connect_state.tables import CONNECTORS

bp = Blueprint("connectors", __name__, url_prefix="/connectors")


def connector_row(name: str) -> dict[str, Any] | None:
    """The connector's row of the ``connectors`` table (deleted ones included), or None when there is none."""
    rows = get_tables().rows(CONNECTORS, filters=[("name", "=", name)])
    return rows[0] if rows else None


def is_configured(row: dict[str, Any] | None) -> bool:
    """Whether the config snapshot has the connector: a row that has a config and is not deleted."""
    return row is not None and row.get("config") is not None and not row.get("deleted")


@bp.get("")
def list_connectors() -> Response:
    """``GET /connectors`` without ``expand``: a JSON list of the configured connectors' names, sorted."""
    rows = get_tables().rows(CONNECTORS, columns=["name", "config", "deleted"])
    return jsonify(sorted({row["name"] for row in rows if is_configured(row)}))


@bp.get("/<connector>/status")
def get_connector_status(connector: str) -> Response:
    """``ConnectorStateInfo`` from the connector's status row; 404 when it has no connector status."""
    row = connector_row(connector)
    if row is None or row.get("connector_state") is None:
        raise ConnectRestException(404, status_not_found_message(connector))
    return jsonify(connector_state_info({**row, "tasks": row.get("tasks") or []}))


def _write_config_records(
    connector: str,
    records_for: Callable[[str], list[ConfigWrite]],
    not_found: Callable[[str], str] = unknown_connector_message,
) -> None:
    """Check the connector is in the config snapshot, then send its records to the config topic, in order."""
    if not is_configured(connector_row(connector)):
        raise ConnectRestException(404, not_found(connector))
    settings = get_settings()
    records = [(key.encode("utf-8"), value) for key, value in records_for(connector)]
    get_writer().send(settings.config_storage_topic, records, settings.api_kafka_write_timeout_ms)


@bp.put("/<connector>/stop")
def stop_connector(connector: str) -> Response:
    """``DistributedHerder.stopConnector``: ``commit-<name>`` ``{"tasks":0}`` then ``target-state-<name>`` STOPPED;
    204 (a ``void`` resource method)."""
    _write_config_records(connector, stop_records)
    return no_content(204)


@bp.put("/<connector>/pause")
def pause_connector(connector: str) -> Response:
    """``AbstractHerder.pauseConnector``: ``target-state-<name>`` PAUSED; 202."""
    _write_config_records(connector, pause_records)
    return no_content(202)


@bp.put("/<connector>/resume")
def resume_connector(connector: str) -> Response:
    """``AbstractHerder.resumeConnector``: ``target-state-<name>`` STARTED; 202 (the leader then regenerates the tasks
    of a STOPPED connector)."""
    _write_config_records(connector, resume_records)
    return no_content(202)


@bp.delete("/<connector>")
def delete_connector(connector: str) -> Response:
    """``DistributedHerder.deleteConnectorConfig``: tombstones for ``connector-<name>`` then ``target-state-<name>``;
    204."""
    _write_config_records(connector, delete_records, connector_not_found_message)
    return no_content(204)
