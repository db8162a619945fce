"""Leases: one acting instance of a job whose work must not happen twice (cleanup hooks, heartbeats), the decisions.

A **lease** is one row per name (``cleanup``, ``heartbeats``) of the Delta table ``leases``: who holds it
(``holder``), its **epoch** (the fencing token: it grows by one at every change of holder, never on a renewal), when
the holder took it (``acquired_at``), last renewed it (``renewed_at``) and until when it holds it (``expires_at``).

* An instance **takes** a lease that nobody holds, that expired or that its holder released, with the epoch after the
  current one; it **renews** the lease it holds (same epoch, later expiry) every ``lease.renew.interval.ms``; it
  **waits** while another holder's lease has not expired. Every write is conditional on the row it decided on
  (compare-and-set, :mod:`connect_state.tables.lease_store`), so of two instances deciding at once one wins and the
  other finds the winner at its next read.
* **Fencing.** Before each side-effecting step (a hook call, a tombstone, a heartbeat) the holder checks that the row
  still names it with its epoch and has not expired (:func:`holds`); a holder that lost its lease stops acting.
* **Expiry on both sides.** Another instance may take a lease once ``expires_at`` has passed by its clock. The holder
  itself stops acting earlier: ``lease.renew.interval.ms`` before the expiry its last successful renewal wrote, as
  measured by its own monotonic clock from when that renewal started (:func:`local_deadline`). That interval is the
  margin for clock skew between the instances and for a step already in flight.

Pure: no Spark, Delta or Kafka here; times are epoch milliseconds (wall clock) unless named ``monotonic``.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

from connect_state.core.errors import ConfigError, ConnectStateError

#: The leases connect-state takes: one per job whose side effects must not happen twice.
CLEANUP_LEASE = "cleanup"
HEARTBEATS_LEASE = "heartbeats"
WATCH_LEASE = "watch"
RESTARTS_LEASE = "restarts"


class LeaseLost(ConnectStateError):
    """This instance no longer holds the lease it acted under (another took it over, or it expired): stop acting."""


@dataclass(frozen=True)
class Lease:
    """One row of the ``leases`` table (times in epoch ms)."""

    name: str
    holder: str
    epoch: int
    acquired_at: int
    renewed_at: int
    expires_at: int

    def expired(self, now_ms: int) -> bool:
        """Free for others: its expiry has passed (a released lease expires at the release)."""
        return now_ms >= self.expires_at


class LeaseStore(Protocol):
    """Where the lease rows live (:class:`connect_state.tables.lease_store.DeltaLeaseStore`; unit tests use one in
    memory)."""

    def read(self, name: str) -> Lease | None:
        """The current row of ``name`` (None: never taken)."""
        ...

    def write(self, expected: Lease | None, proposed: Lease) -> bool:
        """Write ``proposed`` only if the row is still ``expected`` (None: no row). False when a concurrent write
        came first (the caller reads and decides again); True when the write went through, or found the row changed
        and wrote nothing (the caller reads it back to know)."""
        ...

    def vacuum(self) -> None:
        """Drop the storage of old versions of the rows (optional housekeeping)."""
        ...


class Action(StrEnum):
    """What an instance does about a lease (:func:`decide`)."""

    TAKE = "take"  # nobody holds it (no row, expired, released): take it with the next epoch
    RENEW = "renew"  # this instance holds it: extend it, same epoch
    WAIT = "wait"  # another holder's, not expired: wait


@dataclass(frozen=True)
class Decision:
    """The outcome of :func:`decide`: the ``action``, the row the conditional write must still find (``expected``;
    None: no row for the name yet) and the row it writes (``proposed``; None when waiting), and why, for the log."""

    action: Action
    expected: Lease | None
    proposed: Lease | None
    reason: str


@dataclass(frozen=True)
class LeaseTiming:
    """``lease.duration.ms`` and ``lease.renew.interval.ms``: a lease lasts ``duration_ms`` after each renewal; the
    holder renews every ``renew_interval_ms`` and stops acting ``renew_interval_ms`` before its lease expires."""

    duration_ms: int
    renew_interval_ms: int

    def __post_init__(self) -> None:
        if self.renew_interval_ms <= 0:
            raise ConfigError(f"lease.renew.interval.ms must be positive, got {self.renew_interval_ms}")
        if self.duration_ms < 2 * self.renew_interval_ms:
            raise ConfigError(
                f"lease.duration.ms ({self.duration_ms}) must be at least twice lease.renew.interval.ms "
                f"({self.renew_interval_ms}): the holder stops acting one renewal interval before its lease expires, "
                "and needs at least one more renewal in between"
            )


def new_holder_id(job: str) -> str:
    """A holder name unique to this process and start: ``<job>@<host>:<pid>:<random>`` (readable in ``GET /leases``)."""
    return f"{job}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def current_lease(rows: Iterable[Lease]) -> Lease | None:
    """The lease of a name among its rows: the highest epoch, then the latest renewal, then the holder (every reader
    picks the same row should a racing insert ever have left two)."""
    return max(rows, key=lambda lease: (lease.epoch, lease.renewed_at, lease.holder), default=None)


def is_mine(lease: Lease | None, holder: str, epoch: int | None) -> bool:
    """The row names ``holder`` with ``epoch`` (expired or not)."""
    return lease is not None and epoch is not None and lease.holder == holder and lease.epoch == epoch


def holds(lease: Lease | None, holder: str, epoch: int | None, now_ms: int) -> bool:
    """The fencing check: the row still names ``holder`` with ``epoch`` and has not expired."""
    return is_mine(lease, holder, epoch) and not lease.expired(now_ms)  # type: ignore[union-attr]


def decide(
    current: Lease | None, name: str, holder: str, held_epoch: int | None, now_ms: int, duration_ms: int
) -> Decision:
    """What ``holder`` (holding ``held_epoch``, None when it holds nothing) does about the lease ``name`` whose row is
    ``current`` (None: no row yet), at ``now_ms``.

    Its own live lease is renewed (same epoch); a lease nobody holds (no row, expired, released) is taken with the
    next epoch, its own expired one included (others may have seen it free), and so is a lease of its own it no longer
    counts as held (past its local deadline: its work stopped); another holder's live lease is waited for.
    """
    expires = now_ms + duration_ms
    if current is None:
        proposed = Lease(name, holder, 1, now_ms, now_ms, expires)
        return Decision(Action.TAKE, None, proposed, "no holder yet")
    if holds(current, holder, held_epoch, now_ms):
        return Decision(Action.RENEW, current, replace(current, renewed_at=now_ms, expires_at=expires), "renewal")
    if current.expired(now_ms):
        proposed = Lease(name, holder, current.epoch + 1, now_ms, now_ms, expires)
        previous = "released" if current.renewed_at >= current.expires_at else "expired"
        return Decision(Action.TAKE, current, proposed, f"{current.holder}'s lease (epoch {current.epoch}) {previous}")
    if current.holder == holder:  # this instance's own lease, given up locally (past its local deadline)
        proposed = Lease(name, holder, current.epoch + 1, now_ms, now_ms, expires)
        return Decision(Action.TAKE, current, proposed, f"this instance's earlier lease (epoch {current.epoch})")
    return Decision(
        Action.WAIT,
        current,
        None,
        f"held by {current.holder} (epoch {current.epoch}) until {current.expires_at}",
    )


def released(lease: Lease, now_ms: int) -> Lease:
    """The row a holder writes when it stops cleanly: expired now (``renewed_at`` = ``expires_at``), same holder and
    epoch, so the next instance takes it at once with the next epoch."""
    return replace(lease, renewed_at=now_ms, expires_at=now_ms)


def local_deadline(renewal_started_monotonic: float, timing: LeaseTiming) -> float:
    """Until when (monotonic seconds) the holder acts on a renewal that started at ``renewal_started_monotonic``: the
    lease's duration minus one renewal interval (the margin for clock skew and a step in flight)."""
    return renewal_started_monotonic + (timing.duration_ms - timing.renew_interval_ms) / 1000.0
