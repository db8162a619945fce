"""``__consumer_offsets`` records read a column at a time: the offset commits in the form the group coordinator writes
them, found and decoded with numpy over the Arrow buffers; every other record goes to the exact parser
(:mod:`connect_state.formats.consumer_offsets`).

:func:`match_offset_commits` takes a record when its key is an ``OffsetCommitKey`` (record type 1) whose group and
topic are ASCII and which ends with its partition, and its value is null (a tombstone) or an ``OffsetCommitValue`` of
version 3 (what the coordinator of Kafka 3.x and 4.x writes without a topic id) whose metadata is ASCII and which ends
with its commit timestamp. For those the exact parser gives the same group, topic, partition, offset, leader epoch,
metadata and commit timestamp (a property the unit tests check with Hypothesis). Anything else (the coordinator's
other records, legacy keys, other value versions, non-ASCII names, trailing bytes, malformed records) is left to
:func:`connect_state.formats.consumer_offsets.parse_consumer_offsets_record`.

numpy and pyarrow only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connect_state.formats.consumer_offsets import OFFSET_COMMIT

#: The ``OffsetCommitValue`` version taken here.
VALUE_VERSION = 3
_KEY_FIXED = 2 + 2 + 2 + 4  # type, group length, topic length, partition
_VALUE_FIXED = 2 + 8 + 4 + 2 + 8  # version, offset, leader epoch, metadata length, commit timestamp


@dataclass(frozen=True)
class OffsetCommitColumns:
    """The records :func:`match_offset_commits` accepted (``matched``) and their fields, only the accepted rows, in the
    order of the input; ``tombstone`` is true where the value is null (its value fields are null)."""

    matched: pa.BooleanArray
    group: pa.Array
    topic: pa.Array
    partition: pa.Array
    tombstone: np.ndarray
    offset: pa.Array
    leader_epoch: pa.Array
    metadata: pa.Array
    commit_timestamp: pa.Array


class _Bytes:
    """A binary Arrow array's bytes, for reads at per-row positions (big-endian integers, ASCII checks, strings)."""

    def __init__(self, array: pa.Array) -> None:
        array = array.cast(pa.binary())
        n = len(array)
        self.valid = np.ones(n, dtype=bool) if array.null_count == 0 else ~np.asarray(array.is_null())
        buffers = array.buffers()
        if buffers[1] is None or n == 0:  # an empty array may have no offsets buffer, or one of no bytes (Java's)
            offsets = np.zeros(n + 1, dtype=np.int32)
        else:
            offsets = np.frombuffer(buffers[1], dtype=np.int32, count=array.offset + n + 1)[array.offset :]
        first, end = int(offsets[0]), int(offsets[-1])  # a slice's rows: only their part of the data buffer
        self.start = offsets[:-1].astype(np.int64) - first
        self.length = np.diff(offsets).astype(np.int64)
        data = np.frombuffer(buffers[2], dtype=np.uint8)[first:end] if buffers[2] is not None else np.zeros(0, np.uint8)
        self.data = np.concatenate([data, np.zeros(32, np.uint8)])  # reads past the end of a short row stay inside
        non_ascii = np.concatenate([[0], np.cumsum(self.data >= 0x80, dtype=np.int64)])
        self._non_ascii = non_ascii

    def uint(self, position: np.ndarray, size: int) -> np.ndarray:
        """The unsigned big-endian integer of ``size`` bytes at each ``position`` (absolute, into ``data``)."""
        value = np.zeros(len(position), dtype=np.uint64)
        for i in range(size):
            value = (value << np.uint64(8)) | self.data[position + i].astype(np.uint64)
        return value

    def int(self, position: np.ndarray, size: int) -> np.ndarray:
        """The signed (two's complement) big-endian integer of ``size`` bytes at each ``position``."""
        value = self.uint(position, size)
        if size == 8:
            return value.view(np.int64)
        signed = value.astype(np.int64)
        return np.where(signed >= 1 << (8 * size - 1), signed - (1 << (8 * size)), signed)

    def ascii(self, position: np.ndarray, length: np.ndarray) -> np.ndarray:
        """Whether the ``length`` bytes at each ``position`` are all ASCII."""
        return self._non_ascii[position + length] - self._non_ascii[position] == 0

    def strings(self, position: np.ndarray, length: np.ndarray) -> pa.Array:
        """The ``length`` bytes at each ``position`` as an Arrow string array (the caller checked they are ASCII)."""
        offsets = np.concatenate([[0], np.cumsum(length)]).astype(np.int32)
        total = int(offsets[-1])
        if total:
            index = np.repeat(position - offsets[:-1], length) + np.arange(total, dtype=np.int64)
            data = self.data[index].tobytes()
        else:
            data = b""
        return pa.StringArray.from_buffers(len(length), pa.py_buffer(offsets.tobytes()), pa.py_buffer(data))


def match_offset_commits(keys: pa.Array, values: pa.Array) -> OffsetCommitColumns:
    """Recognise the coordinator's offset commits (binary ``keys`` and ``values``, nulls allowed) in bulk."""
    key = _Bytes(keys)
    value = _Bytes(values)
    k0, klen = key.start, key.length
    ok = key.valid & (klen >= _KEY_FIXED)
    ok &= np.where(ok, key.int(k0, 2), -1) == OFFSET_COMMIT
    group_length = np.where(ok, key.int(k0 + 2, 2), 0)
    ok &= (group_length >= 0) & (klen >= _KEY_FIXED + group_length)
    group_length = np.where(ok, group_length, 0)
    topic_at = k0 + 4 + group_length
    topic_length = np.where(ok, key.int(topic_at, 2), 0)
    ok &= (topic_length >= 0) & (klen == _KEY_FIXED + group_length + topic_length)
    topic_length = np.where(ok, topic_length, 0)
    ok &= key.ascii(k0 + 4, group_length) & key.ascii(topic_at + 2, topic_length)

    tombstone = ~value.valid
    v0, vlen = value.start, value.length
    full = value.valid & (vlen >= _VALUE_FIXED)
    full &= np.where(full, value.int(v0, 2), -1) == VALUE_VERSION
    metadata_length = np.where(full, value.int(v0 + 14, 2), 0)
    full &= (metadata_length >= 0) & (vlen == _VALUE_FIXED + metadata_length)
    metadata_length = np.where(full, metadata_length, 0)
    full &= value.ascii(v0 + 16, metadata_length)
    ok &= tombstone | full

    rows = np.flatnonzero(ok)
    live = full[rows]
    at = v0[rows]

    def value_field(column: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
        return pa.array(column, arrow_type, mask=~live)

    return OffsetCommitColumns(
        matched=pa.array(ok, pa.bool_()),
        group=key.strings(k0[rows] + 4, group_length[rows]),
        topic=key.strings(topic_at[rows] + 2, topic_length[rows]),
        partition=pa.array(key.int(topic_at[rows] + 2 + topic_length[rows], 4), pa.int32()),
        tombstone=tombstone[rows],
        offset=value_field(value.int(at + 2, 8), pa.int64()),
        leader_epoch=value_field(value.int(at + 10, 4), pa.int32()),
        metadata=_null_where(value.strings(at + 16, metadata_length[rows]), ~live),
        commit_timestamp=value_field(value.int(at + 16 + metadata_length[rows], 8), pa.int64()),
    )


def _null_where(array: pa.Array, mask: np.ndarray) -> pa.Array:
    """``array`` with the rows of ``mask`` null."""
    if not mask.any():
        return array
    return pc.if_else(pa.array(mask), pa.nulls(len(array), array.type), array)
