"""What Connect's leader would know before it acts, established for every write (issue 10, ``DistributedHerder``).

The tables lag the topics by at least one micro-batch. A write decided from them can act on a connector that was
deleted, resumed or given new topics and partitions meanwhile, so every mutating request first establishes, within
``api.fresh.read.timeout.ms``:

* **the connector** (:func:`fresh_connector`): its existence, target state and committed task count as of the config
  topic's end offset at the request, from the process's
  :class:`~connect_state.kafka.log.ConfigTopicTail` (the config topic read to its end, incrementally, and folded by
  :class:`~connect_state.folds.config_snapshot.ConfigSnapshot`, the connector-state job's own rules);
* **the connector's active topics** (:func:`fresh_active_topics`) and **source partitions**
  (:func:`fresh_source_rows`) as of the topics' end offsets at the request: the table's rows, then the records past
  the table's watermark (``watermarks``: the next offset not yet folded; none, or no table: from the log start) up to
  those end offsets, filtered to the connector and folded over the rows with the jobs' own pure folds
  (:mod:`connect_state.folds.active_topics`, :mod:`connect_state.folds.source_offsets`).

The watermark is read before the table (a job commits its tables, then its watermark), so the rows are at least as
new as the watermark says: records between the two are folded again, which these last-writer-wins folds absorb (a
reset may then tombstone a key that is already gone, never miss one that is live).

When this cannot be established in time the request answers **409** (Connect answers 409 while it cannot act yet),
or **503** when no Kafka broker could be reached, with a message that says why, and writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from connect_state.api.resources import app_resources, get_settings
from connect_state.connect.offset_stores import ConnectorOffsetStores
from connect_state.core.errors import (
    KafkaUnavailableError,
    KafkaWriteError,
    RecordFormatError,
    TableNotFoundError,
    TopicNotFoundError,
)
from connect_state.folds import active_topics as topics_fold
from connect_state.folds import sink_offsets as sinks_fold
from connect_state.folds import source_offsets as offsets_fold
from connect_state.folds.config_snapshot import ConnectorConfigView
from connect_state.herder import KafkaUnreachableError, NotEstablishedError
from connect_state.kafka.log import LogRecord
from connect_state.tables.schemas import ACTIVE_TOPICS, SOURCE_OFFSETS, WATERMARKS, TableSpec

SOURCE_ROW_COLUMNS = ["connector", "offsets_topic", "partition", "key", "offset", "value", "listed"]


def not_established(what: str, err: BaseException) -> NotEstablishedError:
    """The error when the fresh state cannot be established: 503 when Kafka is unreachable, else 409."""
    timeout_ms = get_settings().api_fresh_read_timeout_ms
    kind = KafkaUnreachableError if isinstance(err, KafkaUnavailableError) else NotEstablishedError
    return kind(
        f"Cannot complete the request: {what} could not be established within {timeout_ms} ms "
        f"(api.fresh.read.timeout.ms): {err}. Nothing was written; retry the request."
    )


class _Deadline:
    def __init__(self, timeout_ms: int) -> None:
        self.at = time.monotonic() + timeout_ms / 1000

    def remaining_ms(self) -> int:
        return max(int((self.at - time.monotonic()) * 1000), 0)


# --- the config topic -----------------------------------------------------------------------------------------------


def fresh_connector(name: str) -> ConnectorConfigView:
    """Connector ``name`` as Connect's leader knows it once it has read the config topic to its end offset now."""
    settings = get_settings()
    try:
        view = app_resources().config_tail().read_to_end(settings.api_fresh_read_timeout_ms, [name])
    except KafkaWriteError as err:
        what = f"the state of connector {name} in the config topic {settings.config_storage_topic}"
        raise not_established(what, err) from err
    return view.connector(name)


# --- tables plus the records past their watermark -------------------------------------------------------------------


def query_watermarks(query: str, topics: Sequence[str]) -> dict[tuple[str, int], int]:
    """The query's next offsets per ``(topic, partition)`` of ``topics`` (no table or no row: nothing folded)."""
    try:
        rows = app_resources().tables.rows(WATERMARKS, filters=[("query", "=", query)])
    except TableNotFoundError:
        return {}
    return {
        (row["topic"], int(row["partition"])): int(row["next_offset"])
        for row in rows
        if row.get("topic") in topics and row.get("partition") is not None and row.get("next_offset") is not None
    }


def rows_and_records_past_watermark(
    spec: TableSpec,
    query: str,
    topics: Sequence[str],
    filters: Sequence[tuple[str, str, Any]],
    columns: Sequence[str] | None,
    what: str,
) -> tuple[list[dict[str, Any]], list[LogRecord]]:
    """The table's rows matching ``filters`` and every record of ``topics`` past the query's watermark up to the
    topics' end offsets now. A missing table counts as empty, read from the log start."""
    settings = get_settings()
    deadline = _Deadline(settings.api_fresh_read_timeout_ms)
    resources = app_resources()
    marks = query_watermarks(query, topics)  # before the table: the rows are then at least as new
    try:
        rows = resources.tables.rows(spec, filters=list(filters), columns=columns)
    except TableNotFoundError:
        rows, marks = [], {}
    try:
        reader = resources.topic_reader()
        ends: dict[tuple[str, int], int] = {}
        for topic in topics:
            try:
                ends.update(reader.offsets([topic], deadline.remaining_ms()).ends)
            except TopicNotFoundError:
                continue  # a connector's own offsets topic not created yet: no records
        ranges = {partition: (marks.get(partition), end) for partition, end in ends.items()}
        records = reader.read(ranges, deadline.remaining_ms())
    except KafkaWriteError as err:
        raise not_established(what, err) from err
    return rows, records


def topic_records(connector: str, records: Iterable[LogRecord]) -> list[topics_fold.TopicRecord]:
    """The connector's topic-status records among status-topic ``records`` (other keys left out)."""
    parsed = (topics_fold.TopicRecord.from_kafka(r.key, r.value, r.partition, r.offset, r.timestamp) for r in records)
    return [record for record in parsed if record is not None and record.connector == connector]


def fresh_active_topics(connector: str) -> list[str]:
    """The connector's active topics as of the status topic's end offsets now, sorted."""
    topic = get_settings().status_storage_topic
    rows, records = rows_and_records_past_watermark(
        ACTIVE_TOPICS,
        "active_topics",
        [topic],
        [("connector", "=", connector)],
        None,
        f"the active topics of connector {connector} up to the end of the status topic {topic}",
    )
    state, _changes = topics_fold.fold_connector_topics(
        topics_fold.state_from_rows(rows), topic_records(connector, records)
    )
    return sorted(topics_fold.active_topics(state))


def offset_records(connector: str, records: Iterable[LogRecord]) -> dict[str, list[offsets_fold.OffsetRecord]]:
    """The connector's records per offsets topic (keys Connect ignores are left out, as the job rejects them)."""
    grouped: dict[str, list[offsets_fold.OffsetRecord]] = {}
    for r in records:
        try:
            record = offsets_fold.OffsetRecord.from_kafka(r.topic, r.key, r.value, r.partition, r.offset, r.timestamp)
        except RecordFormatError:
            continue
        if record.connector == connector:
            grouped.setdefault(r.topic, []).append(record)
    return grouped


def sink_records(group: str, records: Iterable[LogRecord]) -> list[sinks_fold.OffsetCommitRecord]:
    """The group's offset commits (and their tombstones) among ``__consumer_offsets`` ``records``."""
    parsed = (
        sinks_fold.OffsetCommitRecord.from_kafka(r.key, r.value, r.partition, r.offset, r.timestamp) for r in records
    )
    return [record for record in parsed if record is not None and record.group_id == group]


def fresh_source_rows(connector: str, stores: ConnectorOffsetStores) -> list[dict[str, Any]]:
    """The connector's ``source_offsets`` rows in its offset stores as of those topics' end offsets now."""
    topics = list(stores.topics)
    rows, records = rows_and_records_past_watermark(
        SOURCE_OFFSETS,
        "source_offsets",
        topics,
        [("connector", "=", connector)],
        SOURCE_ROW_COLUMNS,
        f"the source partitions of connector {connector} up to the end of {', '.join(topics)}",
    )
    in_stores = [row for row in rows if row.get("offsets_topic") in topics]
    return offsets_fold.fold_past_rows(in_stores, offset_records(connector, records))
