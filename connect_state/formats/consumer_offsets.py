"""Records of Kafka's ``__consumer_offsets`` topic, byte for byte like the group coordinator of Kafka 4.3.1.

Sink connectors keep their offsets as the committed offsets of a consumer group (``connect-<name>``, or
``consumer.override.group.id``), and the group coordinator stores those commits in ``__consumer_offsets``. Its
records are written and read by ``CoordinatorRecordSerde`` (``GroupCoordinatorRecordSerde``) with the classes
generated from ``group-coordinator/src/main/resources/common/message/*.json``:

* **key** = ``int16`` record type (``CoordinatorRecordType``), then the key message. Types 0
  (``LegacyOffsetCommitKey``) and 1 (``OffsetCommitKey``) are offset commits, both ``group`` (string),
  ``topic`` (string), ``partition`` (int32); type 2 is ``GroupMetadataKey``; 3 and up are the KIP-848 consumer,
  share and streams group records (:data:`RECORD_TYPES`).
* **value** = ``int16`` value version, then the value message; a null value is a tombstone (an offset deleted or
  expired, a group deleted). ``OffsetCommitValue`` versions (type 1): ``offset`` int64; ``leaderEpoch`` int32 (v3+,
  default -1); ``metadata`` string; ``commitTimestamp`` int64; ``expireTimestamp`` int64 (v1 only, default -1);
  v4 is flexible (compact strings, tagged fields; tag 0 = ``topicId``, a UUID). Type 0 takes value version 0 only
  (``LegacyOffsetCommitValue``: offset, metadata, commitTimestamp).

Strings are ``int16`` length + UTF-8 (``int16`` -1 is null), compact strings ``unsigned varint`` length+1 (0 is
null); every string here is non-nullable and at most 32767 bytes. Like Kafka's readers, bytes after the last field
are ignored.

:func:`parse_consumer_offsets_record` raises :class:`~connect_state.core.errors.RecordFormatError` for a record the
coordinator cannot load (an unknown record type or value version, which the loader skips with a WARN, or bytes the
generated readers reject), with the coordinator's message. The serialisers write what the coordinator writes (tests,
benchmarks).

Pure standard library.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass

from connect_state.core.errors import RecordFormatError
from connect_state.formats.javalang import decode_java_utf8

__all__ = [
    "GROUP_METADATA",
    "LEGACY_OFFSET_COMMIT",
    "OFFSET_COMMIT",
    "RECORD_TYPES",
    "ConsumerOffsetsRecord",
    "GroupRecordKey",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "parse_consumer_offsets_record",
    "parse_offset_commit_value",
    "parse_record_key",
    "serialize_offset_commit_key",
    "serialize_offset_commit_value",
]

LEGACY_OFFSET_COMMIT = 0
OFFSET_COMMIT = 1
GROUP_METADATA = 2

#: ``CoordinatorRecordType`` of Kafka 4.3.1: record type id -> name (ids 9 and 18 are unused).
RECORD_TYPES: dict[int, str] = {
    0: "LegacyOffsetCommit",
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
    17: "StreamsGroupMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}

#: The value versions the coordinator reads for the offset-commit record types (``CoordinatorRecordType``).
_VALUE_VERSIONS = {LEGACY_OFFSET_COMMIT: range(0, 1), OFFSET_COMMIT: range(0, 5)}
_FIRST_FLEXIBLE_VERSION = 4
_TOPIC_ID_TAG = 0
_MAX_STRING_LENGTH = 0x7FFF


@dataclass(frozen=True)
class OffsetCommitKey:
    """The key of an offset commit: the group's committed offset for one topic partition."""

    group: str
    topic: str
    partition: int
    record_type: int = OFFSET_COMMIT


@dataclass(frozen=True)
class GroupRecordKey:
    """The key of any other coordinator record (group metadata, KIP-848 group records): only its type is read."""

    record_type: int

    @property
    def name(self) -> str:
        return RECORD_TYPES[self.record_type]


@dataclass(frozen=True)
class OffsetCommitValue:
    """An ``OffsetCommitValue`` (or ``LegacyOffsetCommitValue``) with the defaults of the versions lacking a field.

    ``topic_id`` is the tagged field of version 4 as Kafka's ``Uuid.toString`` (URL-safe base64 without padding),
    ``None`` when absent (``Uuid.ZERO_UUID``).
    """

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1
    topic_id: str | None = None
    version: int = 3


@dataclass(frozen=True)
class ConsumerOffsetsRecord:
    """One parsed record; ``value`` is ``None`` for a tombstone and for every record that is not an offset commit."""

    key: OffsetCommitKey | GroupRecordKey
    value: OffsetCommitValue | None

    @property
    def is_offset_commit(self) -> bool:
        return isinstance(self.key, OffsetCommitKey)


class _Reader:
    """``ByteBufferAccessor`` over one buffer: big-endian fixed-size integers, Kafka's unsigned varints, strings."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise _Underflow(f"{size} bytes needed at position {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def unsigned_varint(self) -> int:
        """``ByteUtils.readUnsignedVarint``: at most 5 bytes, 7 bits each, least significant group first."""
        value = 0
        for i in range(5):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                return value if value < 2**31 else value - 2**32
        converted = hex(value & 0xFFFFFFFF)[2:]
        raise _Malformed(
            f"Varint is too long, the most significant bit in the 5th byte is set, converted value: {converted}"
        )

    def string(self, field: str, compact: bool) -> str:
        """A non-nullable string: ``int16`` length, or ``unsigned varint`` length + 1 when ``compact``."""
        length = self.unsigned_varint() - 1 if compact else self.int16()
        if length < 0:
            raise _Malformed(f"non-nullable field {field} was serialized as null")
        if length > _MAX_STRING_LENGTH:
            raise _Malformed(f"string field {field} had invalid length {length}")
        return decode_java_utf8(self.take(length))


class _Malformed(Exception):
    """A ``RuntimeException`` of a generated reader (its message)."""


class _Underflow(_Malformed):
    """``BufferUnderflowException``: the buffer ended inside a field."""


def _read_failure(version: int, what: str, error: _Malformed) -> RecordFormatError:
    """``CoordinatorRecordSerde.readMessage``'s message; a ``BufferUnderflowException`` has none (Java prints
    ``null``).
    """
    detail = "null" if isinstance(error, _Underflow) else str(error)
    return RecordFormatError(f"Could not read record with version {version} from {what}'s buffer due to: {detail}.")


def _read_version(reader: _Reader) -> int:
    try:
        return reader.int16()
    except _Underflow:
        raise RecordFormatError(f"Could not read version from {reader.what}'s buffer.") from None


def parse_record_key(data: bytes | None) -> OffsetCommitKey | GroupRecordKey:
    """Read a ``__consumer_offsets`` key: its record type, and the whole key for the offset-commit types.

    Raises ``RecordFormatError`` for a null key, an unknown record type (``"Unknown record type <n> while loading
    offsets and group metadata ..."``, the WARN of ``CoordinatorLoaderImpl``, which skips the record) or a key the
    reader rejects. Only the type of the other records is read (their values do not matter here).
    """
    if data is None:
        raise RecordFormatError("Could not read version from key's buffer.")
    reader = _Reader(bytes(data), "key")
    record_type = _read_version(reader)
    if record_type not in RECORD_TYPES:
        raise RecordFormatError(
            f"Unknown record type {record_type} while loading offsets and group metadata. Ignoring it. "
            "It could be a left over from an aborted upgrade."
        )
    if record_type not in _VALUE_VERSIONS:
        return GroupRecordKey(record_type)
    try:
        group = reader.string("group", compact=False)
        topic = reader.string("topic", compact=False)
        partition = reader.int32()
    except _Malformed as error:
        raise _read_failure(record_type, "key", error) from None
    return OffsetCommitKey(group, topic, partition, record_type)


def parse_offset_commit_value(data: bytes, record_type: int = OFFSET_COMMIT) -> OffsetCommitValue:
    """Read the value of an offset commit of ``record_type`` (0 or 1), as ``CoordinatorRecordSerde.deserialize``.

    A version outside the type's range raises ``RecordFormatError`` (``UnknownRecordVersionException``: ``"Found an
    unknown record version 5 for 1 type"``), as does a value the generated reader rejects (``"Could not read record
    with version 3 from value's buffer due to: null."`` for a truncated one).
    """
    reader = _Reader(bytes(data), "value")
    version = _read_version(reader)
    if version not in _VALUE_VERSIONS[record_type]:
        raise RecordFormatError(f"Found an unknown record version {version} for {record_type} type")
    flexible = version >= _FIRST_FLEXIBLE_VERSION
    try:
        offset = reader.int64()
        leader_epoch = reader.int32() if version >= 3 else -1
        metadata = reader.string("metadata", compact=flexible)
        commit_timestamp = reader.int64()
        expire_timestamp = reader.int64() if version == 1 else -1
        topic_id = _read_tagged_fields(reader) if flexible else None
    except _Malformed as error:
        raise _read_failure(version, "value", error) from None
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp, topic_id, version)


def _read_tagged_fields(reader: _Reader) -> str | None:
    """The tagged-field section of version 4: tag 0 is ``topicId`` (16 bytes); unknown tags are skipped."""
    topic_id = None
    for _ in range(reader.unsigned_varint()):
        tag = reader.unsigned_varint()
        size = reader.unsigned_varint()
        if tag == _TOPIC_ID_TAG:
            raw = reader.take(16)
            topic_id = None if raw == bytes(16) else _uuid_string(raw)
        else:
            reader.take(size)
    return topic_id


def _uuid_string(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def parse_consumer_offsets_record(key: bytes | None, value: bytes | None) -> ConsumerOffsetsRecord:
    """Parse one ``__consumer_offsets`` record: an offset commit (``value`` ``None`` for a tombstone: the offset is
    deleted) or another coordinator record (returned with ``value`` ``None``, its value left unread).
    """
    record_key = parse_record_key(key)
    if isinstance(record_key, GroupRecordKey) or value is None:
        return ConsumerOffsetsRecord(record_key, None)
    return ConsumerOffsetsRecord(record_key, parse_offset_commit_value(value, record_key.record_type))


# ---------------------------------------------------------------------------------------------------------------------
# Writing (what the coordinator writes): for tests and benchmarks
# ---------------------------------------------------------------------------------------------------------------------


def _string(text: str, compact: bool) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > _MAX_STRING_LENGTH:
        raise ValueError(f"string of {len(raw)} bytes is longer than {_MAX_STRING_LENGTH}")
    return (_unsigned_varint(len(raw) + 1) if compact else struct.pack(">h", len(raw))) + raw


def _unsigned_varint(value: int) -> bytes:
    out = bytearray()
    value &= 0xFFFFFFFF
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def serialize_offset_commit_key(group: str, topic: str, partition: int, record_type: int = OFFSET_COMMIT) -> bytes:
    """The key bytes of an offset commit (type 1, or the legacy type 0)."""
    if record_type not in _VALUE_VERSIONS:
        raise ValueError(f"record type {record_type} is not an offset commit")
    return (
        struct.pack(">h", record_type)
        + _string(group, compact=False)
        + _string(topic, compact=False)
        + struct.pack(">i", partition)
    )


def serialize_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    """The value bytes of an offset commit in ``version`` (default ``value.version``); fields the version lacks are
    left out, as the generated writer does.
    """
    version = value.version if version is None else version
    if not 0 <= version <= 4:
        raise ValueError(f"OffsetCommitValue has versions 0 to 4, not {version}")
    flexible = version >= _FIRST_FLEXIBLE_VERSION
    out = struct.pack(">hq", version, value.offset)
    if version >= 3:
        out += struct.pack(">i", value.leader_epoch)
    out += _string(value.metadata, compact=flexible) + struct.pack(">q", value.commit_timestamp)
    if version == 1:
        out += struct.pack(">q", value.expire_timestamp)
    if flexible:
        if value.topic_id is None:
            out += _unsigned_varint(0)
        else:
            raw = _uuid_bytes(value.topic_id)
            out += _unsigned_varint(1) + _unsigned_varint(_TOPIC_ID_TAG) + _unsigned_varint(len(raw)) + raw
    return out


def _uuid_bytes(text: str) -> bytes:
    """``Uuid.fromString``: 16 bytes from 22 URL-safe base64 characters."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid: {text!r}")
    return raw
