"""The history tables' clean-up in the jobs (issue 33, finding 7): each streaming query cleans the history tables it
writes (:func:`connect_state.tables.retention.owned_by`: its own, and the shared ``rejected_records`` and
``data_loss``) between its batches, at its first batch and then every ``history.retention.check.interval.ms``
(:meth:`connect_state.spark.foldjob.FoldWriter.__call__`, after the batch's writes and its reconcile pass, as the
``leases`` table's holder vacuums it between renewals). The periodic jobs (watch, restarts, alerts) clean their own
tables after their passes (:func:`periodic_retention`, through ``deltalake``, which is how they write).

Run from the query's own ``foreachBatch``, a pass never overlaps that query's writes; the writers of other threads and
drivers are kept apart by the commit lock and the retries of the ``deltalake`` path
(:mod:`connect_state.tables.retention_io`) or, where only Spark can commit (a Databricks volume), by
:func:`~connect_state.spark.delta_io.retry_on_conflict` around a Spark MERGE of the same rows. A pass that fails is
logged; the next one is due an interval later.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from connect_state.core.settings import KEEP_FOREVER, Settings
from connect_state.core.storage import Location, deltalake_options
from connect_state.spark.delta_io import merge_rows, retry_on_conflict, table_exists
from connect_state.tables.retention import RetentionPolicy, cutoff_ms, expired_rows, owned_by, table_retentions
from connect_state.tables.retention_io import Cleaned, clean_table, delete_merge
from connect_state.tables.schemas import now_ms

log = logging.getLogger("connect_state.retention")


def clean_with_spark(spark: SparkSession, root: Location, policy: RetentionPolicy, cutoff: int) -> Cleaned:
    """:func:`~connect_state.tables.retention_io.clean_table` with Spark: the same rows chosen, deleted by a Spark
    MERGE (retried on a conflict), then Delta's vacuum (the table's ``delta.deletedFileRetentionDuration``)."""
    path = str(root / policy.name)
    if not table_exists(spark, path):
        return Cleaned(policy.name, cutoff, 0, 0)
    rows = spark.read.format("delta").load(path)
    old = rows.where(F.col(policy.time) < F.timestamp_millis(F.lit(cutoff))).select(*policy.columns).toArrow()
    expired = expired_rows(old, policy, cutoff)
    if expired.num_rows:
        source = spark.createDataFrame(expired.select(list(policy.spec.key)))
        retry_on_conflict(lambda: merge_rows(source, path, delete_merge(policy)), policy.name)
        DeltaTable.forPath(spark, path).vacuum()
    return Cleaned(policy.name, cutoff, expired.num_rows, old.num_rows - expired.num_rows)


class RetentionPass:
    """The clean-up of the tables ``owner`` (a query's name) writes, due every ``history.retention.check.interval.ms``
    (the first at once); through ``deltalake`` when ``use_deltalake``, else Spark."""

    def __init__(
        self,
        settings: Settings,
        owner: str,
        use_deltalake: bool,
        storage_options: Mapping[str, str] | None = None,
        clock: Callable[[], int] = now_ms,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        retentions = table_retentions(settings)
        self.root = settings.delta_root
        self.owner = owner
        self.policies = [(p, retentions[p.name]) for p in owned_by(owner) if retentions[p.name] != KEEP_FOREVER]
        self.use_deltalake = use_deltalake
        self.storage_options = dict(storage_options or {})
        self.interval_s = settings.history_retention_check_interval_ms / 1000
        self.clock = clock
        self.monotonic = monotonic
        self._next = 0.0

    def due(self) -> bool:
        return bool(self.policies) and self.monotonic() >= self._next

    def maybe_run(self, spark: SparkSession | None = None) -> list[Cleaned]:
        """Clean every table of the owner when a pass is due (each table's failure logged, the others go on)."""
        if not self.due():
            return []
        self._next = self.monotonic() + self.interval_s
        now = self.clock()
        done = []
        for policy, retention in self.policies:
            cutoff = cutoff_ms(now, retention)
            assert cutoff is not None
            started = time.monotonic()
            try:
                if self.use_deltalake or spark is None:
                    cleaned = clean_table(self.root, policy, cutoff, self.storage_options)
                else:
                    cleaned = clean_with_spark(spark, self.root, policy, cutoff)
            except Exception:
                log.warning("%s: retention of %s failed; next pass in %.0f s", self.owner, policy.name,
                            self.interval_s, exc_info=True)  # fmt: skip
                continue
            done.append(cleaned)
            if cleaned.deleted:
                log.info("%s: retention: %s, in %.1f s", self.owner, cleaned.line(), time.monotonic() - started)
        return done


def periodic_retention(settings: Settings, owner: str) -> Callable[[], list[Cleaned]]:
    """The clean-up of the tables the periodic job ``owner`` writes (watch, restarts, alerts), through ``deltalake``
    as they write, for :class:`~connect_state.spark.streaming.PeriodicTask`'s ``after_pass``."""
    cleaning = RetentionPass(settings, owner, use_deltalake=True, storage_options=deltalake_options(settings))
    return cleaning.maybe_run
