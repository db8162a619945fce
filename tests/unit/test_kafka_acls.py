"""The Kafka ACLs of ``connect_state/security/kafka_acls.py``: the README shows exactly what the module renders, and
the entries follow the settings (topic names, optional features). That they are enough and needed is
``tests/integration/test_kafka_acls.py``'s."""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_state.core.settings import load_settings
from connect_state.security.kafka_acls import (
    DOCUMENTED_SETTINGS,
    Component,
    ConnectorNames,
    Operation,
    PatternType,
    ResourceType,
    acl_commands,
    acl_table,
    main,
    required_acls,
)

README = Path(__file__).resolve().parents[2] / "README.md"


def _acls(**overrides: str):
    return required_acls(load_settings(overrides=overrides, environ={}), ConnectorNames((), (), ()))


def test_readme_shows_the_rendered_table_and_commands() -> None:
    acls = required_acls(load_settings(overrides=DOCUMENTED_SETTINGS, environ={}))
    readme = README.read_text(encoding="utf-8")
    assert acl_table(acls) in readme
    assert acl_commands(acls) in readme


def test_every_component_has_acls_and_names_follow_the_settings() -> None:
    acls = _acls(**{"status.storage.topic": "my-status", "heartbeat.records.topic": "my-beats"})
    assert {acl.component for acl in acls} == set(Component)
    status = {acl.component for acl in acls if "my-status" in acl.names}
    assert status == {Component.JOBS, Component.API, Component.CLEANUP, Component.HEARTBEATS}
    assert not any("connect-status" in acl.names for acl in acls)
    beats = [acl for acl in acls if "my-beats" in acl.names]
    assert [(acl.component, acl.operations) for acl in beats] == [(Component.HEARTBEATS, (Operation.WRITE,))]
    created = _acls(**{"heartbeat.records.topic": "my-beats", "heartbeat.topics.create": "true"})
    beats = [acl for acl in created if "my-beats" in acl.names]
    assert [(acl.component, acl.operations) for acl in beats] == [
        (Component.HEARTBEATS, (Operation.CREATE, Operation.WRITE))
    ]


def test_optional_features_add_their_acls() -> None:
    plain = _acls()
    assert not any(acl.resource is ResourceType.TRANSACTIONAL_ID for acl in plain)
    assert not any("audit" in name for acl in plain for name in acl.names)
    featured = _acls(**{"exactly.once.source.support": "enabled", "api.audit.topic": "audit", "connect.group.id": "w"})
    [transactional] = [acl for acl in featured if acl.resource is ResourceType.TRANSACTIONAL_ID]
    [workers] = [acl for acl in featured if "w" in acl.names]  # the watch job describes the workers' group
    assert (workers.component, workers.resource, workers.operations) == (
        Component.JOBS,
        ResourceType.GROUP,
        (Operation.DESCRIBE,),
    )
    assert (transactional.names, transactional.pattern) == (("w-",), PatternType.PREFIXED)
    assert any(acl.names == ("audit",) and acl.operations == (Operation.WRITE,) for acl in featured)
    unfollowed = _acls(**{"api.follow.consumer.offsets": "false"})
    [offsets] = [a for a in unfollowed if a.component is Component.API and "__consumer_offsets" in a.names]
    assert offsets.operations == (Operation.DESCRIBE,)


def test_connector_names_given_replace_the_placeholders_and_empty_ones_drop_the_entry() -> None:
    settings = load_settings(environ={})
    placeholders = acl_commands(required_acls(settings))
    assert '--topic "$SINK_TOPIC"' in placeholders and '--group "$OVERRIDE_GROUP"' in placeholders
    named = required_acls(settings, ConnectorNames(("own offsets",), ("orders",), ()))
    rendered = acl_commands(named, dict.fromkeys(Component, "User:x"), bootstrap="broker-1:9093")
    assert "--topic 'own offsets'" in rendered and "--topic orders" in rendered and "$" not in rendered
    literal = [acl.names for acl in named if acl.resource is ResourceType.GROUP and acl.pattern is PatternType.LITERAL]
    assert literal == [(settings.connect_group_id,)]  # no override group left, only the workers' own (watch job)


def test_the_command_line_prints_commands_for_the_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--set", "config.storage.topic=cfg", "--principal", "api=User:cs-api", "--sink-topic", "orders"]) == 0
    out = capsys.readouterr().out
    assert "--allow-principal User:cs-api \\\n  --operation Read --operation Write --topic cfg" in out
    assert "--topic orders" in out and '"$OWN_OFFSETS_TOPIC"' in out  # not given: still a placeholder
    with pytest.raises(SystemExit) as exit_info:
        main(["--principal", "nobody=User:x"])
    assert exit_info.value.code == 2
