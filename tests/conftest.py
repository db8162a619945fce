"""Shared pytest configuration: the fixture plugins live in tests/fixtures/."""

# tests.fixtures.stack: the real KRaft broker and Connect worker (session-scoped), REST client, extra workers.
# tests.fixtures.spark: the one SparkSession of the test session.
pytest_plugins = ["tests.fixtures.stack", "tests.fixtures.spark"]
