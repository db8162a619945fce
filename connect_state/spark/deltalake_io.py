"""Small Delta writes from the jobs' driver through ``deltalake`` (delta-rs, no JVM), once per micro-batch.

A Spark write of a few rows costs 1–3 s of fixed driver work on two cores (a MERGE is nine Spark jobs; an append of
three rows more than a second: ``bench/RESULTS.md``, issue 11 §3); the same write through delta-rs takes tens of
milliseconds. So a running job's small writes go through here where ``deltalake`` can commit
(:attr:`connect_state.storage.Location.deltalake_commits`): the ``watermarks`` of every batch
(:mod:`connect_state.spark.watermarks`) and the history rows of a small batch
(:meth:`connect_state.spark.foldjob.FoldWriter.insert_history`), and a small batch's MERGE into a current table
(:meth:`~connect_state.spark.foldjob.FoldWriter.merge_current`, the :class:`~connect_state.spark.merge_spec.MergeSpec`
Spark runs for a large one). Spark writes the same tables in the same format; both record the Delta transaction
``(app id, batch id)`` in the log, so either skips a batch the other committed.

**Commits.** Within one process the writers of a table take turns (:func:`commit_lock`, held for the read, the write
and the commit), as Spark's single-driver log store serialises a driver's commits on S3: they never conflict, on any
store. Across drivers a commit that loses to another's is read again and retried after a jittered pause that doubles
(:func:`backoff_s`); there Delta's put-if-absent of the next log file needs the store's conditional writes (delta-rs
1.x: a local disk, S3 since 2024, S3-compatible stores that honour ``If-None-Match``).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError

from connect_state.errors import DeltaWriteError
from connect_state.spark.merge_spec import ClauseKind, MergeSpec
from connect_state.tables import TableSpec

#: The most rows a batch's history append or current-table MERGE sends through ``deltalake`` (collected to the driver
#: first); more go through Spark.
SMALL_WRITE_ROWS = 10_000
#: How often a commit that lost to another driver's is read and tried again.
ATTEMPTS = 20
#: The pauses between attempts double from :data:`FIRST_BACKOFF_S` up to :data:`MAX_BACKOFF_S`, jittered (the
#: queries' batches often end together): at most about 15 s in all.
FIRST_BACKOFF_S = 0.02
MAX_BACKOFF_S = 1.0

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def commit_lock(path: str) -> threading.Lock:
    """The lock this process's ``deltalake`` writers of the table at ``path`` take turns with."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path, threading.Lock())


def backoff_s(attempt: int) -> float:
    """A jittered pause after the ``attempt``-th attempt (from 1) lost to a concurrent commit."""
    return random.uniform(0, min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2**attempt))


def gave_up(path: str, attempts: int) -> DeltaWriteError:
    return DeltaWriteError(f"{path}: {attempts} attempts lost to concurrent commits")


_PLAIN = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}


def plain_types(rows: pa.Table) -> pa.Table:
    """``rows`` with Spark's large strings and binaries as plain ones (top-level columns)."""
    schema = pa.schema([f.with_type(_PLAIN.get(f.type, f.type)) for f in rows.schema])
    return rows.cast(schema) if schema != rows.schema else rows


def as_table_rows(rows: pa.Table, spec: TableSpec) -> pa.Table:
    """``rows`` (e.g. Spark's ``toArrow()``: large strings, its own column order) as ``spec``'s columns and types."""
    return rows.select(list(spec.column_names)).cast(spec.schema)


def append_once(
    rows: pa.Table, path: str, app_id: str, version: int, storage_options: Mapping[str, str] | None = None
) -> bool:
    """Append ``rows`` to the Delta table at ``path`` (it exists) unless the table has the transaction ``(app_id,
    version)`` or a later one; False when it had (nothing written)."""
    options = dict(storage_options or {}) or None
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with commit_lock(path):
                done = DeltaTable(path, storage_options=options).transaction_version(app_id)
                if done is not None and done >= version:
                    return False
                write_deltalake(
                    path,
                    rows,
                    mode="append",
                    storage_options=options,
                    commit_properties=CommitProperties(app_transactions=[Transaction(app_id, version)]),
                )
            return True
        except CommitFailedError as err:
            if attempt == ATTEMPTS:
                raise gave_up(path, attempt) from err
            time.sleep(backoff_s(attempt))
    return False  # not reached


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
    options = dict(storage_options or {}) or None
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with commit_lock(path):
                table = DeltaTable(path, storage_options=options)
                done = table.transaction_version(app_id)
                if done is not None and done >= version:
                    return False
                builder = table.merge(
                    source,
                    merge.condition,
                    source_alias="s",
                    target_alias="t",
                    commit_properties=CommitProperties(app_transactions=[Transaction(app_id, version)]),
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
            return True
        except CommitFailedError as err:
            if attempt == ATTEMPTS:
                raise gave_up(path, attempt) from err
            time.sleep(backoff_s(attempt))
    return False  # not reached
