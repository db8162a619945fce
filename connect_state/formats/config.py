"""Records of Connect's config topic, read and written byte for byte like ``KafkaConfigBackingStore``
(``connect/runtime/src/main/java/org/apache/kafka/connect/storage/KafkaConfigBackingStore.java``).

Eight kinds of record share the topic, told apart by the key (``KafkaConfigBackingStore.ConsumeCallback``, which
tries the prefixes in this order):

==========================  ==========================================================  ==========================
key                         value                                                       parsed as
==========================  ==========================================================  ==========================
``target-state-<name>``     ``{"state":"PAUSED","state.v2":"STOPPED"}``; null removes    :class:`TargetStateValue`
``connector-<name>``        ``{"properties":{...}}``; null deletes the connector         :class:`ConnectorConfig`
``task-<name>-<n>``         ``{"properties":{...}}``                                     :class:`TaskConfig`
``commit-<name>``           ``{"tasks":2}``                                              :class:`TaskCommit`
``restart-connector-<n>``   ``{"include-tasks":true,"only-failed":false}``               :class:`RestartRequest`
``tasks-fencing-<name>``    ``{"task-count":2}``                                         :class:`TaskCount`
``session-key``             ``{"key":"<base64>","algorithm":"HmacSHA256",...}``          :class:`SessionKey`
``logger-cluster-<ns>``     ``{"level":"DEBUG"}``                                        :class:`LoggerLevel`
==========================  ==========================================================  ==========================

:func:`parse_config_record` applies Connect's rules to one record. A record Connect logs and ignores raises
:class:`~connect_state.core.errors.RecordFormatError` whose ``reason`` is Connect's log text (several messages joined by
``"; "``; an exception Connect logs is described after ``": "``). A record on which Connect's consume callback
*throws* (a null key, a commit or task-count record whose count is not an integer, an invalid session key) raises
:class:`ConfigCallbackError`, a ``RecordFormatError`` too: a worker reading it skips the rest of that poll batch
(``connect/runtime/src/main/java/org/apache/kafka/connect/util/KafkaBasedLog.java``). Messages Connect logs for a
record it still applies (WARN on a restart request field, ERROR on a non-string ``state.v2``) are kept in
:attr:`ConfigRecord.warnings`.

The ``serialize_*`` functions write the values the store's ``put*`` methods write (the ``Struct`` schemas
``CONNECTOR_CONFIGURATION_V0``, ``CONNECTOR_TASKS_COMMIT_V0``, ``TARGET_STATE_V1``, ``TASK_COUNT_RECORD_V0``,
``SESSION_KEY_V0``, ``RESTART_REQUEST_V0``, ``LOGGER_LEVEL_V0``, in their field order) and
:func:`stop_records`, :func:`pause_records`, :func:`resume_records` and :func:`delete_records` the records the herder
writes for those operations (``DistributedHerder``).

Checked against Kafka 4.3.1's ``KafkaConfigBackingStore`` by feeding records to its own ``ConsumeCallback``.

Pure standard library.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field

from connect_state.core.errors import RecordFormatError
from connect_state.core.vocabulary import TargetState
from connect_state.formats import jsonconv
from connect_state.formats.javalang import (
    decode_java_utf8,
    java_class_name,
    java_int,
    java_parse_int,
    java_split_dash,
    require_int,
    require_str,
)

__all__ = [
    "COMMIT_TASKS_PREFIX",
    "CONNECTOR_PREFIX",
    "LOGGER_CLUSTER_PREFIX",
    "RESTART_PREFIX",
    "SESSION_KEY_KEY",
    "TARGET_STATE_PREFIX",
    "TASK_COUNT_RECORD_PREFIX",
    "TASK_PREFIX",
    "ConfigCallbackError",
    "ConfigKey",
    "ConfigRecord",
    "ConfigValue",
    "ConfigWrite",
    "ConnectorConfig",
    "ConnectorConfigKey",
    "LoggerLevel",
    "LoggerLevelKey",
    "RestartRequest",
    "RestartRequestKey",
    "SessionKey",
    "SessionKeyKey",
    "TargetStateKey",
    "TargetStateValue",
    "TaskCommit",
    "TaskCommitKey",
    "TaskConfig",
    "TaskConfigKey",
    "TaskCount",
    "TaskCountKey",
    "commit_without_connector_reason",
    "connector_config_key",
    "delete_records",
    "format_config_key",
    "logger_level_key",
    "parse_config_key",
    "parse_config_record",
    "pause_records",
    "restart_request_key",
    "resume_records",
    "serialize_connector_config",
    "serialize_logger_level",
    "serialize_restart_request",
    "serialize_session_key",
    "serialize_target_state",
    "serialize_task_commit",
    "serialize_task_config",
    "serialize_task_count",
    "stop_records",
    "target_state_key",
    "task_commit_key",
    "task_config_key",
    "task_config_records",
    "task_count_key",
]

TARGET_STATE_PREFIX = "target-state-"
CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_TASKS_PREFIX = "commit-"
RESTART_PREFIX = "restart-connector-"
TASK_COUNT_RECORD_PREFIX = "tasks-fencing-"
SESSION_KEY_KEY = "session-key"
LOGGER_CLUSTER_PREFIX = "logger-cluster-"


class ConfigCallbackError(RecordFormatError):
    """A record on which Connect's ``ConsumeCallback`` throws instead of logging and skipping it.

    The ``KafkaBasedLog`` work thread catches the exception, logs ``"Unexpected exception in ..."`` and drops the rest
    of that poll batch. ``reason`` is the exception's message and ``exception`` its Java class name
    (``"NullPointerException"``, ``"ConnectException"``, ``"IllegalArgumentException"``).
    """

    def __init__(self, reason: str, exception: str) -> None:
        super().__init__(reason)
        self.exception = exception


# ---------------------------------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectorConfigKey:
    """Key ``connector-<connector>`` (``CONNECTOR_KEY``)."""

    connector: str


@dataclass(frozen=True)
class TaskConfigKey:
    """Key ``task-<connector>-<task>`` (``TASK_KEY``)."""

    connector: str
    task: int


@dataclass(frozen=True)
class TaskCommitKey:
    """Key ``commit-<connector>`` (``COMMIT_TASKS_KEY``)."""

    connector: str


@dataclass(frozen=True)
class TargetStateKey:
    """Key ``target-state-<connector>`` (``TARGET_STATE_KEY``)."""

    connector: str


@dataclass(frozen=True)
class TaskCountKey:
    """Key ``tasks-fencing-<connector>`` (``TASK_COUNT_RECORD_KEY``, KIP-618 exactly-once source)."""

    connector: str


@dataclass(frozen=True)
class SessionKeyKey:
    """The key ``session-key`` (``SESSION_KEY_KEY``, KIP-507), matched exactly."""


@dataclass(frozen=True)
class RestartRequestKey:
    """Key ``restart-connector-<connector>`` (``RESTART_KEY``, KIP-745)."""

    connector: str


@dataclass(frozen=True)
class LoggerLevelKey:
    """Key ``logger-cluster-<namespace>`` (``LOGGER_CLUSTER_KEY``, KIP-976)."""

    namespace: str


ConfigKey = (
    ConnectorConfigKey
    | TaskConfigKey
    | TaskCommitKey
    | TargetStateKey
    | TaskCountKey
    | SessionKeyKey
    | RestartRequestKey
    | LoggerLevelKey
)


def connector_config_key(connector: str) -> str:
    """``CONNECTOR_PREFIX + connector``."""
    return CONNECTOR_PREFIX + connector


def task_config_key(connector: str, task: int) -> str:
    """``TASK_PREFIX + connector + "-" + task`` (``TASK_KEY(ConnectorTaskId)``)."""
    return f"{TASK_PREFIX}{connector}-{task}"


def task_commit_key(connector: str) -> str:
    """``COMMIT_TASKS_PREFIX + connector``."""
    return COMMIT_TASKS_PREFIX + connector


def target_state_key(connector: str) -> str:
    """``TARGET_STATE_PREFIX + connector``."""
    return TARGET_STATE_PREFIX + connector


def task_count_key(connector: str) -> str:
    """``TASK_COUNT_RECORD_PREFIX + connector``."""
    return TASK_COUNT_RECORD_PREFIX + connector


def restart_request_key(connector: str) -> str:
    """``RESTART_PREFIX + connector``."""
    return RESTART_PREFIX + connector


def logger_level_key(namespace: str) -> str:
    """``LOGGER_CLUSTER_PREFIX + namespace``."""
    return LOGGER_CLUSTER_PREFIX + namespace


def format_config_key(key: ConfigKey) -> str:
    """The key string Connect writes for a parsed key.

    ``parse_config_key(format_config_key(k)) == k`` holds for every key Connect writes. It does not for every key
    Connect reads: ``task-c-+7`` and ``task-c-7-`` are task 7 of ``c`` too, and a connector name with a ``-`` right
    before the task number cannot be told apart (``task-a--1`` is task 1 of ``a-``).
    """
    if isinstance(key, SessionKeyKey):
        return SESSION_KEY_KEY
    if isinstance(key, TaskConfigKey):
        return task_config_key(key.connector, key.task)
    if isinstance(key, LoggerLevelKey):
        return logger_level_key(key.namespace)
    builders = {
        ConnectorConfigKey: connector_config_key,
        TaskCommitKey: task_commit_key,
        TargetStateKey: target_state_key,
        TaskCountKey: task_count_key,
        RestartRequestKey: restart_request_key,
    }
    return builders[type(key)](key.connector)


def _parse_task_key(key: str) -> TaskConfigKey:
    """``KafkaConfigBackingStore.parseTaskId``: ``split("-")``, at least 3 parts, the last one ``Integer.parseInt``.

    The connector is parts[1..n-2] joined with ``-``; it may be empty (``task--0`` is task 0 of ``""``).
    """
    parts = java_split_dash(key)
    invalid = f"Ignoring task configuration because {key} couldn't be parsed as a task config key"
    if len(parts) < 3:
        raise RecordFormatError(invalid)
    try:
        task = java_parse_int(parts[-1])
    except ValueError:
        raise RecordFormatError(invalid) from None
    return TaskConfigKey("-".join(parts[1:-1]), task)


_PREFIXED_KEYS: tuple[tuple[str, type], ...] = (
    (TARGET_STATE_PREFIX, TargetStateKey),
    (CONNECTOR_PREFIX, ConnectorConfigKey),
    (TASK_PREFIX, TaskConfigKey),
    (COMMIT_TASKS_PREFIX, TaskCommitKey),
    (RESTART_PREFIX, RestartRequestKey),
    (TASK_COUNT_RECORD_PREFIX, TaskCountKey),
    (SESSION_KEY_KEY, SessionKeyKey),
    (LOGGER_CLUSTER_PREFIX, LoggerLevelKey),
)


def parse_config_key(key: str | bytes | None) -> ConfigKey:
    """Parse a config-topic key with the dispatch of ``KafkaConfigBackingStore.ConsumeCallback.onCompletion``.

    ``bytes`` are decoded like Kafka's ``StringDeserializer``. The prefixes are tried in Connect's order
    (``target-state-``, ``connector-``, ``task-``, ``commit-``, ``restart-connector-``, ``tasks-fencing-``, then
    ``session-key`` exactly, then ``logger-cluster-``); the name after a prefix may be empty. Raises
    ``RecordFormatError`` with ``"Discarding config update record with invalid key: <key>"`` or, for a task key
    that does not parse, ``"Ignoring task configuration because <key> couldn't be parsed as a task config key"``;
    :class:`ConfigCallbackError` for a null key (``key.startsWith`` throws a ``NullPointerException``).
    """
    if key is None:
        raise ConfigCallbackError("null key", "NullPointerException")
    text = _key_text(key)
    for prefix, kind in _PREFIXED_KEYS:
        if kind is SessionKeyKey:
            if text == SESSION_KEY_KEY:
                return SessionKeyKey()
            continue
        if not text.startswith(prefix):
            continue
        if kind is TaskConfigKey:
            return _parse_task_key(text)
        return kind(text[len(prefix) :])
    raise RecordFormatError(f"Discarding config update record with invalid key: {text}")


def _key_text(key: str | bytes) -> str:
    if isinstance(key, (bytes, bytearray, memoryview)):
        return decode_java_utf8(bytes(key))
    return key


# ---------------------------------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectorConfig:
    """A connector's configuration (``CONNECTOR_CONFIGURATION_V0``: ``{"properties":{...}}``).

    Connect stores the ``properties`` map it read without checking its values (an unchecked cast to
    ``Map<String, String>``): they are normally strings or ``None``, but any JSON value is kept as read.
    """

    properties: dict[str, object] = field(hash=False)


@dataclass(frozen=True)
class TaskConfig:
    """A task's configuration (``TASK_CONFIGURATION_V0``, same shape as :class:`ConnectorConfig`).

    Connect buffers it until the connector's next :class:`TaskCommit` (``processTasksCommitRecord``).
    """

    properties: dict[str, object] = field(hash=False)


@dataclass(frozen=True)
class TaskCommit:
    """A task-configuration commit (``CONNECTOR_TASKS_COMMIT_V0``): the connector now has ``tasks`` tasks."""

    tasks: int


@dataclass(frozen=True)
class TargetStateValue:
    """A connector's target state (``TARGET_STATE_V1``; ``state.v2`` preferred over ``state``)."""

    state: TargetState


@dataclass(frozen=True)
class TaskCount:
    """A task-count record (``TASK_COUNT_RECORD_V0``, exactly-once source zombie fencing)."""

    task_count: int


@dataclass(frozen=True)
class SessionKey:
    """The cluster's session key (``SESSION_KEY_V0``) for signing internal REST requests.

    ``key`` is the decoded key material; ``creation_timestamp`` is epoch milliseconds.
    """

    key: bytes
    algorithm: str
    creation_timestamp: int


@dataclass(frozen=True)
class RestartRequest:
    """A restart request (``RESTART_REQUEST_V0``)."""

    include_tasks: bool
    only_failed: bool


@dataclass(frozen=True)
class LoggerLevel:
    """A cluster-wide logging level for a namespace (``LOGGER_LEVEL_V0``). Connect checks the level only later."""

    level: str


ConfigValue = (
    ConnectorConfig | TaskConfig | TaskCommit | TargetStateValue | TaskCount | SessionKey | RestartRequest | LoggerLevel
)


@dataclass(frozen=True)
class ConfigRecord:
    """One parsed config-topic record.

    ``value`` is ``None`` only for the two tombstones Connect applies: a connector deletion (``connector-<name>``)
    and a target-state removal (``target-state-<name>``). ``warnings`` holds what Connect logs for a record it still
    applies (in its order).
    """

    key: ConfigKey
    value: ConfigValue | None
    warnings: tuple[str, ...] = ()


class _Ignored(Exception):
    """A record Connect logs and ignores; the message is the reason."""


def _require_map(value: object, message: str) -> dict[str, object]:
    """``value instanceof Map`` or Connect logs ``message`` (which ends with the class name) and ignores it."""
    if not isinstance(value, dict):
        raise _Ignored(f"{message}{java_class_name(value)}")
    return value


def _int_value(value: object) -> int:
    """``KafkaConfigBackingStore.intValue``: an ``Integer`` or ``Long`` narrowed to int, else a thrown exception."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigCallbackError("Expected integer value to be either Integer or Long", "ConnectException")
    return java_int(value)


def _connector_config(connector: str, value: object) -> ConnectorConfig | None:
    """``processConnectorConfigRecord``: null deletes; otherwise a map holding a ``properties`` map."""
    if value is None:
        return None
    fields = _require_map(
        value, f"Ignoring configuration for connector '{connector}' because it is in the wrong format: "
    )
    properties = _require_map(
        fields.get("properties"),
        f"Invalid data for config for connector '{connector}': 'properties' field should be a Map but is ",
    )
    return ConnectorConfig(properties)


def _task_config(key: TaskConfigKey, value: object) -> TaskConfig:
    """``processTaskConfigRecord``; ``ConnectorTaskId.toString()`` is ``<connector>-<task>``."""
    task_id = f"{key.connector}-{key.task}"
    if value is None:
        raise _Ignored(f"Ignoring task configuration for task {task_id} because it is unexpectedly null")
    fields = _require_map(
        value, f"Ignoring task configuration for task {task_id} because the value is not a Map but is "
    )
    properties = _require_map(
        fields.get("properties"),
        f"Invalid data for config of task {task_id} 'properties' field should be a Map but is ",
    )
    return TaskConfig(properties)


def commit_without_connector_reason(connector: str) -> str:
    """What Connect logs (DEBUG) for a commit record of a connector that has no config: it ignores the record.

    ``processTasksCommitRecord`` checks this before anything else, so such a commit is ignored whatever its value.
    """
    return (
        f"Ignoring task configs for connector {connector}; it appears that the connector was deleted previously and "
        "that log compaction has since removed any trace of its previous configurations from the config topic"
    )


def _task_commit(connector: str, value: object) -> TaskCommit:
    """``processTasksCommitRecord``, for a connector whose config exists (:func:`commit_without_connector_reason`)."""
    fields = _require_map(
        value,
        f"Ignoring connector tasks configuration commit for connector '{connector}' "
        "because it is in the wrong format: ",
    )
    return TaskCommit(_int_value(fields.get("tasks")))


def _target_state(connector: str, value: object) -> tuple[TargetStateValue | None, tuple[str, ...]]:
    """``processTargetStateRecord``: ``state.v2`` first, falling back to ``state``."""
    if value is None:
        return None, ()
    fields = _require_map(
        value, f"Ignoring target state for connector '{connector}' because it is in the wrong format: "
    )
    warnings: list[str] = []
    state = fields.get("state.v2")
    if state is not None and not isinstance(state, str):
        warnings.append(
            f"Invalid data for target state for connector '{connector}': 'state.v2' field should be a String but is "
            f"{java_class_name(state)}"
        )
        state = None
    if state is None:
        state = fields.get("state")
        if not isinstance(state, str):
            warnings.append(
                f"Invalid data for target state for connector '{connector}': 'state' field should be a String but is "
                f"{java_class_name(state)}"
            )
            raise _Ignored("; ".join(warnings))
    try:
        target = TargetState(state)
    except ValueError:
        warnings.append(f"Invalid target state for connector '{connector}': {state}")
        raise _Ignored("; ".join(warnings)) from None
    return TargetStateValue(target), tuple(warnings)


def _task_count(connector: str, value: object) -> TaskCount:
    """``processTaskCountRecord``."""
    fields = _require_map(
        value, f"Ignoring task count record for connector '{connector}' because it is in the wrong format: "
    )
    return TaskCount(_int_value(fields.get("task-count")))


def _restart_request(value: object) -> tuple[RestartRequest, tuple[str, ...]]:
    """``recordToRestartRequest``: a field that is not a boolean is logged (WARN) and defaults to false."""
    fields = _require_map(value, "Ignoring restart request because the value is not a Map but is ")
    warnings: list[str] = []
    flags: dict[str, bool] = {}
    for name in ("only-failed", "include-tasks"):
        flag = fields.get(name)
        if isinstance(flag, bool):
            flags[name] = flag
        else:
            warnings.append(
                f"Invalid data for restart request '{name}' field should be a Boolean but is {java_class_name(flag)}, "
                "defaulting to false"
            )
            flags[name] = False
    return RestartRequest(include_tasks=flags["include-tasks"], only_failed=flags["only-failed"]), tuple(warnings)


def _java_base64_decode(text: str) -> bytes:
    """``Base64.getDecoder().decode(text)`` (JDK 17 ``Base64.Decoder``); ``ValueError`` with Java's message.

    The string is first turned into ISO-8859-1 bytes (a character outside Latin-1, including a surrogate pair,
    becomes one ``?``). Padding is optional; after a valid padding anything else is an error; unused bits are not
    checked.
    """
    data = text.encode("latin-1", "replace")
    if len(data) == 1:
        raise ValueError("Input byte[] should at least have 2 bytes for base64 bytes")
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    out = bytearray()
    bits, shift, pos = 0, 18, 0
    while pos < len(data):
        byte = data[pos]
        pos += 1
        if byte == 0x3D:  # '='
            if (shift == 6 and (pos == len(data) or data[pos] != 0x3D)) or shift == 18:
                raise ValueError("Input byte array has wrong 4-byte ending unit")
            if shift == 6:
                pos += 1
            break
        digit = alphabet.find(bytes([byte]))
        if digit < 0:
            signed = byte - 256 if byte > 127 else byte
            raise ValueError(f"Illegal base64 character {'-' if signed < 0 else ''}{abs(signed):x}")
        bits |= digit << shift
        shift -= 6
        if shift < 0:
            out += bits.to_bytes(3, "big")
            bits, shift = 0, 18
    if shift == 6:
        out.append(bits >> 16)
    elif shift == 0:
        out += (bits >> 8).to_bytes(2, "big")
    elif shift == 12:
        raise ValueError("Last unit does not have enough valid bits")
    if pos < len(data):
        raise ValueError(f"Input byte array has incorrect ending byte at {pos}")
    return bytes(out)


def _session_key(value: object) -> SessionKey:
    """``processSessionKeyRecord``: the checks in Connect's order, ``Base64`` decoding between the first two."""
    if value is None:
        raise _Ignored("Ignoring session key because it is unexpectedly null")
    fields = _require_map(value, "Ignoring session key because the value is not a Map but is ")
    encoded = fields.get("key")
    if not isinstance(encoded, str):
        raise _Ignored(f"Invalid data for session key 'key' field should be a String but is {java_class_name(encoded)}")
    try:
        key = _java_base64_decode(encoded)
    except ValueError as exc:
        raise ConfigCallbackError(str(exc), "IllegalArgumentException") from None
    algorithm = fields.get("algorithm")
    if not isinstance(algorithm, str):
        raise _Ignored(
            f"Invalid data for session key 'algorithm' field should be a String but it is {java_class_name(algorithm)}"
        )
    created = fields.get("creation-timestamp")
    if isinstance(created, bool) or not isinstance(created, int):
        raise _Ignored(
            "Invalid data for session key 'creation-timestamp' field should be a long but it is "
            f"{java_class_name(created)}"
        )
    if not key:
        raise ConfigCallbackError("Empty key", "IllegalArgumentException")  # new SecretKeySpec(key, algorithm)
    return SessionKey(key, algorithm, created)


def _logger_level(namespace: str, value: object) -> LoggerLevel:
    """``processLoggerLevelRecord``."""
    if value is None:
        raise _Ignored(f"Ignoring logging level for namespace {namespace} because it is unexpectedly null")
    fields = _require_map(
        value, f"Ignoring logging level for namespace {namespace} because the value is not a Map but is "
    )
    level = fields.get("level")
    if not isinstance(level, str):
        raise _Ignored(
            f"Invalid data for logging level key 'level' field with namespace {namespace}; should be a String but it "
            f"is {java_class_name(level)}"
        )
    return LoggerLevel(level)


def _read_value(key: ConfigKey, value: object) -> ConfigRecord:
    if isinstance(key, TargetStateKey):
        state, warnings = _target_state(key.connector, value)
        return ConfigRecord(key, state, warnings)
    if isinstance(key, ConnectorConfigKey):
        return ConfigRecord(key, _connector_config(key.connector, value))
    if isinstance(key, TaskConfigKey):
        return ConfigRecord(key, _task_config(key, value))
    if isinstance(key, TaskCommitKey):
        return ConfigRecord(key, _task_commit(key.connector, value))
    if isinstance(key, RestartRequestKey):
        request, warnings = _restart_request(value)
        return ConfigRecord(key, request, warnings)
    if isinstance(key, TaskCountKey):
        return ConfigRecord(key, _task_count(key.connector, value))
    if isinstance(key, SessionKeyKey):
        return ConfigRecord(key, _session_key(value))
    return ConfigRecord(key, _logger_level(key.namespace, value))


def parse_config_record(key: str | bytes | None, value: bytes | None) -> ConfigRecord:
    """Parse one config-topic record as ``KafkaConfigBackingStore.ConsumeCallback`` does.

    The value is converted first (``JsonConverter``; empty bytes and ``null`` read as a tombstone), then the key is
    dispatched (:func:`parse_config_key`) and the value checked with the rules of its kind, e.g.
    ``"Ignoring configuration for connector 'foo' because it is in the wrong format: java.util.ArrayList"`` or
    ``"Invalid target state for connector 'foo': paused"``. Raises ``RecordFormatError`` for every record Connect
    ignores and :class:`ConfigCallbackError` for those it throws on.

    Checks that depend on earlier records are the caller's: a commit for a connector without config is ignored
    silently (:func:`commit_without_connector_reason`) whatever its value; a target-state tombstone for a connector
    that still has a config puts STARTED back; a connector config with no target state implies STARTED.
    """
    try:
        data = jsonconv.loads(value) if value is not None else None
    except jsonconv.JsonFormatError as exc:
        raise RecordFormatError(
            f"Failed to convert config data to Kafka Connect format: invalid JSON ({exc})"
        ) from None
    parsed_key = parse_config_key(key)
    try:
        return _read_value(parsed_key, data)
    except _Ignored as ignored:
        raise RecordFormatError(str(ignored)) from None


# ---------------------------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------------------------


def _properties_value(properties: Mapping[str, str | None]) -> bytes:
    """``{"properties":{...}}``: the map schema is string to optional string; entries in the mapping's order."""
    for name, item in properties.items():
        require_str("property name", name)
        if item is not None:
            require_str(f"property {name!r}", item)
    return jsonconv.dumps({"properties": dict(properties)})


def serialize_connector_config(properties: Mapping[str, str | None]) -> bytes:
    """The value ``putConnectorConfig`` writes: ``{"properties":{...}}``, entries in the mapping's order.

    A ``None`` property is written as ``null`` (the schema's values are optional strings). Connect writes the map it
    was given in that map's order (the REST request's order for a connector created over REST).
    """
    return _properties_value(properties)


def serialize_task_config(properties: Mapping[str, str | None]) -> bytes:
    """The value ``putTaskConfigs`` writes for one task, like :func:`serialize_connector_config`."""
    return _properties_value(properties)


def serialize_task_commit(tasks: int) -> bytes:
    """``{"tasks":<n>}`` (``CONNECTOR_TASKS_COMMIT_V0``, an int32)."""
    return jsonconv.dumps({"tasks": require_int("tasks", tasks, 32)})


def serialize_target_state(state: TargetState | str) -> bytes:
    """``serializeTargetState``: ``TARGET_STATE_V1``, ``state`` falling back to PAUSED for STOPPED::

    {"state":"PAUSED","state.v2":"STOPPED"}
    """
    try:
        target = TargetState(state)
    except ValueError:
        raise ValueError(f"unknown target state {state!r}; expected one of {', '.join(TargetState)}") from None
    v1 = TargetState.PAUSED if target is TargetState.STOPPED else target
    return jsonconv.dumps({"state": v1, "state.v2": target})


def serialize_task_count(task_count: int) -> bytes:
    """``{"task-count":<n>}`` (``TASK_COUNT_RECORD_V0``, an int32)."""
    return jsonconv.dumps({"task-count": require_int("task_count", task_count, 32)})


def serialize_session_key(session_key: SessionKey) -> bytes:
    """``putSessionKey``: ``{"key":"<base64, padded>","algorithm":"HmacSHA256","creation-timestamp":<ms>}``."""
    if not session_key.key:
        raise ValueError("a session key cannot be empty")
    fields = {
        "key": base64.b64encode(session_key.key).decode("ascii"),
        "algorithm": require_str("algorithm", session_key.algorithm),
        "creation-timestamp": require_int("creation_timestamp", session_key.creation_timestamp, 64),
    }
    return jsonconv.dumps(fields)


def serialize_restart_request(request: RestartRequest) -> bytes:
    """``putRestartRequest``: ``{"include-tasks":<bool>,"only-failed":<bool>}``."""
    for name, flag in (("include_tasks", request.include_tasks), ("only_failed", request.only_failed)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be a bool, got {flag!r}")
    return jsonconv.dumps({"include-tasks": request.include_tasks, "only-failed": request.only_failed})


def serialize_logger_level(level: str) -> bytes:
    """``putLoggerLevel``: ``{"level":"<level>"}``."""
    return jsonconv.dumps({"level": require_str("level", level)})


# ---------------------------------------------------------------------------------------------------------------------
# What the herder writes (DistributedHerder's stop, pause, resume and delete)
# ---------------------------------------------------------------------------------------------------------------------

ConfigWrite = tuple[str, bytes | None]


def task_config_records(connector: str, configs: list[Mapping[str, str | None]]) -> list[ConfigWrite]:
    """``putTaskConfigs``: ``task-<name>-0..n-1`` then ``commit-<name>`` ``{"tasks":n}``, in that order."""
    records: list[ConfigWrite] = [
        (task_config_key(connector, index), serialize_task_config(config)) for index, config in enumerate(configs)
    ]
    records.append((task_commit_key(connector), serialize_task_commit(len(configs))))
    return records


def stop_records(connector: str) -> list[ConfigWrite]:
    """``DistributedHerder.stopConnector``: an empty task-config commit, then the STOPPED target state::

    [("commit-<name>", b'{"tasks":0}'), ("target-state-<name>", b'{"state":"PAUSED","state.v2":"STOPPED"}')]
    """
    return [
        *task_config_records(connector, []),
        (target_state_key(connector), serialize_target_state(TargetState.STOPPED)),
    ]


def pause_records(connector: str) -> list[ConfigWrite]:
    """``AbstractHerder.pauseConnector``: only ``target-state-<name>`` = PAUSED."""
    return [(target_state_key(connector), serialize_target_state(TargetState.PAUSED))]


def resume_records(connector: str) -> list[ConfigWrite]:
    """``AbstractHerder.resumeConnector``: only ``target-state-<name>`` = STARTED (tasks follow from the leader)."""
    return [(target_state_key(connector), serialize_target_state(TargetState.STARTED))]


def delete_records(connector: str) -> list[ConfigWrite]:
    """``KafkaConfigBackingStore.removeConnectorConfig``: tombstones for ``connector-<name>`` then
    ``target-state-<name>``; task and commit records are left in place.
    """
    return [(connector_config_key(connector), None), (target_state_key(connector), None)]
