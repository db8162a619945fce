"""Where tables and checkpoints live (connect_state/core/storage.py): local paths and object-store URIs in the settings,
and the options each side (Hadoop's S3A for the jobs, deltalake for the API) gets from the ``storage.*`` settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from connect_state.core.errors import ConfigError
from connect_state.core.settings import load_settings
from connect_state.core.storage import Location, deltalake_options, hadoop_options, storage_settings
from connect_state.tables.reader import TableReader


@pytest.mark.parametrize(
    "value",
    [
        "s3a://bucket/connect-state/delta",
        "s3://bucket/delta",
        "abfss://container@account.dfs.core.windows.net/delta",
        "gs://bucket/delta",
        "dbfs:/Volumes/main/connect_state/state/delta",
    ],
)
def test_uris_are_kept_as_they_are(value: str) -> None:
    location = Location.parse(value)
    assert str(location) == value and not location.is_local
    assert str(location / "connectors") == f"{value}/connectors"
    assert Location.parse(value + "/") == location


def test_a_uri_is_not_a_local_path() -> None:
    location = Location.parse("s3a://bucket/delta")
    assert location.scheme == "s3a" and location.name == "delta"
    with pytest.raises(TypeError):
        os.fspath(location)
    with pytest.raises(TypeError):
        Path(location)  # type: ignore[arg-type]


def test_local_paths_resolve_against_the_base_directory_as_before(tmp_path: Path) -> None:
    assert Location.parse("var/delta", tmp_path) == Location(str(tmp_path.resolve() / "var" / "delta"))
    assert Location.parse("/abs/delta", tmp_path).uri == "/abs/delta"
    assert Location.parse("file:/abs/delta").uri == "/abs/delta"
    assert Location.parse("file:///abs/delta").uri == "/abs/delta"
    local = Location.parse(str(tmp_path))
    assert local.is_local and os.fspath(local / "t") == str(tmp_path / "t") and local == tmp_path


@pytest.mark.parametrize(
    ("value", "commits"),
    [
        ("/var/lib/connect-state/delta", True),
        ("s3a://bucket/delta", True),
        ("s3://bucket/delta", True),
        ("abfss://container@account.dfs.core.windows.net/delta", True),
        ("gs://bucket/delta", True),
        ("/Volumes/main/connect_state/state/delta", False),  # Unity Catalog volume: FUSE without rename or link
        ("/Volumes", False),
        ("/dbfs/connect-state/delta", False),
        ("dbfs:/connect-state/delta", False),
        ("/volumes/not-databricks/delta", True),
    ],
)
def test_deltalake_commits_where_it_can_rename_or_put_if_absent(value: str, commits: bool) -> None:
    assert Location.parse(value).deltalake_commits is commits


@pytest.mark.parametrize("value", ["", "s3a://", "s3a:/bucket/x", "file://otherhost/x"])
def test_malformed_locations_are_refused(value: str) -> None:
    with pytest.raises(ConfigError):
        Location.parse(value)


def test_settings_take_uris_for_the_roots_and_keep_relative_paths_relative_to_cwd(monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings(overrides={"delta.root": "s3a://bucket/cs/delta"}, environ={})
    assert str(settings.table_path("connectors")) == "s3a://bucket/cs/delta/connectors"
    assert str(settings.checkpoint_path("active_topics")) == str(tmp_path.resolve() / "var/checkpoints/active_topics")
    with pytest.raises(ConfigError, match=r"checkpoint\.root"):
        load_settings(overrides={"checkpoint.root": "s3a://"}, environ={})


def test_defaults_leave_the_clusters_storage_configuration_alone() -> None:
    settings = load_settings(environ={})
    assert hadoop_options(settings) == {}
    assert deltalake_options(settings) == {}


def test_an_s3_compatible_endpoint_configures_both_sides() -> None:
    settings = load_settings(overrides=storage_settings("http://127.0.0.1:9000", "eu-west-1"), environ={})
    assert hadoop_options(settings) == {
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.endpoint.region": "eu-west-1",
        "fs.s3a.path.style.access": "true",
    }
    assert deltalake_options(settings) == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_REGION": "eu-west-1",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_ALLOW_HTTP": "true",
        "AZURE_ALLOW_HTTP": "true",
    }
    extra = load_settings(overrides={"storage.options": "azure_storage_account_name=acct"}, environ={})
    assert deltalake_options(extra) == {"azure_storage_account_name": "acct"}


def test_plain_http_needs_to_be_allowed() -> None:
    with pytest.raises(ConfigError, match=r"storage\.allow\.http"):
        load_settings(overrides={"storage.s3.endpoint": "http://minio:9000"}, environ={})
    settings = load_settings(overrides={"storage.s3.endpoint": "https://minio:9000"}, environ={})
    assert "AWS_ALLOW_HTTP" not in deltalake_options(settings)
    with pytest.raises(ConfigError, match="endpoint"):
        load_settings(overrides={"storage.s3.endpoint": "minio:9000"}, environ={})


def test_the_api_reads_the_configured_root_with_the_storage_options() -> None:
    settings = load_settings(
        overrides={"delta.root": "s3a://bucket/delta", **storage_settings("http://127.0.0.1:9000")}, environ={}
    )
    reader = TableReader(settings.delta_root, deltalake_options(settings))
    assert str(reader.delta_root) == "s3a://bucket/delta"
    assert reader.storage_options["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9000"
