"""The Delta tables connect-state writes: names and schemas, shared by the jobs (writers) and the API (readers).

Each table's schema is defined once, here, as an Arrow schema. The API reads the tables with ``deltalake`` and uses
it as is; the jobs derive Spark's ``StructType`` from it with pyspark's own Arrow converter
(:func:`connect_state.spark.delta_io.schema_of`), which needs no JVM. Nothing here imports Spark or Delta.

Every column and every nested field is nullable, as Spark writes them. Timestamps are UTC microseconds, which is how
Delta stores Spark's TIMESTAMP (Arrow ``timestamp[us, tz=UTC]`` is Spark's ``TimestampType``); ``*_timestamp``
columns that mirror Connect fields keep Connect's epoch-millisecond longs; :func:`now_ms`, :func:`epoch_ms` and
:func:`timestamp` (:mod:`connect_state.core.times`, imported here for the tables' users) convert between the two;
:func:`iso_utc` writes a timestamp as the API shows it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from connect_state.core.times import epoch_ms as epoch_ms
from connect_state.core.times import iso_utc as iso_utc
from connect_state.core.times import now_ms as now_ms
from connect_state.core.times import timestamp as timestamp

# The Arrow types of the tables, named after the Spark SQL types pyspark derives from them.
STRING = pa.string()
INT = pa.int32()
BIGINT = pa.int64()
BOOLEAN = pa.bool_()
BINARY = pa.binary()
TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class TableSpec:
    """A Delta table under ``delta.root``: its folder name, its schema and the columns that identify a row."""

    name: str
    schema: pa.Schema
    key: tuple[str, ...]
    description: str
    counted: tuple[str, ...] = ()
    """Columns whose row counts per distinct value (together) are kept per data file by the API's reader, so that a
    total filtered on them reads no data file twice (:class:`connect_state.tables.scan.FileCounts`)."""

    @property
    def column_names(self) -> list[str]:
        return list(self.schema.names)


ACTIVE_TOPICS = TableSpec(
    name="active_topics",
    schema=pa.schema(
        [
            ("connector", STRING),
            ("topic", STRING),
            ("task", INT),
            ("discover_timestamp", BIGINT),
            ("updated_at", TIMESTAMP),
            ("kafka_partition", INT),
            ("kafka_offset", BIGINT),
        ]
    ),
    key=("connector", "topic"),
    description="KIP-558: the topics each connector currently uses (Connect's GET /connectors/<name>/topics).",
)

ACTIVE_TOPICS_HISTORY = TableSpec(
    name="active_topics_history",
    schema=pa.schema(
        [
            ("connector", STRING),
            ("topic", STRING),
            ("change", STRING),
            ("task", INT),
            ("discover_timestamp", BIGINT),
            ("changed_at", TIMESTAMP),
            ("kafka_partition", INT),
            ("kafka_offset", BIGINT),
            ("kafka_timestamp", TIMESTAMP),
        ]
    ),
    key=("connector", "topic", "kafka_partition", "kafka_offset"),
    description="KIP-558: every change of an active-topic set (added, updated, removed) and the record behind it.",
)

REJECTED_RECORDS = TableSpec(
    name="rejected_records",
    schema=pa.schema(
        [
            ("topic", STRING),
            ("partition", INT),
            ("offset", BIGINT),
            ("key", BINARY),
            ("value", BINARY),
            ("reason", STRING),
            ("seen_at", TIMESTAMP),
        ]
    ),
    key=("topic", "partition", "offset"),
    description="Records of the internal topics a Connect worker would discard, kept byte for byte with the reason.",
)

# One task's status in ``connectors.tasks`` (connect_state/folds/connector_states.py's task rows); the list's items
# are named ``element``, as Delta (Parquet) and pyspark's Arrow converter name them.
TASK_STATUS = pa.struct(
    [
        ("id", INT),
        ("state", STRING),
        ("worker_id", STRING),
        ("trace", STRING),
        ("generation", INT),
        ("version", STRING),
    ]
)

CONNECTORS = TableSpec(
    name="connectors",
    schema=pa.schema(
        [
            ("name", STRING),
            ("type", STRING),
            ("connector_class", STRING),
            ("config", STRING),
            ("target_state", STRING),
            ("task_count", INT),
            ("task_configs", STRING),
            ("inconsistent", BOOLEAN),
            ("connector_state", STRING),
            ("connector_worker_id", STRING),
            ("connector_trace", STRING),
            ("connector_generation", INT),
            ("connector_version", STRING),
            ("tasks", pa.list_(pa.field("element", TASK_STATUS))),
            ("deleted", BOOLEAN),
            ("deleted_at", BIGINT),
            ("config_offset", BIGINT),
            ("updated_at", TIMESTAMP),
        ]
    ),
    key=("name",),
    description=(
        "KIP-875: every connector the config and status topics know: config (JSON), type, effective target state, "
        "committed task count, applied task configs (JSON by task id), connector and task statuses, deleted flag "
        "(connect_state/folds/connector_states.py)."
    ),
)

CONNECTOR_EVENTS = TableSpec(
    name="connector_events",
    schema=pa.schema(
        [
            ("connector", STRING),
            ("event", STRING),
            ("details", STRING),
            ("source", STRING),
            ("kafka_partition", INT),
            ("kafka_offset", BIGINT),
            ("kafka_timestamp", TIMESTAMP),
            ("recorded_at", TIMESTAMP),
        ]
    ),
    key=("connector", "source", "kafka_partition", "kafka_offset", "event"),
    description=(
        "KIP-875: every transition of a connector (created, reconfigured, target_state_changed, tasks_committed, "
        "status_changed, task_status_changed, deleted), details as JSON, and the record behind it."
    ),
)

SOURCE_OFFSETS = TableSpec(
    name="source_offsets",
    schema=pa.schema(
        [
            ("connector", STRING),
            ("offsets_topic", STRING),
            ("partition", STRING),
            ("key", BINARY),
            ("offset", STRING),
            ("value", BINARY),
            ("listed", BOOLEAN),
            ("kafka_partition", INT),
            ("kafka_offset", BIGINT),
            ("kafka_timestamp", TIMESTAMP),
            ("updated_at", TIMESTAMP),
        ]
    ),
    key=("offsets_topic", "key"),
    description=(
        "KIP-875: the live (non-tombstoned) records of connect-offsets and of connector-specific offsets topics, one "
        "row per exact key bytes: the connector (key namespace), the partition and offset as JSON, the raw key and "
        "value bytes, and whether the parsed partition map is in Connect's connectorPartitions (``listed``)."
    ),
)

SOURCE_OFFSETS_HISTORY = TableSpec(
    name="source_offsets_history",
    schema=pa.schema(
        [
            ("connector", STRING),
            ("offsets_topic", STRING),
            ("partition", STRING),
            ("key", BINARY),
            ("offset", STRING),
            ("change", STRING),
            ("kafka_partition", INT),
            ("kafka_offset", BIGINT),
            ("kafka_timestamp", TIMESTAMP),
            ("recorded_at", TIMESTAMP),
        ]
    ),
    key=("offsets_topic", "kafka_partition", "kafka_offset"),
    description="KIP-875: every source offset record (set or removed by a tombstone) and where it came from.",
)

SINK_OFFSETS = TableSpec(
    name="sink_offsets",
    schema=pa.schema(
        [
            ("group_id", STRING),
            ("topic", STRING),
            ("partition", INT),
            ("offset", BIGINT),
            ("leader_epoch", INT),
            ("metadata", STRING),
            ("commit_timestamp", BIGINT),
            ("kafka_partition", INT),
            ("kafka_offset", BIGINT),
            ("kafka_timestamp", TIMESTAMP),
            ("updated_at", TIMESTAMP),
        ]
    ),
    key=("group_id", "topic", "partition"),
    description=(
        "KIP-875: committed consumer-group offsets read from __consumer_offsets (sink connectors use the group "
        "connect-<name> or consumer.override.group.id); a deleted offset or group removes its rows."
    ),
)

SINK_OFFSETS_HISTORY = TableSpec(
    name="sink_offsets_history",
    schema=pa.schema(
        [
            ("group_id", STRING),
            ("topic", STRING),
            ("partition", INT),
            ("offset", BIGINT),
            ("change", STRING),
            ("commit_timestamp", BIGINT),
            ("kafka_partition", INT),
            ("kafka_offset", BIGINT),
            ("kafka_timestamp", TIMESTAMP),
            ("recorded_at", TIMESTAMP),
        ]
    ),
    key=("kafka_partition", "kafka_offset"),
    description="KIP-875: every committed or deleted consumer-group offset, with the __consumer_offsets record.",
)

CONNECTOR_DELETIONS = TableSpec(
    name="connector_deletions",
    schema=pa.schema(
        [
            ("connector", STRING),
            ("deletion_offset", BIGINT),
            ("deleted_at", TIMESTAMP),
            ("connector_type", STRING),
            ("config", STRING),
            ("step", STRING),
            ("status", STRING),
            ("attempts", INT),
            ("detail", STRING),
            ("error", STRING),
            ("next_attempt_at", TIMESTAMP),
            ("updated_at", TIMESTAMP),
        ]
    ),
    key=("connector", "deletion_offset", "step"),
    description=(
        "KIP-883: one row per cleanup step of each connector deletion (the config-topic offset of its tombstone): "
        "active_topics, offsets, hook:<name>; status pending/succeeded/failed/skipped, attempts, detail (what was "
        "done, or why skipped or waiting), last error, next attempt (connect_state/cleanup/reconciler.py)."
    ),
)

CONNECTOR_RESTARTS = TableSpec(
    name="connector_restarts",
    schema=pa.schema(
        [
            ("connector", STRING),
            ("requested_at", TIMESTAMP),
            ("attempt", INT),
            ("reason", STRING),
            ("trace", STRING),
            ("failed_since", TIMESTAMP),
            ("outcome", STRING),
            ("outcome_at", TIMESTAMP),
            ("detail", STRING),
            ("updated_at", TIMESTAMP),
        ]
    ),
    key=("connector", "requested_at"),
    description=(
        "Issue 35: every auto-restart request of a FAILED connector or task (restart-connector-<name>, onlyFailed, "
        "includeTasks): when, its number in the series, why (what was FAILED), the trace it answered, since when it "
        "had failed, and the outcome seen afterwards (pending, recovered, failed-again, no-effect, interrupted, "
        "not-sent) with when and a detail (connect_state/restarts/reconciler.py)."
    ),
)

SOURCE_PARTITION_ACTIVITY = TableSpec(
    name="source_partition_activity",
    schema=pa.schema(
        [
            ("connector", STRING),
            ("partition", STRING),
            ("key", BINARY),
            ("offset", STRING),
            ("connector_class", STRING),
            ("config", STRING),
            ("last_moved_at", TIMESTAMP),
            ("last_heartbeat_at", TIMESTAMP),
            ("idle_ms", BIGINT),
            ("heartbeat_interval_ms", BIGINT),
            ("heartbeat_topic", STRING),
            ("eligible", BOOLEAN),
            ("reason", STRING),
            ("kafka_partition", INT),
            ("kafka_offset", BIGINT),
            ("updated_at", TIMESTAMP),
        ]
    ),
    key=("connector", "key"),
    description=(
        "KIP-910: per source partition with an offset (key = Connect's offsets-topic key bytes): its last offset, when "
        "it last moved (Kafka timestamp of the record that changed it), the last heartbeat, its idle age at "
        "updated_at, the effective heartbeat interval and topic, whether its connector is eligible (source, STARTED, "
        "RUNNING, interval > 0) or why not, and the connector's class and config (what its provider is called with)."
    ),
)

HEARTBEATS = TableSpec(
    name="heartbeats",
    schema=pa.schema(
        [
            ("connector", STRING),
            ("partition", STRING),
            ("source_key", BINARY),
            ("heartbeat_topic", STRING),
            ("record_index", INT),
            ("record_key", BINARY),
            ("record_value", BINARY),
            ("record_partition", INT),
            ("record_offset", BIGINT),
            ("committed_offset", STRING),
            ("outcome", STRING),
            ("error", STRING),
            ("idle_ms", BIGINT),
            ("heartbeat_interval_ms", BIGINT),
            ("due_at", TIMESTAMP),
            ("emitted_at", TIMESTAMP),
        ]
    ),
    key=("connector", "source_key", "emitted_at", "record_index"),
    description=(
        "KIP-910: every heartbeat of an idle source partition: one row per record sent to the heartbeat topic "
        "(outcome produced, with its Kafka position and the offset it committed), or one row with outcome no_records "
        "(the provider returned none), failed (with the error) or timed_out (the provider missed its deadline, "
        "heartbeat.provider.timeout.ms); offsets-update form: one row per partition with "
        "outcome offsets_committed (an offset committed, nothing produced)."
    ),
)

CONNECTOR_VERDICTS = TableSpec(
    name="connector_verdicts",
    schema=pa.schema(
        [
            ("connector", STRING),
            ("type", STRING),
            ("verdict", STRING),
            ("since", TIMESTAMP),
            ("evidence", STRING),
            ("tasks", STRING),
            ("thresholds", STRING),
            ("updated", TIMESTAMP),
        ]
    ),
    key=("connector",),
    description=(
        "Issue 35: each connector's current verdict (connect_state/verdicts/vocabulary.py), since when, its evidence "
        "(JSON: numbers and times), each task's verdict and evidence (JSON by task id) and the thresholds it was "
        "judged by (JSON); written by the watch job (connect_state/spark/watch.py, through deltalake); not in "
        "ALL_TABLES."
    ),
)

VERDICT_HISTORY = TableSpec(
    name="verdict_history",
    schema=pa.schema(
        [
            ("connector", STRING),
            ("verdict", STRING),
            ("previous", STRING),
            ("at", TIMESTAMP),
            ("evidence", STRING),
        ]
    ),
    key=("connector", "at"),
    description="Issue 35: one row per change of a connector's verdict: the new one, the previous one, when, why.",
)

WATERMARKS = TableSpec(
    name="watermarks",
    schema=pa.schema(
        [
            ("query", STRING),
            ("topic", STRING),
            ("partition", INT),
            ("next_offset", BIGINT),
            ("batch_id", BIGINT),
            ("committed_at", TIMESTAMP),
        ]
    ),
    key=("query", "topic", "partition"),
    description=(
        "The Kafka position each streaming query's tables reflect: per (query, topic, partition), the next offset "
        "not yet folded into them (the end offset of the query's last committed micro-batch), its batch id and when "
        "it was committed. Written by the query's foreachBatch after its table writes, idempotently per batch "
        "(with deltalake; with Spark where deltalake cannot commit)."
    ),
)

DATA_LOSS = TableSpec(
    name="data_loss",
    schema=pa.schema(
        [
            ("query", STRING),
            ("topic", STRING),
            ("partition", INT),
            ("expected_offset", BIGINT),
            ("earliest_offset", BIGINT),
            ("cause", STRING),
            ("batch_id", BIGINT),
            ("detected_at", TIMESTAMP),
        ]
    ),
    key=("query", "topic", "partition", "expected_offset"),
    description=(
        "Records a streaming query expected to read and could not: per (query, topic, partition), the offset it was "
        "at, the earliest offset still there (null when the partition is gone), the cause (records_deleted: "
        "retention or deleteRecords; partition_gone: topic deleted; offsets_went_back: topic recreated), the batch "
        "that noticed it and when (connect_state/progress/positions.py). The query goes on from the earliest offset."
    ),
)

LEASES = TableSpec(
    name="leases",
    schema=pa.schema(
        [
            ("name", STRING),
            ("holder", STRING),
            ("epoch", BIGINT),
            ("acquired_at", TIMESTAMP),
            ("renewed_at", TIMESTAMP),
            ("expires_at", TIMESTAMP),
        ]
    ),
    key=("name",),
    description=(
        "One writer where it matters: per job whose side effects must not happen twice (cleanup, heartbeats), the "
        "instance holding its lease, the epoch (fencing token: +1 at every change of holder), when it was taken, last "
        "renewed and when it expires (connect_state/leases/decisions.py, connect_state/tables/lease_store.py)."
    ),
)

AUDIT = TableSpec(
    name="audit",
    schema=pa.schema(
        [
            ("id", STRING),
            ("time", TIMESTAMP),
            ("principal", STRING),
            ("auth", STRING),
            ("remote_addr", STRING),
            ("method", STRING),
            ("path", STRING),
            ("query", STRING),
            ("endpoint", STRING),
            ("connector", STRING),
            ("role", STRING),
            ("body", STRING),
            ("status", INT),
            ("outcome", STRING),
            ("message", STRING),
            ("written", STRING),
            ("target_state_before", STRING),
            ("connector_state_before", STRING),
            ("repeated", INT),
        ]
    ),
    key=("id",),
    description=(
        "Issue 13: every mutating API request, allowed or refused, and the refusals (401/403/429): who (principal, "
        "auth), when, from where, method, path and query, connector, required role, the JSON body with secrets "
        "redacted, status, outcome (succeeded, refused, failed) and message, the records and group changes written "
        "(JSON), and the connector's target and connector state before the write (the connectors table); refusals "
        "alike within api.audit.refusals.window.ms are one row in full and one summary row whose repeated counts "
        "the others (issue 33). Written by the API "
        "(deltalake, from its write-ahead spool api.audit.file, connect_state/api/audit.py), not by a Spark job; "
        "not in ALL_TABLES (the jobs' tables)."
    ),
    counted=("connector", "principal", "outcome"),
)

# Which streaming query (checkpoint name) writes each table: the tables' freshness is its query's watermark.
TABLE_QUERIES: dict[str, str] = {
    "active_topics": "active_topics",
    "active_topics_history": "active_topics",
    "connectors": "connector_states",
    "connector_events": "connector_states",
    "source_offsets": "source_offsets",
    "source_offsets_history": "source_offsets",
    "sink_offsets": "sink_offsets",
    "sink_offsets_history": "sink_offsets",
    "source_partition_activity": "heartbeats",
}

ALL_TABLES = (
    ACTIVE_TOPICS,
    ACTIVE_TOPICS_HISTORY,
    REJECTED_RECORDS,
    CONNECTORS,
    CONNECTOR_EVENTS,
    SOURCE_OFFSETS,
    SOURCE_OFFSETS_HISTORY,
    SINK_OFFSETS,
    SINK_OFFSETS_HISTORY,
    CONNECTOR_DELETIONS,
    CONNECTOR_RESTARTS,
    SOURCE_PARTITION_ACTIVITY,
    HEARTBEATS,
    WATERMARKS,
    DATA_LOSS,
    LEASES,
)


# Table features delta-rs reads without trouble; the API reads these tables with `deltalake`.
TABLE_PROPERTIES = {
    "delta.enableDeletionVectors": "false",
    "delta.checkpointPolicy": "classic",
}


# The alerts job's tables (issue 35; connect_state/alerts): written with deltalake by the job (alerts, deliveries) and
# the API (silences); not in ALL_TABLES (the Spark jobs' tables).
ALERTS = TableSpec(
    name="alerts",
    schema=pa.schema(
        [
            ("id", STRING),
            ("rule", STRING),
            ("kind", STRING),
            ("connector", STRING),
            ("subject", STRING),
            ("severity", STRING),
            ("summary", STRING),
            ("detail", STRING),
            ("labels", STRING),
            ("values", STRING),
            ("state", STRING),
            ("started_at", TIMESTAMP),
            ("fired_at", TIMESTAMP),
            ("resolved_at", TIMESTAMP),
            ("notified", BOOLEAN),
            ("silenced", BOOLEAN),
            ("updated_at", TIMESTAMP),
        ]
    ),
    key=("id",),
    description=(
        "Issue 35: every alert (a rule over one subject: a connector's verdict, a cleanup step, a source partition's "
        "heartbeats, a lost range): state pending/firing/resolved, when its condition began, fired and resolved, "
        "whether its firing notification was sent and whether a silence holds it (connect_state/alerts/engine.py)."
    ),
)

ALERT_DELIVERIES = TableSpec(
    name="alert_deliveries",
    schema=pa.schema(
        [
            ("alert_id", STRING),
            ("event", STRING),
            ("channel", STRING),
            ("kind", STRING),
            ("status", STRING),
            ("attempts", INT),
            ("created_at", TIMESTAMP),
            ("next_attempt_at", TIMESTAMP),
            ("delivered_at", TIMESTAMP),
            ("http_status", INT),
            ("last_error", STRING),
            ("latency_ms", BIGINT),
        ]
    ),
    key=("alert_id", "event", "channel"),
    description=(
        "Issue 35: one row per notification (firing or resolved) of an alert and channel: pending until the channel "
        "answered 2xx (delivered, with the time and how long after the condition began or ended), retried with "
        "backoff meanwhile (attempts, next attempt, last error), failed once given up (connect_state/alerts)."
    ),
)

ALERT_SILENCES = TableSpec(
    name="alert_silences",
    schema=pa.schema(
        [
            ("id", STRING),
            ("connector", STRING),
            ("starts_at", TIMESTAMP),
            ("ends_at", TIMESTAMP),
            ("created_by", STRING),
            ("comment", STRING),
            ("lifted_at", TIMESTAMP),
            ("lifted_by", STRING),
        ]
    ),
    key=("id",),
    description=(
        "Issue 35: operators' silences of a connector's alerts (POST /connectors/<name>/silence), from starts_at to "
        "ends_at unless lifted (DELETE): no notification is sent for the connector's alerts meanwhile."
    ),
)
