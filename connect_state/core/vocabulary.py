"""Connect's vocabularies as enums. Each is a ``StrEnum`` whose values are Connect's strings, so a member is written
to a table, to JSON and into a message exactly as the plain string was (``str(State.RUNNING) == "RUNNING"``).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ConnectorType", "ExactlyOnceSourceSupport", "State", "TargetState"]


class TargetState(StrEnum):
    """``org.apache.kafka.connect.runtime.TargetState``, in declaration order: what a connector is asked to be
    (``target-state-<name>`` records of the config topic)."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


class State(StrEnum):
    """``org.apache.kafka.connect.runtime.AbstractStatus.State``, in declaration order: the state a connector or task
    reports in the status topic and in ``GET /connectors/<name>/status``."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    DESTROYED = "DESTROYED"
    RESTARTING = "RESTARTING"
    STOPPED = "STOPPED"


class ConnectorType(StrEnum):
    """``org.apache.kafka.connect.runtime.rest.entities.ConnectorType`` as the REST API writes it (lowercase,
    ``toString``)."""

    SOURCE = "source"
    SINK = "sink"
    UNKNOWN = "unknown"


class ExactlyOnceSourceSupport(StrEnum):
    """``DistributedConfig.ExactlyOnceSourceSupport`` (KIP-618), the worker property ``exactly.once.source.support``
    in its lower-case form. Only ``enabled`` turns on exactly-once source support
    (``DistributedConfig.exactlyOnceSourceEnabled``); ``preparing`` only readies the cluster for it."""

    DISABLED = "disabled"
    PREPARING = "preparing"
    ENABLED = "enabled"

    @property
    def enabled(self) -> bool:
        """``exactlyOnceSourceEnabled()``: zombie fencing and transactional offset writes for source connectors."""
        return self is ExactlyOnceSourceSupport.ENABLED


class FleetTables(StrEnum):
    """``fleet.tables`` (issue 37): whether the jobs keep the fleet's tables, one Delta table of each name over every
    Connect cluster of the deployment (:mod:`connect_state.tables.fleet_tables`). ``auto``: when the deployment
    watches several clusters."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"
