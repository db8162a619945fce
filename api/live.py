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
  (:func:`~connect_state.folds.source_offsets.fold_past_rows`). A connector's own offsets topic is not followed;
* ``GET /connectors/<name>/offsets`` of a sink connector: its group's ``sink_offsets`` rows with the group's offset
  commits in ``__consumer_offsets`` past the ``sink_offsets`` query's watermark
  (:func:`~connect_state.folds.sink_offsets.fold_past_rows`; ``api.follow.consumer.offsets``).

The records come from the app's :class:`~connect_state.kafka.follower.TopicFollower` (``api.follow.topics``), which
follows the worker's status and offsets topics in the background, and from a second one that follows
``__consumer_offsets``: a GET waits for no broker. Two bounds make the fold right, both read in memory:

* from below: the watermark is read before the rows (a job commits its tables, then its watermark), so the rows are at
  least as new as the watermark, and the follower must hold every record from the watermark on;
* from above: the rows may be newer than the watermark (a batch committed between the two reads, or its tables
  committed before its watermark), so the follower must hold every record the rows reflect: it must have caught up
  with the topics' end after the rows' last commit (:meth:`~connect_state.kafka.follower.TopicFollower.
  caught_up_as_of` against :meth:`~connect_state.tables.reader.TableReader.rows_as_of`: that commit's timestamp plus a
  margin for the job's clock, or the rows' load when that is earlier).

The records between the watermark and the rows' version are then folded again, which these last-writer-wins folds
absorb (as in :mod:`connect_state.api.fresh`, the writes' reads to the topics' end), and the answer is as of the
follower's position. Otherwise the answer is the table's alone, as without the follower. The ``X-Connect-State-Lag``
header counts from the follower's positions instead of the watermark for the tables answered with followed records
(:func:`followed_positions`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import g

from connect_state.api.fresh import offset_records, query_watermarks, sink_records, topic_records
from connect_state.api.resources import app_resources, get_settings, get_tables
from connect_state.core.errors import RecordFormatError
from connect_state.core.partitions import Partition
from connect_state.folds import active_topics as topics_fold
from connect_state.folds import sink_offsets as sinks_fold
from connect_state.folds import source_offsets as offsets_fold
from connect_state.folds.connector_states import ConnectorRecord, fold_status_past_row
from connect_state.formats.status import TopicStatusKey, parse_status_record
from connect_state.kafka.follower import TopicFollower
from connect_state.kafka.log import LogRecord
from connect_state.tables.schemas import (
    ACTIVE_TOPICS,
    CONNECTORS,
    SINK_OFFSETS,
    SOURCE_OFFSETS,
    TABLE_QUERIES,
    TableSpec,
)

Rows = list[dict[str, Any]]
T = TypeVar("T")


def _rows_and_followed(
    spec: TableSpec, topic: str, connector: str, read_rows: Callable[[], T], follower: TopicFollower | None = None
) -> tuple[T, list[LogRecord] | None]:
    """``read_rows()`` and the followed records of ``connector`` in ``topic`` past the watermark of the query that
    folds ``spec`` (:data:`~connect_state.tables.schemas.TABLE_QUERIES`; ``follower``: the app's follower of the status
    and offsets topics unless given), or None for the records when they cannot be folded over those rows (see the module
    docstring):

    * the follower does not hold every record past the watermark (a partition it does not follow, or that has no
      watermark: nothing folded from it yet, while the follower started at its end; a watermark older than what it
      kept);
    * the rows may reflect records committed after the follower last caught up with the topics' end (their commit,
      with a margin for clocks, or else their load, is later): it may not have read them, and folding older records
      over them would turn them back.
    """
    follower = follower or app_resources().follower()
    query = TABLE_QUERIES[spec.name]
    marks = query_watermarks(query, [topic]) if follower is not None else {}  # before the rows
    rows = read_rows()
    if follower is None:
        return rows, None
    positions = {p: position for p, position in follower.positions().items() if p[0] == topic}
    if not positions or set(positions) != set(marks):
        return rows, None
    as_of, caught_up = get_tables().rows_as_of(spec), follower.caught_up_as_of()
    if as_of is None or caught_up is None or caught_up < as_of:
        return rows, None
    records = follower.records_since(marks, connector)
    if records is not None:
        followed: dict[str, dict[Partition, int]] = g.setdefault("followed", {})
        followed[query] = positions
    return rows, records


def followed_positions() -> dict[str, dict[Partition, int]]:
    """Per query whose table the current request answered with followed records: the follower's positions then."""
    return dict(g.get("followed") or {})


def connector_row(name: str, read_row: Callable[[], dict[str, Any] | None]) -> dict[str, Any] | None:
    """The connector's ``connectors`` row (``read_row()``) with its followed status records folded over it."""
    topic = get_settings().status_storage_topic
    row, records = _rows_and_followed(CONNECTORS, topic, name, read_row)
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
    topic = get_settings().status_storage_topic
    rows, records = _rows_and_followed(ACTIVE_TOPICS, topic, connector, read_rows)
    if not records:
        return rows
    state, _changes = topics_fold.fold_connector_topics(
        topics_fold.state_from_rows(rows), topic_records(connector, records)
    )
    return [{"topic": topic} for topic in topics_fold.active_topics(state)]


SOURCE_FOLDS_MAX = 4096
"""At most this many connectors keep their last folded ``source_offsets`` rows (see :func:`source_rows`)."""
_source_folds: dict[tuple[int, str], tuple[tuple[float, tuple[tuple[int, int], ...]], Rows]] = {}


def source_rows(connector: str, topics: tuple[str, ...], read_rows: Callable[[], Rows]) -> Rows:
    """The connector's ``source_offsets`` rows (``read_rows()``: at least ``offsets_topic``, ``key``, ``value`` and
    ``listed``) with its followed records of the worker's offsets topic folded over them, when that topic is one of its
    offset stores (``topics``).

    Folding parses every key of the connector's rows, so the last fold of each connector is kept with the table load
    and the records it came from, and served again while both are the same (GETs between two records or two batches).
    """
    topic = get_settings().offset_storage_topic
    if topic not in topics:
        return read_rows()
    tables = get_tables()
    loaded_before = tables.loaded_at(SOURCE_OFFSETS)
    rows, records = _rows_and_followed(SOURCE_OFFSETS, topic, connector, read_rows)
    if not records:
        return rows
    loaded_at = tables.loaded_at(SOURCE_OFFSETS)
    made_of = (loaded_at or 0.0, tuple((r.partition, r.offset) for r in records))
    where = (id(app_resources()), connector)
    kept = _source_folds.get(where)
    if kept is not None and kept[0] == made_of:
        return kept[1]
    folded = offsets_fold.fold_past_rows(rows, {topic: offset_records(connector, records).get(topic, [])})
    # Kept only when the rows surely come from that load (no other request reloaded the table meanwhile).
    if loaded_at is not None and loaded_at == loaded_before and (kept or len(_source_folds) < SOURCE_FOLDS_MAX):
        _source_folds[where] = (made_of, folded)
    return folded


def sink_rows(group: str, read_rows: Callable[[], Rows]) -> Rows:
    """A sink connector's group's ``sink_offsets`` rows (``read_rows()``: ``topic``, ``partition``, ``offset``) with
    the group's followed offset commits folded over them (when the follower follows ``__consumer_offsets``)."""
    follower = app_resources().group_follower()
    if follower is None:
        return read_rows()
    topic = get_settings().consumer_offsets_topic
    rows, records = _rows_and_followed(SINK_OFFSETS, topic, group, read_rows, follower)
    if not records:
        return rows
    return sinks_fold.fold_past_rows(rows, sink_records(group, records))
