"""Fault injection for the crash tests: a process that kills itself (``SIGKILL``) at a named point of its work.

``CONNECT_STATE_FAULT_INJECT=<point>[:<n>]`` (several separated by commas) arms ``point``: the ``n``-th time (default
the first) the process reaches it, :func:`fault_point` kills the process on the spot, like ``kill -9`` or a lost
machine: the Spark driver's JVM first (so it cannot finish a write the Python side started), then the Python process
itself. Nothing is flushed, closed or committed. The variable is read once, when this module is first imported; unset
(production), a point costs one dict lookup.

The points (:class:`FaultPoint`) sit in the ``foreachBatch`` writers of the fold jobs
(:class:`connect_state.spark.foldjob.FoldWriter`):

* ``batch_start``: a micro-batch arrived, nothing of it written (between two batches, as far as the tables can tell);
* ``after_history_write``: the batch's history table written, its current table not yet (between two table writes);
* ``after_batch_write``: every table write of the batch done, the batch not yet committed to the checkpoint (Spark
  replays it after a restart; the writes' transaction ids make the replay change nothing).

Counts are per process and shared by every query of the driver (``connect-state-jobs`` runs several): with
``after_history_write:3`` the third history write of any job kills the driver.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from enum import StrEnum

from connect_state.core.errors import ConfigError

ENV = "CONNECT_STATE_FAULT_INJECT"

log = logging.getLogger("connect_state.faults")


class FaultPoint(StrEnum):
    """The named points a process can be killed at (the values are what ``CONNECT_STATE_FAULT_INJECT`` names)."""

    BATCH_START = "batch_start"
    AFTER_HISTORY_WRITE = "after_history_write"
    AFTER_BATCH_WRITE = "after_batch_write"


def parse_faults(text: str) -> dict[str, int]:
    """``"after_history_write:3,batch_start"`` -> ``{"after_history_write": 3, "batch_start": 1}``.

    Raises ConfigError for an unknown point or a count that is not a positive integer.
    """
    armed: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        point, _, count = item.partition(":")
        if point not in FaultPoint.__members__.values():
            known = ", ".join(p.value for p in FaultPoint)
            raise ConfigError(f"{ENV}: unknown fault point {point!r} (known: {known})")
        try:
            n = int(count) if count else 1
        except ValueError:
            n = 0
        if n < 1:
            raise ConfigError(f"{ENV}: the count after {point!r} must be a positive integer, got {count!r}")
        armed[point] = n
    return armed


class Faults:
    """The armed points of a process and how many more times each may be reached before the kill."""

    def __init__(self, armed: Mapping[str, int], kill: object = None) -> None:
        self._remaining = dict(armed)
        self._lock = threading.Lock()
        self._kill = kill if callable(kill) else kill_process

    def reached(self, point: str) -> None:
        if point not in self._remaining:  # the production path: one lookup in an empty dict
            return
        with self._lock:
            self._remaining[point] -= 1
            fire = self._remaining[point] == 0
        if fire:
            log.warning("fault injection (%s): killing the process at %s", ENV, point)
            self._kill()


def kill_process() -> None:
    """``SIGKILL`` the Spark driver's JVM (when this process started one) and this process."""
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    sys.stderr.flush()
    pyspark_context = sys.modules.get("pyspark.core.context") or sys.modules.get("pyspark.context")
    gateway = getattr(getattr(pyspark_context, "SparkContext", None), "_gateway", None)
    jvm = getattr(gateway, "proc", None)
    if jvm is not None and jvm.poll() is None:
        os.kill(jvm.pid, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


_FAULTS = Faults(parse_faults(os.environ.get(ENV, "")))


def fault_point(point: FaultPoint) -> None:
    """Kill the process here if ``CONNECT_STATE_FAULT_INJECT`` armed ``point`` and this is its ``n``-th time."""
    _FAULTS.reached(point)
