"""The heartbeats job's schedule (the timer on the driver) without Spark: what the fold hands it, what it fires and
when, what it keeps across new states of the fold and across a restart (``recorded``).

The oracle for the whole is the fold as the job ran it with Spark's processing-time timeouts: :func:`step` (fold and
fire at one instant) called for every batch of records and at every timeout. Fed the same records at the same
instants, the schedule (:func:`fold` in the query, :meth:`HeartbeatSchedule.due` on the driver) must send the same
heartbeats at the same times.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from kafka.errors import KafkaTimeoutError

from connect_state.heartbeats.emitter import EmittedHeartbeat, HeartbeatOutcome
from connect_state.heartbeats.fold import (
    NO_PARTITION_KEY,
    HeartbeatSchedule,
    HeartbeatState,
    fold,
    step,
)
from connect_state.leases.decisions import LeaseLost
from connect_state.spark.heartbeats import (
    SPARK_INITIALIZING,
    TICK_S,
    HeartbeatScheduler,
    HeartbeatsQueryTask,
    now_ms,
)
from tests.unit.test_heartbeats_fold import DEFAULTS, FILE, NAME, config, offset, running_source, source_config, status
from tests.unit.test_heartbeats_kip910 import TIMER

OTHER_FILE = {"filename": "/data/other.txt"}


def folded(records, offsets, now: int, state: HeartbeatState | None = None, defaults=DEFAULTS) -> HeartbeatState:
    """The state the query's fold hands the schedule (it never fires)."""
    return fold(state or HeartbeatState.new(NAME), records, offsets, defaults, now).state


def keys(due) -> list[tuple[str, bytes, int]]:
    return [(d.connector, d.key, d.due_at) for d in due]


def test_an_idle_partition_is_due_one_interval_after_its_last_move_then_every_interval():
    schedule = HeartbeatSchedule(DEFAULTS)
    state = folded(running_source(), [offset(1, ts=1000)], now=1500)
    schedule.update(state)
    assert NAME in schedule and schedule.next_due() == 3000
    assert schedule.due(2999) == []
    (due,) = schedule.due(3000)
    assert (due.partition, due.offset, due.due_at) == (FILE, {"position": 1}, 3000)
    assert schedule.next_due() == 5000  # the KIP's currentTimeMs + heartbeatIntervalMs
    assert schedule.due(3000) == []


def test_a_new_state_from_the_fold_keeps_the_heartbeats_sent():
    """The fold never fires, so its states carry no heartbeat: the schedule keeps its own marks."""
    schedule = HeartbeatSchedule(DEFAULTS)
    state = folded(running_source(), [offset(1, ts=1000)], now=1500)
    schedule.update(state)
    schedule.due(3000)
    same_offset = folded([], [offset(1, ts=3500)], now=3600, state=state)  # a commit of the same offset: no move
    schedule.update(same_offset)
    assert schedule.next_due() == 5000 and schedule.due(4999) == []
    moved = folded([], [offset(2, ts=4000)], now=4100, state=same_offset)
    schedule.update(moved)
    assert schedule.next_due() == 6000  # one interval after the move


def test_a_paused_connector_is_not_due_and_keeps_its_heartbeats_times_a_deleted_one_is_forgotten():
    schedule = HeartbeatSchedule(DEFAULTS)
    state = folded(running_source(), [offset(1, ts=1000)], now=1500)
    schedule.update(state)
    (key,) = state.partitions
    assert [d.key for d in schedule.due(3000)] == [key]
    paused = folded([status("PAUSED")], [], now=4000, state=state)
    schedule.update(paused)
    assert schedule.next_due() is None and schedule.due(10_000) == []
    schedule.update(folded([status("RUNNING")], [], now=4500, state=paused))
    assert schedule.next_due() == 5000  # the heartbeat sent at 3000 still counts
    deleted = folded([config(None)], [], now=6000, state=paused)
    schedule.update(deleted)
    assert NAME not in schedule and len(schedule) == 0


def test_heartbeats_off_or_not_a_source_never_enter_the_schedule():
    schedule = HeartbeatSchedule(DEFAULTS)
    schedule.update(folded([config(source_config(**{"heartbeat.interval.ms": "0"})), status("RUNNING")], [], 0))
    sink = {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "topics": "t"}
    schedule.update(
        folded([config(sink, name="sink"), status("RUNNING", name="sink")], [], 0, HeartbeatState.new("sink"))
    )
    assert len(schedule) == 0 and schedule.next_due() is None


def test_recorded_heartbeats_of_an_earlier_run_count_as_sent():
    state = folded(running_source(), [offset(1, ts=1000), offset(5, ts=1000, partition=OTHER_FILE)], now=1500)
    schedule = HeartbeatSchedule(DEFAULTS)
    schedule.update(state)
    file_key = next(k for k, a in state.partitions.items() if a.partition == FILE)
    schedule.recorded(NAME, file_key, 2500)
    schedule.recorded("unknown", file_key, 2500)  # not in the schedule: nothing
    due = schedule.due(3000)
    assert [d.partition for d in due] == [OTHER_FILE]  # the other one was not recorded
    assert schedule.next_due() == 4500 and [d.partition for d in schedule.due(4500)] == [FILE]


def test_heartbeats_recorded_before_a_connector_enters_the_schedule_count_when_it_does():
    """The job reads the recorded heartbeats before the states (and before a new checkpoint empties the table)."""
    state = folded(running_source(), [offset(1, ts=1000)], now=1500)
    (key,) = state.partitions
    schedule = HeartbeatSchedule(DEFAULTS)
    schedule.recorded(NAME, key, 2500)
    schedule.recorded(NAME, key, 2400)  # the later one counts
    schedule.update(folded([status("PAUSED")], [], now=1600, state=state))  # not eligible: not taken in yet
    assert NAME not in schedule
    schedule.update(state)
    assert schedule.next_due() == 4500


def test_timer_mode_keeps_its_own_timer_across_new_states_of_the_fold():
    schedule = HeartbeatSchedule(TIMER)
    armed = folded(running_source(), [], now=1000, defaults=TIMER)
    assert armed.timer_next_at == 3000
    schedule.update(armed)
    (first,) = schedule.due(3000)
    assert (first.key, first.partition) == (NO_PARTITION_KEY, {})  # no partition yet: the provider is asked with none
    assert schedule.next_due() == 5000
    # The fold's state still has the timer where it was armed (3000): the schedule's running timer wins.
    schedule.update(folded([], [offset(7, ts=3500)], now=3600, state=armed, defaults=TIMER))
    assert schedule.due(4000) == [] and schedule.next_due() == 5000
    assert [d.partition for d in schedule.due(5000)] == [FILE]


def test_timer_mode_recorded_heartbeats_move_the_timer():
    state = folded(running_source(), [offset(7, ts=1000)], now=1000, defaults=TIMER)
    schedule = HeartbeatSchedule(TIMER)
    schedule.update(state)
    (key,) = state.partitions
    schedule.recorded(NAME, key, 4000)
    assert schedule.next_due() == 6000


def test_a_copy_is_independent():
    schedule = HeartbeatSchedule(DEFAULTS)
    schedule.update(folded(running_source(), [offset(1, ts=1000)], now=1500))
    saved = schedule.copy()
    assert len(schedule.due(3000)) == 1
    assert saved.next_due() == 3000 and len(saved.due(3000)) == 1  # put back, it sends them again


# --- the schedule against the fold with timeouts (the oracle) -------------------------------------------------------

EVENT = st.one_of(
    st.tuples(st.just("offset"), st.integers(0, 3), st.sampled_from([FILE, OTHER_FILE])),
    st.tuples(st.just("status"), st.sampled_from(["RUNNING", "PAUSED"]), st.none()),
    st.tuples(st.just("tick"), st.none(), st.none()),
)


@hypothesis_settings(max_examples=200, deadline=None)
@given(
    mode=st.sampled_from(["idle", "timer"]),
    events=st.lists(st.tuples(st.integers(1, 1500), EVENT), min_size=1, max_size=25),
)
def test_the_schedule_sends_what_the_fold_with_timeouts_sent(mode, events):
    """Records arrive at increasing times, with ticks in between; Spark's timeout fired at each tick (the oracle ran
    :func:`step` there with no records). Both must find the same heartbeats due at every instant."""
    defaults = TIMER if mode == "timer" else DEFAULTS
    oracle = HeartbeatState.new(NAME)
    state = HeartbeatState.new(NAME)
    schedule = HeartbeatSchedule(defaults)
    now = 0
    for index, (gap, (kind, value, partition)) in enumerate(events):
        now += gap
        if kind == "tick":
            records, offsets = [], []
        elif kind == "offset":
            records, offsets = [], [offset(value, ts=now, partition=partition)]
        else:
            records, offsets = [status(value, ts=now)], []
        if index == 0:
            records = [config(source_config(), ts=now), *records]
        expected = step(oracle, records, offsets, defaults, now)
        oracle = expected.state
        if records or offsets:  # a batch with records of the connector (a tick has none, but for the first config)
            state = fold(state, records, offsets, defaults, now).state
            schedule.update(state)
        assert keys(schedule.due(now)) == keys(expected.due), (index, now)
        assert schedule.next_due() == expected.timeout_at, (index, now)


# --- the job's scheduler on the driver: ticks, and a failed send put back -------------------------------------------


class Sink:
    """The scheduler's sink: records what it is asked to send; fails while ``failing``."""

    def __init__(self) -> None:
        self.sent: list[list] = []
        self.failing = False

    def send(self, spark, due):
        if self.failing:
            raise KafkaTimeoutError("the broker is away")
        self.sent.append(list(due))
        return [emitted(d, {"position": 0}) for d in due]


def emitted(due, committed: dict | None) -> EmittedHeartbeat:
    """The row the emitter makes of a heartbeat whose record's offset ``committed`` was committed."""
    return EmittedHeartbeat(
        due.connector, json.dumps(due.partition), due.key, due.records_topic, 0, b"k", b"v", 0, 0,
        json.dumps(committed) if committed is not None else None, HeartbeatOutcome.PRODUCED, None, due.idle_ms,
        due.interval_ms, due.due_at, now_ms(),
    )  # fmt: skip


def idle_since_an_hour_ago() -> HeartbeatState:
    hour_ago = now_ms() - 3_600_000
    return folded(running_source(), [offset(1, ts=hour_ago)], now=hour_ago)


def test_a_tick_sends_what_is_due_once_and_nothing_otherwise(settings):
    sink = Sink()
    scheduler = HeartbeatScheduler(settings, sink, DEFAULTS)  # type: ignore[arg-type]
    assert scheduler.tick(None) == [] and sink.sent == []  # type: ignore[arg-type]  # empty: no Spark, no Kafka
    scheduler.apply([idle_since_an_hour_ago()])
    (row,) = scheduler.tick(None)  # type: ignore[arg-type]
    assert (row.connector, row.partition) == (NAME, json.dumps(FILE)) and len(sink.sent) == 1
    assert scheduler.tick(None) == [] and len(sink.sent) == 1  # type: ignore[arg-type]  # due again in 2 s


def test_a_failed_send_is_put_back_and_sent_by_the_next_tick(settings):
    sink = Sink()
    scheduler = HeartbeatScheduler(settings, sink, DEFAULTS)  # type: ignore[arg-type]
    scheduler.apply([idle_since_an_hour_ago()])
    due_at = scheduler.schedule.next_due()
    sink.failing = True
    with pytest.raises(KafkaTimeoutError):
        scheduler.tick(None)  # type: ignore[arg-type]
    assert scheduler.schedule.next_due() == due_at  # not counted as sent
    sink.failing = False
    assert [row.partition for row in scheduler.tick(None)] == [json.dumps(FILE)]  # type: ignore[arg-type]


def test_the_next_heartbeat_starts_from_the_offset_the_last_one_committed(settings):
    """Before the fold reads our commit back, the next heartbeat must not take it for a move of the task's (the
    emitter would skip it): the schedule keeps what was committed."""
    sink = Sink()
    scheduler = HeartbeatScheduler(settings, sink, DEFAULTS)  # type: ignore[arg-type]
    scheduler.apply([idle_since_an_hour_ago()])
    scheduler.tick(None)  # type: ignore[arg-type]
    (next_due,) = scheduler.schedule.due(now_ms() + 10_000)
    assert next_due.offset == {"position": 0}  # the Sink's commit, not the task's position 1


# --- the query's task: no tick before the query has caught up; a lost lease stops the query -------------------------


class FakeQuery:
    """What the task reads of a streaming query: its status, its progress, and whether it was stopped."""

    name = "heartbeats"
    id = "q"

    def __init__(self) -> None:
        self.status = {"message": SPARK_INITIALIZING, "isDataAvailable": False, "isTriggerActive": False}
        self.lastProgress: dict | None = None
        self.recentProgress: list[dict] = []
        self.isActive = True

    def batch(self, batch_id: int, behind: int) -> None:
        self.lastProgress = {
            "batchId": batch_id,
            "sources": [{"endOffset": {"t": {"0": 10}}, "latestOffset": {"t": {"0": 10 + behind}}}],
        }
        self.recentProgress.append(self.lastProgress)

    def stop(self) -> None:
        self.isActive = False


class CountingScheduler:
    def __init__(self, error: Exception | None = None) -> None:
        self.ticks = 0
        self.error = error

    def tick(self, spark):
        self.ticks += 1
        if self.error is not None:
            raise self.error
        return []


def poll(task: HeartbeatsQueryTask, last_batch: int = -1) -> None:
    task.new_progress(last_batch)
    task.after_poll()


def test_no_tick_until_a_batch_has_read_to_the_end_of_the_topics():
    query, scheduler = FakeQuery(), CountingScheduler()
    task = HeartbeatsQueryTask(query, scheduler, None, trigger_s=0.0)  # type: ignore[arg-type]
    poll(task)
    assert scheduler.ticks == 0  # initializing: the schedule is as old as the checkpoint
    query.batch(0, behind=500)
    query.status = {"message": "Waiting for next trigger", "isDataAvailable": False, "isTriggerActive": False}
    poll(task)
    assert scheduler.ticks == 0  # a backlog is left: deletions and pauses may be in it
    query.batch(1, behind=0)
    poll(task, 0)
    assert scheduler.ticks == 1 and task.caught_up
    poll(task, 1)
    assert scheduler.ticks == 2


def test_a_trigger_that_found_nothing_new_counts_as_caught_up():
    query, scheduler = FakeQuery(), CountingScheduler()
    task = HeartbeatsQueryTask(query, scheduler, None, trigger_s=0.0)  # type: ignore[arg-type]
    task.started_at -= 2 * TICK_S
    poll(task)
    assert scheduler.ticks == 0  # still initializing
    query.status = {"message": "Waiting for data to arrive", "isDataAvailable": False, "isTriggerActive": False}
    poll(task)
    assert scheduler.ticks == 1


def test_a_catch_up_run_does_not_tick_while_its_query_runs():
    query, scheduler = FakeQuery(), CountingScheduler()
    task = HeartbeatsQueryTask(query, scheduler, None, ticking=False)  # type: ignore[arg-type]
    query.batch(0, behind=0)
    poll(task)
    assert scheduler.ticks == 0


def test_a_lease_lost_in_a_tick_stops_the_query_and_a_failure_waits():
    query = FakeQuery()
    task = HeartbeatsQueryTask(query, CountingScheduler(LeaseLost("taken")), None)  # type: ignore[arg-type]
    query.batch(0, behind=0)
    with pytest.raises(LeaseLost):
        poll(task)
    assert not query.isActive
    failing = CountingScheduler(KafkaTimeoutError("away"))
    query = FakeQuery()
    task = HeartbeatsQueryTask(query, failing, None)  # type: ignore[arg-type]
    query.batch(0, behind=0)
    poll(task)
    poll(task, 0)
    assert failing.ticks == 1 and query.isActive  # logged; the next try after RETRY_S
