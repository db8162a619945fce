"""KIP-558 active topics, folded a column at a time: the same result as
:func:`connect_state.folds.active_topics.fold_connector_topics`, which stays the reference (the unit tests check the
two agree on generated inputs with Hypothesis).

One connector's records of a micro-batch arrive as columns. Each topic's records are independent of the other
topics', so the fold works per topic, all topics at once with numpy:

* records in the pure fold's order (stable by Kafka partition, then offset), then grouped by topic;
* a topic whose records all sit in one partition with strictly increasing offsets, and whose state entry (if any)
  is in that partition, is folded vectorised: replays (at or below the entry's offset) are a prefix and are dropped;
  a tombstone carries the previous task and timestamp forward (forward fill); "was active" is the previous record's
  (or the entry's) activity; the change kind follows from those;
* any other topic (its records moved partitions, repeated offsets) goes through the pure :func:`apply_record`.

The changes come back in the pure fold's order. numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from connect_state.folds.active_topics import (
    ADDED,
    REMOVED,
    UPDATED,
    ConnectorTopics,
    TopicChange,
    TopicEntry,
    TopicRecord,
    apply_record,
)


@dataclass(frozen=True)
class ChangeColumns:
    """The changes of one fold, as columns (in the order the pure fold returns them)."""

    topic: list[str]
    change: list[str]
    task: list[int | None]
    discover_timestamp: list[int | None]
    kafka_partition: list[int]
    kafka_offset: list[int]
    kafka_timestamp: list[int]

    def __len__(self) -> int:
        return len(self.topic)

    def changes(self, connector: str) -> list[TopicChange]:
        """As the pure fold's :class:`TopicChange` list."""
        return [
            TopicChange(connector, t, c, task, ts, p, o, kts)
            for t, c, task, ts, p, o, kts in zip(
                self.topic,
                self.change,
                self.task,
                self.discover_timestamp,
                self.kafka_partition,
                self.kafka_offset,
                self.kafka_timestamp,
                strict=True,
            )
        ]


def _int_column(values: Sequence[int | None]) -> tuple[np.ndarray, np.ndarray]:
    """(values with None as 0, null mask)."""
    nulls = np.fromiter((v is None for v in values), dtype=bool, count=len(values))
    data = np.fromiter((0 if v is None else v for v in values), dtype=np.int64, count=len(values))
    return data, nulls


def fold_topic_columns(
    connector: str,
    state: ConnectorTopics,
    topic: Sequence[str],
    task: Sequence[int | None],
    discover_timestamp: Sequence[int | None],
    kafka_partition: Sequence[int],
    kafka_offset: Sequence[int],
    kafka_timestamp: Sequence[int],
) -> tuple[ConnectorTopics, ChangeColumns]:
    """``fold_connector_topics(state, records)`` for the records given as columns (``task`` None = tombstone)."""
    n = len(topic)
    new_state = dict(state)
    if n == 0:
        return new_state, ChangeColumns([], [], [], [], [], [], [])
    partition = np.asarray(kafka_partition, dtype=np.int64)
    offset = np.asarray(kafka_offset, dtype=np.int64)
    order = np.lexsort((offset, partition))  # stable, like sorted(key=(partition, offset))
    names = np.asarray(topic, dtype=object)[order]
    codes_of: dict[str, int] = {}
    codes = np.fromiter((codes_of.setdefault(t, len(codes_of)) for t in names), dtype=np.int64, count=n)
    by_topic = np.argsort(codes, kind="stable")  # per topic, in fold order
    rows = order[by_topic]  # input row of each position, grouped by topic
    pos = by_topic  # position in fold order of each grouped row
    code = codes[by_topic]
    starts = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
    ends = np.r_[starts[1:], n]
    part, off = partition[rows], offset[rows]
    task_v, task_null = _int_column(task)
    ts_v, ts_null = _int_column(discover_timestamp)
    task_v, task_null, ts_v, ts_null = task_v[rows], task_null[rows], ts_v[rows], ts_null[rows]
    kts = np.asarray(kafka_timestamp, dtype=np.int64)[rows]
    topic_names = list(codes_of)

    # Which topics can be folded vectorised, and each record's replay status against the topic's entry.
    keep = np.ones(n, dtype=bool)
    slow: list[int] = []
    init_active = np.zeros(len(starts), dtype=bool)
    init_task = np.zeros(len(starts), dtype=np.int64)
    init_task_null = np.ones(len(starts), dtype=bool)
    init_ts = np.zeros(len(starts), dtype=np.int64)
    init_ts_null = np.ones(len(starts), dtype=bool)
    for g, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        name = topic_names[code[start]]
        entry = new_state.get(name)
        p = part[start]
        single = bool((part[start:end] == p).all()) and bool((np.diff(off[start:end]) > 0).all())
        if not single or (entry is not None and entry.kafka_partition != p):
            slow.append(g)
            keep[start:end] = False
            continue
        if entry is not None:
            keep[start:end] = off[start:end] > entry.kafka_offset
            init_active[g] = entry.active
            if entry.task is not None:
                init_task[g], init_task_null[g] = entry.task, False
            if entry.discover_timestamp is not None:
                init_ts[g], init_ts_null[g] = entry.discover_timestamp, False

    change_pos: list[np.ndarray] = []
    change_rows: list[np.ndarray] = []
    change_kind: list[np.ndarray] = []
    change_task: list[np.ndarray] = []
    change_task_null: list[np.ndarray] = []
    change_ts: list[np.ndarray] = []
    change_ts_null: list[np.ndarray] = []

    kept = np.flatnonzero(keep)
    if len(kept):
        group = np.searchsorted(starts, kept, side="right") - 1
        first = np.r_[True, group[1:] != group[:-1]]
        tomb = task_null[kept]
        # Forward fill of (task, timestamp) over tombstones, from the topic's entry.
        idx = np.where(~tomb, np.arange(len(kept)), -1)
        last_value = np.maximum.accumulate(idx)
        group_start = np.maximum.accumulate(np.where(first, np.arange(len(kept)), 0))
        from_entry = last_value < group_start
        src = kept[np.maximum(last_value, 0)]
        new_task = np.where(from_entry, init_task[group], task_v[src])
        new_task_null = np.where(from_entry, init_task_null[group], task_null[src])
        new_ts = np.where(from_entry, init_ts[group], ts_v[src])
        new_ts_null = np.where(from_entry, init_ts_null[group], ts_null[src])
        # The entry before each record: the previous record's, or the topic's state entry.
        prev_active = np.where(first, init_active[group], np.r_[False, ~tomb[:-1]])
        prev_task = np.where(first, init_task[group], np.r_[0, new_task[:-1]])
        prev_task_null = np.where(first, init_task_null[group], np.r_[True, new_task_null[:-1]])
        prev_ts = np.where(first, init_ts[group], np.r_[0, new_ts[:-1]])
        prev_ts_null = np.where(first, init_ts_null[group], np.r_[True, new_ts_null[:-1]])
        same_task = (prev_task_null == task_null[kept]) & (prev_task_null | (prev_task == task_v[kept]))
        same_ts = (prev_ts_null == ts_null[kept]) & (prev_ts_null | (prev_ts == ts_v[kept]))
        kind = np.full(len(kept), "", dtype=object)
        kind[tomb & prev_active] = REMOVED
        kind[~tomb & ~prev_active] = ADDED
        kind[~tomb & prev_active & ~(same_task & same_ts)] = UPDATED
        changed = kind != ""
        change_pos.append(pos[kept][changed])
        change_rows.append(kept[changed])
        change_kind.append(kind[changed])
        change_task.append(new_task[changed])
        change_task_null.append(new_task_null[changed])
        change_ts.append(new_ts[changed])
        change_ts_null.append(new_ts_null[changed])
        # Each topic's last kept record is its new entry.
        last = np.r_[group[1:] != group[:-1], True]
        for i in np.flatnonzero(last).tolist():
            new_state[topic_names[code[kept[i]]]] = TopicEntry(
                task=None if new_task_null[i] else int(new_task[i]),
                discover_timestamp=None if new_ts_null[i] else int(new_ts[i]),
                kafka_partition=int(part[kept[i]]),
                kafka_offset=int(off[kept[i]]),
                active=not bool(tomb[i]),
            )

    slow_changes: list[tuple[int, TopicChange]] = []
    for g in slow:
        for i in range(starts[g], ends[g]):
            record = TopicRecord(
                connector,
                topic_names[code[i]],
                None if task_null[i] else int(task_v[i]),
                None if ts_null[i] else int(ts_v[i]),
                int(part[i]),
                int(off[i]),
                int(kts[i]),
            )
            change = apply_record(new_state, record)
            if change is not None:
                slow_changes.append((int(pos[i]), change))

    positions = np.concatenate([*change_pos, np.array([p for p, _ in slow_changes], dtype=np.int64)])
    order_out = np.argsort(positions, kind="stable")
    n_fast = len(positions) - len(slow_changes)
    fast_rows = np.concatenate(change_rows) if change_rows else np.zeros(0, dtype=np.int64)
    fast_kind = np.concatenate(change_kind) if change_kind else np.zeros(0, dtype=object)
    fast_task = np.concatenate(change_task) if change_task else np.zeros(0, dtype=np.int64)
    fast_task_null = np.concatenate(change_task_null) if change_task_null else np.zeros(0, dtype=bool)
    fast_ts = np.concatenate(change_ts) if change_ts else np.zeros(0, dtype=np.int64)
    fast_ts_null = np.concatenate(change_ts_null) if change_ts_null else np.zeros(0, dtype=bool)
    fast_topic = [topic_names[c] for c in code[fast_rows].tolist()]
    fast_task_list = [None if null else v for v, null in zip(fast_task.tolist(), fast_task_null.tolist(), strict=True)]
    fast_ts_list = [None if null else v for v, null in zip(fast_ts.tolist(), fast_ts_null.tolist(), strict=True)]
    fast_part, fast_off, fast_kts = part[fast_rows].tolist(), off[fast_rows].tolist(), kts[fast_rows].tolist()
    fast_kind_list = fast_kind.tolist()

    out = ChangeColumns([], [], [], [], [], [], [])
    for j in order_out.tolist():
        if j < n_fast:
            out.topic.append(fast_topic[j])
            out.change.append(fast_kind_list[j])
            out.task.append(fast_task_list[j])
            out.discover_timestamp.append(fast_ts_list[j])
            out.kafka_partition.append(fast_part[j])
            out.kafka_offset.append(fast_off[j])
            out.kafka_timestamp.append(fast_kts[j])
        else:
            c = slow_changes[j - n_fast][1]
            out.topic.append(c.topic)
            out.change.append(c.change)
            out.task.append(c.task)
            out.discover_timestamp.append(c.discover_timestamp)
            out.kafka_partition.append(c.kafka_partition)
            out.kafka_offset.append(c.kafka_offset)
            out.kafka_timestamp.append(c.kafka_timestamp)
    return new_state, out
