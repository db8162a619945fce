"""Running a streaming query from a console script: progress in the log, clean stop on Ctrl-C / SIGTERM."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("connect_state.streaming")


def checkpoint_query_id(spark: SparkSession, checkpoint: str) -> str:
    """The id Spark stored in a checkpoint's ``metadata`` file: stable across restarts, new for a new checkpoint."""
    return spark.read.json(f"{checkpoint}/metadata").first()["id"]


def stop_on_signals(stop: threading.Event, what: str) -> dict[int, Any]:
    """Set ``stop`` on SIGINT/SIGTERM (main thread only); return the previous handlers for :func:`restore_signals`."""

    def request_stop(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping %s", signum, what)
        stop.set()

    return {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}


def restore_signals(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def run_query(query: StreamingQuery, poll_seconds: float = 10.0, stop: threading.Event | None = None) -> int:
    """Wait for ``query``, logging each new micro-batch's progress; stop it cleanly on SIGINT/SIGTERM, or when
    ``stop`` is set (then the caller handles signals: this may run in another thread than the main one).

    Returns 0 when the query ended normally (an ``availableNow`` run that caught up, or a requested stop), 1 when it
    failed.
    """
    stop_requested = stop if stop is not None else threading.Event()
    previous = stop_on_signals(stop_requested, f"query {query.name}") if stop is None else {}
    last_batch = -1
    try:
        while query.isActive and not stop_requested.is_set():
            query.awaitTermination(poll_seconds)
            progress = query.lastProgress
            if progress and progress["batchId"] != last_batch:
                last_batch = progress["batchId"]
                (log.info if progress["numInputRows"] else log.debug)(
                    "%s batch %d: %d input rows, %.1f rows/s processed",
                    query.name,
                    last_batch,
                    progress["numInputRows"],
                    progress.get("processedRowsPerSecond") or 0.0,
                )
        if query.isActive:
            query.stop()
        error = query.exception()
        if error is not None:
            log.error("query %s failed: %s", query.name, error)
            return 1
        return 0
    finally:
        restore_signals(previous)
