"""Fixtures shared by the integration tests (the stack's fixtures are in tests/conftest.py).

A module that uses ``app`` or ``api`` defines the ``settings`` fixture they are built from."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from connect_state.api import close_app, create_app
from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from tests.integration.helpers import close_api_clients


@pytest.fixture(autouse=True)
def _close_api_clients() -> Iterator[None]:
    """Apps made by ``helpers.api_client`` are closed after each test: a follower thread left running would keep
    polling Kafka (and logging) for the rest of the test process."""
    yield
    close_api_clients()


@pytest.fixture
def created(connect: ConnectRestClient) -> Iterator[list[str]]:
    """Names of the connectors a test creates: deleted after it, passed or failed, so that no connector of a failed
    test lingers on the shared worker (heartbeats and cleanup look at every connector of the worker)."""
    names: list[str] = []
    yield names
    for name in names:
        connect.delete_connector(name, missing_ok=True)


@pytest.fixture
def app(settings: Settings) -> Iterator[Flask]:
    """Our API on the session's broker, with its own Kafka writer and readers (closed at the end)."""
    application = create_app(settings)
    try:
        yield application
    finally:
        close_app(application)


@pytest.fixture
def api(app: Flask) -> FlaskClient:
    return app.test_client()
