"""``GET /health``: Connect's health check (3.9+, KIP-1017), answered for connect-state's tables (issue 14).

Connect answers ``{"status": ..., "message": ...}`` with 200 ``healthy`` once the worker has started, 503 ``starting``
while it still reads its internal topics to their end, 500 ``unhealthy`` when it could not answer in time. Ours has the
same three answers and messages (Connect's ``WorkerStatus``), decided from how far behind its topics each table is
(:func:`current_lags`: the numbers of the ``X-Connect-State-Lag`` header, :mod:`connect_state.progress.freshness`):

* 503 ``starting``: a table some query folds has no watermark yet (its job has not committed its first batch) while
  its topics hold records;
* 500 ``unhealthy``: the topics' end offsets cannot be read (Kafka away; a topic that does not exist has nothing
  to fold), or a table is behind its topics and its
  query last committed longer than ``api.health.max.age.ms`` ago (the job is stuck or down);
* 200 ``healthy``: otherwise.

The details follow Connect's message after a space (as Connect adds its stage), and the extra field ``tables`` has,
per table, ``records_behind`` and ``age_ms`` (``null``: unknown) — a Connect client reads ``status`` and ``message``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from flask import Blueprint, Response, jsonify

from connect_state.api.lag import watermarks
from connect_state.api.openapi import documented, json_answer
from connect_state.api.resources import AppResources, app_resources
from connect_state.core.errors import KafkaWriteError, TopicNotFoundError
from connect_state.core.partitions import Partition
from connect_state.kafka.log import TopicLog
from connect_state.progress.freshness import TableLag, Watermark, query_topics, table_lag
from connect_state.tables.schemas import TABLE_QUERIES, now_ms

bp = Blueprint("health", __name__)

HEALTHY_MESSAGE = "Worker has completed startup and is ready to handle requests."
STARTING_MESSAGE = "Worker is still starting up."
UNHEALTHY_MESSAGE = "Worker was unable to handle this request and may be unable to handle other requests."


class HealthStatus(StrEnum):
    """Connect's ``WorkerStatus`` values."""

    HEALTHY = "healthy"
    STARTING = "starting"
    UNHEALTHY = "unhealthy"


HTTP_STATUS = {HealthStatus.HEALTHY: 200, HealthStatus.STARTING: 503, HealthStatus.UNHEALTHY: 500}


@dataclass(frozen=True)
class Health:
    status: HealthStatus
    message: str
    lags: tuple[TableLag, ...]

    def body(self) -> dict[str, object]:
        tables = {lag.table: {"records_behind": lag.records, "age_ms": lag.age_ms} for lag in self.lags}
        return {"status": str(self.status), "message": self.message, "tables": tables}


def decide(lags: list[TableLag], started_queries: set[str], max_age_ms: int) -> Health:
    """The health from each tracked table's lag and the queries that have committed a batch (pure)."""
    starting = sorted(lag.table for lag in lags if TABLE_QUERIES[lag.table] not in started_queries and lag.records != 0)
    unknown = sorted(lag.table for lag in lags if lag.records is None)
    stale = sorted(
        lag.table
        for lag in lags
        if max_age_ms > 0 and lag.records and lag.age_ms is not None and lag.age_ms > max_age_ms
    )
    if starting:
        details = f"Tables not yet folded from their topics: {', '.join(starting)}."
        return Health(HealthStatus.STARTING, f"{STARTING_MESSAGE} {details}", tuple(lags))
    if unknown or stale:
        parts = []
        if unknown:
            parts.append(f"Cannot read the end offsets of the topics of: {', '.join(unknown)}.")
        if stale:
            parts.append(f"Tables behind their topics with no batch committed for over {max_age_ms} ms: ")
            parts[-1] += ", ".join(stale) + "."
        return Health(HealthStatus.UNHEALTHY, f"{UNHEALTHY_MESSAGE} {' '.join(parts)}", tuple(lags))
    return Health(HealthStatus.HEALTHY, HEALTHY_MESSAGE, tuple(lags))


def _offsets(log: TopicLog, topics: list[str], timeout_ms: int) -> tuple[dict[Partition, int], dict[Partition, int]]:
    """The start and end offsets of ``topics`` in one call (one ``timeout_ms`` when Kafka is away); a topic that does
    not exist (``__consumer_offsets`` before any group committed) is left out: it has nothing to fold.
    KafkaWriteError when Kafka cannot be read."""
    try:
        offsets = log.offsets(topics, timeout_ms)
        return dict(offsets.starts), dict(offsets.ends)
    except TopicNotFoundError:
        pass
    starts: dict[Partition, int] = {}
    ends: dict[Partition, int] = {}
    for topic in topics:
        try:
            offsets = log.offsets([topic], timeout_ms)
        except TopicNotFoundError:
            continue
        starts.update(offsets.starts)
        ends.update(offsets.ends)
    return starts, ends


def current_lags(marks: list[Watermark], resources: AppResources | None = None) -> list[TableLag]:
    """Every tracked table's lag now, from ``marks`` and one read of all their topics' offsets (not the lag header's
    cache: a probe wants the topics as they are, and a Kafka that is away costs one ``api.lag.timeout.ms``), in
    ``resources``'s cluster (default: the request's); unknown lags when Kafka cannot be read."""
    return lags_and_kafka(marks, resources)[0]


def lags_and_kafka(marks: list[Watermark], resources: AppResources | None = None) -> tuple[list[TableLag], str | None]:
    """:func:`current_lags`, and why Kafka could not be read (None when it was)."""
    resources = resources or app_resources()
    settings = resources.settings
    topics = {query: query_topics(query, settings, marks) for query in sorted(set(TABLE_QUERIES.values()))}
    every_topic = sorted({topic for names in topics.values() for topic in names})
    now = now_ms()
    try:
        starts, ends = _offsets(resources.offsets_cache().log, every_topic, settings.api_lag_timeout_ms)
    except KafkaWriteError as err:
        return [TableLag(table) for table in sorted(TABLE_QUERIES)], str(err)
    lags = []
    for table in sorted(TABLE_QUERIES):
        mine = set(topics[TABLE_QUERIES[table]])
        own_starts = {tp: offset for tp, offset in starts.items() if tp[0] in mine}
        own_ends = {tp: offset for tp, offset in ends.items() if tp[0] in mine}
        lags.append(table_lag(table, marks, own_starts, own_ends, now))
    return lags, None


def current_health(resources: AppResources | None = None) -> Health:
    """The health now of ``resources``'s cluster (default: the request's), from its ``watermarks`` table and its
    topics' end offsets."""
    return health_and_kafka(resources)[0]


def health_and_kafka(resources: AppResources | None = None) -> tuple[Health, str | None]:
    """:func:`current_health`, and why the cluster's Kafka could not be read (None when it was): ``GET /clusters``
    says so, as the health alone may say ``starting`` for a cluster whose Kafka is away."""
    resources = resources or app_resources()
    marks = watermarks(resources)
    started = {mark.query for mark in marks}
    lags, kafka_error = lags_and_kafka(marks, resources)
    return decide(lags, started, resources.settings.api_health_max_age_ms), kafka_error


@bp.get("/health")
@documented(
    "Connect 3.9+ health: 200 healthy, 503 starting, 500 unhealthy",
    {
        str(code): json_answer({"type": "object", "required": ["status", "message"]}, "Health")
        for code in (200, 500, 503)
    },
    plain=True,
)
def health() -> tuple[Response, int]:
    state = current_health()
    return jsonify(state.body()), HTTP_STATUS[state.status]
