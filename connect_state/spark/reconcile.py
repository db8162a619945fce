"""Reconciling a current table with its topics: rows whose key is no longer in the topics at all are removed.

A fold removes a row when it reads the key's tombstone. A compacted topic keeps a tombstone for
``delete.retention.ms`` only; a job that was down longer never reads it, and the row would stay forever (a *ghost*:
a from-scratch fold of the same topics has no such row). A topic deleted while its rows are in a table leaves ghosts
too. A :class:`Reconciler` reads the keys of every record still in the table's topics (tombstones included: a key
whose tombstone is still there is the fold's to remove) with a batch read, and deletes the table's rows whose key is
not among them.

Each row is deleted only if it is still the one that was read (same ``updated_at``), so a row the query writes again
meanwhile stays. A pass that read no key at all from topics that hold records (a misread, e.g. an internal topic the
reader cannot see) removes nothing and says so. The fold queries run a pass when they start and then every
``reconcile_interval_s`` after a micro-batch (:class:`~connect_state.spark.foldjob.FoldWriter`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import pyarrow as pa
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from connect_state.kafka.topic_positions import TopicPositions
from connect_state.spark.delta_io import retry_on_conflict, spark_schema
from connect_state.tables.schemas import TableSpec

log = logging.getLogger("connect_state.reconcile")

RECONCILE_INTERVAL_S = 3600.0
"""Seconds between two reconcile passes of a running query (one more runs whenever a query starts)."""

EXAMPLES = 5


@contextmanager
def session_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """``conf`` set on the session inside the block; the previous values are put back."""
    previous: dict[str, str | None] = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, before in previous.items():
            if before is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before)


@dataclass
class Reconciler:
    """One current table (at ``path``) and how to read the keys still in its topics.

    ``topics(spark)`` names the table's topics; ``live_keys(spark, topics)`` is a frame of the table's key columns
    for every record of the (existing) ``topics``; ``conf`` is set on the session while they are read.
    """

    table: TableSpec
    path: str
    topics: Callable[[SparkSession], Sequence[str]]
    live_keys: Callable[[SparkSession, Sequence[str]], DataFrame]
    positions: TopicPositions
    conf: Mapping[str, str] = field(default_factory=dict)
    logger: logging.Logger = log

    def __call__(self, spark: SparkSession) -> int:
        """One pass: the number of rows removed."""
        key = list(self.table.key)
        existing = self.positions.topics()
        wanted = list(dict.fromkeys(self.topics(spark)))
        topics = [topic for topic in wanted if topic in existing]
        with session_conf(spark, self.conf):
            if topics:
                live = self.live_keys(spark, topics).select(*key).distinct()
            else:
                live = spark.createDataFrame([], spark_schema(pa.schema([self.table.schema.field(k) for k in key])))
            rows = spark.read.format("delta").load(self.path).select(*key, F.unix_micros("updated_at").alias("_us"))
            ghosts = rows.join(live, on=key, how="left_anti").collect()
            if not ghosts:
                return 0
            if topics and live.limit(1).count() == 0 and self._topics_hold_records(topics):
                self.logger.error(
                    "reconcile %s: read no key at all from %s, which hold records: not removing anything",
                    self.table.name,
                    ", ".join(topics),
                )
                return 0
        gone = sorted(set(wanted) - set(topics))
        self.logger.warning(
            "reconcile %s: %d rows whose key is no longer in %s at all (tombstone compacted away while the job was "
            "down%s) removed, e.g. %s",
            self.table.name,
            len(ghosts),
            ", ".join(wanted),
            f"; topics gone: {', '.join(gone)}" if gone else ", or topic deleted",
            "; ".join(str(tuple(_printable(row[k]) for k in key)) for row in ghosts[:EXAMPLES]),
        )
        self._delete(spark, ghosts, key)
        return len(ghosts)

    def _topics_hold_records(self, topics: Sequence[str]) -> bool:
        partitions = self.positions.partitions(topics)
        starts = self.positions.earliest_offsets(partitions)
        ends = self.positions.latest_offsets(partitions)
        return any(ends.get(p, 0) > starts.get(p, 0) for p in partitions)

    def _delete(self, spark: SparkSession, ghosts: list, key: list[str]) -> None:
        schema = spark_schema(pa.schema([self.table.schema.field(k) for k in key] + [pa.field("_us", pa.int64())]))
        source = spark.createDataFrame([tuple(row) for row in ghosts], schema)
        condition = " AND ".join(f"t.`{k}` = s.`{k}`" for k in key) + " AND unix_micros(t.updated_at) <=> s._us"

        def delete() -> None:
            table = DeltaTable.forPath(spark, self.path)
            table.alias("t").merge(source.alias("s"), condition).whenMatchedDelete().execute()

        retry_on_conflict(delete, self.table.name)


def _printable(value: object) -> object:
    return bytes(value).decode("utf-8", "replace") if isinstance(value, bytes | bytearray) else value
