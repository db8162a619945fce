"""KIP-875 connector lifecycle, with Connect's semantics (spec §3.4, §5.3, §7.3): reads from the ``connectors``
table, writes decided on the config topic read to its end.

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
  answers 404 ``"Unknown connector <name>"`` when the connector has no config, as ``DistributedHerder.stopConnector``
  and ``AbstractHerder.pauseConnector`` / ``resumeConnector`` do. Connect writes a stop only from the leader
  (followers forward it); the records are the same whoever writes them, and every worker reading the config topic
  honours them.
* ``DELETE /connectors/<name>`` -> 204 without a body, once the tombstones Connect's leader writes
  (``KafkaConfigBackingStore.removeConnectorConfig``: ``connector-<name>`` then ``target-state-<name>``,
  :func:`~connect_state.formats.config.delete_records`) have been acknowledged; 404 ``"Connector <name> not found"``
  when the connector has no config (``DistributedHerder.deleteConnectorConfig``). Every worker honours the tombstones
  (it stops the connector, the leader tombstones its statuses); the cleanup job (``connect-state-cleanup``, KIP-883)
  then cleans up after it like after a deletion made through Connect.

**Decided as Connect's leader would** (issue 10): existence, target state and task count come from the config topic
read to its end offset at the request (:func:`connect_state.api.fresh.fresh_connector`), not from the ``connectors``
table, which lags: a stop sent just after a deletion through Connect answers 404 and writes nothing. When the config
topic cannot be read to its end within ``api.fresh.read.timeout.ms`` the request answers 409 (503 when Kafka cannot be
reached) and writes nothing.

**Recoverable.** Every write is idempotent to the end, so a retry after a partial failure completes it: a stop whose
``target-state-`` record failed after its ``commit-`` record is written again whole; a deletion whose
``target-state-`` tombstone is missing (the config gone, the target state left, e.g. a STOPPED written after a
deletion) is completed by the next ``DELETE``, which writes that tombstone and answers 204 instead of 404. A write
whose acknowledgement times out answers 500 saying the outcome is unknown and how to find out. No target state is
left for a connector that no longer exists: should a deletion land between our check and our write, the record we
wrote is tombstoned again at once and the answer is Connect's 404.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, jsonify, request

from connect_state.api import live
from connect_state.api.errors import ConnectRestException, no_content
from connect_state.api.fresh import fresh_connector, position_offset, read_config
from connect_state.api.resources import get_settings, get_tables, get_writer
from connect_state.connect.rest import (
    connector_not_found_message,
    connector_state_info,
    status_not_found_message,
    unknown_connector_message,
)
from connect_state.errors import KafkaUnavailableError, KafkaWriteTimeout
from connect_state.formats.config import (
    ConfigWrite,
    delete_records,
    pause_records,
    resume_records,
    stop_records,
    target_state_key,
)
from connect_state.tables import CONNECTORS

log = logging.getLogger(__name__)

bp = Blueprint("connectors", __name__, url_prefix="/connectors")


def connector_row(name: str) -> dict[str, Any] | None:
    """The connector's row of the ``connectors`` table (deleted ones included), or None when there is none."""
    rows = get_tables().rows(CONNECTORS, filters=[("name", "=", name)])
    return rows[0] if rows else None


def status_row(name: str) -> dict[str, Any] | None:
    """The connector's row with the status records the jobs have not folded yet (:mod:`connect_state.api.live`):
    what a status answer is made of."""
    return live.connector_row(name, lambda: connector_row(name))


def is_configured(row: dict[str, Any] | None) -> bool:
    """Whether the config snapshot has the connector: a row that has a config and is not deleted."""
    return row is not None and row.get("config") is not None and not row.get("deleted")


@bp.get("")
def list_connectors() -> Response:
    """``GET /connectors`` without ``expand``: a JSON list of the configured connectors' names, sorted."""
    if "expand" in request.args:  # issue 14: connect_state.api.connect_read
        from connect_state.api.connect_read import expanded_connectors

        return expanded_connectors(request.args.getlist("expand"))
    rows = get_tables().rows(CONNECTORS, columns=["name", "config", "deleted"])
    return jsonify(sorted({row["name"] for row in rows if is_configured(row)}))


@bp.get("/<connector>/status")
def get_connector_status(connector: str) -> Response:
    """``ConnectorStateInfo`` from the connector's status row; 404 when it has no connector status."""
    row = status_row(connector)
    if row is None or row.get("connector_state") is None:
        raise ConnectRestException(404, status_not_found_message(connector))
    return jsonify(connector_state_info({**row, "tasks": row.get("tasks") or []}))


# --- writes: decided on the config topic read to its end (connect_state.api.fresh) -------------------------------


def write_outcome_unknown_message(what: str, timeout_ms: int, check: str) -> str:
    """Ours: a write whose acknowledgement did not come in time (:class:`~connect_state.errors.KafkaWriteTimeout`)."""
    return (
        f"Kafka did not acknowledge {what} within {timeout_ms} ms (api.kafka.write.timeout.ms): the outcome is "
        f"unknown, the records may still be written. {check}"
    )


def send_config_records(records: list[ConfigWrite], what: str, check: str) -> list[Any]:
    """Send the records to the config topic, in order; their positions once all are acknowledged.

    A timed-out acknowledgement answers 500 saying the outcome is unknown and how to find out (``check``); Kafka
    unreachable answers 503 (nothing was sent); any other failure propagates (500 with its message).
    """
    settings = get_settings()
    encoded = [(key.encode("utf-8"), value) for key, value in records]
    try:
        return list(get_writer().send(settings.config_storage_topic, encoded, settings.api_kafka_write_timeout_ms))
    except KafkaUnavailableError as err:
        raise ConnectRestException(503, f"Nothing was written for {what}: {err}") from err
    except KafkaWriteTimeout as err:
        log.error("Write to the config topic for %s not acknowledged in time: %s", what, err)
        timeout_ms = settings.api_kafka_write_timeout_ms
        raise ConnectRestException(500, write_outcome_unknown_message(what, timeout_ms, check)) from err


def _retry_hint(connector: str, action: str, check: str) -> str:
    return (
        f"Retrying PUT /connectors/{connector}/{action} is safe: it writes the same records again and completes a "
        f"partial write. {check}"
    )


def _target_state_write(connector: str, action: str, records_for: Callable[[str], list[ConfigWrite]]) -> None:
    """Stop, pause or resume: 404 unless the config topic has the connector at its end now; then the herder's
    records; then, if a deletion landed between our check and our write, the orphan target state is removed again
    (:func:`_remove_orphan_target_state`) and the answer is Connect's 404."""
    if not fresh_connector(connector).exists:
        raise ConnectRestException(404, unknown_connector_message(connector))
    check = f"GET /connectors/{connector}/status shows its state once the connector-state job has caught up."
    what = f"the {action} of connector {connector}"
    positions = send_config_records(records_for(connector), what, _retry_hint(connector, action, check))
    written = position_offset(positions[-1]) if positions else None
    _remove_orphan_target_state(connector, action, written)


def _remove_orphan_target_state(connector: str, action: str, written: int | None) -> None:
    """After a target-state write at config offset ``written``: when the config topic now shows the connector deleted
    by a tombstone before that offset (a deletion landed between our check and our write), the log says the deletion
    came first, so the answer is Connect's 404; if our record is still the target state in effect it is tombstoned,
    as Connect's deletion would have. Best effort when the config topic cannot be read."""
    if written is None:
        return
    try:
        view = read_config([connector]).connector(connector)
    except ConnectRestException as err:
        log.warning("Cannot check that connector %s still exists after its %s: %s", connector, action, err.message)
        return
    deleted_at = view.row.get("config_offset")
    if view.exists or deleted_at is None or deleted_at > written:
        return
    if view.target_state_offset != written:
        raise ConnectRestException(404, unknown_connector_message(connector))
    log.warning(
        "Connector %s was deleted before our %s landed (config offset %s): removing the target state we wrote",
        connector,
        action,
        written,
    )
    check = f"Retry DELETE /connectors/{connector}: it removes a target state left after a deletion."
    send_config_records([(target_state_key(connector), None)], f"the removal of {connector}'s target state", check)
    raise ConnectRestException(404, unknown_connector_message(connector))


@bp.put("/<connector>/stop")
def stop_connector(connector: str) -> Response:
    """``DistributedHerder.stopConnector``: ``commit-<name>`` ``{"tasks":0}`` then ``target-state-<name>`` STOPPED;
    204 (a ``void`` resource method)."""
    _target_state_write(connector, "stop", stop_records)
    return no_content(204)


@bp.put("/<connector>/pause")
def pause_connector(connector: str) -> Response:
    """``AbstractHerder.pauseConnector``: ``target-state-<name>`` PAUSED; 202."""
    _target_state_write(connector, "pause", pause_records)
    return no_content(202)


@bp.put("/<connector>/resume")
def resume_connector(connector: str) -> Response:
    """``AbstractHerder.resumeConnector``: ``target-state-<name>`` STARTED; 202 (the leader then regenerates the tasks
    of a STOPPED connector)."""
    _target_state_write(connector, "resume", resume_records)
    return no_content(202)


@bp.delete("/<connector>")
def delete_connector(connector: str) -> Response:
    """``DistributedHerder.deleteConnectorConfig``: tombstones for ``connector-<name>`` then ``target-state-<name>``;
    204. A deletion whose second tombstone is missing (the config gone, the target state left) is completed: the
    target-state tombstone alone, 204. 404 when neither is left."""
    view = fresh_connector(connector)
    if view.exists:
        records = delete_records(connector)
    elif view.target_state_left:
        log.info("Connector %s has no config but a target state: writing the missing tombstone", connector)
        records = [(target_state_key(connector), None)]
    else:
        raise ConnectRestException(404, connector_not_found_message(connector))
    check = (
        f"Retrying DELETE /connectors/{connector} is safe: it completes a partial deletion, and answers 404 once the "
        "connector is gone."
    )
    send_config_records(records, f"the deletion of connector {connector}", check)
    return no_content(204)
