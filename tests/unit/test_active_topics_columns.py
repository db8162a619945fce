"""The column-at-a-time active-topics fold against the pure fold (the oracle), on generated batches and states."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from connect_state.folds.active_topics import TopicEntry, TopicRecord, fold_connector_topics
from connect_state.folds.active_topics_columns import fold_topic_columns

TOPICS = st.sampled_from(["a", "b", "c", "d"])
ENTRIES = st.builds(
    TopicEntry,
    st.one_of(st.none(), st.integers(0, 2)),
    st.one_of(st.none(), st.integers(0, 3)),
    st.integers(-1, 1),
    st.integers(-1, 12),
    st.booleans(),
)


@st.composite
def records(draw: st.DrawFn) -> list[TopicRecord]:
    out = []
    for _ in range(draw(st.integers(0, 30))):
        tomb = draw(st.booleans())
        out.append(
            TopicRecord(
                "c",
                draw(TOPICS),
                None if tomb else draw(st.integers(0, 2)),
                None if tomb else draw(st.integers(0, 3)),
                draw(st.sampled_from([0, 0, 0, 1])),
                draw(st.integers(0, 12)),
                draw(st.integers(0, 10**6)),
            )
        )
    return out


def run_columns(state: dict, recs: list[TopicRecord]):
    new_state, columns = fold_topic_columns(
        "c",
        state,
        [r.topic for r in recs],
        [r.task for r in recs],
        [r.discover_timestamp for r in recs],
        [r.kafka_partition for r in recs],
        [r.kafka_offset for r in recs],
        [r.kafka_timestamp for r in recs],
    )
    return new_state, columns.changes("c")


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(TOPICS, ENTRIES, max_size=4), records())
def test_the_column_fold_is_the_pure_fold(state: dict, recs: list[TopicRecord]) -> None:
    before = dict(state)
    assert run_columns(state, recs) == fold_connector_topics(state, recs)
    assert state == before  # the given state is not modified


@settings(max_examples=200, deadline=None)
@given(records())
def test_batches_in_sequence_with_replays(recs: list[TopicRecord]) -> None:
    """Two batches over the state of the first, the second replaying the first's tail, as a restarted query does."""
    half = len(recs) // 2
    state_c, state_p = {}, {}
    for part in (recs[: half + 3], recs[half:]):
        (state_c, changes_c), (state_p, changes_p) = run_columns(state_c, part), fold_connector_topics(state_p, part)
        assert (state_c, changes_c) == (state_p, changes_p)
