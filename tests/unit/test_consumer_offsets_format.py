"""connect_state.formats.consumer_offsets: the group coordinator's records in ``__consumer_offsets``.

Every byte vector below was written or read by Kafka 4.3.1's own classes (the generated ``OffsetCommitKey``,
``LegacyOffsetCommitKey``, ``OffsetCommitValue`` versions 0-4, ``GroupMetadataKey``, ``ConsumerGroupMetadataKey``
and ``GroupCoordinatorRecordSerde.deserialize``, run over ``jvm/kafka/lib``); the error reasons are the messages of
the exceptions that deserializer throws. ``REAL_BROKER_*`` was captured from the 4.3.1 broker of the test stack.
"""

from __future__ import annotations

import pytest

from connect_state.core.errors import RecordFormatError
from connect_state.formats.consumer_offsets import (
    GROUP_METADATA,
    LEGACY_OFFSET_COMMIT,
    OFFSET_COMMIT,
    GroupRecordKey,
    OffsetCommitKey,
    OffsetCommitValue,
    parse_consumer_offsets_record,
    parse_offset_commit_value,
    parse_record_key,
    serialize_offset_commit_key,
    serialize_offset_commit_value,
)

KEY_V1 = bytes.fromhex("0001000c636f6e6e6563742d73696e6b00066f726465727300000002")
KEY_V0 = bytes.fromhex("0000000c636f6e6e6563742d73696e6b00066f726465727300000002")
TS = 1_700_000_000_000

# OffsetCommitValue(offset=42, metadata="m", commitTimestamp=TS), leaderEpoch 7 from v3, expireTimestamp in v1.
VALUES = {
    0: "0000000000000000002a00016d0000018bcfe56800",
    1: "0001000000000000002a00016d0000018bcfe568000000018bcfe6b980",
    2: "0002000000000000002a00016d0000018bcfe56800",
    3: "0003000000000000002a0000000700016d0000018bcfe56800",
    4: "0004000000000000002a00000007026d0000018bcfe5680000",
}
EXPECTED = {
    0: OffsetCommitValue(42, "m", TS, -1, -1, None, 0),
    1: OffsetCommitValue(42, "m", TS, -1, TS + 86_400, None, 1),
    2: OffsetCommitValue(42, "m", TS, -1, -1, None, 2),
    3: OffsetCommitValue(42, "m", TS, 7, -1, None, 3),
    4: OffsetCommitValue(42, "m", TS, 7, -1, None, 4),
}
# Version 4 with the tagged field topicId (tag 0), leaderEpoch -1 and empty metadata.
VALUE_V4_TOPIC_ID = bytes.fromhex(
    "0004000000000000002affffffff010000018bcfe56800010010000102030405060708090a0b0c0d0e0f"
)
REAL_BROKER_KEY = bytes.fromhex("0001000267310002743100000000")
REAL_BROKER_VALUE = bytes.fromhex(
    "000400000000000000010000000001000001a20350505401001084ad82a5195b4e568b36410d66dee1c0"
)


@pytest.mark.parametrize("version", sorted(VALUES))
def test_offset_commit_value_versions(version: int) -> None:
    data = bytes.fromhex(VALUES[version])
    assert parse_offset_commit_value(data) == EXPECTED[version]
    assert serialize_offset_commit_value(EXPECTED[version]) == data


def test_version_4_tagged_topic_id() -> None:
    value = OffsetCommitValue(42, "", TS, -1, -1, "AAECAwQFBgcICQoLDA0ODw", 4)
    assert parse_offset_commit_value(VALUE_V4_TOPIC_ID) == value
    assert serialize_offset_commit_value(value) == VALUE_V4_TOPIC_ID


def test_version_4_skips_unknown_tags() -> None:
    data = bytes.fromhex("0004000000000000002a00000007026d0000018bcfe56800010502aabb")
    assert parse_offset_commit_value(data) == EXPECTED[4]


def test_keys_of_both_offset_commit_types() -> None:
    assert parse_record_key(KEY_V1) == OffsetCommitKey("connect-sink", "orders", 2, OFFSET_COMMIT)
    assert parse_record_key(KEY_V0) == OffsetCommitKey("connect-sink", "orders", 2, LEGACY_OFFSET_COMMIT)
    assert serialize_offset_commit_key("connect-sink", "orders", 2) == KEY_V1
    assert serialize_offset_commit_key("connect-sink", "orders", 2, LEGACY_OFFSET_COMMIT) == KEY_V0


def test_legacy_type_takes_value_version_0() -> None:
    record = parse_consumer_offsets_record(KEY_V0, bytes.fromhex(VALUES[0]))
    assert record.value == EXPECTED[0]
    with pytest.raises(RecordFormatError, match=r"^Found an unknown record version 1 for 0 type$"):
        parse_consumer_offsets_record(KEY_V0, bytes.fromhex(VALUES[1]))


def test_real_broker_commit() -> None:
    record = parse_consumer_offsets_record(REAL_BROKER_KEY, REAL_BROKER_VALUE)
    assert record.key == OffsetCommitKey("g1", "t1", 0)
    assert record.value == OffsetCommitValue(1, "", 1_795_351_924_820, 0, -1, "hK2CpRlbTlaLNkENZt7hwA", 4)


def test_tombstone_of_an_offset_commit() -> None:
    record = parse_consumer_offsets_record(KEY_V1, None)
    assert record.is_offset_commit and record.value is None


@pytest.mark.parametrize(
    ("key", "record_type"),
    [
        ("0002000c636f6e6e6563742d73696e6b", GROUP_METADATA),  # GroupMetadataKey("connect-sink")
        ("0003000167", 3),  # ConsumerGroupMetadataKey("g")
        ("0017", 23),  # StreamsGroupTopology: only the type is read
    ],
)
def test_other_coordinator_records_are_recognised(key: str, record_type: int) -> None:
    record = parse_consumer_offsets_record(bytes.fromhex(key), b"\x00")
    assert record.key == GroupRecordKey(record_type)
    assert not record.is_offset_commit and record.value is None


@pytest.mark.parametrize(
    ("key", "group"),
    [
        ("0001000bc3a9c3a8e282acf09f988000017400000007", "éè€😀"),
        ("00010002ff41000174000000030000", "\ufffdA"),  # bad UTF-8 as Java decodes it; trailing bytes ignored
    ],
)
def test_key_strings_decode_like_java(key: str, group: str) -> None:
    assert parse_record_key(bytes.fromhex(key)).group == group


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (None, None, "Could not read version from key's buffer."),
        ("00", None, "Could not read version from key's buffer."),
        ("0009", None, "Unknown record type 9 while loading offsets and group metadata."),
        ("0018", None, "Unknown record type 24 while loading offsets and group metadata."),
        ("0001ffff", None, "due to: non-nullable field group was serialized as null."),
        ("00018001", None, "due to: non-nullable field group was serialized as null."),
        (
            "0001000c636f6e6e6563742d73696e6b00066f7264657273000000",
            None,
            "Could not read record with version 1 from key's buffer due to: null.",
        ),
        (KEY_V1.hex(), "0005000000000000002a00016d0000018bcfe56800", "Found an unknown record version 5 for 1 type"),
        (KEY_V1.hex(), "00", "Could not read version from value's buffer."),
        (
            KEY_V1.hex(),
            "0003000000000000002a00000007",
            "Could not read record with version 3 from value's buffer due to: null.",
        ),
        (
            KEY_V1.hex(),
            "0004000000000000002a0000000700",
            "Could not read record with version 4 from value's buffer due to: non-nullable field metadata was "
            "serialized as null.",
        ),
        (
            KEY_V1.hex(),
            "0004000000000000002a00000007ffffffffff",
            "due to: Varint is too long, the most significant bit in the 5th byte is set, converted value: ffffffff.",
        ),
        (KEY_V1.hex(), "00008000", "due to: null."),
    ],
)
def test_records_the_coordinator_cannot_load(key: str | None, value: str | None, reason: str) -> None:
    with pytest.raises(RecordFormatError) as err:
        parse_consumer_offsets_record(
            None if key is None else bytes.fromhex(key), None if value is None else bytes.fromhex(value)
        )
    assert reason in err.value.reason


def test_string_longer_than_int16_is_refused_by_the_reader() -> None:
    data = bytes.fromhex("0004000000000000002a00000007") + bytes([0x81, 0x80, 0x02])  # compact length 32768
    with pytest.raises(RecordFormatError, match="string field metadata had invalid length 32768"):
        parse_offset_commit_value(data)
