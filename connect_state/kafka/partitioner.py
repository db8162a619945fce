"""The Java producer's partition choice for keyed records, so Python writers land where Connect's writes land.

Connect writes its internal topics with the Java producer and a key, so the partition is
``Utils.toPositive(Utils.murmur2(keyBytes)) % numPartitions`` (``BuiltInPartitioner.partitionForKey``:
``clients/src/main/java/org/apache/kafka/clients/producer/internals/BuiltInPartitioner.java``).
A writer using another client must pick the same partition, or compaction and last-writer-wins ordering break.

The hash is kafka-python's own port of ``Utils.murmur2`` (``kafka.partitioner.default.murmur2``), which returns the
same 32 bits unsigned; :func:`murmur2` gives them back as the signed ``int`` Java returns.
"""

from __future__ import annotations

from kafka.partitioner.default import murmur2 as _unsigned_murmur2

__all__ = ["murmur2", "partition_for_key", "to_positive"]


def murmur2(data: bytes) -> int:
    """Kafka's ``org.apache.kafka.common.utils.Utils.murmur2`` (32-bit MurmurHash2, seed ``0x9747b28c``), signed."""
    h: int = _unsigned_murmur2(data)
    return h - 0x1_0000_0000 if h >= 0x8000_0000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: ``n & 0x7fffffff`` (not ``abs``: ``Integer.MIN_VALUE`` maps to 0)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java producer's default partitioner picks for a record with this serialized key."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
