"""The Prometheus rules file shipped in the package (connect_state/alerts/prometheus-rules.yml): ``promtool check
rules`` accepts it and ``promtool test rules`` passes its tests of each rule firing and not firing
(prometheus-rules.test.yml). promtool is Debian's prometheus package (``make setup`` installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib.resources import files
from pathlib import Path

import pytest
import yaml

PROMTOOL = shutil.which("promtool")
RULES = Path(str(files("connect_state.alerts").joinpath("prometheus-rules.yml")))
TESTS = RULES.with_name("prometheus-rules.test.yml")

needs_promtool = pytest.mark.skipif(
    PROMTOOL is None and os.environ.get("CI") != "true", reason="promtool not installed (make setup installs it)"
)


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None, "promtool not installed: make setup installs Debian's prometheus package"
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@needs_promtool
def test_the_rules_file_is_valid() -> None:
    done = promtool("check", "rules", str(RULES), cwd=RULES.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 7 rules found" in done.stdout


@needs_promtool
def test_each_rule_fires_and_does_not(tmp_path: Path) -> None:
    done = promtool("test", "rules", str(TESTS), cwd=TESTS.parent)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_rule_has_a_firing_and_a_silent_case() -> None:
    rules = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}
    cases = [case for test in yaml.safe_load(TESTS.read_text())["tests"] for case in test["alert_rule_test"]]
    fires = {case["alertname"] for case in cases if case["exp_alerts"]}
    silent = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert fires == rules and silent == rules


@needs_promtool
def test_a_broken_rule_fails_its_test(tmp_path: Path) -> None:
    """The tests can fail: a threshold moved past the tests' values makes promtool report the missing alert."""
    (tmp_path / "prometheus-rules.yml").write_text(RULES.read_text().replace("lag_seconds > 300", "lag_seconds > 900"))
    (tmp_path / "prometheus-rules.test.yml").write_text(TESTS.read_text())
    done = promtool("test", "rules", "prometheus-rules.test.yml", cwd=tmp_path)
    assert done.returncode != 0 and "ConnectStateTableLagging" in done.stdout + done.stderr
