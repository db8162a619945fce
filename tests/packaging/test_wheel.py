"""The wheel stands alone: built from the checkout, installed into a fresh virtualenv outside it, its console scripts
run with the defaults shipped inside the package, and it puts nothing named ``api``, ``jobs`` or ``cli`` at the top
of site-packages.

The wheel and the fresh virtualenv are the session's (tests/fixtures/wheel.py): the virtualenv gets the wheel with
``--no-deps`` and borrows its dependencies from the project's virtualenv, so ``connect_state`` can only come from the
wheel: the test also checks that it does. Without a checkout the jobs find their jars from ``spark.jars.dir`` (or
``--jars`` under spark-submit): checked too.
"""

from __future__ import annotations

import subprocess
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.fixtures.wheel import clean_env

REPO_ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPTS = (
    "connect-state-api",
    "connect-state-jobs",
    "connect-state-active-topics",
    "connect-state-connector-states",
    "connect-state-offsets",
    "connect-state-cleanup",
    "connect-state-heartbeats",
    "connect-state-restarts",
    "connect-state-stack",
    "connect-state-demo",
    "connect-state-jars",
    "connect-state",  # the command line (click: "Usage:")
)


def source_packages() -> set[str]:
    """Every package of the source tree, under the name it installs as (pyproject.toml's package-dir mapping)."""
    mapped = {
        "api": "connect_state.api",
        "jobs": "connect_state.jobs",
        "cli": "connect_state.cli",
        "conf": "connect_state.conf",
    }
    found = set()
    for init in REPO_ROOT.glob("*/**/__init__.py"):
        parts = init.parent.relative_to(REPO_ROOT).parts
        if parts[0] in mapped:
            found.add(".".join((mapped[parts[0]], *parts[1:])))
        elif parts[0] == "connect_state":
            found.add(".".join(parts))
    return found


def test_wheel_installs_nothing_named_api_or_jobs_at_the_top(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        top_level = {name.split("/")[0] for name in archive.namelist()}
        names = set(archive.namelist())
    assert {name for name in top_level if not name.endswith(".dist-info")} == {"connect_state"}
    assert "connect_state/api/server.py" in names
    assert "connect_state/jobs/all.py" in names
    assert "connect_state/cli/main.py" in names
    assert "connect_state/conf/connect-state.properties" in names
    assert {"connect_state/api/static/dashboard.html", "connect_state/api/static/dashboard.js"} <= names
    assert "connect_state/password_keys.txt" in names  # connect_state/security/redaction.py reads it


def test_every_source_package_is_listed_in_pyproject() -> None:
    # setuptools would still copy an unlisted package's files into the wheel "as data" (with a warning), so the list
    # itself is what is checked.
    listed = set(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    assert source_packages() == listed


@pytest.mark.parametrize("script", CONSOLE_SCRIPTS)
def test_console_script_help_runs_from_the_wheel(fresh_env: Path, script: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [str(fresh_env / "bin" / script), "--help"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout.lower()


def test_installed_package_finds_its_shipped_defaults(fresh_env: Path, tmp_path: Path) -> None:
    code = (
        "import connect_state, connect_state.core.settings as s;"
        "print(connect_state.__file__);"
        "print(s.load_settings(environ={}).status_storage_topic)"
    )
    result = subprocess.run(
        [str(fresh_env / "bin" / "python"), "-c", code],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    package_file, status_topic = result.stdout.split()
    assert Path(package_file).is_relative_to(fresh_env), "connect_state must come from the wheel, not the checkout"
    assert status_topic == "connect-status"


def test_without_a_checkout_the_jars_come_from_a_setting(fresh_env: Path, tmp_path: Path) -> None:
    script = fresh_env / "bin" / "connect-state-jars"
    missing = subprocess.run([str(script)], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "spark.jars.dir" in missing.stderr
    lib = REPO_ROOT / "jvm" / "spark" / "lib"
    found = subprocess.run(
        [str(script), "--set", f"spark.jars.dir={lib}"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    jars = found.stdout.strip().split(",")
    assert jars == sorted(str(p.resolve()) for p in lib.glob("*.jar"))


@pytest.mark.slow
def test_a_job_session_from_the_wheel_writes_delta_with_the_jars_of_the_setting(fresh_env: Path, tmp_path: Path):
    code = (
        "import sys;"
        "from connect_state.core.settings import load_settings;"
        "from connect_state.spark.session import job_session;"
        "settings = load_settings(overrides={'spark.jars.dir': sys.argv[1]});"
        "spark = job_session('wheel-check', settings);"
        "spark.range(3).write.format('delta').save(sys.argv[2]);"
        "print(spark.read.format('delta').load(sys.argv[2]).count());"
        "spark.stop()"
    )
    env = {**clean_env(), "PYSPARK_PYTHON": str(fresh_env / "bin" / "python")}
    result = subprocess.run(
        [str(fresh_env / "bin" / "python"), "-c", code, str(REPO_ROOT / "jvm" / "spark" / "lib"), str(tmp_path / "t")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-1] == "3"
