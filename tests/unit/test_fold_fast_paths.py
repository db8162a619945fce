"""The folds' fast paths against the exact code they stand for (Hypothesis: the exact code is the oracle).

* ``read_offset``'s bulk path for compact one-entry offset maps against ``parse_offset_value`` + ``connect_json``;
* ``parsed_key`` (cached per key) against ``parse_offset_key`` and the texts derived from its map;
* ``column_frame`` (output frames built from columns) against ``pandas_frame`` (from rows), as Arrow sees them;
* the pipelines' ``fold_group`` bodies (active topics, source offsets, sink offsets, connector states) against the
  pure folds they call.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from connect_state.core.errors import RecordFormatError
from connect_state.folds import active_topics as topics_fold
from connect_state.folds import connector_states as states_fold
from connect_state.folds import sink_offsets as sink_fold
from connect_state.folds import source_offsets as offsets_fold
from connect_state.formats.config import (
    serialize_connector_config,
    serialize_target_state,
    serialize_task_commit,
    serialize_task_config,
)
from connect_state.formats.consumer_offsets import (
    OffsetCommitValue,
    serialize_offset_commit_key,
    serialize_offset_commit_value,
)
from connect_state.formats.offsets import (
    offset_key_bytes,
    offset_key_connector,
    parse_offset_key,
    serialize_offset_value,
)
from connect_state.formats.status import Status, serialize_status
from connect_state.heartbeats import fold as hb_fold
from connect_state.spark import active_topics as topics_job
from connect_state.spark import connector_states as states_job
from connect_state.spark import heartbeats as hb_job
from connect_state.spark import sink_offsets as sink_job
from connect_state.spark import source_offsets as offsets_job
from connect_state.spark.foldjob import column_frame, nullable_values, pandas_frame, rows_frame

NAMES = st.one_of(
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=0, max_size=8),
    st.text(max_size=4),
    st.sampled_from(["position", "kafka_offset", "offset", "a.b-c_d"]),
)
LONGS = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(10**19), 10**19),
    st.sampled_from([0, -1, 10**18 - 1, 10**18, -(10**18), 2**31, 2**63 - 1, -(2**63)]),
)


@st.composite
def offset_values(draw: st.DrawFn) -> bytes:
    name = draw(st.one_of(st.sampled_from(["position", "kafka_offset", "a.b-c_d", "x"]), NAMES))
    number = draw(
        st.one_of(LONGS, st.sampled_from([0, 1, 10**19 - 1, 2**64]), st.floats(allow_nan=False), st.booleans())
    )
    separators = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    text = json.dumps({name: number}, separators=separators, ensure_ascii=draw(st.booleans()))
    variants = [text, text.replace(":", ":-", 1), text.replace(":", ":0", 1), text + " ", "{" + text, text[:-1]]
    return draw(st.sampled_from(variants)).encode("utf-8", "surrogatepass")


@settings(max_examples=500, deadline=None)
@given(st.one_of(offset_values(), offset_values(), st.binary(max_size=24), st.none()))
@example(b'{"position":-0}')
@example(b'{"position":01}')
@example(b'{"position":9999999999999999999}')
def test_read_offset_equals_the_exact_reading(value: bytes | None) -> None:
    assert offsets_fold.read_offset(value) == offsets_fold.read_offset_exact(value)


def test_the_bulk_path_takes_plain_offsets() -> None:
    for value in (b'{"position":1234}', b'{"kafka_offset":0}', b'{"x":-999999999999999999}'):
        assert offsets_fold._SIMPLE_OFFSET.fullmatch(value)
        assert offsets_fold.read_offset(value) == offsets_fold.read_offset_exact(value) == (value.decode(), None)
    for value in (b'{"position":-0}', b'{"position":1000000000000000000}', b'{"position":1.0}', b'{"a b":1}'):
        assert not offsets_fold._SIMPLE_OFFSET.fullmatch(value)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.builds(
            lambda c, p: json.dumps([c, p], separators=(",", ":")).encode(),
            st.text(max_size=5),
            st.one_of(st.none(), st.dictionaries(NAMES, st.one_of(LONGS, st.text(max_size=3)), max_size=3)),
        ),
        st.binary(max_size=16),
    )
)
def test_parsed_key_equals_the_exact_parse(key: bytes) -> None:
    try:
        exact = parse_offset_key(key)
    except RecordFormatError as err:
        with pytest.raises(RecordFormatError) as raised:
            offsets_fold.parsed_key(key)
        assert raised.value.reason == err.reason
        return
    for _ in range(2):  # computed, then cached
        parsed = offsets_fold.parsed_key(key)
        assert (parsed.connector, parsed.partition) == (exact.connector, exact.partition)
        if exact.partition is None:
            assert parsed.identity is None and parsed.partition_json is None
        else:
            assert parsed.identity == offsets_fold.partition_identity(exact.partition)
            assert parsed.partition_json == offsets_fold.connect_json(exact.partition)
    record = offsets_fold.OffsetRecord.from_kafka("t", key, b"{}", 0, 1, 2)
    assert record.identity == parsed.identity and record.partition_json == parsed.partition_json


SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("n", pa.int32()),
        ("big", pa.int64()),
        ("data", pa.binary()),
        ("flag", pa.bool_()),
        ("missing", pa.string()),
        ("missing_n", pa.int64()),
    ]
)
ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "kind": st.one_of(st.none(), st.text(max_size=3)),
            "n": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
            "big": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
            "data": st.one_of(st.none(), st.binary(max_size=3)),
            "flag": st.one_of(st.none(), st.booleans()),
        }
    ),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(ROWS)
def test_column_frame_is_the_frame_pandas_frame_builds_from_rows(rows: list[dict]) -> None:
    schema = SCHEMA
    columns = {name: [row[name] for row in rows] for name in ("kind", "n", "big", "data", "flag")}
    by_columns = pa.Table.from_pandas(column_frame(columns, len(rows), SCHEMA), schema=schema, preserve_index=False)
    by_rows = pa.Table.from_pandas(pandas_frame(rows, SCHEMA), schema=schema, preserve_index=False)
    assert by_columns.equals(by_rows)
    assert by_columns.to_pylist() == [{**row, "missing": None, "missing_n": None} for row in rows]


@settings(max_examples=200, deadline=None)
@given(ROWS, st.lists(st.integers(0, 5), max_size=8), st.booleans())
def test_rows_frame_takes_the_rows_column_frame_builds(rows: list[dict], picks: list[int], arrow: bool) -> None:
    schema = SCHEMA
    rows = [{**row, "big": None if row["big"] is None else row["big"] % 2**53} for row in rows]  # exact as a float
    positions = np.array([p for p in picks if p < len(rows)], dtype=np.int64)
    source = pandas_frame(rows, SCHEMA)
    if arrow:  # as Arrow's pandas conversion hands a group to the fold: nullable integers as floats with NaN
        source = pa.Table.from_pylist(rows, schema=schema).to_pandas()
    flags = [bool(p % 2) for p in positions]
    taken = rows_frame(source, positions, SCHEMA, {"flag": flags})
    expected = [{**rows[p], "flag": flag} for p, flag in zip(positions, flags, strict=True)]
    columns = {name: [row.get(name) for row in expected] for name in ("kind", "n", "big", "data", "flag")}
    built = column_frame(columns, len(expected), SCHEMA)
    got = pa.Table.from_pandas(taken, schema=schema, preserve_index=False)
    assert got.equals(pa.Table.from_pandas(built, schema=schema, preserve_index=False))
    assert got.to_pylist() == [{**row, "missing": None, "missing_n": None} for row in expected]


def test_nullable_values() -> None:
    assert nullable_values(pd.Series([1.0, float("nan"), 3.0])) == [1.0, None, 3.0]
    assert nullable_values(pd.Series([1, None], dtype="Int64")) == [1, None]
    assert nullable_values(pd.Series([b"a", None], dtype=object)) == [b"a", None]
    assert nullable_values(pd.Series([1, 2])) == [1, 2]


class FakeState:
    def __init__(self) -> None:
        self.value: tuple | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple:
        assert self.value is not None
        return self.value

    def update(self, value: tuple) -> None:
        self.value = value


TOPIC_RECORDS = st.lists(
    st.tuples(st.sampled_from(["t1", "t2", "t3"]), st.one_of(st.none(), st.integers(0, 2)), st.integers(0, 1)),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(TOPIC_RECORDS, st.integers(0, 25))
def test_active_topics_fold_group_is_the_pure_fold(records: list[tuple], split: int) -> None:
    rows = [
        {
            "record_kind": "topic",
            "connector": "c",
            "topic": topic,
            "task": task,
            "discover_timestamp": None if task is None else 1000 + i,
            "kafka_topic": "status",
            "kafka_partition": partition,
            "kafka_offset": i,
            "kafka_timestamp": 5000 + i,
        }
        for i, (topic, task, partition) in enumerate(records)
    ]
    state, pure_state, expected = FakeState(), {}, []
    for part in (rows[:split], rows[split // 2 :]):  # the second batch replays part of the first
        frame = pandas_frame(part, topics_job.PARSED_SCHEMA)
        out = pd.concat(list(topics_job.fold_group(("topic", "c"), iter([frame]), state)), ignore_index=True)
        pure_records = [topics_fold.TopicRecord(**{k: r[k] for k in _TOPIC_FIELDS}) for r in part]
        pure_state, changes = topics_fold.fold_connector_topics(pure_state, pure_records)
        got = pa.Table.from_pandas(out, schema=topics_job.OUTPUT_SCHEMA, preserve_index=False)
        expected = [
            {
                "record_kind": "change",
                "connector": c.connector,
                "topic": c.topic,
                "change": c.change,
                "latest": all(later.topic != c.topic for later in changes[i + 1 :]),
                "task": c.task,
                "discover_timestamp": c.discover_timestamp,
                "kafka_topic": None,
                "kafka_partition": c.kafka_partition,
                "kafka_offset": c.kafka_offset,
                "kafka_timestamp": c.kafka_timestamp,
                "raw_key": None,
                "raw_value": None,
                "reason": None,
            }
            for i, c in enumerate(changes)
        ]
        assert got.to_pylist() == expected
        assert topics_fold.state_from_json(state.get[0]) == pure_state


SINK_RECORDS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.integers(0, 1),
        st.one_of(st.none(), st.tuples(st.integers(0, 2**63 - 1), st.sampled_from(["", "m"]), st.integers(-1, 3))),
        st.integers(0, 1),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(SINK_RECORDS, st.integers(0, 25), st.randoms(use_true_random=False))
def test_sink_offsets_fold_group_is_the_pure_fold(records: list[tuple], split: int, rng) -> None:
    pure_all, rows = [], []
    for i, (topic, partition, commit, kafka_partition) in enumerate(records):
        value = None if commit is None else OffsetCommitValue(commit[0], commit[1], 7000 + i, leader_epoch=commit[2])
        kafka = {"kafka_topic": "__co", "kafka_partition": kafka_partition, "kafka_offset": i, "kafka_timestamp": 9 + i}
        key = serialize_offset_commit_key("g", topic, partition)
        rows += sink_job.classify(key, None if value is None else serialize_offset_commit_value(value), kafka)
        pure_all.append(sink_fold.OffsetCommitRecord("g", topic, partition, value, kafka_partition, i, 9 + i))
    state, pure_state = FakeState(), {}
    for part, pure in ((rows[:split], pure_all[:split]), (rows[split // 2 :], pure_all[split // 2 :])):
        shuffled = rng.sample(part, len(part))  # a group's rows come in any order
        frame = pandas_frame(shuffled, sink_job.PARSED_SCHEMA)
        out = pd.concat(list(sink_job.fold_group(("group", "g"), iter([frame]), state)), ignore_index=True)
        pure_state, history, current = sink_fold.fold_group_offsets(pure_state, pure)
        got = pa.Table.from_pandas(out, schema=sink_job.OUTPUT_SCHEMA, preserve_index=False)
        expected = [_sink_row("history", c) for c in history] + [_sink_row("current", c) for c in current]
        assert got.to_pylist() == expected
        assert sink_fold.state_from_json(state.get[0]) == pure_state


def _sink_row(kind: str, change: sink_fold.SinkOffsetChange) -> dict:
    commit = change.commit
    return {
        "record_kind": kind,
        "group_id": change.group_id,
        "topic": change.topic,
        "partition": change.partition,
        "offset": commit.offset if commit else None,
        "leader_epoch": commit.leader_epoch if commit else None,
        "metadata": commit.metadata if commit else None,
        "commit_timestamp": commit.commit_timestamp if commit else None,
        "change": change.change,
        "kafka_topic": "__co",
        "kafka_partition": change.kafka_partition,
        "kafka_offset": change.kafka_offset,
        "kafka_timestamp": change.kafka_timestamp,
        "raw_key": None,
        "raw_value": None,
        "reason": None,
    }


_TOPIC_FIELDS = (
    "connector",
    "topic",
    "task",
    "discover_timestamp",
    "kafka_partition",
    "kafka_offset",
    "kafka_timestamp",
)

OFFSET_KEYS = [
    b'["c",{"filename":"a"}]',
    b'["c",{"filename":"b"}]',
    b'["c",null]',
    b'["c",{"kafka_topic":"t","kafka_partition":0}]',
    b'["c",{"kafka_partition":0,"kafka_topic":"t"}]',
]
OFFSET_RECORDS = st.lists(
    st.tuples(
        st.sampled_from(OFFSET_KEYS),
        st.sampled_from([None, b'{"position":1}', b'{"position":22}', b'{"a":1,"b":[1]}', b"null", b"x"]),
        st.integers(0, 1),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(OFFSET_RECORDS, st.integers(0, 25))
def test_source_offsets_fold_group_is_the_pure_fold(records: list[tuple], split: int) -> None:
    rows = [
        {
            "record_kind": "record",
            "offsets_topic": "offs",
            "connector": "c",
            "raw_key": key,
            "raw_value": value,
            "kafka_topic": "offs",
            "kafka_partition": partition,
            "kafka_offset": i,
            "kafka_timestamp": 100 + i,
        }
        for i, (key, value, partition) in enumerate(records)
    ]
    state, pure_state = FakeState(), offsets_fold.OffsetsState()
    for part in (rows[:split], rows[split // 2 :]):
        frame = pandas_frame(part, offsets_job.PARSED_SCHEMA)
        out = pd.concat(list(offsets_job.fold_group(("connector", "offs", "c"), iter([frame]), state)))
        pure = [
            offsets_fold.OffsetRecord.from_kafka(
                "offs", r["raw_key"], r["raw_value"], r["kafka_partition"], r["kafka_offset"], r["kafka_timestamp"]
            )
            for r in part
        ]
        pure_state, changes, current = offsets_fold.fold_connector_offsets(pure_state, pure)
        got = pa.Table.from_pandas(out, schema=offsets_job.OUTPUT_SCHEMA, preserve_index=False)
        history = [
            {
                "record_kind": "history",
                "offsets_topic": c.offsets_topic,
                "connector": c.connector,
                "partition": c.partition,
                "offset": c.offset,
                "listed": None,
                "change": c.change,
                "kafka_topic": "offs",
                "kafka_partition": c.kafka_partition,
                "kafka_offset": c.kafka_offset,
                "kafka_timestamp": c.kafka_timestamp,
                "raw_key": c.key,
                "raw_value": None,
                "reason": None,
            }
            for c in changes
        ]
        rows_out = [
            {
                "record_kind": "current",
                "offsets_topic": r.offsets_topic,
                "connector": r.connector,
                "partition": r.partition,
                "offset": r.offset,
                "listed": r.listed,
                "change": r.op,
                "kafka_topic": "offs",
                "kafka_partition": r.kafka_partition,
                "kafka_offset": r.kafka_offset,
                "kafka_timestamp": r.kafka_timestamp,
                "raw_key": r.key,
                "raw_value": r.value,
                "reason": None,
            }
            for r in current
        ]
        assert got.to_pylist() == history + rows_out
        assert offsets_fold.state_from_json(state.get[0]) == pure_state


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=4),
        st.builds(
            topics_fold.TopicEntry,
            st.one_of(st.none(), st.integers(-5, 5)),
            st.one_of(st.none(), st.integers()),
            st.integers(-1, 3),
            st.integers(-1, 10**12),
            st.booleans(),
        ),
        max_size=5,
    )
)
def test_active_topics_state_json_is_the_dataclass_json(state: dict) -> None:
    """The state row's text is unchanged (running queries' state stays readable): as ``asdict`` wrote it."""
    old = json.dumps({t: dataclasses.asdict(e) for t, e in sorted(state.items())}, separators=(",", ":"))
    assert topics_fold.state_to_json(state) == old
    assert topics_fold.state_from_json(old) == state


_C = "c"
STATES_RECORDS = st.lists(
    st.one_of(
        st.tuples(
            st.just("cfg"),
            st.sampled_from([b"connector-c", b"target-state-c", b"task-c-0", b"task-c-1", b"commit-c"]),
            st.sampled_from(
                [
                    None,
                    serialize_connector_config({"connector.class": "FileStreamSource", "tasks.max": "2"}),
                    serialize_task_config({"task.class": "T"}),
                    serialize_task_commit(1),
                    serialize_task_commit(2),
                    serialize_target_state("PAUSED"),
                    serialize_target_state("STOPPED"),
                    b"[]",
                ]
            ),
            st.just(0),
        ),
        st.tuples(
            st.just("st"),
            st.sampled_from([b"status-connector-c", b"status-task-c-0", b"status-task-c-1"]),
            st.sampled_from(
                [
                    None,
                    serialize_status(Status("RUNNING", None, "w:1", 1)),
                    serialize_status(Status("UNASSIGNED", None, "w:2", 2)),
                    serialize_status(Status("FAILED", "boom\n\tat X", "w:1", 3, "4.3.1")),
                ]
            ),
            st.integers(0, 1),
        ),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(STATES_RECORDS, st.integers(0, 25))
def test_connector_states_fold_group_is_the_pure_fold(records: list[tuple], split: int) -> None:
    rows = [
        row
        for i, (topic, key, value, partition) in enumerate(records)
        for row in states_job.classify(
            key,
            value,
            {"kafka_topic": topic, "kafka_partition": partition, "kafka_offset": i, "kafka_timestamp": 100 + i // 3},
            "cfg",
        )
        if row["record_kind"] != "rejected"
    ]
    state, pure_state = FakeState(), states_fold.ConnectorState(_C)
    for part in (rows[:split], rows[split // 2 :]):  # the second batch replays part of the first
        frame = pandas_frame(part, states_job.PARSED_SCHEMA)
        out = pd.concat(list(states_job.fold_function()(("connector", _C), iter([frame]), state)), ignore_index=True)
        pure_records = [
            states_job.record_of(
                _C,
                r["record_kind"],
                r.get("raw_key"),
                r.get("raw_value"),
                r["kafka_partition"],
                r["kafka_offset"],
                r["kafka_timestamp"],
            )
            for r in part
        ]
        pure_state, events = states_fold.fold_connector(pure_state, pure_records)
        row = states_fold.connector_row(pure_state)
        tasks = row.pop("tasks")
        expected_rows = [
            {
                "record_kind": "event",
                "connector": e.connector,
                "event": e.event,
                "details": e.recorded_json(),
                "source": e.source,
                "kafka_partition": e.kafka_partition,
                "kafka_offset": e.kafka_offset,
                "kafka_timestamp": e.kafka_timestamp,
            }
            for e in events
        ] + [{"record_kind": "row", "connector": row.pop("name"), **row, "tasks_json": json.dumps(tasks)}]
        schema = states_job.OUTPUT_SCHEMA
        got = pa.Table.from_pandas(out, schema=schema, preserve_index=False)
        expected = pa.Table.from_pandas(
            pandas_frame(expected_rows, states_job.OUTPUT_SCHEMA), schema=schema, preserve_index=False
        )
        assert got.to_pylist() == expected.to_pylist()
        assert states_fold.state_from_json(state.get[0]) == pure_state


@pytest.mark.parametrize(
    ("class_types", "kind"),
    [
        (None, "sink"),  # a "topics" key: guessed to be a sink
        ({"com.example.QueueSource": "source"}, "source"),  # connector.class.types knows better
    ],
)
def test_connector_states_fold_types_connectors_by_the_configured_classes(class_types, kind) -> None:
    config = {"connector.class": "com.example.QueueSource", "topics": "in", "tasks.max": "1"}
    records = [(b"connector-c", serialize_connector_config(config)), (b"connector-c", None)]  # created, then deleted
    rows = [
        row
        for i, (key, value) in enumerate(records)
        for row in states_job.classify(
            key, value, {"kafka_topic": "cfg", "kafka_partition": 0, "kafka_offset": i, "kafka_timestamp": i}, "cfg"
        )
    ]
    fold = states_job.fold_function(class_types)
    state = FakeState()
    created = pd.concat(list(fold(("connector", _C), iter([pandas_frame(rows[:1], states_job.PARSED_SCHEMA)]), state)))
    assert created[created["record_kind"] == "row"]["type"].tolist() == [kind]
    deleted = pd.concat(list(fold(("connector", _C), iter([pandas_frame(rows[1:], states_job.PARSED_SCHEMA)]), state)))
    (details,) = deleted[deleted["event"] == "deleted"]["details"].tolist()
    assert json.loads(details)["connector_type"] == kind


# --- heartbeats -------------------------------------------------------------------------------------------------------

OFFSET_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),  # what parse_offset_value gives (Jackson's longs)
    st.floats(allow_nan=True),
    st.sampled_from([0.0, -0.0, 1.0, 1, True, 2**63 - 1, -(2**63), 1e300, 2.0**63]),
    st.text(max_size=3),
)
OFFSET_MAPS = st.dictionaries(st.sampled_from(["position", "a", "b", "kafka_offset"]), OFFSET_VALUES, max_size=3)


@settings(max_examples=1000, deadline=None)
@given(OFFSET_MAPS, OFFSET_MAPS)
@example({"a": 1}, {"a": 1.0})
@example({"a": 1}, {"a": True})
@example({"a": 0.0}, {"a": -0.0})
@example({"a": 2**63 - 1}, {"a": 2.0**63})
@example({"a": 1, "b": 2}, {"b": 2, "a": 1})
@example({"a": True, "b": True, "kafka_offset": True}, {"kafka_offset": True, "a": True, "b": True})  # a collision
def test_same_offset_is_equal_bytes(a: dict, b: dict) -> None:
    assert hb_fold._same_offset(a, b) == (serialize_offset_value(a) == serialize_offset_value(b))
    assert hb_fold._same_offset(a, dict(a))


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.sampled_from(OFFSET_KEYS),
        st.builds(
            lambda name, rest: json.dumps([name, {"f": 1}], separators=rest).encode("utf-8", "surrogatepass"),
            st.text(max_size=4),
            st.sampled_from([(",", ":"), (", ", ": ")]),
        ),
        st.binary(max_size=12).map(lambda tail: b'["c' + tail),
    )
)
@example(b'["a\\"b",{}]')
@example(b'["c",null]')
@example(b'["c",5]')
@example(b'["\xff",{}]')
def test_offset_key_connector_is_the_parsed_connector(key: bytes) -> None:
    try:
        parsed = parse_offset_key(key)
    except RecordFormatError:
        return  # a key the fold drops: any routing will do
    assert offset_key_connector(key) == (None if parsed.partition is None else parsed.connector)


def test_heartbeats_fold_group_is_the_pure_fold() -> None:
    defaults = hb_fold.HeartbeatDefaults(60_000, "hb", "offs", provider_classes=frozenset({"FileStreamSource"}))
    name = "c"
    config = {"connector.class": "FileStreamSource", "file": "/in", "topic": "t", "tasks.max": "1"}
    records = [("cfg", b"connector-c", serialize_connector_config(config))]
    records += [("st", b"status-connector-c", serialize_status(Status("RUNNING", None, "w:1", 1)))]
    for i in range(12):
        partition = {"filename": f"/in-{i % 4}"}
        value = None if i == 9 else serialize_offset_value({"position": i // 2})  # some do not move, one tombstone
        records.append(("offs", offset_key_bytes(name, partition), value))
    records.append(("offs", b'["c",{"filename":[1]}]', b'{"position":1}'))  # a partition Connect takes as it is
    records.append(("offs", b'["c",5]', b'{"position":1}'))  # a key Connect ignores
    rows = [
        row
        for i, (topic, key, value) in enumerate(records)
        for row in hb_job.classify(
            key, value, {"kafka_topic": topic, "kafka_partition": 0, "kafka_offset": i, "kafka_timestamp": 1000 + i},
            "cfg", "offs",
        )
    ]  # fmt: skip
    state = FakeState()
    state.getCurrentProcessingTimeMs = lambda: 5000  # type: ignore[attr-defined]
    out = pd.concat(
        list(hb_job.fold_function(defaults)((name,), iter([pandas_frame(rows, hb_job.PARSED_SCHEMA)]), state))
    )
    connector_records = [
        states_job.record_of(
            name, r["record_kind"], r["raw_key"], r["raw_value"], 0, r["kafka_offset"], r["kafka_timestamp"]
        )
        for r in rows
        if r["record_kind"] != "offset"
    ]
    offset_records = []
    for r in rows:
        if r["record_kind"] == "offset":
            try:
                record = hb_fold.parse_offset_record(
                    r["raw_key"], r["raw_value"], 0, r["kafka_offset"], r["kafka_timestamp"]
                )
            except RecordFormatError:
                continue
            if record is not None:
                offset_records.append(record)
    result = hb_fold.fold(hb_fold.HeartbeatState.new(name), connector_records, offset_records, defaults, 5000)
    state_json = hb_fold.heartbeat_state_to_json(result.state)
    expected = [
        {"record_kind": "activity", "evaluated_at": 5000, **row}
        for row in hb_fold.activity_rows(result.state, result.policy, 5000)
    ]
    expected += [
        {"record_kind": "removed", "connector": name, "key": key, "evaluated_at": 5000} for key in result.removed
    ]
    expected.append({"record_kind": "state", "connector": name, "state": state_json, "evaluated_at": 5000})
    schema = hb_job.OUTPUT_SCHEMA
    got = pa.Table.from_pandas(out, schema=schema, preserve_index=False)
    want = pa.Table.from_pandas(pandas_frame(expected, hb_job.OUTPUT_SCHEMA), schema=schema, preserve_index=False)
    assert got.to_pylist() == want.to_pylist()
    assert [r["record_kind"] for r in expected] == ["activity"] * 4 + ["removed", "state"]  # /in-1's tombstone
    assert len(offset_records) == 13 and state.get[0] == state_json


@pytest.mark.parametrize(
    ("x", "value"),
    [(pa.int64(), float(2**63)), (pa.int64(), -(2.0**64)), (pa.int32(), 2.0**31), (pa.int32(), -(2.0**31) - 1)],
)
def test_rows_frame_refuses_what_a_cast_would_wrap(x: pa.DataType, value: float) -> None:
    schema = pa.schema([("x", x)])
    batch = pd.DataFrame({"x": [value, float("nan"), 5.0]})  # as Arrow hands an integer column with nulls
    with pytest.raises(OverflowError, match="column x"):
        rows_frame(batch, np.array([0, 1, 2]), schema, {})
    assert rows_frame(batch, np.array([2, 1]), schema, {})["x"].tolist() == [5, pd.NA]  # the rows taken only


@pytest.mark.parametrize(("x", "value"), [(pa.int32(), -(2.0**31)), (pa.int64(), -(2.0**63))])
def test_rows_frame_takes_each_types_lowest_value(x: pa.DataType, value: float) -> None:
    batch = pd.DataFrame({"x": [value, float("nan")]})
    assert rows_frame(batch, np.array([0, 1]), pa.schema([("x", x)]), {})["x"].tolist() == [int(value), pd.NA]
