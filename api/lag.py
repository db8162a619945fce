"""The ``X-Connect-State-Lag`` header of every GET: how far behind the topics' end each table served is (issue 10).

After a GET, for every table the view read (:func:`~connect_state.api.resources.tables_served`), the header says how
many records of the table's topics are not folded into it yet and how old its view is
(:mod:`connect_state.progress.freshness` has the format). The inputs are the ``watermarks`` table (read like any table,
from its in-memory snapshot) and the topics' start and end offsets from
:meth:`~connect_state.api.resources.AppResources.offsets_cache`: asked at most once per ``api.lag.cache.ms`` and within
``api.lag.timeout.ms``, so a GET stays cheap and answers from the tables even while Kafka is away (the header then says
``unknown``). A table answered with the records the API follows past its watermark (:mod:`connect_state.api.live`)
counts from the follower's positions.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flask import Flask, Response, current_app, request

from connect_state.api.live import followed_positions
from connect_state.api.resources import AppResources, app_resources, get_settings, tables_served
from connect_state.core.errors import TableNotFoundError
from connect_state.progress.freshness import HEADER, TableLag, Watermark, format_lag_header, query_topics, table_lag
from connect_state.tables.schemas import TABLE_QUERIES, WATERMARKS, epoch_ms, now_ms


def watermarks(resources: AppResources | None = None) -> list[Watermark]:
    """Every row of the ``watermarks`` table of ``resources``'s cluster (default: the request's; none when the jobs
    have not created it), converted once per version of the table (it is read on every GET)."""
    try:
        return (resources or app_resources()).tables.derived(WATERMARKS, _watermarks_of)
    except TableNotFoundError:
        return []


def _watermarks_of(rows: list[dict[str, Any]]) -> list[Watermark]:
    return [
        Watermark(
            row["query"], row["topic"], int(row["partition"]), int(row["next_offset"]), epoch_ms(row["committed_at"])
        )
        for row in rows
        if row.get("query")
        and row.get("topic")
        and row.get("partition") is not None
        and row.get("next_offset") is not None
    ]


def with_followed(marks: list[Watermark], followed: dict[str, dict[tuple[str, int], int]]) -> list[Watermark]:
    """The watermarks of the queries whose tables the request answered with followed records
    (:mod:`connect_state.api.live`) moved up to the follower's positions: the answer is as new as those."""
    if not followed:
        return marks
    return [
        replace(mark, next_offset=max(mark.next_offset, followed[mark.query].get((mark.topic, mark.partition), 0)))
        if mark.query in followed
        else mark
        for mark in marks
    ]


def watermarks_by_query() -> dict[str, list[Watermark]]:
    """:func:`watermarks` by query, grouped once per version of the table (the lag header wants a query's only)."""
    try:
        return app_resources().tables.derived(WATERMARKS, _watermarks_by_query)
    except TableNotFoundError:
        return {}


def _watermarks_by_query(rows: list[dict[str, Any]]) -> dict[str, list[Watermark]]:
    by_query: dict[str, list[Watermark]] = {}
    for mark in _watermarks_of(rows):
        by_query.setdefault(mark.query, []).append(mark)
    return by_query


def table_lags(tables: list[str]) -> list[TableLag]:
    """The lag of each of ``tables`` now (from the watermarks of its own query only: the header is on every GET)."""
    settings = get_settings()
    cache = app_resources().offsets_cache()
    by_query = watermarks_by_query()
    followed = followed_positions()
    now = now_ms()
    lags = []
    for table in tables:
        query = TABLE_QUERIES.get(table)
        if query is None:
            lags.append(table_lag(table, [], None, None, now))
            continue
        marks = with_followed(by_query.get(query, []), followed)
        offsets, _reason = cache.get(query_topics(query, settings, marks))
        starts, ends = (offsets.starts, offsets.ends) if offsets is not None else (None, None)
        lags.append(table_lag(table, marks, starts, ends, now))
    return lags


def add_lag_header(response: Response) -> Response:
    """``after_request``: the header on a GET that read tables (a failure here only leaves the header out)."""
    if request.method not in ("GET", "HEAD"):
        return response
    tables = [name for name in tables_served() if name != WATERMARKS.name]
    if not tables:
        return response
    try:
        response.headers[HEADER] = format_lag_header(table_lags(tables))
    except Exception:  # the answer itself is fine: never fail it for its header
        current_app.logger.warning("cannot compute the %s header", HEADER, exc_info=True)
    return response


def init_app(app: Flask) -> None:
    app.after_request(add_lag_header)
