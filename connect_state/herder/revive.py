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
4. with its offsets asked for (``offsets=true``; an :class:`~connect_state.herder.restore.OffsetsHistory`): 400
   :func:`offsets_need_stopped_message` unless the state asked is STOPPED; the offsets as of ``at`` (default, or an
   ``at`` after the deletion: as of the deletion's time, before the KIP-883 cleanup removed any), from the history
   tables' as-of answer, against those the offsets stores (source) or the consumer group (sink) hold now
   (:func:`~connect_state.herder.restore.offsets_difference`: a partition with an offset now and none then is reset),
   checked as a ``PATCH /connectors/<name>/offsets`` is (sink: the offsets' shape, the consumer-group guard, and 409
   :func:`group_has_members_message` when the group has members; source: ``validateFormat``; both: the class's
   ``alterOffsets`` rule), all before anything is written;
5. the two records, acknowledged in order;
6. the offsets that differ, written as PATCH writes them (source: offsets-topic records with Connect's key bytes,
   in the connector's stores, after a round of zombie fencing and in a transaction with exactly-once support; sink:
   the group's offsets altered and deleted through the admin). A failure there leaves the connector restored STOPPED
   without them; the message says so and how to write them (``POST /connectors/<name>/offsets/restore``).

The answer (:class:`ConnectorRestore`) names the version restored, the offsets written (per partition, as the offsets
restore shows them) and, when the KIP-883 cleanup of the deletion that ended that version already ran hooks
(``connector_deletions`` rows ``hook:<name>`` succeeded), which ones: the external resources they removed are not
restored; when that cleanup removed its offsets, the message says so too. The history read is the caller's
(:class:`ConnectorHistory`, :class:`~connect_state.herder.restore.OffsetsHistory`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import Any, Protocol

from connect_state.core.times import iso_utc
from connect_state.core.vocabulary import ConnectorType, TargetState
from connect_state.formats.config import (
    ConfigWrite,
    connector_config_key,
    serialize_connector_config,
    serialize_target_state,
    target_state_key,
)
from connect_state.formats.offsets import (
    BadOffsetsRequest,
    OffsetPair,
    SinkOffset,
    normalize_source_offsets,
    parse_sink_offsets,
)
from connect_state.herder.base import log
from connect_state.herder.errors import BadRequestError, ConflictError, HerderError, NotFoundError, for_status
from connect_state.herder.restore import (
    OffsetsHistory,
    PartitionRestore,
    RestoreChange,
    RestoreHerder,
    offsets_difference,
)

__all__ = [
    "ConnectorHistory",
    "ConnectorRestore",
    "InitialState",
    "ReviveHerder",
    "already_exists_message",
    "config_not_kept_message",
    "connector_restore_records",
    "group_has_members_message",
    "no_config_before_message",
    "no_deletion_message",
    "offsets_need_stopped_message",
    "offsets_not_written_message",
]

Row = Mapping[str, Any]

CONFIG_EVENTS = ("created", "reconfigured")
DELETED = "deleted"
HOOK_STEP_PREFIX = "hook:"
OFFSETS_STEP = "offsets"
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
        """The ``connector_deletions`` rows (``step``, ``status``, ``detail``) of the deletion at that config-topic
        offset."""
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


def offsets_need_stopped_message(name: str, state: InitialState) -> str:
    """Ours: 400 for offsets asked with a target state other than STOPPED."""
    return (
        f"Cannot restore connector {name} {state.value} with its offsets: Connect modifies the offsets of STOPPED "
        "connectors only. Restore it STOPPED (the default) with its offsets, then resume it. Nothing was written."
    )


def group_has_members_message(name: str, group: str, members: int) -> str:
    """Ours: 409 when a deleted sink's consumer group has members (its offsets cannot be written)."""
    return (
        f"Cannot restore the offsets of sink connector {name}: its consumer group {group} has {members} active "
        "member(s) (zombie tasks, or another consumer using the group); its offsets can only be written while it has "
        "none. Nothing was written."
    )


def offsets_not_written_message(name: str, at: int, why: str) -> str:
    """Ours: the connector was restored, its offsets were not written (``why``); how to write them."""
    return (
        f"{why} Connector {name} was restored STOPPED with its config, without its offsets as of {iso_utc(at)}: "
        f"POST /connectors/{name}/offsets/restore?at={at}&apply=true writes them."
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
    offsets_at: int | None = None
    offsets: list[PartitionRestore] | None = None
    offsets_removed: str | None = None

    @property
    def messages(self) -> list[str]:
        lines = [
            f"Connector {self.name} restored {self.initial_state.value} with its config of config-topic offset "
            f"{self.config_offset}" + (f" ({iso_utc(self.config_time)})" if self.config_time is not None else "")
        ]
        if self.offsets is not None and self.offsets_at is not None:
            changed = [p for p in self.offsets if p.change != RestoreChange.UNCHANGED]
            when = iso_utc(self.offsets_at)
            lines.append(
                f"Its offsets as of {when} written: {len(changed)} partition(s)"
                + (f", {len(self.offsets) - len(changed)} already there" if len(changed) < len(self.offsets) else "")
                if changed
                else f"Its offsets as of {when} are already in place: nothing written"
            )
        if self.offsets_removed is not None:
            lines.append(
                f"The KIP-883 cleanup of its deletion had removed its offsets ({self.offsets_removed})"
                + ("" if self.offsets is not None else ": offsets=true restores them from the history")
            )
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
            "offsets_at": self.offsets_at,
            "offsets": None if self.offsets is None else [p.as_json() for p in self.offsets],
            "message": "\n".join(self.messages),
        }


def _details(row: Row) -> dict[str, Any]:
    details = json.loads(row["details"]) if row.get("details") else {}
    return details if isinstance(details, dict) else {}


def _time(row: Row) -> int | None:
    value = row.get("kafka_timestamp")
    return int(value) if value is not None else None


@dataclass(frozen=True)
class _OffsetsPlan:
    """The offsets a restore writes after the config, checked: the partitions (for the answer) and the writes."""

    at: int
    partitions: list[PartitionRestore]
    kind: ConnectorType
    source: list[OffsetPair]
    sink: list[SinkOffset]
    group: str | None


class ReviveHerder(RestoreHerder):
    """Bringing back a deleted connector (``POST /connectors/<name>/restore``)."""

    def restore_connector(
        self,
        name: str,
        at: int | None,
        state: InitialState,
        history: ConnectorHistory,
        offsets: OffsetsHistory | None = None,
    ) -> ConnectorRestore:
        """Write the connector's last config at or before ``at`` (default: before its last deletion) in ``state``,
        and with ``offsets`` its offsets as of that time (see the module)."""
        if self.io.connector(name).exists:
            raise ConflictError(already_exists_message(name))
        if offsets is not None and state is not InitialState.STOPPED:
            raise BadRequestError(offsets_need_stopped_message(name, state))
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
        deleted_at = _time(deletion) if deletion is not None else None
        steps = list(history.deletion_steps(name, deletion_offset)) if deletion_offset is not None else []
        hooks = sorted(
            str(row["step"])[len(HOOK_STEP_PREFIX) :]
            for row in steps
            if str(row["step"]).startswith(HOOK_STEP_PREFIX) and row.get("status") == SUCCEEDED
        )
        removed = next(
            (
                str(row.get("detail") or "done")
                for row in steps
                if row["step"] == OFFSETS_STEP and row.get("status") == SUCCEEDED
            ),
            None,
        )
        row = {"connector_class": config.get("connector.class"), "config": json.dumps(config)}
        plan = None
        if offsets is not None:
            offsets_at = deleted_at if deleted_at is not None and (at is None or at > deleted_at) else at
            if offsets_at is None:  # the version's deletion without a time: none to go by
                raise NotFoundError(no_deletion_message(name))
            plan = self._offsets_plan(name, row, offsets_at, offsets)
        check = f"GET /connectors/{name} shows whether it was created; retrying answers 409 once the config is written."
        self._send_config(connector_restore_records(name, config, state), f"the restore of connector {name}", check)
        log.info("Connector %s restored %s with its config of offset %d", name, state.value, offset)
        if plan is not None:
            self._write_restored_offsets(name, row, plan)
        connector_class = config.get("connector.class")
        return ConnectorRestore(
            name,
            connector_class if isinstance(connector_class, str) else None,
            state,
            offset,
            _time(version),
            deletion_offset,
            deleted_at,
            hooks,
            offsets_at=plan.at if plan is not None else None,
            offsets=plan.partitions if plan is not None else None,
            offsets_removed=removed,
        )

    def _offsets_plan(self, name: str, row: Row, at: int, history: OffsetsHistory) -> _OffsetsPlan:
        """The offsets as of ``at`` against those now, checked as PATCH checks them; nothing written."""
        kind, _ = self.connector_type(name, row)
        wanted = history.offsets_as_of(name, kind, json.loads(row["config"]), at)
        return self._planned_offsets(name, row, kind, wanted, at, partial(group_has_members_message, name))

    def _planned_offsets(
        self,
        name: str,
        row: Row,
        kind: ConnectorType,
        wanted: Sequence[Mapping[str, Any]],
        at: int,
        members_refusal: Callable[[str, int], str],
        members_always: bool = False,
    ) -> _OffsetsPlan:
        """``wanted`` (``{"partition", "offset"}`` entries) against the offsets now, checked as PATCH checks them: a
        sink's consumer group may have no members (``members_refusal(group, members)``: the 409's message), asked only
        when an offset differs unless ``members_always``; nothing written."""
        partitions = offsets_difference(self._current_offsets(name, kind, json.loads(row["config"])), wanted)
        pairs: list[OffsetPair] = [
            (dict(p.partition), p.restored if isinstance(p.restored, dict) else None)
            for p in partitions
            if p.change != RestoreChange.UNCHANGED
        ]
        if kind == ConnectorType.SINK and (pairs or members_always):
            sink, group = self._checked_sink_offsets(name, row, pairs, members_refusal)
            return _OffsetsPlan(at, partitions, kind, [], sink, group)
        if not pairs:
            return _OffsetsPlan(at, partitions, kind, [], [], None)
        try:
            source = normalize_source_offsets(pairs)
        except BadOffsetsRequest as err:
            raise for_status(err.status, err.message) from None
        self._alter_offsets(name, row, kind, source)
        return _OffsetsPlan(at, partitions, kind, source, [], None)

    def _checked_sink_offsets(
        self, name: str, row: Row, pairs: list[OffsetPair], members_refusal: Callable[[str, int], str]
    ) -> tuple[list[SinkOffset], str]:
        """PATCH's sink checks (the offsets' shape, the group guard, ``alterOffsets``), and none of the group's
        members may be left; the offsets and the group."""
        try:
            sink = parse_sink_offsets(pairs)
        except BadOffsetsRequest as err:
            raise for_status(err.status, err.message) from None
        group = self._checked_group(name, row)
        members = self.io.admin().group_members(group)
        if members:
            raise ConflictError(members_refusal(group, members))
        if sink:
            self._alter_offsets(name, row, ConnectorType.SINK, {(o.topic, o.partition): o.offset for o in sink})
        return sink, group

    def _write_restored_offsets(self, name: str, row: Row, plan: _OffsetsPlan) -> None:
        """The planned offsets written after the config (the connector STOPPED now): PATCH's writes."""
        self._write_planned_offsets(
            name, row, plan, f"POST /connectors/{name}/restore", partial(offsets_not_written_message, name, plan.at)
        )
        log.info("Offsets of restored connector %s written as of %s", name, iso_utc(plan.at))

    def _write_planned_offsets(
        self, name: str, row: Row, plan: _OffsetsPlan, verb: str, not_written: Callable[[str], str]
    ) -> None:
        """``plan``'s offsets written after the config, as PATCH writes them; a failure is re-raised with
        ``not_written(why)`` as its message (the connector is there, without them)."""
        try:
            if plan.group is not None and plan.sink:
                self._write_sink_offsets(name, plan.group, plan.sink)
            elif plan.source:
                self._fenced(name, self.io.connector(name))
                self._write_source_offsets(name, json.loads(row["config"]), plan.source, verb)
        except HerderError as err:
            log.error("Connector %s written without its offsets: %s", name, err.message)
            raise type(err)(not_written(err.message)) from err
