"""The jobs' periodic table maintenance, between their batches: the history tables' clean-up (issue 33, finding 7)
and the compaction of every table a query writes (issue 34, target 4).

**Clean-up.** Each streaming query cleans the history tables it
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

**Compaction.** Every ``table.compact.check.interval.ms`` (the first at the first batch), the same pass compacts each
table the query writes, current and history, that has more than ``table.compact.small.files`` small files
(:mod:`connect_state.tables.maintenance` through ``deltalake``, under the same commit lock and retries as the query's
small writes; :func:`compact_with_spark` where only Spark commits), then vacuums. A failure is logged; the next check
is an interval later.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from connect_state.core.settings import KEEP_FOREVER, Settings
from connect_state.core.storage import Location, deltalake_options
from connect_state.spark.delta_io import merge_rows, retry_on_conflict, table_exists
from connect_state.spark.streaming import PeriodicTask
from connect_state.tables.compaction import Compacted
from connect_state.tables.maintenance import CompactionPolicy, compact_table
from connect_state.tables.retention import RetentionPolicy, cutoff_ms, expired_rows, owned_by, table_retentions
from connect_state.tables.retention_io import Cleaned, clean_table, delete_merge
from connect_state.tables.schemas import TableSpec, now_ms

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


def compact_with_spark(spark: SparkSession, path: str, policy: CompactionPolicy) -> Compacted | None:
    """:func:`~connect_state.tables.maintenance.compact_table` with Spark, where ``deltalake`` cannot commit: Spark's
    log gives no file sizes cheaply, so a table is due when it has more than ``small_files`` files beyond those its
    size needs at ``file_bytes`` each; then Delta's OPTIMIZE (files up to ``file_bytes``, retried on a conflict) and
    vacuum (the table's ``delta.deletedFileRetentionDuration``)."""
    if not policy.enabled or not table_exists(spark, path):
        return None
    table = DeltaTable.forPath(spark, path)
    files, size = _detail(table)
    if files - -(-size // policy.file_bytes) <= policy.small_files:
        return None

    def optimize() -> None:
        table.optimize().executeCompaction()

    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(policy.file_bytes))
    try:
        retry_on_conflict(optimize, path)
    finally:
        spark.conf.unset("spark.databricks.delta.optimize.maxFileSize")
    table.vacuum()
    return Compacted(files, _detail(DeltaTable.forPath(spark, path))[0], 0)


def _detail(table: DeltaTable) -> tuple[int, int]:
    """The table's data files and their bytes (``DESCRIBE DETAIL``)."""
    row = table.detail().select("numFiles", "sizeInBytes").first()
    return (0, 0) if row is None else (int(row["numFiles"] or 0), int(row["sizeInBytes"] or 0))


class RetentionPass:
    """The periodic maintenance of the tables ``owner`` (a query's name) writes: the clean-up of its history tables,
    due every ``history.retention.check.interval.ms``, and the compaction of ``tables`` (every table it writes), checked
    every ``table.compact.check.interval.ms`` (each the first time at once); through ``deltalake`` when
    ``use_deltalake``, else Spark."""

    def __init__(
        self,
        settings: Settings,
        owner: str,
        use_deltalake: bool,
        storage_options: Mapping[str, str] | None = None,
        clock: Callable[[], int] = now_ms,
        monotonic: Callable[[], float] = time.monotonic,
        tables: Sequence[TableSpec] = (),
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
        self.compaction = CompactionPolicy.of(settings)
        self.compacted_tables = [spec.name for spec in tables] if self.compaction.enabled else []
        self.compact_interval_s = settings.table_compact_check_interval_ms / 1000
        self._next_compaction = 0.0

    def due(self) -> bool:
        return bool(self.policies) and self.monotonic() >= self._next

    def compaction_due(self) -> bool:
        return bool(self.compacted_tables) and self.monotonic() >= self._next_compaction

    def maybe_run(self, spark: SparkSession | None = None) -> list[Cleaned]:
        """Clean every table of the owner when a pass is due (each table's failure logged, the others go on), then
        compact its tables when a check is due (:meth:`maybe_compact`). Without ``spark``: through ``deltalake``."""
        self.maybe_compact(spark)
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

    def maybe_compact(self, spark: SparkSession | None = None) -> dict[str, Compacted]:
        """Compact each of the owner's tables that has too many small files, when a check is due (each table's failure
        logged, the others go on); the tables compacted."""
        if not self.compaction_due():
            return {}
        self._next_compaction = self.monotonic() + self.compact_interval_s
        done = {}
        for name in self.compacted_tables:
            path = str(self.root / name)
            started = time.monotonic()
            try:
                if self.use_deltalake or spark is None:
                    compacted = compact_table(path, self.compaction, self.storage_options)
                else:
                    compacted = compact_with_spark(spark, path, self.compaction)
            except Exception:
                log.warning("%s: compaction of %s failed; next check in %.0f s", self.owner, name,
                            self.compact_interval_s, exc_info=True)  # fmt: skip
                continue
            if compacted is not None:
                done[name] = compacted
                log.info("%s: %s: %s, in %.1f s", self.owner, name, compacted.line(), time.monotonic() - started)
        return done


def periodic_retention(settings: Settings, owner: str, tables: Sequence[TableSpec] = ()) -> Callable[[], list[Cleaned]]:
    """The clean-up of the tables the periodic job ``owner`` writes (watch, restarts, alerts) and the compaction of
    ``tables``, through ``deltalake`` as they write, for :class:`~connect_state.spark.streaming.PeriodicTask`'s
    ``after_pass``."""
    options = deltalake_options(settings)
    cleaning = RetentionPass(settings, owner, use_deltalake=True, storage_options=options, tables=tables)
    return cleaning.maybe_run


def maintained_passes(
    settings: Settings,
    owner: str,
    run_pass: Callable[[], object],
    interval_s: float,
    once: bool,
    logger: logging.Logger,
    tables: Sequence[TableSpec],
) -> PeriodicTask:
    """The passes of the periodic job ``owner`` (:class:`~connect_state.spark.streaming.PeriodicTask`), each followed
    by the retention of its logs and the compaction of ``tables`` (:func:`periodic_retention`)."""
    return PeriodicTask(owner, run_pass, interval_s, once, logger, periodic_retention(settings, owner, tables))
