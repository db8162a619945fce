"""KIP-875 offsets, the job: the source-offsets and sink-offsets queries side by side, each with its own checkpoint.

* ``source_offsets`` (:mod:`connect_state.spark.source_offsets`): the worker's and the connectors' own offsets topics
  → ``source_offsets`` / ``source_offsets_history``; a continuous query restarts itself when a new connector offsets
  topic is configured (:class:`~connect_state.spark.source_offsets.SourceOffsetsTask`);
* ``sink_offsets`` (:mod:`connect_state.spark.sink_offsets`): ``__consumer_offsets`` → ``sink_offsets`` /
  ``sink_offsets_history``.

The console script is ``connect-state-offsets`` (jobs/offsets.py).
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from connect_state.core.settings import Settings
from connect_state.spark import sink_offsets, source_offsets
from connect_state.spark.streaming import Run

JOB_NAME = "offsets"


class OffsetsJob:
    """Both offsets queries (:class:`~connect_state.spark.streaming.Job`)."""

    name = JOB_NAME

    def check(self, settings: Settings) -> None:
        return None

    def start(self, spark: SparkSession, settings: Settings, available_now: bool, max_offsets: int | None) -> Run:
        source = source_offsets.SourceOffsetsTask(spark, settings, available_now, max_offsets)
        return Run([source, *sink_offsets.JOB.start(spark, settings, available_now, max_offsets).tasks])


JOB = OffsetsJob()
