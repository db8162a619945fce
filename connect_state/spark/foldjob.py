"""What every fold pipeline shares: the record kinds, pandas frames that keep nulls, the parse step over Kafka rows,
the ``foreachBatch`` writer with idempotent Delta writes and rejected-record quarantine, and starting the query
(catch-up or continuous).

A pipeline (see :mod:`connect_state.spark.active_topics`) is declared as a :class:`FoldSpec`: its topics, its parse
and fold functions, its tables and how its rows go into them; :func:`start_fold` runs it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, GroupedData, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from connect_state.core.clusters import cluster_label
from connect_state.core.errors import KafkaWriteError
from connect_state.core.faults import FaultPoint, fault_point
from connect_state.core.settings import Settings
from connect_state.core.storage import Location, deltalake_options
from connect_state.kafka.topic_positions import TopicPositions, shared_positions
from connect_state.progress.positions import (
    DataLoss,
    Positions,
    detect_losses,
    partitions_to_check,
    starts_past,
)
from connect_state.spark import storage
from connect_state.spark.checkpoint import discard_interrupted_first_entry, planned_positions
from connect_state.spark.delta_io import (
    append_once,
    create_table,
    ensure_table,
    insert_new_once,
    inserted_rows,
    merge_once,
    retry_on_conflict,
    spark_schema,
)
from connect_state.spark.kafka_source import read_internal_topic, read_topic_batch
from connect_state.spark.reconcile import RECONCILE_INTERVAL_S, Reconciler, session_conf
from connect_state.spark.retention import RetentionPass
from connect_state.spark.streaming import QueryTask, Run, checkpoint_query_id, job_logger, query_name
from connect_state.spark.watermarks import WatermarkStore, watermark_store
from connect_state.spark.write_time import collect_stamped, stamped, write_time
from connect_state.tables import small_writes
from connect_state.tables.merge_spec import MergeSpec
from connect_state.tables.schemas import (
    BIGINT,
    BINARY,
    DATA_LOSS,
    INT,
    REJECTED_RECORDS,
    STRING,
    TIMESTAMP,
    WATERMARKS,
    TableSpec,
)
from connect_state.tables.small_writes import SMALL_WRITE_ROWS, as_table_rows, deltalake_writes, merge_source_rows

# Concurrent queries write these shared tables every batch: more attempts than a job's own table needs.
SHARED_TABLE_ATTEMPTS = 10
_DATA_LOSS_ROWS = spark_schema(pa.schema([f for f in DATA_LOSS.schema if f.name != "detected_at"]))


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
    # heartbeats: an offsets-topic record; a partition's activity; a partition gone; a connector's folded state
    OFFSET = "offset"
    ACTIVITY = "activity"
    REMOVED = "removed"
    STATE = "state"


#: The columns of a parse step's rows that say which record a row comes from, and why it was rejected (if it was).
#: A step's schemas (flat Arrow schemas, every column nullable; Spark's come from them, :func:`spark_schema`) end
#: with these.
RECORD_COLUMNS = [
    ("kafka_topic", STRING), ("kafka_partition", INT), ("kafka_offset", BIGINT), ("kafka_timestamp", BIGINT),
    ("raw_key", BINARY), ("raw_value", BINARY), ("reason", STRING),
]  # fmt: skip
#: A fold's state: one JSON text.
STATE_SCHEMA = pa.schema([("state_json", STRING)])

_NULLABLE_INTEGERS: dict[pa.DataType, Any] = {INT: "Int32", BIGINT: "Int64"}


def pandas_frame(rows: Iterable[dict], schema: pa.Schema) -> pd.DataFrame:
    """Rows as a pandas frame for Arrow, with the columns of ``schema`` and None kept as null.

    Object columns, because an all-None column would otherwise become float NaN, which Arrow cannot turn into strings
    or bytes; pandas' nullable ``Int32``/``Int64`` for int32/int64 columns, for the same reason.
    """
    frame = pd.DataFrame(list(rows), columns=schema.names, dtype=object)
    for field in schema:
        if field.type in _NULLABLE_INTEGERS:
            frame[field.name] = frame[field.name].astype(_NULLABLE_INTEGERS[field.type])
    return frame


@dataclass(frozen=True)
class KindCounts:
    """A batch's rows by ``record_kind``: how many of each kind, and the lowest Kafka offset among them (a history
    insert reads only the table's files that may hold it or later ones)."""

    counts: Mapping[RecordKind, int]
    lowest_offsets: Mapping[RecordKind, int]

    def rows(self, *kinds: RecordKind) -> int:
        """The batch's rows of ``kinds``."""
        return sum(self.counts.get(kind, 0) for kind in kinds)

    def lowest_offset(self, kind: RecordKind) -> int | None:
        """The lowest Kafka offset among the batch's rows of ``kind`` (None: it has none)."""
        return self.lowest_offsets.get(kind)


def kind_counts(batch: DataFrame) -> KindCounts:
    """The rows of each ``record_kind`` in ``batch``, in one Spark job (whatever the writer needs to know of them)."""
    stats = batch.groupBy("record_kind").agg(F.count(F.lit(1)), F.min("kafka_offset")).collect()
    return KindCounts(
        {RecordKind(kind): int(n) for kind, n, _ in stats},
        {RecordKind(kind): int(low) for kind, _, low in stats if low is not None},
    )


def column_frame(columns: Mapping[str, Sequence[Any]], rows: int, schema: pa.Schema) -> pd.DataFrame:
    """Columns (lists of ``rows`` values) as a pandas frame for Arrow with the columns of ``schema``, as
    :func:`pandas_frame` makes it from rows (columns of ``schema`` not given are all null), without pandas' per-column
    inference: object arrays, and pandas' nullable integer arrays for int32/int64 columns."""
    data = {field.name: _column_array(columns.get(field.name), rows, field.type) for field in schema}
    return pd.DataFrame(data, index=pd.RangeIndex(rows), copy=False)


def _column_array(values: Sequence[Any] | None, rows: int, arrow_type: pa.DataType) -> Any:
    """One column of :func:`column_frame` (``None``: all null)."""
    integer = _NULLABLE_INTEGERS.get(arrow_type)
    if integer is not None:
        if values is None:
            return pd.array([None] * rows, dtype=integer)
        mask = np.fromiter((v is None for v in values), dtype=bool, count=rows)
        filled = np.fromiter((0 if v is None else v for v in values), dtype=np.int64, count=rows)
        return pd.arrays.IntegerArray(filled if integer == "Int64" else filled.astype(np.int32), mask)
    array = np.empty(rows, dtype=object)
    if values is not None:
        array[:] = values
    return array


def rows_frame(
    batch: pd.DataFrame, positions: np.ndarray, schema: pa.Schema, given: Mapping[str, Sequence[Any]]
) -> pd.DataFrame:
    """The rows of ``batch`` at ``positions`` (repeats allowed) as a frame for Arrow with the columns of ``schema``, as
    :func:`column_frame` makes it, with the columns in ``given`` (lists of ``len(positions)`` values) instead of
    ``batch``'s: a fold whose output rows are its input rows takes them by column, without Python values.

    An int32 or int64 column of ``batch`` may hold floats with NaN for null (what Arrow's pandas conversion makes of an
    integer column with nulls) or pandas' nullable integers."""
    rows = len(positions)
    data: dict[str, Any] = {}
    for name, arrow_type in zip(schema.names, schema.types, strict=True):
        if name in given:
            data[name] = _column_array(given[name], rows, arrow_type)
            continue
        column = batch[name]
        integer = _NULLABLE_INTEGERS.get(arrow_type)
        if integer is None:
            data[name] = column.to_numpy(dtype=object)[positions]
            continue
        mask = column.isna().to_numpy()[positions]
        if column.dtype.kind == "f":  # a cast would wrap what does not fit; int() refuses it
            floats = column.to_numpy()[positions]
            bound = 2.0**63 if integer == "Int64" else 2.0**31
            if np.any(~mask & ((floats < -bound) | (floats >= bound))):
                raise OverflowError(f"column {name}: a value outside {arrow_type}'s range")
            filled = np.where(mask, 0.0, floats).astype(np.int64)
        else:
            filled = column.to_numpy(dtype=np.int64, na_value=0)[positions]
        data[name] = pd.arrays.IntegerArray(filled if integer == "Int64" else filled.astype(np.int32), mask)
    return pd.DataFrame(data, index=pd.RangeIndex(rows), copy=False)


def nullable_values(column: pd.Series) -> list[Any]:
    """A column's values as Python objects, null (None, NaN, ``pd.NA``) as None."""
    values = column.tolist()
    if not column.hasnans:
        return values
    return [None if null else value for value, null in zip(values, column.isna().tolist(), strict=True)]


Classifier = Callable[[bytes | None, bytes | None, dict], Iterable[dict]]
"""``(key, value, kafka coordinates) -> rows``: what a parse step makes of one Kafka record (none, one or more)."""


def rejected(key: bytes | None, value: bytes | None, reason: str, kafka: dict) -> dict:
    """The parse step's row for a record a worker would discard (see :data:`RECORD_COLUMNS`)."""
    return {"record_kind": RecordKind.REJECTED, "raw_key": key, "raw_value": value, "reason": reason, **kafka}


def table_columns(spec: TableSpec, **given: Column) -> list[Column]:
    """``spec``'s columns, in its order, from a fold's output rows: those ``given`` as given, ``kafka_timestamp`` (epoch
    ms there) as a timestamp, the table's other timestamps the time of the write (:func:`write_time`), the rest by
    name."""
    columns = []
    for field in spec.schema:
        if field.name in given:
            columns.append(given[field.name].alias(field.name))
        elif field.name == "kafka_timestamp":
            columns.append(F.timestamp_millis("kafka_timestamp").alias("kafka_timestamp"))
        elif field.type == TIMESTAMP:
            columns.append(write_time(field.name))
        else:
            columns.append(F.col(field.name))
    return columns


# The Kafka source columns a parse step reads, in the order it reads them.
_KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS timestamp")


def _classify_rows(classify: Classifier, records: Iterable[tuple[Any, ...]]) -> list[dict]:
    """The exact parse step over Kafka rows ``(key, value, topic, partition, offset, timestamp)``: the rows
    ``classify`` makes of each, with the record's coordinates."""
    rows: list[dict] = []
    for key, value, topic, partition, offset, timestamp in records:
        kafka = {
            "kafka_topic": topic,
            "kafka_partition": partition,
            "kafka_offset": offset,
            "kafka_timestamp": timestamp,
        }
        rows.extend(classify(key, value, kafka))
    return rows


def _classify_records_pandas(kafka_rows: DataFrame, classify: Classifier, schema: pa.Schema) -> DataFrame:
    """:func:`classify_records` without a bulk path."""

    def parse(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for frame in frames:
            yield pandas_frame(_classify_rows(classify, frame.itertuples(index=False, name=None)), schema)

    return kafka_rows.selectExpr(*_KAFKA_COLUMNS).mapInPandas(parse, spark_schema(schema))


FastParse = Callable[[pa.RecordBatch], tuple[pa.RecordBatch | None, pa.BooleanArray]]
"""``Kafka rows -> (parsed rows, which records those are)``: a parse step's bulk path over an Arrow batch of Kafka rows
(columns ``key, value, topic, partition, offset, timestamp``). It returns the rows for the records it recognised and
a mask of those records; every other record goes to the step's exact :data:`Classifier`. It must give exactly the
rows the classifier would for the records it takes."""


def matched_rows(
    kafka: pa.RecordBatch,
    matched: pa.BooleanArray,
    kind: RecordKind,
    columns: Mapping[str, pa.Array],
    schema: pa.Schema,
) -> tuple[pa.RecordBatch, pa.BooleanArray]:
    """A bulk path's result (:data:`FastParse`): the ``matched`` Kafka rows as rows of ``schema`` of ``kind``, with
    ``columns`` (one value per matched row) and their coordinates; the other columns (raw bytes, reason) null."""
    chosen = kafka.filter(matched)
    given = {
        "record_kind": pa.array([str(kind)] * chosen.num_rows, pa.string()),
        **columns,
        "kafka_topic": chosen.column(2),
        "kafka_partition": chosen.column(3),
        "kafka_offset": chosen.column(4),
        "kafka_timestamp": chosen.column(5),
    }
    arrays = [given.get(field.name, pa.nulls(chosen.num_rows, field.type)) for field in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema), matched


def _classified_batch(kafka: pa.RecordBatch, classify: Classifier, schema: pa.Schema) -> pa.RecordBatch | None:
    """The exact parse step over the rows of an Arrow batch of Kafka rows (None when it yields no row)."""
    columns = [kafka.column(i).to_pylist() for i in range(6)]
    rows = _classify_rows(classify, zip(*columns, strict=True))
    if not rows:
        return None
    for row in rows:  # StrEnum members as plain strings for Arrow
        row["record_kind"] = str(row["record_kind"])
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def classify_records(
    kafka_rows: DataFrame, classify: Classifier, schema: pa.Schema, fast: FastParse | None = None
) -> DataFrame:
    """Run ``classify`` over every Kafka record (``mapInPandas``); the rows it returns must fit ``schema``.

    Each row gets the record's coordinates: ``kafka_topic``, ``kafka_partition``, ``kafka_offset`` and
    ``kafka_timestamp`` (epoch ms). With ``fast`` (``mapInArrow``), the records it recognises are parsed in bulk and
    only the others go through ``classify``.
    """
    if fast is None:
        return _classify_records_pandas(kafka_rows, classify, schema)

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            parsed, matched = fast(batch)
            if parsed is not None and parsed.num_rows:
                yield parsed
            rest = batch.filter(pc.invert(matched))
            if rest.num_rows:
                exact = _classified_batch(rest, classify, schema)
                if exact is not None:
                    yield exact

    return kafka_rows.selectExpr(*_KAFKA_COLUMNS).mapInArrow(parse, spark_schema(schema))


FoldFunction = Callable[[tuple, Iterator[pd.DataFrame], GroupState], Iterator[pd.DataFrame]]
"""A fold step: ``(group key, the group's frames, its state) -> output frames``."""


def fold_groups(
    grouped: GroupedData, fold: FoldFunction, output: pa.Schema, state: pa.Schema = STATE_SCHEMA
) -> DataFrame:
    """``fold`` over each group of ``grouped`` (``applyInPandasWithState``, update mode, no timeouts): rows of
    ``output``, the group's state kept as one row of ``state``."""
    return grouped.applyInPandasWithState(
        fold, spark_schema(output), spark_schema(state), "update", GroupStateTimeout.NoTimeout
    )


def group_fold(
    output: pa.Schema, fold: Callable[[tuple, pd.DataFrame, str | None], tuple[str, pd.DataFrame]]
) -> FoldFunction:
    """A fold step whose groups of rejected records (the key's first column ``rejected``) pass through unchanged, as
    rows of ``output``; every other group's rows (one frame) go to ``fold(key, rows, its state JSON or None)``, which
    returns the group's new state JSON and its output rows."""

    def fold_group(key: tuple, frames: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        batch = pd.concat(list(frames), ignore_index=True)
        if key[0] == RecordKind.REJECTED:
            yield pandas_frame(batch.to_dict("records"), output)
            return
        new_state, rows = fold(key, batch, state.get[0] if state.exists else None)
        state.update((new_state,))
        yield rows

    return fold_group


@dataclass(frozen=True)
class FoldSpec:
    """One fold pipeline, declared (:func:`start_fold` runs it).

    The records of ``topics`` (of the session; subscribed by pattern with ``as_pattern``,
    :func:`~connect_state.spark.kafka_source.read_internal_topic`) → the parse step (``classify``, rows of ``parsed``;
    its bulk path ``fast``) → ``fold`` per group of ``group_by`` (its state rows of ``state``; with ``group_kind``, the
    rows that fold are grouped under that kind in a ``group_kind`` column and rejected ones apart) → rows of ``output``
    → :meth:`FoldWriter.write`: the batch's ``history_kind`` rows inserted into ``history``, its ``current_kind`` rows
    (with ``latest``: only those whose ``latest`` column is true) merged into ``current`` by ``merge``, with their
    ``change`` column as ``op``. ``columns`` makes the tables' columns that are not the output's by name
    (:func:`table_columns`): the reconciler reads ``current``'s key with them from the parse step's rows, rejected ones
    aside. ``conf`` is set on the session while the query starts and while it reconciles; ``summary`` is a batch's
    log line (``{history}``, ``{current}``: its rows of each).
    """

    name: str
    topics: Callable[[SparkSession], Sequence[str]]
    classify: Classifier
    parsed: pa.Schema
    group_by: Sequence[str]
    fold: FoldFunction
    output: pa.Schema
    history: TableSpec
    history_kind: RecordKind
    current: TableSpec
    current_kind: RecordKind
    merge: MergeSpec
    summary: str
    fast: FastParse | None = None
    group_kind: str | None = None
    state: pa.Schema = STATE_SCHEMA
    latest: str | None = None
    op: str | None = None
    columns: Callable[[], Mapping[str, Column]] = dict
    conf: Mapping[str, str] | None = None
    as_pattern: bool = False

    def fold_stream(self, kafka_rows: DataFrame) -> DataFrame:
        """Kafka rows → the fold's output rows (its tables' rows and the rejected records)."""
        parsed = classify_records(kafka_rows, self.classify, self.parsed, self.fast)
        if self.group_kind is not None:
            is_rejected = F.col("record_kind") == RecordKind.REJECTED
            kind = F.when(is_rejected, F.lit(str(RecordKind.REJECTED))).otherwise(F.lit(self.group_kind))
            parsed = parsed.withColumn("group_kind", kind)
        return fold_groups(parsed.groupBy(*self.group_by), self.fold, self.output, self.state)

    def reconciler(self, settings: Settings) -> Reconciler:
        """The :class:`Reconciler` of ``current``: its key of the parse step's rows of every record of the topics (a
        batch read)."""

        def live_keys(spark: SparkSession, names: Sequence[str]) -> DataFrame:
            parsed = classify_records(read_topic_batch(spark, settings, names), self.classify, self.parsed, self.fast)
            given = self.columns()
            keys = [given.get(name, F.col(name)).alias(name) for name in self.current.key]
            return parsed.filter(F.col("record_kind") != RecordKind.REJECTED).select(*keys)

        path, log = str(settings.delta_root / self.current.name), job_logger(self.current.name)
        return Reconciler(
            self.current, path, self.topics, live_keys, shared_positions(settings), dict(self.conf or {}), log
        )


class FoldWriter:
    """A job's ``foreachBatch`` sink: persists the batch, calls :meth:`write` (a :class:`FoldSpec`'s tables; a
    writer without one overrides it), quarantines rejected rows.

    Every Delta write of a batch is tagged with (this query's id + table, batch id), so a batch replayed after a crash
    changes nothing that already committed. The query id comes from the checkpoint, so a new checkpoint never collides
    with the batch ids an earlier one recorded.

    Around the table writes (:mod:`connect_state.progress.positions`):

    * before the batch's records are read, the batch's start (``offsets/N-1`` of the checkpoint) is compared with its
      planned end (``offsets/N``) and the partitions' log start offsets: records lost to retention, a deleted or a
      recreated topic go to ``data_loss`` (and a log line); Spark's source goes on from the earliest offset;
    * after them, the batch's end offsets go to ``watermarks`` (:mod:`connect_state.spark.watermarks`: through
      ``deltalake`` where it can commit): the position the tables reflect. A crash in between replays the batch, whose
      writes are idempotent, so a watermark never claims more than the tables hold;
    * then, every ``reconcile_interval_s`` (and after a data loss), the :class:`Reconciler` of the query's current
      table removes rows whose key is no longer in the topics.

    :func:`start_fold_query` gives the writer its Kafka positions client, its reconciler, the settings' ``deltalake``
    storage options and whether small writes go through ``deltalake`` (:func:`~connect_state.tables.small_writes.
    deltalake_writes`); without them (a writer called directly) it records watermarks only, and writes small batches
    through ``deltalake`` without storage options where the location allows it.
    """

    job_name = "fold"
    reconcile_interval_s = RECONCILE_INTERVAL_S

    def __init__(self, delta_root: Location, checkpoint: Location, spec: FoldSpec | None = None) -> None:
        self.spec = spec
        if spec is not None:
            self.job_name = spec.name
        self.delta_root = delta_root
        self.checkpoint = str(checkpoint)
        self.rejected_path = str(delta_root / REJECTED_RECORDS.name)
        self._query_id: str | None = None
        self.log = job_logger(self.job_name)
        self.positions: TopicPositions | None = None
        self.reconciler: Reconciler | None = None
        self._next_reconcile = 0.0
        self.retention: RetentionPass | None = None  # the clean-up of the history tables it writes (start_fold_query)
        self._shared_tables_ready = False
        #: Tables this writer's query created (or, rebuilding, emptied) at its start and has not written yet: a
        #: history insert or a current MERGE into one is an append (nothing to match; still once per batch, by its
        #: transaction id).
        self.new_tables: set[str] = set()
        #: ``deltalake``'s storage options for ``delta_root`` (:meth:`attach`: the settings'; none for a local one).
        self.deltalake_options: dict[str, str] = {}
        #: Whether small writes go through ``deltalake`` (:meth:`attach`: decided at the query's start).
        self.deltalake_writes = delta_root.deltalake_commits
        self._watermarks: WatermarkStore | None = None
        self._last_watermark: dict[tuple[str, int], int] | None = None
        #: The topics' end offsets when this writer first wrote a history table (None: not taken yet); emptied once
        #: a batch starts past them, or when its query created the history tables (:meth:`history_is_new`).
        self._history_frontier: Positions | None = None

    def path(self, spec: TableSpec) -> str:
        return str(self.delta_root / spec.name)

    def app_id(self, spec: TableSpec) -> str:
        """The Delta transaction id of this query's writes to ``spec``."""
        if self._query_id is None:
            raise RuntimeError("the query id is known once the first batch arrives")
        return f"connect-state:{self.job_name}:{self._query_id}:{spec.name}"

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        if self._query_id is None:
            self._query_id = checkpoint_query_id(spark, self.checkpoint)
        fault_point(FaultPoint.BATCH_START)
        losses = self.record_data_loss(spark, batch_id)  # before the batch's records are read
        batch.persist()
        try:
            counts = kind_counts(batch)  # the one pass over the batch that fills the cache
            n_rejected = counts.rows(RecordKind.REJECTED)
            if n_rejected:
                self.write_rejected(batch.filter(F.col("record_kind") == RecordKind.REJECTED), batch_id)
            summary = self.write(batch.filter(F.col("record_kind") != RecordKind.REJECTED), batch_id, counts)
            self.log.info("batch %d: %s, %d rejected records", batch_id, summary, n_rejected)
        finally:
            batch.unpersist()
        self.record_watermark(spark, batch_id)  # after the batch's table writes
        fault_point(FaultPoint.AFTER_BATCH_WRITE)
        if self.reconciler is not None and (losses or time.monotonic() >= self._next_reconcile):
            self.reconcile(spark)
        if self.retention is not None:
            self.retention.maybe_run(spark)

    def attach(
        self,
        positions: TopicPositions,
        reconciler: Reconciler | None,
        deltalake_options: Mapping[str, str],
        deltalake_writes: bool,
    ) -> None:
        """Give the writer its Kafka positions client (data loss), its table's reconciler and ``deltalake``'s
        storage options (the settings'); the query's start has just reconciled, so the next pass is due in
        ``reconcile_interval_s``."""
        self.positions = positions
        self.reconciler = reconciler
        self.deltalake_options = dict(deltalake_options)
        self.deltalake_writes = deltalake_writes
        self._next_reconcile = time.monotonic() + self.reconcile_interval_s

    def _ensure_shared_tables(self, spark: SparkSession) -> None:
        if not self._shared_tables_ready:
            ensure_table(spark, self.delta_root, DATA_LOSS)
            self._shared_tables_ready = True

    def record_data_loss(self, spark: SparkSession, batch_id: int) -> list[DataLoss]:
        """Compare the batch's start and planned end with the partitions' log start offsets; record what was lost
        (``data_loss``, idempotent per batch) and log it. Needs the positions client (:meth:`attach`)."""
        if self.positions is None:
            return []
        previous = planned_positions(spark, self.checkpoint, batch_id - 1)
        planned = planned_positions(spark, self.checkpoint, batch_id)
        if not previous or planned is None:
            return []
        check = partitions_to_check(previous, planned)
        earliest = self.positions.earliest_offsets(check) if check else {}
        losses = detect_losses(previous, planned, earliest)
        if not losses:
            return []
        for loss in losses:
            self.log.warning("batch %d: %s", batch_id, loss.describe(self.job_name))
        self._ensure_shared_tables(spark)
        rows = [
            (self.job_name, x.topic, x.partition, x.expected_offset, x.earliest_offset, str(x.cause), batch_id)
            for x in losses
        ]
        frame = spark.createDataFrame(rows, _DATA_LOSS_ROWS).withColumn("detected_at", F.current_timestamp())
        retry_on_conflict(
            lambda: insert_new_once(frame, self.path(DATA_LOSS), DATA_LOSS.key, self.app_id(DATA_LOSS), batch_id),
            DATA_LOSS.name,
            SHARED_TABLE_ATTEMPTS,
        )
        return losses

    def record_watermark(self, spark: SparkSession, batch_id: int) -> None:
        """The batch's planned end offsets as this query's rows of ``watermarks`` (partitions the query no longer
        reads are removed), once per batch; skipped when they are the ones this writer wrote last (a no-data batch:
        ``committed_at`` stays when the position last moved, and the table gets no commit). Written with
        ``deltalake`` where it can commit: tens of milliseconds, not the seconds of a Spark MERGE
        (:mod:`connect_state.spark.watermarks`)."""
        positions = planned_positions(spark, self.checkpoint, batch_id)
        if not positions or positions == self._last_watermark:
            return
        if self._watermarks is None:
            self._watermarks = watermark_store(spark, self.delta_root, self.deltalake_options, self.deltalake_writes)
        try:
            self._watermarks.record(self.job_name, positions, batch_id, self.app_id(WATERMARKS))
        except Exception as err:  # the tables are ahead of the watermark (safe: readers fold a few records more)
            self.log.warning(
                "batch %d: watermark not recorded (%s); the next batch records it", batch_id, err, exc_info=True
            )
            return
        self._last_watermark = positions

    def reconcile(self, spark: SparkSession) -> None:
        """A reconcile pass of the query's current table (a failed pass is logged; the next one is due later)."""
        if self.reconciler is None:
            return
        self._next_reconcile = time.monotonic() + self.reconcile_interval_s
        try:
            self.reconciler(spark)
        except Exception:
            self.log.warning(
                "reconcile %s failed; next pass in %.0f s",
                self.reconciler.table.name,
                self.reconcile_interval_s,
                exc_info=True,
            )

    def insert_history(
        self, rows: DataFrame, spec: TableSpec, batch_id: int, counts: KindCounts, kind: RecordKind
    ) -> None:
        """Insert a batch's rows of a history table (one per record of ``kind``: ``counts``), keyed by their Kafka
        coordinates (``spec.key``): a record folded again (a batch replayed, a checkpoint lost while the tables were
        kept) adds nothing. Only the table's files that may hold the batch's offsets are read (``kafka_offset`` at
        least the rows' lowest). An append (tagged with the same transaction id) does the same into a table the query
        created empty and has not written yet, and for a batch past every record an earlier run can have written
        (:meth:`history_is_new`): in a running job, every batch but the first ones after a start
        (:meth:`append_history`)."""
        if self.append_if_new(spec, rows, batch_id):
            return
        if self.history_is_new(rows.sparkSession, batch_id):
            self.append_history(rows, spec, batch_id, counts.rows(kind))
            return
        lowest_offset = counts.lowest_offset(kind)
        target = f"t.kafka_offset >= {lowest_offset}" if lowest_offset is not None else None
        insert_new_once(stamped(rows), self.path(spec), spec.key, self.app_id(spec), batch_id, target)

    def write_history(self, batch: DataFrame, kind: RecordKind, spec: TableSpec, batch_id: int, counts: KindCounts,
                      **given: Column) -> int:  # fmt: skip
        """:meth:`insert_history` of the batch's rows of ``kind`` as rows of ``spec`` (:func:`table_columns`); how many
        there were."""
        n_rows = counts.rows(kind)
        if n_rows:
            rows = batch.filter(F.col("record_kind") == kind).select(*table_columns(spec, **given))
            self.insert_history(rows, spec, batch_id, counts, kind)
            fault_point(FaultPoint.AFTER_HISTORY_WRITE)
        return n_rows

    def small_write(self, n_rows: int) -> bool:
        """Whether a write of ``n_rows`` goes through ``deltalake``: they are few
        (:data:`~connect_state.tables.small_writes.SMALL_WRITE_ROWS`, collected to the driver) and ``deltalake``
        commits to ``delta_root``. Tens of milliseconds, where Spark's write of a few rows takes one to three seconds
        of driver work (:mod:`connect_state.tables.small_writes`)."""
        return n_rows <= SMALL_WRITE_ROWS and self.deltalake_writes

    def append_history(self, rows: DataFrame, spec: TableSpec, batch_id: int, n_rows: int) -> None:
        """Append ``n_rows`` history rows once per batch (:meth:`small_write`: with ``deltalake``, else Spark)."""
        if self.small_write(n_rows):
            table = as_table_rows(collect_stamped(rows), spec)
            small_writes.append_once(table, self.path(spec), self.app_id(spec), batch_id, self.deltalake_options)
        else:
            append_once(stamped(rows), self.path(spec), self.app_id(spec), batch_id)

    def merge_current(self, source: DataFrame, spec: TableSpec, merge: MergeSpec, batch_id: int, n_rows: int) -> None:
        """Run ``merge`` of a batch's ``n_rows`` (at most) into the current table ``spec``, once per batch
        (:meth:`small_write`: with ``deltalake``, else Spark). Into a table this query created or emptied and has not
        written yet, the rows the MERGE would insert are appended instead (:func:`~connect_state.spark.delta_io.
        inserted_rows`): a catch-up's first batch, every key new, at a fraction of a MERGE's cost."""
        if spec.name in self.new_tables and not self.small_write(n_rows):
            rows = inserted_rows(stamped(source), merge, spec)
            append_once(rows, self.path(spec), self.app_id(spec), batch_id)
            self.new_tables.discard(spec.name)
            return
        self.new_tables.discard(spec.name)
        if self.small_write(n_rows):
            rows = merge_source_rows(collect_stamped(source), spec)
            path, app_id = self.path(spec), self.app_id(spec)
            small_writes.merge_once(rows, path, merge, app_id, batch_id, self.deltalake_options)
        else:
            merge_once(stamped(source), self.path(spec), merge, self.app_id(spec), batch_id)

    def history_is_new(self, spark: SparkSession, batch_id: int) -> bool:
        """Whether none of the batch's records can be in a history table yet, so that an append (tagged with the
        batch's transaction id) does what the insert-only MERGE would, at a fraction of its cost.

        A record gets into a history table through a batch of this query (a replay of the same batch is skipped by
        its transaction id) or through a run under an earlier checkpoint (lost or deleted while the tables were kept;
        or a rebuild stopped half-way): those ran before this writer's query started, so their records lie below the
        topics' end offsets when the writer first writes history (the frontier, asked from Kafka once). A batch that
        starts past the frontier in every partition it reads (:func:`~connect_state.progress.positions.starts_past`)
        holds none of them, nor does any batch after it. Until then (and without a positions client, or when Kafka does
        not answer for every partition), the MERGE decides row by row.

        A topic deleted and created again reuses its offsets: its new records are appended beside the rows of the
        old topic's records at the same coordinates (``data_loss`` records the recreation), where the MERGE would
        have dropped them as already written."""
        if self._history_frontier == {}:  # passed: no checkpoint read in a running job's batches
            return True
        planned = planned_positions(spark, self.checkpoint, batch_id)
        if self._history_frontier is None:
            if self.positions is None or not planned:
                return False
            try:
                ends = self.positions.latest_offsets(planned)
            except KafkaWriteError as err:
                self.log.info("batch %d: history written by MERGE (the topics' end offsets: %s)", batch_id, err)
                return False
            if set(ends) != set(planned):  # a topic deleted meanwhile: ask again at the next batch
                return False
            self._history_frontier = ends
        start = planned_positions(spark, self.checkpoint, batch_id - 1)
        if start is None or not planned or not starts_past(start, planned, self._history_frontier):
            return False
        self.log.info("batch %d: past the records of earlier runs, history rows are appended from now on", batch_id)
        self._history_frontier = {}
        return True

    def history_frontier_passed(self) -> None:
        """Every batch from now on appends its history rows (:meth:`history_is_new`)."""
        self._history_frontier = {}

    def append_if_new(self, spec: TableSpec, rows: DataFrame, batch_id: int) -> bool:
        """Append ``rows`` (tagged with the batch's transaction id) when ``spec`` is a table this query created empty
        and has not written yet, where a MERGE would only insert them; False (nothing written) otherwise."""
        if spec.name not in self.new_tables:
            return False
        append_once(stamped(rows), self.path(spec), self.app_id(spec), batch_id)
        self.new_tables.discard(spec.name)
        return True

    def write(self, batch: DataFrame, batch_id: int, counts: KindCounts) -> str:
        """Write the batch's non-rejected rows (``counts``: how many of each kind the batch has) into the
        :class:`FoldSpec`'s history and current tables; return a short summary for the log."""
        fold = self.spec
        if fold is None:
            raise NotImplementedError
        given = fold.columns()
        n_history = self.write_history(batch, fold.history_kind, fold.history, batch_id, counts, **given)
        n_current = counts.rows(fold.current_kind)
        if n_current:
            rows = batch.filter(F.col("record_kind") == fold.current_kind)
            if fold.latest is not None:
                rows = rows.filter(F.col(fold.latest))
            op = [F.col("change").alias(fold.op)] if fold.op is not None else []
            source = rows.select(*table_columns(fold.current, **given), *op)
            self.merge_current(source, fold.current, fold.merge, batch_id, n_current)
        return fold.summary.format(history=n_history, current=n_current)

    def write_rejected(self, rejected: DataFrame, batch_id: int) -> None:
        """Insert rejected records, keyed by their Kafka coordinates (a record is quarantined once)."""
        rows = rejected.select(
            F.col("kafka_topic").alias("topic"),
            F.col("kafka_partition").alias("partition"),
            F.col("kafka_offset").alias("offset"),
            F.col("raw_key").alias("key"),
            F.col("raw_value").alias("value"),
            "reason",
            write_time("seen_at"),
        )
        # Every job quarantines into the same table, so a concurrent job's commit may win: retry (idempotent).
        retry_on_conflict(
            lambda: insert_new_once(
                stamped(rows), self.rejected_path, REJECTED_RECORDS.key, self.app_id(REJECTED_RECORDS), batch_id
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
    reconciler: Reconciler | None = None,
    trigger_interval: str | None = None,
    checkpoint_name: str | None = None,
) -> StreamingQuery:
    """Create ``tables`` if needed and start ``folded`` (update mode) into ``writer``, at ``trigger_interval``
    (default the settings' ``trigger.interval``) unless ``available_now``, with its checkpoint in ``checkpoint_name``
    (default ``job_name``).

    With a new checkpoint the fold starts from the first record of its topics, so the ``current_tables`` (snapshots,
    not history) are emptied first (rows whose tombstones were compacted away must not linger), and so are the
    query's watermarks; the history tables are kept (their rows are keyed by their Kafka coordinates: a record folded
    again adds nothing). With an existing checkpoint, ``reconciler`` runs a pass first (rows whose keys left the
    topics while the job was down); the writer gets it for the passes that follow (:meth:`FoldWriter.attach`).
    """
    created = {
        spec.name for spec in (*tables, REJECTED_RECORDS, DATA_LOSS) if create_table(spark, settings.delta_root, spec)
    }
    options = deltalake_options(settings)
    use_deltalake = deltalake_writes(settings.delta_root, options)
    writer._shared_tables_ready = True
    writer.new_tables = {spec.name for spec in tables if spec.name in created}
    current = {spec.name for spec in current_tables}
    history = [spec.name for spec in tables if spec.name not in current]
    if history and all(name in created for name in history):
        writer.history_frontier_passed()  # no earlier run wrote into history tables created just now
    checkpoint = settings.checkpoint_path(checkpoint_name or job_name)
    if not storage.exists(spark, checkpoint):  # Hadoop's filesystem: the checkpoint may be in object storage
        # (a table created just now is empty: no DELETE, which would cost a Spark job and maybe a commit)
        for spec in current_tables:
            if spec.name in created:
                continue
            writer.log.info("no checkpoint at %s: rebuilding %s from the start of the topics", checkpoint, spec.name)
            DeltaTable.forPath(spark, str(settings.delta_root / spec.name)).delete()
            writer.new_tables.add(spec.name)  # empty now: the first batch's MERGE would only insert
        watermark_store(spark, settings.delta_root, options, use_deltalake).forget(job_name)
    else:
        removed = discard_interrupted_first_entry(spark, checkpoint)
        if removed:
            writer.log.warning(
                "%s: removed what an interrupted first batch left in the checkpoint: %s", job_name, removed
            )
        if reconciler is not None:
            try:
                reconciler(spark)
            except Exception:
                writer.log.warning("reconcile %s failed; the query starts anyway", reconciler.table.name, exc_info=True)
    writer.attach(shared_positions(settings), reconciler, options, use_deltalake)
    writer.retention = RetentionPass(settings, job_name, use_deltalake, options, tables=tables)
    stream = (
        folded.writeStream.queryName(query_name(settings, job_name))
        .outputMode("update")
        .foreachBatch(writer)
        .option("checkpointLocation", str(checkpoint))
    )
    interval = trigger_interval or settings.trigger_interval
    trigger = {"availableNow": True} if available_now else {"processingTime": interval}
    return stream.trigger(**trigger).start()


def start_fold(
    spark: SparkSession,
    settings: Settings,
    fold: FoldSpec,
    available_now: bool = False,
    max_offsets_per_trigger: int | None = None,
    *,
    topics: Sequence[str] | None = None,
    writer: FoldWriter | None = None,
) -> StreamingQuery:
    """Create ``fold``'s tables if needed and start its query (:func:`start_fold_query`, with its reconciler) over
    ``topics`` (default: the fold's) into ``writer`` (default: a :class:`FoldWriter` of ``fold``), the fold's
    ``conf`` set on the session meanwhile. It runs until stopped, or until caught up."""
    with session_conf(spark, fold.conf or {}):
        names = fold.topics(spark) if topics is None else topics
        rows = read_internal_topic(spark, settings, names, max_offsets_per_trigger, as_pattern=fold.as_pattern)
        writer = writer or FoldWriter(settings.delta_root, settings.checkpoint_path(fold.name), fold)
        return start_fold_query(
            spark,
            settings,
            fold.name,
            fold.fold_stream(rows),
            writer,
            tables=(fold.current, fold.history),
            current_tables=(fold.current,),
            available_now=available_now,
            reconciler=fold.reconciler(settings),
        )


@dataclass(frozen=True)
class FoldJob:
    """A job that is one fold query (:class:`~connect_state.spark.streaming.Job`), declared by ``spec`` (of the
    settings): nothing to check, one task."""

    name: str
    spec: Callable[[Settings], FoldSpec]

    def check(self, settings: Settings) -> None:
        return None

    def start_query(
        self,
        spark: SparkSession,
        settings: Settings,
        available_now: bool = False,
        max_offsets_per_trigger: int | None = None,
    ) -> StreamingQuery:
        """Create the tables if needed and start the query (:func:`start_fold`)."""
        return start_fold(spark, settings, self.spec(settings), available_now, max_offsets_per_trigger)

    def start(self, spark: SparkSession, settings: Settings, available_now: bool, max_offsets: int | None) -> Run:
        def start_query() -> StreamingQuery:
            return self.start_query(spark, settings, available_now, max_offsets)

        return Run([QueryTask(start_query(), restart=start_query, cluster=cluster_label(settings))])
