"""KIP-558 active topics, the Spark pipeline: the status topic folded into the ``active_topics`` Delta table.

``connect-status`` → :func:`classify` (:mod:`connect_state.formats.status`) → :func:`fold_group`
(:mod:`connect_state.folds.active_topics`, per connector, in ``applyInPandasWithState``) → ``foreachBatch``
(:func:`fold_spec`): Delta tables ``active_topics`` (current set), ``active_topics_history`` (every change) and
``rejected_records``. The console script is ``connect-state-active-topics`` (jobs/active_topics.py).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa

from connect_state.core.errors import RecordFormatError
from connect_state.core.settings import Settings
from connect_state.folds.active_topics import (
    REMOVED,
    state_from_json,
    state_to_json,
)
from connect_state.folds.active_topics_columns import ChangeColumns, fold_topic_columns
from connect_state.formats.status import TopicStatus, TopicStatusKey, parse_status_record
from connect_state.formats.status_arrow import match_topic_statuses
from connect_state.spark.foldjob import (
    RECORD_COLUMNS,
    FoldJob,
    FoldSpec,
    RecordKind,
    column_frame,
    group_fold,
    matched_rows,
    nullable_values,
    rejected,
)
from connect_state.tables.merge_spec import (
    MergeSpec,
    matched_delete,
    matched_update,
    not_matched_insert,
    source_values,
)
from connect_state.tables.schemas import ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, BIGINT, BOOLEAN, INT, STRING

JOB_NAME = "active_topics"

# One row per status-topic record that matters here: a topic status (or its tombstone), or a rejected record.
PARSED_SCHEMA = pa.schema([
    ("record_kind", STRING), ("connector", STRING), ("topic", STRING), ("task", INT), ("discover_timestamp", BIGINT),
    *RECORD_COLUMNS,
])  # fmt: skip
# The fold's output: changes of active-topic sets, and rejected records passed through. ``latest``: the change is the
# batch's last of its (connector, topic), the one the current table takes.
OUTPUT_SCHEMA = pa.schema([
    ("record_kind", STRING), ("connector", STRING), ("topic", STRING), ("change", STRING), ("latest", BOOLEAN),
    ("task", INT), ("discover_timestamp", BIGINT), *RECORD_COLUMNS,
])  # fmt: skip
STATE_SCHEMA = pa.schema([("topics_json", STRING)])


def classify(key: bytes | None, value: bytes | None, kafka: dict) -> list[dict]:
    """One status-topic record: a topic-status row, a rejected row, or nothing for records of other kinds."""
    try:
        record = parse_status_record(key, value)
    except RecordFormatError as err:
        return [rejected(key, value, err.reason, kafka)]
    if not isinstance(record.key, TopicStatusKey):
        return []
    status = record.value if isinstance(record.value, TopicStatus) else None
    return [
        {
            "record_kind": RecordKind.TOPIC,
            "connector": record.key.connector,
            "topic": record.key.topic,
            "task": status.task if status else None,
            "discover_timestamp": status.discover_timestamp if status else None,
            **kafka,
        }
    ]


def fast_parse(kafka: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.BooleanArray]:
    """:func:`classify`'s bulk path (:data:`~connect_state.spark.foldjob.FastParse`): the topic statuses and
    tombstones in Connect's canonical form (:func:`connect_state.formats.status_arrow.match_topic_statuses`)."""
    found = match_topic_statuses(kafka.column(0), kafka.column(1))
    columns = {
        "connector": found.connector,
        "topic": found.topic,
        "task": found.task,
        "discover_timestamp": found.discover_timestamp,
    }
    return matched_rows(kafka, found.matched, RecordKind.TOPIC, columns, PARSED_SCHEMA)


def _change_frame(changes: ChangeColumns, connector: str) -> pd.DataFrame:
    """The fold's output rows of ``changes``, each flagged ``latest`` when no later change of its topic follows."""
    n = len(changes)
    last = {topic: i for i, topic in enumerate(changes.topic)}
    columns: dict[str, list[Any]] = {
        "record_kind": [str(RecordKind.CHANGE)] * n,
        "connector": [connector] * n,
        "topic": changes.topic,
        "change": changes.change,
        "latest": [last[topic] == i for i, topic in enumerate(changes.topic)],
        "task": changes.task,
        "discover_timestamp": changes.discover_timestamp,
        "kafka_partition": changes.kafka_partition,
        "kafka_offset": changes.kafka_offset,
        "kafka_timestamp": changes.kafka_timestamp,
    }
    return column_frame(columns, n, OUTPUT_SCHEMA)


def _fold(key: tuple, batch: pd.DataFrame, state_json: str | None) -> tuple[str, pd.DataFrame]:
    """A connector's topic records folded column at a time
    (:func:`connect_state.folds.active_topics_columns.fold_topic_columns`)."""
    _kind, connector = key
    new_state, changes = fold_topic_columns(
        connector,
        state_from_json(state_json) if state_json is not None else {},
        batch["topic"].tolist(),
        [None if v is None else int(v) for v in nullable_values(batch["task"])],
        [None if v is None else int(v) for v in nullable_values(batch["discover_timestamp"])],
        batch["kafka_partition"].tolist(),
        batch["kafka_offset"].tolist(),
        batch["kafka_timestamp"].tolist(),
    )
    return state_to_json(new_state), _change_frame(changes, connector)


#: ``applyInPandasWithState`` body, per (record_kind, connector): topic records folded, rejected ones passed through.
fold_group = group_fold(OUTPUT_SCHEMA, _fold)


#: A batch's latest change of each (connector, topic) into ``active_topics``: a removal deletes the row.
CURRENT_MERGE = MergeSpec(
    "t.connector = s.connector AND t.topic = s.topic",
    (
        matched_delete(f"s.change = '{REMOVED}'"),
        matched_update(source_values(ACTIVE_TOPICS.column_names)),
        not_matched_insert(source_values(ACTIVE_TOPICS.column_names), f"s.change != '{REMOVED}'"),
    ),
)


def fold_spec(settings: Settings) -> FoldSpec:
    """The status topic's changes of active-topic sets appended to ``active_topics_history``, each (connector, topic)'s
    latest merged into ``active_topics``; rows whose (connector, topic) has no record left in the topic are ghosts."""
    return FoldSpec(
        JOB_NAME,
        topics=lambda _spark: [settings.status_storage_topic],
        classify=classify,
        parsed=PARSED_SCHEMA,
        group_by=("record_kind", "connector"),
        fold=fold_group,
        output=OUTPUT_SCHEMA,
        history=ACTIVE_TOPICS_HISTORY,
        history_kind=RecordKind.CHANGE,
        current=ACTIVE_TOPICS,
        current_kind=RecordKind.CHANGE,
        merge=CURRENT_MERGE,
        summary="{history} active-topic changes",
        fast=fast_parse,
        state=STATE_SCHEMA,
        latest="latest",
        op="change",
    )


JOB = FoldJob(JOB_NAME, fold_spec)
start = JOB.start_query
