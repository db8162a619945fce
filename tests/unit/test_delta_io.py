"""delta_io: the tables' Spark schemas derived from their Arrow schemas (no JVM); Delta write conflicts between jobs
sharing a table are retried, other errors are not."""

from __future__ import annotations

import time

import pytest
from delta.exceptions import ConcurrentAppendException, ConcurrentDeleteReadException
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import ArrayType, DataType, StructType

from connect_state.spark import delta_io
from connect_state.tables.schemas import ALL_TABLES, CONNECTORS, TableSpec

# --- schemas --------------------------------------------------------------------------------------------------------

# The Spark SQL DDL the tables were created with before their schemas were Arrow's (``StructType.fromDDL`` of these is
# what existing tables hold): the derived schemas must be the same, or a job would fail on a table it created earlier.
TASK_STATUS_DDL = "STRUCT<id: INT, state: STRING, worker_id: STRING, trace: STRING, generation: INT, version: STRING>"
CREATED_WITH_DDL = {
    "active_topics": "connector STRING, topic STRING, task INT, discover_timestamp BIGINT, updated_at TIMESTAMP, "
    "kafka_partition INT, kafka_offset BIGINT",
    "active_topics_history": "connector STRING, topic STRING, change STRING, task INT, discover_timestamp BIGINT, "
    "changed_at TIMESTAMP, kafka_partition INT, kafka_offset BIGINT, kafka_timestamp TIMESTAMP",
    "rejected_records": "topic STRING, partition INT, offset BIGINT, key BINARY, value BINARY, reason STRING, "
    "seen_at TIMESTAMP",
    "connectors": "name STRING, type STRING, connector_class STRING, config STRING, target_state STRING, "
    "task_count INT, task_configs STRING, inconsistent BOOLEAN, connector_state STRING, connector_worker_id STRING, "
    f"connector_trace STRING, connector_generation INT, connector_version STRING, tasks ARRAY<{TASK_STATUS_DDL}>, "
    "deleted BOOLEAN, deleted_at BIGINT, config_offset BIGINT, updated_at TIMESTAMP",
    "connector_events": "connector STRING, event STRING, details STRING, source STRING, kafka_partition INT, "
    "kafka_offset BIGINT, kafka_timestamp TIMESTAMP, recorded_at TIMESTAMP",
    "source_offsets": "connector STRING, offsets_topic STRING, partition STRING, key BINARY, offset STRING, "
    "value BINARY, listed BOOLEAN, kafka_partition INT, kafka_offset BIGINT, kafka_timestamp TIMESTAMP, "
    "updated_at TIMESTAMP",
    "source_offsets_history": "connector STRING, offsets_topic STRING, partition STRING, key BINARY, offset STRING, "
    "change STRING, kafka_partition INT, kafka_offset BIGINT, kafka_timestamp TIMESTAMP, recorded_at TIMESTAMP",
    "sink_offsets": "group_id STRING, topic STRING, partition INT, offset BIGINT, leader_epoch INT, metadata STRING, "
    "commit_timestamp BIGINT, kafka_partition INT, kafka_offset BIGINT, kafka_timestamp TIMESTAMP, "
    "updated_at TIMESTAMP",
    "sink_offsets_history": "group_id STRING, topic STRING, partition INT, offset BIGINT, change STRING, "
    "commit_timestamp BIGINT, kafka_partition INT, kafka_offset BIGINT, kafka_timestamp TIMESTAMP, "
    "recorded_at TIMESTAMP",
    "connector_deletions": "connector STRING, deletion_offset BIGINT, deleted_at TIMESTAMP, connector_type STRING, "
    "config STRING, step STRING, status STRING, attempts INT, detail STRING, error STRING, "
    "next_attempt_at TIMESTAMP, updated_at TIMESTAMP",
    "source_partition_activity": "connector STRING, partition STRING, key BINARY, offset STRING, "
    "connector_class STRING, config STRING, last_moved_at TIMESTAMP, last_heartbeat_at TIMESTAMP, idle_ms BIGINT, "
    "heartbeat_interval_ms BIGINT, heartbeat_topic STRING, eligible BOOLEAN, reason STRING, kafka_partition INT, "
    "kafka_offset BIGINT, updated_at TIMESTAMP",
    "heartbeats": "connector STRING, partition STRING, source_key BINARY, heartbeat_topic STRING, record_index INT, "
    "record_key BINARY, record_value BINARY, record_partition INT, record_offset BIGINT, committed_offset STRING, "
    "outcome STRING, error STRING, idle_ms BIGINT, heartbeat_interval_ms BIGINT, due_at TIMESTAMP, "
    "emitted_at TIMESTAMP",
    "watermarks": "query STRING, topic STRING, partition INT, next_offset BIGINT, batch_id BIGINT, "
    "committed_at TIMESTAMP",
    "data_loss": "query STRING, topic STRING, partition INT, expected_offset BIGINT, earliest_offset BIGINT, "
    "cause STRING, batch_id BIGINT, detected_at TIMESTAMP",
    "connector_restarts": "connector STRING, requested_at TIMESTAMP, attempt INT, reason STRING, trace STRING, "
    "failed_since TIMESTAMP, outcome STRING, outcome_at TIMESTAMP, detail STRING, updated_at TIMESTAMP",
    "leases": "name STRING, holder STRING, epoch BIGINT, acquired_at TIMESTAMP, renewed_at TIMESTAMP, "
    "expires_at TIMESTAMP",
}


def simple_string(ddl: str) -> str:
    """Spark's ``simpleString()`` of the ``StructType`` of a DDL of the form above (``name TYPE, ...``; field names
    without spaces): ``"a INT, b ARRAY<STRUCT<c: STRING>>"`` -> ``"struct<a:int,b:array<struct<c:string>>>"``."""
    return "struct<" + ddl.replace(": ", " ").replace(", ", ",").replace(" ", ":").lower() + ">"


def nullable_everywhere(data_type: DataType) -> bool:
    """Every field (at any depth) nullable and every array's elements too, as ``StructType.fromDDL`` makes them."""
    if isinstance(data_type, StructType):
        return all(field.nullable and nullable_everywhere(field.dataType) for field in data_type.fields)
    if isinstance(data_type, ArrayType):
        return data_type.containsNull and nullable_everywhere(data_type.elementType)
    return True


def test_every_table_has_its_former_ddl() -> None:
    assert sorted(CREATED_WITH_DDL) == sorted(spec.name for spec in ALL_TABLES)


@pytest.mark.parametrize("spec", ALL_TABLES, ids=lambda spec: spec.name)
def test_spark_schema_is_the_one_the_table_was_created_with(spec: TableSpec) -> None:
    schema = delta_io.schema_of(spec)
    assert schema.simpleString() == simple_string(CREATED_WITH_DDL[spec.name])
    assert nullable_everywhere(schema)
    assert all(field.metadata == {} for field in schema.fields)


@pytest.mark.parametrize("spec", ALL_TABLES, ids=lambda spec: spec.name)
def test_arrow_schema_round_trips_through_pysparks_converter(spec: TableSpec) -> None:
    """Arrow -> Spark -> Arrow gives the spec's schema back: the two sides describe the same table (TIMESTAMP is UTC
    microseconds, arrays' elements are named ``element``)."""
    assert to_arrow_schema(delta_io.schema_of(spec), timezone="UTC").equals(spec.schema)


def test_spark_type_of_a_column() -> None:
    tasks = delta_io.spark_type(CONNECTORS.schema.field("tasks").type)
    assert tasks.simpleString() == "array<" + simple_string(TASK_STATUS_DDL.removeprefix("STRUCT<")[:-1]) + ">"


def test_simple_string_of_a_ddl() -> None:
    assert simple_string("a INT, b ARRAY<STRUCT<c: STRING, d: BIGINT>>") == (
        "struct<a:int,b:array<struct<c:string,d:bigint>>>"
    )


# --- retry_on_conflict ----------------------------------------------------------------------------------------------


class Flaky:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda _s: None)


@pytest.mark.usefixtures("no_sleep")
def test_conflicts_are_retried_until_the_write_succeeds() -> None:
    action = Flaky([ConcurrentAppendException("Files were added"), ConcurrentDeleteReadException("a file was removed")])
    delta_io.retry_on_conflict(action, "rejected_records")
    assert action.calls == 3


@pytest.mark.parametrize(
    "error",
    [ValueError("schema mismatch"), RuntimeError("ConcurrentAppendException: told by its text alone")],
    ids=["other", "named-in-text"],
)
@pytest.mark.usefixtures("no_sleep")
def test_other_errors_are_not_retried(error: Exception) -> None:
    action = Flaky([error])
    with pytest.raises(type(error)):
        delta_io.retry_on_conflict(action, "rejected_records")
    assert action.calls == 1


@pytest.mark.usefixtures("no_sleep")
def test_a_conflict_that_persists_is_raised_after_the_last_attempt() -> None:
    action = Flaky([ConcurrentAppendException(str(n)) for n in range(5)])
    with pytest.raises(ConcurrentAppendException):
        delta_io.retry_on_conflict(action, "rejected_records", attempts=3)
    assert action.calls == 3


@pytest.mark.parametrize(
    ("name", "commit"),
    [
        ("00000000000000000000.json", True),
        ("00000000000000000010.checkpoint.parquet", True),
        ("00000000000000000010.checkpoint.0000000001.0000000002.parquet", True),
        (".00000000000000000000.json.3f1c.tmp", False),
        ("00000000000000000000.crc", False),
        ("_last_checkpoint", False),
        ("0000000000000000000.json", False),
    ],
)
def test_is_commit_file(name: str, commit: bool) -> None:
    assert delta_io.is_commit_file(name) is commit
