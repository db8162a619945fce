"""Reading Connect's internal topics with Spark's Kafka source."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from connect_state.core.settings import Settings

#: Kafka consumer settings of our Spark Kafka sources unless the settings' client properties name them.
#:
#: ``fetch.max.wait.ms``: Kafka's default (500 ms) held every micro-batch's read of a few new records for about half a
#: second per task. A source task's pooled consumer ends its last poll with a fetch request for the offsets past the
#: batch, which the broker parks for ``fetch.max.wait.ms`` when no new record is there; the next batch's task on that
#: consumer waits for that parked request before its own fetch goes out. Measured with ``bench/small_batch.py
#: --stages`` on 2 cores: the read + parse stage of a 3-record batch took 1.16-1.70 s of task time with 500 ms, 0.15-
#: 0.22 s with 10 ms. A catch-up is not slowed (the broker answers at once when records are there), and an idle query
#: does not poll (its consumers sit in Spark's pool between batches).
SOURCE_CONSUMER_DEFAULTS: dict[str, str] = {"fetch.max.wait.ms": "10"}


def kafka_options(settings: Settings) -> dict[str, str]:
    """Kafka client settings as Spark Kafka-source options (``kafka.`` prefix): :data:`SOURCE_CONSUMER_DEFAULTS`,
    then ``bootstrap.servers`` and the settings' client properties (an operator's own value wins)."""
    config = {**SOURCE_CONSUMER_DEFAULTS, **settings.kafka_client_config()}
    return {f"kafka.{key}": value for key, value in config.items()}


def topics_pattern(topics: Sequence[str]) -> str:
    """A Java regex matching exactly ``topics`` (for ``subscribePattern``)."""
    return "^(?:" + "|".join(re.escape(topic) for topic in sorted(set(topics))) + ")$"


def read_internal_topic(
    spark: SparkSession,
    settings: Settings,
    topic: str | Sequence[str],
    max_offsets_per_trigger: int | None = None,
    *,
    as_pattern: bool = False,
) -> DataFrame:
    """A streaming frame over whole compacted internal topics (one or several), from their earliest offsets.

    Columns are the Kafka source's: key and value (binary; value null for tombstones), topic, partition, offset,
    timestamp. ``startingOffsets`` applies to a new checkpoint only; a restarted query resumes from its checkpoint.
    ``read_committed`` matches what Connect's own readers use when exactly-once source support is on.

    ``failOnDataLoss=false``: when records past the checkpoint were deleted (retention, ``deleteRecords``), a topic
    was deleted or recreated, the query goes on from the earliest offset still there instead of failing at every
    restart; the writers record what was lost (:mod:`connect_state.progress.positions`, the ``data_loss`` table).

    ``as_pattern``: subscribe with a pattern matching exactly the topics (``subscribePattern``), so that a topic that
    is deleted leaves the subscription instead of failing the query (``subscribe`` describes every topic it names).
    """
    topics = [topic] if isinstance(topic, str) else list(topic)
    subscription = ("subscribePattern", topics_pattern(topics)) if as_pattern else ("subscribe", ",".join(topics))
    reader = (
        spark.readStream.format("kafka")
        .options(**kafka_options(settings))
        .option(*subscription)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "false")
        .option("kafka.isolation.level", "read_committed")
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return reader.load().select("key", "value", "topic", "partition", "offset", "timestamp")


def read_topic_batch(spark: SparkSession, settings: Settings, topic: str | Sequence[str]) -> DataFrame:
    """A batch read of a whole topic, or of several (earliest to latest): for checks, reconciles, backfills and
    benchmarks."""
    return (
        spark.read.format("kafka")
        .options(**kafka_options(settings))
        .option("subscribe", topic if isinstance(topic, str) else ",".join(topic))
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select("key", "value", "topic", "partition", "offset", "timestamp")
    )
