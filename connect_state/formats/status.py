"""Records of Connect's status topic, read and written byte for byte like ``KafkaStatusBackingStore``
(``connect/runtime/src/main/java/org/apache/kafka/connect/storage/KafkaStatusBackingStore.java``).

Three kinds of record share the topic, told apart by the key:

* ``status-connector-<connector>``: a connector's :class:`Status`;
* ``status-task-<connector>-<task>``: a task's :class:`Status`;
* ``status-topic-<topic>:connector-<connector>``: a topic the connector used (KIP-558), a :class:`TopicStatus`.

A null value is a tombstone. Keys are parsed with exactly Connect's rules (``KafkaStatusBackingStore.read`` and the
``read*Status`` / ``parse*`` methods it calls). A record Connect would discard raises
:class:`~connect_state.core.errors.RecordFormatError`; its ``reason`` is made of Connect's own log messages for that
record, in the order Connect logs them, joined by ``"; "``, and, where Connect logs an exception, a short
description of it after ``": "``. Reasons are stored in ``rejected_records``, so their wording is kept stable.

Checked against Kafka 4.3.1's ``KafkaStatusBackingStore``. Its connector and task status carries a fifth field,
``version`` (the plugin version, an optional string), absent from Kafka's October 2024 trunk:
see :class:`Status`.

Pure standard library.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from connect_state.core.errors import RecordFormatError
from connect_state.core.vocabulary import State
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
    "CONNECTOR_STATUS_PREFIX",
    "TASK_STATUS_PREFIX",
    "TOPIC_STATUS_PREFIX",
    "TOPIC_STATUS_SEPARATOR",
    "ConnectorStatusKey",
    "Status",
    "StatusKey",
    "StatusRecord",
    "TaskStatusKey",
    "TopicStatus",
    "TopicStatusKey",
    "connector_status_key",
    "format_status_key",
    "parse_status",
    "parse_status_key",
    "parse_status_record",
    "parse_topic_status",
    "serialize_status",
    "serialize_topic_status",
    "task_status_key",
    "topic_status_key",
    "topic_status_tombstone_keys",
]

CONNECTOR_STATUS_PREFIX = "status-connector-"
TASK_STATUS_PREFIX = "status-task-"
TOPIC_STATUS_PREFIX = "status-topic-"
TOPIC_STATUS_SEPARATOR = ":connector-"

# Longest rendering of a value quoted in a reason; longer ones are cut and end with "...".
_MAX_VALUE_TEXT = 500


# ---------------------------------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectorStatusKey:
    """Key ``status-connector-<connector>``."""

    connector: str


@dataclass(frozen=True)
class TaskStatusKey:
    """Key ``status-task-<connector>-<task>`` (``ConnectorTaskId``)."""

    connector: str
    task: int


@dataclass(frozen=True)
class TopicStatusKey:
    """Key ``status-topic-<topic>:connector-<connector>``."""

    topic: str
    connector: str


StatusKey = ConnectorStatusKey | TaskStatusKey | TopicStatusKey


def connector_status_key(connector: str) -> str:
    """``CONNECTOR_STATUS_PREFIX + connector``, as ``KafkaStatusBackingStore.sendConnectorStatus`` builds it."""
    return CONNECTOR_STATUS_PREFIX + connector


def task_status_key(connector: str, task: int) -> str:
    """``TASK_STATUS_PREFIX + connector + "-" + task``, as ``KafkaStatusBackingStore.sendTaskStatus`` builds it."""
    return f"{TASK_STATUS_PREFIX}{connector}-{task}"


def topic_status_key(topic: str, connector: str) -> str:
    """``TOPIC_STATUS_PREFIX + topic + TOPIC_STATUS_SEPARATOR + connector`` (``sendTopicStatus``)."""
    return TOPIC_STATUS_PREFIX + topic + TOPIC_STATUS_SEPARATOR + connector


def format_status_key(key: StatusKey) -> str:
    """The key string Connect writes for a parsed key.

    ``parse_status_key(format_status_key(k)) == k`` always holds, but not the other way round: Connect also accepts
    keys it never writes, e.g. ``status-task-c-+7`` or ``status-task-c-7-`` for task 7 of ``c``.
    """
    if isinstance(key, ConnectorStatusKey):
        return connector_status_key(key.connector)
    if isinstance(key, TaskStatusKey):
        return task_status_key(key.connector, key.task)
    return topic_status_key(key.topic, key.connector)


def topic_status_tombstone_keys(connector: str, topics: Iterable[str]) -> list[str]:
    """Keys of the tombstones that reset a connector's active topics (``AbstractHerder.resetConnectorActiveTopics``).

    One ``status-topic-<topic>:connector-<connector>`` key per distinct topic, in the order given; each is written
    with a null value (``KafkaStatusBackingStore.deleteTopic``).
    """
    return [topic_status_key(topic, connector) for topic in dict.fromkeys(topics)]


def _parse_connector_key(key: str) -> ConnectorStatusKey:
    """``readConnectorStatus`` / ``parseConnectorStatusKey``: the connector is everything after the prefix."""
    connector = key[len(CONNECTOR_STATUS_PREFIX) :]
    if not connector:
        raise RecordFormatError(f"Discarding record with invalid connector status key {key}")
    return ConnectorStatusKey(connector)


def _parse_task_key(key: str) -> TaskStatusKey:
    """``readTaskStatus`` / ``parseConnectorTaskId``: split on ``-``, at least 4 parts, last part an int.

    The connector is parts[2..n-2] joined with ``-`` and may be empty (``status-task--1`` is task 1 of ``""``).
    """
    discard = f"Discarding record with invalid task status key {key}"
    parts = java_split_dash(key)
    if len(parts) < 4:
        raise RecordFormatError(discard)
    try:
        task = java_parse_int(parts[-1])
    except ValueError:
        raise RecordFormatError(f"Invalid task status key {key}; {discard}") from None
    return TaskStatusKey("-".join(parts[2:-1]), task)


def _utf16_units(text: str) -> bytes:
    return text.encode("utf-16-le", "surrogatepass")


def _parse_topic_key(key: str) -> TopicStatusKey:
    """``readTopicStatus``: the topic runs from the prefix to the first ``:``; 11 characters later the connector starts.

    The 11 characters (``":connector-".length()``) are skipped without being compared to the separator. Java counts
    UTF-16 units; a skip that ends inside a surrogate pair would give Connect a connector name starting with half a
    character: such a key is rejected here (a deliberate difference, see the reason text).
    """
    invalid = f"Discarding record with invalid topic status key {key}"
    delimiter = key.find(":")
    if delimiter < len(TOPIC_STATUS_PREFIX):
        raise RecordFormatError(invalid)
    topic = key[len(TOPIC_STATUS_PREFIX) : delimiter]
    if not topic:
        raise RecordFormatError(f"Discarding record with invalid topic status key containing empty topic {key}")
    after_delimiter = _utf16_units(key[delimiter:])
    skip = 2 * len(TOPIC_STATUS_SEPARATOR)
    if skip > len(after_delimiter):
        raise RecordFormatError(invalid)
    connector_units = after_delimiter[skip:]
    if not connector_units:
        raise RecordFormatError(f"Discarding record with invalid topic status key containing empty connector {key}")
    if 0xDC00 <= int.from_bytes(connector_units[:2], "little") <= 0xDFFF:
        raise RecordFormatError(f"{invalid}: the connector name would start with half of a surrogate pair")
    return TopicStatusKey(topic, connector_units.decode("utf-16-le", "surrogatepass"))


def parse_status_key(key: str | bytes | None) -> StatusKey:
    """Parse a status-topic key exactly as ``KafkaStatusBackingStore.read`` does.

    ``bytes`` are decoded like Kafka's ``StringDeserializer`` (UTF-8, malformed input replaced by U+FFFD).
    The prefixes are tried in Connect's order: connector, task, topic. Raises ``RecordFormatError`` for every key
    Connect discards, with Connect's WARN text, e.g. ``"Discarding record with invalid connector status key
    status-connector-"``. A null key raises ``RecordFormatError("null key")``: Connect's reader fails on it with a
    ``NullPointerException`` (and skips the rest of that poll batch).
    """
    if key is None:
        raise RecordFormatError("null key")
    if isinstance(key, (bytes, bytearray, memoryview)):
        key = decode_java_utf8(key)
    if key.startswith(CONNECTOR_STATUS_PREFIX):
        return _parse_connector_key(key)
    if key.startswith(TASK_STATUS_PREFIX):
        return _parse_task_key(key)
    if key.startswith(TOPIC_STATUS_PREFIX):
        return _parse_topic_key(key)
    raise RecordFormatError(f"Discarding record with invalid key {key}")


# ---------------------------------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Status:
    """A connector or task status (``AbstractStatus``; ``STATUS_SCHEMA_V0``).

    ``version`` is the connector plugin's version, written by recent workers (Kafka 4.3.x) as a fifth field (``null``
    when unknown) and ignored by older workers.
    """

    state: State
    trace: str | None
    worker_id: str | None
    generation: int
    version: str | None = None


@dataclass(frozen=True)
class TopicStatus:
    """A topic a connector's task used (``TopicStatus``, KIP-558). ``discover_timestamp`` is epoch milliseconds."""

    topic: str
    connector: str
    task: int
    discover_timestamp: int


@dataclass(frozen=True)
class StatusRecord:
    """One parsed status-topic record. ``value`` is ``None`` for a tombstone."""

    key: StatusKey
    value: Status | TopicStatus | None


def serialize_status(status: Status, *, with_version: bool = True) -> bytes | None:
    """The value bytes ``KafkaStatusBackingStore.serialize`` produces; ``None`` (a tombstone) for ``DESTROYED``.

    Field order is the schema's: ``state``, ``trace``, ``worker_id``, ``generation`` and, as Kafka 4.3.x writes it,
    ``version``; unset optional fields are written as ``null``::

        {"state":"RUNNING","trace":null,"worker_id":"127.0.0.1:8083","generation":3,"version":null}

    ``with_version=False`` gives the four-field form of older workers. Raises ``ValueError`` where
    Connect's ``Struct`` validation would fail (unknown state, missing worker id, generation outside int32).
    """
    try:
        state = State(status.state)
    except ValueError:
        raise ValueError(f"unknown state {status.state!r}; expected one of {', '.join(State)}") from None
    if state is State.DESTROYED:
        return None
    if status.trace is not None:
        require_str("trace", status.trace)
    require_str("worker_id", status.worker_id)
    require_int("generation", status.generation, 32)
    fields: dict[str, object] = {
        "state": status.state,
        "trace": status.trace,
        "worker_id": status.worker_id,
        "generation": status.generation,
    }
    if with_version:
        if status.version is not None:
            require_str("version", status.version)
        fields["version"] = status.version
    elif status.version is not None:
        raise ValueError("version is set but with_version=False would drop it")
    return jsonconv.dumps(fields)


def serialize_topic_status(status: TopicStatus) -> bytes:
    """The value bytes ``KafkaStatusBackingStore.serializeTopicStatus`` produces::

    {"topic":{"name":"foo-topic","connector":"foo-source","task":0,"discoverTimestamp":1746009337985}}
    """
    require_str("topic", status.topic)
    require_str("connector", status.connector)
    require_int("task", status.task, 32)
    require_int("discover_timestamp", status.discover_timestamp, 64)
    inner = {
        "name": status.topic,
        "connector": status.connector,
        "task": status.task,
        "discoverTimestamp": status.discover_timestamp,
    }
    return jsonconv.dumps({"topic": inner})


def _value_text(value: object) -> str:
    text = jsonconv.java_to_string(value)
    return text if len(text) <= _MAX_VALUE_TEXT else text[:_MAX_VALUE_TEXT] + "..."


class _Invalid(Exception):
    """A value Connect's parse method rejects; the message is the start of the reason."""


def _read_json(data: bytes, failed: str) -> object:
    try:
        return jsonconv.loads(data)
    except jsonconv.JsonFormatError as exc:
        raise _Invalid(f"{failed}: invalid JSON ({exc})") from None


def _string_field(fields: dict[str, object], name: str, failed: str) -> str | None:
    """``(String) map.get(name)``: null when missing, ClassCastException when not a string."""
    value = fields.get(name)
    if value is not None and not isinstance(value, str):
        raise _Invalid(
            f"{failed}: field '{name}' is a {java_class_name(value)}, not a java.lang.String (ClassCastException)"
        )
    return value


def _long_field(fields: dict[str, object], name: str, failed: str) -> int:
    """``(Long) map.get(name)`` then unboxed: NullPointerException when missing, ClassCastException when not a Long."""
    value = fields.get(name)
    if value is None:
        raise _Invalid(f"{failed}: field '{name}' is missing or null (NullPointerException)")
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(
            f"{failed}: field '{name}' is a {java_class_name(value)}, not a java.lang.Long (ClassCastException)"
        )
    return value


def _status_from_bytes(data: bytes, kind: Literal["connector", "task"]) -> Status:
    """``parseConnectorStatus`` / ``parseTaskStatus``: raises ``_Invalid`` with Connect's message for the kind."""
    failed = f"Failed to deserialize {kind} status"
    value = _read_json(data, failed)
    if value is None:
        # "Invalid ... status type {}" calls getClass() on the null value; the generic handler catches the NPE.
        raise _Invalid(f"{failed}: the value is null (NullPointerException)")
    if not isinstance(value, dict):
        raise _Invalid(f"Invalid {kind} status type class {java_class_name(value)}")
    state = _string_field(value, "state", failed)
    if state is None:
        raise _Invalid(f"{failed}: field 'state' is missing or null (NullPointerException)")
    try:
        parsed = State(state)
    except ValueError:
        raise _Invalid(
            f"{failed}: No enum constant org.apache.kafka.connect.runtime.AbstractStatus.State.{state}"
            " (IllegalArgumentException)"
        ) from None
    trace = _string_field(value, "trace", failed)
    worker_id = _string_field(value, "worker_id", failed)
    generation = java_int(_long_field(value, "generation", failed))  # Long.intValue()
    version = _string_field(value, "version", failed)
    return Status(parsed, trace, worker_id, generation, version)


def _topic_status_from_bytes(data: bytes) -> TopicStatus:
    """``parseTopicStatus``: raises ``_Invalid`` with Connect's message."""
    failed = "Failed to deserialize topic status"
    value = _read_json(data, failed)
    if not isinstance(value, dict):
        raise _Invalid(f"Invalid topic status value {_value_text(value)}")
    inner = value.get("topic")
    if not isinstance(inner, dict):
        raise _Invalid(f"Invalid topic status value {_value_text(inner)} for field topic")
    # Java evaluates the constructor arguments in order, then the TopicStatus constructor rejects null names.
    name = _string_field(inner, "name", failed)
    connector = _string_field(inner, "connector", failed)
    task = java_int(_long_field(inner, "task", failed))  # Long.intValue()
    discover_timestamp = _long_field(inner, "discoverTimestamp", failed)
    for field, text in (("name", name), ("connector", connector)):
        if text is None:
            raise _Invalid(f"{failed}: field '{field}' is missing or null (NullPointerException)")
    assert name is not None and connector is not None
    return TopicStatus(name, connector, task, discover_timestamp)


def parse_status(data: bytes, kind: Literal["connector", "task"] = "connector") -> Status:
    """Parse a connector (or task) status value with Connect's rules (``KafkaStatusBackingStore.read``).

    The value must be a JSON object; ``state`` a valid state name; ``generation`` a JSON integer (``1.0`` is a
    ``Double`` for Connect and fails the ``(Long)`` cast), truncated to int32 like ``Long.intValue()``; ``trace``,
    ``worker_id`` and ``version`` strings or missing (``None``). Unknown fields are ignored.
    Raises ``RecordFormatError``, e.g. ``"Failed to deserialize connector status: field 'generation' is a
    java.lang.Double, not a java.lang.Long (ClassCastException)"`` or ``"Invalid connector status type class
    java.util.ArrayList"``. ``kind`` only changes the wording, as Connect's messages do.
    """
    try:
        return _status_from_bytes(data, kind)
    except _Invalid as invalid:
        raise RecordFormatError(str(invalid)) from None


def parse_topic_status(data: bytes) -> TopicStatus:
    """Parse a topic status value with Connect's rules (``parseTopicStatus``).

    The value must be an object whose ``topic`` field is an object with string ``name`` and ``connector`` (non-null)
    and integer ``task`` (truncated to int32) and ``discoverTimestamp``. Raises ``RecordFormatError`` with
    ``"Failed to deserialize topic status: ..."``, ``"Invalid topic status value <value>"`` or ``"Invalid topic
    status value <value> for field topic"``.
    """
    try:
        return _topic_status_from_bytes(data)
    except _Invalid as invalid:
        raise RecordFormatError(str(invalid)) from None


def parse_status_record(key: str | bytes | None, value: bytes | None) -> StatusRecord:
    """Parse one status-topic record as ``KafkaStatusBackingStore.read`` does.

    A null ``value`` is a tombstone (``StatusRecord(key, None)``), valid for every key kind. Raises
    ``RecordFormatError`` for every record Connect discards. For task and topic records the reason ends with Connect's
    follow-up WARN, e.g. ``"Failed to deserialize task status: invalid JSON (...); Failed to parse task status with key
    status-task-foo-0"``.
    """
    parsed_key = parse_status_key(key)
    assert key is not None
    if value is None:
        return StatusRecord(parsed_key, None)
    data = bytes(value)
    try:
        if isinstance(parsed_key, ConnectorStatusKey):
            return StatusRecord(parsed_key, _status_from_bytes(data, "connector"))
        if isinstance(parsed_key, TaskStatusKey):
            return StatusRecord(parsed_key, _status_from_bytes(data, "task"))
        return StatusRecord(parsed_key, _topic_status_from_bytes(data))
    except _Invalid as invalid:
        if isinstance(parsed_key, ConnectorStatusKey):
            raise RecordFormatError(str(invalid)) from None
        what = "task" if isinstance(parsed_key, TaskStatusKey) else "topic"
        raise RecordFormatError(f"{invalid}; Failed to parse {what} status with key {_key_text(key)}") from None


def _key_text(key: str | bytes) -> str:
    """The key as Connect prints it (bytes decoded like ``StringDeserializer``)."""
    if isinstance(key, (bytes, bytearray, memoryview)):
        return decode_java_utf8(key)
    return key
