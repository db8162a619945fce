"""The ``watermarks`` table, written with ``deltalake``: each streaming query's Kafka position, recorded after its
batch's table writes (:meth:`connect_state.spark.foldjob.FoldWriter.record_watermark`).

**Why ``deltalake`` and not Spark.** Every micro-batch of every fold query records its end offsets here, after its own
tables. As a Spark MERGE, that was a third Delta commit per batch and 2.4–3.0 s of driver work for a few rows, on two
cores shared by every query (``bench/RESULTS.md``, issue 11 §3). The same MERGE through delta-rs (no JVM) takes tens of
milliseconds. As for the ``leases`` table (:mod:`connect_state.tables.lease_store`), Spark does not write this table
where ``deltalake`` can, so its writers are all of one kind. The API and the tests read it like any other table.

**Where ``deltalake`` cannot commit** (a Databricks Unity Catalog volume or DBFS, FUSE mounts with neither rename nor
link: :attr:`connect_state.core.storage.Location.deltalake_commits`), :class:`SparkWatermarkStore` writes the same rows
with a Spark MERGE, as before. :func:`watermark_store` picks the store from ``delta.root``; every writer of one
location picks the same.

**Once per batch.** Each write carries the Delta transaction ``(app_id, batch_id)``, as the Spark writes of
:mod:`connect_state.spark.delta_io` do, and is skipped when the table already has that batch or a later one for the app
id. A batch replayed after a crash between its watermark and Spark's commit therefore changes nothing. The app ids are
the ones the Spark MERGE used, so a table written by an earlier version carries on.

**Concurrent queries.** The fold queries write their own rows of the same table. Within one driver their writes take
turns, across drivers a MERGE that lost to another's commit is read again and retried
(:mod:`connect_state.tables.small_writes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol

import pyarrow as pa
from delta.tables import DeltaTable as SparkDeltaTable
from deltalake import CommitProperties, DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from connect_state.core.errors import DeltaWriteError
from connect_state.core.storage import Location
from connect_state.progress.positions import Positions, watermark_rows
from connect_state.spark.delta_io import (
    delta_transaction,
    ensure_table,
    retry_on_conflict,
    spark_schema,
)
from connect_state.tables.schemas import TABLE_PROPERTIES, WATERMARKS
from connect_state.tables.small_writes import ATTEMPTS, latest, open_or_create, with_retries, write_once

_MATCH = "t.query = s.query AND t.topic = s.topic AND t.`partition` = s.`partition`"
_SPARK_ROWS = spark_schema(WATERMARKS.schema)


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class WatermarkStore(Protocol):
    """Where a fold query records the Kafka position its tables reflect (``watermarks``)."""

    def record(self, query: str, positions: Positions, batch_id: int, app_id: str) -> bool:
        """``positions`` as ``query``'s rows (its other rows, partitions it no longer reads, are removed), committed
        with the transaction ``(app_id, batch_id)``. False when the store knows the table already has that batch or
        a later one for ``app_id`` (nothing written)."""
        ...

    def forget(self, query: str) -> None:
        """Delete ``query``'s rows (its checkpoint is new: its tables are rebuilt from the start of the topics)."""
        ...


def watermark_store(
    spark: SparkSession, delta_root: Location, storage_options: Mapping[str, str] | None, use_deltalake: bool
) -> WatermarkStore:
    """The store of ``delta_root``: :class:`DeltaWatermarkStore` where this process writes with ``deltalake``
    (:func:`~connect_state.tables.small_writes.deltalake_writes`), else :class:`SparkWatermarkStore`."""
    if use_deltalake:
        return DeltaWatermarkStore(delta_root, storage_options)
    return SparkWatermarkStore(spark, delta_root)


def _rows(query: str, positions: Positions, batch_id: int) -> list[tuple]:
    now = datetime.now(UTC)
    return [(*row, now) for row in watermark_rows(query, positions, batch_id)]


class DeltaWatermarkStore:
    """The ``watermarks`` table under ``delta_root``, read and written with ``deltalake`` (kept open by
    :func:`~connect_state.tables.small_writes.latest`); created on first use."""

    def __init__(self, delta_root: Location, storage_options: Mapping[str, str] | None = None) -> None:
        self.path = str(delta_root / WATERMARKS.name)
        self.options = dict(storage_options or {}) or None
        self._created = False

    def _open(self) -> DeltaTable:
        """The table at its latest version (created when absent); under its commit lock."""
        if not self._created:
            open_or_create(self.path, WATERMARKS, TABLE_PROPERTIES, self.options)
            self._created = True
        return latest(self.path, self.options)

    def record(self, query: str, positions: Positions, batch_id: int, app_id: str) -> bool:
        rows = [dict(zip(WATERMARKS.column_names, row, strict=True)) for row in _rows(query, positions, batch_id)]
        source = pa.Table.from_pylist(rows, schema=WATERMARKS.schema)

        def merge(table: DeltaTable, properties: CommitProperties) -> None:
            (
                table.merge(source, _MATCH, source_alias="s", target_alias="t", commit_properties=properties)
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .when_not_matched_by_source_delete(f"t.query = {_sql_string(query)}")
                .execute()
            )

        return write_once(self.path, app_id, batch_id, merge, self._open)

    def forget(self, query: str) -> None:
        with_retries(self.path, lambda: self._open().delete(f"query = {_sql_string(query)}"))


class SparkWatermarkStore:
    """The ``watermarks`` table written with Spark (a MERGE tagged with the transaction, skipped by Delta when the
    table has it), where ``deltalake`` cannot commit; created on first use."""

    def __init__(self, spark: SparkSession, delta_root: Location) -> None:
        self.spark = spark
        self.delta_root = delta_root
        self.path = str(delta_root / WATERMARKS.name)
        self._ready = False

    def _table(self) -> SparkDeltaTable:
        if not self._ready:
            ensure_table(self.spark, self.delta_root, WATERMARKS)
            self._ready = True
        return SparkDeltaTable.forPath(self.spark, self.path)

    def record(self, query: str, positions: Positions, batch_id: int, app_id: str) -> bool:
        source = self.spark.createDataFrame(_rows(query, positions, batch_id), _SPARK_ROWS)

        def merge() -> None:
            with delta_transaction(self.spark, app_id, batch_id):
                (
                    self._table()
                    .alias("t")
                    .merge(source.alias("s"), _MATCH)
                    .whenMatchedUpdateAll()
                    .whenNotMatchedInsertAll()
                    .whenNotMatchedBySourceDelete(F.col("t.query") == query)
                    .execute()
                )

        try:
            retry_on_conflict(merge, WATERMARKS.name, ATTEMPTS)
        except Exception as err:
            raise DeltaWriteError(f"{self.path}: {err}") from err
        return True  # Delta skips a batch it has without saying so

    def forget(self, query: str) -> None:
        retry_on_conflict(lambda: self._table().delete(F.col("query") == query), WATERMARKS.name, ATTEMPTS)
