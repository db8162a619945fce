"""The watch job's pass (issue 35) over real Delta tables (written with deltalake) and stand-in log ends: the verdict
rows, history only on change, a deleted connector's row removed."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from connect_state.core.settings import Settings
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
    watch = VerdictWatch(settings, positions=positions, clock=lambda: now[0])  # type: ignore[arg-type]
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
