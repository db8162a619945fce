"""When did a value last change? The watch job's memory between passes: committed offsets, log ends, dead-letter
counts. Pure."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

__all__ = ["Counter", "Movement"]


@dataclass
class Movement:
    """Per key, the last value seen and when it changed; a key seen for the first time changed at ``first_seen_ms``
    (what the tables say, when they say it; else the time of that first sight: never earlier than known)."""

    _seen: dict[Hashable, tuple[object, int]] = field(default_factory=dict)

    def observe(self, key: Hashable, value: object, now_ms: int, first_seen_ms: int | None = None) -> int:
        """Record ``value`` for ``key`` at ``now_ms``; when it last changed."""
        previous = self._seen.get(key)
        if previous is None:
            self._seen[key] = (value, first_seen_ms if first_seen_ms is not None else now_ms)
        elif previous[0] != value:
            self._seen[key] = (value, now_ms)
        return self._seen[key][1]

    def forget_except(self, keys: set[Hashable]) -> None:
        for key in set(self._seen) - keys:
            del self._seen[key]


@dataclass
class Counter:
    """Per key, samples of a growing total (a topic's record count) within a window: how much it grew within it."""

    _samples: dict[Hashable, deque[tuple[int, int]]] = field(default_factory=dict)

    def observe(self, key: Hashable, total: int, now_ms: int, window_ms: int) -> tuple[int, int]:
        """Record ``total`` at ``now_ms``; (growth within the window, the time it is counted from). The first sample
        counts from itself: growth before this process saw the key is not known."""
        samples = self._samples.setdefault(key, deque())
        samples.append((now_ms, total))
        while len(samples) > 1 and samples[0][0] < now_ms - window_ms:
            samples.popleft()
        start_ms, start_total = samples[0]
        return max(0, total - start_total), start_ms

    def forget_except(self, keys: set[Hashable]) -> None:
        for key in set(self._samples) - keys:
            del self._samples[key]
