"""A Connect cluster on another Kafka (issue 37, the two-Kafka case): a broker and a worker of this test's own beside
the session's, both followed by one continuous jobs run in one driver and answered by one API. Connect is the oracle
for what each cluster shows. Then the second Kafka goes away: the API says so for that cluster alone and refuses its
writes with Kafka's reason, while the default cluster's new connector is still folded and answered; it comes back:
that cluster's jobs catch up by themselves and its new connector is answered as its worker shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from flask.testing import FlaskClient
from pyspark.sql import SparkSession

from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import file_source_config
from connect_state.dev.jvm_service import free_port, free_ports
from connect_state.dev.local_stack import ConnectWorker, KafkaBroker
from connect_state.spark.all_jobs import every_job, select_jobs
from connect_state.spark.streaming import run_continuous
from tests.fixtures.stack import WORKER_START_TIMEOUT
from tests.integration.helpers import api_client, job_settings, running, unique, wait_state

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]

T = TypeVar("T")
WAIT_S = 300.0  # a query that failed while its Kafka was away restarts after its backoff (5 s, 10 s, 20 s, ...)


@pytest.fixture
def eu_broker(stack_settings: Settings, tmp_path: Path) -> Iterator[KafkaBroker]:
    broker_port, controller_port = free_ports(2)
    broker = KafkaBroker(stack_settings, port=broker_port, controller_port=controller_port, data_dir=tmp_path / "eu")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def eu_worker(stack_settings: Settings, eu_broker: KafkaBroker, tmp_path: Path) -> Iterator[ConnectWorker]:
    """A Connect cluster on the second Kafka, its internal topics named as the default cluster's (another Kafka)."""
    worker = ConnectWorker(
        stack_settings,
        name="connect-eu",
        port=free_port(),
        bootstrap_servers=eu_broker.bootstrap_servers,
        group_id="connect-eu",
        data_dir=tmp_path / "eu-worker",
        start_timeout=WORKER_START_TIMEOUT,
    )
    with worker:
        yield worker


def wait_for(predicate: Callable[[], T], timeout_s: float, what: str) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s:.0f} s waiting for {what} (last: {value!r})"
        time.sleep(1)


def status(api: FlaskClient, path: str) -> tuple[int, object]:
    response = api.get(path)
    return response.status_code, response.get_json()


def answers_as(api: FlaskClient, ours: str, worker: ConnectRestClient, theirs: str, what: str) -> None:
    """Until our answer at ``ours`` is the worker's at ``theirs`` (the jobs fold within a few triggers)."""
    wait_for(lambda: status(api, ours) == worker.get(theirs), WAIT_S, what)


def test_a_cluster_on_another_kafka_is_followed_and_goes_away_and_comes_back_alone(
    spark: SparkSession,
    stack_settings: Settings,
    connect: ConnectRestClient,
    created: list[str],
    eu_broker: KafkaBroker,
    eu_worker: ConnectWorker,
    tmp_path: Path,
) -> None:
    eu = eu_worker.client()
    home, away, later, back = (unique(prefix) for prefix in ("home", "eu", "home-later", "eu-back"))
    (tmp_path / "in.txt").touch()
    connect.create_connector(home, file_source_config(home, tmp_path / "in.txt", home))
    eu.create_connector(away, file_source_config(away, tmp_path / "in.txt", away))
    created.extend([home, later])
    wait_state(connect, home, "RUNNING", 1, WAIT_S)
    wait_state(eu, away, "RUNNING", 1, WAIT_S)

    settings = job_settings(stack_settings, tmp_path).with_overrides(
        **{
            "clusters": "eu",
            "clusters.eu.bootstrap.servers": eu_broker.bootstrap_servers,
            "clusters.eu.connect.group.id": "connect-eu",
            "clusters.eu.connect.rest.url": eu.base_url,
            "trigger.interval": "1 seconds",
            "api.fresh.read.timeout.ms": "5000",
            "api.kafka.write.timeout.ms": "5000",
            "api.lag.timeout.ms": "5000",
        }
    )
    api = api_client(settings)
    jobs = select_jobs(every_job(), "connector_states")
    with running("connect-state-jobs", lambda stop: run_continuous(jobs, spark, settings, stop=stop), 240):
        # Each cluster answered as its own worker, the same topic names on two Kafka clusters kept apart.
        answers_as(api, f"/clusters/eu/connectors/{away}/status", eu, f"/connectors/{away}/status", "eu's tables")
        answers_as(api, f"/connectors/{home}/status", connect, f"/connectors/{home}/status", "the default's tables")
        assert status(api, f"/clusters/eu/connectors/{home}/status") == eu.get(f"/connectors/{home}/status")  # 404
        assert status(api, f"/connectors/{away}/status") == connect.get(f"/connectors/{away}/status")  # 404

        # The second Kafka goes away: that cluster alone is reported, its writes refused with Kafka's reason.
        eu_broker.stop()

        def kafka() -> dict[str, dict[str, object]]:
            return {entry["id"]: entry["health"]["kafka"] for entry in api.get("/clusters").get_json()}

        # (a read of the default's offsets may time out on a loaded machine: it is asked again)
        seen = wait_for(lambda: (found := kafka())[settings.connect_group_id]["reachable"] and found, 60, "health")
        assert seen["eu"]["reachable"] is False and "127.0.0.1" in str(seen["eu"]["message"]), seen
        refused = api.put(f"/clusters/eu/connectors/{away}/pause")
        assert 500 <= refused.status_code < 600, refused.get_json()
        assert "Kafka" in refused.get_json()["message"], refused.get_json()
        # ... while the default cluster goes on: a connector created now is folded and answered as Connect shows it.
        connect.create_connector(later, file_source_config(later, tmp_path / "in.txt", later))
        wait_state(connect, later, "RUNNING", 1, WAIT_S)
        answers_as(api, f"/connectors/{later}/status", connect, f"/connectors/{later}/status", "the default, eu away")
        assert api.get(f"/connectors/{home}/status").status_code == 200

        # It comes back: its jobs catch up by themselves, and its new connector is answered as its worker shows it.
        eu_broker.start()
        wait_for(lambda: eu.get("/connectors")[0] == 200, WAIT_S, "the eu worker back")
        eu.create_connector(back, file_source_config(back, tmp_path / "in.txt", back))
        wait_state(eu, back, "RUNNING", 1, WAIT_S)
        answers_as(api, f"/clusters/eu/connectors/{back}/status", eu, f"/connectors/{back}/status", "eu caught up")
