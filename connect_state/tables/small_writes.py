"""Small Delta writes from the jobs' driver through ``deltalake`` (delta-rs, no JVM): once per micro-batch, and the
heartbeats job's records of each heartbeat.

A Spark write of a few rows costs 1–3 s of fixed driver work on two cores (a MERGE is nine Spark jobs; an append of
three rows more than a second: ``bench/RESULTS.md``, issue 11 §3); the same write through delta-rs takes tens of
milliseconds. So a running job's small writes go through here where ``deltalake`` can commit
(:attr:`connect_state.core.storage.Location.deltalake_commits`): the ``watermarks`` of every batch
(:mod:`connect_state.spark.watermarks`) and the history rows of a small batch
(:meth:`connect_state.spark.foldjob.FoldWriter.insert_history`), and a small batch's MERGE into a current table
(:meth:`~connect_state.spark.foldjob.FoldWriter.merge_current`, the :class:`~connect_state.tables.merge_spec.MergeSpec`
Spark runs for a large one). Spark writes the same tables in the same format; both record the Delta transaction
``(app id, batch id)`` in the log, so either skips a batch the other committed. The heartbeats sink's writes
(:func:`append`, :func:`merge_rows`; :func:`read` for its check before sending) carry no transaction id: a heartbeat is
recorded at least once (:class:`connect_state.spark.heartbeats.HeartbeatSink`).

**Commits.** Within one process the writers of a table take turns (:func:`commit_lock`, held for the read, the write
and the commit), as Spark's single-driver log store serialises a driver's commits on S3: they never conflict, on any
store. Across drivers a commit that loses to another's is read again and retried after a jittered pause that doubles
(:func:`with_retries`); there Delta's put-if-absent of the next log file needs the store's conditional writes (delta-rs
1.x: a local disk, S3 since 2024, S3-compatible stores that honour ``If-None-Match``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TypeVar

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from connect_state.core.errors import DeltaWriteError
from connect_state.core.storage import Location
from connect_state.tables.merge_spec import ClauseKind, MergeSpec
from connect_state.tables.schemas import TABLE_PROPERTIES, WATERMARKS, TableSpec

log = logging.getLogger("connect_state.deltalake_io")
T = TypeVar("T")

#: The most rows a batch's history append or current-table MERGE sends through ``deltalake`` (collected to the driver
#: first); more go through Spark.
SMALL_WRITE_ROWS = 10_000
#: How often a commit that lost to another driver's is read and tried again.
ATTEMPTS = 20
#: The pauses between attempts: random, up to a bound that doubles from :data:`FIRST_BACKOFF_S` to
#: :data:`MAX_BACKOFF_S` (the queries' batches often end together): at most about 15 s in all.
FIRST_BACKOFF_S = 0.04
MAX_BACKOFF_S = 1.0
#: Every this many versions a deltalake commit writes a checkpoint, as Spark does by default (delta-rs's own default is
#: 100, and Spark checkpoints only at its own commits, which are rare on a table of small batches).
CHECKPOINT_INTERVAL = 10

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()
#: The tables this process writes, kept open and brought up to date before each write (under their commit lock).
_TABLES: dict[str, DeltaTable] = {}


def commit_lock(path: str) -> threading.Lock:
    """The lock this process's ``deltalake`` writers of the table at ``path`` take turns with."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path, threading.Lock())


def plain_type(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` with Spark's large strings, binaries and lists as plain ones, at every level."""
    if arrow_type == pa.large_string():
        return pa.string()
    if arrow_type == pa.large_binary():
        return pa.binary()
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return pa.list_(arrow_type.value_field.with_type(plain_type(arrow_type.value_type)))
    if pa.types.is_struct(arrow_type):
        return pa.struct([field.with_type(plain_type(field.type)) for field in arrow_type])
    return arrow_type


def merge_source_rows(rows: pa.Table, spec: TableSpec) -> pa.Table:
    """A MERGE's source rows (e.g. Spark's ``toArrow()``) with ``spec``'s types for ``spec``'s columns and plain
    strings, binaries and lists for the others (:func:`plain_type`)."""
    types = {field.name: field.type for field in spec.schema}
    schema = pa.schema([field.with_type(types.get(field.name) or plain_type(field.type)) for field in rows.schema])
    return rows.cast(schema) if schema != rows.schema else rows


def as_table_rows(rows: pa.Table, spec: TableSpec) -> pa.Table:
    """``rows`` (e.g. Spark's ``toArrow()``: large strings, its own column order) as ``spec``'s columns and types."""
    return merge_source_rows(rows.select(list(spec.column_names)), spec)


def open_or_create(
    path: str, spec: TableSpec, configuration: Mapping[str, str], storage_options: Mapping[str, str] | None = None
) -> DeltaTable:
    """The table at ``path`` at its latest version, created empty (``spec``'s schema and description,
    ``configuration``) when absent; two writers creating it at once both succeed."""
    options = dict(storage_options or {}) or None
    try:
        return DeltaTable(path, storage_options=options)
    except DeltaTableNotFoundError:
        try:
            DeltaTable.create(
                path,
                spec.schema,
                mode="ignore",
                description=spec.description,
                configuration=dict(configuration),
                storage_options=options,
            )
        except CommitFailedError as err:  # another writer created it meanwhile: open it
            log.info("creating the %s table: %s", spec.name, err)
        return DeltaTable(path, storage_options=options)


def latest(path: str, storage_options: Mapping[str, str] | None = None) -> DeltaTable:
    """The table at ``path`` (it exists) at its latest version: opened once per process, then brought up to date
    (only the commits since); call it under :func:`commit_lock`."""
    table = _TABLES.get(path)
    if table is None:
        table = _TABLES[path] = DeltaTable(path, storage_options=dict(storage_options or {}) or None)
    else:
        table.update_incremental()
    return table


def forget(path: str) -> None:
    """Drop the table at ``path`` this process keeps open (:func:`latest` opens it again): after a write failed in a
    way a reload may mend, such as the table removed and created again."""
    with commit_lock(path):
        _TABLES.pop(path, None)


def deltalake_writes(root: Location, storage_options: Mapping[str, str] | None = None) -> bool:
    """Whether this process writes small batches to ``root``'s tables with ``deltalake``: the location allows it
    (:attr:`~connect_state.core.storage.Location.deltalake_commits`) and deltalake reaches it (opening, or creating, the
    ``watermarks`` table works: the driver may lack credentials that Spark's cluster configuration has). Else Spark
    writes them, and a warning says why."""
    if not root.deltalake_commits:
        return False

    try:
        open_or_create(str(root / WATERMARKS.name), WATERMARKS, TABLE_PROPERTIES, storage_options)
    except Exception as err:
        log.warning("deltalake cannot reach %s (%s): small writes go through Spark", root, err)
        return False
    return True


def with_retries(path: str, action: Callable[[], T]) -> T:
    """``action`` (a read, a write and its commit) under this process's lock of the table at ``path``, run again
    after a jittered pause when its commit lost to another driver's (:data:`ATTEMPTS` times in all)."""
    retrying = Retrying(
        retry=retry_if_exception_type(CommitFailedError),
        stop=stop_after_attempt(ATTEMPTS),
        wait=wait_random_exponential(multiplier=FIRST_BACKOFF_S, max=MAX_BACKOFF_S),
    )
    try:
        return retrying(_locked, path, action)
    except RetryError as err:
        conflict = err.last_attempt.exception()
        raise DeltaWriteError(f"{path}: {ATTEMPTS} attempts lost to concurrent commits") from conflict


def _locked(path: str, action: Callable[[], T]) -> T:
    with commit_lock(path):
        return action()


def write_once(
    path: str,
    app_id: str,
    version: int,
    write: Callable[[DeltaTable, CommitProperties], None],
    open_table: Callable[[], DeltaTable],
) -> bool:
    """``write(table, commit_properties)`` on the latest version of the table (``open_table``), tagged with the
    transaction ``(app_id, version)``, unless the table has that transaction or a later one (False: nothing
    written); :func:`with_retries`."""
    return _write(path, (app_id, version), write, open_table)


def _write(
    path: str,
    transaction: tuple[str, int] | None,
    write: Callable[[DeltaTable, CommitProperties], None],
    open_table: Callable[[], DeltaTable],
) -> bool:
    """:func:`write_once`, or without a transaction (``None``: always written)."""

    def attempt() -> bool:
        table = open_table()
        properties = CommitProperties()
        if transaction is not None:
            app_id, version = transaction
            done = table.transaction_version(app_id)
            if done is not None and done >= version:
                return False
            properties = CommitProperties(app_transactions=[Transaction(app_id, version)])
        before = table.version()
        write(table, properties)
        table.update_incremental()
        if table.version() != before and table.version() % CHECKPOINT_INTERVAL == 0:
            table.create_checkpoint()
        return True

    return with_retries(path, attempt)


def append_once(
    rows: pa.Table, path: str, app_id: str, version: int, storage_options: Mapping[str, str] | None = None
) -> bool:
    """Append ``rows`` to the Delta table at ``path`` (it exists) unless the table has the transaction ``(app_id,
    version)`` or a later one; False when it had (nothing written)."""
    return _write(path, (app_id, version), _appending(rows), _opener(path, storage_options))


def append(rows: pa.Table, path: str, storage_options: Mapping[str, str] | None = None) -> None:
    """Append ``rows`` to the Delta table at ``path`` (it exists), without a transaction id (at least once)."""
    _write(path, None, _appending(rows), _opener(path, storage_options))


def commit(
    path: str, write: Callable[[DeltaTable, CommitProperties], None], storage_options: Mapping[str, str] | None = None
) -> None:
    """``write(table, commit_properties)`` on the latest version of the Delta table at ``path`` (it exists), without a
    transaction id, :func:`with_retries` (``write`` decides again from the table it is given: it may commit nothing)."""
    _write(path, None, write, _opener(path, storage_options))


def read(path: str, columns: list[str], storage_options: Mapping[str, str] | None = None) -> pa.Table:
    """``columns`` of the latest version of the table at ``path`` (it exists): the table this process keeps open
    (:func:`latest`), under its commit lock."""
    with commit_lock(path):
        return latest(path, storage_options).to_pyarrow_table(columns=columns)


def _opener(path: str, storage_options: Mapping[str, str] | None) -> Callable[[], DeltaTable]:
    options = dict(storage_options or {}) or None
    return lambda: latest(path, options)


def _appending(rows: pa.Table) -> Callable[[DeltaTable, CommitProperties], None]:
    def write(table: DeltaTable, properties: CommitProperties) -> None:
        write_deltalake(table, rows, mode="append", commit_properties=properties)

    return write


def run_merge(table: DeltaTable, source: pa.Table, merge: MergeSpec, properties: CommitProperties) -> None:
    """``merge`` of ``source`` into ``table``, committed with ``properties``.

    ``streamed_exec=False``: the source is a small in-memory table, so delta-rs may look at it before the join and
    derive a predicate from its key values that skips the target's files whose statistics rule them out (with the
    default, streamed execution, every file of the target is scanned). Measured apart, a one-row update of a
    300,000-row table: 129 ms -> 34 ms in 30 files of sorted keys, 274 -> 238 ms in 2 files of mixed keys (one file
    rewritten either way)."""
    builder = table.merge(
        source,
        merge.condition,
        source_alias="s",
        target_alias="t",
        commit_properties=properties,
        streamed_exec=False,
    )
    for clause in merge.clauses:
        match clause.kind:
            case ClauseKind.MATCHED_DELETE:
                builder = builder.when_matched_delete(clause.predicate)
            case ClauseKind.MATCHED_UPDATE:
                builder = builder.when_matched_update(dict(clause.values), clause.predicate)
            case ClauseKind.NOT_MATCHED_INSERT:
                builder = builder.when_not_matched_insert(dict(clause.values), clause.predicate)
    builder.execute()


def merge_once(
    source: pa.Table,
    path: str,
    merge: MergeSpec,
    app_id: str,
    version: int,
    storage_options: Mapping[str, str] | None = None,
) -> bool:
    """Run ``merge`` of ``source`` into the Delta table at ``path`` (it exists) unless the table has the transaction
    ``(app_id, version)`` or a later one; False when it had (nothing written)."""
    return _write(path, (app_id, version), _merging(source, merge), _opener(path, storage_options))


def merge_rows(source: pa.Table, path: str, merge: MergeSpec, storage_options: Mapping[str, str] | None = None) -> None:
    """Run ``merge`` of ``source`` into the Delta table at ``path`` (it exists), without a transaction id."""
    _write(path, None, _merging(source, merge), _opener(path, storage_options))


def _merging(source: pa.Table, merge: MergeSpec) -> Callable[[DeltaTable, CommitProperties], None]:
    def write(table: DeltaTable, properties: CommitProperties) -> None:
        run_merge(table, source, merge, properties)

    return write
