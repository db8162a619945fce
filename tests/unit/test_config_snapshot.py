"""The config snapshot (connect_state/folds/config_snapshot.py): Connect's ``ClusterConfigState`` as of a config-topic
position, the pure fold behind the API's fresh decisions (issue 10), and its folds over table rows."""

from __future__ import annotations

from connect_state.core.vocabulary import TargetState
from connect_state.folds import active_topics as topics_fold
from connect_state.folds import source_offsets as offsets_fold
from connect_state.folds.config_snapshot import ConfigSnapshot, config_connector_record
from connect_state.formats.config import (
    connector_config_key,
    delete_records,
    pause_records,
    resume_records,
    serialize_connector_config,
    serialize_target_state,
    serialize_task_count,
    stop_records,
    target_state_key,
    task_config_records,
    task_count_key,
)
from connect_state.formats.offsets import offset_key_bytes
from tests.unit.helpers import topic_status_value

CONFIG = serialize_connector_config({"connector.class": "FileStreamSource", "file": "/tmp/in"})


def snapshot_of(*records: tuple[str, bytes | None]) -> ConfigSnapshot:
    snapshot = ConfigSnapshot()
    for offset, (key, value) in enumerate(records):
        snapshot.apply(key.encode(), value, 0, offset, 1_000 + offset)
    return snapshot


def created(name: str, tasks: int = 1) -> list[tuple[str, bytes | None]]:
    return [(connector_config_key(name), CONFIG), *task_config_records(name, [{}] * tasks)]


def test_a_created_connector_exists_started_with_its_committed_tasks() -> None:
    view = snapshot_of(*created("c", tasks=2)).connector("c")
    assert (view.exists, view.target_state, view.task_count) == (True, TargetState.STARTED, 2)
    assert view.target_state_offset is None  # created without initial_state: no target-state record
    assert view.row["type"] == "source"
    assert view.row["connector_class"] == "FileStreamSource"


def test_stop_pause_resume_as_the_leader_sees_them() -> None:
    snapshot = snapshot_of(*created("c"), *stop_records("c"))
    assert (snapshot.connector("c").target_state, snapshot.connector("c").task_count) == (TargetState.STOPPED, 0)
    snapshot.apply(b"target-state-c", dict(resume_records("c"))["target-state-c"], 0, 10, 0)
    assert snapshot.connector("c").target_state == TargetState.STARTED
    snapshot.apply(b"target-state-c", dict(pause_records("c"))["target-state-c"], 0, 11, 0)
    view = snapshot.connector("c")
    assert (view.target_state, view.target_state_offset) == (TargetState.PAUSED, 11)


def test_a_deletion_through_connect_leaves_nothing() -> None:
    view = snapshot_of(*created("c"), *stop_records("c"), *delete_records("c")).connector("c")
    assert (view.exists, view.target_state, view.target_state_left, view.task_count) == (False, None, False, 0)


def test_a_half_written_deletion_leaves_the_target_state() -> None:
    """Only the ``connector-`` tombstone: Connect deletes the connector, its target state stays in memory."""
    half = [*created("c"), *stop_records("c"), (connector_config_key("c"), None)]
    view = snapshot_of(*half).connector("c")
    assert (view.exists, view.target_state, view.target_state_left) == (False, TargetState.STOPPED, True)


def test_a_target_state_written_after_the_deletion_is_left() -> None:
    """The issue's stop after a deletion: the STOPPED record outlives the connector."""
    records = [*created("c"), *delete_records("c"), *stop_records("c")]
    view = snapshot_of(*records).connector("c")
    assert (view.exists, view.target_state_left, view.target_state_offset) == (False, True, len(records) - 1)
    assert view.row["config_offset"] == 3  # the connector tombstone's offset (after config, task, commit)


def test_a_connector_created_again_after_a_complete_deletion_starts() -> None:
    records = [*created("c"), *stop_records("c"), *delete_records("c"), *created("c")]
    view = snapshot_of(*records).connector("c")
    assert (view.exists, view.target_state) == (True, TargetState.STARTED)


def test_unknown_names_and_other_records() -> None:
    snapshot = snapshot_of(
        ("session-key", b'{"key":"AAAA","algorithm":"HmacSHA256","creation-timestamp":1}'),
        ("logger-cluster-org.foo", b'{"level":"DEBUG"}'),
        ("target-state-x", b'{"state":"nonsense"}'),  # Connect ignores it
        ("nonsense", b"{}"),
    )
    view = snapshot.connector("x")
    assert (view.exists, view.target_state, view.task_count, view.target_state_offset) == (False, None, 0, None)
    assert snapshot.connectors() == []
    assert snapshot.positions == {0: 4}


def test_an_unreadable_commit_still_clears_a_config_less_connector() -> None:
    assert config_connector_record(b"commit-c", b"[]", 0, 5, 0) is not None
    assert config_connector_record(b"nonsense", b"{}", 0, 6, 0) is None
    assert config_connector_record(b"session-key", None, 0, 7, 0) is None


def test_replays_are_skipped_and_positions_advance() -> None:
    snapshot = snapshot_of(*created("c"))
    snapshot.apply(target_state_key("c").encode(), serialize_target_state("PAUSED"), 0, 1, 0)  # a replay of offset 1
    assert snapshot.connector("c").target_state == TargetState.STARTED
    assert snapshot.positions == {0: 3}
    assert snapshot.connectors() == ["c"]


# --- the folds over table rows (what the API folds past a table's watermark) -------------------------------------


def test_active_topics_state_from_rows_skips_what_the_table_holds() -> None:
    rows = [
        {"connector": "c", "topic": "a", "task": 0, "discover_timestamp": 1, "kafka_partition": 2, "kafka_offset": 9},
    ]
    state = topics_fold.state_from_rows(rows)
    key = b"status-topic-a:connector-c"
    replay = topics_fold.TopicRecord.from_kafka(key, None, 2, 8, 0)  # an older tombstone: already folded
    newer = topics_fold.TopicRecord.from_kafka(b"status-topic-b:connector-c", topic_status_value("b", "c"), 1, 3, 0)
    assert replay is not None and newer is not None
    folded, _ = topics_fold.fold_connector_topics(state, [replay, newer])
    assert sorted(topics_fold.active_topics(folded)) == ["a", "b"]
    assert topics_fold.TopicRecord.from_kafka(b"status-connector-c", b"{}", 0, 0, 0) is None


def test_source_offsets_state_from_rows_and_merged_rows() -> None:
    key_a = offset_key_bytes("c", {"filename": "/a"})
    key_b = offset_key_bytes("c", {"filename": "/b"})
    rows = [{"connector": "c", "offsets_topic": "o", "key": key_a, "value": b'{"position":1}', "listed": True}]
    state = offsets_fold.state_from_rows(rows)
    assert len(state.listed) == 1 and list(state.keys) == [key_a]
    records = [
        offsets_fold.OffsetRecord.from_kafka("o", key_b, b'{"position":2}', 0, 7, 10),
        offsets_fold.OffsetRecord.from_kafka("o", key_a, None, 0, 8, 11),
    ]
    _state, _history, changes = offsets_fold.fold_connector_offsets(state, records)
    merged = offsets_fold.apply_current_rows(rows, changes)
    assert [(row["key"], row["listed"]) for row in merged] == [(key_b, True)]


# --- KIP-618: task-count records and pending fencing (KafkaConfigBackingStore.processTaskCountRecord, ...) ----------


def fencing(name: str, tasks: int) -> tuple[str, bytes]:
    return (task_count_key(name), serialize_task_count(tasks))


def test_no_task_count_record_before_exactly_once() -> None:
    view = snapshot_of(*created("c", tasks=2)).connector("c")
    assert (view.task_count_record, view.pending_fencing) == (None, True)


def test_a_task_count_record_after_the_task_configs_clears_pending_fencing() -> None:
    view = snapshot_of(*created("c", tasks=3), fencing("c", 3)).connector("c")
    assert (view.task_count_record, view.pending_fencing) == (3, False)


def test_stopping_after_a_fencing_makes_fencing_pending_again() -> None:
    """``stop`` writes empty task configs and a commit: the 3 task producers fenced last time are due again."""
    view = snapshot_of(*created("c", tasks=3), fencing("c", 3), *stop_records("c")).connector("c")
    assert (view.task_count, view.task_count_record, view.pending_fencing) == (0, 3, True)


def test_the_task_count_record_outlives_a_deletion() -> None:
    """``processConnectorRemoval`` leaves ``connectorTaskCountRecords`` alone; a commit without a config (compacted
    history) adds no pending fencing."""
    records = [*created("c", tasks=2), fencing("c", 2), *delete_records("c"), *task_config_records("c", [{}])]
    view = snapshot_of(*records).connector("c")
    assert (view.exists, view.task_count_record, view.pending_fencing) == (False, 2, False)


def test_a_task_count_record_in_the_wrong_format_is_ignored() -> None:
    records = [*created("c", tasks=2), fencing("c", 2), *stop_records("c"), (task_count_key("c"), b'"two"')]
    view = snapshot_of(*records).connector("c")
    assert (view.task_count_record, view.pending_fencing) == (2, True)
