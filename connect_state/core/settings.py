"""Configuration: one documented default file (conf/connect-state.properties), overridable by a file, environment and
flags.

Each layer overrides the one before: the defaults shipped inside the package (the repository's
``conf/connect-state.properties``, installed as ``connect_state.conf``, so an installed wheel, a zipped ``--py-files``
wheel included, finds them without a source checkout), the operator's properties file (``--conf-file`` or
``CONNECT_STATE_CONF_FILE``: only the keys that differ), ``CONNECT_STATE_<KEY>`` environment variables, ``--set
key=value`` flags. Files are read as ``java.util.Properties`` reads them (javaproperties); values are trimmed, as
Kafka's ``ConfigDef`` trims them. Any value may hold ``${env:NAME}`` or ``${file:path:key}`` references, resolved when
the settings are built, as Connect's ``EnvVarConfigProvider`` and ``FileConfigProvider`` resolve them. Kafka client
settings come from ``kafka.client.config.file`` (a properties file, like the Kafka tools' ``--command-config``) and
``kafka.client.properties`` (comma-separated, winning over the file). An unknown key, a missing file or a reference
that cannot be resolved is a :class:`ConfigError` naming it.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, TypeVar

import javaproperties

from connect_state.core.errors import ConfigError
from connect_state.core.storage import Location, check_endpoint
from connect_state.core.vocabulary import ConnectorType, ExactlyOnceSourceSupport, FleetTables

ENV_PREFIX = "CONNECT_STATE_"
CONF_FILE_ENV = "CONNECT_STATE_CONF_FILE"
DEFAULT_CONF_NAME = "connect-state.properties"


def default_conf_file() -> Traversable:
    """The defaults shipped inside the package (``connect_state.conf``; ``conf/`` in the source tree)."""
    return files("connect_state.conf").joinpath(DEFAULT_CONF_NAME)


def read_properties(path: Path | Traversable, setting: str) -> dict[str, str]:
    """A Java properties file (continuations, ``=``/``:``/whitespace separators, ``#``/``!`` comments, escapes), as
    ``java.util.Properties.load`` reads it; ``setting`` names what pointed at it, for the error it cannot be read."""
    try:
        with path.open("r", encoding="utf-8") as fp:
            return dict(javaproperties.load(fp))
    except OSError as err:
        raise ConfigError(f"{setting}: cannot read {path}: {err.strerror or err}") from None


#: A config provider reference, Kafka's ``ConfigTransformer.DEFAULT_PATTERN``: ``${provider:[path:]key}``.
_REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")


def resolve_references(key: str, value: str, environ: Mapping[str, str], base: Path) -> str:
    """``value`` with its ``${env:NAME}`` and ``${file:path:key}`` references replaced (Connect's
    ``EnvVarConfigProvider`` and ``FileConfigProvider``: the file is a properties file, ``path`` relative to ``base``).
    A reference that cannot be resolved is a :class:`ConfigError` naming ``key`` and the reference."""

    def resolve(match: re.Match[str]) -> str:
        provider, path, name = match.group(1), match.group(3), match.group(4)
        where = f"{key}: cannot resolve {match.group(0)}"
        if provider == "env" and path is None:
            if name not in environ:
                raise ConfigError(f"{where}: environment variable {name} is not set")
            return environ[name]
        if provider == "file" and path is not None:
            values = read_properties(base / Path(path).expanduser(), where)
            if name not in values:
                raise ConfigError(f"{where}: {path} has no key {name!r}")
            return values[name]
        raise ConfigError(f"{where}: expected ${{env:NAME}} or ${{file:path:key}}")

    return _REFERENCE.sub(resolve, value)


def env_name(key: str) -> str:
    """``topic.tracking.enable`` -> ``CONNECT_STATE_TOPIC_TRACKING_ENABLE``."""
    return ENV_PREFIX + key.upper().replace(".", "_").replace("-", "_")


def _to_bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ConfigError(f"{key}: expected true or false, got {value!r}")


def _to_int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"{key}: expected an integer, got {value!r}") from None


_E = TypeVar("_E", bound=StrEnum)


def _to_enum(key: str, value: str, vocabulary: type[_E]) -> _E:
    """A vocabulary value, case-insensitive as Connect's ``ConfigDef.CaseInsensitiveValidString``."""
    try:
        return vocabulary(value.strip().lower())
    except ValueError:
        allowed = ", ".join(member.value for member in vocabulary)
        raise ConfigError(f"{key}: expected one of {allowed}, got {value!r}") from None


def _to_client_props(key: str, value: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        if "=" not in item:
            raise ConfigError(f"{key}: expected k=v pairs separated by commas, got {item!r}")
        k, v = item.split("=", 1)
        props[k.strip()] = v.strip()
    return props


#: The directory, under ``delta.root``, of the fleet's tables unless ``fleet.delta.root`` names another.
FLEET_DIR = "fleet"
#: The fields of :class:`Settings` that are no setting of their own.
_NOT_SETTINGS = ("raw", "environ")


@dataclass(frozen=True)
class Settings:
    """Typed view of the configuration. Field names are the property keys with '.' replaced by '_'."""

    bootstrap_servers: str
    status_storage_topic: str
    config_storage_topic: str
    offset_storage_topic: str
    kafka_client_properties: dict[str, str]
    kafka_client_config_file: str
    delta_root: Location
    checkpoint_root: Location
    storage_s3_endpoint: str
    storage_s3_region: str
    storage_s3_path_style_access: bool
    storage_allow_http: bool
    storage_options: dict[str, str]
    trigger_interval: str
    spark_master: str
    spark_jars_dir: str
    spark_driver_java_options: str
    api_host: str
    api_port: int
    topic_tracking_enable: bool
    topic_tracking_allow_reset: bool
    api_kafka_write_timeout_ms: int
    api_fresh_read_timeout_ms: int
    api_lag_cache_ms: int
    api_lag_timeout_ms: int
    api_follow_topics: bool
    api_follow_consumer_offsets: bool
    api_follow_max_bytes: int
    api_health_max_age_ms: int
    api_connect_version: str
    api_connect_commit: str
    api_kafka_cluster_id: str
    api_redact_patterns: str
    api_max_body_bytes: int
    api_max_json_depth: int
    api_trusted_hosts: str
    api_allowed_origins: str
    api_auth_anonymous: bool
    api_auth_basic_file: str
    api_auth_token_file: str
    api_auth_roles_file: str
    api_auth_failures_window_ms: int
    api_auth_failures_per_principal: int
    api_auth_failures_per_address: int
    api_auth_failures_tracked: int
    api_trusted_proxies: int
    api_tls_cert_file: str
    api_tls_key_file: str
    api_tls_ca_file: str
    api_tls_client_auth: str
    api_audit_file: str
    api_audit_topic: str
    api_audit_table: bool
    api_audit_flush_interval_ms: int
    api_audit_refusals_window_ms: int
    api_audit_compact_small_files: int
    api_audit_compact_file_bytes: int
    api_request_timeout_ms: int
    api_threads: int
    api_write_concurrency: int
    api_allowed_groups: str
    api_allowed_offsets_topics: str
    jobs_metrics_port: int
    jobs_metrics_host: str
    consumer_offsets_topic: str
    cleanup_offsets_on_delete: bool
    cleanup_hooks: str
    cleanup_hooks_by_class: dict[str, str]
    cleanup_hook_timeout_ms: int
    cleanup_allowed_groups: str
    cleanup_retry_backoff_ms: int
    cleanup_retry_backoff_max_ms: int
    heartbeat_interval_ms: int
    heartbeat_trigger_interval: str
    heartbeat_records_topic: str
    heartbeat_providers: dict[str, str]
    heartbeat_mode: str
    heartbeat_allowed_topics: str
    heartbeat_topics_create: bool
    heartbeat_provider_timeout_ms: int
    alerts_rules_file: str
    alerts_channels: dict[str, str]
    alerts_evaluation_interval_ms: int
    alerts_retry_backoff_ms: int
    alerts_retry_backoff_max_ms: int
    alerts_retry_max_attempts: int
    alerts_delivery_timeout_ms: int
    alerts_generator_url: str
    alerts_alertmanager_resend_interval_ms: int
    verdict_trigger_interval: str
    verdict_sink_stall_ms: int
    verdict_source_stall_ms: int
    verdict_flapping_count: int
    verdict_flapping_window_ms: int
    verdict_dropping_records: int
    verdict_dropping_window_ms: int
    verdict_overrides: dict[str, str]
    restart_auto_connectors: str
    restart_auto_backoff_base_ms: int
    restart_auto_backoff_max_ms: int
    restart_auto_max_attempts: int
    restart_auto_reset_after_ms: int
    connector_class_types: dict[str, str]
    offsets_alter_rules: dict[str, str]
    offsets_alter_timeout_ms: int
    lease_duration_ms: int
    lease_renew_interval_ms: int
    history_retention_ms: int
    history_retention_ms_by_table: dict[str, str]
    history_retention_check_interval_ms: int
    table_compact_small_files: int
    table_compact_file_bytes: int
    table_compact_check_interval_ms: int
    local_data_dir: Path
    local_broker_port: int
    local_controller_port: int
    local_connect_port: int
    local_s3_port: int
    local_s3_bucket: str
    connect_rest_url: str
    connect_group_id: str
    cluster_id: str
    clusters: str
    fleet_tables: FleetTables
    fleet_delta_root: Location
    fleet_sync_interval_ms: int
    exactly_once_source_support: ExactlyOnceSourceSupport
    raw: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    #: The environment the ``${env:...}`` references of ``raw`` were resolved from (None: the process's): settings
    #: derived from these (:meth:`with_overrides`, a further cluster's) resolve theirs from the same one.
    environ: Mapping[str, str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def keys(cls) -> list[str]:
        """Every setting's key (``bootstrap.servers``), in field order."""
        return [f.name.replace("_", ".") for f in fields(cls) if f.name not in _NOT_SETTINGS]

    @classmethod
    def from_mapping(
        cls, props: Mapping[str, str], base_dir: Path | None = None, environ: Mapping[str, str] | None = None
    ) -> Settings:
        """Build settings from string properties: references resolved (``${env:...}`` from ``environ``, default the
        process's), values trimmed, relative paths resolved against ``base_dir`` (cwd)."""
        base = (base_dir or Path.cwd()).resolve()
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in _NOT_SETTINGS:
                continue
            key = f.name.replace("_", ".")
            if key not in props:
                raise ConfigError(f"missing required setting {key!r}")
            value = resolve_references(key, props[key], env, base).strip()
            if f.type == "bool":
                values[f.name] = _to_bool(key, value)
            elif f.type == "int":
                values[f.name] = _to_int(key, value)
            elif f.type == "Path":
                path = Path(value).expanduser()
                values[f.name] = path if path.is_absolute() else base / path
            elif f.type == "Location" and f.name == "fleet_delta_root" and not value:
                values[f.name] = values["delta_root"] / FLEET_DIR  # the default: <delta.root>/fleet
            elif f.type == "Location":
                try:
                    values[f.name] = Location.parse(value, base)
                except ConfigError as err:
                    raise ConfigError(f"{key}: {err}") from None
            elif f.type == "dict[str, str]":
                values[f.name] = _to_client_props(key, value)
            elif f.type == "ExactlyOnceSourceSupport":
                values[f.name] = _to_enum(key, value, ExactlyOnceSourceSupport)
            elif f.type == "FleetTables":
                values[f.name] = _to_enum(key, value, FleetTables)
            else:
                values[f.name] = value
        if values["kafka_client_config_file"]:
            path = base / Path(values["kafka_client_config_file"]).expanduser()
            from_file = {
                k: resolve_references(f"kafka.client.config.file {k}", v, env, base).strip()
                for k, v in read_properties(path, "kafka.client.config.file").items()
            }
            values["kafka_client_properties"] = {**from_file, **values["kafka_client_properties"]}
        check_endpoint(values["storage_s3_endpoint"], values["storage_allow_http"])
        _check_connector_class_types(values["connector_class_types"])
        _check_retention(values)
        _check_compaction(values)
        kept = None if environ is None or environ is os.environ else dict(environ)  # a copy, never the process's
        return cls(**values, raw=dict(props), environ=kept)

    def with_overrides(self, **overrides: str) -> Settings:
        """A copy with some properties replaced (keys in property form, e.g. ``{"api.port": "0"}``)."""
        props = dict(self.raw)
        props.update(overrides)
        return Settings.from_mapping(props, environ=self.environ)

    def table_path(self, name: str) -> Location:
        """Where the Delta table ``name`` lives."""
        return self.delta_root / name

    def checkpoint_path(self, job: str) -> Location:
        return self.checkpoint_root / job

    def kafka_client_config(self) -> dict[str, str]:
        """``bootstrap.servers`` plus the extra client properties, in Kafka's own key names."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.kafka_client_properties}


def _check_connector_class_types(class_types: Mapping[str, str]) -> None:
    """``connector.class.types`` names each class ``source`` or ``sink``: the API and the jobs decide with it."""
    allowed = (ConnectorType.SOURCE.value, ConnectorType.SINK.value)
    for class_name, kind in class_types.items():
        if kind not in allowed:
            raise ConfigError(
                f"connector.class.types: the type of {class_name} must be {allowed[0]!r} or {allowed[1]!r}, "
                f"not {kind!r}"
            )


#: A retention that keeps every row (Kafka's ``retention.ms=-1``).
KEEP_FOREVER = -1


def _check_retention(values: Mapping[str, Any]) -> None:
    """``history.retention.ms`` and each of ``history.retention.ms.by.table``'s values are a number of milliseconds
    above 0, or -1 (kept for ever); the check interval is above 0. Which table names are known is
    :mod:`connect_state.tables.retention`'s to say."""
    retentions = {"history.retention.ms": str(values["history_retention_ms"])}
    for table, text in values["history_retention_ms_by_table"].items():
        retentions[f"history.retention.ms.by.table {table}"] = text
    for key, text in retentions.items():
        ms = _to_int(key, text)
        if ms <= 0 and ms != KEEP_FOREVER:
            raise ConfigError(f"{key}: expected milliseconds above 0, or {KEEP_FOREVER} for ever, got {text!r}")
    if values["history_retention_check_interval_ms"] <= 0:
        raise ConfigError("history.retention.check.interval.ms: expected milliseconds above 0")


def _check_compaction(values: Mapping[str, Any]) -> None:
    """``table.compact.*`` (:mod:`connect_state.tables.maintenance`): a count of small files at or above 0 (0:
    never compact), a file size of at least 1 MiB, a check interval above 0."""
    if values["table_compact_small_files"] < 0:
        raise ConfigError("table.compact.small.files: expected a number of files at or above 0 (0: never compact)")
    if values["table_compact_file_bytes"] < 1 << 20:
        raise ConfigError("table.compact.file.bytes: expected bytes at or above 1048576 (1 MiB)")
    if values["table_compact_check_interval_ms"] <= 0:
        raise ConfigError("table.compact.check.interval.ms: expected milliseconds above 0")


def load_settings(
    conf_file: str | os.PathLike[str] | None = None,
    overrides: Sequence[str] | Mapping[str, str] = (),
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """The shipped defaults, then the properties file (only the keys it changes), then environment variables, then
    ``key=value`` overrides; an unknown key in the file or the overrides is a :class:`ConfigError`."""
    env = os.environ if environ is None else environ
    known = Settings.keys()
    props = read_properties(default_conf_file(), "the shipped defaults")
    named = conf_file or env.get(CONF_FILE_ENV)
    if named:
        path = Path(named)
        if not path.is_file():
            raise ConfigError(f"configuration file {path} not found (--conf-file or {CONF_FILE_ENV})")
        props.update(_known(read_properties(path, str(path)), known, f"in {path}"))
    for key in known:
        if env_name(key) in env:
            props[key] = env[env_name(key)]
    items = overrides.items() if isinstance(overrides, Mapping) else (_split_override(o) for o in overrides)
    props.update(_known(dict(items), known, "in --set"))
    return Settings.from_mapping(props, environ=environ)  # None: the process's, not kept in the settings


#: The settings each further Connect cluster has of its own (issue 37), as ``clusters.<id>.<key>``: its Kafka, its
#: workers' internal topics and ``group.id``, its REST URL, and what the API and jobs may write there; every other
#: setting is the deployment's. :mod:`connect_state.core.clusters` builds each cluster's settings.
CLUSTER_KEYS = (
    "bootstrap.servers",
    "kafka.client.config.file",
    "kafka.client.properties",
    "status.storage.topic",
    "config.storage.topic",
    "offset.storage.topic",
    "consumer.offsets.topic",
    "connect.group.id",
    "connect.rest.url",
    "exactly.once.source.support",
    "api.kafka.cluster.id",
    "api.allowed.groups",
    "api.allowed.offsets.topics",
    "cleanup.allowed.groups",
    "heartbeat.allowed.topics",
)
#: The prefix of a further cluster's own settings: ``clusters.<id>.<key>``.
CLUSTERS_PREFIX = "clusters."


def cluster_key(key: str) -> tuple[str, str] | None:
    """``clusters.<id>.<key>`` split into the cluster's id and one of :data:`CLUSTER_KEYS` (the longest that ends
    it: ids may hold dots); None for any other key."""
    if not key.startswith(CLUSTERS_PREFIX):
        return None
    rest = key[len(CLUSTERS_PREFIX) :]
    for own in sorted(CLUSTER_KEYS, key=len, reverse=True):
        if rest.endswith("." + own) and len(rest) > len(own) + 1:
            return rest[: -len(own) - 1], own
    return None


def _known(props: dict[str, str], known: Sequence[str], where: str) -> dict[str, str]:
    unknown = sorted(key for key in set(props) - set(known) if cluster_key(key) is None)
    if unknown:
        raise ConfigError(
            f"unknown setting {unknown[0]!r} {where} (the keys are those of {DEFAULT_CONF_NAME}, and "
            f"{CLUSTERS_PREFIX}<id>.<key> for a cluster of 'clusters', <key> one of {', '.join(CLUSTER_KEYS)})"
        )
    return props


def _split_override(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise ConfigError(f"--set expects key=value, got {item!r}")
    key, value = item.split("=", 1)
    return key.strip(), value


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags every console script shares."""
    parser.add_argument(
        "--conf-file", help=f"properties file (default: ${CONF_FILE_ENV}, else the defaults shipped with the package)"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting; repeatable",
    )


def settings_from_args(args: argparse.Namespace) -> Settings:
    return load_settings(args.conf_file, args.overrides)


_UNITS_S = {
    "ms": 0.001,
    "millisecond": 0.001,
    "milliseconds": 0.001,
    "s": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
}


def interval_seconds(text: str, key: str = "trigger.interval") -> float:
    """Spark's ``processingTime`` syntax (the setting ``key``): ``"10 seconds"``, ``"1 minute"``, ``"500 ms"``, or a
    bare number of milliseconds. Raises ConfigError otherwise."""
    parts = text.strip().lower().split()
    try:
        if len(parts) == 1:
            return float(parts[0]) / 1000.0
        if len(parts) == 2 and parts[1] in _UNITS_S:
            return float(parts[0]) * _UNITS_S[parts[1]]
    except ValueError:
        pass
    raise ConfigError(f"{key}: expected e.g. '10 seconds', got {text!r}")
