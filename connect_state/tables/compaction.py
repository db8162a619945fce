"""Compaction of a table appended in time order, one small data file per append (the audit table: one file per spool
flush), into few large files each covering its own stretch of time (issue 33, finding 7). No Spark, no Flask.

**Why.** :class:`connect_state.tables.scan.TableScan` prunes files by their statistics: the newest page reads the
newest file or two whatever the table's size, but a total filtered by a column every file holds (a connector, a
principal) opens every file, and opening a file costs about half a millisecond. A thousand flushes make a thousand
files; compacted, they are a handful.

**What.** :func:`plan` (array arithmetic on the files' ``add`` statistics) leaves the newest :data:`NEWEST_KEPT` files
(by their greatest time) alone, and when more than ``small_files`` of the older ones are small (under half of
``file_bytes``), picks the stretch of time from the oldest small file's first row up to the first row of the kept
files. :func:`compact` reads every row in that stretch (from whichever files hold them), sorts them by time (ties by
``id``), cuts them into runs of about ``file_bytes`` (rows estimated from the bytes a row takes in the files read;
equal times never split) and writes each run as one file, in row groups of :data:`ROW_GROUP_ROWS`, by a
``replaceWhere`` overwrite whose predicate is the run's stretch of time (one commit a file; deltalake writes one
Arrow batch as one file, while several batches may be spread over files in parallel, unordered). So each file and
each row group is a contiguous run of time, the files cover disjoint stretches, and a newest-first read still stops
after a file or two, decoding only the row groups of the stretch it reads. Every version holds every row exactly
once; rows outside the stretch are untouched (a file straddling a bound keeps its rows outside it). Then a vacuum, as
the retention's (:mod:`connect_state.tables.retention_io`): only files unreferenced longer than the table's
``delta.deletedFileRetentionDuration`` (7 days) are deleted, so a reader still on an older version keeps its files.

**No conflict.** The caller holds the only writer's lock (the audit spool's ``flock``), and this process's
commit lock of the table (:func:`connect_state.tables.small_writes.commit_lock`) is taken around the commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, WriterProperties, write_deltalake

from connect_state.tables import small_writes
from connect_state.tables.scan import FileStats, TableScan, may_match

__all__ = [
    "NEWEST_KEPT",
    "ROW_GROUP_ROWS",
    "Compacted",
    "Stretch",
    "compact",
    "is_small",
    "pieces",
    "plan",
    "vacuum",
]

NEWEST_KEPT = 10
"""The newest data files (by their greatest time) a compaction leaves as they are: the newest page's, and the ones
the next flushes' ids are looked up in."""


ROW_GROUP_ROWS = 1_024
"""Rows per Parquet row group of a compacted file: each a run of time with its own statistics, so that a page's read
of a stretch of time (:meth:`connect_state.tables.scan.TableScan.newest`) decodes only the row groups it covers. A
page filtered by a connector (1 row in 50 in ``bench/audit_page.py``) covers about ``limit`` x 50 rows: with groups
of 8,192 rows it filtered 8 to 16 times the rows it needed (1.5-1.9x the 1,000-row table's page)."""


@dataclass(frozen=True)
class Stretch:
    """The time range to rewrite, epoch microseconds, ``start`` inclusive, ``end`` exclusive."""

    start: int
    end: int

    def predicate(self, column: str) -> str:
        return f"`{column}` >= '{_iso(self.start)}' AND `{column}` < '{_iso(self.end)}'"


@dataclass(frozen=True)
class Compacted:
    """What a compaction did: the files before and after, and the rows rewritten."""

    files_before: int
    files_after: int
    rows: int

    def line(self) -> str:
        return f"compacted {self.rows} rows: {self.files_before} data files -> {self.files_after}"


def _iso(micros: int) -> str:
    seconds, rest = divmod(micros, 1_000_000)
    return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=rest).isoformat().replace("+00:00", "Z")


def is_small(sizes: np.ndarray, file_bytes: int) -> np.ndarray:
    """Which data files (by their sizes in bytes) are small: under half of ``file_bytes``, the size a compaction
    writes. The audit's compaction (:func:`plan`) and the jobs' (:mod:`connect_state.tables.maintenance`) count them
    alike."""
    return np.asarray(sizes) < max(file_bytes // 2, 1)


def vacuum(table: DeltaTable) -> int:
    """Delete the data files the table's log stopped referencing longer ago than its
    ``delta.deletedFileRetentionDuration`` (enforced; Delta's default 7 days), so that a reader still on an older
    version keeps the files it reads; how many were deleted. Call it under the table's commit lock."""
    return len(table.vacuum(dry_run=False))


def plan(stats: FileStats, time: str, small_files: int, file_bytes: int) -> Stretch | None:
    """The stretch of time to compact (see the module doc), or None: at most ``small_files`` small files older than
    the newest :data:`NEWEST_KEPT` (or ``small_files`` 0: never), or statistics missing."""
    bounds = stats.bounds(time)
    if small_files <= 0 or bounds is None or len(stats) <= NEWEST_KEPT:
        return None
    low, high, known, _is_time = bounds
    if not known.all():
        return None
    newest = np.argsort(high, kind="stable")[-NEWEST_KEPT:]
    end = int(low[newest].min())
    older = high < end
    small = older & is_small(stats.sizes, file_bytes)
    if int(small.sum()) <= small_files:
        return None
    return Stretch(int(low[small].min()), end)


def pieces(
    lows: np.ndarray, highs: np.ndarray, rows: np.ndarray, stretch: Stretch, rows_per_file: int
) -> list[Stretch]:
    """``stretch`` cut into stretches of about ``rows_per_file`` rows, each cut where no file crosses it (given the
    files' ranges of time ``lows``..``highs`` and row counts within ``stretch``): a file straddling a cut would be
    rewritten by the piece before with its rows outside, merging the pieces again."""
    order = np.argsort(lows, kind="stable")
    lows, highs, rows = lows[order], highs[order], rows[order]
    reach = np.maximum.accumulate(highs) if len(highs) else highs
    cuts, gathered = [stretch.start], 0
    for i in range(len(lows) - 1):
        gathered += int(rows[i])
        if gathered >= rows_per_file and reach[i] < lows[i + 1] and stretch.start < lows[i + 1] < stretch.end:
            cuts.append(int(lows[i + 1]))
            gathered = 0
    cuts.append(stretch.end)
    return [Stretch(cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)]


def compact(
    scan: TableScan, path: str, stretch: Stretch, time: str, file_bytes: int, options: Mapping[str, str] | None
) -> Compacted:
    """Rewrite the rows of ``stretch`` in the table at ``path`` (``scan`` reads its latest version) as files of about
    ``file_bytes`` sorted by time, then vacuum (see the module doc)."""
    storage = dict(options or {}) or None
    kind = scan.schema.field(time).type
    start, end = (pa.scalar(at, pa.int64()).cast(kind).as_py() for at in (stretch.start, stretch.end))
    rows = scan.rows([(time, ">=", start), (time, "<", end)], scan.schema.names)
    keys = [(time, "ascending"), ("id", "ascending")] if "id" in rows.column_names else [(time, "ascending")]
    rows = rows.take(pc.sort_indices(rows, sort_keys=keys)).combine_chunks()
    stats = scan.source.stats()
    inside = may_match(stats, [(time, ">=", start), (time, "<", end)])
    per_row = max(float(stats.sizes[inside].sum()) / max(rows.num_rows, 1), 1.0)  # bytes a row, as flushed
    times = rows.column(time).cast(pa.int64()).to_numpy()
    bounds, counts = stats.bounds(time), stats.rows
    if bounds is None or counts is None:  # plan() needs them: not reached
        raise ValueError(f"{path}: no statistics of {time} or row counts to compact by")
    cut = pieces(bounds[0][inside], bounds[1][inside], counts[inside], stretch, max(int(file_bytes / per_row), 1))
    with small_writes.commit_lock(path):
        for piece in cut:
            first, last = np.searchsorted(times, [piece.start, piece.end], side="left")
            write_deltalake(  # one batch, one file; one commit a file: every version holds every row once
                path,
                rows.slice(int(first), int(last - first)),
                mode="overwrite",
                predicate=piece.predicate(time),
                target_file_size=max(file_bytes * 4, 1 << 20),
                writer_properties=WriterProperties(max_row_group_size=ROW_GROUP_ROWS),
                storage_options=storage,
            )
        table = small_writes.latest(path, storage)
        vacuum(table)
        after = len(table.get_add_actions(flatten=True))
    return Compacted(len(stats), after, rows.num_rows)
