"""The Spark Kafka source's options (no Spark session needed: the options are plain strings)."""

from __future__ import annotations

import dataclasses

import pytest

from connect_state.core.settings import Settings
from connect_state.spark.kafka_source import SOURCE_CONSUMER_DEFAULTS, kafka_options, topics_pattern


def test_source_consumer_defaults_are_set(settings: Settings) -> None:
    options = kafka_options(settings)
    assert options["kafka.fetch.max.wait.ms"] == SOURCE_CONSUMER_DEFAULTS["fetch.max.wait.ms"]
    assert options["kafka.bootstrap.servers"] == settings.bootstrap_servers


@pytest.mark.parametrize("key", ["fetch.max.wait.ms", "bootstrap.servers"])
def test_operator_client_properties_win(settings: Settings, key: str) -> None:
    configured = dataclasses.replace(settings, kafka_client_properties={key: "4242"})
    assert kafka_options(configured)[f"kafka.{key}"] == "4242"


def test_topics_pattern_matches_exactly_the_topics() -> None:
    assert topics_pattern(["b.x", "a"]) == r"^(?:a|b\.x)$"
