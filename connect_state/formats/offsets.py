"""Records of Connect's offsets topic and the offsets REST bodies, byte for byte like Connect
(``connect/runtime/src/main/java/org/apache/kafka/connect/storage/KafkaOffsetBackingStore.java``,
``connect/runtime/src/main/java/org/apache/kafka/connect/storage/OffsetUtils.java``,
``connect/runtime/src/main/java/org/apache/kafka/connect/util/SinkUtils.java``).

**The topic** (``KafkaOffsetBackingStore``, ``OffsetUtils``, ``OffsetStorageWriter``). A key is the JSON array
``[connector, partition]`` written by the internal key converter, e.g. ``["file-source",{"filename":"/tmp/in"}]``;
a value is the offset map as JSON, or null (a tombstone: no offset). The store keeps every value under its raw key
bytes, whatever the key looks like, and separately tracks each connector's partitions with
``OffsetUtils.processPartitionKey``, which ignores malformed keys with a WARN: :func:`parse_offset_key` raises
:class:`~connect_state.core.errors.RecordFormatError` with that WARN text. Connect looks offsets up by exact key bytes
after re-serialising the partition maps it parsed, i.e. in Java ``HashMap`` order
(:func:`~connect_state.formats.javalang.java_hashmap_ordered`):
:func:`offset_key_bytes` writes those bytes.

**Source connectors over REST** (``ConnectorsResource``, ``ConnectorOffsets.toMap``,
``Worker.normalizeSourceConnectorOffsets``): :func:`parse_offsets_request` reads a ``PATCH /offsets`` body as Jackson
and the resource do, :func:`normalize_source_offsets` validates and normalises the pairs as the worker does before
writing them.

**Sink connectors** keep their offsets in the consumer group ``connect-<name>``; their REST shape is
``{"partition":{"kafka_partition":0,"kafka_topic":"t"},"offset":{"kafka_offset":5}}`` (:func:`sink_partition`,
:func:`sink_offset`) and :func:`parse_sink_offsets` applies ``SinkUtils.parseSinkConnectorOffsets``.

REST errors raise :class:`BadOffsetsRequest` with Connect's message and HTTP status. Request bodies must have been
read with Python's :func:`json.loads` (not :func:`connect_state.formats.jsonconv.loads`): Jackson's data binding keeps
integers of any size and reads objects as ``LinkedHashMap`` in document order, as ``json.loads`` does.

Checked against Kafka 4.3.1 (``OffsetUtils``, ``OffsetStorageWriter``, ``SinkUtils``, ``ConnectorOffsets`` read by
``JacksonJsonProvider``, ``Worker.completeModifyOffsetsCallback``).

Pure standard library.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from connect_state.core.errors import RecordFormatError
from connect_state.formats import jsonconv
from connect_state.formats.javalang import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    java_class_name,
    java_double_to_string,
    java_equality_key,
    java_hashmap_ordered,
    java_parse_int,
    java_parse_long,
    java_trim,
)

__all__ = [
    "KAFKA_OFFSET_KEY",
    "KAFKA_PARTITION_KEY",
    "KAFKA_TOPIC_KEY",
    "BadOffsetsRequest",
    "OffsetKey",
    "OffsetPair",
    "SinkOffset",
    "map_identity",
    "normalize_source_offsets",
    "offset_key_bytes",
    "parse_offset_key",
    "parse_offset_value",
    "parse_offsets_request",
    "parse_sink_offsets",
    "parse_sink_offsets_request",
    "parse_source_offsets_request",
    "serialize_offset_value",
    "sink_offset",
    "sink_partition",
    "validate_offset_map",
]

KAFKA_TOPIC_KEY = "kafka_topic"
KAFKA_PARTITION_KEY = "kafka_partition"
KAFKA_OFFSET_KEY = "kafka_offset"

#: A (partition, offset) pair of a ``PATCH /offsets`` body; either may be ``None``.
OffsetPair = tuple[dict[str, object] | None, dict[str, object] | None]


class BadOffsetsRequest(RecordFormatError):
    """A ``PATCH /connectors/<name>/offsets`` request Connect refuses: ``message`` and the HTTP ``status``.

    400 for ``BadRequestException`` (an empty request, the sink checks); 500 for what Connect's
    ``ConnectExceptionMapper`` does not map (Jackson errors, the ``NullPointerException`` of a ``null`` entry,
    ``DataException`` from ``OffsetUtils.validateFormat``).
    """

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


# ---------------------------------------------------------------------------------------------------------------------
# Keys and values of the topic
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetKey:
    """A parsed offsets-topic key ``[connector, partition]``.

    ``partition`` is ``None`` for ``[connector, null]``, a key ``OffsetUtils.processPartitionKey`` skips *without*
    logging anything (the store still keeps the value under the raw key bytes); callers skip it too.
    """

    connector: str
    partition: dict[str, object] | None = field(hash=False)


_UNEXPECTED_FORMAT = "Ignoring offset partition key with an unexpected format"


def parse_offset_key(data: bytes | None) -> OffsetKey:
    """Parse a key with ``OffsetUtils.processPartitionKey``'s rules; raise ``RecordFormatError`` with its WARN text.

    In Connect's order: a null key (``"Ignoring offset partition key with an unexpected null value"``); bytes the
    key converter cannot read (``"Ignoring offset partition key with unknown serialization. Expected json."``
    followed by ``": invalid JSON (...)"``); not a JSON array, empty bytes included (``"... Expected type:
    java.util.List, actual type: null"``); not 2 elements; a first element that is not a string; a second element that
    is neither an object nor null. A JSON ``null`` second element gives ``OffsetKey(connector, None)``.

    Whatever this says, ``KafkaOffsetBackingStore`` stores the record's value under the raw key bytes (a tombstone
    removes it): only the connector's partition set ignores a malformed key.
    """
    if data is None:
        raise RecordFormatError("Ignoring offset partition key with an unexpected null value")
    try:
        key = jsonconv.loads(data)
    except jsonconv.JsonFormatError as exc:
        raise RecordFormatError(
            f"Ignoring offset partition key with unknown serialization. Expected json.: invalid JSON ({exc})"
        ) from None
    if not isinstance(key, list):
        raise RecordFormatError(
            f"{_UNEXPECTED_FORMAT}. Expected type: java.util.List, actual type: {java_class_name(key)}"
        )
    if len(key) != 2:
        raise RecordFormatError(
            f"Ignoring offset partition key with an unexpected number of elements. Expected: 2, actual: {len(key)}"
        )
    connector, partition = key
    if not isinstance(connector, str):
        raise RecordFormatError(
            f"{_UNEXPECTED_FORMAT} for the first element in the partition key list. Expected type: java.lang.String, "
            f"actual type: {java_class_name(connector)}"
        )
    if partition is not None and not isinstance(partition, dict):
        raise RecordFormatError(
            f"{_UNEXPECTED_FORMAT} for the second element in the partition key list. Expected type: java.util.Map, "
            f"actual type: {java_class_name(partition)}"
        )
    return OffsetKey(connector, partition)


# ``["<connector>",{`` as Connect writes a key: a compact array whose first element is a string without escapes and
# whose second is a map.
_PLAIN_KEY_PREFIX = re.compile(rb'\["([^"\\\x00-\x1f]*)",\{')


def offset_key_connector(data: bytes) -> str | None:
    """The connector an offsets-topic key names with a partition map, for routing the record; None for a key that
    names none (``[connector, null]``). Read from the plain prefix Connect writes when it can, else by
    :func:`parse_offset_key` (which raises ``RecordFormatError``). A key the prefix reads may still be one
    :func:`parse_offset_key` rejects (a malformed map, a third element): whoever folds the record parses it in full."""
    match = _PLAIN_KEY_PREFIX.match(data)
    if match is not None:
        try:
            return match.group(1).decode("utf-8")
        except UnicodeDecodeError:
            pass
    parsed = parse_offset_key(data)
    return None if parsed.partition is None else parsed.connector


def _round_trip(value: object) -> object:
    """What ``JsonConverter`` gives back for a value it wrote (integers as longs, ``1e400`` as ``"Infinity"``), or the
    error its reader raises (Jackson's limits: a name longer than 50,000 UTF-16 units, a string longer than
    20,000,000): the value itself for a flat map of ASCII names within the name limit and strings (ASCII, within the
    string limit), booleans, nulls and ints in the long range (a source partition as most connectors write it), which
    comes back as it went."""
    if (
        isinstance(value, dict)
        and all(_plain_name(name) for name in value)
        and all(_plain_scalar(item) for item in value.values())
    ):
        return value
    return jsonconv.loads(jsonconv.dumps(value))


def _plain_name(name: object) -> bool:
    """An ASCII name (one UTF-16 unit a character, no surrogate) within Jackson's name limit."""
    return type(name) is str and name.isascii() and len(name) <= jsonconv.MAX_NAME_LENGTH


def _plain_scalar(value: object) -> bool:
    kind = type(value)
    if kind is int:
        return INT64_MIN <= value <= INT64_MAX  # type: ignore[operator]
    if isinstance(value, str) and kind is str:
        return value.isascii() and len(value) <= jsonconv.MAX_STRING_LENGTH
    return kind is bool or value is None


def offset_key_bytes(connector: str, partition: Mapping[str, object] | None) -> bytes:
    """The key bytes Connect writes and looks up for a source partition: ``[connector, partition]``.

    The partition goes through a ``JsonConverter`` round trip and comes out in Java ``HashMap`` order, as in
    ``Worker.normalizeSourceConnectorOffsets`` followed by ``OffsetStorageWriter`` (PATCH), in ``DELETE /offsets``
    and in the lookups of ``GET /offsets``::

        offset_key_bytes("c", {"kafka_topic": "t", "kafka_partition": 0})
        == b'["c",{"kafka_partition":0,"kafka_topic":"t"}]'

    ``None`` gives ``["c",null]`` (what a ``PATCH`` with a null partition writes for a source connector).
    """
    normalized = None if partition is None else java_hashmap_ordered(_round_trip(dict(partition)))
    return jsonconv.dumps([connector, normalized])


def serialize_offset_value(offset: Mapping[str, object] | None) -> bytes | None:
    """The value bytes ``OffsetStorageWriter`` writes for a normalised offset: ``None`` (a tombstone) or the map in
    Java ``HashMap`` order (``{"kafka_offset":5}``, ``{"position":1234}``).
    """
    if offset is None:
        return None
    return jsonconv.dumps(java_hashmap_ordered(_round_trip(dict(offset))))


def parse_offset_value(data: bytes | None) -> dict[str, object] | None:
    """Read an offset value as ``OffsetStorageReaderImpl.offsets`` does: ``None`` for a tombstone (no offset).

    The value must be JSON that ``OffsetUtils.validateFormat`` accepts: an object (or null) with primitive values.
    Otherwise raises ``RecordFormatError`` (Connect logs ``"CRITICAL: Failed to deserialize offset data ..."`` and
    leaves the partition out of ``GET /offsets``), with the ``DataException`` message or ``"invalid JSON (...)"``.
    """
    if data is None:
        return None
    try:
        value = jsonconv.loads(data)
    except jsonconv.JsonFormatError as exc:
        raise RecordFormatError(f"invalid JSON ({exc})") from None
    validate_offset_map(value)
    assert value is None or isinstance(value, dict)
    return value


# ---------------------------------------------------------------------------------------------------------------------
# OffsetUtils.validateFormat
# ---------------------------------------------------------------------------------------------------------------------


def _schema_type(value: object) -> str | None:
    """``ConnectSchema.schemaType(value.getClass())`` for a value Jackson or ``JsonConverter`` read; ``None`` when
    Connect has no schema type for the class (an integer beyond a long is a ``BigInteger``).
    """
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        if INT32_MIN <= value <= INT32_MAX:
            return "INT32"
        return "INT64" if INT64_MIN <= value <= INT64_MAX else None
    if isinstance(value, float):
        return "FLOAT64"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, (bytes, bytearray)):
        return "BYTES"
    if isinstance(value, Mapping):
        return "MAP"
    if isinstance(value, (list, tuple)):
        return "ARRAY"
    raise TypeError(f"not a value Connect reads from JSON: {type(value).__name__}")


def validate_offset_map(value: object, what: str = "Offsets") -> None:
    """``OffsetUtils.validateFormat``: ``None``, or a map with string keys and primitive (or null) values.

    Raises ``RecordFormatError`` (Connect's ``DataException``) with Connect's message, e.g. ``"Offsets may only
    contain primitive types as values, but field pos contains MAP"`` (``ARRAY`` for a list; ``class
    java.math.BigInteger`` for an integer beyond the long range, which only Jackson's REST binding produces). Connect
    says ``Offsets`` for partitions too; ``what`` replaces that word.
    """
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise RecordFormatError(f"{what} must be specified as a Map")
    for name, item in value.items():
        if not isinstance(name, str):
            raise RecordFormatError(f"{what} may only use String keys")
        if item is None:
            continue
        schema_type = _schema_type(item)
        if schema_type in ("MAP", "ARRAY", None):
            kind = schema_type or "class java.math.BigInteger"
            raise RecordFormatError(
                f"{what} may only contain primitive types as values, but field {name} contains {kind}"
            )


# ---------------------------------------------------------------------------------------------------------------------
# The PATCH body: JacksonJsonProvider reading ConnectorOffsets, ConnectorsResource, ConnectorOffsets.toMap
# ---------------------------------------------------------------------------------------------------------------------

_ENTITIES = "org.apache.kafka.connect.runtime.rest.entities"
_OFFSETS_CLASS = f"{_ENTITIES}.ConnectorOffsets"
_OFFSET_CLASS = f"{_ENTITIES}.ConnectorOffset"
_LIST_TYPE = f"java.util.ArrayList<{_OFFSET_CLASS}>"
_MAP_TYPE = "java.util.LinkedHashMap<java.lang.String,java.lang.Object>"
_EMPTY_REQUEST = "Partitions / offsets need to be provided for an alter offsets request"


def _jackson(message: str) -> BadOffsetsRequest:
    return BadOffsetsRequest(message, 500)


def _token(value: object) -> str:
    """Jackson's ``from <shape> value (token `JsonToken.<T>`)`` for a JSON value."""
    if isinstance(value, bool):
        return f"Boolean value (token `JsonToken.VALUE_{'TRUE' if value else 'FALSE'}`)"
    if isinstance(value, int):
        return "Integer value (token `JsonToken.VALUE_NUMBER_INT`)"
    if isinstance(value, float):
        return "Floating-point value (token `JsonToken.VALUE_NUMBER_FLOAT`)"
    if isinstance(value, str):
        return "String value (token `JsonToken.VALUE_STRING`)"
    if isinstance(value, list):
        return "Array value (token `JsonToken.START_ARRAY`)"
    return "Object value (token `JsonToken.START_OBJECT`)"


def _mismatch(type_name: str, value: object) -> BadOffsetsRequest:
    return _jackson(f"Cannot deserialize value of type `{type_name}` from {_token(value)}")


def _no_creator(class_name: str, value: object) -> BadOffsetsRequest:
    """A bean with a properties-based creator (or a ``LinkedHashMap``) given a scalar.

    Jackson ``trim()``s a string first (characters up to U+0020 at either end); what is left empty is an empty
    string, which it will not coerce.
    """
    if isinstance(value, str):
        value = java_trim(value)
    if value == "":
        target = f"element of `{class_name}`" if class_name == "java.util.LinkedHashMap" else f"`{class_name}` value"
        return _jackson(
            f'Cannot coerce empty String ("") to {target} (but could if coercion was enabled using `CoercionConfig`)'
        )
    if isinstance(value, str):
        argument, shown = "String", f"String value ('{value}')"
    elif isinstance(value, bool):
        argument, shown = "boolean/Boolean", f"boolean value ({'true' if value else 'false'})"
    elif isinstance(value, int):
        if INT32_MIN <= value <= INT32_MAX:
            argument = "int/Int"
        else:
            argument = "long/Long" if INT64_MIN <= value <= INT64_MAX else "BigInteger"
        shown = f"Number value ({value})"
    else:
        assert isinstance(value, float)
        argument, shown = "double/Double", f"Number value ({java_double_to_string(value)})"
    return _jackson(
        f"Cannot construct instance of `{class_name}` (although at least one Creator exists): "
        f"no {argument}-argument constructor/factory method to deserialize from {shown}"
    )


def _read_map(value: object) -> None:
    """A ``Map<String, ?>`` creator property (``partition``, ``offset``): ``null`` or an object, any values."""
    if value is None or isinstance(value, dict):
        return
    if isinstance(value, str):
        raise _no_creator("java.util.LinkedHashMap", value)
    raise _mismatch(_MAP_TYPE, value)


def _read_offset_entry(value: object) -> None:
    """One ``ConnectorOffset``: ``{"partition":...,"offset":...}`` (a ``null`` entry passes Jackson)."""
    if value is not None:
        _read_bean(value, _OFFSET_CLASS, ("partition", "offset"), lambda name, item: _read_map(item))


def _read_offsets_list(value: object) -> None:
    """The ``offsets`` property: ``null`` or a list of ``ConnectorOffset``."""
    if value is None:
        return
    if not isinstance(value, list):
        raise _mismatch(_LIST_TYPE, value)
    for element in value:
        _read_offset_entry(element)


def _read_bean(
    value: object, class_name: str, known: tuple[str, ...], read_property: Callable[[str, object], None]
) -> dict[str, object]:
    """A bean with a properties-based creator, as Jackson's ``BeanDeserializer`` reads it: its known properties in
    document order; an unknown property is buffered and reported once every creator property has been read (or at
    the end of the object), so errors inside known properties read before that point come first.
    """
    if isinstance(value, list):
        raise _mismatch(class_name, value)
    if not isinstance(value, dict):
        raise _no_creator(class_name, value)
    if len(known) == 1:
        described = f'one known property: "{known[0]}"'
    else:
        described = f"{len(known)} known properties: " + ", ".join(f'"{name}"' for name in known)

    def unrecognized(name: str) -> BadOffsetsRequest:
        return _jackson(f'Unrecognized field "{name}" (class {class_name}), not marked as ignorable ({described})')

    seen: set[str] = set()
    unknown: str | None = None
    for name, item in value.items():
        if name not in known:
            if len(seen) == len(known):
                raise unrecognized(name)
            unknown = unknown if unknown is not None else name
            continue
        read_property(name, item)
        seen.add(name)
        if len(seen) == len(known) and unknown is not None:
            raise unrecognized(unknown)
    if unknown is not None:
        raise unrecognized(unknown)
    return value


def map_identity(value: dict[str, object] | None) -> object:
    """A hashable key equal for two partition (or offset) maps exactly when Java's ``Map.equals`` says so: what
    Connect's ``HashSet`` of ``connectorPartitions`` and the ``HashMap`` of ``ConnectorOffsets.toMap`` dedupe by."""
    return java_equality_key(value)


def parse_offsets_request(body: object) -> list[OffsetPair]:
    """Read a ``PATCH /connectors/<name>/offsets`` body as Connect does before any connector-specific check.

    1. ``JacksonJsonProvider`` binds ``{"offsets":[{"partition":{...},"offset":{...}}]}`` to ``ConnectorOffsets``;
       what it cannot bind is a 500 with Jackson's message (its first line: ``"Cannot deserialize value of type
       ..."``, ``"Unrecognized field ..."``, ``"Cannot construct instance of ..."``; Jackson's location and
       reference-chain suffix are not reproduced).
    2. ``ConnectorsResource.alterConnectorOffsets``: a null body, ``{}``, ``{"offsets":null}`` or ``{"offsets":[]}``
       is a 400 ``"Partitions / offsets need to be provided for an alter offsets request"``.
    3. ``ConnectorOffsets.toMap``: a ``null`` entry is a 500 (``NullPointerException``); a missing partition or
       offset is ``None``; a partition equal (Java ``Map.equals``) to an earlier one replaces that one's offset in
       place.

    In Connect the herder's checks (connector exists, is STOPPED with no tasks) come next, then
    :func:`parse_sink_offsets` or :func:`normalize_source_offsets`.
    """
    if body is None:
        raise BadOffsetsRequest(_EMPTY_REQUEST)
    fields = _read_bean(body, _OFFSETS_CLASS, ("offsets",), lambda name, item: _read_offsets_list(item))
    entries = fields.get("offsets")
    if not entries:
        raise BadOffsetsRequest(_EMPTY_REQUEST)
    assert isinstance(entries, list)
    pairs: dict[object, OffsetPair] = {}
    for entry in entries:
        if entry is None:
            raise _jackson(f'Cannot invoke "{_OFFSET_CLASS}.partition()" because "offset" is null')
        assert isinstance(entry, dict)
        partition, offset = entry.get("partition"), entry.get("offset")
        assert (partition is None or isinstance(partition, dict)) and (offset is None or isinstance(offset, dict))
        identity = java_equality_key(partition)
        pairs[identity] = (pairs[identity][0] if identity in pairs else partition, offset)
    return list(pairs.values())


# ---------------------------------------------------------------------------------------------------------------------
# Source connectors: Worker.normalizeSourceConnectorOffsets
# ---------------------------------------------------------------------------------------------------------------------


def normalize_source_offsets(pairs: list[OffsetPair]) -> list[OffsetPair]:
    """``Worker.normalizeSourceConnectorOffsets``: validate each partition then its offset, then round-trip both
    through ``JsonConverter`` (integers become longs, maps come out in ``HashMap`` order).

    A ``validateFormat`` failure is a 500 :class:`BadOffsetsRequest` (``DataException``). The results are what
    ``OffsetStorageWriter`` writes: key :func:`offset_key_bytes`, value :func:`serialize_offset_value` (``None``, a
    tombstone, for a null offset).
    """
    normalized: list[OffsetPair] = []
    for partition, offset in pairs:
        for item in (partition, offset):
            try:
                validate_offset_map(item)
            except RecordFormatError as exc:
                raise BadOffsetsRequest(exc.reason, 500) from None
        normalized.append((_normalize_map(partition), _normalize_map(offset)))
    return normalized


def _normalize_map(value: dict[str, object] | None) -> dict[str, object] | None:
    if value is None:
        return None
    result = java_hashmap_ordered(_round_trip(value))
    assert isinstance(result, dict)
    return result


def parse_source_offsets_request(body: object) -> list[OffsetPair]:
    """:func:`parse_offsets_request` then :func:`normalize_source_offsets`: the pairs a source connector's ``PATCH``
    writes. Connect runs the herder's checks between the two steps; call them separately to keep its precedence.
    """
    return normalize_source_offsets(parse_offsets_request(body))


# ---------------------------------------------------------------------------------------------------------------------
# Sink connectors: SinkUtils
# ---------------------------------------------------------------------------------------------------------------------


def sink_partition(topic: str, partition: int) -> dict[str, object]:
    """A sink partition as ``GET /offsets`` shows it, in ``HashMap`` order: ``{"kafka_partition":0,"kafka_topic":"t"}``
    (``SinkUtils.consumerGroupOffsetsToConnectorOffsets``).
    """
    ordered = java_hashmap_ordered({KAFKA_TOPIC_KEY: topic, KAFKA_PARTITION_KEY: partition})
    assert isinstance(ordered, dict)
    return ordered


def sink_offset(offset: int) -> dict[str, object]:
    """A sink offset as ``GET /offsets`` shows it: ``{"kafka_offset":5}``."""
    return {KAFKA_OFFSET_KEY: offset}


class SinkOffset(NamedTuple):
    """One entry of a sink ``PATCH``, ``(topic, partition, offset)``: ``offset`` ``None`` deletes the group's
    committed offset for the partition (``deleteConsumerGroupOffsets``), any other is altered to.
    """

    topic: str
    partition: int
    offset: int | None


def _rest_to_string(value: object) -> str:
    """``String.valueOf`` of a value Jackson's data binding read: ``LinkedHashMap`` (document order), ``ArrayList``,
    ``Integer``/``Long``/``BigInteger``, ``Double``, ``Boolean``, ``String``.
    """
    if isinstance(value, dict):
        return "{" + ", ".join(f"{name}={_rest_to_string(item)}" for name, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_rest_to_string(item) for item in value) + "]"
    return jsonconv.java_to_string(value)


def _sink_entry(partition: dict[str, object] | None, offset: dict[str, object] | None) -> SinkOffset:
    """One entry of ``SinkUtils.parseSinkConnectorOffsets``, checks in Connect's order."""
    if partition is None:
        raise BadOffsetsRequest("The partition for a sink connector offset cannot be null or missing")
    if KAFKA_TOPIC_KEY not in partition or KAFKA_PARTITION_KEY not in partition:
        raise BadOffsetsRequest(
            f"The partition for a sink connector offset must contain the keys '{KAFKA_TOPIC_KEY}' and "
            f"'{KAFKA_PARTITION_KEY}'"
        )
    if partition[KAFKA_TOPIC_KEY] is None:
        raise BadOffsetsRequest("Kafka topic names must be valid strings and may not be null")
    if partition[KAFKA_PARTITION_KEY] is None:
        raise BadOffsetsRequest("Kafka partitions must be valid numbers and may not be null")
    topic = _rest_to_string(partition[KAFKA_TOPIC_KEY])
    partition_text = _rest_to_string(partition[KAFKA_PARTITION_KEY])
    try:
        partition_number = java_parse_int(partition_text)
    except ValueError:
        raise BadOffsetsRequest(
            f"Failed to parse the following Kafka partition value in the provided offsets: '{partition_text}'. "
            "Partition values for sink connectors need to be integers."
        ) from None
    if offset is None:
        return SinkOffset(topic, partition_number, None)
    if KAFKA_OFFSET_KEY not in offset:
        raise BadOffsetsRequest(
            f"The offset for a sink connector should either be null or contain the key '{KAFKA_OFFSET_KEY}'"
        )
    offset_text = _rest_to_string(offset[KAFKA_OFFSET_KEY])
    try:
        return SinkOffset(topic, partition_number, java_parse_long(offset_text))
    except ValueError:
        raise BadOffsetsRequest(
            f"Failed to parse the following Kafka offset value in the provided offsets: '{offset_text}'. "
            "Offset values for sink connectors need to be integers."
        ) from None


def parse_sink_offsets(pairs: list[OffsetPair]) -> list[SinkOffset]:
    """``SinkUtils.parseSinkConnectorOffsets`` over the pairs of :func:`parse_offsets_request` (400s).

    Any non-null topic is taken through ``String.valueOf`` (``5`` is topic ``"5"``); partitions through
    ``Integer.parseInt(String.valueOf(v))`` (``10`` and ``"10"`` pass, ``1.5``, ``1.0`` and ``" 1"`` fail) and
    offsets through ``Long.parseLong`` likewise. Two entries naming the same topic partition keep the later one.
    """
    parsed: dict[tuple[str, int], SinkOffset] = {}
    for partition, offset in pairs:
        entry = _sink_entry(partition, offset)
        parsed[(entry.topic, entry.partition)] = entry
    return list(parsed.values())


def parse_sink_offsets_request(body: object) -> list[SinkOffset]:
    """:func:`parse_offsets_request` then :func:`parse_sink_offsets`. Connect runs the herder's checks between the
    two steps; call them separately to keep its precedence.
    """
    return parse_sink_offsets(parse_offsets_request(body))
