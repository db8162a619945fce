"""How far a streaming query has read, from its progress reports (issue 14): the catch-up log line and the jobs'
metrics.

Pure: the input is Spark's ``StreamingQueryProgress`` as a dict (``json.loads(progress.json)``). A Kafka source
reports, per batch, ``endOffset`` (where the batch stopped) and ``latestOffset`` (the topics' end as the source saw it
when it planned the batch; in a catch-up run, ``Trigger.AvailableNow``, the end it reads to), both as
``{topic: {partition: offset}}``. So:

* records behind = Σ over partitions of ``latestOffset - endOffset`` (offsets, as the ``X-Connect-State-Lag`` header
  counts them: compaction gaps and transaction markers count too);
* :class:`ReadProgress` adds up ``numInputRows`` since the query started: read ``N`` of ``N + behind`` records, and
  the ETA at the query's own rate since it started (``behind / (N / elapsed)``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def _offsets(value: object) -> dict[str, dict[str, int]] | None:
    """A Kafka source's offsets (``{"topic": {"0": 12}}``, or its JSON text); None for another kind of source."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, Mapping):
        return None
    parsed: dict[str, dict[str, int]] = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, Mapping):
            return None
        parsed[str(topic)] = {str(p): int(o) for p, o in partitions.items() if isinstance(o, int)}
    return parsed


def records_behind(progress: Mapping[str, Any]) -> int | None:
    """Records between where the batch stopped and the topics' end, over every Kafka source of the query; None when
    no source reports its latest offsets."""
    total: int | None = None
    for source in progress.get("sources") or []:
        latest = _offsets(source.get("latestOffset"))
        if latest is None:
            continue
        end = _offsets(source.get("endOffset")) or {}
        total = total or 0
        for topic, partitions in latest.items():
            for partition, offset in partitions.items():
                total += max(offset - end.get(topic, {}).get(partition, 0), 0)
    return total


def batch_duration_s(progress: Mapping[str, Any]) -> float | None:
    """The batch's whole duration (``durationMs.triggerExecution``) in seconds."""
    duration = (progress.get("durationMs") or {}).get("triggerExecution")
    return None if duration is None else duration / 1000


def _format_s(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass
class ReadProgress:
    """What one query has read since ``started_at`` (seconds, any clock) and how much is left."""

    query: str
    started_at: float
    read: int = 0
    behind: int | None = None
    batches: int = 0
    seen: set[int] = field(default_factory=set, repr=False)

    def observe(self, progress: Mapping[str, Any]) -> bool:
        """Count a batch's progress once (by ``batchId``); False for one already counted."""
        batch = progress.get("batchId")
        if batch in self.seen:
            return False
        if isinstance(batch, int):
            self.seen.add(batch)
        self.batches += 1
        self.read += int(progress.get("numInputRows") or 0)
        behind = records_behind(progress)
        if behind is not None:
            self.behind = behind
        return True

    @property
    def total(self) -> int | None:
        return None if self.behind is None else self.read + self.behind

    def rate(self, now: float) -> float:
        """Records read per second since the start."""
        elapsed = now - self.started_at
        return self.read / elapsed if elapsed > 0 else 0.0

    def eta_s(self, now: float) -> float | None:
        """Seconds left at the rate so far: 0 when nothing is behind, None when unknown (nothing read yet)."""
        if self.behind is None:
            return None
        if self.behind == 0:
            return 0.0
        rate = self.rate(now)
        return self.behind / rate if rate > 0 else None

    def line(self, now: float) -> str:
        """``read 1200 of 5000 records (24%), 3800 behind, about 40 s left at 95 records/s``."""
        if self.total is None:
            return f"read {self.read} records in {self.batches} batches (records behind unknown)"
        percent = 100 * self.read / self.total if self.total else 100.0
        eta = self.eta_s(now)
        left = "caught up" if eta == 0 else f"about {_format_s(eta)} left" if eta is not None else "time left unknown"
        return (
            f"read {self.read} of {self.total} records ({percent:.0f}%), {self.behind} behind, {left} "
            f"at {self.rate(now):.0f} records/s"
        )
