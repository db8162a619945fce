"""Kafka positions of a streaming query, pure: what the checkpoint's offsets log says, and what was lost.

Spark writes, before it runs micro-batch ``N``, the end offsets it planned for it to ``<checkpoint>/offsets/<N>``
(``v1``, a line of batch metadata, then one JSON line per source; the Kafka source's is
``{"topic":{"partition":offset,...},...}``, the next offset to read of every partition). The start of batch ``N`` is
the end of batch ``N-1``. So, per batch:

* the **watermark** of a query's tables once batch ``N`` is written is ``offsets/N``: every record below those offsets
  is folded in (:func:`parse_offset_log`);
* **data loss** is told by comparing ``offsets/N-1`` (where the batch starts), ``offsets/N`` (where it ends) and the
  partitions' log start offsets (:func:`detect_losses`): records between the start and the log start were deleted
  before the query read them (retention, ``deleteRecords``); a partition in ``N-1`` but not in ``N`` is gone (its
  topic was deleted); an end below the start means the partition's offsets went back (the topic was recreated).

Spark's Kafka source runs with ``failOnDataLoss=false``, so in each of these cases it goes on from the earliest offset
still there; the query records the loss (:class:`DataLoss`, the ``data_loss`` table) instead of failing forever.
Nothing here imports Spark or Kafka.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from connect_state.core.partitions import Partition

Positions = dict[Partition, int]
"""The next offset to read of each ``(topic, partition)``."""


def parse_offset_log(text: str) -> Positions | None:
    """The Kafka positions of one entry of a checkpoint's offsets log; None when it is not an offsets-log entry.

    Lines of other sources (a file source's ``{"logOffset":3}``) and lines that are not JSON are left out.
    """
    lines = text.splitlines()
    if not lines or not lines[0].startswith("v"):
        return None
    positions: Positions = {}
    for line in lines[2:]:
        try:
            source = json.loads(line)
        except ValueError:
            continue
        if not isinstance(source, dict):
            continue
        for topic, partitions in source.items():
            if not isinstance(partitions, dict):
                continue
            for partition, offset in partitions.items():
                try:
                    positions[(str(topic), int(partition))] = int(offset)
                except (TypeError, ValueError):
                    continue
    return positions


class LossCause(StrEnum):
    """Why records of a partition were never folded (the ``cause`` column of ``data_loss``)."""

    #: The partition's log start offset moved past the query's position: retention or ``deleteRecords``.
    RECORDS_DELETED = "records_deleted"
    #: The partition left the topics' metadata: its topic was deleted.
    PARTITION_GONE = "partition_gone"
    #: The partition's end offset is below the query's position: the topic was deleted and created again.
    OFFSETS_WENT_BACK = "offsets_went_back"


@dataclass(frozen=True)
class DataLoss:
    """Records of ``topic``-``partition`` the query expected to read from ``expected_offset`` on and cannot:
    the earliest offset still there is ``earliest_offset`` (None when the partition is gone)."""

    topic: str
    partition: int
    expected_offset: int
    earliest_offset: int | None
    cause: LossCause

    def describe(self, query: str) -> str:
        """The log line of the loss."""
        where = f"{self.topic}-{self.partition}"
        if self.cause == LossCause.PARTITION_GONE:
            return (
                f"{query}: {where} is gone (topic deleted?) at offset {self.expected_offset}: its records from there "
                "on were never read"
            )
        if self.cause == LossCause.OFFSETS_WENT_BACK:
            return (
                f"{query}: the offsets of {where} went back from {self.expected_offset} (topic recreated?): the "
                f"records of the new partition below its end were skipped; going on from there"
            )
        lost = None if self.earliest_offset is None else self.earliest_offset - self.expected_offset
        return (
            f"{query}: records {self.expected_offset}..{self.earliest_offset} of {where} were deleted before they "
            f"were read ({lost} offsets: retention or deleteRecords); going on from offset {self.earliest_offset}"
        )


def partitions_to_check(previous: Mapping[Partition, int], planned: Mapping[Partition, int]) -> list:
    """The partitions whose log start offset :func:`detect_losses` needs: those the batch reads (planned end past
    the start) and those whose offsets went back."""
    return sorted(tp for tp, start in previous.items() if tp in planned and planned[tp] != start)


def detect_losses(
    previous: Mapping[Partition, int],
    planned: Mapping[Partition, int],
    earliest: Mapping[Partition, int],
) -> list[DataLoss]:
    """What batch ``N`` cannot read: ``previous`` is ``offsets/N-1`` (where it starts), ``planned`` ``offsets/N``
    (where it ends), ``earliest`` the log start offsets of :func:`partitions_to_check` (a partition missing there
    exists no more).

    A partition new in ``planned`` is read from its earliest offset (it was never read before): no loss.
    """
    losses: list[DataLoss] = []
    for tp, start in sorted(previous.items()):
        topic, partition = tp
        if tp not in planned:
            losses.append(DataLoss(topic, partition, start, None, LossCause.PARTITION_GONE))
            continue
        end = planned[tp]
        first = earliest.get(tp)
        if end < start:
            losses.append(DataLoss(topic, partition, start, first, LossCause.OFFSETS_WENT_BACK))
        elif end > start:
            if tp not in earliest:
                losses.append(DataLoss(topic, partition, start, None, LossCause.PARTITION_GONE))
            elif first is not None and first > start:
                losses.append(DataLoss(topic, partition, start, first, LossCause.RECORDS_DELETED))
    return losses


def starts_past(
    start: Mapping[Partition, int],
    planned: Mapping[Partition, int],
    frontier: Mapping[Partition, int],
) -> bool:
    """Whether batch ``N``, from ``start`` (``offsets/N-1``) to ``planned`` (``offsets/N``), reads only records at or
    past ``frontier`` (end offsets taken at some moment): every partition it reads that the frontier has starts at
    or after the frontier's end there (a partition missing from ``start`` is read from its beginning, so it does
    not); a frontier partition the batch no longer reads (its topic deleted) does not count."""
    return all(start.get(tp, 0) >= frontier[tp] for tp in planned if tp in frontier)


def watermark_rows(query: str, positions: Mapping[Partition, int], batch_id: int) -> list[tuple]:
    """The ``watermarks`` rows of a query's batch (without ``committed_at``): ``(query, topic, partition,
    next_offset, batch_id)``, sorted."""
    return [(query, topic, partition, offset, batch_id) for (topic, partition), offset in sorted(positions.items())]


def topics_of(positions: Iterable[Partition]) -> set[str]:
    return {topic for topic, _ in positions}
