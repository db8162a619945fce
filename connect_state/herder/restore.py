"""Offsets restored as of a time (issue 36): ``POST /connectors/<name>/offsets/restore?at=<t>[&apply=true]``.

The difference between a connector's offsets now and its offsets as of ``at`` (the history tables' as-of answer,
:func:`connect_state.tables.history.source_offsets_as_of` / ``sink_offsets_as_of``), per partition; with ``apply``
written as a ``PATCH /connectors/<name>/offsets`` of the partitions that differ would write it, through the same
checks in Connect's order (:class:`~connect_state.herder.offsets.OffsetsHerder`):

1. 404 ``"Connector <name> not found"`` unless the config topic read to its end has the connector; with ``apply``,
   400 :func:`~connect_state.connect.rest.not_stopped_message` unless it is STOPPED with no committed tasks (a dry run
   writes nothing, so it is answered in any state);
2. its type from its class (as PATCH);
3. ours: 400 :func:`restore_before_history_message` when ``at`` is before the history kept for the connector (its
   first record in ``connector_events``: before it existed, or before what the tables hold), nothing written;
4. the difference: each partition with an offset now or as of ``at`` (:class:`RestoreChange`); a partition with an
   offset now and none as of ``at`` is reset (a ``null`` offset: a tombstone for a source, the group's offset deleted
   for a sink);
5. with ``apply`` and a difference: the PATCH's sink or source path (sink checks and the consumer-group guard, zombie
   fencing with exactly-once support, ``alterOffsets``, the writes and their failures).

The history read is the caller's (:class:`OffsetsHistory`: the API reads the tables), so the herder stays pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from connect_state.connect.connector_types import TypeBasis
from connect_state.connect.offset_stores import (
    UnreadableOffset,
    connector_consumer_group,
    connector_offset_stores,
    source_connector_offsets_checked,
)
from connect_state.connect.rest import connector_not_found_message, offsets_success_message, sink_list_failed_message
from connect_state.core.errors import ConsumerGroupAdminError
from connect_state.core.times import iso_utc
from connect_state.core.vocabulary import ConnectorType
from connect_state.formats.offsets import OffsetPair, sink_offset, sink_partition
from connect_state.herder.errors import BadRequestError, ConnectError
from connect_state.herder.offsets import OffsetsHerder, log, row_config
from connect_state.security.guards import checked_stores

__all__ = [
    "OffsetsHistory",
    "OffsetsRestore",
    "PartitionRestore",
    "RestoreChange",
    "RestoreHerder",
    "offsets_difference",
    "restore_before_history_message",
]

Entry = Mapping[str, Any]


class RestoreChange(StrEnum):
    """What restoring does to one partition."""

    UNCHANGED = "unchanged"  # the same offset now and as of the time
    ALTERED = "altered"  # another offset now
    RESTORED = "restored"  # no offset now, one as of the time
    RESET = "reset"  # an offset now, none as of the time: reset (null)


class OffsetsHistory(Protocol):
    """What a restore reads from the history (the API: the history tables)."""

    def kept_from(self, name: str) -> int | None:
        """The Kafka time (epoch ms) of the connector's first record the history holds; None when it holds none."""
        ...

    def offsets_as_of(self, name: str, kind: ConnectorType, config: Mapping[str, Any], at: int) -> Sequence[Entry]:
        """The connector's ``{"partition", "offset"}`` entries as of ``at`` (a sink's in Connect's sink shape)."""
        ...


def restore_before_history_message(name: str, at: int, kept_from: int | None) -> str:
    """Ours: 400 for a restore to a time the history does not cover; says what is kept."""
    if kept_from is None:
        return (
            f"Cannot restore the offsets of connector {name} to {iso_utc(at)} ({at}): no history is kept for it yet "
            "(no record of it in connector_events)"
        )
    return (
        f"Cannot restore the offsets of connector {name} to {iso_utc(at)} ({at}): the history kept for it starts at "
        f"{iso_utc(kept_from)} ({kept_from}), its first record in connector_events (before it, the connector did not "
        "exist or its records are no longer kept); choose a time at or after it"
    )


@dataclass(frozen=True)
class PartitionRestore:
    """One partition: its offset now, as of the time (None: none), and what restoring does."""

    partition: dict[str, object]
    current: object
    restored: object
    change: RestoreChange

    def as_json(self) -> dict[str, object]:
        return {
            "partition": self.partition,
            "current": self.current,
            "restored": self.restored,
            "change": self.change.value,
        }


@dataclass(frozen=True)
class OffsetsRestore:
    """A restore's answer: the connector's type and how it was told, the time, the difference, whether it was
    written, and what ``alterOffsets`` returned when it was."""

    kind: ConnectorType
    basis: TypeBasis
    at: int
    partitions: list[PartitionRestore]
    applied: bool
    managed: bool | None = None

    @property
    def changes(self) -> list[PartitionRestore]:
        return [p for p in self.partitions if p.change != RestoreChange.UNCHANGED]

    @property
    def message(self) -> str:
        if self.applied:
            return f"{offsets_success_message('altered', bool(self.managed))} (restored to {iso_utc(self.at)})"
        if not self.changes:
            return f"The offsets are already those of {iso_utc(self.at)}: nothing to write"
        return f"Dry run: nothing written; apply=true writes these {len(self.changes)} change(s)"


def _identity(partition: object) -> str:
    return json.dumps(partition, sort_keys=True)


def offsets_difference(current: Sequence[Entry], target: Sequence[Entry]) -> list[PartitionRestore]:
    """Per partition with an offset now or in ``target`` (entries with a null offset count as none), what restoring
    ``target`` does; sorted by partition."""
    now = {_identity(e["partition"]): e for e in current if e.get("offset") is not None}
    then = {_identity(e["partition"]): e for e in target if e.get("offset") is not None}
    partitions = []
    for key in sorted(now.keys() | then.keys()):
        before, after = now.get(key), then.get(key)
        partition = (after or before or {})["partition"]
        current_offset = before["offset"] if before else None
        restored_offset = after["offset"] if after else None
        if before is None:
            change = RestoreChange.RESTORED
        elif after is None:
            change = RestoreChange.RESET
        elif _identity(current_offset) == _identity(restored_offset):
            change = RestoreChange.UNCHANGED
        else:
            change = RestoreChange.ALTERED
        partitions.append(PartitionRestore(partition, current_offset, restored_offset, change))
    return partitions


class RestoreHerder(OffsetsHerder):
    """The offsets restore (``POST /connectors/<name>/offsets/restore``)."""

    def restore_connector_offsets(self, name: str, at: int, history: OffsetsHistory, apply: bool) -> OffsetsRestore:
        """The difference between the offsets now and as of ``at``; written with ``apply`` (see the module)."""
        view = self._stopped(name) if apply else self._configured(name, connector_not_found_message)
        kind, basis = self.connector_type(name, view.row)
        kept_from = history.kept_from(name)
        if kept_from is None or at < kept_from:
            raise BadRequestError(restore_before_history_message(name, at, kept_from))
        config = row_config(view.row)
        target = history.offsets_as_of(name, kind, config, at)
        partitions = offsets_difference(self._current_offsets(name, kind, config), target)
        pairs: list[OffsetPair] = [
            (dict(p.partition), p.restored if isinstance(p.restored, dict) else None)
            for p in partitions
            if p.change != RestoreChange.UNCHANGED
        ]
        if not apply or not pairs:
            return OffsetsRestore(kind, basis, at, partitions, applied=False)
        if kind == ConnectorType.SINK:
            managed = self._alter_sink_offsets(name, view.row, pairs)
        else:
            row = self._fenced(name, view)
            managed = self._modify_source_offsets(name, row, pairs, f"POST /connectors/{name}/offsets/restore")
        log.info("Offsets of connector %s restored to %s (%d partitions)", name, iso_utc(at), len(pairs))
        return OffsetsRestore(kind, basis, at, partitions, applied=True, managed=managed)

    def _current_offsets(self, name: str, kind: ConnectorType, config: Mapping[str, Any]) -> Sequence[Entry]:
        """The offsets now, as ``GET /connectors/<name>/offsets`` reads them at the topics' end (source: the offsets
        stores read to their end; sink: the consumer group's committed offsets from the admin)."""
        return self._current_offsets_checked(name, kind, config)[0]

    def _current_offsets_checked(
        self, name: str, kind: ConnectorType, config: Mapping[str, Any]
    ) -> tuple[Sequence[Entry], list[UnreadableOffset]]:
        """:meth:`_current_offsets`, and a source's partitions whose offsets cannot be read (left out, as Connect's
        ``GET /offsets`` leaves them out)."""
        if kind == ConnectorType.SINK:
            group = connector_consumer_group(name, config)
            try:
                listed = self.io.admin().list_group_offsets(group)
            except ConsumerGroupAdminError as err:
                log.error("Failed to list the offsets of sink connector %s: %s", name, err)
                raise ConnectError(sink_list_failed_message(name)) from err
            sink_entries: list[Entry] = [
                {"partition": sink_partition(topic, partition), "offset": sink_offset(offset)}
                for (topic, partition), offset in sorted(listed.items())
            ]
            return sink_entries, []
        stores = checked_stores(connector_offset_stores(self.settings.offset_storage_topic, config), self.settings)
        return source_connector_offsets_checked(name, self.io.source_rows(name, stores), stores)
