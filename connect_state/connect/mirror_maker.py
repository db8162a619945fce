"""Kafka's MirrorMaker 2 connectors (``connect-mirror``): their classes, source partitions and offsets, and their
``alterOffsets`` checks, ported from ``MirrorSourceConnector``, ``MirrorCheckpointConnector``,
``MirrorHeartbeatConnector`` and ``MirrorUtils`` (checked against the 4.3.1 bytecode).

All three are source connectors. Each ``alterOffsets`` lets any null offset through (tombstones clean up anything),
refuses a null source partition, checks the partition's keys and the offset's ``offset`` key, and returns true (the
short success message): MM2 never uses these offsets beyond what its tasks read back.

* ``MirrorSourceConnector``: partition ``{"cluster": <source alias>, "topic": <topic>, "partition": <int>}``, offset
  ``{"offset": <non-negative long>}``;
* ``MirrorCheckpointConnector``: partition ``{"group": <consumer group>, "topic": <topic>, "partition": <int>}``,
  offset ``{"offset": 0}`` (only 0 is accepted);
* ``MirrorHeartbeatConnector``: partition ``{"sourceClusterAlias": <alias>, "targetClusterAlias": <alias>}``, offset
  ``{"offset": 0}``.

Each failed check is a ``ConnectException`` (:class:`~connect_state.core.errors.AlterOffsetsRejected`,
Connect's 500) whose message prints the maps with ``AbstractMap.toString`` (``{k=v, ...}`` in ``HashMap`` order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from connect_state.core.errors import AlterOffsetsRejected
from connect_state.formats.javalang import INT32_MAX, java_int
from connect_state.formats.jsonconv import java_to_string
from connect_state.formats.offsets import OffsetPair

__all__ = [
    "CONSUMER_GROUP_ID_KEY",
    "MIRROR_CHECKPOINT_CLASS",
    "MIRROR_HEARTBEAT_CLASS",
    "MIRROR_SOURCE_CLASS",
    "OFFSET_KEY",
    "PARTITION_KEY",
    "SOURCE_CLUSTER_ALIAS_KEY",
    "SOURCE_CLUSTER_KEY",
    "TARGET_CLUSTER_ALIAS_KEY",
    "TOPIC_KEY",
    "mirror_checkpoint_alter_offsets",
    "mirror_heartbeat_alter_offsets",
    "mirror_source_alter_offsets",
]

MIRROR_SOURCE_CLASS = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
MIRROR_CHECKPOINT_CLASS = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"
MIRROR_HEARTBEAT_CLASS = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"

#: ``MirrorUtils.SOURCE_CLUSTER_KEY``, ``TOPIC_KEY``, ``PARTITION_KEY``, ``OFFSET_KEY``.
SOURCE_CLUSTER_KEY = "cluster"
TOPIC_KEY = "topic"
PARTITION_KEY = "partition"
OFFSET_KEY = "offset"
#: ``Checkpoint.CONSUMER_GROUP_ID_KEY``.
CONSUMER_GROUP_ID_KEY = "group"
#: ``Heartbeat.SOURCE_CLUSTER_ALIAS_KEY``, ``TARGET_CLUSTER_ALIAS_KEY``.
SOURCE_CLUSTER_ALIAS_KEY = "sourceClusterAlias"
TARGET_CLUSTER_ALIAS_KEY = "targetClusterAlias"

_NULL_PARTITION = "Source partitions may not be null"


def _is_java_long(value: object) -> bool:
    """``value instanceof Integer || value instanceof Long`` for a normalised value (every JSON integer is a Long)."""
    return isinstance(value, int) and not isinstance(value, bool)


def validate_source_partition_string(partition: Mapping[str, object], key: str) -> None:
    """``MirrorUtils.validateSourcePartitionString``."""
    if key not in partition:
        raise AlterOffsetsRejected(
            f"Source partition {java_to_string(partition)} is missing the '{key}' key, which is required"
        )
    value = partition[key]
    if not isinstance(value, str):
        raise AlterOffsetsRejected(
            f"Source partition {java_to_string(partition)} has an invalid value {java_to_string(value)} for the "
            f"'{key}' key, which must be a string"
        )


def validate_source_partition_partition(partition: Mapping[str, object]) -> None:
    """``MirrorUtils.validateSourcePartitionPartition``: an integer that fits an int and whose ``intValue()`` is not
    negative (a long below ``Integer.MIN_VALUE`` whose low 32 bits are positive passes, as in Java)."""
    if PARTITION_KEY not in partition:
        raise AlterOffsetsRejected(
            f"Source partition {java_to_string(partition)} is missing the '{PARTITION_KEY}' key, which is required"
        )
    value = partition[PARTITION_KEY]
    if not _is_java_long(value) or int(value) > INT32_MAX:  # type: ignore[call-overload]
        raise AlterOffsetsRejected(
            f"Source partition {java_to_string(partition)} has an invalid value {java_to_string(value)} for the "
            f"'{PARTITION_KEY}' key, which must be an integer"
        )
    assert isinstance(value, int)
    if java_int(value) < 0:
        raise AlterOffsetsRejected(
            f"Source partition {java_to_string(partition)} has an invalid value {java_to_string(value)} for the "
            f"'{PARTITION_KEY}' key, which cannot be negative"
        )


def validate_source_offset(
    partition: Mapping[str, object], offset: Mapping[str, object] | None, *, only_offset_zero: bool
) -> None:
    """``MirrorUtils.validateSourceOffset``."""
    if offset is None:
        return
    where = f"Source offset {java_to_string(offset)} for source partition {java_to_string(partition)}"
    if OFFSET_KEY not in offset:
        raise AlterOffsetsRejected(f"{where} is missing the '{OFFSET_KEY}' key, which is required")
    value = offset[OFFSET_KEY]
    if not _is_java_long(value):
        raise AlterOffsetsRejected(
            f"{where} has an invalid value {java_to_string(value)} for the '{OFFSET_KEY}' key, which must be an integer"
        )
    assert isinstance(value, int)
    if only_offset_zero and value != 0:
        raise AlterOffsetsRejected(
            f"{where} has an invalid value {java_to_string(value)} for the '{OFFSET_KEY}' key; the only accepted "
            "value is 0"
        )
    if not only_offset_zero and value < 0:
        raise AlterOffsetsRejected(
            f"{where} has an invalid value {java_to_string(value)} for the '{OFFSET_KEY}' key, which cannot be negative"
        )


def _check_pairs(
    offsets: Sequence[OffsetPair], string_keys: tuple[str, ...], *, with_partition: bool, only_zero: bool
) -> bool:
    for partition, offset in offsets:
        if offset is None:
            continue  # tombstones are allowed for anything, so that garbage can be cleaned up
        if partition is None:
            raise AlterOffsetsRejected(_NULL_PARTITION)
        for key in string_keys:
            validate_source_partition_string(partition, key)
        if with_partition:
            validate_source_partition_partition(partition)
        validate_source_offset(partition, offset, only_offset_zero=only_zero)
    return True


def mirror_source_alter_offsets(config: Mapping[str, str], offsets: Sequence[OffsetPair]) -> bool:
    """``MirrorSourceConnector.alterOffsets``: ``cluster`` and ``topic`` strings, ``partition``, a non-negative
    ``offset``; true."""
    return _check_pairs(offsets, (SOURCE_CLUSTER_KEY, TOPIC_KEY), with_partition=True, only_zero=False)


def mirror_checkpoint_alter_offsets(config: Mapping[str, str], offsets: Sequence[OffsetPair]) -> bool:
    """``MirrorCheckpointConnector.alterOffsets``: ``group`` and ``topic`` strings, ``partition``, ``offset`` 0;
    true."""
    return _check_pairs(offsets, (CONSUMER_GROUP_ID_KEY, TOPIC_KEY), with_partition=True, only_zero=True)


def mirror_heartbeat_alter_offsets(config: Mapping[str, str], offsets: Sequence[OffsetPair]) -> bool:
    """``MirrorHeartbeatConnector.alterOffsets``: ``sourceClusterAlias`` and ``targetClusterAlias`` strings,
    ``offset`` 0; true."""
    return _check_pairs(
        offsets, (SOURCE_CLUSTER_ALIAS_KEY, TARGET_CLUSTER_ALIAS_KEY), with_partition=False, only_zero=True
    )
