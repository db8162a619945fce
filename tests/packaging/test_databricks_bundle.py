"""The Databricks bundle (databricks.yml) deploys what the tests build: its wheel task's entry point is a console
script of the built wheel, its parameters parse with the job's own argument parser into settings whose tables and
checkpoints are on cloud storage, one run at a time, on a schedule.

No Databricks workspace is reached: the bundle is read with PyYAML and its ``${var.*}`` references are resolved from
its variables' defaults (and sample values for those without one), as ``databricks bundle validate`` would; its
resources (the job, the schema, the volume) are parsed with Databricks' own typed models of them (the
``databricks-bundles`` package), which reject a field Databricks does not know, misspelt or misplaced.
"""

from __future__ import annotations

import configparser
import fnmatch
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from databricks.bundles.jobs import Job
from databricks.bundles.schemas import Schema
from databricks.bundles.volumes import Volume, VolumeType

from connect_state.core.settings import load_settings
from connect_state.jobs.all import parser as jobs_parser

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLE_VALUES = {"bootstrap_servers": "broker-1:9092,broker-2:9092"}
_VAR = re.compile(r"\$\{var\.([A-Za-z0-9_]+)\}")


def resolve(value: Any, variables: dict[str, str]) -> Any:
    """``value`` with every ``${var.name}`` replaced (repeatedly: defaults may refer to other variables)."""
    if isinstance(value, dict):
        return {k: resolve(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, variables) for v in value]
    if isinstance(value, str):
        for _ in range(10):
            replaced = _VAR.sub(lambda m: variables[m.group(1)], value)
            if replaced == value:
                break
            value = replaced
    return value


@pytest.fixture(scope="module")
def bundle() -> dict[str, Any]:
    raw = yaml.safe_load((REPO_ROOT / "databricks.yml").read_text(encoding="utf-8"))
    variables = {name: str(spec.get("default", "")) for name, spec in raw["variables"].items()}
    missing = {name for name, spec in raw["variables"].items() if "default" not in spec}
    assert missing == set(SAMPLE_VALUES), "variables without a default must be given at deploy time"
    variables.update(SAMPLE_VALUES)
    return resolve(raw, variables)


@pytest.fixture(scope="module")
def task(bundle: dict[str, Any]) -> dict[str, Any]:
    (job,) = bundle["resources"]["jobs"].values()
    (only,) = job["tasks"]
    return only


def console_scripts(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        entry_points = configparser.ConfigParser()
        entry_points.read_string(archive.read(name).decode())
    return dict(entry_points["console_scripts"])


def test_the_resources_are_what_databricks_accepts(bundle: dict[str, Any]) -> None:
    resources = bundle["resources"]
    assert set(resources) == {"jobs", "schemas", "volumes"}
    (job,) = (Job.from_dict(spec) for spec in resources["jobs"].values())
    (schema,) = (Schema.from_dict(spec) for spec in resources["schemas"].values())
    (volume,) = (Volume.from_dict(spec) for spec in resources["volumes"].values())
    assert job.max_concurrent_runs == 1 and job.schedule is not None
    (task,) = job.tasks
    assert task.python_wheel_task is not None and task.python_wheel_task.entry_point == "connect-state-jobs"
    assert (schema.catalog_name, volume.volume_type) == ("main", VolumeType.MANAGED)
    with pytest.raises(ValueError, match="max_concurent_runs"):  # the models do reject what they do not know
        Job.from_dict({**resources["jobs"]["connect_state"], "max_concurent_runs": 1})


def test_one_scheduled_run_at_a_time(bundle: dict[str, Any]) -> None:
    (job,) = bundle["resources"]["jobs"].values()
    assert job["max_concurrent_runs"] == 1  # one writer per checkpoint
    assert job["schedule"]["quartz_cron_expression"] and job["schedule"]["pause_status"] == "UNPAUSED"
    (cluster,) = job["job_clusters"]
    assert "spark.sql.shuffle.partitions" in cluster["new_cluster"]["spark_conf"]


def test_the_wheel_task_runs_the_all_jobs_entry_point_of_the_built_wheel(
    bundle: dict[str, Any], task: dict[str, Any], wheel: Path
) -> None:
    wheel_task = task["python_wheel_task"]
    assert wheel_task["package_name"] == "connect_state"
    assert console_scripts(wheel)[wheel_task["entry_point"]] == "connect_state.jobs.all:main"
    (artifact,) = bundle["artifacts"].values()
    assert artifact["type"] == "whl" and "--wheel-dir dist" in artifact["build"]
    (library,) = task["libraries"]
    assert fnmatch.fnmatch(f"./dist/{wheel.name}", library["whl"])


def test_the_parameters_parse_with_the_jobs_own_parser_into_cloud_storage_settings(task: dict[str, Any]) -> None:
    args = jobs_parser().parse_args(task["python_wheel_task"]["parameters"])
    assert args.available_now is True
    settings = load_settings(args.conf_file, args.overrides, environ={})
    assert settings.bootstrap_servers == SAMPLE_VALUES["bootstrap_servers"]
    assert str(settings.delta_root) == "/Volumes/main/connect_state/state/delta"
    assert str(settings.checkpoint_root) == "/Volumes/main/connect_state/state/checkpoints"
    assert settings.kafka_client_properties == {}


def test_the_volume_is_part_of_the_bundle(bundle: dict[str, Any], task: dict[str, Any]) -> None:
    (volume,) = bundle["resources"]["volumes"].values()
    parameters = task["python_wheel_task"]["parameters"]
    root = (
        f"/Volumes/{volume['catalog_name']}/{bundle['resources']['schemas']['connect_state']['name']}/{volume['name']}"
    )
    assert f"delta.root={root}/delta" in parameters and f"checkpoint.root={root}/checkpoints" in parameters
