"""Progress of long work (issue 14): records read of how many and the ETA from a query's progress reports, and the jobs
driver's Prometheus metrics from the same reports, scraped over HTTP."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import requests
from prometheus_client.parser import text_string_to_metric_families

from connect_state.core.settings import load_settings
from connect_state.dev.jvm_service import free_port
from connect_state.progress.query_progress import ReadProgress, batch_duration_s, records_behind
from connect_state.spark.metrics import JobMetrics


def progress(batch: int, rows: int, end: dict[str, dict[str, int]], latest: dict[str, dict[str, int]]) -> dict:
    """A Kafka query's progress as ``json.loads(StreamingQueryProgress.json)`` has it."""
    return {
        "batchId": batch,
        "numInputRows": rows,
        "inputRowsPerSecond": 50.0,
        "processedRowsPerSecond": 100.0,
        "durationMs": {"triggerExecution": 1500},
        "sources": [{"description": "KafkaV2[Subscribe[t]]", "endOffset": end, "latestOffset": latest}],
    }


def test_records_behind_sums_every_partition_and_source() -> None:
    p = progress(0, 10, {"t": {"0": 10, "1": 5}}, {"t": {"0": 30, "1": 5, "2": 4}})
    assert records_behind(p) == 20 + 0 + 4
    p["sources"].append({"endOffset": '{"u": {"0": 1}}', "latestOffset": '{"u": {"0": 3}}'})  # JSON text
    assert records_behind(p) == 26
    assert records_behind({"sources": [{"endOffset": 5, "latestOffset": None}]}) is None  # not a Kafka source
    assert batch_duration_s(p) == 1.5


def test_read_progress_says_how_many_of_how_many_and_when_it_ends() -> None:
    reading = ReadProgress("q", started_at=100.0)
    assert reading.observe(progress(0, 400, {"t": {"0": 400}}, {"t": {"0": 1000}}))
    assert not reading.observe(progress(0, 400, {"t": {"0": 400}}, {"t": {"0": 1000}}))  # counted once
    assert (reading.read, reading.behind, reading.total) == (400, 600, 1000)
    assert reading.eta_s(now=104.0) == 6.0  # 100 records/s, 600 left
    assert reading.line(now=104.0) == "read 400 of 1000 records (40%), 600 behind, about 6 s left at 100 records/s"
    reading.observe(progress(1, 600, {"t": {"0": 1000}}, {"t": {"0": 1000}}))
    assert reading.line(now=110.0) == "read 1000 of 1000 records (100%), 0 behind, caught up at 100 records/s"
    assert ReadProgress("q", 0.0).line(1.0) == "read 0 records in 0 batches (records behind unknown)"


@dataclass
class _State:
    failures: int
    restarts: int
    status: str


class _Supervisor:
    def state(self) -> dict[str, Any]:
        return {"offsets/source_offsets": _State(2, 1, "running")}


def test_job_metrics_are_scraped_over_http() -> None:
    metrics = JobMetrics()
    metrics.observe("source_offsets", progress(3, 40, {"t": {"0": 40}}, {"t": {"0": 100}}))
    metrics.observe("source_offsets", progress(4, 10, {"t": {"0": 50}}, {"t": {"0": 100}}))
    supervisor = _Supervisor()
    metrics.track(supervisor)
    port = free_port()
    metrics.serve(port, host="127.0.0.1")
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    q = (("connect_cluster", ""), ("query", "source_offsets"))  # empty: Prometheus stores the series without it
    assert samples[("connect_state_job_records_behind", q)] == 50
    assert samples[("connect_state_job_input_rows_total", q)] == 50
    assert samples[("connect_state_job_batches_total", q)] == 2
    assert samples[("connect_state_job_input_rows_per_second", q)] == 50.0
    assert samples[("connect_state_job_batch_duration_seconds", q)] == 1.5
    task = (("connect_cluster", ""), ("task", "offsets/source_offsets"))
    assert samples[("connect_state_job_task_failures", task)] == 2
    assert samples[("connect_state_job_task_restarts", task)] == 1
    assert samples[("connect_state_job_task_up", task)] == 1


class _FakeQuery:
    """A streaming query that runs three batches of a catch-up, one per poll, then ends."""

    name = "fake_offsets"
    id = "fake"

    def __init__(self) -> None:
        self.batches = [
            progress(0, 300, {"t": {"0": 300}}, {"t": {"0": 1000}}),
            progress(1, 300, {"t": {"0": 600}}, {"t": {"0": 1000}}),
            progress(2, 400, {"t": {"0": 1000}}, {"t": {"0": 1000}}),
        ]
        self.done = 0

    @property
    def isActive(self) -> bool:
        return self.done < len(self.batches)

    def awaitTermination(self, timeout: float) -> None:
        self.done += 1

    @property
    def lastProgress(self) -> dict | None:
        return self.batches[self.done - 1] if self.done else None

    @property
    def recentProgress(self) -> list[dict]:
        return self.batches[: self.done]

    def stop(self) -> None:
        pass

    def exception(self) -> None:
        return None


def test_a_query_task_logs_its_progress_and_feeds_the_metrics(caplog: Any) -> None:
    from connect_state.spark.metrics import METRICS
    from connect_state.spark.streaming import QueryTask

    labels = {"query": "fake_offsets", "connect_cluster": "billing"}
    before = METRICS.registry.get_sample_value("connect_state_job_batches_total", labels) or 0
    with caplog.at_level(logging.INFO, logger="connect_state.streaming"):
        task = QueryTask(_FakeQuery(), poll_seconds=0, cluster="billing")  # type: ignore[arg-type]
        assert task.run(threading.Event()) == 0
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("fake_offsets: read")]
    assert lines[0].startswith("fake_offsets: read 300 of 1000 records (30%), 700 behind, about ")
    assert lines[1].startswith("fake_offsets: read 600 of 1000 records (60%), 400 behind")
    assert lines[-1].startswith("fake_offsets: read 1000 of 1000 records (100%), 0 behind, caught up")
    after = METRICS.registry.get_sample_value("connect_state_job_batches_total", labels)
    assert after == before + 3
    assert METRICS.registry.get_sample_value("connect_state_job_records_behind", labels) == 0


def test_job_metrics_listen_on_loopback_by_default() -> None:
    """The endpoint has no authentication: with the shipped defaults it is not reachable from other hosts."""
    settings = load_settings(overrides={"jobs.metrics.port": str(free_port())}, environ={})
    metrics = JobMetrics()
    metrics.serve(settings.jobs_metrics_port, settings.jobs_metrics_host)
    server, _thread = metrics._server  # type: ignore[misc]
    assert server.server_address[0] == "127.0.0.1"
    server.shutdown()
