"""The verdicts' vocabulary: the closed set of answers to "is this connector well?", shared by the judge, the verdict
tables, the ``connect_state_connector_verdict`` gauge, the auto-restart and the alert rules."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["VERDICT_GAUGE", "Verdict"]

#: The Prometheus gauge: one series per connector and verdict, 1 for the connector's current verdict, else 0. Its
#: ``verdict`` label takes only :class:`Verdict` values.
VERDICT_GAUGE = "connect_state_connector_verdict"


class Verdict(StrEnum):
    """A connector's (or task's) verdict, worst first where several apply."""

    FAILED = "failed"
    """The connector (or every task) FAILED: since when, the trace."""
    FLAPPING = "flapping"
    """More than K failures or restarts within a window."""
    STALLED = "stalled"
    """RUNNING while nothing moves: a sink whose lag grows while its commits stand still; a source whose offsets and
    output topics have not moved for N times its usual commit interval."""
    DROPPING = "dropping"
    """A RUNNING sink sending records to its dead-letter queue faster than a threshold."""
    DEGRADED = "degraded"
    """Some tasks FAILED or UNASSIGNED, or fewer running than the config topic committed."""
    RESTARTING = "restarting"
    QUIET = "quiet"
    """RUNNING, nothing moves, and the evidence cannot tell idle from stuck."""
    IDLE = "idle"
    """RUNNING, nothing moves, and KIP-910's provider says there is nothing new."""
    PAUSED = "paused"
    STOPPED = "stopped"
    HEALTHY = "healthy"
    UNKNOWN = "unknown"
    """Not enough evidence yet (no status record, or the tables have not caught up)."""
