"""The tables' maintenance by the query that writes them (connect_state/spark/retention.py): the active-topics query
deletes the history rows older than the retention between its batches and keeps the newest per key, and compacts the
tables it writes once they have too many small files, through ``deltalake`` (a local ``delta.root``) and through Spark
(where only Spark can commit)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from connect_state.core.settings import Settings, load_settings
from connect_state.formats.status import topic_status_key
from connect_state.spark.retention import RetentionPass
from connect_state.tables import history
from connect_state.tables.maintenance import file_sizes
from connect_state.tables.schemas import ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY, now_ms
from tests.spark.test_pipelines import KafkaTopics, run_active_topics, table, topic_record

pytestmark = pytest.mark.spark

DAY = 86_400_000
NOW = now_ms()
OLD, OLDER, RECENT = NOW - 45 * DAY, NOW - 50 * DAY, NOW - DAY


def settings_for(tmp_path: Path, retention_ms: int, interval_ms: int = 1, small_files: int = 0) -> Settings:
    return load_settings(
        overrides={
            "delta.root": str(tmp_path / "delta"),
            "checkpoint.root": str(tmp_path / "checkpoints"),
            "history.retention.ms": str(retention_ms),
            "history.retention.check.interval.ms": str(interval_ms),  # 1: a pass after every batch
            "table.compact.small.files": str(small_files),  # 0: never compact
            "table.compact.check.interval.ms": str(interval_ms),
        },
        environ={},
    )


def write_changes(topics: KafkaTopics) -> None:
    """c/t1 added then moved to task 1 (both before the cutoff), c/t2 added then removed (before it), d/t3 added
    (before it), c/t4 added a day ago."""
    topics.batch([topic_record("c", "t1"), topic_record("c", "t2"), topic_record("d", "t3")], ts=OLDER)
    topics.batch(
        [topic_record("c", "t1", task=1), ("connect-status", topic_status_key("t2", "c").encode(), None)], ts=OLD
    )
    topics.batch([topic_record("c", "t4")], ts=RECENT)


def history_rows(spark: SparkSession, settings: Settings) -> list[tuple[str, str, str]]:
    rows = table(spark, settings, ACTIVE_TOPICS_HISTORY.name).collect()
    return sorted((r.connector, r.topic, r.change) for r in rows)


# The newest row of each (connector, topic) before the cutoff stays, unless it is a removal; newer rows all stay.
KEPT = [("c", "t1", "updated"), ("c", "t4", "added"), ("d", "t3", "added")]
EVERY = [
    ("c", "t1", "added"), ("c", "t1", "updated"), ("c", "t2", "added"), ("c", "t2", "removed"), ("c", "t4", "added"),
    ("d", "t3", "added"),
]  # fmt: skip


def test_the_owning_query_deletes_old_history_between_its_batches(spark, tmp_path, caplog):
    settings = settings_for(tmp_path, 35 * DAY)
    topics = KafkaTopics(spark, tmp_path / "kafka")
    write_changes(topics)
    with caplog.at_level(logging.INFO, logger="connect_state.retention"):
        run_active_topics(spark, settings, topics)

    assert history_rows(spark, settings) == KEPT
    assert "active_topics: retention: active_topics_history: deleted" in caplog.text
    rows = table(spark, settings, ACTIVE_TOPICS_HISTORY.name).where("connector = 'c'").collect()
    cutoff = NOW - 35 * DAY
    assert history.topics_as_of([r.asDict() for r in rows], cutoff) == ["t1"]


def test_where_only_spark_commits_spark_deletes_the_same_rows(spark, tmp_path):
    kept_all = settings_for(tmp_path, -1)  # the query keeps every row; the pass below cleans them
    topics = KafkaTopics(spark, tmp_path / "kafka")
    write_changes(topics)
    run_active_topics(spark, kept_all, topics)
    assert history_rows(spark, kept_all) == EVERY

    cleanup = RetentionPass(settings_for(tmp_path, 35 * DAY, DAY), "active_topics", use_deltalake=False)
    cleaned = {c.table: c for c in cleanup.maybe_run(spark)}
    assert history_rows(spark, kept_all) == KEPT
    assert (cleaned["active_topics_history"].deleted, cleaned["active_topics_history"].kept) == (3, 2)
    assert cleanup.maybe_run(spark) == []  # the next pass is an interval away


def data_files(settings: Settings, name: str) -> int:
    return len(file_sizes(DeltaTable(str(settings.delta_root / name))))


def test_the_owning_query_compacts_its_tables_between_its_batches(spark, tmp_path, caplog):
    settings = settings_for(tmp_path, -1, small_files=1)  # more than one small file: compacted at the next batch
    topics = KafkaTopics(spark, tmp_path / "kafka")
    write_changes(topics)
    with caplog.at_level(logging.INFO, logger="connect_state.retention"):
        run_active_topics(spark, settings, topics)

    assert "active_topics: active_topics_history: compacted" in caplog.text
    assert history_rows(spark, settings) == EVERY
    assert data_files(settings, ACTIVE_TOPICS_HISTORY.name) <= 2  # three batches: compacted after the second


def test_where_only_spark_commits_spark_compacts(spark, tmp_path):
    never = settings_for(tmp_path, -1)
    topics = KafkaTopics(spark, tmp_path / "kafka")
    write_changes(topics)
    run_active_topics(spark, never, topics)
    files = data_files(never, ACTIVE_TOPICS_HISTORY.name)
    assert files >= 3  # one a batch

    maintenance = RetentionPass(
        settings_for(tmp_path, -1, DAY, small_files=1), "active_topics", use_deltalake=False,
        tables=(ACTIVE_TOPICS, ACTIVE_TOPICS_HISTORY),
    )  # fmt: skip
    done = maintenance.maybe_compact(spark)
    assert (done["active_topics_history"].files_before, done["active_topics_history"].files_after) == (files, 1)
    assert history_rows(spark, never) == EVERY
    assert maintenance.maybe_compact(spark) == {}  # the next check is an interval away
