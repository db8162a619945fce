"""``connect-state availability [NAME]`` (cli/availability.py) against the fake API, with bodies made by the
library's own computation (connect_state/tables/availability.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from connect_state.cli.errors import ExitCode
from connect_state.cli.main import cli
from connect_state.tables.availability import Coverage, connector_availability, report_json, summarize
from tests.unit.fake_api import FakeApi, fake_api
from tests.unit.test_availability import LIFE, task
from tests.unit.test_cli import Run, one_error_line


@pytest.fixture
def api() -> Iterator[FakeApi]:
    with fake_api() as served:
        yield served


@pytest.fixture
def at_api(api: FakeApi, tmp_path: Path) -> Run:
    """``connect-state`` with a current context on the fake API (as tests/unit/test_cli.py's)."""
    config = str(tmp_path / "contexts.yaml")

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--config", config, *args], prog_name="connect-state")

    assert invoke("context", "set", "fake", "--url", api.url).exit_code == 0
    return invoke


T0 = 1_767_225_600_000
# LIFE and a second restart (of a task no longer committed): 1 failure, 2 restarts
REPORT = connector_availability([*LIFE, task(960, 0, "RESTARTING")], 0, 1000, Coverage(now=10_000))
BODY = {"connector": "a", **report_json(REPORT), "kept_from": None, "known_until": None}


def test_one_connector_table_with_its_timeline(api: FakeApi, at_api: Run) -> None:
    api.answer("GET", "/connectors/a/availability", 200, BODY)
    result = at_api("availability", "a", "--since", "0", "--until", "1000")
    assert result.exit_code == 0, result.output
    assert api.seen[-1].query == {"since": ["0"], "until": ["1000"]}
    lines = result.stdout.splitlines()
    assert lines[0] == "a: 1970-01-01T00:00:00.000Z .. 1970-01-01T00:00:01.000Z; unknown: not_existing 0.1s"
    assert lines[1].split() == ["RUNNING", "DEGRADED", "FAILED", "PAUSED", "STOPPED", "UNKNOWN", "FAILURES",
                                "RECOVERY", "MEAN", "WORST", "RESTARTS"]  # fmt: skip
    assert lines[2].split() == ["35.00%", "30.00%", "10.00%", "10.00%", "5.00%", "10.00%", "1", "0.2s", "0.2s", "2"]
    assert "1970-01-01T00:00:00.500Z  1970-01-01T00:00:00.600Z  0.1s  failed" in result.stdout
    assert "0.1s  unknown   not_existing" in result.stdout


def test_every_connector_and_json_yaml_as_the_api_answers(api: FakeApi, at_api: Run) -> None:
    body = {**summarize(0, 1000, [REPORT]).as_json(), "kept_from": None, "known_until": None}
    body["connectors"] = [{"connector": "a", **{k: v for k, v in report_json(REPORT).items() if k != "segments"}}]
    api.answer("GET", "/availability", 200, body)
    table = at_api("availability")
    assert table.exit_code == 0, table.output
    assert api.seen[-1].query == {}
    assert [line.split()[0] for line in table.stdout.splitlines()[1:]] == ["CONNECTOR", "a", "all"]
    assert json.loads(at_api("availability", "-o", "json").stdout) == body
    assert yaml.safe_load(at_api("availability", "-o", "yaml").stdout) == body


def test_exit_codes_of_the_api_s_refusals(api: FakeApi, at_api: Run) -> None:
    api.answer("GET", "/connectors/nope/availability", 404, {"error_code": 404, "message": "Connector nope not found"})
    api.answer("GET", "/availability", 400, {"error_code": 400, "message": "Invalid window: since ..."})
    missing = at_api("availability", "nope")
    assert missing.exit_code == ExitCode.NOT_FOUND
    assert "Connector nope not found" in one_error_line(missing)
    assert at_api("availability", "--since", "2", "--until", "1").exit_code == ExitCode.REFUSED
