"""The Java producer's partition choice for keyed records, so Python writers land where Connect's writes land.

Connect writes its internal topics with the Java producer and a key, so the partition is
``Utils.toPositive(Utils.murmur2(keyBytes)) % numPartitions`` (``BuiltInPartitioner.partitionForKey``; spec §1).
A writer using another client must pick the same partition, or compaction and last-writer-wins ordering break.

Pure standard library.
"""

from __future__ import annotations

__all__ = ["murmur2", "partition_for_key", "to_positive"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK32 = 0xFFFFFFFF


def _to_int32(n: int) -> int:
    n &= _MASK32
    return n - 0x1_0000_0000 if n >= 0x8000_0000 else n


def murmur2(data: bytes) -> int:
    """Kafka's ``org.apache.kafka.common.utils.Utils.murmur2``: 32-bit MurmurHash2, seed ``0x9747b28c``.

    Returns the signed int32 Java returns. Arithmetic is done modulo 2^32; Java's ``>>>`` is a logical shift, which is
    what ``>>`` does on the non-negative values kept here.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    full = length - length % 4
    for i in range(0, full, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    remaining = length % 4
    # The Java switch falls through from case 3 to case 1.
    if remaining == 3:
        h ^= data[full + 2] << 16
    if remaining >= 2:
        h ^= data[full + 1] << 8
    if remaining >= 1:
        h ^= data[full]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return _to_int32(h)


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: ``n & 0x7fffffff`` (not ``abs``: ``Integer.MIN_VALUE`` maps to 0)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java producer's default partitioner picks for a record with this serialized key."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
