"""The offsets job's check that a connector's own ``offsets.storage.topic`` holds offsets records (issue 13 §5).

:func:`offsets_records_topics` samples the newest records of each topic the job would subscribe to
(:func:`connect_state.security.guards.sampled_offsets_topics`, read with
:class:`connect_state.kafka.log.TopicLogReader`) and leaves out a topic whose sampled records all have keys that are not
Connect offsets keys: the job never reads it, so none of its bytes land in a table. Each refusal is one row of
``rejected_records`` (``partition`` and ``offset`` -1, ``key`` and ``value`` null, ``reason`` the refusal), inserted
once per topic, so ``GET /rejected-records?topic=<t>`` shows it. A topic once accepted is not sampled again by this
process (it is in the query's checkpoint from then on); a refused one is sampled again after ``RECHECK_SECONDS``; one
that could not be sampled (Kafka away, a missing topic) is read as configured and sampled again at the next look.
What is known is kept per cluster (issue 37: one driver follows several, a topic name may be another on each Kafka).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from pyspark.sql import SparkSession

from connect_state.core.settings import Settings
from connect_state.kafka.log import TopicLogReader
from connect_state.security.guards import sampled_offsets_topics
from connect_state.spark.delta_io import ensure_table, insert_new_once, retry_on_conflict, schema_of
from connect_state.tables.schemas import REJECTED_RECORDS

__all__ = ["offsets_records_topics"]

log = logging.getLogger(__name__)

CLIENT_ID = "connect-state-offsets-guard"
RECHECK_SECONDS = 300.0
_accepted: dict[str, set[str]] = {}  # cluster (its tables' root) -> topics accepted
_refused: dict[str, dict[str, float]] = {}  # cluster -> topic -> when it was last sampled and refused (monotonic s)


def offsets_records_topics(spark: SparkSession, settings: Settings, topics: set[str]) -> set[str]:
    """``topics`` without those whose records are not offsets records (each recorded in ``rejected_records``)."""
    now = time.monotonic()
    cluster = settings.delta_root.uri
    accepted, refused_at = _accepted.setdefault(cluster, set()), _refused.setdefault(cluster, {})
    recent = {topic for topic, at in refused_at.items() if now - at < RECHECK_SECONDS}
    unchecked = topics - accepted - recent - {settings.offset_storage_topic}
    if not unchecked:
        return topics - recent
    reader = TopicLogReader(settings, client_id=CLIENT_ID)
    try:
        kept, refused, unsampled = sampled_offsets_topics(
            sorted(unchecked), settings.offset_storage_topic, reader, settings.api_fresh_read_timeout_ms
        )
    finally:
        reader.close()
    accepted.update(kept - unsampled)  # one that could not be sampled is looked at again next time
    refused_at.update(dict.fromkeys(refused, now))
    if refused:
        try:
            record_refusals(spark, settings, refused)
        except Exception as err:  # the refusal stands; only its row is missing (logged by the guard too)
            log.error("Cannot record refused offsets topics %s in rejected_records: %s", sorted(refused), err)
    return topics - set(refused) - recent


def record_refusals(spark: SparkSession, settings: Settings, refused: dict[str, str]) -> None:
    """One ``rejected_records`` row per refused topic (not inserted again while it is there)."""
    path = ensure_table(spark, settings.delta_root, REJECTED_RECORDS)
    now = time.time()
    seen_at = datetime.fromtimestamp(now, UTC)
    rows = [(topic, -1, -1, None, None, reason, seen_at) for topic, reason in sorted(refused.items())]
    frame = spark.createDataFrame(rows, schema_of(REJECTED_RECORDS))
    version = int(now * 1000)
    retry_on_conflict(
        lambda: insert_new_once(frame, path, REJECTED_RECORDS.key, CLIENT_ID, version),
        REJECTED_RECORDS.name,
    )
