"""Slow writes must not starve reads (issue 33, finding 7): the production server process (gunicorn) with its default
threads, its Kafka a socket that accepts connections and never answers, so that every write waits on Kafka for its
whole bound. ``/health`` and a GET must still answer, before any of the writes does.

No broker is needed (``tests/fixtures/api_server.py``).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import requests

from tests.fixtures.api_server import no_kafka_settings, serving_api

HELD_WRITES = 8
KAFKA_WAIT_MS = 12_000  # how long a write waits on the silent Kafka (api.fresh.read.timeout.ms)
READ_BOUND_S = 6.0  # reads must answer well within a write's wait


@contextlib.contextmanager
def silent_kafka() -> Iterator[int]:
    """A TCP port that accepts every connection and never sends a byte (a broker that hangs): its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, name="silent-kafka", daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        listener.close()


def _timed(method: str, url: str) -> tuple[float, int]:
    answer = requests.request(method, url, timeout=KAFKA_WAIT_MS / 1000 * 4)
    return time.monotonic(), answer.status_code


def test_held_writes_leave_health_and_reads_answering(tmp_path: Path) -> None:
    with silent_kafka() as port:
        settings = {
            **no_kafka_settings(tmp_path),
            "bootstrap.servers": f"127.0.0.1:{port}",
            "api.fresh.read.timeout.ms": str(KAFKA_WAIT_MS),
            "api.kafka.write.timeout.ms": str(KAFKA_WAIT_MS),
            "api.lag.timeout.ms": "1000",
        }
        with serving_api(settings, threads=None) as url, ThreadPoolExecutor(HELD_WRITES + 2) as pool:
            writes: list[Future[tuple[float, int]]] = [
                pool.submit(_timed, "PUT", f"{url}/connectors/held-{i}/stop") for i in range(HELD_WRITES)
            ]
            time.sleep(1.5)  # the writes are in and waiting on Kafka
            assert not any(write.done() for write in writes), [w.result() for w in writes if w.done()]
            began = time.monotonic()
            health = pool.submit(_timed, "GET", f"{url}/health")
            read = pool.submit(_timed, "GET", f"{url}/connectors")
            health_at, health_status = health.result(timeout=KAFKA_WAIT_MS / 1000 * 4)
            read_at, read_status = read.result(timeout=KAFKA_WAIT_MS / 1000 * 4)
            answered = [write.result(timeout=KAFKA_WAIT_MS / 1000 * 4) for write in writes]
    first_write_at = min(at for at, _ in answered)
    assert health_status in (200, 500, 503), health_status  # answered (Kafka cannot be asked: unhealthy)
    assert read_status in (200, 503), read_status  # no table yet: 503 saying which job creates it
    assert health_at - began < READ_BOUND_S and read_at - began < READ_BOUND_S, (health_at - began, read_at - began)
    assert health_at < first_write_at and read_at < first_write_at, (health_at, read_at, first_write_at)
    statuses = {status for _, status in answered}
    assert statuses <= {409, 429, 503}, answered  # every write answered: Kafka unreachable, or too many at once


def test_writes_beyond_the_slots_answer_429_at_once(tmp_path: Path) -> None:
    """Four threads, two write slots, six writes held on Kafka: two wait, four answer 429 with Retry-After at once, and
    the two threads left still answer ``/health``."""
    with silent_kafka() as port:
        settings = {
            **no_kafka_settings(tmp_path),
            "bootstrap.servers": f"127.0.0.1:{port}",
            "api.fresh.read.timeout.ms": str(KAFKA_WAIT_MS),
            "api.kafka.write.timeout.ms": str(KAFKA_WAIT_MS),
            "api.lag.timeout.ms": "1000",
            "api.threads": "4",
            "api.write.concurrency": "2",
        }
        with serving_api(settings, threads=None) as url, ThreadPoolExecutor(8) as pool:
            began = time.monotonic()
            writes = [pool.submit(requests.put, f"{url}/connectors/held-{i}/stop", timeout=60) for i in range(6)]
            time.sleep(1.5)
            health_at, health_status = pool.submit(_timed, "GET", f"{url}/health").result(timeout=60)
            answers = [write.result(timeout=60) for write in writes]
    refused = [answer for answer in answers if answer.status_code == 429]
    assert len(refused) == 4, [(a.status_code, a.text) for a in answers]
    assert all(answer.headers["Retry-After"] == "1" for answer in refused)
    assert refused[0].json() == {
        "error_code": 429,
        "message": "Too many write requests in progress: at most 2 at once per API process (api.write.concurrency), "
        "the others are waiting on Kafka. Nothing was written; retry the request.",
    }
    assert health_status in (200, 500, 503) and health_at - began < READ_BOUND_S, (health_status, health_at - began)
