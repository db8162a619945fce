"""The jobs driver's Prometheus metrics (issue 14), served by the driver itself on ``jobs.metrics.port``.

Why a server in the driver rather than a table the API exports: the numbers are live state of the running queries
(the last batch's rates and duration, the supervisor's restarts) that Prometheus pulls every few seconds; writing them
to Delta would add a commit per batch per query for values that are stale by the next scrape, and would report a
dead driver's last numbers as if it still ran (a scrape that fails says it is down). The API keeps what the tables
tell (``/metrics`` there: each table's lag and age from the ``watermarks`` table).

Per query (label ``query``, and ``connect_cluster``: the Connect cluster it folds, named as the API's gauges and the
alerts name it, :func:`connect_state.core.clusters.cluster_label`; empty, which Prometheus takes for no label, in a
one-cluster deployment without ``cluster.id``), from each batch's progress (:meth:`JobMetrics.observe`, called by
:class:`~connect_state.spark.streaming.QueryTask`):

* ``connect_state_job_input_rows_per_second`` / ``connect_state_job_processed_rows_per_second``: the last batch's
  input rate and processing rate;
* ``connect_state_job_batch_duration_seconds``: the last batch's duration;
* ``connect_state_job_records_behind``: records between the last batch's end and the topics' end
  (:func:`connect_state.progress.query_progress.records_behind`);
* ``connect_state_job_input_rows_total`` and ``connect_state_job_batches_total``: counted since the driver started.

Per supervised task (label ``task``: a job, or ``<job>/<query>``, and ``connect_cluster`` as above), from every
running supervisor's state:
``connect_state_job_task_failures``, ``connect_state_job_task_restarts`` and ``connect_state_job_task_up``
(1 while running).

``jobs.metrics.port`` is 0 (off) by default: one port per driver, so an operator running several job drivers on one
host picks the ports; ``make run``'s demo serves them on 8091.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from connect_state.core.clusters import CLUSTER_LABEL
from connect_state.progress.query_progress import batch_duration_s, records_behind

log = logging.getLogger("connect_state.metrics")


class _Supervised(Protocol):
    def state(self) -> Mapping[str, Any]: ...


class _SupervisorCollector(Collector):
    """Every live supervisor's task states, read at scrape time."""

    def __init__(self) -> None:
        self.supervisors: weakref.WeakSet[Any] = weakref.WeakSet()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["task", CLUSTER_LABEL]
        failures = GaugeMetricFamily("connect_state_job_task_failures", "Failures of a supervised task", labels=labels)
        restarts = GaugeMetricFamily("connect_state_job_task_restarts", "Restarts of a supervised task", labels=labels)
        up = GaugeMetricFamily("connect_state_job_task_up", "1 while the supervised task runs", labels=labels)
        for supervisor in list(self.supervisors):
            for name, state in supervisor.state().items():
                values = [name, getattr(state, "cluster", None) or ""]
                failures.add_metric(values, state.failures)
                restarts.add_metric(values, state.restarts)
                up.add_metric(values, 1.0 if str(state.status) == "running" else 0.0)
        yield from (failures, restarts, up)


class JobMetrics:
    """The jobs' metrics, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        label = ("query", CLUSTER_LABEL)
        self.input_rate = Gauge(
            "connect_state_job_input_rows_per_second", "Last batch's input rate", label, registry=self.registry
        )
        self.processed_rate = Gauge(
            "connect_state_job_processed_rows_per_second", "Last batch's processing rate", label, registry=self.registry
        )
        self.batch_duration = Gauge(
            "connect_state_job_batch_duration_seconds", "Last batch's duration", label, registry=self.registry
        )
        self.behind = Gauge(
            "connect_state_job_records_behind",
            "Records between the last batch's end and the topics' end",
            label,
            registry=self.registry,
        )
        self.input_rows = Counter(
            "connect_state_job_input_rows", "Records read since the driver started", label, registry=self.registry
        )
        self.batches = Counter("connect_state_job_batches", "Batches run", label, registry=self.registry)
        self.tasks = _SupervisorCollector()
        self.registry.register(self.tasks)
        self._server: Any = None
        self._lock = threading.Lock()

    def observe(self, query: str, progress: Mapping[str, Any], cluster: str | None = None) -> None:
        """One batch's progress (a dict: ``json.loads(progress.json)``) of the query ``query`` of ``cluster`` (its
        :func:`~connect_state.core.clusters.cluster_label`; None: unnamed)."""
        labels = (query, cluster or "")
        self.batches.labels(*labels).inc()
        self.input_rows.labels(*labels).inc(int(progress.get("numInputRows") or 0))
        self.input_rate.labels(*labels).set(float(progress.get("inputRowsPerSecond") or 0.0))
        self.processed_rate.labels(*labels).set(float(progress.get("processedRowsPerSecond") or 0.0))
        duration = batch_duration_s(progress)
        if duration is not None:
            self.batch_duration.labels(*labels).set(duration)
        behind = records_behind(progress)
        if behind is not None:
            self.behind.labels(*labels).set(behind)

    def track(self, supervisor: _Supervised) -> None:
        """Report ``supervisor``'s tasks while it lives."""
        self.tasks.supervisors.add(supervisor)

    def serve(self, port: int, host: str) -> None:
        """Serve ``/metrics`` on ``host:port`` from a daemon thread (once per process)."""
        with self._lock:
            if self._server is None:
                self._server = start_http_server(port, addr=host, registry=self.registry)
                log.info("metrics at http://%s:%d/metrics", host, port)


METRICS = JobMetrics()
"""The driver's metrics (one registry per process: its queries, its supervisors)."""
