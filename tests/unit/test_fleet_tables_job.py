"""The job keeping the fleet's tables (connect_state/spark/fleet_sync.py, jobs/fleet_tables.py; issue 37): run for each
cluster of the settings, as ``connect-state-jobs`` runs it, it lists each cluster's files in that cluster's partition;
off, or with a setting that cannot work, it says so."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from connect_state.core.clusters import clusters
from connect_state.core.errors import ConfigError, DeltaWriteError
from connect_state.core.settings import Settings, load_settings
from connect_state.spark.fleet_sync import FleetTablesJob
from connect_state.tables import small_writes
from connect_state.tables.fleet_tables import ClusterPartition
from connect_state.tables.schemas import ACTIVE_TOPICS, CONNECTORS, TABLE_PROPERTIES
from jobs.fleet_tables import main
from tests.unit.helpers import local_clusters


def two_clusters(tmp_path: Path, **more: str) -> Settings:
    return local_clusters(tmp_path, "billing", **more)


def write_connectors(settings: Settings, *names: str) -> None:
    path = str(settings.delta_root / CONNECTORS.name)
    small_writes.open_or_create(path, CONNECTORS, TABLE_PROPERTIES)
    small_writes.append(pa.Table.from_pylist([{"name": name} for name in names], schema=CONNECTORS.schema), path)


def run_once(settings: Settings) -> None:
    for cluster in clusters(settings):
        run = FleetTablesJob().start(None, cluster.settings, True, None)
        assert [task.run(threading.Event()) for task in run.tasks] == [0]


def fleet_connectors(settings: Settings) -> list[tuple[str, str]]:
    table = DeltaTable(str(settings.fleet_delta_root / CONNECTORS.name))
    rows = QueryBuilder().register("c", table).execute("SELECT cluster, name FROM c").read_all()
    return sorted((row["cluster"], row["name"]) for row in pa.table(rows).to_pylist())


def test_each_clusters_run_lists_its_own_tables_files(tmp_path: Path) -> None:
    settings = two_clusters(tmp_path)
    main_cluster, billing = clusters(settings)
    write_connectors(main_cluster.settings, "orders", "twin")
    write_connectors(billing.settings, "twin")
    run_once(settings)
    assert fleet_connectors(settings) == [("billing", "twin"), ("connect-main", "orders"), ("connect-main", "twin")]
    assert settings.fleet_delta_root == settings.delta_root / "fleet"

    write_connectors(billing.settings, "invoices")
    run_once(settings)
    assert ("billing", "invoices") in fleet_connectors(settings)


def test_off_it_writes_nothing(tmp_path: Path) -> None:
    settings = two_clusters(tmp_path, **{"fleet.tables": "off"})
    write_connectors(settings, "orders")
    run_once(settings)
    assert not (tmp_path / "delta" / "fleet").exists()


def test_one_cluster_keeps_them_only_when_asked(tmp_path: Path) -> None:
    settings = load_settings(overrides={"delta.root": str(tmp_path / "delta")}, environ={})
    write_connectors(settings, "orders")
    run_once(settings)
    assert not (tmp_path / "delta" / "fleet").exists()  # auto: one cluster
    run_once(settings.with_overrides(**{"fleet.tables": "on"}))
    assert fleet_connectors(settings) == [("connect-cluster", "orders")]  # the default cluster's id filled in


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"fleet.sync.interval.ms": "0"}, "fleet.sync.interval.ms: must be at least 1"),
        ({"fleet.tables": "on", "fleet.delta.root": "dbfs:/fleet"}, "deltalake, which cannot commit to dbfs:/fleet"),
        ({"fleet.tables": "sometimes"}, "fleet.tables: expected one of auto, on, off"),
        ({"fleet.delta.root": "DELTA_ROOT"}, "is delta.root; the fleet's tables go apart"),
        ({"clusters.billing.fleet.tables": "off"}, "clusters.billing.fleet.tables"),
    ],
)
def test_settings_that_cannot_work_are_refused(tmp_path: Path, overrides: dict[str, str], said: str) -> None:
    given = {key: value.replace("DELTA_ROOT", str(tmp_path / "delta")) for key, value in overrides.items()}
    with pytest.raises(ConfigError, match=said):
        FleetTablesJob().check(two_clusters(tmp_path, **given))


def test_auto_on_a_store_deltalake_cannot_commit_to_keeps_none(tmp_path: Path) -> None:
    settings = two_clusters(tmp_path, **{"fleet.delta.root": "dbfs:/fleet"})
    FleetTablesJob().check(settings)  # a warning, no error
    run_once(settings)


def test_forget_removes_a_cluster_the_settings_no_longer_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = two_clusters(tmp_path)
    main_cluster, billing = clusters(settings)
    write_connectors(main_cluster.settings, "orders")
    write_connectors(billing.settings, "twin")
    run_once(settings)
    args = ["--set", f"delta.root={tmp_path / 'delta'}", "--set", "connect.group.id=connect-main"]

    assert main([*args, "--forget", "connect-main"]) == 2  # still watched: refused
    assert "cluster connect-main is still watched" in capsys.readouterr().err
    assert main([*args, "--forget", "billing"]) == 0
    assert "connectors: 1 files of cluster billing removed" in capsys.readouterr().out
    assert fleet_connectors(settings) == [("connect-main", "orders")]


def test_a_failed_table_fails_the_catch_up_pass_and_the_others_are_kept(tmp_path: Path) -> None:
    settings = two_clusters(tmp_path)
    main_cluster, billing = clusters(settings)
    write_connectors(main_cluster.settings, "orders")
    write_connectors(billing.settings, "twin")
    # A table that is no fleet table where the fleet's connectors should be (refused at each pass), beside
    # the fleet's active_topics, which the pass still writes.
    small_writes.open_or_create(str(settings.fleet_delta_root / CONNECTORS.name), CONNECTORS, TABLE_PROPERTIES)
    small_writes.open_or_create(
        str(main_cluster.settings.delta_root / ACTIVE_TOPICS.name), ACTIVE_TOPICS, TABLE_PROPERTIES
    )
    rows = pa.Table.from_pylist([{"connector": "orders", "topic": "t"}], schema=ACTIVE_TOPICS.schema)
    small_writes.append(rows, str(main_cluster.settings.delta_root / ACTIVE_TOPICS.name))

    run = FleetTablesJob().start(None, main_cluster.settings, True, None)
    assert [task.run(threading.Event()) for task in run.tasks] == [1]  # a catch-up run says it failed

    fleet = DeltaTable(str(settings.fleet_delta_root / ACTIVE_TOPICS.name))
    listed = QueryBuilder().register("t", fleet).execute("SELECT cluster, connector FROM t").read_all()
    assert pa.table(listed).to_pylist() == [{"cluster": "connect-main", "connector": "orders"}]  # the other one synced


def test_a_fleet_table_removed_under_a_running_job_is_built_again(tmp_path: Path) -> None:
    settings = two_clusters(tmp_path)
    main_cluster, billing = clusters(settings)
    write_connectors(main_cluster.settings, "orders")
    write_connectors(billing.settings, "twin")
    partition = ClusterPartition(
        main_cluster.settings.delta_root, settings.fleet_delta_root, main_cluster.id, tables=(CONNECTORS,)
    )
    partition.sync()
    shutil.rmtree(settings.fleet_delta_root / CONNECTORS.name)
    write_connectors(main_cluster.settings, "invoices")

    with pytest.raises(DeltaWriteError, match="connectors failed"):
        partition.sync()  # the table it had open is gone
    partition.sync()  # opened again: built from the cluster's files

    assert fleet_connectors(settings) == [("connect-main", "invoices"), ("connect-main", "orders")]
