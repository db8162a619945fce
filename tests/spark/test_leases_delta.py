"""The ``leases`` table on Delta (connect_state/spark/leases.py) in the test session's Spark, without a broker: the
conditional MERGE is a compare-and-set, rows round-trip, writers racing from two threads leave one holder, and the
API reads the table with ``deltalake``."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from connect_state.api import create_app
from connect_state.leases import Lease, LeaseTiming
from connect_state.settings import Settings, load_settings
from connect_state.spark.leases import DeltaLeaseStore, LeaseKeeper
from connect_state.tables import LEASES

pytestmark = pytest.mark.spark


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(overrides={"delta.root": str(tmp_path / "delta")}, environ={})


def test_a_write_applies_only_to_the_row_it_was_decided_on(spark, settings):
    store = DeltaLeaseStore(spark, settings)
    assert store.read("cleanup") is None
    first = Lease("cleanup", "a", 1, 1_000, 1_000, 31_000)
    store.write(None, first)
    assert store.read("cleanup") == first
    store.write(None, Lease("cleanup", "b", 1, 2_000, 2_000, 32_000))  # "insert if absent": there is a row
    assert store.read("cleanup") == first
    stale = Lease("cleanup", "a", 1, 1_000, 1_000, 30_000)  # not the row in the table
    store.write(stale, Lease("cleanup", "b", 2, 40_000, 40_000, 70_000))
    assert store.read("cleanup") == first
    taken = Lease("cleanup", "b", 2, 40_000, 40_000, 70_000)
    store.write(first, taken)
    assert store.read("cleanup") == taken
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{store.path}`").first()
    assert detail.properties["delta.isolationLevel"] == "Serializable"


def test_keepers_racing_from_two_threads_leave_one_holder(spark, settings):
    timing = LeaseTiming(60_000, 10_000)
    keepers = [LeaseKeeper(DeltaLeaseStore(spark, settings), "heartbeats", timing, f"h{i}") for i in range(2)]
    keepers[0].store.ensure()
    results: dict[str, bool] = {}
    start = threading.Barrier(2)

    def race(keeper: LeaseKeeper) -> None:
        start.wait()
        results[keeper.holder] = keeper.try_acquire()

    threads = [threading.Thread(target=race, args=(k,)) for k in keepers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(results.values()) == [False, True], results
    winner = next(k for k in keepers if results[k.holder])
    loser = next(k for k in keepers if not results[k.holder])
    current = winner.store.read("heartbeats")
    assert current is not None and current.holder == winner.holder and current.epoch == 1
    winner.fence()
    assert winner.renew()
    assert not loser.try_acquire()
    winner.release()
    assert loser.try_acquire() and loser.epoch == 2

    body = create_app(settings).test_client().get("/leases").get_json()
    (lease,) = body["leases"]
    assert lease["name"] == "heartbeats" and lease["holder"] == loser.holder and lease["epoch"] == 2
    assert lease["state"] == "held"
    assert LEASES.name in str(winner.store.path)
