"""The alert rules: a YAML file (``alerts.rules.file``, else the rules shipped beside this module, ``rules.yml``).

::

    rules:
      - name: ConnectorUnhealthy       # the alert's name (Alertmanager's alertname)
        when: verdict                  # verdict | cleanup_failed | heartbeat_failed | data_loss
        verdicts: [failed, stalled]    # verdict rules only: the verdicts that count (Verdict's values)
        for: 2m                        # how long the condition must hold before the alert fires (default 0)
        connectors: "orders-*"         # a glob over connector names (default *)
        severity: critical             # critical | warning | info (default warning)
        window: 1h                     # data_loss only: how long a loss keeps its alert firing (default 1h)
        summary: "{connector} is {verdict}"   # {connector}, {verdict}, {subject}, {detail}

A rule file that cannot be read, is not YAML, or has a wrong key or value is a :class:`ConfigError` naming the file
and the line. Pure: no Spark, Kafka, Delta or Flask.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fnmatch import fnmatchcase
from importlib.resources import files
from pathlib import Path
from typing import Any, TypeVar

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from connect_state.core.errors import ConfigError
from connect_state.verdicts.vocabulary import Verdict

DEFAULT_RULES_NAME = "rules.yml"
_E = TypeVar("_E", bound=StrEnum)


class ConditionKind(StrEnum):
    """What a rule watches."""

    VERDICT = "verdict"
    """A connector's verdict (the ``connector_verdicts`` table) is one of the rule's verdicts."""
    CLEANUP_FAILED = "cleanup_failed"
    """A KIP-883 cleanup step of a deleted connector failed (a ``connector_deletions`` row with status failed)."""
    HEARTBEAT_FAILED = "heartbeat_failed"
    """The last heartbeat of a source partition failed or timed out (the ``heartbeats`` table)."""
    DATA_LOSS = "data_loss"
    """A query lost records before it read them (a ``data_loss`` row) within the rule's window."""


class Severity(StrEnum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"


_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)?$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, None: 1000}
_KEYS = ("name", "when", "verdicts", "for", "connectors", "severity", "window", "summary")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # Prometheus' alert name syntax


def parse_duration(text: str, where: str) -> int:
    """``90s``, ``2m``, ``1h``, ``500ms``, ``1d``, or a bare number of seconds, as milliseconds."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise ConfigError(f"{where}: expected a duration such as 30s, 2m or 1h, got {text!r}")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


@dataclass(frozen=True)
class Rule:
    name: str
    when: ConditionKind
    for_ms: int = 0
    connectors: str = "*"
    severity: Severity = Severity.WARNING
    verdicts: frozenset[Verdict] = field(default_factory=frozenset)
    window_ms: int = 3_600_000
    summary: str = ""

    def covers(self, connector: str | None) -> bool:
        """The rule applies to ``connector`` (None, a query's data loss: only the rules for every connector)."""
        return fnmatchcase(connector, self.connectors) if connector is not None else self.connectors == "*"


def default_rules_file() -> Path:
    return Path(str(files("connect_state.alerts").joinpath(DEFAULT_RULES_NAME)))


def load_rules(path: str | Path | None) -> list[Rule]:
    """The rules of the file at ``path`` (None or empty: the shipped ``rules.yml``)."""
    source = Path(path) if path else default_rules_file()
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"alerts.rules.file: cannot read {source}: {err.strerror or err}") from None
    return parse_rules(text, str(source))


def parse_rules(text: str, source: str) -> list[Rule]:
    """The rules of a rules file's ``text``; ``source`` names it in errors (with the line)."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{source}:{line}: not YAML: {getattr(err, 'problem', None) or err}") from None
    if root is None:
        return []
    body = _mapping(root, source)
    unknown = set(body) - {"rules"}
    if unknown:
        key = sorted(unknown)[0]
        raise ConfigError(f"{_at(source, body[key][0])}: unknown key {key!r} (expected rules)")
    if "rules" not in body:
        return []
    items = body["rules"][1]
    if not isinstance(items, SequenceNode):
        raise ConfigError(f"{_at(source, items)}: rules must be a list")
    rules = [_rule(node, source) for node in items.value]
    names = [rule.name for rule in rules]
    for node, rule in zip(items.value, rules, strict=True):
        if names.count(rule.name) > 1:
            raise ConfigError(f"{_at(source, node)}: rule {rule.name!r} is defined more than once")
    return rules


def _at(source: str, node: Node) -> str:
    return f"{source}: line {node.start_mark.line + 1}"


def _mapping(node: Node, source: str) -> dict[str, tuple[Node, Node]]:
    if not isinstance(node, MappingNode):
        raise ConfigError(f"{_at(source, node)}: expected a mapping")
    return {str(key.value): (key, value) for key, value in node.value}


def _scalar(node: Node, source: str, key: str) -> str:
    if not isinstance(node, ScalarNode):
        raise ConfigError(f"{_at(source, node)}: {key} must be a single value")
    return str(node.value)


def _rule(node: Node, source: str) -> Rule:
    fields_ = _mapping(node, source)
    for key, (key_node, _) in fields_.items():
        if key not in _KEYS:
            raise ConfigError(f"{_at(source, key_node)}: unknown key {key!r} (expected {', '.join(_KEYS)})")
    for required in ("name", "when"):
        if required not in fields_:
            raise ConfigError(f"{_at(source, node)}: a rule needs {required!r}")
    values = {key: value for key, (_, value) in fields_.items()}
    name = _scalar(values["name"], source, "name")
    if not _NAME.match(name):
        raise ConfigError(f"{_at(source, values['name'])}: name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
    when = _choice(values["when"], source, "when", ConditionKind)
    rule = Rule(name=name, when=when)
    changes: dict[str, Any] = {}
    if "for" in values:
        changes["for_ms"] = parse_duration(_scalar(values["for"], source, "for"), _at(source, values["for"]) + ": for")
    if "window" in values:
        where = _at(source, values["window"]) + ": window"
        changes["window_ms"] = parse_duration(_scalar(values["window"], source, "window"), where)
    if "connectors" in values:
        changes["connectors"] = _scalar(values["connectors"], source, "connectors")
    if "severity" in values:
        changes["severity"] = _choice(values["severity"], source, "severity", Severity)
    if "summary" in values:
        changes["summary"] = _scalar(values["summary"], source, "summary")
    changes["verdicts"] = _verdicts(values.get("verdicts"), when, node, source)
    return replace(rule, **changes)


def _choice(node: Node, source: str, key: str, vocabulary: type[_E]) -> _E:
    text = _scalar(node, source, key)
    try:
        return vocabulary(text.strip().lower())
    except ValueError:
        allowed = ", ".join(member.value for member in vocabulary)
        raise ConfigError(f"{_at(source, node)}: {key} must be one of {allowed}, got {text!r}") from None


def _verdicts(node: Node | None, when: ConditionKind, rule: Node, source: str) -> frozenset[Verdict]:
    if when != ConditionKind.VERDICT:
        if node is not None:
            raise ConfigError(f"{_at(source, node)}: verdicts is for rules with when: verdict")
        return frozenset()
    if node is None:
        raise ConfigError(f"{_at(source, rule)}: a verdict rule needs 'verdicts'")
    if not isinstance(node, SequenceNode) or not node.value:
        raise ConfigError(f"{_at(source, node)}: verdicts must be a non-empty list")
    return frozenset(_choice(item, source, "verdicts", Verdict) for item in node.value)


def summary_of(rule: Rule, connector: str | None, labels: Mapping[str, str], subject: str, detail: str) -> str:
    """The rule's summary with its placeholders filled (unknown placeholders stay as written)."""
    fill = {"connector": connector or "", "subject": subject, "detail": detail, **labels}
    template = rule.summary or _default_summary(rule.when)
    return re.sub(r"\{(\w+)\}", lambda m: str(fill.get(m.group(1), m.group(0))), template)


def _default_summary(when: ConditionKind) -> str:
    return {
        ConditionKind.VERDICT: "connector {connector} is {verdict}",
        ConditionKind.CLEANUP_FAILED: "cleanup of deleted connector {connector} failed at step {step}",
        ConditionKind.HEARTBEAT_FAILED: "heartbeats of connector {connector} fail ({subject})",
        ConditionKind.DATA_LOSS: "records lost before they were read: {subject}",
    }[when]
