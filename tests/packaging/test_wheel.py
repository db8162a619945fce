"""The wheel stands alone: built from the checkout, installed into a fresh virtualenv outside it, its console scripts
run with the defaults shipped inside the package, and it puts nothing named ``api`` or ``jobs`` at the top of
site-packages.

The fresh virtualenv gets the wheel with ``--no-deps``; its dependencies (pyspark, flask, ...) come from the project's
virtualenv through a ``.pth`` line naming that site-packages directory. Python processes ``.pth`` files only in its own
site directories, so the project's editable-install hook (a ``.pth`` file in that directory) is not run, and
``connect_state`` can only come from the wheel: the test also checks that it does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPTS = (
    "connect-state-api",
    "connect-state-jobs",
    "connect-state-active-topics",
    "connect-state-connector-states",
    "connect-state-offsets",
    "connect-state-cleanup",
    "connect-state-heartbeats",
    "connect-state-stack",
    "connect-state-demo",
)


def source_packages() -> set[str]:
    """Every package of the source tree, under the name it installs as (pyproject.toml's package-dir mapping)."""
    mapped = {"api": "connect_state.api", "jobs": "connect_state.jobs", "conf": "connect_state.conf"}
    found = set()
    for init in REPO_ROOT.glob("*/**/__init__.py"):
        parts = init.parent.relative_to(REPO_ROOT).parts
        if parts[0] in mapped:
            found.add(".".join((mapped[parts[0]], *parts[1:])))
        elif parts[0] == "connect_state":
            found.add(".".join(parts))
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(REPO_ROOT),
        ],
        check=True,
        cwd=out,
        timeout=300,
    )
    (built,) = out.glob("connect_state-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv, outside the checkout, with only the wheel installed (dependencies borrowed, see above)."""
    env_dir = tmp_path_factory.mktemp("fresh-venv")
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "borrowed-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        timeout=300,
    )
    return env_dir


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("CONNECT_STATE_", "PYTHON", "VIRTUAL_ENV"))}


def test_wheel_installs_nothing_named_api_or_jobs_at_the_top(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        top_level = {name.split("/")[0] for name in archive.namelist()}
        names = set(archive.namelist())
    assert {name for name in top_level if not name.endswith(".dist-info")} == {"connect_state"}
    assert "connect_state/api/server.py" in names
    assert "connect_state/jobs/all.py" in names
    assert "connect_state/conf/connect-state.properties" in names


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
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout


def test_installed_package_finds_its_shipped_defaults(fresh_env: Path, tmp_path: Path) -> None:
    code = (
        "import connect_state, connect_state.settings as s;"
        "print(connect_state.__file__);"
        "print(s.load_settings(environ={}).status_storage_topic)"
    )
    result = subprocess.run(
        [str(fresh_env / "bin" / "python"), "-c", code],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    package_file, status_topic = result.stdout.split()
    assert Path(package_file).is_relative_to(fresh_env), "connect_state must come from the wheel, not the checkout"
    assert status_topic == "connect-status"
