"""What every fold pipeline shares: the record kinds, pandas frames that keep nulls, the parse step over Kafka rows,
the ``foreachBatch`` writer skeleton with idempotent Delta writes and rejected-record quarantine, and starting the query
(catch-up or continuous).

A pipeline (see :mod:`connect_state.spark.active_topics`) supplies its parse and fold functions, its tables and what
it writes per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import pandas as pd
from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from connect_state.settings import Settings
from connect_state.spark.delta_io import ensure_table, insert_new_once, retry_on_conflict
from connect_state.spark.streaming import QueryTask, Run, checkpoint_query_id, job_logger
from connect_state.tables import REJECTED_RECORDS, TableSpec


class RecordKind(StrEnum):
    """The ``record_kind`` column of the rows between the steps of a pipeline (parse → fold → writer)."""

    #: A record a worker would discard: quarantined in ``rejected_records`` with its reason (every pipeline).
    REJECTED = "rejected"
    # active topics: a topic-status record; a change of a connector's active-topic set
    TOPIC = "topic"
    CHANGE = "change"
    # connector states: a config- or status-topic record of a connector; a commit record the parser rejects (still
    # folded); a connector row; a transition
    CONFIG = "config"
    STATUS = "status"
    UNREADABLE_COMMIT = "unreadable_commit"
    ROW = "row"
    EVENT = "event"
    # offsets: a record of an offsets topic or of __consumer_offsets; a history row; a current-table row
    RECORD = "record"
    HISTORY = "history"
    CURRENT = "current"
    # heartbeats: an offsets-topic record; a partition's activity; a partition gone; a heartbeat due now
    OFFSET = "offset"
    ACTIVITY = "activity"
    REMOVED = "removed"
    DUE = "due"


# The columns a parse step fills for a rejected record (see RECORD_COLUMNS_DDL).
RECORD_COLUMNS_DDL = (
    "kafka_topic STRING, kafka_partition INT, kafka_offset BIGINT, kafka_timestamp BIGINT, "
    "raw_key BINARY, raw_value BINARY, reason STRING"
)


_NULLABLE_INTEGERS: dict[str, Any] = {"INT": "Int32", "BIGINT": "Int64"}


def ddl_columns(ddl: str) -> list[tuple[str, str]]:
    """``"a INT, b STRING"`` -> ``[("a", "INT"), ("b", "STRING")]``, for the flat schemas of the fold steps.

    (``StructType.fromDDL`` needs a JVM, which the Python workers running the pandas functions do not have.)
    """
    return [tuple(part.split()) for part in ddl.split(",")]  # type: ignore[misc]


def pandas_frame(rows: Iterable[dict], ddl: str) -> pd.DataFrame:
    """Rows as a pandas frame for Arrow, with the columns of ``ddl`` and None kept as null.

    Object columns, because an all-None column would otherwise become float NaN, which Arrow cannot turn into strings
    or bytes; pandas' nullable ``Int32``/``Int64`` for INT/BIGINT columns, for the same reason.
    """
    columns = ddl_columns(ddl)
    frame = pd.DataFrame(list(rows), columns=[name for name, _ in columns], dtype=object)
    for name, sql_type in columns:
        if sql_type.upper() in _NULLABLE_INTEGERS:
            frame[name] = frame[name].astype(_NULLABLE_INTEGERS[sql_type.upper()])
    return frame


Classifier = Callable[[bytes | None, bytes | None, dict], Iterable[dict]]
"""``(key, value, kafka coordinates) -> rows``: what a parse step makes of one Kafka record (none, one or more)."""


def rejected(key: bytes | None, value: bytes | None, reason: str, kafka: dict) -> dict:
    """The parse step's row for a record a worker would discard (see :data:`RECORD_COLUMNS_DDL`)."""
    return {"record_kind": RecordKind.REJECTED, "raw_key": key, "raw_value": value, "reason": reason, **kafka}


def with_group_kind(parsed: DataFrame, kind: str) -> DataFrame:
    """``parsed`` with a ``group_kind`` column: ``rejected`` for rejected rows, ``kind`` for the rest, so the fold's
    groups keep the quarantine apart."""
    is_rejected = F.col("record_kind") == RecordKind.REJECTED
    return parsed.withColumn("group_kind", F.when(is_rejected, F.lit(str(RecordKind.REJECTED))).otherwise(F.lit(kind)))


def passed_through(batch: pd.DataFrame, ddl: str) -> pd.DataFrame:
    """The rows of a group of rejected records, unchanged, as the fold's output (``ddl``)."""
    return pandas_frame(batch.to_dict("records"), ddl)


def classify_records(kafka_rows: DataFrame, classify: Classifier, ddl: str) -> DataFrame:
    """Run ``classify`` over every Kafka record (``mapInPandas``); the rows it returns must fit ``ddl``.

    Each row gets the record's coordinates: ``kafka_topic``, ``kafka_partition``, ``kafka_offset`` and
    ``kafka_timestamp`` (epoch ms).
    """

    def parse(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for frame in frames:
            rows: list[dict] = []
            for key, value, topic, partition, offset, timestamp in frame.itertuples(index=False, name=None):
                kafka = {
                    "kafka_topic": topic,
                    "kafka_partition": partition,
                    "kafka_offset": offset,
                    "kafka_timestamp": timestamp,
                }
                rows.extend(classify(key, value, kafka))
            yield pandas_frame(rows, ddl)

    columns = ("key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS timestamp")
    return kafka_rows.selectExpr(*columns).mapInPandas(parse, ddl)


class FoldWriter:
    """Base of a job's ``foreachBatch`` sink: persists the batch, calls :meth:`write`, quarantines rejected rows.

    Every Delta write of a batch is tagged with (this query's id + table, batch id), so a batch replayed after a crash
    changes nothing that already committed. The query id comes from the checkpoint, so a new checkpoint never collides
    with the batch ids an earlier one recorded.
    """

    job_name = "fold"

    def __init__(self, delta_root: Path, checkpoint: Path) -> None:
        self.delta_root = delta_root
        self.checkpoint = str(checkpoint)
        self.rejected_path = str(delta_root / REJECTED_RECORDS.name)
        self._query_id: str | None = None
        self.log = job_logger(self.job_name)

    def path(self, spec: TableSpec) -> str:
        return str(self.delta_root / spec.name)

    def app_id(self, spec: TableSpec) -> str:
        """The Delta transaction id of this query's writes to ``spec``."""
        if self._query_id is None:
            raise RuntimeError("the query id is known once the first batch arrives")
        return f"connect-state:{self.job_name}:{self._query_id}:{spec.name}"

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self._query_id is None:
            self._query_id = checkpoint_query_id(batch.sparkSession, self.checkpoint)
        batch.persist()
        try:
            rejected = batch.filter(F.col("record_kind") == RecordKind.REJECTED)
            n_rejected = rejected.count()
            if n_rejected:
                self.write_rejected(rejected, batch_id)
            summary = self.write(batch.filter(F.col("record_kind") != RecordKind.REJECTED), batch_id)
            self.log.info("batch %d: %s, %d rejected records", batch_id, summary, n_rejected)
        finally:
            batch.unpersist()

    def write(self, batch: DataFrame, batch_id: int) -> str:
        """Write the batch's non-rejected rows; return a short summary for the log."""
        raise NotImplementedError

    def write_rejected(self, rejected: DataFrame, batch_id: int) -> None:
        """Insert rejected records, keyed by their Kafka coordinates (a record is quarantined once)."""
        rows = rejected.select(
            F.col("kafka_topic").alias("topic"),
            F.col("kafka_partition").alias("partition"),
            F.col("kafka_offset").alias("offset"),
            F.col("raw_key").alias("key"),
            F.col("raw_value").alias("value"),
            "reason",
            F.current_timestamp().alias("seen_at"),
        )
        # Every job quarantines into the same table, so a concurrent job's commit may win: retry (idempotent).
        retry_on_conflict(
            lambda: insert_new_once(
                rows, self.rejected_path, REJECTED_RECORDS.key, self.app_id(REJECTED_RECORDS), batch_id
            ),
            REJECTED_RECORDS.name,
        )


def start_fold_query(
    spark: SparkSession,
    settings: Settings,
    job_name: str,
    folded: DataFrame,
    writer: FoldWriter,
    tables: Sequence[TableSpec],
    current_tables: Sequence[TableSpec],
    available_now: bool,
) -> StreamingQuery:
    """Create ``tables`` if needed and start ``folded`` (update mode) into ``writer``.

    With a new checkpoint the fold starts from the first record of its topics, so the ``current_tables`` (snapshots,
    not history) are emptied first: rows whose tombstones were compacted away must not linger.
    """
    for spec in (*tables, REJECTED_RECORDS):
        ensure_table(spark, settings.delta_root, spec)
    checkpoint = settings.checkpoint_path(job_name)
    if not checkpoint.exists():
        for spec in current_tables:
            writer.log.info("no checkpoint at %s: rebuilding %s from the start of the topics", checkpoint, spec.name)
            DeltaTable.forPath(spark, str(settings.delta_root / spec.name)).delete()
    stream = (
        folded.writeStream.queryName(job_name)
        .outputMode("update")
        .foreachBatch(writer)
        .option("checkpointLocation", str(checkpoint))
    )
    trigger = {"availableNow": True} if available_now else {"processingTime": settings.trigger_interval}
    return stream.trigger(**trigger).start()


@dataclass(frozen=True)
class FoldJob:
    """A job that is one fold query (:class:`~connect_state.spark.streaming.Job`): nothing to check, one task."""

    name: str
    start_query: Callable[[SparkSession, Settings, bool, int | None], StreamingQuery]

    def check(self, settings: Settings) -> None:
        return None

    def start(self, spark: SparkSession, settings: Settings, available_now: bool, max_offsets: int | None) -> Run:
        return Run([QueryTask(self.start_query(spark, settings, available_now, max_offsets))])
