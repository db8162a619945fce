"""Closed-loop HTTP load from several client processes: keep-alive GETs, requests per second and latency percentiles.

Issue 11 §5 asks for ``GET /status``, ``/topics`` and ``/offsets`` under 4 and 8 concurrent keep-alive clients, our API
against the real Connect worker on the same paths. Each client is its own Python process (``python -m
bench.http_load``: no GIL shared between clients), holds one HTTP/1.1 keep-alive connection, and sends its next
request as soon as the previous answer's body is read (closed loop). All clients of a round start at the same wall
clock time, after a few untimed requests each, and stop sending at the same time; :func:`run_load` then merges their
latencies.

A client reads its job as JSON in its one argument (``host``, ``port``, ``paths``, ``start_at``, ``seconds``,
``warmup``) and prints its result as JSON on stdout: latencies in seconds, and the count of answers per status
code. Every answer is read to its end; an answer other than 200 is counted, never retried, and
:class:`LoadResult` reports it. A connection the server closed (gunicorn closes a keep-alive connection idle for
2 s, e.g. between the warm-up and the timed window) is opened again, once per request.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CLIENT_START_DELAY_S = 3.0
"""Time given to the client processes to start (import, connect, warm up) before the timed window opens."""
HTTP_TIMEOUT_S = 60.0


@dataclass
class LoadResult:
    """One round: ``clients`` processes for ``seconds`` against one server and path kind."""

    label: str
    clients: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    #: CPU time (user + system) the server's processes used during the timed window, when measured.
    cpu_seconds: float | None = None

    @property
    def requests(self) -> int:
        return len(self.latencies)

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    @property
    def failures(self) -> int:
        return sum(count for status, count in self.statuses.items() if status != 200)

    @property
    def cpu_ms_per_request(self) -> float | None:
        if self.cpu_seconds is None or not self.requests:
            return None
        return self.cpu_seconds * 1000 / self.requests

    def percentile_ms(self, q: float) -> float:
        return percentile(self.latencies, q) * 1000

    def line(self) -> str:
        bad = f", {self.failures:,} answers not 200: {dict(self.statuses)}" if self.failures else ""
        cpu = self.cpu_ms_per_request
        server_cpu = f", server CPU {cpu:.2f} ms/request" if cpu is not None else ""
        return (
            f"{self.label}: {self.clients} clients, {self.rate:,.0f} req/s, p50 {self.percentile_ms(50):.2f} ms, "
            f"p99 {self.percentile_ms(99):.2f} ms{server_cpu} ({self.requests:,} requests in {self.seconds:g} s{bad})"
        )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.4999999)))
    return ordered[rank - 1]


def process_tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` and its live descendants, from ``/proc`` (Linux)."""
    ticks, pending = 0, [pid]
    while pending:
        current = pending.pop()
        with contextlib.suppress(OSError, ValueError):
            fields = Path(f"/proc/{current}/stat").read_text().rpartition(")")[2].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
    return ticks / os.sysconf("SC_CLK_TCK")


def run_load(
    label: str,
    url: str,
    paths: Sequence[str],
    clients: int,
    seconds: float,
    warmup: int,
    cpu_pid: int | None = None,
) -> LoadResult:
    """``clients`` client processes, each cycling through ``paths`` (each from its own starting point) for
    ``seconds``; with ``cpu_pid``, also the CPU time that server process (and its children) used in that window."""
    host, _, port = url.removeprefix("http://").rstrip("/").rpartition(":")
    start_at = time.time() + CLIENT_START_DELAY_S
    procs = []
    for i in range(clients):
        shift = i * len(paths) // clients
        job = {
            "host": host,
            "port": int(port),
            "paths": list(paths[shift:]) + list(paths[:shift]),
            "start_at": start_at,
            "seconds": seconds,
            "warmup": warmup,
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.http_load", json.dumps(job)],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        procs.append(proc)
    result = LoadResult(label, clients, seconds)
    if cpu_pid is not None:
        time.sleep(max(0.0, start_at - time.time()))
        cpu_before = process_tree_cpu_seconds(cpu_pid)
        time.sleep(max(0.0, start_at + seconds - time.time()))
        result.cpu_seconds = process_tree_cpu_seconds(cpu_pid) - cpu_before
    errors = []
    for proc in procs:
        out, err = proc.communicate(timeout=CLIENT_START_DELAY_S + seconds + HTTP_TIMEOUT_S + 60)
        if proc.returncode != 0:
            errors.append(err.decode(errors="replace")[-2000:])
            continue
        answer = json.loads(out)
        result.latencies.extend(answer["latencies"])
        result.statuses.update({int(status): count for status, count in answer["statuses"].items()})
    if errors:
        raise RuntimeError(f"{len(errors)} of {clients} load clients failed; the first:\n{errors[0]}")
    return result


def _client(job: dict) -> dict:
    conn = http.client.HTTPConnection(job["host"], job["port"], timeout=HTTP_TIMEOUT_S)
    paths = job["paths"]
    headers = {"Accept": "application/json"}

    def get(path: str) -> int:
        for attempt in (1, 2):  # a keep-alive connection the server closed while idle is opened again, once
            try:
                conn.request("GET", path, headers=headers)
                response = conn.getresponse()
            except (http.client.RemoteDisconnected, http.client.CannotSendRequest, ConnectionError):
                conn.close()
                if attempt == 2:
                    raise
                continue
            response.read()
            if response.will_close:
                conn.close()
            return response.status
        raise AssertionError("unreachable")

    for i in range(job["warmup"]):
        get(paths[i % len(paths)])
    time.sleep(max(0.0, job["start_at"] - time.time()))
    end = time.perf_counter() + job["seconds"]
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    i = 0
    while True:
        started = time.perf_counter()
        if started >= end:
            break
        status = get(paths[i % len(paths)])
        latencies.append(time.perf_counter() - started)
        statuses[status] += 1
        i += 1
    conn.close()
    return {"latencies": latencies, "statuses": statuses}


if __name__ == "__main__":
    print(json.dumps(_client(json.loads(sys.argv[1]))))
