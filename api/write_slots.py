"""Slow writes never take every thread (issue 33, finding 7): at most ``api.write.concurrency`` write requests run at
once in an API process, so that ``api.threads - api.write.concurrency`` threads are always left for reads and
``/health``.

A write waits on Kafka for as long as its bounds allow (``api.fresh.read.timeout.ms``, ``api.kafka.write.timeout.ms``):
with Kafka hung, every write holds its thread that long. A write (``POST``, ``PUT``, ``PATCH``, ``DELETE`` of a route)
arriving while every slot is taken is not queued behind them (a queued request holds a thread too): it answers at
once **429** with ``Retry-After`` and Connect's error body, and writes nothing. The check runs after authentication
(a refused request takes no slot), and a slot is given back when the request ends, whatever its answer.
"""

from __future__ import annotations

import threading

from flask import Flask, g, request

from connect_state.api.errors import ConnectRestException
from connect_state.api.limits import WRITE_METHODS
from connect_state.core.settings import Settings

__all__ = ["RETRY_AFTER_S", "init_app", "too_many_writes_message"]

RETRY_AFTER_S = 1


def too_many_writes_message(slots: int) -> str:
    return (
        f"Too many write requests in progress: at most {slots} at once per API process (api.write.concurrency), "
        "the others are waiting on Kafka. Nothing was written; retry the request."
    )


def init_app(app: Flask, settings: Settings) -> None:
    """Bound ``app``'s concurrent writes to ``api.write.concurrency``."""
    slots = max(1, settings.api_write_concurrency)
    semaphore = threading.BoundedSemaphore(slots)

    def take_slot() -> None:
        if request.method not in WRITE_METHODS or request.url_rule is None:
            return
        if not semaphore.acquire(blocking=False):
            raise ConnectRestException(429, too_many_writes_message(slots), {"Retry-After": str(RETRY_AFTER_S)})
        g.write_slot = True

    def give_back(_exc: BaseException | None = None) -> None:
        if g.pop("write_slot", False):
            semaphore.release()

    app.before_request(take_slot)
    app.teardown_request(give_back)
