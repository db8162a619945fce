"""Settings as operators write them (issue 32 §4): layered files, every documented key by file, environment and
``--set``, Kafka client settings from a Java properties file, ``${env:...}``/``${file:...}`` references, and one line
naming what is wrong."""

from __future__ import annotations

import re
from dataclasses import fields
from enum import StrEnum
from pathlib import Path
from typing import Any

import javaproperties
import pytest

from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings, default_conf_file, env_name, load_settings
from connect_state.spark.session import main as jars_main

ROOT = Path(__file__).resolve().parents[2]
FIELDS = {f.name.replace("_", "."): f for f in fields(Settings) if f.name not in ("raw", "environ")}
DEFAULTS = load_settings(environ={})
SPECIAL = {  # keys whose value is checked when the settings are built
    "storage.s3.endpoint": "https://s3.example.com",
    "kafka.client.config.file": str(ROOT / "conf" / "connect-state.properties"),  # any readable properties file
    "history.retention.ms.by.table": "heartbeats=604800000",
}


def readme_keys() -> set[str]:
    """The keys of the README's configuration table (first column; ``local.*`` stands for every ``local.`` key)."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    keys: set[str] = set()
    for row in re.findall(r"^\| (`.*?) \|", section, re.MULTILINE):
        for key in re.findall(r"`([^`]+)`", row):
            keys |= {k for k in FIELDS if k.startswith(key[:-1])} if key.endswith(".*") else {key}
    return keys


def conf_keys() -> set[str]:
    with default_conf_file().open("r", encoding="utf-8") as fp:
        return set(javaproperties.load(fp))


def sample(key: str) -> str:
    """A valid value of ``key`` that differs from its default."""
    if key in SPECIAL:
        return SPECIAL[key]
    default: Any = getattr(DEFAULTS, FIELDS[key].name)
    if isinstance(default, bool):
        return str(not default).lower()
    if isinstance(default, int):
        return str(default + 1)
    if isinstance(default, StrEnum):
        return next(member.value for member in type(default) if member != default)
    if isinstance(default, dict):
        return "com.example.Other=sink"
    return f"other-{key}"


def test_the_documented_keys_are_the_settings() -> None:
    assert conf_keys() == set(FIELDS)
    assert readme_keys() == set(FIELDS)


@pytest.mark.parametrize("way", ["file", "env", "set"])
@pytest.mark.parametrize("key", sorted(set(FIELDS) | readme_keys() | conf_keys()))
def test_every_documented_key_can_be_set_each_way(key: str, way: str, tmp_path: Path) -> None:
    value = sample(key)
    if way == "file":  # a file holding this one key: the shipped defaults give the rest
        conf = tmp_path / "mine.properties"
        conf.write_text(javaproperties.dumps({key: value}, timestamp=False), encoding="utf-8")
        settings = load_settings(conf, environ={})
    elif way == "env":
        settings = load_settings(environ={env_name(key): value})
    else:
        settings = load_settings(overrides=[f"{key}={value}"], environ={})
    name = FIELDS[key].name
    assert settings.raw[key] == value
    assert getattr(settings, name) != getattr(DEFAULTS, name)
    assert getattr(settings, name) == getattr(load_settings(overrides={key: value}, environ={}), name)


def test_a_conf_file_of_overrides_is_layered_over_the_defaults(tmp_path: Path) -> None:
    conf = tmp_path / "mine.properties"
    conf.write_text("# only what differs\nbootstrap.servers : broker-1:9092\napi.port 9999\n", encoding="utf-8")
    settings = load_settings(conf, environ={"CONNECT_STATE_API_PORT": "9998"})
    assert (settings.bootstrap_servers, settings.api_port) == ("broker-1:9092", 9998)
    assert settings.status_storage_topic == DEFAULTS.status_storage_topic == "connect-status"
    assert load_settings(environ={"CONNECT_STATE_CONF_FILE": str(conf)}).bootstrap_servers == "broker-1:9092"


def test_kafka_client_settings_from_a_java_properties_file(tmp_path: Path) -> None:
    client = tmp_path / "client.properties"
    client.write_text(
        "# as for kafka-console-consumer --command-config\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism:PLAIN\n"
        "ssl.enabled.protocols TLSv1.2,TLSv1.3\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="u\\u00e9" \\\n'
        '    password="${env:KAFKA_PASSWORD}";\n'
        "! another comment\n"
        "client.id=from-file\n",
        encoding="utf-8",
    )
    settings = load_settings(
        overrides={"kafka.client.config.file": str(client), "kafka.client.properties": "client.id=from-list"},
        environ={"KAFKA_PASSWORD": "pw"},
    )
    assert settings.kafka_client_config() == {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u\u00e9" '
        'password="pw";',
        "client.id": "from-list",  # kafka.client.properties wins over the file
    }
    assert "pw" not in settings.raw.values()  # the settings keep the reference, not the secret


def test_references_are_resolved_in_any_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = tmp_path / "secrets.properties"
    secrets.write_text("topic = from-file\n", encoding="utf-8")
    settings = load_settings(
        overrides={"status.storage.topic": f"${{file:{secrets}:topic}}", "api.connect.commit": "c-${env:COMMIT}-x"},
        environ={"COMMIT": "abc"},
    )
    assert (settings.status_storage_topic, settings.api_connect_commit) == ("from-file", "c-abc-x")
    monkeypatch.chdir(tmp_path)  # a relative path, from the directory the command runs in
    relative = load_settings(overrides={"api.connect.commit": "${file:secrets.properties:topic}"}, environ={})
    assert relative.api_connect_commit == "from-file"
    assert relative.raw["api.connect.commit"] == "${file:secrets.properties:topic}"


@pytest.mark.parametrize(
    ("overrides", "environ", "message"),
    [
        ({"no.such.key": "1"}, {}, "unknown setting 'no.such.key' in --set"),
        ({}, {"CONNECT_STATE_CONF_FILE": "/nonexistent/mine.properties"}, "/nonexistent/mine.properties not found"),
        ({"kafka.client.config.file": "/nonexistent/client.properties"}, {}, "kafka.client.config.file: cannot read"),
        ({"api.connect.commit": "${env:NOPE}"}, {}, "api.connect.commit: cannot resolve ${env:NOPE}: environment"),
        ({"bootstrap.servers": "${file:/nonexistent/s.properties:k}"}, {}, "bootstrap.servers: cannot resolve"),
        ({"bootstrap.servers": "${vault:secret/k:v}"}, {}, "bootstrap.servers: cannot resolve ${vault:secret/k:v}"),
    ],
)
def test_a_bad_setting_is_one_error_naming_it(overrides: dict[str, str], environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(overrides=overrides, environ=environ)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_an_unknown_key_in_the_file_and_a_missing_key_of_a_referenced_file(tmp_path: Path) -> None:
    conf = tmp_path / "mine.properties"
    conf.write_text("bootstrap.server=typo:9092\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"unknown setting 'bootstrap.server' in {conf}"):
        load_settings(conf, environ={})
    with pytest.raises(ConfigError, match=f"{conf} has no key 'password'"):
        load_settings(overrides={"api.connect.commit": f"${{file:{conf}:password}}"}, environ={})


def test_a_console_script_stops_with_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    assert jars_main(["--set", "spark.jars.dir=${env:NOPE_NOT_SET}"]) == 2
    assert capsys.readouterr().err == (
        "connect-state-jars: spark.jars.dir: cannot resolve ${env:NOPE_NOT_SET}: environment variable NOPE_NOT_SET "
        "is not set\n"
    )
