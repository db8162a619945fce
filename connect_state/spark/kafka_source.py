"""Reading Connect's internal topics with Spark's Kafka source."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from connect_state.settings import Settings


def kafka_options(settings: Settings) -> dict[str, str]:
    """Kafka client settings as Spark Kafka-source options (``kafka.`` prefix)."""
    return {f"kafka.{key}": value for key, value in settings.kafka_client_config().items()}


def read_internal_topic(
    spark: SparkSession,
    settings: Settings,
    topic: str | Sequence[str],
    max_offsets_per_trigger: int | None = None,
) -> DataFrame:
    """A streaming frame over whole compacted internal topics (one or several), from their earliest offsets.

    Columns are the Kafka source's: key and value (binary; value null for tombstones), topic, partition, offset,
    timestamp. ``startingOffsets`` applies to a new checkpoint only; a restarted query resumes from its checkpoint.
    ``read_committed`` matches what Connect's own readers use when exactly-once source support is on.
    """
    reader = (
        spark.readStream.format("kafka")
        .options(**kafka_options(settings))
        .option("subscribe", topic if isinstance(topic, str) else ",".join(topic))
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
    )
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return reader.load().select("key", "value", "topic", "partition", "offset", "timestamp")


def read_topic_batch(spark: SparkSession, settings: Settings, topic: str) -> DataFrame:
    """A batch read of a whole topic (earliest to latest): for checks, backfills and benchmarks."""
    return (
        spark.read.format("kafka")
        .options(**kafka_options(settings))
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select("key", "value", "topic", "partition", "offset", "timestamp")
    )
