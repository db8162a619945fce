"""Retention of the history tables (connect_state/tables/retention.py): which rows a clean-up deletes, and that no
as-of answer at or after the cutoff changes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connect_state.core.errors import ConfigError
from connect_state.core.settings import load_settings
from connect_state.tables import history
from connect_state.tables.retention import (
    POLICIES,
    RetentionPolicy,
    cutoff_ms,
    expired_rows,
    oldest_answerable,
    owned_by,
    table_retentions,
)
from connect_state.tables.schemas import TableSpec

BY_NAME = {policy.name: policy for policy in POLICIES}
DAY = 86_400_000


def ts(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def table_of(rows: Sequence[dict[str, Any]], spec: TableSpec) -> pa.Table:
    return pa.Table.from_pylist([{name: row.get(name) for name in spec.column_names} for row in rows], spec.schema)


def after_cleanup(rows: list[dict[str, Any]], policy: RetentionPolicy, cutoff: int) -> list[dict[str, Any]]:
    """The rows a clean-up at ``cutoff`` leaves (deleted by the table's key, as the delete does)."""
    gone = expired_rows(table_of(rows, policy.spec), policy, cutoff).select(list(policy.spec.key)).to_pylist()
    keys = {tuple(row.values()) for row in gone}
    return [row for row in rows if tuple(row[name] for name in policy.spec.key) not in keys]


# Kafka coordinates are unique per record: the offset is the row's position.
def coordinates(draw: st.DrawFn, n: int) -> list[tuple[int, int, int]]:
    """``n`` (Kafka timestamp, partition, offset) with small times (ties likely)."""
    times = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    partitions = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    return [(time, partition, offset) for offset, (time, partition) in enumerate(zip(times, partitions, strict=True))]


@st.composite
def topic_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(0, 30))
    changes = draw(st.lists(st.sampled_from(["added", "updated", "removed"]), min_size=n, max_size=n))
    topics = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=n, max_size=n))
    return [
        {"connector": "c", "topic": topic, "change": change, "kafka_partition": p, "kafka_offset": o,
         "kafka_timestamp": ts(t)}
        for (t, p, o), topic, change in zip(coordinates(draw, n), topics, changes, strict=True)
    ]  # fmt: skip


@st.composite
def source_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(0, 30))
    keys = draw(st.lists(st.sampled_from([b"k1", b"k2", b"k3"]), min_size=n, max_size=n))
    offsets = draw(st.lists(st.one_of(st.none(), st.integers(0, 9)), min_size=n, max_size=n))
    return [
        {"connector": "c", "offsets_topic": "connect-offsets", "key": key, "partition": f'{{"k":"{key.decode()}"}}',
         "offset": None if offset is None else f'{{"n":{offset}}}', "change": "removed" if offset is None else "set",
         "kafka_partition": p, "kafka_offset": o, "kafka_timestamp": ts(t)}
        for (t, p, o), key, offset in zip(coordinates(draw, n), keys, offsets, strict=True)
    ]  # fmt: skip


@st.composite
def sink_rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(0, 30))
    partitions = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    offsets = draw(st.lists(st.one_of(st.none(), st.integers(0, 9)), min_size=n, max_size=n))
    return [
        {"group_id": "connect-c", "topic": "t", "partition": partition, "offset": offset,
         "change": "removed" if offset is None else "set", "kafka_partition": p, "kafka_offset": o,
         "kafka_timestamp": ts(t)}
        for (t, p, o), partition, offset in zip(coordinates(draw, n), partitions, offsets, strict=True)
    ]  # fmt: skip


AS_OF: list[tuple[str, Any, Callable[[list[dict[str, Any]], int | None], object]]] = [
    ("active_topics_history", topic_rows(), history.topics_as_of),
    ("source_offsets_history", source_rows(), history.source_offsets_as_of),
    ("sink_offsets_history", sink_rows(), history.sink_offsets_as_of),
]


@pytest.mark.parametrize(("table", "rows", "as_of"), AS_OF, ids=[name for name, _, _ in AS_OF])
def test_no_as_of_answer_at_or_after_the_cutoff_changes(table: str, rows: Any, as_of: Any) -> None:
    policy = BY_NAME[table]

    @settings(max_examples=300, deadline=None)
    @given(rows, st.integers(0, 45), st.lists(st.integers(0, 50), max_size=5))
    def check(rows: list[dict[str, Any]], cutoff: int, times: list[int]) -> None:
        kept = after_cleanup(rows, policy, cutoff)
        for at in [None, cutoff, *(t for t in times if t >= cutoff)]:
            assert as_of(kept, at) == as_of(rows, at), at
        # ... and the clean-up keeps at most one row per key before the cutoff (the newest, not a removal)
        old = [row for row in kept if row["kafka_timestamp"] < ts(cutoff)]
        per_key = [tuple(row[name] for name in policy.key) for row in old]
        assert len(per_key) == len(set(per_key))
        assert all(row["change"] != "removed" for row in old)
        # rows at or after the cutoff all stay
        assert [r for r in rows if r["kafka_timestamp"] >= ts(cutoff)] == [
            r for r in kept if r["kafka_timestamp"] >= ts(cutoff)
        ]

    check()


def test_the_newest_row_before_the_cutoff_stays_and_the_older_ones_go() -> None:
    policy = BY_NAME["active_topics_history"]
    rows = [
        {"connector": "c", "topic": "a", "change": "added", "kafka_partition": 0, "kafka_offset": 1,
         "kafka_timestamp": ts(1 * DAY)},
        {"connector": "c", "topic": "a", "change": "updated", "kafka_partition": 0, "kafka_offset": 2,
         "kafka_timestamp": ts(2 * DAY)},
        {"connector": "c", "topic": "b", "change": "added", "kafka_partition": 0, "kafka_offset": 3,
         "kafka_timestamp": ts(3 * DAY)},
        {"connector": "c", "topic": "b", "change": "removed", "kafka_partition": 0, "kafka_offset": 4,
         "kafka_timestamp": ts(4 * DAY)},
        {"connector": "c", "topic": "a", "change": "removed", "kafka_partition": 0, "kafka_offset": 5,
         "kafka_timestamp": ts(40 * DAY)},
    ]  # fmt: skip
    kept = after_cleanup(rows, policy, cutoff_ms(41 * DAY, 35 * DAY) or 0)
    # a's update (day 2) is its state at the cutoff (day 6); b was removed before it: nothing of b is left
    assert [row["kafka_offset"] for row in kept] == [2, 5]
    assert history.topics_as_of(kept, 6 * DAY) == history.topics_as_of(rows, 6 * DAY) == ["a"]


def test_a_table_without_a_key_loses_every_row_before_the_cutoff() -> None:
    policy = BY_NAME["rejected_records"]
    rows = [
        {"topic": "connect-configs", "partition": 0, "offset": n, "reason": "r", "seen_at": ts(n * DAY)}
        for n in range(10)
    ]
    gone = expired_rows(table_of(rows, policy.spec), policy, 4 * DAY).column("offset").to_pylist()
    assert gone == [0, 1, 2, 3]


def test_every_record_of_a_partitions_last_heartbeat_before_the_cutoff_stays() -> None:
    policy = BY_NAME["heartbeats"]
    rows = [
        {"connector": "c", "source_key": b"k", "emitted_at": ts(at * DAY), "record_index": index}
        for at, index in [(1, 0), (1, 1), (2, 0), (2, 1), (9, 0)]
    ] + [{"connector": "c", "source_key": b"j", "emitted_at": ts(3 * DAY), "record_index": None}]
    gone = expired_rows(table_of(rows, policy.spec), policy, 5 * DAY).to_pylist()
    assert [(row["emitted_at"], row["record_index"]) for row in gone] == [(ts(DAY), 0), (ts(DAY), 1)]


def test_retention_settings_per_table() -> None:
    settings_ = load_settings(
        overrides={"history.retention.ms": "1000", "history.retention.ms.by.table": "audit=-1,heartbeats=5"},
        environ={},
    )
    retentions = table_retentions(settings_)
    assert retentions["audit"] == -1
    assert retentions["heartbeats"] == 5
    assert retentions["connector_events"] == 1000
    assert oldest_answerable(settings_, "audit", 10_000) is None
    assert oldest_answerable(settings_, "connector_events", 10_000) == 9_000
    assert table_retentions(load_settings(environ={}))["active_topics_history"] == 35 * DAY


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("history.retention.ms.by.table", "connectors=1000"),  # a current table, not a history table
        ("history.retention.ms.by.table", "audit=0"),
        ("history.retention.ms.by.table", "audit=soon"),
        ("history.retention.ms", "-2"),
        ("history.retention.check.interval.ms", "0"),
    ],
)
def test_a_bad_retention_setting_is_refused(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key.split(" ")[0]):
        table_retentions(load_settings(overrides={key: value}, environ={}))


def test_every_history_table_has_one_owner() -> None:
    assert {p.name for p in owned_by("active_topics")} == {"active_topics_history", "rejected_records", "data_loss"}
    assert {p.name for p in owned_by("heartbeats")} == {"heartbeats", "rejected_records", "data_loss"}
    assert {p.name for p in owned_by("api")} == {"audit"}
    assert {p.name for p in owned_by("watch")} == {"verdict_history"}
    assert {p.name for p in owned_by("restarts")} == {"connector_restarts"}
    assert {p.name for p in owned_by("alerts")} == {"alerts", "alert_deliveries", "alert_silences"}
    for policy in POLICIES:
        assert set(policy.columns) <= set(policy.spec.column_names)


def test_the_periodic_jobs_logs_keep_what_is_still_open() -> None:
    """An alert goes once resolved before the cutoff (a firing one stays, however old); a notification once delivered
    before it (a pending one stays); a silence once ended before it; a connector's newest verdict change and restart
    before the cutoff stay."""
    cutoff = 10 * DAY
    old, new = ts(2 * DAY), ts(12 * DAY)
    alerts = [
        {"id": "firing-old", "state": "firing", "updated_at": old},
        {"id": "resolved-old", "state": "resolved", "updated_at": old},
        {"id": "resolved-new", "state": "resolved", "updated_at": new},
    ]
    assert [row["id"] for row in after_cleanup(alerts, BY_NAME["alerts"], cutoff)] == ["firing-old", "resolved-new"]
    deliveries = [
        {"alert_id": "a", "event": "firing", "channel": "hook", "status": "pending", "created_at": old},
        {"alert_id": "b", "event": "firing", "channel": "hook", "status": "delivered", "created_at": old},
        {"alert_id": "c", "event": "firing", "channel": "hook", "status": "delivered", "created_at": new},
    ]
    kept = after_cleanup(deliveries, BY_NAME["alert_deliveries"], cutoff)
    assert [row["alert_id"] for row in kept] == ["a", "c"]
    silences = [{"id": "ended", "ends_at": old}, {"id": "holds", "ends_at": new}]
    assert [row["id"] for row in after_cleanup(silences, BY_NAME["alert_silences"], cutoff)] == ["holds"]
    verdicts = [
        {"connector": "c", "at": ts(t * DAY), "verdict": v} for t, v in ((1, "failed"), (2, "running"), (11, "stalled"))
    ]
    assert [row["verdict"] for row in after_cleanup(verdicts, BY_NAME["verdict_history"], cutoff)] == [
        "running",
        "stalled",
    ]
    restarts = [{"connector": "c", "requested_at": ts(t * DAY), "attempt": t} for t in (1, 2, 11)]
    assert [row["attempt"] for row in after_cleanup(restarts, BY_NAME["connector_restarts"], cutoff)] == [2, 11]
