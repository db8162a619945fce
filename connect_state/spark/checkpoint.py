"""Reading a streaming query's checkpoint without a Spark job: the entries of its offsets log.

A checkpoint's ``offsets/<batch id>`` files are small JSON-lines files Spark writes before it runs each micro-batch
(:mod:`connect_state.progress.positions` reads them). Every read of the checkpoint goes through :func:`read_offset_log`
and :func:`offset_log_batches`, through Hadoop's filesystem in the Spark JVM (:mod:`connect_state.spark.storage`), so a
checkpoint in object storage (``s3a://``, ``abfss://``, ...) reads like a local one.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from connect_state.progress.positions import Positions, parse_offset_log
from connect_state.spark import storage
from connect_state.spark.storage import Where


def offset_log_batches(spark: SparkSession, checkpoint: Where) -> list[int]:
    """The batch ids of the offsets log's entries, ascending (none for a new checkpoint)."""
    return sorted(int(name) for name in storage.list_names(spark, f"{checkpoint}/offsets") if name.isdigit())


def read_offset_log(spark: SparkSession, checkpoint: Where, batch_id: int) -> str | None:
    """The text of the offsets log's entry of ``batch_id``; None when there is none."""
    return storage.read_text(spark, f"{checkpoint}/offsets/{batch_id}")


def planned_positions(spark: SparkSession, checkpoint: Where, batch_id: int) -> Positions | None:
    """The Kafka end offsets Spark planned for ``batch_id`` (the start of ``batch_id + 1``); None without an entry."""
    if batch_id < 0:
        return None
    text = read_offset_log(spark, checkpoint, batch_id)
    return parse_offset_log(text) if text is not None else None


def latest_positions(spark: SparkSession, checkpoint: Where) -> Positions | None:
    """The positions of the newest entry of the offsets log; None for a new checkpoint."""
    batches = offset_log_batches(spark, checkpoint)
    return planned_positions(spark, checkpoint, batches[-1]) if batches else None


def discard_interrupted_first_entry(spark: SparkSession, checkpoint: Where) -> list[str]:
    """Remove what a process killed while writing its query's first offsets-log or commit-log entry left behind.

    Spark writes each entry to a hidden temporary file (``.0.<uuid>.tmp``, with Hadoop's ``..0.<uuid>.tmp.crc``) and
    renames it. A kill -9 before the rename leaves the temporary file; with no entry yet, Spark takes the checkpoint
    for a new one, and refuses it for ever because its ``offsets`` directory is not empty
    (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``). Only when neither log has an entry are such hidden files removed
    (Spark never reads them); returns their paths.
    """
    logs = [f"{checkpoint}/offsets", f"{checkpoint}/commits"]
    names = {log_dir: storage.list_names(spark, log_dir) for log_dir in logs}
    if any(name.isdigit() for entries in names.values() for name in entries):
        return []
    removed = [f"{log_dir}/{name}" for log_dir, entries in names.items() for name in entries if name.startswith(".")]
    for path in removed:
        storage.delete(spark, path)
    return removed
