"""Leases on Delta: the ``leases`` table and the keeper that takes, renews, checks and releases a job's lease. The
decisions are :mod:`connect_state.leases.decisions`'; the task that runs a job's work only while it holds the lease
is :mod:`connect_state.spark.leases`'.

**Why Delta.** The jobs already share their Delta tables, and the API reads them with ``deltalake``: a lease row is
one more table, visible in ``GET /leases`` like any other, with an explicit fencing token, and nothing else to run.
(A Kafka consumer group would give a liveness timeout and a generation id, but no row the API can read, and its
membership hangs on polling threads; the cleanup job does not otherwise need a Kafka consumer.)

**Why ``deltalake`` and not Spark.** A lease is only as good as its renewals: they must take milliseconds, whatever
the driver's micro-batches are doing. A Spark MERGE on a busy driver took longer than a whole lease in the tests
(tens of seconds on two shared cores), so the lease table is written with ``deltalake`` (delta-rs, no JVM), as the
API reads it; Spark never touches it.

**The write is a compare-and-set.** :class:`DeltaLeaseStore` commits the row
:func:`connect_state.leases.decisions.decide` proposes with a MERGE on the table version the decision was read from,
matching only the row decided on (same holder, epoch and expiry), with no commit retries: if any other commit landed
since the read (another instance's takeover or renewal), the commit fails and the keeper reads and decides again. Delta
commits are put-if-absent of the next log file: atomic on a local disk (delta-rs links the file into place) and on
object stores with a locking provider (S3 needs one, as for Spark's multi-driver writes; see the README). Every
successful write is read back as well.

The table gets a commit per renewal: its log is kept a day (``delta.logRetentionDuration``, with checkpoints) and the
holder vacuums it about once an hour (files older than an hour).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, QueryBuilder
from deltalake.exceptions import CommitFailedError

from connect_state.core.settings import Settings
from connect_state.core.storage import deltalake_options
from connect_state.leases.decisions import (
    Action,
    Decision,
    Lease,
    LeaseLost,
    LeaseStore,
    LeaseTiming,
    current_lease,
    decide,
    holds,
    local_deadline,
    new_holder_id,
    released,
)
from connect_state.tables.schemas import LEASES, epoch_ms, now_ms, timestamp
from connect_state.tables.small_writes import open_or_create

log = logging.getLogger("connect_state.leases")

#: Properties of the ``leases`` table: the log and the files of a table that gets a commit every few seconds do not
#: pile up.
LEASE_TABLE_PROPERTIES = {
    "delta.logRetentionDuration": "interval 1 days",
    "delta.deletedFileRetentionDuration": "interval 1 hours",
    "delta.checkpointInterval": "100",
}
VACUUM_EVERY_MS = 3_600_000
#: How often a keeper reads, decides and writes again when its compare-and-set lost to a concurrent commit (the other
#: lease's renewal shares the table).
CAS_ATTEMPTS = 5
_EXPECTED = pa.schema(
    [
        ("expected_holder", pa.string()),
        ("expected_epoch", pa.int64()),
        ("expected_expires_at", LEASES.schema.field("expires_at").type),
    ]
)


def lease_timing(settings: Settings) -> LeaseTiming:
    """``lease.duration.ms`` and ``lease.renew.interval.ms`` (ConfigError when the pair cannot work)."""
    return LeaseTiming(settings.lease_duration_ms, settings.lease_renew_interval_ms)


class DeltaLeaseStore:
    """The ``leases`` table under ``delta.root``, read and written with ``deltalake``
    (:class:`~connect_state.leases.decisions.LeaseStore`): :meth:`write` commits on the version :meth:`read` last saw,
    or not at all. One store per keeper (it remembers that version)."""

    def __init__(self, settings: Settings) -> None:
        self.path = str(settings.delta_root / LEASES.name)
        self.options = deltalake_options(settings)
        self._table: DeltaTable | None = None

    def _open(self) -> DeltaTable:
        """The table at its latest version (created on first use; two instances creating it at once both succeed)."""
        if self._table is None:
            self._table = open_or_create(self.path, LEASES, LEASE_TABLE_PROPERTIES, self.options)
        else:
            self._table.update_incremental()
        return self._table

    def read(self, name: str) -> Lease | None:
        """The lease ``name`` as the table's latest version has it (None: never taken)."""
        table = self._open()
        rows = pa.table(QueryBuilder().register("leases", table).execute("SELECT * FROM leases").read_all())
        leases = [
            Lease(
                row["name"],
                row["holder"],
                int(row["epoch"]),
                epoch_ms(row["acquired_at"]),
                epoch_ms(row["renewed_at"]),
                epoch_ms(row["expires_at"]),
            )
            for row in rows.to_pylist()
            if row["name"] == name
        ]
        return current_lease(leases)

    def write(self, expected: Lease | None, proposed: Lease) -> bool:
        """Write ``proposed`` if the table still has ``expected`` (None: no row for the name), in a commit on the
        version last read; False when another commit came first (read and decide again)."""
        table = self._table if self._table is not None else self._open()
        row = {
            "name": proposed.name,
            "holder": proposed.holder,
            "epoch": proposed.epoch,
            "acquired_at": timestamp(proposed.acquired_at),
            "renewed_at": timestamp(proposed.renewed_at),
            "expires_at": timestamp(proposed.expires_at),
            "expected_holder": expected.holder if expected else None,
            "expected_epoch": expected.epoch if expected else None,
            "expected_expires_at": timestamp(expected.expires_at) if expected else None,
        }
        schema = pa.schema([*LEASES.schema, *_EXPECTED])
        source = pa.Table.from_pylist([row], schema=schema)
        merge = table.merge(
            source,
            "t.name = s.name",
            source_alias="s",
            target_alias="t",
            commit_properties=CommitProperties(max_commit_retries=0),
            post_commithook_properties=PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=True),
        )
        values = {column: f"s.{column}" for column in LEASES.column_names}
        if expected is None:
            merge = merge.when_not_matched_insert(values)
        else:
            condition = (
                "t.holder = s.expected_holder AND t.epoch = s.expected_epoch AND t.expires_at = s.expected_expires_at"
            )
            merge = merge.when_matched_update(values, predicate=condition)
        try:
            merge.execute()
        except CommitFailedError as err:
            log.info("lease %s: a concurrent commit came first (%s)", proposed.name, err)
            return False
        return True

    def vacuum(self) -> None:
        """Remove the files of versions older than an hour."""
        self._open().vacuum(retention_hours=1, dry_run=False, enforce_retention_duration=False)


class LeaseKeeper:
    """One instance's hold on the lease ``name``: :meth:`try_acquire`, :meth:`renew`, :meth:`fence` before each
    side effect, :meth:`release` at a clean stop.

    ``store`` reads and writes the rows (:class:`DeltaLeaseStore`); ``clock`` is the wall clock in epoch ms (the
    rows' times), ``monotonic`` the clock of the local deadline (seconds).
    """

    def __init__(
        self,
        store: LeaseStore,
        name: str,
        timing: LeaseTiming,
        holder: str | None = None,
        clock: Callable[[], int] = now_ms,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.name = name
        self.timing = timing
        self.holder = holder or new_holder_id(name)
        self.clock = clock
        self.monotonic = monotonic
        self.lease: Lease | None = None  # the row as this instance last wrote it, while it holds the lease
        self._deadline = 0.0
        self._lock = threading.RLock()
        self._last_waiting_for: tuple[str, int] | None = None
        self._next_vacuum = 0

    @property
    def renew_interval_s(self) -> float:
        return self.timing.renew_interval_ms / 1000.0

    @property
    def held(self) -> bool:
        """This instance holds the lease as far as it knows without reading the table (its local deadline)."""
        with self._lock:
            return self.lease is not None and self.monotonic() < self._deadline

    @property
    def epoch(self) -> int | None:
        lease = self.lease
        return lease.epoch if lease is not None else None

    def _attempt(self, held_epoch: int | None) -> tuple[Decision, bool]:
        """Read, decide and (unless waiting) write, then read back: the decision and whether the row read back is
        the one proposed. A write that lost to a concurrent commit is decided again on a fresh read."""
        for _ in range(CAS_ATTEMPTS):
            started = self.monotonic()
            decision = decide(
                self.store.read(self.name), self.name, self.holder, held_epoch, self.clock(), self.timing.duration_ms
            )
            if decision.proposed is None:
                return decision, False
            if not self.store.write(decision.expected, decision.proposed):
                continue
            won = self.store.read(self.name) == decision.proposed
            if won:
                self.lease = decision.proposed
                self._deadline = local_deadline(started, self.timing)
            return decision, won
        return decision, False

    def try_acquire(self) -> bool:
        """Take the lease if nobody holds it (or renew it if this instance does); True when this instance holds it."""
        with self._lock:
            decision, won = self._attempt(self.epoch if self.held else None)
            if won:
                if decision.action is Action.TAKE:
                    log.info(
                        "lease %s taken by %s (epoch %d; %s)",
                        self.name,
                        self.holder,
                        decision.proposed.epoch,  # type: ignore[union-attr]
                        decision.reason,
                    )
                self._last_waiting_for = None
                self._next_vacuum = self.clock() + VACUUM_EVERY_MS
                return True
            self.lease = None
            current = decision.expected if decision.action is Action.WAIT else self.store.read(self.name)
            if current is not None and (current.holder, current.epoch) != self._last_waiting_for:
                self._last_waiting_for = (current.holder, current.epoch)
                log.info(
                    "lease %s: waiting: held by %s (epoch %d) until %s",
                    self.name,
                    current.holder,
                    current.epoch,
                    timestamp(current.expires_at).isoformat(timespec="seconds"),
                )
            return False

    def renew(self) -> bool:
        """Extend the held lease; False once it is lost (another holder, or expired before a renewal succeeded).

        A renewal that fails on an I/O error keeps the lease until the local deadline; the next one tries again.
        """
        with self._lock:
            if not self.held:
                self._lose("not renewed before its local deadline")
                return False
            began = self.monotonic()
            try:
                decision, won = self._attempt(self.epoch)
                took = self.monotonic() - began
                if took > self.renew_interval_s:
                    log.warning("lease %s: a renewal took %.1f s (lease.renew.interval.ms: %.1f s)", self.name, took,
                                self.renew_interval_s)  # fmt: skip
            except Exception as err:
                log.warning("lease %s: renewal failed (%s); still held for %.1f s", self.name, err, self._remaining())
                return self.held
            if won and decision.action is Action.RENEW:
                self._maybe_vacuum()
                return True
            if won:  # expired and taken again with the next epoch: the work ran without a valid lease meanwhile
                self._lose(f"expired before its renewal; taken again as epoch {self.epoch}")
                return False
            if decision.action is Action.RENEW and holds(
                self.store.read(self.name), self.holder, self.epoch, self.clock()
            ):
                log.info("lease %s: renewal lost %d races to other commits; still held", self.name, CAS_ATTEMPTS)
                return self.held
            self._lose(decision.reason)
            return False

    def _remaining(self) -> float:
        return max(0.0, self._deadline - self.monotonic())

    def _lose(self, why: str) -> None:
        if self.lease is not None:
            log.warning("lease %s lost by %s (epoch %d): %s", self.name, self.holder, self.lease.epoch, why)
        self.lease = None

    def _maybe_vacuum(self) -> None:
        if self.clock() < self._next_vacuum:
            return
        self._next_vacuum = self.clock() + VACUUM_EVERY_MS
        try:
            self.store.vacuum()
        except Exception as err:
            log.warning("lease %s: vacuum of the leases table failed: %s", self.name, err)

    def check(self) -> None:
        """The local fencing check (no I/O): raise LeaseLost once this instance's lease is lost or past its local
        deadline."""
        if not self.held:
            raise LeaseLost(f"lease {self.name}: {self.holder} no longer holds it")

    def fence(self) -> None:
        """The fencing check before a side effect: the local one, then the table must still name this instance with
        its epoch, unexpired. Raises LeaseLost (and forgets the lease) otherwise."""
        with self._lock:
            self.check()
            current = self.store.read(self.name)
            if not holds(current, self.holder, self.epoch, self.clock()):
                self._lose("the leases table names another holder or epoch" if current else "its row is gone")
                raise LeaseLost(f"lease {self.name}: {self.holder} (epoch {self.epoch}) no longer holds it")

    def release(self) -> None:
        """Give the lease up (a clean stop): the row expires now, so another instance takes it at once."""
        with self._lock:
            lease, self.lease = self.lease, None
            if lease is None:
                return
            try:
                for _ in range(CAS_ATTEMPTS):
                    current = self.store.read(self.name)
                    if current is None or (current.holder, current.epoch) != (lease.holder, lease.epoch):
                        return  # taken over meanwhile: nothing of ours to release
                    if self.store.write(current, released(current, self.clock())):
                        log.info("lease %s released by %s (epoch %d)", self.name, self.holder, lease.epoch)
                        return
            except Exception as err:
                log.warning("lease %s: release failed (%s); it expires by itself", self.name, err)

    def wait_until_held(self, stop: threading.Event, timeout_s: float | None = None) -> bool:
        """Try to take the lease every renewal interval until this instance holds it (True), ``stop`` is set or
        ``timeout_s`` has passed (False). Errors reading or writing the table are logged and retried."""
        deadline = None if timeout_s is None else self.monotonic() + timeout_s
        while not stop.is_set():
            try:
                if self.try_acquire():
                    return True
            except Exception as err:
                log.warning("lease %s: cannot read or write the leases table (%s); retrying", self.name, err)
            if deadline is not None and self.monotonic() >= deadline:
                return False
            wait = (
                self.renew_interval_s if deadline is None else min(self.renew_interval_s, deadline - self.monotonic())
            )
            stop.wait(max(wait, 0.0))
        return False


def keeper_for(settings: Settings, name: str) -> LeaseKeeper:
    """The keeper of the lease ``name`` on the settings' ``delta.root``, with their timing."""
    return LeaseKeeper(DeltaLeaseStore(settings), name, lease_timing(settings))
