"""KIP-875 sink offsets, the Spark pipeline: ``__consumer_offsets`` folded into the ``sink_offsets`` Delta table.

``__consumer_offsets`` (``consumer.offsets.topic``) → :func:`classify` (:mod:`connect_state.formats.consumer_offsets`:
the group coordinator's records; the offset commits in the coordinator's own form in bulk, :func:`fast_parse`)
→ :func:`fold_group` (:mod:`connect_state.folds.sink_offsets`, per consumer group) → ``foreachBatch``
(:func:`fold_spec`): Delta tables ``sink_offsets`` (committed offsets of every group) and ``sink_offsets_history``;
malformed records go to ``rejected_records``. Part of the offsets job (:mod:`connect_state.spark.offsets`).

**Reading ``__consumer_offsets``.** Spark's default (Admin-based) offset fetching drops internal topics
(``ConsumerStrategy.retrieveAllPartitions`` filters ``isInternal``), so the query is started with
``spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true`` (consumer-based fetching, which subscribes by name);
the stream captures the setting at start, and the session's previous value is restored right after.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from connect_state.core.errors import RecordFormatError
from connect_state.core.settings import Settings
from connect_state.folds import sink_offsets as sink_fold
from connect_state.formats.consumer_offsets import OffsetCommitKey, parse_consumer_offsets_record
from connect_state.formats.consumer_offsets_arrow import match_offset_commits
from connect_state.spark.foldjob import (
    RECORD_COLUMNS,
    FoldJob,
    FoldSpec,
    RecordKind,
    group_fold,
    matched_rows,
    rejected,
    rows_frame,
)
from connect_state.tables.merge_spec import (
    MergeSpec,
    matched_delete,
    matched_update,
    not_matched_insert,
    source_values,
)
from connect_state.tables.schemas import BIGINT, INT, SINK_OFFSETS, SINK_OFFSETS_HISTORY, STRING

JOB_NAME = "sink_offsets"
DEPRECATED_OFFSET_FETCHING = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"

PARSED_SCHEMA = pa.schema([
    ("record_kind", STRING), ("group_id", STRING), ("topic", STRING), ("partition", INT), ("offset", BIGINT),
    ("leader_epoch", INT), ("metadata", STRING), ("commit_timestamp", BIGINT), ("change", STRING), *RECORD_COLUMNS,
])  # fmt: skip
OUTPUT_SCHEMA = PARSED_SCHEMA


def classify(key: bytes | None, value: bytes | None, kafka: dict) -> list[dict]:
    """One ``__consumer_offsets`` record: an offset commit (or its tombstone), nothing for the group coordinator's
    other records, or a rejected record.
    """
    try:
        record = parse_consumer_offsets_record(key, value)
    except RecordFormatError as err:
        return [rejected(key, value, err.reason, kafka)]
    if not isinstance(record.key, OffsetCommitKey):
        return []
    commit = record.value
    return [
        {
            "record_kind": RecordKind.RECORD,
            "group_id": record.key.group,
            "topic": record.key.topic,
            "partition": record.key.partition,
            "offset": commit.offset if commit else None,
            "leader_epoch": commit.leader_epoch if commit else None,
            "metadata": commit.metadata if commit else None,
            "commit_timestamp": commit.commit_timestamp if commit else None,
            "change": sink_fold.SET if commit else sink_fold.REMOVED,
            **kafka,
        }
    ]


def fast_parse(kafka: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.BooleanArray]:
    """:func:`classify`'s bulk path (:data:`~connect_state.spark.foldjob.FastParse`): the offset commits and their
    tombstones in the form the coordinator writes (:func:`connect_state.formats.consumer_offsets_arrow.
    match_offset_commits`)."""
    found = match_offset_commits(kafka.column(0), kafka.column(1))
    columns = {
        "group_id": found.group,
        "topic": found.topic,
        "partition": found.partition,
        "offset": found.offset,
        "leader_epoch": found.leader_epoch,
        "metadata": found.metadata,
        "commit_timestamp": found.commit_timestamp,
        "change": pa.array(np.where(found.tombstone, sink_fold.REMOVED, sink_fold.SET), pa.string()),
    }
    return matched_rows(kafka, found.matched, RecordKind.RECORD, columns, PARSED_SCHEMA)


def _output_frame(batch: pd.DataFrame, order: np.ndarray, changed: list[tuple[int, str]]) -> pd.DataFrame:
    """The group's output, taken from its rows by column: every record in ``order`` as a history row (its
    ``change`` ``set`` or ``removed``, as :func:`classify` wrote it), then the last record of each changed (topic,
    partition) as a current row (its ``change`` ``upsert`` or ``delete``)."""
    current = order[[index for index, _ in changed]]
    kinds = [RecordKind.HISTORY] * len(order) + [RecordKind.CURRENT] * len(changed)
    changes = batch["change"].to_numpy(dtype=object)[order].tolist() + [op for _, op in changed]
    return rows_frame(batch, np.concatenate([order, current]), OUTPUT_SCHEMA, {"record_kind": kinds, "change": changes})


def _fold(key: tuple, batch: pd.DataFrame, state_json: str | None) -> tuple[str, pd.DataFrame]:
    """A consumer group's records: :func:`~connect_state.folds.sink_offsets.fold_group_columns` over the batch's
    columns, in (Kafka partition, offset) order."""
    kafka_offsets = batch["kafka_offset"].to_numpy(dtype=np.int64)
    order = np.lexsort((kafka_offsets, batch["kafka_partition"].to_numpy(dtype=np.int64)))
    current = sink_fold.state_from_json(state_json) if state_json is not None else {}
    new_state, changed = sink_fold.fold_group_columns(
        current,
        list(
            zip(
                batch["topic"].to_numpy(dtype=object)[order].tolist(),
                batch["partition"].to_numpy(dtype=np.int64)[order].tolist(),
                strict=True,
            )
        ),
        (batch["change"].to_numpy(dtype=object)[order] == sink_fold.SET).tolist(),
        kafka_offsets[order].tolist(),
    )
    return sink_fold.state_to_json(new_state), _output_frame(batch, order, changed)


#: ``applyInPandasWithState`` body, per (group kind, consumer group).
fold_group = group_fold(OUTPUT_SCHEMA, _fold)


#: A batch's latest commit of each (group, topic, partition) into ``sink_offsets``: a deletion deletes the row.
CURRENT_MERGE = MergeSpec(
    "t.group_id = s.group_id AND t.topic = s.topic AND t.`partition` = s.`partition`",
    (
        matched_delete(f"s.op = '{sink_fold.DELETE}'"),
        matched_update(source_values(SINK_OFFSETS.column_names)),
        not_matched_insert(source_values(SINK_OFFSETS.column_names), f"s.op = '{sink_fold.UPSERT}'"),
    ),
)


def fold_spec(settings: Settings) -> FoldSpec:
    """Every offset commit appended to ``sink_offsets_history`` and the committed offsets merged into ``sink_offsets``,
    from ``__consumer_offsets`` (read with the consumer-based offset fetching, the query and the reconciler alike);
    ``sink_offsets`` rows whose (group, topic, partition) has no offset-commit record left there are ghosts."""
    return FoldSpec(
        JOB_NAME,
        topics=lambda _spark: [settings.consumer_offsets_topic],
        classify=classify,
        parsed=PARSED_SCHEMA,
        group_by=("group_kind", "group_id"),
        fold=fold_group,
        output=OUTPUT_SCHEMA,
        history=SINK_OFFSETS_HISTORY,
        history_kind=RecordKind.HISTORY,
        current=SINK_OFFSETS,
        current_kind=RecordKind.CURRENT,
        merge=CURRENT_MERGE,
        summary="{history} offset commits, {current} committed offsets changed",
        fast=fast_parse,
        group_kind="group",
        op="op",
        conf={DEPRECATED_OFFSET_FETCHING: "true"},
    )


#: The sink-offsets query: one of the offsets job's two (:mod:`connect_state.spark.offsets`).
JOB = FoldJob(JOB_NAME, fold_spec)
start = JOB.start_query
