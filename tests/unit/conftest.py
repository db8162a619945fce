"""Fixtures shared by the unit tests: settings on a temporary ``delta.root``, the in-memory Kafka topics, the
recording writer (which appends to them), the API's clients.

Modules whose clients need tables or fakes of their own define ``client`` on top of ``make_client``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from connect_state.api import create_app
from connect_state.api.resources import TableSource
from connect_state.core.settings import Settings, load_settings
from tests.unit.fakes import InMemoryTopics, RecordingWriter

MakeClient = Callable[..., FlaskClient]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Repository defaults (environment ignored) with delta.root under tmp_path."""
    return load_settings(overrides={"delta.root": str(tmp_path / "delta")}, environ={})


@pytest.fixture
def kafka_log(settings: Settings) -> InMemoryTopics:
    """The app's Kafka topics, in memory: the config topic (1 partition), the status topic (5), the offsets topic
    (25, Connect's defaults), any other topic with 5 partitions once named."""
    return InMemoryTopics(
        {settings.config_storage_topic: 1, settings.status_storage_topic: 5, settings.offset_storage_topic: 25}
    )


@pytest.fixture
def writer(kafka_log: InMemoryTopics) -> RecordingWriter:
    """The app's Kafka writer: records every send and appends the records to ``kafka_log``."""
    return RecordingWriter(topics=kafka_log)


@pytest.fixture
def make_client(settings: Settings, writer: RecordingWriter, kafka_log: InMemoryTopics) -> MakeClient:
    """``make_client(writer=None, tables=None, overrides=None, topics=None)``: a test client of an app on ``settings``.

    ``writer`` replaces the ``writer`` fixture (e.g. a failing one), ``tables`` the app's Delta table reader (e.g.
    :class:`tests.unit.fakes.InMemoryTables`), ``overrides`` are settings (``{"topic.tracking.enable": "false"}``),
    ``topics`` the ``kafka_log`` fixture (the app's Kafka readers).
    """
    default_writer, default_topics = writer, kafka_log

    def make(
        *,
        writer: RecordingWriter | None = None,
        tables: TableSource | None = None,
        overrides: Mapping[str, str] | None = None,
        topics: InMemoryTopics | None = None,
    ) -> FlaskClient:
        app_settings = settings.with_overrides(**overrides) if overrides else settings
        app = create_app(
            app_settings,
            table_reader=tables,
            writer=writer if writer is not None else default_writer,
            topics=topics if topics is not None else default_topics,
        )
        app.testing = True
        return app.test_client()

    return make


@pytest.fixture
def client(make_client: MakeClient) -> FlaskClient:
    """A test client of an app on ``settings`` writing to the ``writer`` fixture."""
    return make_client()
