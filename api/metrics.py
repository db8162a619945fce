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
per-table and verdict gauges have a ``cluster`` label first, and a scrape (of ``/metrics`` or of any
``/clusters/<id>/metrics``: the deployment's, which needs ``read`` in every cluster) measures every cluster; a cluster
that cannot be measured is logged and the others are still answered.

Each app has a registry of its own (several apps in one process, as in the tests, never share counters). The jobs'
metrics are served by the jobs driver (:mod:`connect_state.spark.metrics`), not here: the API never imports Spark.
"""

from __future__ import annotations

import math
import time
from http import HTTPMethod

from flask import Blueprint, Flask, Response, current_app, g, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from connect_state.api.health import current_lags
from connect_state.api.lag import watermarks
from connect_state.api.limits import WRITE_METHODS
from connect_state.api.openapi import documented
from connect_state.api.resources import every_resources, serving_cluster
from connect_state.api.verdicts import verdict_rows
from connect_state.core.clusters import cluster_label
from connect_state.core.settings import Settings
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
        where = ("cluster",) if by_cluster else ()
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

    def refresh_verdicts(self, where: tuple[str, ...] = ()) -> None:
        """Set the verdict gauge from ``connector_verdicts`` (in a request for the cluster ``where`` names, when the
        gauges are by cluster): one series per connector and verdict. The gauge is cleared before a scrape
        (:func:`metrics`), so connectors gone from the table lose theirs."""
        rows = verdict_rows()
        for name, row in rows.items():
            for member in Verdict:
                self.verdict.labels(*where, name, member.value).set(1 if row["verdict"] == member.value else 0)

    def refresh_tables(self, where: tuple[str, ...] = ()) -> None:
        """Set the per-table gauges (in a request for the cluster ``where`` names, when the gauges are by
        cluster)."""
        now_ms = time.time() * 1000
        newest: dict[str, int] = {}
        marks = watermarks()
        for mark in marks:
            if mark.committed_at_ms is not None:
                newest[mark.query] = max(newest.get(mark.query, 0), mark.committed_at_ms)
        for lag in current_lags(marks):
            self.records_behind.labels(*where, lag.table).set(math.nan if lag.records is None else lag.records)
            self.lag_seconds.labels(*where, lag.table).set(math.nan if lag.age_ms is None else lag.age_ms / 1000)
            committed = newest.get(TABLE_QUERIES[lag.table])
            age = math.nan if committed is None else max(now_ms - committed, 0) / 1000
            self.commit_age.labels(*where, lag.table).set(age)

    def refresh(self) -> None:
        """Measure the tables and the verdicts (in a request): the request's cluster's, or every cluster's when the
        gauges are by cluster. What cannot be measured is logged; the rest is still answered."""
        self.verdict.clear()
        if not self.by_cluster:
            self._refresh_one(())
            return
        for cluster_id in every_resources():
            with serving_cluster(cluster_id):
                self._refresh_one((cluster_id,))

    def _refresh_one(self, where: tuple[str, ...]) -> None:
        named = f" of cluster {where[0]}" if where else ""
        try:
            self.refresh_tables(where)
        except Exception:  # the request counters are still worth a scrape
            current_app.logger.warning("cannot measure the tables' lag%s for /metrics", named, exc_info=True)
        try:
            self.refresh_verdicts(where)
        except Exception:
            current_app.logger.warning("cannot read the verdicts%s for /metrics", named, exc_info=True)


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
