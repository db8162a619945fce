"""Compaction and vacuum of the jobs' current and history tables through ``deltalake`` (issue 34, target 4). No Spark
(the jobs' Spark fallback is :func:`connect_state.spark.retention.compact_with_spark`), no Flask.

**Why.** Every micro-batch adds a small data file to each table it writes: a history append adds one, a current
table's MERGE adds one for its inserted rows (and rewrites the file of each row it updates). Both the jobs' writes and
the API's reads pay per data file (deltalake's log replay and file list, the API reader's dataset and per-file index,
:mod:`connect_state.tables.reader`), so at a 1 s trigger a table gains tens of thousands of files a day.

**When.** The job that writes the table looks at its file list between its batches, every
``table.compact.check.interval.ms`` (:class:`connect_state.spark.retention.RetentionPass`, the one home of the jobs'
periodic table maintenance). A table is due when more than ``table.compact.small.files`` of its data files are small
(:func:`connect_state.tables.compaction.is_small`: under half of ``table.compact.file.bytes``, as the audit table's
compaction counts them); so a table keeps at most that many small files plus its large ones, and the check itself is a
look at the log's file list.

**What.** ``optimize.compact`` (delta-rs's bin-packing, insertion order kept: a history table's files stay in the order
of its batches, so its time statistics still prune) rewrites the small files into files of about
``table.compact.file.bytes``; then a vacuum (:func:`connect_state.tables.compaction.vacuum`): only files the log
stopped referencing longer ago than the table's ``delta.deletedFileRetentionDuration`` (7 days) are deleted, so a
reader still on an older version never loses a file it reads (the API's reader keeps the rows of the files it loaded;
a history query reads the files of the version it listed, within seconds).

**No conflict with the writers.** The OPTIMIZE commit carries no transaction id and leaves the log's ones as they are
(``txn`` actions are kept by every later version), so a batch replayed after it is still skipped by
:func:`~connect_state.tables.small_writes.append_once` and :func:`~connect_state.tables.small_writes.merge_once`
(tested). It runs under this process's commit lock of the table (:func:`~connect_state.tables.small_writes.
with_retries`), so the job's own writers never interleave with it; a commit that loses to another driver's (a MERGE
that removed a file the compaction rewrote) is read again and retried, the plan made afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError

from connect_state.core.settings import Settings
from connect_state.tables import small_writes
from connect_state.tables.compaction import Compacted, is_small, vacuum

__all__ = ["CompactionPolicy", "compact_table", "file_sizes", "small_file_count"]


@dataclass(frozen=True)
class CompactionPolicy:
    """When a table is compacted (more than ``small_files`` small files; 0: never) and the size it writes."""

    small_files: int
    file_bytes: int

    @classmethod
    def of(cls, settings: Settings) -> CompactionPolicy:
        return cls(settings.table_compact_small_files, settings.table_compact_file_bytes)

    @property
    def enabled(self) -> bool:
        return self.small_files > 0

    def due(self, sizes: np.ndarray) -> bool:
        """Whether a table of data files of ``sizes`` (bytes) is due."""
        return self.enabled and small_file_count(sizes, self.file_bytes) > self.small_files


def small_file_count(sizes: np.ndarray, file_bytes: int) -> int:
    return int(is_small(sizes, file_bytes).sum())


def file_sizes(table: DeltaTable) -> np.ndarray:
    """The sizes in bytes of the table's data files at its loaded version (the log's ``add`` actions)."""
    return _add_column(table.get_add_actions(flatten=True), "size_bytes", np.int64)


def _add_column(adds: Any, column: str, dtype: type) -> np.ndarray:
    """One column of the log's ``add`` actions (deltalake's flattened table) as a NumPy array."""
    return np.asarray(adds.column(column).to_pylist(), dtype=dtype) if adds.num_rows else np.zeros(0, dtype=dtype)


def compact_table(
    path: str, policy: CompactionPolicy, storage_options: Mapping[str, str] | None = None
) -> Compacted | None:
    """Compact the table at ``path`` when ``policy`` says it is due, then vacuum (see the module doc); None: not due,
    or no table yet."""
    if not policy.enabled:
        return None
    options = dict(storage_options or {}) or None

    def attempt() -> Compacted | None:
        try:
            table = small_writes.latest(path, options)
        except DeltaTableNotFoundError:
            return None
        adds = table.get_add_actions(flatten=True)
        sizes = _add_column(adds, "size_bytes", np.int64)
        if not policy.due(sizes):
            return None
        small = is_small(sizes, policy.file_bytes)
        rows = _add_column(adds, "num_records", float)
        table.optimize.compact(target_size=policy.file_bytes)
        table.update_incremental()
        if table.version() % small_writes.CHECKPOINT_INTERVAL == 0:
            table.create_checkpoint()
        return Compacted(len(sizes), len(file_sizes(table)), int(np.nansum(rows[small])))

    done = small_writes.with_retries(path, attempt)
    if done is not None:
        with small_writes.commit_lock(path):
            vacuum(small_writes.latest(path, options))
    return done
