"""The bulk ``__consumer_offsets`` parse (formats/consumer_offsets_arrow.py) against the exact parser
(formats/consumer_offsets.py) as the oracle, and the sink pipeline's bulk path against its exact parse step."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connect_state.core.errors import RecordFormatError
from connect_state.formats.consumer_offsets import (
    GROUP_METADATA,
    LEGACY_OFFSET_COMMIT,
    OFFSET_COMMIT,
    OffsetCommitKey,
    OffsetCommitValue,
    parse_consumer_offsets_record,
    serialize_offset_commit_key,
    serialize_offset_commit_value,
)
from connect_state.formats.consumer_offsets_arrow import match_offset_commits
from connect_state.spark import sink_offsets
from connect_state.spark.foldjob import _classified_batch

ASCII = st.text(st.characters(min_codepoint=0, max_codepoint=0x7F), max_size=12)
NAMES = st.one_of(ASCII, st.text(max_size=8))
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def commit_value(draw: st.DrawFn) -> bytes:
    commit = OffsetCommitValue(
        offset=draw(INT64),
        metadata=draw(NAMES),
        commit_timestamp=draw(INT64),
        leader_epoch=draw(INT32),
        expire_timestamp=draw(INT64),
        topic_id=draw(st.one_of(st.none(), st.just("AAAAAAAAAAAAAAAAAAAAAQ"))),
    )
    return serialize_offset_commit_value(commit, draw(st.sampled_from([3, 3, 3, 0, 1, 2, 4])))


@st.composite
def record(draw: st.DrawFn) -> tuple[bytes | None, bytes | None]:
    """An offset commit as the coordinator writes it (mostly), or a variation: other record types and versions,
    non-ASCII names, trailing or missing bytes, random bytes, null keys."""
    record_type = draw(st.sampled_from([OFFSET_COMMIT, OFFSET_COMMIT, OFFSET_COMMIT, LEGACY_OFFSET_COMMIT]))
    key: bytes | None = serialize_offset_commit_key(draw(NAMES), draw(NAMES), draw(INT32), record_type)
    value: bytes | None = None if draw(st.integers(0, 4)) == 0 else draw(commit_value())
    match draw(st.integers(0, 9)):
        case 0:
            key = key + draw(st.binary(min_size=1, max_size=3))  # trailing bytes (Kafka ignores them)
        case 1:
            key = key[: draw(st.integers(0, len(key)))]
        case 2:
            value = None if value is None else value[: draw(st.integers(0, len(value)))]
        case 3:
            value = None if value is None else value + draw(st.binary(min_size=1, max_size=3))
        case 4:
            key = struct.pack(">h", draw(st.sampled_from([GROUP_METADATA, 3, 9, 99, -1]))) + draw(st.binary(max_size=8))
        case 5:
            key, value = draw(st.one_of(st.none(), st.binary(max_size=12))), draw(st.binary(max_size=30))
        case 6:  # a negative string length
            key = struct.pack(">hh", OFFSET_COMMIT, -1) + draw(st.binary(max_size=12))
    return key, value


def exact(key: bytes | None, value: bytes | None) -> tuple | None:
    """The exact parser's reading of an offset commit, None for anything else."""
    try:
        parsed = parse_consumer_offsets_record(key, value)
    except RecordFormatError:
        return None
    if not isinstance(parsed.key, OffsetCommitKey):
        return None
    k, v = parsed.key, parsed.value
    if v is None:
        return k.group, k.topic, k.partition, True, None, None, None, None
    return k.group, k.topic, k.partition, False, v.offset, v.leader_epoch, v.metadata, v.commit_timestamp


def check(records: list[tuple[bytes | None, bytes | None]], offset: int = 0) -> list[bool]:
    keys = pa.array([b"pad"] * offset + [k for k, _ in records], pa.binary()).slice(offset)
    values = pa.array([b"pad"] * offset + [v for _, v in records], pa.binary()).slice(offset)
    found = match_offset_commits(keys, values)
    matched = found.matched.to_pylist()
    assert len(matched) == len(records)
    bulk = list(
        zip(
            found.group.to_pylist(),
            found.topic.to_pylist(),
            found.partition.to_pylist(),
            found.tombstone.tolist(),
            found.offset.to_pylist(),
            found.leader_epoch.to_pylist(),
            found.metadata.to_pylist(),
            found.commit_timestamp.to_pylist(),
            strict=True,
        )
    )
    taken = [r for r, hit in zip(records, matched, strict=True) if hit]
    assert bulk == [exact(k, v) for k, v in taken]
    return matched


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record(), max_size=20), st.integers(0, 3))
def test_every_record_taken_in_bulk_reads_as_the_exact_parser_reads_it(records, offset):
    check(records, offset)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(ASCII, ASCII, INT32, st.one_of(st.none(), st.tuples(INT64, INT32, ASCII, INT64))), max_size=10)
)
def test_what_the_coordinator_writes_with_ascii_names_is_taken(commits):
    records = [
        (
            serialize_offset_commit_key(group, topic, partition),
            None
            if value is None
            else serialize_offset_commit_value(OffsetCommitValue(value[0], value[2], value[3], value[1])),
        )
        for group, topic, partition, value in commits
    ]
    assert check(records) == [True] * len(records)


@pytest.mark.parametrize(
    "key, value",
    [
        (serialize_offset_commit_key("g", "t", 0, LEGACY_OFFSET_COMMIT), None),
        (serialize_offset_commit_key("g", "t", 0) + b"\x00", None),
        (serialize_offset_commit_key("gé", "t", 0), None),
        (serialize_offset_commit_key("g", "t", 0), serialize_offset_commit_value(OffsetCommitValue(1, "", 2), 4)),
        (serialize_offset_commit_key("g", "t", 0), serialize_offset_commit_value(OffsetCommitValue(1, "é", 2))),
        (struct.pack(">h", GROUP_METADATA) + b"\x00\x01g", b"anything"),
        (None, None),
    ],
)
def test_records_of_other_shapes_are_left_to_the_exact_parser(key, value):
    assert check([(key, value)]) == [False]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record(), max_size=20))
def test_the_sink_pipelines_bulk_path_gives_the_exact_steps_rows(records):
    """``sink_offsets.fast_parse`` rows equal the exact parse step's rows of the records it takes (every column, the
    Kafka coordinates included)."""
    n = len(records)
    kafka = pa.RecordBatch.from_arrays(
        [
            pa.array([k for k, _ in records], pa.binary()),
            pa.array([v for _, v in records], pa.binary()),
            pa.array(["__consumer_offsets"] * n),
            pa.array([i % 3 for i in range(n)], pa.int32()),
            pa.array(range(n), pa.int64()),
            pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64()),
        ],
        names=["key", "value", "topic", "partition", "offset", "timestamp"],
    )
    fast, matched = sink_offsets.fast_parse(kafka)
    taken = kafka.filter(matched)
    expected = _classified_batch(taken, sink_offsets.classify, sink_offsets.PARSED_SCHEMA)
    assert fast.num_rows == taken.num_rows
    if expected is None:
        assert fast.num_rows == 0
    else:
        assert fast.equals(expected)


def test_an_empty_batch_as_java_writes_it_matches_nothing() -> None:
    """Java's Arrow writes an empty binary vector with an offsets buffer of no bytes."""
    empty = pa.Array.from_buffers(pa.binary(), 0, [None, pa.py_buffer(b""), pa.py_buffer(b"")])
    found = match_offset_commits(empty, empty)
    assert len(found.matched) == 0
