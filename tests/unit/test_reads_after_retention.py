"""Reads of a history table after a retention pass rewrote one of its files through delta-rs.

delta-rs's MERGE writes string columns as ``string_view`` (in the file's stored Arrow schema), and Arrow's comparison
kernels take no ``string_view``. So a filter evaluated as such a file is read, e.g. a connector's name, failed with
``ArrowNotImplementedError``. That broke the API's history reads, the restarts job's status changes, the cleanup
job's cheap pass check and the audit trail's flush, from the first retention pass that deleted some rows of a file and
kept others. Each is read
here through its own code, after the real retention pass (``retention_io.clean_table``), against a full read of the
table by deltalake."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from connect_state.core.settings import load_settings
from connect_state.core.storage import Location
from connect_state.folds.connector_states import STATUS_CHANGED
from connect_state.spark.cleanup import SparkCleanupIO
from connect_state.spark.restarts import RestartsJobIO
from connect_state.tables.audit_table import AuditTable
from connect_state.tables.history_reads import table_rows
from connect_state.tables.reader import TableReader
from connect_state.tables.retention import POLICIES
from connect_state.tables.retention_io import clean_table
from connect_state.tables.scan import read_filtered
from connect_state.tables.schemas import AUDIT, CONNECTOR_EVENTS

DAY_MS = 86_400_000
POLICY = next(policy for policy in POLICIES if policy.name == CONNECTOR_EVENTS.name)


def event(connector: str, kind: str, offset: int, day: int, source: str = "status") -> dict:
    details = '{"to": "FAILED"}' if kind == STATUS_CHANGED else "{}"
    at = dt.datetime.fromtimestamp(day * DAY_MS / 1000, dt.UTC)
    return {"connector": connector, "event": kind, "details": details, "source": source, "kafka_partition": 0,
            "kafka_offset": offset, "kafka_timestamp": at}  # fmt: skip


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """``connector_events`` with one file whose old rows a retention pass deletes and whose newer ones it keeps, so
    delta-rs rewrites the file."""
    rows = [
        event("sink", "created", 1, 1, "config"),
        event("sink", STATUS_CHANGED, 2, 2),
        event("sink", STATUS_CHANGED, 3, 3),
        event("source", "created", 4, 1, "config"),
        event("source", STATUS_CHANGED, 5, 60),
    ]
    path = tmp_path / CONNECTOR_EVENTS.name
    write_deltalake(str(path), pa.Table.from_pylist(rows, schema=CONNECTOR_EVENTS.schema))
    cleaned = clean_table(Location.parse(str(tmp_path)), POLICY, cutoff=50 * DAY_MS)
    assert cleaned.deleted > 0 and DeltaTable(str(path)).to_pyarrow_table().num_rows > 0
    later = [event("sink", STATUS_CHANGED, 6, 61), event("other", STATUS_CHANGED, 7, 61)]
    write_deltalake(str(path), pa.Table.from_pylist(later, schema=CONNECTOR_EVENTS.schema), mode="append")
    stored = {str(pq.read_schema(uri).field("connector").type) for uri in DeltaTable(str(path)).file_uris()}
    assert stored == {"string_view", "string"}  # the condition these tests are about: rewritten and plain files
    return tmp_path


def oracle(root: Path, connector: str) -> list[dict]:
    rows = DeltaTable(str(root / CONNECTOR_EVENTS.name)).to_pyarrow_table().to_pylist()
    return sorted((row for row in rows if row["connector"] == connector), key=lambda row: row["kafka_offset"])


def test_the_apis_history_reads_filter_a_rewritten_file(root: Path) -> None:
    scan = TableReader(root).scan(CONNECTOR_EVENTS)

    for connector in ("sink", "source"):
        rows = table_rows(scan, CONNECTOR_EVENTS, [("connector", "=", connector)])
        assert sorted(rows, key=lambda row: row["kafka_offset"]) == oracle(root, connector)
        assert scan.count([("connector", "=", connector)]) == len(oracle(root, connector))


def test_the_restarts_jobs_status_changes_read_a_rewritten_file(root: Path) -> None:
    io = RestartsJobIO(load_settings(overrides={"delta.root": str(root)}, environ={}))

    changes = io.status_changes(["sink", "source"])

    expected = {
        connector: sorted(int(r["kafka_timestamp"].timestamp() * 1000) for r in rows if r["event"] == STATUS_CHANGED)
        for connector in ("sink", "source")
        if (rows := oracle(root, connector))
    }
    assert {connector: [change.at_ms for change in found] for connector, found in changes.items()} == expected
    assert {change.to for found in changes.values() for change in found} == {"FAILED"}
    assert io.status_changes([]) == {}


def test_the_cleanup_jobs_pass_check_reads_a_rewritten_file(root: Path) -> None:
    io = SparkCleanupIO(None, load_settings(overrides={"delta.root": str(root)}, environ={}))  # type: ignore[arg-type]

    marks = io.input_marks()

    creations = [r for c in ("sink", "source") for r in oracle(root, c) if r["event"] == "created"]
    assert marks is not None and marks[0] == len(creations)


def test_the_audit_flushs_check_of_ids_reads_a_rewritten_file(tmp_path: Path) -> None:
    """The audit trail's flush asks which of its spool's ids the table has, so as not to append one twice."""
    rows = [
        {"id": "old", "time": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "principal": "ops", "status": 200},
        {"id": "new", "time": dt.datetime(2026, 11, 1, tzinfo=dt.UTC), "principal": "ops", "status": 200},
    ]
    write_deltalake(str(tmp_path / AUDIT.name), pa.Table.from_pylist(rows, schema=AUDIT.schema))
    policy = next(policy for policy in POLICIES if policy.name == AUDIT.name)
    cutoff = int(dt.datetime(2026, 6, 1, tzinfo=dt.UTC).timestamp() * 1000)
    assert clean_table(Location.parse(str(tmp_path)), policy, cutoff).deleted == 1
    stored = {str(pq.read_schema(uri).field("id").type) for uri in DeltaTable(str(tmp_path / AUDIT.name)).file_uris()}
    assert stored == {"string_view"}

    table = AuditTable(load_settings(overrides={"delta.root": str(tmp_path)}, environ={}), tmp_path / "audit.spool")

    assert table.ids_in_table(["old", "new", "unknown"]) == {"new"}


def test_a_file_arrow_cannot_filter_is_remembered_and_the_files_order_kept(root: Path) -> None:
    """The second read filters the plain files together as they are read, the rewritten one after, in file order."""
    dataset = DeltaTable(str(root / CONNECTOR_EVENTS.name)).to_pyarrow_dataset()
    columns, filters = ["kafka_offset"], [("connector", "in", ["sink", "other"])]
    views: set[str] = set()

    first = read_filtered(dataset, columns, filters, views)
    again = read_filtered(dataset, columns, filters, views)

    rewritten = {
        f.path for f in dataset.get_fragments() if str(f.physical_schema.field("connector").type) == "string_view"
    }
    assert views == rewritten and len(rewritten) == 1
    whole = [f.to_table(schema=dataset.schema, columns=["connector", "kafka_offset"]) for f in dataset.get_fragments()]
    expected = [
        row["kafka_offset"] for part in whole for row in part.to_pylist() if row["connector"] in ("sink", "other")
    ]
    assert first.column("kafka_offset").to_pylist() == again.column("kafka_offset").to_pylist() == expected
