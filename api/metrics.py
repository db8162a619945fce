"""``GET /metrics``: the API's Prometheus metrics (issue 14), in Prometheus' text format (``prometheus_client``).

* ``connect_state_api_requests_total{method,endpoint,status}`` and ``connect_state_api_request_duration_seconds``
  (a histogram, ``{method,endpoint}``): every request, labelled by closed sets only, so that no request can add series
  (issue 33): its Flask URL rule (``/connectors/<name>/offsets``, never the raw path), ``<unmatched>`` for a path no
  rule matches; its method when HTTP defines it (:class:`http.HTTPMethod`), ``OTHER`` for any other name (gunicorn
  accepts any upper-case token as a method);
* ``connect_state_api_write_failures_total{method,endpoint,status}``: write requests (POST, PUT, PATCH, DELETE)
  answered 5xx: the record was not written, or not acknowledged in time;
* per table, measured at each scrape from the ``watermarks`` table and the topics' end offsets (as the
  ``X-Connect-State-Lag`` header and ``GET /health``): ``connect_state_table_records_behind{table}``,
  ``connect_state_table_lag_seconds{table}`` (how old the table's view is: 0 when current) and
  ``connect_state_table_last_commit_age_seconds{table}`` (since its query last committed a batch); NaN when unknown;
* ``connect_state_connector_verdict{connector,verdict}`` (issue 35): 1 for each connector's current verdict, 0 for
  the others, from ``connector_verdicts`` (the watch job's); ``verdict`` takes the verdicts' closed set only, and a
  connector no longer in the table loses its series.

With several clusters (issue 37), or ``cluster.id`` set (:func:`connect_state.core.clusters.cluster_label`), the
per-table and verdict gauges have a ``connect_cluster`` label first (:data:`~connect_state.core.clusters.
CLUSTER_LABEL`), and a scrape (of ``/metrics`` or of any ``/clusters/<id>/metrics``: the deployment's, which needs
``read`` in every cluster) measures every cluster, their Kafkas asked at once; a cluster that cannot be measured is
logged and keeps its last series, and the others are still answered.

Each app has a registry of its own (several apps in one process, as in the tests, never share counters). The jobs'
metrics are served by the jobs driver (:mod:`connect_state.spark.metrics`), not here: the API never imports Spark.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from http import HTTPMethod
from typing import Any

from flask import Blueprint, Flask, Response, current_app, g, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from connect_state.api.health import current_lags
from connect_state.api.lag import watermarks
from connect_state.api.limits import WRITE_METHODS
from connect_state.api.openapi import documented
from connect_state.api.resources import AppResources, app_resources, each_at_once, every_resources
from connect_state.api.verdicts import verdict_rows
from connect_state.core.clusters import CLUSTER_LABEL, cluster_label
from connect_state.core.settings import Settings
from connect_state.progress.freshness import TableLag
from connect_state.tables.schemas import TABLE_QUERIES
from connect_state.verdicts.vocabulary import VERDICT_GAUGE, Verdict

bp = Blueprint("metrics", __name__)

EXTENSION = "connect_state_metrics"
UNMATCHED = "<unmatched>"
OTHER_METHOD = "OTHER"
METHODS = frozenset(HTTPMethod.__members__)


def method_label(method: str) -> str:
    """The request's method as a label: one of HTTP's methods, or :data:`OTHER_METHOD`."""
    return method if method in METHODS else OTHER_METHOD


class ApiMetrics:
    """The metrics of one app, in a registry of their own; ``by_cluster``: the gauges are labelled by cluster."""

    def __init__(self, by_cluster: bool = False) -> None:
        self.by_cluster = by_cluster
        self._lock = threading.Lock()
        self._verdict_series: dict[tuple[str, ...], set[tuple[str, ...]]] = {}  # by cluster: the series set
        where = (CLUSTER_LABEL,) if by_cluster else ()
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("method", "endpoint", "status")
        self.requests = Counter(
            "connect_state_api_requests", "API requests by URL rule and status", labels, registry=self.registry
        )
        self.latency = Histogram(
            "connect_state_api_request_duration_seconds",
            "API request latency by URL rule",
            ("method", "endpoint"),
            registry=self.registry,
        )
        self.write_failures = Counter(
            "connect_state_api_write_failures",
            "Write requests answered with a 5xx status (nothing or not all written)",
            labels,
            registry=self.registry,
        )
        self.records_behind = Gauge(
            "connect_state_table_records_behind",
            "Records of the table's topics not yet folded into it (NaN: unknown)",
            (*where, "table"),
            registry=self.registry,
        )
        self.lag_seconds = Gauge(
            "connect_state_table_lag_seconds",
            "How old the table's view of its topics is: 0 when current (NaN: unknown)",
            (*where, "table"),
            registry=self.registry,
        )
        self.commit_age = Gauge(
            "connect_state_table_last_commit_age_seconds",
            "Seconds since the table's query last committed a batch (NaN: never)",
            (*where, "table"),
            registry=self.registry,
        )
        self.verdict = Gauge(
            VERDICT_GAUGE,
            "1 for the connector's current verdict, 0 for the others (issue 35)",
            (*where, "connector", "verdict"),
            registry=self.registry,
        )

    def refresh(self) -> None:
        """Measure the tables and the verdicts (in a request): the request's cluster's, or every cluster's at once
        when the gauges are by cluster; then set the gauges in one step (two scrapes at once never see a gauge half
        set). What cannot be measured is logged and keeps its last series; the rest is still answered."""
        wheres: list[tuple[str, ...]]
        if self.by_cluster:
            every = every_resources()
            wheres, measured = [(cluster_id,) for cluster_id in every], each_at_once(_measure, list(every.values()))
        else:
            wheres, measured = [()], [_measure(app_resources())]
        with self._lock:
            for where, one in zip(wheres, measured, strict=True):
                self._set_tables(where, one)
                self._set_verdicts(where, one)

    def _set_tables(self, where: tuple[str, ...], measured: Measured) -> None:
        if measured.lags is None:
            return
        for lag in measured.lags:
            self.records_behind.labels(*where, lag.table).set(math.nan if lag.records is None else lag.records)
            self.lag_seconds.labels(*where, lag.table).set(math.nan if lag.age_ms is None else lag.age_ms / 1000)
            committed = measured.committed.get(TABLE_QUERIES[lag.table])
            age = math.nan if committed is None else max(measured.at_ms - committed, 0) / 1000
            self.commit_age.labels(*where, lag.table).set(age)

    def _set_verdicts(self, where: tuple[str, ...], measured: Measured) -> None:
        """One series per connector and verdict of the cluster; connectors gone from its table lose theirs."""
        if measured.verdicts is None:
            return
        series = {
            (*where, name, member.value): 1 if row["verdict"] == member.value else 0
            for name, row in measured.verdicts.items()
            for member in Verdict
        }
        for gone in self._verdict_series.get(where, set()) - series.keys():
            self.verdict.remove(*gone)
        for labels, value in series.items():
            self.verdict.labels(*labels).set(value)
        self._verdict_series[where] = set(series)


@dataclass(frozen=True)
class Measured:
    """One cluster's tables and verdicts as a scrape measured them; None: could not be measured (logged)."""

    lags: list[TableLag] | None
    committed: dict[str, int]
    """The newest batch commit of each query (epoch ms)."""
    verdicts: dict[str, dict[str, Any]] | None
    at_ms: float


def _measure(resources: AppResources) -> Measured:
    """``resources``'s cluster's tables' lag (from its watermarks and its topics' offsets) and verdicts."""
    label = cluster_label(resources.settings)
    named = f" of cluster {label}" if label else ""
    lags: list[TableLag] | None = None
    committed: dict[str, int] = {}
    try:
        marks = watermarks(resources)
        for mark in marks:
            if mark.committed_at_ms is not None:
                committed[mark.query] = max(committed.get(mark.query, 0), mark.committed_at_ms)
        lags = current_lags(marks, resources)
    except Exception:  # the request counters are still worth a scrape
        current_app.logger.warning("cannot measure the tables' lag%s for /metrics", named, exc_info=True)
    try:
        verdicts: dict[str, dict[str, Any]] | None = verdict_rows(resources)
    except Exception:
        current_app.logger.warning("cannot read the verdicts%s for /metrics", named, exc_info=True)
        verdicts = None
    return Measured(lags, committed, verdicts, time.time() * 1000)


def app_metrics(app: Flask | None = None) -> ApiMetrics:
    target = app if app is not None else current_app
    return target.extensions[EXTENSION]


def _started() -> None:
    g.metrics_started = time.perf_counter()


def _observe(response: Response) -> Response:
    started = g.pop("metrics_started", None)
    endpoint = request.url_rule.rule if request.url_rule is not None else UNMATCHED
    metrics = app_metrics()
    status, method = str(response.status_code), method_label(request.method)
    metrics.requests.labels(method, endpoint, status).inc()
    if started is not None:
        metrics.latency.labels(method, endpoint).observe(time.perf_counter() - started)
    if request.method in WRITE_METHODS and response.status_code >= 500:
        metrics.write_failures.labels(method, endpoint, status).inc()
    return response


def init_app(app: Flask, settings: Settings) -> None:
    """Create the app's metrics (by cluster when ``settings`` name their clusters) and count every request."""
    app.extensions[EXTENSION] = ApiMetrics(by_cluster=cluster_label(settings) is not None)
    app.before_request(_started)
    app.after_request(_observe)


@bp.get("/metrics")
@documented(
    "Prometheus metrics",
    {"200": {"description": "Prometheus text format", "content": {"text/plain": {"schema": {"type": "string"}}}}},
    plain=True,
)
def metrics() -> Response:
    state = app_metrics()
    state.refresh()
    return Response(generate_latest(state.registry), mimetype=CONTENT_TYPE_LATEST)
