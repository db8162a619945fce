"""A deleted connector brought back (issue 36): ``POST /connectors/<name>/restore[?at=<t>][&initial_state=<S>]``.

What Connect's leader writes to create a connector with ``initial_state`` (KIP-980, 3.7+;
``DistributedHerder.putConnectorConfig``): ``target-state-<name>`` first, then ``connector-<name>`` with the config
(``{"properties":{...}}``, :func:`~connect_state.formats.config.serialize_connector_config`), in one acknowledged
send; the workers do the rest (a RUNNING or PAUSED connector gets its task configs from the leader, a STOPPED one
none). The config is the connector's last one at or before ``at`` (default: the one its last deletion removed), from
``connector_events``: the table keeps each version's config as the config topic had it, secrets included (they are
redacted only when shown: :func:`connect_state.tables.history.config_versions`), so the values written are those
Connect had, and the answer never shows them. In order:

1. 409 ``"Connector <name> already exists"`` (Connect's ``AlreadyExistsException``) when the config topic read to its
   end has the connector; nothing is read from the history, nothing written;
2. 404 :func:`no_deletion_message` when the history holds no deletion of the connector;
3. 400 :func:`no_config_before_message` when it holds no config of it at or before ``at``; 404
   :func:`config_not_kept_message` when that version's config was recorded before configs were kept in events;
4. the two records, acknowledged in order.

The answer (:class:`ConnectorRestore`) names the version restored and, when the KIP-883 cleanup of the deletion that
ended that version already ran hooks (``connector_deletions`` rows ``hook:<name>`` succeeded), which ones: the
external resources they removed are not restored. The history read is the caller's (:class:`ConnectorHistory`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from connect_state.core.vocabulary import TargetState
from connect_state.formats.config import (
    ConfigWrite,
    connector_config_key,
    serialize_connector_config,
    serialize_target_state,
    target_state_key,
)
from connect_state.herder.base import HerderBase, log
from connect_state.herder.errors import BadRequestError, ConflictError, NotFoundError
from connect_state.tables.schemas import iso_utc

__all__ = [
    "ConnectorHistory",
    "ConnectorRestore",
    "InitialState",
    "ReviveHerder",
    "already_exists_message",
    "config_not_kept_message",
    "connector_restore_records",
    "no_config_before_message",
    "no_deletion_message",
]

Row = Mapping[str, Any]

CONFIG_EVENTS = ("created", "reconfigured")
DELETED = "deleted"
HOOK_STEP_PREFIX = "hook:"
SUCCEEDED = "succeeded"


class InitialState(StrEnum):
    """KIP-980's ``initial_state`` (``CreateConnectorRequest.InitialState``) and the target state each one is."""

    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"

    @property
    def target_state(self) -> TargetState:
        return TargetState.STARTED if self is InitialState.RUNNING else TargetState(self.value)


class ConnectorHistory(Protocol):
    """What bringing a connector back reads from the history (the API: the tables)."""

    def config_events(self, name: str) -> Sequence[Row]:
        """The connector's ``connector_events`` rows of the events ``created``, ``reconfigured`` and ``deleted``
        (``event``, ``details`` JSON, ``kafka_offset``, ``kafka_timestamp`` as epoch ms)."""
        ...

    def deletion_steps(self, name: str, deletion_offset: int) -> Sequence[Row]:
        """The ``connector_deletions`` rows (``step``, ``status``) of the deletion at that config-topic offset."""
        ...


def already_exists_message(name: str) -> str:
    """``AlreadyExistsException("Connector " + connName + " already exists")`` (``putConnectorConfig``)."""
    return f"Connector {name} already exists"


def no_deletion_message(name: str) -> str:
    """Ours: 404 when the history holds no deletion of the connector."""
    return f"No deleted connector {name} in the history (connector_events has no deletion of it)"


def no_config_before_message(name: str, at: int, first: int | None) -> str:
    """Ours: 400 when the history holds no config of the connector at or before ``at``."""
    since = f"; its first config kept is of {iso_utc(first)} ({first})" if first is not None else ""
    return f"No config of connector {name} at or before {iso_utc(at)} ({at}) in the history{since}"


def config_not_kept_message(name: str, offset: int) -> str:
    """Ours: 404 when the version's config was not kept (recorded before connector_events kept configs)."""
    return (
        f"The config of connector {name} at config-topic offset {offset} is not kept: its connector_events row was "
        "recorded before configs were kept in events. Nothing was written."
    )


def connector_restore_records(name: str, config: Mapping[str, str | None], state: InitialState) -> list[ConfigWrite]:
    """``target-state-<name>`` then ``connector-<name>``, as ``putConnectorConfig`` with a target state writes them."""
    return [
        (target_state_key(name), serialize_target_state(state.target_state)),
        (connector_config_key(name), serialize_connector_config(config)),
    ]


@dataclass(frozen=True)
class ConnectorRestore:
    """What was written: the version restored (its config-topic offset and time), the deletion that ended it, the
    target state, and the cleanup hooks that already ran for that deletion. Never the config."""

    name: str
    connector_class: str | None
    initial_state: InitialState
    config_offset: int
    config_time: int | None
    deletion_offset: int | None
    deleted_at: int | None
    hooks_ran: list[str]

    @property
    def messages(self) -> list[str]:
        lines = [
            f"Connector {self.name} restored {self.initial_state.value} with its config of config-topic offset "
            f"{self.config_offset}" + (f" ({iso_utc(self.config_time)})" if self.config_time is not None else "")
        ]
        if self.hooks_ran:
            lines.append(
                f"The KIP-883 cleanup of its deletion already ran the hooks {', '.join(self.hooks_ran)}: the external "
                "resources they removed are not restored"
            )
        return lines

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "connector_class": self.connector_class,
            "initial_state": self.initial_state.value,
            "config_offset": self.config_offset,
            "config_timestamp": self.config_time,
            "deletion_offset": self.deletion_offset,
            "deleted_at": self.deleted_at,
            "cleanup_hooks_ran": self.hooks_ran,
            "message": "\n".join(self.messages),
        }


def _details(row: Row) -> dict[str, Any]:
    details = json.loads(row["details"]) if row.get("details") else {}
    return details if isinstance(details, dict) else {}


def _time(row: Row) -> int | None:
    value = row.get("kafka_timestamp")
    return int(value) if value is not None else None


class ReviveHerder(HerderBase):
    """Bringing back a deleted connector (``POST /connectors/<name>/restore``)."""

    def restore_connector(
        self, name: str, at: int | None, state: InitialState, history: ConnectorHistory
    ) -> ConnectorRestore:
        """Write the connector's last config at or before ``at`` (default: before its last deletion) in ``state``
        (see the module)."""
        if self.io.connector(name).exists:
            raise ConflictError(already_exists_message(name))
        events = sorted(history.config_events(name), key=lambda row: int(row["kafka_offset"]))
        deletions = [row for row in events if row["event"] == DELETED]
        if not deletions:
            raise NotFoundError(no_deletion_message(name))
        versions = [row for row in events if row["event"] in CONFIG_EVENTS]
        if at is not None:
            versions = [row for row in versions if (_time(row) or 0) <= at]
            if not versions:
                first = min((t for row in events if (t := _time(row)) is not None), default=None)
                raise BadRequestError(no_config_before_message(name, at, first))
        else:
            last_deletion = int(deletions[-1]["kafka_offset"])
            versions = [row for row in versions if int(row["kafka_offset"]) < last_deletion]
            if not versions:
                raise NotFoundError(config_not_kept_message(name, last_deletion))
        version = versions[-1]
        offset = int(version["kafka_offset"])
        config = _details(version).get("config")
        if not isinstance(config, dict):
            raise NotFoundError(config_not_kept_message(name, offset))
        deletion = next((row for row in deletions if int(row["kafka_offset"]) > offset), None)
        deletion_offset = int(deletion["kafka_offset"]) if deletion is not None else None
        hooks = (
            sorted(
                str(row["step"])[len(HOOK_STEP_PREFIX) :]
                for row in history.deletion_steps(name, deletion_offset)
                if str(row["step"]).startswith(HOOK_STEP_PREFIX) and row.get("status") == SUCCEEDED
            )
            if deletion_offset is not None
            else []
        )
        check = f"GET /connectors/{name} shows whether it was created; retrying answers 409 once the config is written."
        self._send_config(connector_restore_records(name, config, state), f"the restore of connector {name}", check)
        log.info("Connector %s restored %s with its config of offset %d", name, state.value, offset)
        connector_class = config.get("connector.class")
        return ConnectorRestore(
            name,
            connector_class if isinstance(connector_class, str) else None,
            state,
            offset,
            _time(version),
            deletion_offset,
            _time(deletion) if deletion is not None else None,
            hooks,
        )
