"""connect_state.kafka.partitioner: the Java producer's murmur2 partitioning (Kafka's Utils.murmur2 / toPositive)."""

from __future__ import annotations

import pytest

from connect_state.kafka.partitioner import murmur2, partition_for_key, to_positive


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # Kafka's UtilsTest.testMurmur2.
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
        # Computed with Kafka 4.3.1's Utils.murmur2 (lengths 17, 17, 43, 13 cover every tail length).
        (b"status-connector-foo", -291505995),
        (b"status-task-foo-0", 2033871436),
        (b"status-topic-foo-topic:connector-foo-source", 1656756676),
        (b"connector-foo", -1786620917),
    ],
)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_is_a_signed_int32() -> None:
    for data in (b"", b"a", b"ab", b"abc", b"abcd", bytes(range(256))):
        assert -(2**31) <= murmur2(data) < 2**31


@pytest.mark.parametrize(
    ("n", "expected"),
    [(0, 0), (5, 5), (-1, 2147483647), (-(2**31), 0), (2**31 - 1, 2**31 - 1), (-291505995, 1855977653)],
)
def test_to_positive_masks_the_sign_bit(n: int, expected: int) -> None:
    assert to_positive(n) == expected


@pytest.mark.parametrize(
    ("key", "partitions", "expected"),
    [
        (b"status-connector-foo", 5, 3),
        (b"status-task-foo-0", 5, 1),
        (b"status-task-foo-0", 25, 11),
        (b"status-topic-foo-topic:connector-foo-source", 5, 1),
        (b"connector-foo", 25, 6),
        (b"connector-foo", 1, 0),
    ],
)
def test_partition_for_key(key: bytes, partitions: int, expected: int) -> None:
    assert partition_for_key(key, partitions) == expected


@pytest.mark.parametrize("partitions", [0, -1])
def test_partition_for_key_needs_partitions(partitions: int) -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for_key(b"k", partitions)


def test_murmur2_is_kafka_pythons_hash_as_a_signed_int() -> None:
    """The hash is kafka-python's own port (unsigned); only the sign convention is ours (Java's ``int``)."""
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

    for data in (b"", b"a", b"status-connector-foo", bytes(range(256))):
        assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)
