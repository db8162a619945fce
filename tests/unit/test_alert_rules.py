"""The alert rules file (connect_state/alerts/rules.py): what it accepts, and the error, with its line, otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_state.alerts.rules import ConditionKind, Rule, Severity, load_rules, parse_duration, parse_rules
from connect_state.core.errors import ConfigError
from connect_state.verdicts.vocabulary import Verdict

GOOD = """\
rules:
  - name: Stuck
    when: verdict
    verdicts: [stalled, failed]
    for: 90s
    connectors: "orders-*"
    severity: critical
    summary: "{connector} is {verdict}"
  - name: Lost
    when: data_loss
    window: 2h
"""


def test_a_rules_file() -> None:
    assert parse_rules(GOOD, "r.yml") == [
        Rule(
            name="Stuck",
            when=ConditionKind.VERDICT,
            for_ms=90_000,
            connectors="orders-*",
            severity=Severity.CRITICAL,
            verdicts=frozenset({Verdict.STALLED, Verdict.FAILED}),
            summary="{connector} is {verdict}",
        ),
        Rule(name="Lost", when=ConditionKind.DATA_LOSS, window_ms=7_200_000),
    ]


def test_the_shipped_rules_load() -> None:
    rules = load_rules(None)
    assert {rule.when for rule in rules} == set(ConditionKind)
    unhealthy = next(rule for rule in rules if rule.when == ConditionKind.VERDICT)
    assert unhealthy.verdicts == {Verdict.FAILED, Verdict.STALLED, Verdict.FLAPPING, Verdict.DROPPING, Verdict.DEGRADED}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules:\n  - name: A\n    when: verdict\n    verdicts: [stalled]\n    for: soon\n",
         "r.yml: line 5: for: expected a duration such as 30s, 2m or 1h, got 'soon'"),
        ("rules:\n  - name: A\n    when: verdict\n    verdicts: [stuck]\n",
         "r.yml: line 4: verdicts must be one of failed, flapping,"),
        ("rules:\n  - name: A\n    when: sometimes\n",
         "r.yml: line 3: when must be one of verdict, cleanup_failed, heartbeat_failed, data_loss, got 'sometimes'"),
        ("rules:\n  - name: A\n    when: data_loss\n    severty: critical\n",
         "r.yml: line 4: unknown key 'severty'"),
        ("rules:\n  - name: A\n    when: verdict\n", "r.yml: line 2: a verdict rule needs 'verdicts'"),
        ("rules:\n  - name: A\n    when: data_loss\n    verdicts: [failed]\n",
         "r.yml: line 4: verdicts is for rules with when: verdict"),
        ("rules:\n  - when: data_loss\n", "r.yml: line 2: a rule needs 'name'"),
        ("rules:\n  - name: A\n    when: data_loss\n  - name: A\n    when: cleanup_failed\n",
         "r.yml: line 2: rule 'A' is defined more than once"),
        ("rules:\n  - name: a b\n    when: data_loss\n", "r.yml: line 2: name 'a b' must match"),
        ("rules:\n  - name: A\n    when: [data_loss\n", "r.yml: line 4: not YAML"),
        ("rule:\n  - name: A\n", "r.yml: line 1: unknown key 'rule'"),
    ],
)  # fmt: skip
def test_an_error_names_the_file_and_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_rules(text, "r.yml")
    assert str(raised.value).startswith(message), str(raised.value)


def test_a_missing_file_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^alerts.rules.file: cannot read .*/none.yml"):
        load_rules(tmp_path / "none.yml")


@pytest.mark.parametrize(("text", "ms"), [("500ms", 500), ("30s", 30_000), ("2m", 120_000), ("1h", 3_600_000),
                                          ("1d", 86_400_000), ("45", 45_000)])  # fmt: skip
def test_durations(text: str, ms: int) -> None:
    assert parse_duration(text, "for") == ms
