"""The periodic jobs' tables cleaned after their passes (connect_state/spark/retention.py ``periodic_retention``):
a real ``deltalake`` table, the rows the policy names deleted, the open ones kept."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from connect_state.core.settings import load_settings
from connect_state.spark.retention import periodic_retention
from connect_state.spark.streaming import PeriodicTask
from connect_state.tables.schemas import ALERTS

DAY_S = 86_400


def test_the_alerts_job_cleans_resolved_alerts_after_its_pass(tmp_path: Path) -> None:
    settings = load_settings(
        overrides={
            "delta.root": str(tmp_path / "delta"),
            "checkpoint.root": str(tmp_path / "checkpoints"),
            "history.retention.ms": str(7 * DAY_S * 1000),
        },
        environ={},
    )
    now = dt.datetime.now(dt.UTC)
    rows = [
        {"id": "resolved-long-ago", "state": "resolved", "updated_at": now - dt.timedelta(days=30)},
        {"id": "firing-long-ago", "state": "firing", "updated_at": now - dt.timedelta(days=30)},
        {"id": "resolved-today", "state": "resolved", "updated_at": now},
    ]
    table = pa.Table.from_pylist([{name: row.get(name) for name in ALERTS.column_names} for row in rows], ALERTS.schema)
    write_deltalake(tmp_path / "delta" / ALERTS.name, table)
    passes: list[int] = []
    log = logging.getLogger("test.alerts")
    task = PeriodicTask("alerts", lambda: passes.append(1), 60, True, log, periodic_retention(settings, "alerts"))
    assert task.run(threading.Event()) == 0 and passes == [1]
    left = DeltaTable(str(tmp_path / "delta" / ALERTS.name)).to_pyarrow_table().column("id").to_pylist()
    assert sorted(left) == ["firing-long-ago", "resolved-today"]
