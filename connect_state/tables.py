"""The Delta tables connect-state writes: names and schemas, shared by the jobs (writers) and the API (readers).

Schemas are Spark SQL DDL so the jobs can build them with ``StructType.fromDDL``; the API reads the same column
names with ``deltalake``. Nothing here imports Spark or Delta. Timestamps are UTC; ``*_timestamp`` columns that
mirror Connect fields keep Connect's epoch-millisecond longs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableSpec:
    """A Delta table under ``delta.root``: its folder name, its columns and the columns that identify a row."""

    name: str
    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...]
    description: str

    @property
    def ddl(self) -> str:
        return ", ".join(f"{name} {sql_type}" for name, sql_type in self.columns)

    @property
    def column_names(self) -> list[str]:
        return [name for name, _ in self.columns]


ACTIVE_TOPICS = TableSpec(
    name="active_topics",
    columns=(
        ("connector", "STRING"),
        ("topic", "STRING"),
        ("task", "INT"),
        ("discover_timestamp", "BIGINT"),
        ("updated_at", "TIMESTAMP"),
        ("kafka_partition", "INT"),
        ("kafka_offset", "BIGINT"),
    ),
    key=("connector", "topic"),
    description="KIP-558: the topics each connector currently uses (Connect's GET /connectors/<name>/topics).",
)

ACTIVE_TOPICS_HISTORY = TableSpec(
    name="active_topics_history",
    columns=(
        ("connector", "STRING"),
        ("topic", "STRING"),
        ("change", "STRING"),
        ("task", "INT"),
        ("discover_timestamp", "BIGINT"),
        ("changed_at", "TIMESTAMP"),
        ("kafka_partition", "INT"),
        ("kafka_offset", "BIGINT"),
        ("kafka_timestamp", "TIMESTAMP"),
    ),
    key=("connector", "topic", "kafka_partition", "kafka_offset"),
    description="KIP-558: every change of an active-topic set (added, updated, removed) and the record behind it.",
)

REJECTED_RECORDS = TableSpec(
    name="rejected_records",
    columns=(
        ("topic", "STRING"),
        ("partition", "INT"),
        ("offset", "BIGINT"),
        ("key", "BINARY"),
        ("value", "BINARY"),
        ("reason", "STRING"),
        ("seen_at", "TIMESTAMP"),
    ),
    key=("topic", "partition", "offset"),
    description="Records of the internal topics a Connect worker would discard, kept byte for byte with the reason.",
)

TASK_STATUS_TYPE = "STRUCT<id: INT, state: STRING, worker_id: STRING, trace: STRING, generation: INT, version: STRING>"

CONNECTORS = TableSpec(
    name="connectors",
    columns=(
        ("name", "STRING"),
        ("type", "STRING"),
        ("connector_class", "STRING"),
        ("config", "STRING"),
        ("target_state", "STRING"),
        ("task_count", "INT"),
        ("inconsistent", "BOOLEAN"),
        ("connector_state", "STRING"),
        ("connector_worker_id", "STRING"),
        ("connector_trace", "STRING"),
        ("connector_generation", "INT"),
        ("connector_version", "STRING"),
        ("tasks", f"ARRAY<{TASK_STATUS_TYPE}>"),
        ("deleted", "BOOLEAN"),
        ("deleted_at", "BIGINT"),
        ("config_offset", "BIGINT"),
        ("updated_at", "TIMESTAMP"),
    ),
    key=("name",),
    description=(
        "KIP-875: every connector the config and status topics know: config (JSON), type, effective target state, "
        "committed task count, connector and task statuses, deleted flag (connect_state/folds/connector_states.py)."
    ),
)

CONNECTOR_EVENTS = TableSpec(
    name="connector_events",
    columns=(
        ("connector", "STRING"),
        ("event", "STRING"),
        ("details", "STRING"),
        ("source", "STRING"),
        ("kafka_partition", "INT"),
        ("kafka_offset", "BIGINT"),
        ("kafka_timestamp", "TIMESTAMP"),
        ("recorded_at", "TIMESTAMP"),
    ),
    key=("connector", "source", "kafka_partition", "kafka_offset", "event"),
    description=(
        "KIP-875: every transition of a connector (created, reconfigured, target_state_changed, tasks_committed, "
        "status_changed, task_status_changed, deleted), details as JSON, and the record behind it."
    ),
)

ALL_TABLES = (ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, REJECTED_RECORDS, CONNECTORS, CONNECTOR_EVENTS)
