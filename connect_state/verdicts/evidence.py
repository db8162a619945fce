"""What the judge is given about one connector: plain values the watch job gathers from the tables and the topics
(times are epoch milliseconds; None where there is nothing to tell)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "ConnectorEvidence",
    "DropEvidence",
    "HeartbeatEvidence",
    "SinkEvidence",
    "SourceEvidence",
    "TaskEvidence",
    "WorkersEvidence",
]


@dataclass(frozen=True)
class TaskEvidence:
    """A task's status (Connect's state name), its trace, when it entered that state, and the worker its status
    record names (``worker_id``, ``host:port``)."""

    task: int
    state: str
    trace: str | None = None
    since_ms: int | None = None
    worker_id: str | None = None


@dataclass(frozen=True)
class WorkersEvidence:
    """The Connect workers' group as DescribeGroups saw it this pass (Stable, so every member's metadata told its
    worker id): the live workers, when they were seen, and since when each worker missing from the group (that was
    seen in it, or that a status record names) has been missing, as far as the watch saw."""

    group: str
    live: frozenset[str]
    seen_at_ms: int
    missing_since_ms: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SinkEvidence:
    """A sink's consumer group against the log ends of its topics.

    ``lag``: the log-end offsets minus the committed ones (a partition with no commit counts from its log start);
    ``committed_moved_at_ms``: when the committed offsets last changed (as far as known); ``lag_since_ms``: since when
    the lag has been above zero with those same commits."""

    group: str
    topics: tuple[str, ...]
    lag: int
    committed_moved_at_ms: int | None
    lag_since_ms: int | None


@dataclass(frozen=True)
class HeartbeatEvidence:
    """KIP-910: the connector's latest heartbeat (``outcome`` as the heartbeats table writes it)."""

    outcome: str
    at_ms: int
    error: str | None = None


@dataclass(frozen=True)
class SourceEvidence:
    """A source's progress: when its committed offsets last changed value (a heartbeat re-committing the same offset
    is no move), when its output topics last grew, and KIP-910's latest word."""

    offsets_moved_at_ms: int | None
    topics: tuple[str, ...]
    topics_moved_at_ms: int | None
    heartbeat: HeartbeatEvidence | None = None
    has_provider: bool = False


@dataclass(frozen=True)
class DropEvidence:
    """A sink's dead-letter queue: records added to it within the window, and since when the count runs."""

    topic: str
    records: int
    window_from_ms: int


@dataclass(frozen=True)
class ConnectorEvidence:
    """Everything the judge knows about one connector."""

    name: str
    type: str | None
    target_state: str | None
    state: str | None
    trace: str | None = None
    state_since_ms: int | None = None
    running_since_ms: int | None = None
    tasks: tuple[TaskEvidence, ...] = ()
    task_count: int | None = None
    #: Times (ms) of the connector's and its tasks' transitions to FAILED or RESTARTING within the flapping window.
    failures_ms: tuple[int, ...] = ()
    restarts_ms: tuple[int, ...] = ()
    sink: SinkEvidence | None = None
    source: SourceEvidence | None = None
    dead_letters: DropEvidence | None = None
    #: The worker the connector's status record names, and the group's live members (None: no evidence this pass).
    worker_id: str | None = None
    workers: WorkersEvidence | None = None
    config: Mapping[str, object] = field(default_factory=dict)
