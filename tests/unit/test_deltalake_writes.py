"""Small writes through ``deltalake``: the ``watermarks`` table (:class:`~connect_state.spark.watermarks.
DeltaWatermarkStore`: a query's rows per batch, once per batch, beside the other queries' rows, under concurrent
commits) and a small batch's history append (:func:`connect_state.tables.small_writes.append_once`)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from connect_state.core.errors import DeltaWriteError
from connect_state.core.settings import Settings
from connect_state.core.storage import Location
from connect_state.heartbeats.emitter import EmittedHeartbeat, HeartbeatOutcome
from connect_state.spark.heartbeats import HeartbeatSink
from connect_state.spark.watermarks import DeltaWatermarkStore
from connect_state.tables import small_writes
from connect_state.tables.schemas import (
    ACTIVE_TOPICS_HISTORY,
    CONNECTORS,
    HEARTBEATS,
    SOURCE_PARTITION_ACTIVITY,
    WATERMARKS,
)


@pytest.fixture
def root(tmp_path: Path) -> Location:
    return Location.parse(str(tmp_path / "delta"))


def rows(root: Location) -> list[tuple[str, str, int, int, int]]:
    table = DeltaTable(str(root / WATERMARKS.name)).to_pyarrow_table()
    assert table.schema.names == WATERMARKS.column_names
    return sorted(
        (r["query"], r["topic"], r["partition"], r["next_offset"], r["batch_id"])
        for r in table.to_pylist()
        if r["committed_at"] is not None
    )


def app(query: str) -> str:
    return f"connect-state:{query}:q1:watermarks"


def test_a_querys_rows_follow_its_batches_beside_the_other_queries_rows(root: Location) -> None:
    store = DeltaWatermarkStore(root)
    assert store.record("active_topics", {("s", 0): 10, ("s", 1): 4}, 0, app("active_topics"))
    assert store.record("sink_offsets", {("o", 0): 7}, 3, app("sink_offsets"))
    assert store.record("active_topics", {("s", 0): 12, ("t", 0): 1}, 1, app("active_topics"))  # ("s", 1) left
    assert rows(root) == [
        ("active_topics", "s", 0, 12, 1),
        ("active_topics", "t", 0, 1, 1),
        ("sink_offsets", "o", 0, 7, 3),
    ]


@pytest.mark.parametrize("replayed_batch", [1, 0])
def test_a_batch_already_recorded_changes_nothing(root: Location, replayed_batch: int) -> None:
    store = DeltaWatermarkStore(root)
    store.record("q", {("s", 0): 5}, 0, app("q"))
    store.record("q", {("s", 0): 9}, 1, app("q"))
    version = DeltaTable(store.path).version()
    again = DeltaWatermarkStore(root)  # a restarted driver
    assert not again.record("q", {("s", 0): 2}, replayed_batch, app("q"))
    assert DeltaTable(store.path).version() == version and rows(root) == [("q", "s", 0, 9, 1)]
    assert again.record("q", {("s", 0): 11}, 2, app("q"))  # the next batch is written
    assert rows(root) == [("q", "s", 0, 11, 2)]


def test_queries_recording_at_once_all_land(root: Location) -> None:
    DeltaWatermarkStore(root).forget("nobody")  # the table exists before the race
    queries = [f"q{i}" for i in range(4)]
    start = threading.Barrier(len(queries))
    errors: list[BaseException] = []

    def run(query: str) -> None:
        store = DeltaWatermarkStore(root)
        start.wait()
        try:
            for batch in range(5):
                store.record(query, {("s", 0): batch * 10, ("s", 1): batch}, batch, app(query))
        except BaseException as err:  # reported by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(q,)) for q in queries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert rows(root) == sorted((q, "s", p, 40 if p == 0 else 4, 4) for q in queries for p in (0, 1))


RECORD_IN_ANOTHER_PROCESS = """
import sys
from connect_state.spark.watermarks import DeltaWatermarkStore
from connect_state.core.storage import Location
store = DeltaWatermarkStore(Location.parse(sys.argv[1]))
for batch in range(8):
    store.record(sys.argv[2], {("s", 0): batch}, batch, "app-" + sys.argv[2])
"""


def test_drivers_recording_at_once_retry_what_lost_to_the_others_commits(root: Location) -> None:
    DeltaWatermarkStore(root).forget("nobody")  # the table exists before the race
    drivers = [
        subprocess.Popen([sys.executable, "-c", RECORD_IN_ANOTHER_PROCESS, str(root), f"driver{i}"]) for i in range(3)
    ]
    assert [driver.wait(120) for driver in drivers] == [0, 0, 0]
    assert rows(root) == [(f"driver{i}", "s", 0, 7, 7) for i in range(3)]
    assert DeltaTable(str(root / WATERMARKS.name)).version() == 3 * 8  # version 0 the creation, then a commit a batch


def test_a_commit_that_keeps_losing_gives_up_and_other_errors_are_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(small_writes, "ATTEMPTS", 3)
    monkeypatch.setattr(time, "sleep", lambda _s: None)
    calls: list[str] = []

    def losing() -> None:
        calls.append("lost")
        raise CommitFailedError("Transaction failed: version already exists: 4")

    with pytest.raises(DeltaWriteError, match="3 attempts lost to concurrent commits") as raised:
        small_writes.with_retries("t", losing)
    assert len(calls) == 3 and isinstance(raised.value.__cause__, CommitFailedError)

    def failing() -> None:
        calls.append("failed")
        raise DeltaError("Generic error: the store is away")

    with pytest.raises(DeltaError):
        small_writes.with_retries("t", failing)
    assert calls.count("failed") == 1
    assert small_writes.with_retries("t", lambda: 7) == 7


def test_forget_removes_only_that_querys_rows(root: Location) -> None:
    store = DeltaWatermarkStore(root)
    store.record("a", {("s", 0): 1}, 0, app("a"))
    store.record("b", {("s", 0): 2}, 0, app("b"))
    store.forget("a")
    assert rows(root) == [("b", "s", 0, 2, 0)]
    assert store.record("a", {("s", 0): 3}, 0, app("a2"))  # a new checkpoint: a new app id, batches from 0
    assert rows(root) == [("a", "s", 0, 3, 0), ("b", "s", 0, 2, 0)]


def test_a_small_append_lands_once_with_the_tables_types(root: Location) -> None:
    path = str(root / ACTIVE_TOPICS_HISTORY.name)
    DeltaTable.create(path, ACTIVE_TOPICS_HISTORY.schema)
    spark_like = pa.table(  # as Spark's toArrow() gives it: large strings, its own column order
        {
            "kafka_offset": pa.array([41], pa.int64()),
            "connector": pa.array(["c1"], pa.large_string()),
            "topic": pa.array(["t1"], pa.large_string()),
            "change": pa.array(["added"], pa.large_string()),
            "task": pa.array([0], pa.int32()),
            "discover_timestamp": pa.array([1_000], pa.int64()),
            "changed_at": pa.array([None], pa.timestamp("us", tz="UTC")),
            "kafka_partition": pa.array([0], pa.int32()),
            "kafka_timestamp": pa.array([None], pa.timestamp("us", tz="UTC")),
        }
    )
    rows = small_writes.as_table_rows(spark_like, ACTIVE_TOPICS_HISTORY)
    assert rows.schema == ACTIVE_TOPICS_HISTORY.schema
    assert small_writes.append_once(rows, path, "app", 7)
    assert not small_writes.append_once(rows, path, "app", 7)  # replayed
    assert not small_writes.append_once(rows, path, "app", 6)  # older
    table = DeltaTable(path)
    assert table.version() == 1 and table.transaction_version("app") == 7
    assert table.to_pyarrow_table().column("topic").to_pylist() == ["t1"]


TASK_TYPE = CONNECTORS.schema.field("tasks").type.value_type


def test_a_merge_source_takes_the_tables_types_and_keeps_its_own_columns_plain() -> None:
    strings = ("state", "worker_id", "trace", "version")
    task = pa.struct([(f.name, pa.large_string() if f.name in strings else f.type) for f in TASK_TYPE])
    spark_like = pa.table(
        {
            "name": pa.array(["c1"], pa.large_string()),
            "tasks": pa.array([[{"id": 0, "state": "RUNNING"}]], pa.large_list(task)),
            "op": pa.array(["upsert"], pa.large_string()),
            "key": pa.array([b"k"], pa.large_binary()),
        }
    )
    rows = small_writes.merge_source_rows(spark_like, CONNECTORS)
    assert rows.schema.field("name").type == pa.string()
    assert rows.schema.field("tasks").type == CONNECTORS.schema.field("tasks").type
    assert rows.schema.field("op").type == pa.string() and rows.schema.field("key").type == pa.binary()
    assert rows.column("tasks").to_pylist()[0][0]["state"] == "RUNNING"


def test_small_writes_checkpoint_the_table_every_ten_versions(root: Location) -> None:
    path = str(root / ACTIVE_TOPICS_HISTORY.name)
    DeltaTable.create(path, ACTIVE_TOPICS_HISTORY.schema)
    rows = pa.Table.from_pylist([{"connector": "c1", "kafka_offset": 1}], schema=ACTIVE_TOPICS_HISTORY.schema)
    for batch in range(small_writes.CHECKPOINT_INTERVAL):
        small_writes.append_once(rows, path, "app", batch)
    log_dir = Path(path) / "_delta_log"
    assert sorted(p.name for p in log_dir.glob("*.checkpoint.parquet")) == ["00000000000000000010.checkpoint.parquet"]
    assert DeltaTable(path).transaction_version("app") == small_writes.CHECKPOINT_INTERVAL - 1


def test_deltalake_writes_only_where_it_commits_and_reaches(tmp_path: Path) -> None:
    reachable = Location.parse(str(tmp_path / "delta"))
    assert small_writes.deltalake_writes(reachable)
    assert DeltaTable(str(reachable / WATERMARKS.name)).version() == 0  # created by the probe
    (tmp_path / "a-file").write_text("not a directory")
    assert not small_writes.deltalake_writes(Location.parse(str(tmp_path / "a-file" / "delta")))
    assert not small_writes.deltalake_writes(Location.parse("/Volumes/main/connect_state/state/delta"))


def activity_rows(keys: list[bytes]) -> pa.Table:
    """``source_partition_activity`` rows of connector ``src`` with these keys, no heartbeat yet."""
    columns: dict[str, list[object]] = {name: [None] * len(keys) for name in SOURCE_PARTITION_ACTIVITY.column_names}
    columns.update(connector=["src"] * len(keys), key=list(keys), partition=[k.decode() for k in keys])
    return pa.table(columns, schema=SOURCE_PARTITION_ACTIVITY.schema)


def sent(key: bytes, at_ms: int) -> EmittedHeartbeat:
    return EmittedHeartbeat("src", key.decode(), key, "hb", None, None, None, None, None, None,
                            HeartbeatOutcome.NO_RECORDS, None, 1000, 30000, at_ms - 5, at_ms)  # fmt: skip


def test_the_heartbeats_sink_records_and_reads_back_through_deltalake(settings: Settings) -> None:
    """What the sink sent lands in ``heartbeats`` and as ``last_heartbeat_at`` (a partition's latest heartbeat; one
    without a row sets nothing), and its read of them (before each send, and for the schedule) finds them, of the
    keys asked for, in a table of several files with statistics."""
    sink = HeartbeatSink(settings)
    activity = small_writes.open_or_create(sink.activity_path, SOURCE_PARTITION_ACTIVITY, {})
    for keys in ([b"a", b"b"], [b"c"]):
        write_deltalake(activity, activity_rows(keys), mode="append")
    small_writes.open_or_create(sink.heartbeats_path, HEARTBEATS, {})
    sink._record(None, [sent(b"a", 1_764_028_860_100), sent(b"a", 1_764_028_860_900), sent(b"z", 1_764_028_861_000)])  # type: ignore[arg-type]
    assert sink.last_heartbeats(None) == {("src", b"a"): 1_764_028_860_900}  # type: ignore[arg-type]
    assert sink.last_heartbeats(None, {("src", b"a"), ("src", b"b")}) == {("src", b"a"): 1_764_028_860_900}  # type: ignore[arg-type]
    assert sink.last_heartbeats(None, {("src", b"c")}) == {}  # type: ignore[arg-type]
    recorded = DeltaTable(sink.heartbeats_path).to_pyarrow_table()
    assert sorted(recorded.column("source_key").to_pylist()) == [b"a", b"a", b"z"]
    assert recorded.schema == HEARTBEATS.schema
