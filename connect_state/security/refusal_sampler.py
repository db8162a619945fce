"""Refusals audited in summary (issue 33 finding 6): anyone can make the API refuse, so a refusal may not cost an
fsynced line (and a Kafka send) each, or the audit grows as fast as a stranger can send.

:class:`RefusalSampler` opens a window per :class:`RefusalKey` (who, from where, what was refused and how) at its
first refusal, which is written in full; the key's further refusals until the window has passed are only counted. A
window that has passed with refusals counted gives a :class:`Summary` (how many, from when to when), written as one
row: the audit of a flood is two rows per key and window, whatever its rate. Memory is bounded: at most ``tracked``
open windows; past that the oldest is closed early (its summary written then).

Pure: no Flask, no clock but the one passed in.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["RefusalKey", "RefusalSampler", "Summary"]

#: Open windows kept at most (each a few hundred bytes).
DEFAULT_TRACKED = 10_000
#: The first path a window keeps (a path may be kilobytes long: memory stays bounded), in characters.
MAX_PATH = 1024


@dataclass(frozen=True)
class RefusalKey:
    """What makes two refusals alike: the principal (None before authentication) and how it authenticated, the
    client's address (as :func:`connect_state.security.login_throttle.address_key` counts it), the method, the
    route, the role it needs, the status (401, 403, 429) and the cluster its ``/clusters/<id>`` prefix named (None:
    Connect's plain paths)."""

    principal: str | None
    auth: str | None
    address: str | None
    method: str
    endpoint: str | None
    role: str | None
    status: int
    cluster: str | None = None


@dataclass
class _Window:
    opened: float
    first_time: str
    path: str
    repeated: int = 0
    last_time: str = ""


@dataclass(frozen=True)
class Summary:
    """The refusals of ``key`` counted but not written in a window: ``repeated`` of them, after the one written at
    ``first_time`` (whose path was ``path``), the last at ``last_time``."""

    key: RefusalKey
    repeated: int
    first_time: str
    last_time: str
    path: str


@dataclass
class RefusalSampler:
    """Windows of ``window_s`` seconds per key (0: every refusal is written), at most ``tracked`` of them."""

    window_s: float
    tracked: int = DEFAULT_TRACKED
    clock: Callable[[], float] = time.monotonic
    _windows: OrderedDict[RefusalKey, _Window] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, key: RefusalKey, at: str, path: str) -> tuple[bool, list[Summary]]:
        """A refusal of ``key`` at ``at`` (ISO time) on ``path``: whether to write it (it opens the key's window; else
        it is counted), and the summaries of the windows that have passed meanwhile."""
        if self.window_s <= 0:
            return True, []
        now = self.clock()
        with self._lock:
            due = self._passed(now, every=False)
            window = self._windows.get(key)
            if window is not None:
                window.repeated += 1
                window.last_time = at
                return False, due
            self._windows[key] = _Window(now, at, path if len(path) <= MAX_PATH else path[:MAX_PATH] + "...")
            while len(self._windows) > self.tracked:
                due.extend(self._summaries([self._windows.popitem(last=False)]))
            return True, due

    def due(self, every: bool = False) -> list[Summary]:
        """The summaries of the windows that have passed (``every``: of all of them, e.g. at shutdown), closed."""
        with self._lock:
            return self._passed(self.clock(), every)

    def _passed(self, now: float, every: bool) -> list[Summary]:
        closed = []
        while self._windows:  # opened in order: the oldest first
            window = next(iter(self._windows.values()))
            if not every and window.opened + self.window_s > now:
                break
            closed.append(self._windows.popitem(last=False))
        return self._summaries(closed)

    @staticmethod
    def _summaries(closed: list[tuple[RefusalKey, _Window]]) -> list[Summary]:
        return [
            Summary(key, window.repeated, window.first_time, window.last_time, window.path)
            for key, window in closed
            if window.repeated
        ]

    def __len__(self) -> int:
        return len(self._windows)
