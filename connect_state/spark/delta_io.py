"""Delta writes from ``foreachBatch``, idempotent per micro-batch.

Every write carries a Delta ``SetTransaction`` (``txnAppId`` = query + table, ``txnVersion`` = batch id): when a
restarted query replays a batch whose write already committed, Delta skips it, so a crash between two table writes
of one batch neither loses nor doubles rows (Delta's idempotent writes in ``foreachBatch``:
https://docs.delta.io/latest/delta-streaming.html#idempotent-table-writes-in-foreachbatch).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import reduce

import pyarrow as pa
from delta import exceptions as delta_errors
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type
from pyspark.sql.types import DataType, StructType
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_incrementing

from connect_state.core.storage import Location
from connect_state.spark import storage
from connect_state.tables.merge_spec import ClauseKind, MergeSpec
from connect_state.tables.schemas import TABLE_PROPERTIES, TableSpec

log = logging.getLogger("connect_state.delta_io")

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


def spark_type(arrow_type: pa.DataType) -> DataType:
    """The Spark type of an Arrow type of :mod:`connect_state.tables.schemas` (pyspark's own converter; no JVM)."""
    return from_arrow_type(arrow_type)


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema: same names, types and nullability (pyspark's own converter; no JVM)."""
    return from_arrow_schema(schema)


def schema_of(spec: TableSpec) -> StructType:
    """The Spark schema of a table, derived from its Arrow schema in :mod:`connect_state.tables.schemas`."""
    return spark_schema(spec.schema)


def is_commit_file(name: str) -> bool:
    """Whether a ``_delta_log`` entry is a commit or a checkpoint of one (``<20 digits>.json``,
    ``<20 digits>.checkpoint[.<part>].parquet``), not a temporary file or a checksum."""
    version, _, rest = name.partition(".")
    return len(version) == 20 and version.isdigit() and (rest == "json" or rest.startswith("checkpoint"))


def table_exists(spark: SparkSession, path: str) -> bool:
    """Whether the Delta table at ``path`` has a commit (another process may have created it since we last looked).

    Not ``DeltaTable.isDeltaTable``: once that has looked at a table while another process was creating it (its
    ``_delta_log`` there, no commit in it yet), Delta's cached log keeps answering False for as long as the driver
    runs, since nothing refreshes it (the cleanup job then never saw the ``connector_events`` table that
    ``connect-state-connector-states`` created beside it). A read of the table refreshes the cached log.

    A True answer is kept for the process's life (a table is not dropped under a running job; a long-running table's
    ``_delta_log`` holds thousands of files, one listing each, on object storage one LIST request per 1,000)."""
    if path in _EXISTING:
        return True
    if any(is_commit_file(name) for name in storage.list_names(spark, f"{path}/_delta_log")):
        _EXISTING.add(path)
        return True
    return False


_EXISTING: set[str] = set()
"""The table paths :func:`table_exists` found a commit in."""


def ensure_table(spark: SparkSession, root: Location, spec: TableSpec) -> str:
    """Create the table at ``root/spec.name`` if it does not exist yet; return its path."""
    path = str(root / spec.name)
    _create_if_absent(spark, path, spec)
    return path


def create_table(spark: SparkSession, root: Location, spec: TableSpec) -> bool:
    """:func:`ensure_table`; True when the table did not exist before (it is empty now)."""
    return _create_if_absent(spark, str(root / spec.name), spec)


def _create_if_absent(spark: SparkSession, path: str, spec: TableSpec) -> bool:
    """Create the table unless it has a commit; True when it had none. A ``_delta_log`` without a commit is what a
    process killed while creating the table leaves behind: Delta takes it for neither a table nor an empty location
    (``DELTA_TABLE_NOT_FOUND`` on every later start), so it is removed first and the table created again."""
    log_dir = f"{path}/_delta_log"
    entries = storage.list_names(spark, log_dir)
    existed = any(is_commit_file(name) for name in entries)
    if not existed and storage.exists(spark, log_dir):
        log.warning("%s: a _delta_log without a commit (an interrupted creation, %s); creating the table again",
                    path, entries or "empty")  # fmt: skip
        storage.delete(spark, log_dir)
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema_of(spec))
    builder = builder.comment(spec.description)
    for key, value in TABLE_PROPERTIES.items():
        builder = builder.property(key, value)
    builder.execute()
    return not existed


@contextmanager
def delta_transaction(spark: SparkSession, app_id: str, version: int) -> Iterator[None]:
    """Tag the Delta writes made inside the block (MERGE, UPDATE, DELETE) with ``(app_id, version)``."""
    spark.conf.set(TXN_APP_ID, app_id)
    spark.conf.set(TXN_VERSION, str(version))
    try:
        yield
    finally:
        spark.conf.unset(TXN_APP_ID)
        spark.conf.unset(TXN_VERSION)


def append_once(df: DataFrame, path: str, app_id: str, version: int) -> None:
    """Append ``df`` unless the append tagged ``(app_id, version)`` already committed."""
    df.write.format("delta").mode("append").option("txnAppId", app_id).option("txnVersion", version).save(path)


def insert_new_once(
    df: DataFrame,
    path: str,
    key: tuple[str, ...],
    app_id: str,
    version: int,
    target_condition: str | None = None,
) -> None:
    """Insert the rows of ``df`` whose key is not in the table yet (an insert-only MERGE), once per version.

    ``target_condition`` (on the table's columns, alias ``t``) must hold for every row a row of ``df`` could match; it
    lets Delta skip the files that cannot (e.g. ``t.kafka_offset >= <the batch's lowest offset>``).
    """
    condition = " AND ".join(f"t.`{k}` = s.`{k}`" for k in key)
    if target_condition:
        condition = f"{condition} AND {target_condition}"
    table = DeltaTable.forPath(df.sparkSession, path)
    with delta_transaction(df.sparkSession, app_id, version):
        table.alias("t").merge(df.alias("s"), condition).whenNotMatchedInsertAll().execute()


def merge_once(source: DataFrame, path: str, merge: MergeSpec, app_id: str, version: int) -> None:
    """Run ``merge`` of ``source`` into the table at ``path``, tagged with ``(app_id, version)`` (skipped by Delta when
    the table has it)."""
    with delta_transaction(source.sparkSession, app_id, version):
        merge_rows(source, path, merge)


def inserted_rows(source: DataFrame, merge: MergeSpec, spec: TableSpec) -> DataFrame:
    """The rows ``merge`` of ``source`` inserts into ``spec``'s table when it is empty, in its columns and types: each
    source row through the first insert clause whose predicate holds (a column the clause does not set is null). An
    append of them leaves the table as the MERGE would: its other clauses need a matching row, and there is none."""
    inserts = [clause for clause in merge.clauses if clause.kind is ClauseKind.NOT_MATCHED_INSERT]
    earlier: list[str] = []
    parts: list[DataFrame] = []
    for clause in inserts:
        conditions = [f"NOT coalesce({p}, false)" for p in earlier]
        if clause.predicate is not None:
            conditions.append(f"coalesce({clause.predicate}, false)")
        rows = source.alias("s").where(F.expr(" AND ".join(conditions))) if conditions else source.alias("s")
        parts.append(rows.select(*_insert_values(clause.values, spec)))
        if clause.predicate is None:
            break
        earlier.append(clause.predicate)
    if not parts:
        return source.alias("s").where(F.lit(False)).select(*_insert_values({}, spec))
    return reduce(DataFrame.unionByName, parts)


def _insert_values(values: Mapping[str, str], spec: TableSpec) -> list[Column]:
    """An insert clause's ``values`` as ``spec``'s columns, in order, cast to their types (null where not set)."""
    columns = []
    for field in spec.schema:
        value = F.expr(values[field.name]) if field.name in values else F.lit(None)
        columns.append(value.cast(spark_type(field.type)).alias(field.name))
    return columns


def merge_rows(source: DataFrame, path: str, merge: MergeSpec) -> None:
    """Run ``merge`` of ``source`` into the table at ``path`` (tagged with the session's transaction, if any)."""
    builder = DeltaTable.forPath(source.sparkSession, path).alias("t").merge(source.alias("s"), merge.condition)
    for clause in merge.clauses:
        values: dict[str, str | Column] = dict(clause.values)
        match clause.kind:
            case ClauseKind.MATCHED_DELETE:
                builder = builder.whenMatchedDelete(clause.predicate)
            case ClauseKind.MATCHED_UPDATE:
                builder = builder.whenMatchedUpdate(clause.predicate, set=values)
            case ClauseKind.NOT_MATCHED_INSERT:
                if clause.predicate is None:
                    builder = builder.whenNotMatchedInsert(values=values)
                else:
                    builder = builder.whenNotMatchedInsert(clause.predicate, values=values)
    builder.execute()


#: Delta's commit conflicts, as delta-spark converts them from the JVM (siblings: none is caught by another's class).
CONFLICTS: tuple[type[Exception], ...] = (
    delta_errors.DeltaConcurrentModificationException,
    delta_errors.ConcurrentWriteException,
    delta_errors.MetadataChangedException,
    delta_errors.ProtocolChangedException,
    delta_errors.ConcurrentAppendException,
    delta_errors.ConcurrentDeleteReadException,
    delta_errors.ConcurrentDeleteDeleteException,
    delta_errors.ConcurrentTransactionException,
)


def retry_on_conflict(action: Callable[[], None], what: str, attempts: int = 5) -> None:
    """Run an idempotent Delta write again when a concurrent writer of the same table won (Delta's optimistic
    concurrency, one of :data:`CONFLICTS`: e.g. two jobs quarantining records into ``rejected_records`` at once), after
    a pause that grows by 0.2 s each time. The writes of this module carry a transaction id, so a retry never doubles
    rows."""

    def retrying(state: RetryCallState) -> None:
        log.info("%s: concurrent Delta write, retrying (%d/%d)", what, state.attempt_number, attempts)

    Retrying(
        retry=retry_if_exception_type(CONFLICTS),
        stop=stop_after_attempt(attempts),
        wait=wait_incrementing(start=0.2, increment=0.2),
        before_sleep=retrying,
        reraise=True,
    )(action)
