"""How far behind the topics' end a table is (connect_state/progress/freshness.py): the pure computation behind the
``X-Connect-State-Lag`` header, and the offsets cache that keeps GETs cheap (connect_state/kafka/log.py)."""

from __future__ import annotations

import threading
import time

import pytest

from connect_state.core.errors import KafkaUnavailableError
from connect_state.core.settings import Settings
from connect_state.kafka.log import OffsetsCache, TopicOffsets
from connect_state.progress.freshness import (
    TableLag,
    Watermark,
    format_lag_header,
    parse_lag_header,
    query_topics,
    records_behind,
    table_lag,
)

NOW = 1_750_000_000_000
S = "connect-status"


def mark(partition: int, next_offset: int, committed_at_ms: int | None = NOW - 4_000, query: str = "active_topics"):
    return Watermark(query, S, partition, next_offset, committed_at_ms)


def test_records_behind_counts_from_the_watermark_or_the_log_start() -> None:
    ends = {(S, 0): 10, (S, 1): 5, (S, 2): 7}
    starts = {(S, 0): 0, (S, 1): 3, (S, 2): 0}
    # p0 folded to 8: 2 behind; p1 has no watermark: from its log start 3, 2 behind; p2 folded past a retention: 0.
    assert records_behind({(S, 0): 8, (S, 2): 7}, starts, ends) == 4
    # A watermark below the log start (retention deleted records the query never read) counts from the log start.
    assert records_behind({(S, 1): 1}, starts, {(S, 1): 5}) == 2
    assert records_behind({}, {}, {}) == 0


def test_a_caught_up_table_is_current_whatever_its_last_commit() -> None:
    lag = table_lag("active_topics", [mark(0, 10, NOW - 3_600_000)], {(S, 0): 0}, {(S, 0): 10}, NOW)
    assert lag == TableLag("active_topics", 0, 0)
    assert lag.current


def test_a_table_behind_reports_records_and_the_time_since_its_last_commit() -> None:
    marks = [mark(0, 8, NOW - 9_000), mark(1, 5, NOW - 4_000), mark(0, 99, NOW, query="connector_states")]
    lag = table_lag("active_topics_history", marks, {}, {(S, 0): 10, (S, 1): 6}, NOW)
    assert lag == TableLag("active_topics_history", 3, 4_000)


def test_a_query_that_never_committed_has_everything_behind_and_no_age() -> None:
    lag = table_lag("connectors", [], {("connect-configs", 0): 0}, {("connect-configs", 0): 12}, NOW)
    assert lag == TableLag("connectors", 12, None)


def test_unknown_end_offsets_and_untracked_tables() -> None:
    assert table_lag("source_offsets", [], None, None, NOW) == TableLag("source_offsets", None, None)
    assert table_lag("connector_deletions", [], {}, {}, NOW) == TableLag("connector_deletions", tracked=False)


def test_query_topics(settings: Settings) -> None:
    assert query_topics("active_topics", settings) == [settings.status_storage_topic]
    assert query_topics("connector_states", settings) == [settings.config_storage_topic, settings.status_storage_topic]
    own = Watermark("source_offsets", "own-offsets", 0, 3)
    assert query_topics("source_offsets", settings, [own]) == [settings.offset_storage_topic, "own-offsets"]
    assert query_topics("sink_offsets", settings) == [settings.consumer_offsets_topic]


def test_header_format_round_trips() -> None:
    lags = [
        TableLag("connectors", 0, 0),
        TableLag("source_offsets", 12, 4_100),
        TableLag("sink_offsets", None, None),
        TableLag("active_topics", 3, None),
        TableLag("connector_deletions", tracked=False),
    ]
    text = format_lag_header(lags)
    assert text == (
        "connectors;records=0;age_ms=0, source_offsets;records=12;age_ms=4100, "
        "sink_offsets;records=unknown;age_ms=unknown, active_topics;records=3;age_ms=unknown, "
        "connector_deletions;untracked"
    )
    assert parse_lag_header(text) == lags
    assert parse_lag_header("") == []


@pytest.mark.parametrize(
    "text", ["connectors;records=1", "connectors;rows=1;age_ms=2", "connectors;records=x;age_ms=1"]
)
def test_malformed_headers_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_lag_header(text)


# --- the offsets cache ----------------------------------------------------------------------------------------------


class CountingLog:
    """A TopicLog answering fixed offsets, counting calls; ``fail`` raises instead; ``gate`` blocks the call."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail: Exception | None = None
        self.gate: threading.Event | None = None

    def offsets(self, topics, timeout_ms):
        self.calls += 1
        if self.gate is not None:
            self.gate.wait(5)
        if self.fail is not None:
            raise self.fail
        return TopicOffsets({(t, 0): 0 for t in topics}, {(t, 0): self.calls for t in topics}, time.monotonic())

    def read(self, ranges, timeout_ms):
        return []

    def close(self) -> None:
        pass


def test_offsets_are_asked_at_most_once_per_max_age() -> None:
    log = CountingLog()
    cache = OffsetsCache(log, max_age_ms=60_000, timeout_ms=100)
    first, reason = cache.get(["b", "a"])
    assert reason is None and first is not None and first.ends == {("a", 0): 1, ("b", 0): 1}
    assert cache.get(["a", "b"])[0] is first
    assert log.calls == 1
    cache.max_age_ms = 0
    assert cache.get(["a", "b"])[0].ends[("a", 0)] == 2  # type: ignore[union-attr]


def test_a_failure_is_remembered_too() -> None:
    log = CountingLog()
    log.fail = KafkaUnavailableError("cannot reach Kafka at 127.0.0.1:1")
    cache = OffsetsCache(log, max_age_ms=60_000, timeout_ms=100)
    assert cache.get(["a"]) == (None, "cannot reach Kafka at 127.0.0.1:1")
    assert cache.get(["a"]) == (None, "cannot reach Kafka at 127.0.0.1:1")
    assert log.calls == 1


def test_only_one_caller_waits_for_kafka() -> None:
    log = CountingLog()
    log.gate = threading.Event()
    cache = OffsetsCache(log, max_age_ms=60_000, timeout_ms=100)
    answers: list[object] = []
    asking = threading.Thread(target=lambda: answers.append(cache.get(["a"])))
    asking.start()
    deadline = time.monotonic() + 5
    while log.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cache.get(["a"]) == (None, "the end offsets are being read")  # no wait behind the first caller
    log.gate.set()
    asking.join(5)
    assert answers and answers[0][1] is None  # type: ignore[index]
    assert log.calls == 1
