"""The bulk offsets-key read (formats/offsets_arrow.py) against ``offset_key_connector`` as the oracle, and the
heartbeats pipeline's bulk path against its exact parse step."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connect_state.core.errors import RecordFormatError
from connect_state.formats.offsets import offset_key_bytes, offset_key_connector
from connect_state.formats.offsets_arrow import match_key_connectors
from connect_state.spark import heartbeats
from connect_state.spark.foldjob import _classified_batch

NAMES = st.one_of(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=10), st.text(max_size=6))
PARTITIONS = st.one_of(st.none(), st.dictionaries(st.text(max_size=4), st.integers(0, 9), max_size=2))


@st.composite
def key(draw: st.DrawFn) -> bytes | None:
    """A key as Connect writes it (mostly), or a variation: escapes, spacing, other shapes, random bytes, null."""
    connector, partition = draw(NAMES), draw(PARTITIONS)
    match draw(st.integers(0, 6)):
        case 0:
            return None
        case 1:
            return draw(st.binary(max_size=20))
        case 2:
            return json.dumps([connector, partition]).encode()  # spaces, \\u escapes
        case 3:
            return (json.dumps([connector], separators=(",", ":"))[:-1] + ",{" + draw(st.text(max_size=6))).encode()
        case _:
            return offset_key_bytes(connector, partition)


def connector_of(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return offset_key_connector(data)
    except RecordFormatError:
        return None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(key(), max_size=20))
def test_every_key_taken_in_bulk_names_the_connector_the_exact_reader_names(keys):
    found = match_key_connectors(pa.array(keys, pa.binary()))
    matched = found.matched.to_pylist()
    assert len(matched) == len(keys)
    taken = [k for k, hit in zip(keys, matched, strict=True) if hit]
    assert found.connector.to_pylist() == [connector_of(k) for k in taken]


@pytest.mark.parametrize(
    "data, taken",
    [
        (b'["my-source",{"file":"/tmp/in.txt"}]', True),
        (b'["",{}]', True),
        (b'["a\\"b",{}]', False),  # an escape
        (b'["caf\xc3\xa9",{}]', False),  # non-ASCII
        (b'["a",null]', False),  # no partition map
        (b'[ "a",{}]', False),
        (None, False),
    ],
)
def test_keys_outside_the_plain_form_are_left_to_the_exact_reader(data, taken):
    assert match_key_connectors(pa.array([data], pa.binary())).matched.to_pylist() == [taken]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(key(), st.one_of(st.none(), st.binary(max_size=8)), st.sampled_from(["off", "cfg"])), max_size=20
    )
)
def test_the_heartbeats_pipelines_bulk_path_gives_the_exact_steps_rows(records):
    """``heartbeats.fast_parser`` rows equal the exact parse step's rows of the records it takes (every column); it
    takes no record of another topic."""
    n = len(records)
    kafka = pa.RecordBatch.from_arrays(
        [
            pa.array([k for k, _, _ in records], pa.binary()),
            pa.array([v for _, v, _ in records], pa.binary()),
            pa.array([t for _, _, t in records]),
            pa.array([i % 3 for i in range(n)], pa.int32()),
            pa.array(range(n), pa.int64()),
            pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64()),
        ],
        names=["key", "value", "topic", "partition", "offset", "timestamp"],
    )
    fast, matched = heartbeats.fast_parser("off")(kafka)
    taken = kafka.filter(matched)
    assert set(taken.column(2).to_pylist()) <= {"off"}
    exact = _classified_batch(taken, lambda k, v, kf: heartbeats.classify(k, v, kf, "cfg", "off"), fast.schema)
    assert fast.num_rows == taken.num_rows
    assert fast.num_rows == 0 if exact is None else fast.equals(exact)
