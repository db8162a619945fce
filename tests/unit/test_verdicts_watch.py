"""The watch job's pass (issue 35) over real Delta tables (written with deltalake) and stand-in log ends: the verdict
rows, history only on change, a deleted connector's row removed."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from connect_state.core.errors import KafkaUnavailableError
from connect_state.core.settings import Settings
from connect_state.formats.connect_protocol import WorkerMetadata
from connect_state.kafka.connect_group import ConnectGroupMembers
from connect_state.spark.watch import VerdictWatch
from connect_state.tables.schemas import CONNECTORS, SINK_OFFSETS
from tests.unit.helpers import write_table

T0 = 1_800_000_000_000


class Positions:
    """Log ends of one topic partition, set by the test."""

    def __init__(self) -> None:
        self.end = 0

    def partitions(self, topics: Any) -> list[tuple[str, int]]:
        return [("orders", 0)] if "orders" in topics else []

    def latest_offsets(self, partitions: Any) -> dict[tuple[str, int], int]:
        return {p: self.end for p in partitions}

    def earliest_offsets(self, partitions: Any) -> dict[tuple[str, int], int]:
        return {p: 0 for p in partitions}

    def close(self) -> None:
        pass


class Group:
    """The Connect group's live workers, set by the test (an exception: the describe fails); counts the calls."""

    def __init__(self, *live: str) -> None:
        self.answer: Any = live
        self.calls = 0

    def members(self) -> ConnectGroupMembers | None:
        self.calls += 1
        if isinstance(self.answer, BaseException):
            raise self.answer
        if self.answer is None:
            return None
        return ConnectGroupMembers("connect-cluster", {w: WorkerMetadata(1, f"http://{w}/", 0) for w in self.answer})

    def close(self) -> None:
        pass


def sink_row(name: str, **fields: Any) -> dict[str, Any]:
    config = {"connector.class": "FileStreamSink", "topics": "orders"}
    task = {"id": 0, "state": "RUNNING", "worker_id": "w"}
    row = {"name": name, "type": "sink", "config": json.dumps(config), "target_state": "STARTED", "task_count": 1}
    return {**row, "connector_state": "RUNNING", "tasks": [task], "deleted": False, **fields}


def rows(settings: Settings, name: str) -> list[dict[str, Any]]:
    return DeltaTable(str(settings.delta_root / name)).to_pyarrow_table().to_pylist()


def test_a_pass_writes_verdicts_and_history_on_change(settings: Settings, tmp_path: Path) -> None:
    settings = settings.with_overrides(**{"verdict.sink.stall.ms": "10000"})
    now = [T0]
    positions = Positions()
    watch = VerdictWatch(settings, positions=positions, group=Group("w"), clock=lambda: now[0])  # type: ignore[arg-type]
    write_table(settings.delta_root, CONNECTORS, [sink_row("orders-sink"), sink_row("other", deleted=True)])
    commit = {"group_id": "connect-orders-sink", "topic": "orders", "partition": 0, "offset": 5}
    write_table(settings.delta_root, SINK_OFFSETS, [{**commit, "commit_timestamp": T0 - 1000}])

    positions.end = 5  # caught up
    assert watch.run_pass() == "orders-sink: - -> healthy"
    positions.end = 9  # lag 4, the commits stand still
    now[0] = T0 + 5000
    assert watch.run_pass() is None  # not long enough: still healthy, nothing written
    now[0] = T0 + 16000
    assert watch.run_pass() == "orders-sink: healthy -> stalled"
    (current,) = rows(settings, "connector_verdicts")
    assert (current["connector"], current["verdict"], current["type"]) == ("orders-sink", "stalled", "sink")
    assert json.loads(current["evidence"])["lag"] == 4
    assert current["since"] == dt.datetime.fromtimestamp((T0 + 15000) / 1000, tz=dt.UTC)  # lag seen at +5 s, + 10 s
    history = sorted(rows(settings, "verdict_history"), key=lambda r: r["at"])
    assert [(r["previous"], r["verdict"]) for r in history] == [(None, "healthy"), ("healthy", "stalled")]

    write_table(settings.delta_root, CONNECTORS, [sink_row("orders-sink", deleted=True)], mode="overwrite")
    now[0] = T0 + 17000
    assert watch.run_pass() == "; gone: orders-sink"
    assert rows(settings, "connector_verdicts") == []


def test_a_task_running_on_a_worker_that_left_the_group_is_degraded(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    now = [T0]
    positions, group = Positions(), Group("a:1", "b:2")
    watch = VerdictWatch(settings, positions=positions, group=group, clock=lambda: now[0])  # type: ignore[arg-type]
    tasks = [{"id": 0, "state": "RUNNING", "worker_id": "a:1"}, {"id": 1, "state": "RUNNING", "worker_id": "b:2"}]
    rows_ = [sink_row(name, tasks=tasks, task_count=2, connector_worker_id="a:1") for name in ("s1", "s2")]
    write_table(settings.delta_root, CONNECTORS, rows_)
    assert watch.run_pass() == "s1: - -> healthy; s2: - -> healthy"
    assert group.calls == 1  # one DescribeGroups per pass, not per connector

    group.answer = KafkaUnavailableError("no broker")  # b:2 left, but the describe fails: no evidence, no verdict
    now[0] = T0 + 1000
    assert watch.run_pass() is None
    assert "no evidence of the Connect group's members" in caplog.text
    group.answer = None  # rebalancing: no answer either
    now[0] = T0 + 2000
    assert watch.run_pass() is None

    group.answer = ("a:1",)
    now[0] = T0 + 3000
    assert watch.run_pass() == "s1: healthy -> degraded; s2: healthy -> degraded"
    current = {r["connector"]: r for r in rows(settings, "connector_verdicts")}
    evidence = json.loads(current["s1"]["evidence"])
    assert {k: evidence[k] for k in ("lost_tasks", "departed_workers", "live_workers", "lost_connector")} == {
        "lost_tasks": [1],
        "departed_workers": ["b:2"],
        "live_workers": ["a:1"],
        "lost_connector": False,
    }
    assert evidence["missing_since"] == "2027-01-15T08:00:03.000Z"  # the first pass that saw it missing
    assert current["s1"]["since"] == dt.datetime.fromtimestamp((T0 + 3000) / 1000, tz=dt.UTC)
    assert json.loads(current["s1"]["tasks"])["1"]["verdict"] == "degraded"
    now[0] = T0 + 4000
    assert watch.run_pass() is None
    assert watch.missing_since == {"b:2": T0 + 3000}  # kept from the pass that first saw it missing
    assert group.calls == 5


def test_a_task_verdict_that_changes_under_the_same_connector_verdict_is_written_at_once(settings: Settings) -> None:
    """The connectors table may catch up with a lost task after the pass that judged the connector degraded (its
    connector instance lost): the row's evidence names the task at the next pass, not a refresh later."""
    now = [T0]
    group = Group("a:1", "b:2")
    watch = VerdictWatch(settings, positions=Positions(), group=group, clock=lambda: now[0])  # type: ignore[arg-type]
    early = sink_row("s1", tasks=[], task_count=0, connector_worker_id="b:2")  # no task committed yet
    write_table(settings.delta_root, CONNECTORS, [early])
    assert watch.run_pass() == "s1: - -> healthy"
    group.answer = ("a:1",)  # b:2 left
    now[0] = T0 + 1000
    assert watch.run_pass() == "s1: healthy -> degraded"
    (current,) = rows(settings, "connector_verdicts")
    assert json.loads(current["evidence"])["lost_connector"] is True and json.loads(current["tasks"]) == {}

    tasks = [{"id": 0, "state": "RUNNING", "worker_id": "a:1"}, {"id": 1, "state": "RUNNING", "worker_id": "b:2"}]
    caught_up = sink_row("s1", tasks=tasks, task_count=2, connector_worker_id="b:2")
    write_table(settings.delta_root, CONNECTORS, [caught_up], mode="overwrite")
    now[0] = T0 + 2000  # well within the refresh interval
    assert watch.run_pass() is None  # the connector's verdict did not change
    (current,) = rows(settings, "connector_verdicts")
    assert json.loads(current["evidence"])["lost_tasks"] == [1], current
    assert {task: v["verdict"] for task, v in json.loads(current["tasks"]).items()} == {"0": "healthy", "1": "degraded"}
    assert [r["verdict"] for r in rows(settings, "verdict_history")].count("degraded") == 1  # no history row for it

    now[0] = T0 + 3000
    write_count = len(DeltaTable(str(settings.delta_root / "connector_verdicts")).history())
    assert watch.run_pass() is None
    assert len(DeltaTable(str(settings.delta_root / "connector_verdicts")).history()) == write_count  # nothing new
