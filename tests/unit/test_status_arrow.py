"""The bulk topic-status parse (formats/status_arrow.py) against the exact parser (formats/status.py) as the oracle."""

from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connect_state.folds.active_topics import TopicRecord
from connect_state.formats.status import (
    TopicStatus,
    serialize_topic_status,
    topic_status_key,
)
from connect_state.formats.status_arrow import match_topic_statuses

SAFE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters='"\\:'), min_size=1)
ANY_TEXT = st.text(min_size=0, max_size=12)
NUMBERS = st.one_of(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, -1, 10**9 - 1, 10**9, -(10**9), 10**18 - 1, 10**18, 2**31, 2**63 - 1]),
)


@st.composite
def canonical(draw: st.DrawFn) -> tuple[bytes, bytes | None]:
    topic, connector = draw(SAFE), draw(SAFE)
    task = draw(st.integers(-(2**31), 2**31 - 1))
    ts = draw(st.integers(-(2**63), 2**63 - 1))
    key = topic_status_key(topic, connector).encode()
    if draw(st.booleans()):
        return key, None
    return key, serialize_topic_status(TopicStatus(topic, connector, task, ts))


@st.composite
def near_canonical(draw: st.DrawFn) -> tuple[bytes, bytes | None]:
    """Variations Connect's parser may read differently: any text, other numbers, floats, spacing, field order."""
    topic, connector = draw(ANY_TEXT), draw(ANY_TEXT)
    key_text = draw(
        st.sampled_from(
            [
                f"status-topic-{topic}:connector-{connector}",
                f"status-topic-{topic}:xonnector-{connector}",
                f"status-connector-{connector}",
                f"status-task-{connector}-{draw(NUMBERS)}",
                f"status-topic-{topic}",
                draw(ANY_TEXT),
            ]
        )
    )
    key = key_text.encode("utf-8", "surrogatepass") if draw(st.booleans()) else draw(st.binary(max_size=30))
    task = draw(st.one_of(NUMBERS, st.floats(allow_nan=False), st.none(), st.text(max_size=3)))
    ts = draw(st.one_of(NUMBERS, st.floats(allow_nan=False), st.none()))
    inner = {
        "name": draw(st.one_of(ANY_TEXT, st.none())),
        "connector": connector,
        "task": task,
        "discoverTimestamp": ts,
    }
    if draw(st.booleans()):
        inner = dict(reversed(list(inner.items())))
    separators = draw(st.sampled_from([(",", ":"), (", ", ": "), (",", ":")]))
    value_text = json.dumps({"topic": inner}, separators=separators, ensure_ascii=draw(st.booleans()))
    value = draw(
        st.sampled_from(
            [
                value_text.encode("utf-8", "surrogatepass"),
                None,
                b"",
                b"null",
                value_text.encode()[:-1],
                draw(st.binary(max_size=20)),
            ]
        )
    )
    return key, value


def _exact(key: bytes, value: bytes | None) -> tuple[str, str, int | None, int | None] | None:
    """What the exact path (the fold's own parse of one record) reads."""
    record = TopicRecord.from_kafka(key, value, 0, 0, 0)
    if record is None:
        return None
    return record.connector, record.topic, record.task, record.discover_timestamp


def _check(records: list[tuple[bytes, bytes | None]]) -> pa.BooleanArray:
    keys = pa.array([k for k, _ in records], pa.binary())
    values = pa.array([v for _, v in records], pa.binary())
    found = match_topic_statuses(keys, values)
    assert len(found.matched) == len(records)
    taken = [record for record, hit in zip(records, found.matched.to_pylist(), strict=True) if hit]
    bulk = list(
        zip(
            found.connector.to_pylist(),
            found.topic.to_pylist(),
            found.task.to_pylist(),
            found.discover_timestamp.to_pylist(),
            strict=True,
        )
    )
    assert bulk == [_exact(key, value) for key, value in taken]
    return found.matched


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(canonical(), near_canonical()), max_size=20))
def test_every_record_taken_in_bulk_reads_as_the_exact_parser_reads_it(records):
    _check(records)


@settings(max_examples=100, deadline=None)
@given(st.lists(canonical(), min_size=1, max_size=10))
def test_canonical_records_with_plain_names_and_java_range_numbers_are_taken(records):
    matched = _check(records)
    expected = []
    for _key, value in records:
        if value is None:
            expected.append(True)
            continue
        inner = json.loads(value)["topic"]
        expected.append(abs(inner["task"]) < 10**9 and abs(inner["discoverTimestamp"]) < 10**18)
    assert matched.to_pylist() == expected


def test_records_of_other_shapes_are_left_to_the_exact_parser():
    records = [
        (b"status-connector-a", b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}'),
        (b"status-topic-t:connector-c", b'{"topic":{"name":"t","connector":"c","task":1.0,"discoverTimestamp":1}}'),
        (b"status-topic-t:connector-c", b'{"topic": {"name":"t","connector":"c","task":1,"discoverTimestamp":1}}'),
        (
            b"status-topic-t:connector-c",
            b'{"topic":{"name":"t\\u0041","connector":"c","task":1,"discoverTimestamp":1}}',
        ),
        (b"status-topic-t:connector-c", b'{"topic":{"name":"t","connector":"c","task":-0,"discoverTimestamp":1}}'),
        (b"status-topic-t:xxxxxxxxxxc", None),
        ("status-topic-t:connector-\u00e9".encode(), None),
        (b"status-topic-t:connector-c", b""),
    ]
    matched = _check(records)
    assert matched.to_pylist() == [False] * len(records)


def test_nulls_in_the_key_column_are_left_to_the_exact_parser():
    found = match_topic_statuses(pa.array([None, b"status-topic-t:connector-c"], pa.binary()), pa.nulls(2, pa.binary()))
    assert found.matched.to_pylist() == [False, True]
    assert found.task.to_pylist() == [None]
