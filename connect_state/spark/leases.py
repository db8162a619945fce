"""The task that runs a job's work (a streaming query, the cleanup passes) only while the job holds its lease.

The lease table and its keeper are :mod:`connect_state.tables.lease_store` (``deltalake``, no Spark); the decisions
are :mod:`connect_state.leases.decisions`'.

**The task.** :class:`LeasedTask` waits for the lease (a catch-up run waits at most one lease duration plus one
renewal, then does nothing and says who holds it), starts the job's work (the heartbeats query, the cleanup passes),
renews the lease every ``lease.renew.interval.ms`` from a thread of its own, and stops the work at once when the lease
is lost (another instance took it, or no renewal succeeded in time); it then waits for the lease again. A clean
stop releases the lease, so the next instance takes over without waiting for the expiry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from connect_state.spark.streaming import Task
from connect_state.tables.lease_store import LeaseKeeper

log = logging.getLogger("connect_state.leases")


class LeasedTask:
    """A task (:class:`~connect_state.spark.streaming.Task`) that runs ``start()``'s task only while ``keeper``
    holds its lease.

    ``once`` (a catch-up run): the lease is awaited at most one lease duration plus one renewal; when another
    instance still holds it, the run does nothing (status 0, and :attr:`skipped`), and a lease lost mid-run fails it.
    Continuous: it waits as long as it takes, and after a loss waits again. ``on_lost`` is called with the inner task
    when the lease is lost, to stop its work at once (e.g. stop a streaming query mid-batch).
    """

    def __init__(
        self,
        name: str,
        keeper: LeaseKeeper,
        start: Callable[[], Task],
        once: bool,
        on_lost: Callable[[Task], None] | None = None,
        poll_s: float = 0.5,
    ) -> None:
        self.name = name
        self.keeper = keeper
        self.start = start
        self.once = once
        self.on_lost = on_lost
        self.poll_s = poll_s
        self.skipped = False

    def run(self, stop: threading.Event) -> int:
        timing = self.keeper.timing
        timeout = (timing.duration_ms + timing.renew_interval_ms) / 1000.0 if self.once else None
        while not stop.is_set():
            if not self.keeper.wait_until_held(stop, timeout):
                if stop.is_set():
                    return 0
                current = self.keeper.store.read(self.keeper.name)
                self.skipped = True
                log.warning(
                    "%s: not run: its lease is held by another instance (%s); that instance does the work",
                    self.name,
                    f"{current.holder}, epoch {current.epoch}" if current else "unknown",
                )
                return 0
            status = self._run_held(stop)
            if stop.is_set() or self.keeper.held:
                return status  # stopped, done, or failed by itself (the supervisor decides what comes next)
            if self.once:
                log.error("%s: the lease was lost during the catch-up run", self.name)
                return 1
            log.warning("%s: stopped (lease lost); waiting to take the lease again", self.name)
        return 0

    def _run_held(self, stop: threading.Event) -> int:
        """Start the work and run it while the lease is renewed; the renewals start before the work does (starting a
        query, its tables and its first reconcile can take longer than a lease on a busy driver)."""
        inner_stop = threading.Event()
        started: list[Task] = []
        keeper = threading.Thread(
            target=self._keep, args=(stop, inner_stop, started), name=f"{self.name}-lease", daemon=True
        )
        keeper.start()
        try:
            inner = self.start()
            started.append(inner)
            return inner.run(inner_stop)  # a loss during the start: inner_stop is set, the work stops at once
        finally:
            inner_stop.set()
            keeper.join(timeout=self.keeper.renew_interval_s + 60.0)

    def _keep(self, stop: threading.Event, inner_stop: threading.Event, started: list[Task]) -> None:
        """Renew the lease every renewal interval while the work starts and runs; stop it when ``stop`` is set or the
        lease is lost (``on_lost`` on the work, once it has started)."""
        next_renewal = time.monotonic() + self.keeper.renew_interval_s
        while not inner_stop.wait(self.poll_s):
            if stop.is_set():
                inner_stop.set()
                return
            if time.monotonic() < next_renewal and self.keeper.held:
                continue
            next_renewal = time.monotonic() + self.keeper.renew_interval_s
            if not self.keeper.renew():
                inner_stop.set()
                if self.on_lost is not None and started:
                    try:
                        self.on_lost(started[0])
                    except Exception:
                        log.exception("%s: stopping the work after the lease was lost", self.name)
                return

    def while_held(self, step: Callable[[], object]) -> Callable[[], object]:
        """``step`` (a job's catch-up step) run only when this task held its lease, after a renewal."""

        def run() -> object:
            if self.skipped or not self.keeper.held or not self.keeper.renew():
                log.warning("%s: catch-up step not run: this instance does not hold the lease", self.name)
                return None
            return step()

        return run


def stop_query(task: Task) -> None:
    """``on_lost`` of a query task: stop its streaming query now (its writes are idempotent per batch; the next holder
    replays the batch from the shared checkpoint)."""
    query = getattr(task, "query", None)
    if query is not None and query.isActive:
        query.stop()
