"""The herder: every write of the API decided as Connect's (``AbstractHerder``, ``DistributedHerder``), over
:class:`~connect_state.herder.io.HerderIO`.

* **stop, pause, resume** (``DistributedHerder.stopConnector``, ``AbstractHerder.pauseConnector`` /
  ``resumeConnector``): :class:`NotFoundError` ``"Unknown connector <name>"`` unless the config topic read to its end
  has the connector, then the records Connect's herder writes (:func:`~connect_state.formats.config.stop_records`...),
  acknowledged in order. Should a deletion land between the check and the write, the target state written is
  tombstoned again at once and the answer is Connect's 404 (no target state is left for a connector that no longer
  exists).
* **delete** (``DistributedHerder.deleteConnectorConfig``): tombstones for ``connector-<name>`` then
  ``target-state-<name>``; a deletion whose second tombstone is missing (the config gone, the target state left) is
  completed by the target-state tombstone alone; 404 ``"Connector <name> not found"`` when neither is left.
* **restart** (``DistributedHerder.restartConnectorAndTasks``, KIP-745): 404 ``"Unknown connector: <name>"``, then
  ``restart-connector-<name>``; with ``includeTasks`` or ``onlyFailed`` the restart plan's ``ConnectorStateInfo``
  (404 ``"Status for connector <name> not found"`` without a status, the request written all the same). One task
  alone cannot be restarted through the config topic: :class:`UnsupportedError`.
* **topics reset** (KIP-558): 403 unless topic tracking and its reset are enabled, then a tombstone for every
  ``status-topic-<topic>:connector-<name>`` key of the connector's active topics read to the status topic's end.
* **offsets alter and reset** (KIP-875, KIP-618): :class:`~connect_state.herder.offsets.OffsetsHerder`.
* **offsets restored as of a time** (ours, issue 36): :class:`~connect_state.herder.restore.RestoreHerder`.
* **a deleted connector brought back**, with its offsets when asked (ours, issue 36):
  :class:`~connect_state.herder.revive.ReviveHerder`.

Decided as Connect's leader would (issue 10): existence, target state and task count come from the config topic read
to its end offset at the request (:meth:`HerderIO.connector`), not from the lagging ``connectors`` table, so a stop
sent just after a deletion through Connect is refused; what cannot be established in time is a
:class:`NotEstablishedError` (409; :class:`KafkaUnreachableError`, 503, when Kafka cannot be reached) and nothing is
written. Every write is idempotent to the end, so a retry after a partial failure completes it; a write not
acknowledged in time is a :class:`ConnectError` saying the outcome is unknown and how to find out; Kafka unreachable
a :class:`KafkaUnreachableError`, nothing sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from connect_state.connect import rest
from connect_state.formats.config import (
    ConfigWrite,
    RestartRequest,
    delete_records,
    pause_records,
    restart_request_key,
    resume_records,
    serialize_restart_request,
    stop_records,
    target_state_key,
)
from connect_state.formats.status import topic_status_tombstone_keys
from connect_state.herder.base import log
from connect_state.herder.errors import ForbiddenError, NotEstablishedError, NotFoundError, UnsupportedError
from connect_state.herder.move import MoveHerder
from connect_state.herder.restore import RestoreHerder


def task_restart_message(connector: str, task: int) -> str:
    """Ours: why a single task cannot be restarted through the config topic, and what to do instead."""
    return (
        f"connect-state cannot restart task {connector}-{task} alone: Connect's config topic carries restart requests "
        "for a connector (KIP-745), not for one task. Use POST "
        f"/connectors/{connector}/restart?includeTasks=true&onlyFailed=true to restart the connector's failed tasks "
        "(and the connector if it failed), or send this request to a Connect worker's REST API."
    )


def _position_offset(position: object) -> int | None:
    """The offset of a written record as the writer reports it (a ``RecordPosition``, or ``(partition, offset)``)."""
    offset = getattr(position, "offset", None)
    if offset is None and isinstance(position, tuple) and len(position) == 2:
        offset = position[1]
    return offset if isinstance(offset, int) else None


class Herder(MoveHerder, RestoreHerder):
    """Connect's herder for the writes connect-state makes through Kafka."""

    # --- target states -----------------------------------------------------------------------------------------------

    def stop_connector(self, name: str) -> None:
        """``commit-<name>`` ``{"tasks":0}`` then ``target-state-<name>`` STOPPED."""
        self._target_state_write(name, "stop", stop_records)

    def pause_connector(self, name: str) -> None:
        """``target-state-<name>`` PAUSED."""
        self._target_state_write(name, "pause", pause_records)

    def resume_connector(self, name: str) -> None:
        """``target-state-<name>`` STARTED (the leader then regenerates the tasks of a STOPPED connector)."""
        self._target_state_write(name, "resume", resume_records)

    def _target_state_write(self, name: str, action: str, records_for: Callable[[str], list[ConfigWrite]]) -> None:
        self._configured(name, rest.unknown_connector_message)
        check = f"GET /connectors/{name}/status shows its state once the connector-state job has caught up."
        hint = (
            f"Retrying PUT /connectors/{name}/{action} is safe: it writes the same records again and completes a "
            f"partial write. {check}"
        )
        positions = self._send_config(records_for(name), f"the {action} of connector {name}", hint)
        written = _position_offset(positions[-1]) if positions else None
        if written is not None:
            self._remove_orphan_target_state(name, action, written)

    def _remove_orphan_target_state(self, name: str, action: str, written: int) -> None:
        """After a target-state write at config offset ``written``: when the config topic now shows the connector
        deleted by a tombstone before that offset, the deletion came first, so the answer is Connect's 404; if our
        record is still the target state in effect it is tombstoned, as Connect's deletion would have. Best effort
        when the config topic cannot be read."""
        try:
            view = self.io.connector(name)
        except NotEstablishedError as err:
            log.warning("Cannot check that connector %s still exists after its %s: %s", name, action, err.message)
            return
        deleted_at = view.row.get("config_offset")
        if view.exists or deleted_at is None or deleted_at > written:
            return
        if view.target_state_offset == written:
            log.warning(
                "Connector %s was deleted before our %s landed (config offset %s): removing the target state we wrote",
                name,
                action,
                written,
            )
            check = f"Retry DELETE /connectors/{name}: it removes a target state left after a deletion."
            self._send_config([(target_state_key(name), None)], f"the removal of {name}'s target state", check)
        raise NotFoundError(rest.unknown_connector_message(name))

    def delete_connector(self, name: str) -> None:
        """Tombstones for ``connector-<name>`` then ``target-state-<name>``, or the second alone to complete a
        deletion."""
        view = self.io.connector(name)
        if view.exists:
            records = delete_records(name)
        elif view.target_state_left:
            log.info("Connector %s has no config but a target state: writing the missing tombstone", name)
            records = [(target_state_key(name), None)]
        else:
            raise NotFoundError(rest.connector_not_found_message(name))
        check = (
            f"Retrying DELETE /connectors/{name} is safe: it completes a partial deletion, and answers 404 once the "
            "connector is gone."
        )
        self._send_config(records, f"the deletion of connector {name}", check)

    # --- restarts ----------------------------------------------------------------------------------------------------

    def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, object] | None:
        """``restart-connector-<name>``; the restart plan's ``ConnectorStateInfo`` with ``include_tasks`` or
        ``only_failed``, else None."""
        self._configured(name, rest.unknown_connector_colon_message)
        restart = RestartRequest(include_tasks=include_tasks, only_failed=only_failed)
        check = (
            f"Retrying POST /connectors/{name}/restart is safe: the workers act on the latest request. "
            f"GET /connectors/{name}/status shows the restart."
        )
        record = (restart_request_key(name), serialize_restart_request(restart))
        self._send_config([record], f"the restart of connector {name}", check)
        if not include_tasks and not only_failed:
            return None
        row = self.io.connector_row(name)
        plan = rest.restart_state_info(row, include_tasks, only_failed) if row is not None else None
        if plan is None:
            raise NotFoundError(rest.restart_status_not_found_message(name))
        return plan

    def restart_task(self, name: str, task: int) -> NoReturn:
        """404 for an unknown connector, else :class:`UnsupportedError`: no config-topic record restarts one task."""
        self._configured(name, rest.unknown_connector_colon_message)
        raise UnsupportedError(task_restart_message(name, task))

    # --- active topics -----------------------------------------------------------------------------------------------

    def check_topic_tracking(self) -> None:
        """403 ``"Topic tracking is disabled."`` when ``topic.tracking.enable=false``."""
        if not self.settings.topic_tracking_enable:
            raise ForbiddenError(rest.TRACKING_DISABLED)

    def reset_active_topics(self, name: str) -> None:
        """Tombstones for the connector's topic-status keys (no existence check, as in Connect)."""
        self.check_topic_tracking()
        if not self.settings.topic_tracking_allow_reset:
            raise ForbiddenError(rest.RESET_DISABLED)
        topics = self.io.active_topics(name)
        if not topics:
            return
        records = [(key.encode("utf-8"), None) for key in topic_status_tombstone_keys(name, topics)]
        unknown = (
            f"Kafka did not acknowledge the topics reset of connector {name} within "
            f"{self.settings.api_kafka_write_timeout_ms} ms (api.kafka.write.timeout.ms): the outcome is unknown, the "
            f"tombstones may still be written. Retrying PUT /connectors/{name}/topics/reset is safe; "
            f"GET /connectors/{name}/topics shows the topics once the active-topics job has caught up."
        )
        self._send(self.settings.status_storage_topic, records, f"the topics reset of {name}", unknown)
