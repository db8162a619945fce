"""GET answers as of the topics the API follows: a table's rows plus the records the jobs have not folded into it yet
(issue 11 §2).

The tables lag the topics by a micro-batch or more. A Connect worker answers ``GET /connectors/<name>/status`` from
the status topic as its ``KafkaBasedLog`` follows it; so do we, for the three answers made of the status and offsets
topics:

* ``GET /connectors/<name>/status``: the ``connectors`` row with the status records past the ``connector_states``
  query's watermark folded over it (:func:`~connect_state.folds.connector_states.fold_status_past_row`);
* ``GET /connectors/<name>/topics``: the ``active_topics`` rows with the topic-status records past the
  ``active_topics`` query's watermark (:func:`~connect_state.folds.active_topics.fold_connector_topics`);
* ``GET /connectors/<name>/offsets`` of a source connector: its ``source_offsets`` rows in the worker's offsets topic
  with the records past the ``source_offsets`` query's watermark
  (:func:`~connect_state.folds.source_offsets.fold_past_rows`). A connector's own offsets topic is not followed.

The records come from the app's :class:`~connect_state.kafka.follower.TopicFollower` (``api.follow.topics``), which
follows the worker's status and offsets topics in the background: a GET waits for no broker. The watermark is read
before the rows (a job commits its tables, then its watermark), so the rows are at least as new as the watermark, and
records between the two are folded again, which these last-writer-wins folds absorb (as in
:mod:`connect_state.api.fresh`, the writes' reads to the topics' end). When the follower does not hold every record
past the watermark (just started, a partition without a watermark, the jobs further behind than it keeps), the answer
is the table's alone, as without the follower. The ``X-Connect-State-Lag`` header then counts from the follower's
positions instead of the watermark for the tables answered this way (:func:`followed_positions`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import g

from connect_state.api.fresh import offset_records, query_watermarks, topic_records
from connect_state.api.resources import app_resources, get_settings
from connect_state.errors import RecordFormatError
from connect_state.folds import active_topics as topics_fold
from connect_state.folds import source_offsets as offsets_fold
from connect_state.folds.connector_states import ConnectorRecord, fold_status_past_row
from connect_state.formats.status import TopicStatusKey, parse_status_record
from connect_state.kafka.log import LogRecord, Partition

Rows = list[dict[str, Any]]


def records_past_watermark(query: str, topic: str, connector: str) -> list[LogRecord] | None:
    """The followed records of ``connector`` in ``topic`` past ``query``'s watermark, or None when the follower does
    not hold them all (or there is no follower). Read before the table's rows (see the module docstring)."""
    follower = app_resources().follower()
    if follower is None:
        return None
    positions = {p: position for p, position in follower.positions().items() if p[0] == topic}
    if not positions:
        return None
    marks = query_watermarks(query, [topic])
    if any(partition not in marks for partition in positions):
        return None  # a partition nothing was folded from yet: the follower started at its end, not its start
    records = follower.records_since({partition: marks[partition] for partition in positions}, connector)
    if records is not None:
        followed: dict[str, dict[Partition, int]] = g.setdefault("followed", {})
        followed[query] = positions
    return records


def followed_positions() -> dict[str, dict[Partition, int]]:
    """Per query whose table the current request answered with followed records: the follower's positions then."""
    return dict(g.get("followed") or {})


def connector_row(name: str, read_row: Callable[[], dict[str, Any] | None]) -> dict[str, Any] | None:
    """The connector's ``connectors`` row (``read_row()``) with its followed status records folded over it."""
    records = records_past_watermark("connector_states", get_settings().status_storage_topic, name)
    row = read_row()
    if row is None or not records:
        return row
    parsed: list[ConnectorRecord] = []
    for r in records:
        try:
            status = parse_status_record(r.key, r.value)
        except RecordFormatError:
            continue  # the job quarantines it; Connect's reader skips it
        if isinstance(status.key, TopicStatusKey):
            continue
        parsed.append(ConnectorRecord.from_status(status, r.partition, r.offset, r.timestamp))
    return fold_status_past_row(row, parsed)


def active_topics(connector: str, read_rows: Callable[[], Rows]) -> Rows:
    """The connector's ``active_topics`` rows (``read_rows()``) with its followed topic-status records folded over
    them (one row per active topic, with its ``topic``)."""
    records = records_past_watermark("active_topics", get_settings().status_storage_topic, connector)
    rows = read_rows()
    if not records:
        return rows
    state, _changes = topics_fold.fold_connector_topics(
        topics_fold.state_from_rows(rows), topic_records(connector, records)
    )
    return [{"topic": topic} for topic in topics_fold.active_topics(state)]


def source_rows(connector: str, topics: tuple[str, ...], read_rows: Callable[[], Rows]) -> Rows:
    """The connector's ``source_offsets`` rows (``read_rows()``, the columns of
    :data:`~connect_state.api.fresh.SOURCE_ROW_COLUMNS`) with its followed records of the worker's offsets topic
    folded over them, when that topic is one of its offset stores (``topics``)."""
    topic = get_settings().offset_storage_topic
    records = records_past_watermark("source_offsets", topic, connector) if topic in topics else None
    rows = read_rows()
    if not records:
        return rows
    return offsets_fold.fold_past_rows(rows, {topic: offset_records(connector, records).get(topic, [])})
