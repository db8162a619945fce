"""KIP-875 connector states, the Spark pipeline: the config and status topics folded into the ``connectors`` table.

``connect-configs`` + ``connect-status`` → :func:`classify` (:mod:`connect_state.formats.config`,
:mod:`connect_state.formats.status`) → :func:`fold_function` (:mod:`connect_state.folds.connector_states`, per
connector, in ``applyInPandasWithState``) → ``foreachBatch`` (:func:`fold_spec`): Delta tables ``connectors`` (one
row per connector, deleted ones flagged) and ``connector_events`` (every transition). The console script is
``connect-state-connector-states`` (jobs/connector_states.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import partial
from typing import Any, cast

import pandas as pd
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType

from connect_state.core.errors import RecordFormatError
from connect_state.core.settings import Settings
from connect_state.folds.connector_states import (
    ConnectorEvent,
    ConnectorRecord,
    ConnectorState,
    connector_of,
    connector_row,
    fold_connector,
    state_from_json,
    state_to_json,
)
from connect_state.formats.config import TaskCommitKey, parse_config_key, parse_config_record
from connect_state.formats.status import TopicStatusKey, parse_status_record
from connect_state.spark.delta_io import spark_type
from connect_state.spark.foldjob import (
    RECORD_COLUMNS,
    FoldFunction,
    FoldJob,
    FoldSpec,
    RecordKind,
    column_frame,
    group_fold,
    nullable_values,
    rejected,
)
from connect_state.tables.merge_spec import MergeSpec, matched_update, not_matched_insert, source_values
from connect_state.tables.schemas import BIGINT, BOOLEAN, CONNECTOR_EVENTS, CONNECTORS, INT, STRING

JOB_NAME = "connector_states"

# Every record that belongs to a connector keeps its raw bytes: the fold parses them again (cheap, and no parsed
# structure has to cross the Arrow boundary). Rejected records carry their reason.
PARSED_SCHEMA = pa.schema([("record_kind", STRING), ("connector", STRING), *RECORD_COLUMNS])
OUTPUT_SCHEMA = pa.schema([
    ("record_kind", STRING), ("connector", STRING), ("type", STRING), ("connector_class", STRING),
    ("config", STRING), ("target_state", STRING), ("task_count", INT), ("task_configs", STRING),
    ("inconsistent", BOOLEAN), ("connector_state", STRING), ("connector_worker_id", STRING),
    ("connector_trace", STRING), ("connector_generation", INT), ("connector_version", STRING),
    ("tasks_json", STRING), ("deleted", BOOLEAN), ("deleted_at", BIGINT), ("config_offset", BIGINT),
    ("event", STRING), ("details", STRING), ("source", STRING), *RECORD_COLUMNS,
])  # fmt: skip


def classify(key: bytes | None, value: bytes | None, kafka: dict, config_topic: str) -> list[dict]:
    """One config- or status-topic record: which connector it belongs to, or why a worker would discard it.

    A ``commit-`` record the parser rejects still matters to the fold (Connect clears the connector's buffered task
    configs on it), so it is both quarantined and passed on as ``unreadable_commit``.
    """
    kind = RecordKind.CONFIG if kafka["kafka_topic"] == config_topic else RecordKind.STATUS
    try:
        record = parse_config_record(key, value) if kind == RecordKind.CONFIG else parse_status_record(key, value)
    except RecordFormatError as err:
        quarantined = rejected(key, value, err.reason, kafka)
        if kind == RecordKind.CONFIG and key is not None:
            try:
                commit = parse_config_key(key)
            except RecordFormatError:
                commit = None
            if isinstance(commit, TaskCommitKey):
                return [
                    quarantined,
                    {"record_kind": RecordKind.UNREADABLE_COMMIT, "connector": commit.connector, **kafka},
                ]
        return [quarantined]
    if isinstance(record.key, TopicStatusKey):
        return []
    connector = connector_of(record.key)
    if connector is None:
        return []
    return [{"record_kind": kind, "connector": connector, "raw_key": key, "raw_value": value, **kafka}]


def record_of(
    connector: str,
    kind: str,
    key: bytes | None,
    value: bytes | None,
    partition: int,
    offset: int,
    timestamp: int,
) -> ConnectorRecord:
    """The fold's record for a row :func:`classify` passed on (config, status or unreadable commit), from its
    columns."""
    coordinates = (int(partition), int(offset), int(timestamp))
    if kind == RecordKind.UNREADABLE_COMMIT:
        return ConnectorRecord.unreadable_commit(connector, *coordinates)
    if kind == RecordKind.CONFIG:
        return ConnectorRecord.from_config(parse_config_record(key, value), *coordinates)
    return ConnectorRecord.from_status(parse_status_record(key, value), *coordinates)


_INPUT_COLUMNS = ("record_kind", "raw_key", "raw_value", "kafka_partition", "kafka_offset", "kafka_timestamp")
_EVENT_COLUMNS = {
    "event": "event",
    "source": "source",
    "kafka_partition": "kafka_partition",
    "kafka_offset": "kafka_offset",
    "kafka_timestamp": "kafka_timestamp",
}
"""Output column -> the :class:`ConnectorEvent` attribute it holds."""


def _records(connector: str, batch: pd.DataFrame) -> list[ConnectorRecord]:
    """The group's records, read by column (no per-row tuples)."""
    columns = [nullable_values(batch[name]) for name in _INPUT_COLUMNS]
    return [record_of(connector, *values) for values in zip(*columns, strict=True)]


def _output_frame(events: list[ConnectorEvent], state: ConnectorState, class_types: Mapping[str, str]) -> pd.DataFrame:
    """The group's output: one row per event, then the connector's row, built by column (connector types from
    ``class_types``, ``connector.class.types``, before guessing)."""
    row = connector_row(state, class_types)
    tasks_json = json.dumps(row.pop("tasks"))
    name = row.pop("name")
    n = len(events)
    none = [None] * n
    columns: dict[str, list[Any]] = {column: [*none, value] for column, value in row.items()}
    columns["tasks_json"] = [*none, tasks_json]
    columns["record_kind"] = [RecordKind.EVENT] * n + [RecordKind.ROW]
    columns["connector"] = [e.connector for e in events] + [name]
    for column, attribute in _EVENT_COLUMNS.items():
        columns[column] = [getattr(e, attribute) for e in events] + [None]
    columns["details"] = [e.recorded_json(class_types) for e in events] + [None]
    return column_frame(columns, n + 1, OUTPUT_SCHEMA)


def fold_function(class_types: Mapping[str, str] | None = None) -> FoldFunction:
    """The ``applyInPandasWithState`` body, per (group kind, connector): fold, or pass rejected records through;
    ``class_types`` (``connector.class.types``) decide connector types before guessing."""
    known = dict(class_types or {})

    def fold(key: tuple, batch: pd.DataFrame, state_json: str | None) -> tuple[str, pd.DataFrame]:
        _kind, connector = key
        current = state_from_json(state_json) if state_json is not None else ConnectorState(connector)
        new_state, events = fold_connector(current, _records(connector, batch))
        return state_to_json(new_state), _output_frame(events, new_state, known)

    return group_fold(OUTPUT_SCHEMA, fold)


# The ``tasks`` column, parsed from the fold's JSON.
TASKS_TYPE = cast(ArrayType, spark_type(CONNECTORS.schema.field("tasks").type))


#: A batch's latest row of each connector into ``connectors``, whole (a deleted connector keeps its row, marked).
CURRENT_MERGE = MergeSpec(
    "t.name = s.name",
    (
        matched_update(source_values(CONNECTORS.column_names)),
        not_matched_insert(source_values(CONNECTORS.column_names)),
    ),
)


def fold_spec(settings: Settings) -> FoldSpec:
    """Connector rows merged into ``connectors`` and events appended to ``connector_events``, from the config and status
    topics. Config and status records of one connector meet in one group: groups are (``connector``, name) for
    everything that folds and (``rejected``, null) for the quarantine. ``connectors`` rows of a name with no record left
    in the topics are ghosts (a from-scratch fold has no such connector, not even a deleted one)."""
    config_topic = settings.config_storage_topic
    return FoldSpec(
        JOB_NAME,
        topics=lambda _spark: [config_topic, settings.status_storage_topic],
        classify=partial(classify, config_topic=config_topic),
        parsed=PARSED_SCHEMA,
        group_by=("group_kind", "connector"),
        fold=fold_function(settings.connector_class_types),
        output=OUTPUT_SCHEMA,
        history=CONNECTOR_EVENTS,
        history_kind=RecordKind.EVENT,
        current=CONNECTORS,
        current_kind=RecordKind.ROW,
        merge=CURRENT_MERGE,
        summary="{current} connectors updated, {history} events",
        group_kind="connector",
        columns=lambda: {"name": F.col("connector"), "tasks": F.from_json("tasks_json", TASKS_TYPE)},
    )


JOB = FoldJob(JOB_NAME, fold_spec)
start = JOB.start_query
