"""Kafka positions of a streaming query (connect_state/progress/positions.py): an offsets-log entry's positions, the
watermark rows, and the data losses told from two offsets-log entries and the partitions' log starts."""

from __future__ import annotations

from connect_state.progress.positions import (
    DataLoss,
    LossCause,
    detect_losses,
    parse_offset_log,
    partitions_to_check,
    starts_past,
    topics_of,
    watermark_rows,
)

METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":1700000000000,"conf":{}}'


def entry(*sources: str) -> str:
    return "\n".join(["v1", METADATA, *sources])


def test_an_offsets_log_entry_gives_every_partitions_next_offset() -> None:
    text = entry('{"connect-offsets":{"0":5,"1":2},"own-offsets":{"0":1}}')
    assert parse_offset_log(text) == {("connect-offsets", 0): 5, ("connect-offsets", 1): 2, ("own-offsets", 0): 1}


def test_lines_of_other_sources_and_broken_lines_are_left_out() -> None:
    text = entry('{"logOffset":3}', "not json", '{"t":{"0":"x","1":4}}', "[1,2]")
    assert parse_offset_log(text) == {("t", 1): 4}
    assert parse_offset_log("") is None
    assert parse_offset_log("{}") is None  # not an offsets-log entry
    assert topics_of(parse_offset_log(entry('{"a":{"0":1}}', '{"b":{"0":1}}')) or {}) == {"a", "b"}


def test_watermark_rows_are_the_planned_end_of_the_batch() -> None:
    rows = watermark_rows("sink_offsets", {("b", 1): 4, ("a", 0): 9}, 12)
    assert rows == [("sink_offsets", "a", 0, 9, 12), ("sink_offsets", "b", 1, 4, 12)]


# --- data loss ------------------------------------------------------------------------------------------------------

START = {("t", 0): 10, ("t", 1): 20, ("gone", 0): 5}


def test_nothing_is_lost_when_the_log_starts_at_or_before_the_position() -> None:
    planned = {("t", 0): 15, ("t", 1): 20, ("gone", 0): 5}
    assert partitions_to_check(START, planned) == [("t", 0)]
    assert detect_losses(START, planned, {("t", 0): 10}) == []
    assert detect_losses(START, planned, {("t", 0): 0}) == []


def test_records_deleted_past_the_position_are_a_loss() -> None:
    planned = {("t", 0): 15, ("t", 1): 30, ("gone", 0): 5}
    losses = detect_losses(START, planned, {("t", 0): 12, ("t", 1): 20})
    assert losses == [DataLoss("t", 0, 10, 12, LossCause.RECORDS_DELETED)]
    assert "records 10..12 of t-0 were deleted" in losses[0].describe("q")


def test_a_partition_that_left_the_offsets_is_gone() -> None:
    planned = {("t", 0): 10, ("t", 1): 20}
    assert detect_losses(START, planned, {}) == [DataLoss("gone", 0, 5, None, LossCause.PARTITION_GONE)]


def test_a_partition_to_read_that_kafka_no_longer_knows_is_gone() -> None:
    planned = {("t", 0): 15, ("t", 1): 20, ("gone", 0): 5}
    assert detect_losses(START, planned, {}) == [DataLoss("t", 0, 10, None, LossCause.PARTITION_GONE)]


def test_offsets_that_went_back_mean_a_recreated_topic() -> None:
    planned = {("t", 0): 3, ("t", 1): 20, ("gone", 0): 5}
    assert partitions_to_check(START, planned) == [("t", 0)]
    losses = detect_losses(START, planned, {("t", 0): 0})
    assert losses == [DataLoss("t", 0, 10, 0, LossCause.OFFSETS_WENT_BACK)]
    assert "went back from 10" in losses[0].describe("q")


def test_a_partition_new_to_the_query_is_read_from_its_start() -> None:
    planned = {**START, ("new", 0): 100}
    assert partitions_to_check(START, planned) == []
    assert detect_losses(START, planned, {}) == []


def test_loss_causes_are_the_table_values() -> None:
    assert [str(c) for c in LossCause] == ["records_deleted", "partition_gone", "offsets_went_back"]


def test_a_batch_starts_past_a_frontier_when_every_partition_it_reads_starts_at_or_after_its_end() -> None:
    frontier = {("t", 0): 10, ("t", 1): 4}
    planned = {("t", 0): 20, ("t", 1): 20}
    assert starts_past({("t", 0): 10, ("t", 1): 7}, planned, frontier)
    assert starts_past({("t", 0): 12, ("t", 1): 4}, {**planned, ("u", 0): 3}, frontier)  # ("u", 0) is new
    assert not starts_past({("t", 0): 9, ("t", 1): 7}, planned, frontier)
    assert not starts_past({("t", 0): 10}, planned, frontier)  # ("t", 1) read from its beginning
    assert starts_past({("t", 0): 10}, {("t", 0): 12}, frontier)  # ("t", 1) no longer read: its topic deleted
    assert starts_past({("t", 0): 0}, {("t", 0): 3}, {})
