"""Shared pytest configuration: the fixture plugins live in tests/fixtures/."""

# tests.fixtures.stack: the real KRaft broker and Connect worker (session-scoped), REST client, extra workers.
# tests.fixtures.spark: the one SparkSession of the test session.
# tests.fixtures.sasl_broker: a KRaft broker with SASL/PLAIN and an authorizer, for the ACL tests (module-scoped).
# tests.fixtures.s3: the S3-compatible server (s3proxy) on loopback (session-scoped).
# tests.fixtures.wheel: the wheel built from the checkout and virtualenvs outside it (session-scoped).
# tests.fixtures.spark_cluster: a Spark standalone master and worker on loopback (module-scoped).
# tests.fixtures.xdist: how `make test` shares the test files between its processes (a file at a time, one group).
pytest_plugins = [
    "tests.fixtures.stack",
    "tests.fixtures.spark",
    "tests.fixtures.sasl_broker",
    "tests.fixtures.s3",
    "tests.fixtures.wheel",
    "tests.fixtures.spark_cluster",
    "tests.fixtures.xdist",
]
