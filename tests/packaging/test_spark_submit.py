"""spark-submit, as the README says: the README's command, run as written, submits ``jobs/all.py --available-now`` with
the built wheel as ``--py-files`` and the jars as ``--jars``, against the session's broker, with its tables and
checkpoints in a bucket of the session's S3-compatible server; the tables then answer like the Connect worker.

The command is taken from the README (the fenced block after the marker below), and run by bash with the values it
leaves to its reader as environment variables: ``$WHEEL``, ``$BOOTSTRAP_SERVERS``, ``$DELTA_ROOT``,
``$CHECKPOINT_ROOT``. The S3 endpoint and credentials come from the environment too (``CONNECT_STATE_STORAGE_*``,
``AWS_*``), as the README says. The driver and the executors run a Python without connect_state installed: the package
comes from the wheel only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.dev.s3_server import S3Server
from connect_state.settings import Settings
from tests.fixtures.s3 import TEST_BUCKET
from tests.fixtures.wheel import clean_env
from tests.integration.helpers import api_client, unique

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- spark-submit: tests/packaging/test_spark_submit.py runs the next block as written -->"
SUBMIT_TIMEOUT_S = 900
WAIT_S = 90.0


def readme_command() -> str:
    """The fenced bash block that follows :data:`MARKER` in the README."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(re.escape(MARKER) + r"\s*```bash\n(.*?)\n```", text, re.DOTALL)
    assert match, f"README.md has no bash block after {MARKER}"
    return match.group(1)


def test_the_readme_command_leaves_only_the_values_to_its_reader() -> None:
    command = readme_command()
    assert command.startswith("spark-submit --master ") and '--py-files "$WHEEL"' in command
    assert "--conf spark.sql.shuffle.partitions=2" in command  # what the test checks in the checkpoint
    assert "jobs/all.py --available-now" in command and '--jars "$(connect-state-jars)"' in command
    assert set(re.findall(r"\$([A-Z_]+)", command)) == {"WHEEL", "BOOTSTRAP_SERVERS", "DELTA_ROOT", "CHECKPOINT_ROOT"}


def test_spark_submit_of_the_readme_fills_a_bucket_that_answers_like_connect(
    wheel: Path,
    bare_python: Path,
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
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": str(bare_python),
        "PYSPARK_DRIVER_PYTHON": str(bare_python),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "WHEEL": str(wheel),
        "BOOTSTRAP_SERVERS": stack_settings.bootstrap_servers,
        "DELTA_ROOT": storage.pop("delta.root"),
        "CHECKPOINT_ROOT": storage.pop("checkpoint.root"),
        **{"CONNECT_STATE_" + key.upper().replace(".", "_"): value for key, value in storage.items()},
        **s3_credentials,
    }
    log = tmp_path / "spark-submit.log"
    started = time.monotonic()
    with log.open("w") as out:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", readme_command()],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=SUBMIT_TIMEOUT_S,
        )
    output = log.read_text(errors="replace")
    assert result.returncode == 0, f"spark-submit failed ({result.returncode}):\n{output[-6000:]}"
    assert "catch-up: cleanup" in output, output[-3000:]  # every job ran, the last one too
    print(f"spark-submit took {time.monotonic() - started:.0f} s")

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
