"""``connect-state-alerts`` refuses to start on a bad setting or rule file, exit status 2 and one line naming it
(before any Spark session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.alerts import main


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["alerts.channels=ops=pager:http://x"], "alerts.channels: channel ops: expected <kind>:<url>"),
        (["alerts.evaluation.interval.ms=0"], "alerts.evaluation.interval.ms: expected milliseconds above 0, got 0"),
        (["alerts.retry.backoff.ms=1000", "alerts.retry.backoff.max.ms=10"],
         "alerts.retry.backoff.max.ms: expected at least alerts.retry.backoff.ms"),
        (["alerts.retry.max.attempts=many"], "alerts.retry.max.attempts: expected an integer, got 'many'"),
    ],
)  # fmt: skip
def test_a_bad_setting_is_named(overrides: list[str], message: str, caplog: pytest.LogCaptureFixture) -> None:
    args = [item for override in overrides for item in ("--set", override)]
    assert main(args) == 2
    assert message in caplog.text


def test_a_bad_rules_file_is_named_with_its_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text("rules:\n  - name: Stuck\n    when: verdict\n    verdicts: [stuck]\n")
    assert main(["--set", f"alerts.rules.file={rules}"]) == 2
    assert f"{rules}: line 4: verdicts must be one of failed, flapping, stalled" in caplog.text
