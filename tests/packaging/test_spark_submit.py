"""spark-submit on a real cluster, as the README says: its two blocks, run as written by bash, build the jobs' packed
environment (``make cluster-env``) and submit ``jobs/all.py --available-now`` to a Spark standalone cluster (a master
and a worker JVM, executors in JVMs of their own: ``tests/fixtures/spark_cluster.py``) with the environment through
``--archives``, against the session's broker, with its tables and checkpoints in a bucket of the session's
S3-compatible server; the tables then answer like the Connect worker.

The values the README leaves to its reader come from the environment: ``$SPARK_MASTER``, ``$BOOTSTRAP_SERVERS``,
``$DELTA_ROOT``, ``$CHECKPOINT_ROOT``, and the S3 endpoint (``CONNECT_STATE_STORAGE_*``) and credentials (``AWS_*``), as
the README says. The driver runs the Python the README unpacks from the archive (nothing installed in it but what
``make cluster-env`` packs); ``spark-submit`` is the pinned pyspark's, found on the ``PATH`` like a cluster's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.dev.s3_server import S3Server
from tests.fixtures.s3 import TEST_BUCKET
from tests.fixtures.spark_cluster import SparkCluster
from tests.fixtures.wheel import clean_env
from tests.integration.helpers import api_client, unique

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_MARKER = "<!-- cluster-env: tests/packaging/test_spark_submit.py runs the next block as written -->"
SUBMIT_MARKER = "<!-- spark-submit: tests/packaging/test_spark_submit.py runs the next block as written -->"
BUILD_TIMEOUT_S = 900
SUBMIT_TIMEOUT_S = 900
WAIT_S = 90.0
DRIVER_ENV = REPO_ROOT / "build" / "driver-env"


def readme_block(marker: str) -> str:
    """The fenced bash block that follows ``marker`` in the README."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(re.escape(marker) + r"\s*```bash\n(.*?)\n```", text, re.DOTALL)
    assert match, f"README.md has no bash block after {marker}"
    return match.group(1)


def run_block(block: str, env: dict[str, str], log: Path, timeout: float) -> str:
    """Run ``block`` with bash (``-euo pipefail``) in the checkout; its output, after asserting it succeeded."""
    with log.open("w") as out:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
    output = log.read_text(errors="replace")
    assert result.returncode == 0, f"{block.splitlines()[0]} failed ({result.returncode}):\n{output[-6000:]}"
    return output


def test_the_readme_command_leaves_only_the_values_to_its_reader() -> None:
    command = readme_block(SUBMIT_MARKER)
    assert '\nspark-submit --master "$SPARK_MASTER" ' in command and "--py-files" not in command
    assert "--archives dist/connect-state-env.tar.gz#environment" in command
    assert "--conf spark.pyspark.python=./environment/bin/python" in command
    assert "--conf spark.sql.shuffle.partitions=2" in command  # what the test checks in the checkpoint
    assert "jobs/all.py --available-now" in command
    values = set(re.findall(r"\$([A-Z_]+)", command)) - {"PWD"}
    assert values == {"SPARK_MASTER", "BOOTSTRAP_SERVERS", "DELTA_ROOT", "CHECKPOINT_ROOT"}
    assert readme_block(BUILD_MARKER).split("#")[0].strip() == "make cluster-env"


@pytest.fixture(scope="module")
def cluster_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's ``make cluster-env``, run as written: the packed environment."""
    env = {**clean_env(), "PATH": os.environ.get("PATH", "")}
    output = run_block(readme_block(BUILD_MARKER), env, tmp_path_factory.mktemp("cluster-env") / "make.log",
                       BUILD_TIMEOUT_S)  # fmt: skip
    archive = REPO_ROOT / "dist" / "connect-state-env.tar.gz"
    assert archive.is_file(), output[-3000:]
    return archive


def test_spark_submit_of_the_readme_on_a_standalone_cluster_fills_a_bucket_that_answers_like_connect(
    cluster_env: Path,
    spark_cluster: SparkCluster,
    s3_server: S3Server,
    s3_credentials: dict[str, str],
    stack_settings: Settings,
    connect: ConnectRestClient,
    tmp_path: Path,
) -> None:
    name, topic = unique("submit-source"), unique("submit-topic")
    source_file = tmp_path / "in.txt"
    append_lines(source_file, ["one", "two", "three"])
    connect.create_connector(name, file_source_config(name, source_file, topic))
    connect.wait_for(
        lambda: connect.get(connect.connector_path(name, "offsets"))[1].get("offsets"),
        WAIT_S,
        description=f"{name} committed offsets",
    )
    connect.wait_for(lambda: connect.active_topics(name) == {topic}, WAIT_S, description=f"{name} active topics")

    storage = s3_server.storage_settings(TEST_BUCKET, unique("submit"))
    env = {
        **clean_env(),
        # spark-submit of the pinned pyspark, as a cluster's Spark puts its own on the PATH; no Python of it runs a job
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_MASTER": spark_cluster.master_url,
        "BOOTSTRAP_SERVERS": stack_settings.bootstrap_servers,
        "DELTA_ROOT": storage.pop("delta.root"),
        "CHECKPOINT_ROOT": storage.pop("checkpoint.root"),
        **{"CONNECT_STATE_" + key.upper().replace(".", "_"): value for key, value in storage.items()},
        **s3_credentials,
    }
    started = time.monotonic()
    output = run_block(readme_block(SUBMIT_MARKER), env, tmp_path / "spark-submit.log", SUBMIT_TIMEOUT_S)
    assert "catch-up: cleanup" in output, output[-3000:]  # every job ran, the last one too
    print(f"spark-submit took {time.monotonic() - started:.0f} s")

    # The application ran on the cluster: its executors in the worker's work directory, each with the archive
    # unpacked as ./environment, the Python its tasks ran.
    (app,) = spark_cluster.state()["completedapps"]  # type: ignore[misc]
    assert app["state"] == "FINISHED", app
    executor_dirs = list((spark_cluster.work_dir / app["id"]).iterdir())
    assert executor_dirs, f"no executor of {app['id']} ran on the worker"
    assert all((folder / "environment" / "bin" / "python").exists() for folder in executor_dirs), executor_dirs

    settings = stack_settings.with_overrides(
        **{"delta.root": env["DELTA_ROOT"], "checkpoint.root": env["CHECKPOINT_ROOT"]},
        **{key: value for key, value in s3_server.storage_settings().items() if key.startswith("storage.")},
    )
    prefix = env["CHECKPOINT_ROOT"].split(f"{TEST_BUCKET}/", 1)[1]
    assert f"{prefix}/connector_states/metadata" in s3_server.list_keys(TEST_BUCKET, prefix + "/")
    # spark-submit's shuffle partitions, not the console scripts' default, went into the checkpoint
    status, entry = s3_server.request("GET", f"/{TEST_BUCKET}/{prefix}/connector_states/offsets/0")
    assert status == 200 and '"spark.sql.shuffle.partitions":"2"' in entry.decode(), entry[:500]
    api = api_client(settings)
    ours = api.get("/connectors")
    status, theirs = connect.get("/connectors")
    assert (ours.status_code, sorted(ours.get_json())) == (status, sorted(theirs))
    for path in ("status", "offsets", "topics"):
        ours = api.get(f"/connectors/{name}/{path}")
        assert (ours.status_code, ours.get_json()) == connect.get(connect.connector_path(name, path)), path
    connect.delete_connector(name)


def test_a_job_console_script_without_spark_says_what_to_install(cluster_env: Path, tmp_path: Path) -> None:
    """The packed environment holds the wheel without its ``spark`` extra: no pyspark (the cluster brings it). Its
    job scripts say what to install instead of a traceback; the executors' imports (the folds) need no Spark."""
    subprocess.run(["tar", "-xzf", str(cluster_env), "-C", str(tmp_path)], check=True, timeout=300)
    python = tmp_path / "bin" / "python"
    env = clean_env()
    for script in ("connect-state-jobs", "connect-state-active-topics", "connect-state-heartbeats"):
        result = subprocess.run(
            [str(python), str(tmp_path / "bin" / script), "--help"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, (script, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
        assert "need pyspark" in result.stderr and "pip install 'connect-state[spark]'" in result.stderr, result.stderr
    imports = "import connect_state.folds.connector_states, connect_state.heartbeats.fold, connect_state.api.server"
    imports += "; print(connect_state.__file__)"
    result = subprocess.run([str(python), "-c", imports], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_relative_to(tmp_path), result.stdout  # the archive's, not the checkout's
