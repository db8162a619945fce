"""Helpers shared by the integration tests: per-test settings, job runs, and our API's answers."""

from __future__ import annotations

import uuid
from pathlib import Path

from flask.testing import FlaskClient
from kafka.admin import KafkaAdminClient, NewTopic
from pyspark.sql import SparkSession

from connect_state.api import create_app
from connect_state.jobs import active_topics
from connect_state.settings import Settings
from tests.fixtures.spark import await_query


def unique(prefix: str) -> str:
    """A name no other test of the session uses (they share one Connect worker)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def job_settings(base: Settings, tmp_path: Path, **overrides: str) -> Settings:
    """The session's cluster settings with this test's own Delta and checkpoint roots."""
    return base.with_overrides(
        **{"delta.root": str(tmp_path / "delta"), "checkpoint.root": str(tmp_path / "checkpoints")},
        **overrides,
    )


def run_active_topics(spark: SparkSession, settings: Settings, timeout_s: float = 180.0) -> None:
    """One catch-up run of the active-topics job (``Trigger.AvailableNow``), bounded in time."""
    await_query(active_topics.start(spark, settings, available_now=True), timeout_s)


def api_client(settings: Settings) -> FlaskClient:
    return create_app(settings).test_client()


def our_topics(client: FlaskClient, name: str) -> set[str]:
    response = client.get(f"/connectors/{name}/topics")
    assert response.status_code == 200, response.get_data(as_text=True)
    return set(response.get_json()[name]["topics"])


def create_topic(settings: Settings, topic: str, partitions: int, *, compacted: bool = False) -> None:
    """Create ``topic`` with ``partitions`` partitions (replication 1) on the session's broker."""
    configs = {"cleanup.policy": "compact"} if compacted else {}
    admin = KafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
    finally:
        admin.close()
