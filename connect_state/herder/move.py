"""A connector copied from one Connect cluster to another (issue 37): ``POST /clusters/<from>/connectors/<name>/move
?to=<cluster>``, the operation a Connect migration does by hand (read the config and the offsets from one cluster,
create the connector STOPPED in the other, write its offsets, resume it there).

The reading is the origin cluster's (the API: its config topic read to its end, and its offsets read at the topics'
end by the origin's herder, :meth:`MoveHerder.offsets_now`, which refuses with 409 :func:`unreadable_offsets_message` a
source whose offsets stores hold a value a worker cannot read: Connect's ``GET /offsets`` leaves it out, and the copy
would start that partition over); the target cluster's herder decides the rest, everything checked before anything is
written:

1. 409 ``"Connector <name> already exists"`` (Connect's ``AlreadyExistsException``) when the target's config topic read
   to its end has the connector;
2. the offsets the target holds for the name now (its offsets stores; a sink's group on the target's Kafka) against
   the origin's (:func:`~connect_state.herder.restore.offsets_difference`: a partition with an offset in the target
   and none in the origin is reset), checked as a ``PATCH /connectors/<name>/offsets`` is (a source's
   ``validateFormat``, a sink's shape and consumer-group guard, the class's ``alterOffsets`` rule);
3. a sink: 409 :func:`group_has_members_message` when its consumer group on the target's Kafka has members (it could
   not take the offsets; on a Kafka both clusters share, the group is the one the origin's sink used);
4. ``target-state-<name>`` STOPPED then ``connector-<name>``, as Connect's leader writes a connector created STOPPED
   (KIP-980), acknowledged in order;
5. the offsets that differ, written as PATCH writes them. A failure there leaves the connector created STOPPED without
   them; the message says so.

The origin is left as it is (STOPPED: the API refuses to move a connector that is not, so its offsets do not move
after they were read); resuming the copy (``PUT /clusters/<to>/connectors/<name>/resume``) and deleting the origin
are the operator's next steps, which the answer names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from connect_state.connect.offset_stores import UnreadableOffset
from connect_state.core.times import now_ms
from connect_state.core.vocabulary import ConnectorType
from connect_state.herder.base import log
from connect_state.herder.errors import ConflictError
from connect_state.herder.restore import PartitionRestore, RestoreChange
from connect_state.herder.revive import InitialState, ReviveHerder, already_exists_message, connector_restore_records

__all__ = [
    "ConnectorMove",
    "MoveHerder",
    "group_has_members_message",
    "not_stopped_message",
    "offsets_not_written_message",
    "unreadable_offsets_message",
]


def not_stopped_message(name: str, origin: str) -> str:
    """Ours: 409 for a move of a connector that is not STOPPED in its cluster (its offsets would move on after they
    were copied, and both clusters would run it)."""
    return (
        f"Cannot move connector {name} from cluster {origin}: it must be STOPPED there first, so that its offsets "
        f"do not move after they are copied (PUT /clusters/{origin}/connectors/{name}/stop). Nothing was written."
    )


def group_has_members_message(name: str, group: str, members: int, *, target: str) -> str:
    """Ours: 409 when a moved sink's consumer group on the target's Kafka has members."""
    return (
        f"Cannot move sink connector {name} to cluster {target}: its consumer group {group} there has {members} active "
        "member(s) (a sink of that group still running, or another consumer); its offsets can only be written while it "
        "has none. Nothing was written."
    )


def unreadable_offsets_message(name: str, unreadable: Sequence[UnreadableOffset]) -> str:
    """Ours: 409 for a move of a source whose offsets stores hold values a worker cannot read (Connect's ``GET
    /offsets`` leaves them out): moved without them, the connector would start those partitions over."""
    shown = "; ".join(f"{json.dumps(partition)}: {reason}" for partition, reason in unreadable[:5])
    more = f"; and {len(unreadable) - 5} more" if len(unreadable) > 5 else ""
    return (
        f"Cannot move connector {name}: the offsets of {len(unreadable)} source partition(s) cannot be read "
        f"({shown}{more}), so the copy would start them over. Write them (PATCH /connectors/{name}/offsets, an offset "
        "or null for each) where the connector is, then move it. Nothing was written."
    )


def offsets_not_written_message(name: str, origin: str, target: str, why: str) -> str:
    """Ours: the connector was created in the target, its offsets were not written (``why``)."""
    return (
        f"{why} Connector {name} was created STOPPED in cluster {target} with the config of cluster {origin}, "
        f"without its offsets: PATCH /clusters/{target}/connectors/{name}/offsets with the body of "
        f"GET /clusters/{origin}/connectors/{name}/offsets writes them."
    )


@dataclass(frozen=True)
class ConnectorMove:
    """What a move wrote in the target: the connector (STOPPED) and each partition's offset there before and now."""

    name: str
    origin: str
    target: str
    connector_class: str | None
    kind: ConnectorType
    offsets: list[PartitionRestore]

    @property
    def written(self) -> list[PartitionRestore]:
        return [p for p in self.offsets if p.change != RestoreChange.UNCHANGED]

    @property
    def message(self) -> str:
        return (
            f"Connector {self.name} created STOPPED in cluster {self.target} with its config and offsets of cluster "
            f"{self.origin} ({len(self.written)} offset(s) written, {len(self.offsets) - len(self.written)} already "
            f"there). Resume it there (PUT /clusters/{self.target}/connectors/{self.name}/resume), then delete it from "
            f"cluster {self.origin} (DELETE /clusters/{self.origin}/connectors/{self.name})."
        )

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "from": self.origin,
            "to": self.target,
            "connector_class": self.connector_class,
            "type": self.kind.value,
            "initial_state": InitialState.STOPPED.value,
            "offsets": [
                {"partition": p.partition, "before": p.current, "offset": p.restored, "change": p.change.value}
                for p in self.offsets
            ],
            "message": self.message,
        }


class MoveHerder(ReviveHerder):
    """Both sides of a move (see the module): :meth:`offsets_now` on the origin's herder, :meth:`adopt_connector` on
    the target's."""

    def offsets_now(self, name: str, row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The connector's offsets read at the end of the topics now (a source's offsets stores, a sink's consumer
        group), as ``GET /offsets`` lists them: what the origin gives a move (never the tables alone, which may be a
        trigger behind the last commit)."""
        kind, _ = self.connector_type(name, row)
        entries, unreadable = self._current_offsets_checked(name, kind, json.loads(row["config"]))
        if unreadable:  # moved without them, the copy would start those partitions over
            raise ConflictError(unreadable_offsets_message(name, unreadable))
        return list(entries)

    def adopt_connector(
        self, name: str, config: Mapping[str, Any], offsets: Sequence[Mapping[str, Any]], origin: str, target: str
    ) -> ConnectorMove:
        """Create ``name`` STOPPED here with ``config`` and the origin's ``offsets`` (``{"partition", "offset"}``
        entries, as ``GET /offsets`` lists them)."""
        if self.io.connector(name).exists:
            raise ConflictError(already_exists_message(name))
        row = {"connector_class": config.get("connector.class"), "config": json.dumps(dict(config))}
        kind, _ = self.connector_type(name, row)
        refusal = partial(group_has_members_message, name, target=target)
        plan = self._planned_offsets(name, row, kind, offsets, now_ms(), refusal, members_always=True)
        check = f"GET /clusters/{target}/connectors/{name} shows whether it was created; retrying answers 409 then."
        records = connector_restore_records(name, config, InitialState.STOPPED)
        self._send_config(records, f"the move of connector {name} to cluster {target}", check)
        log.info("Connector %s created STOPPED in cluster %s with the config of cluster %s", name, target, origin)
        verb = f"POST /connectors/{name}/move"
        self._write_planned_offsets(name, row, plan, verb, partial(offsets_not_written_message, name, origin, target))
        connector_class = config.get("connector.class")
        return ConnectorMove(
            name, origin, target, connector_class if isinstance(connector_class, str) else None, kind, plan.partitions
        )
