"""Auto-restart against the real worker (issue 35 items 2 and 4): the connector-state job folds the status topic into
``connectors`` while the restarts job (``connect-state-restarts``) runs continuously, as in production.

* a FileStreamSink whose task FAILED because it cannot write its file (its parent is a regular file), then the cause
  is fixed: the job restarts it through the config topic's restart request and Connect runs it again: RUNNING, one
  restart row, ``recovered``;
* a sink that keeps failing is restarted at once, then again after the backoff ((n²+n) x base), each ``failed-again``,
  and no more after ``restart.auto.max.attempts``; meanwhile a paused failing sink and one that is not opted in are
  never restarted, and the paused one is restarted once resumed.

Timings (FAILED → request → RUNNING) are printed for bench/RESULTS.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError
from flask.testing import FlaskClient
from pyspark.sql import SparkSession

from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import file_sink_config
from connect_state.restarts.reconciler import health_from_row
from connect_state.spark import connector_states
from connect_state.spark.restarts import RestartsJob
from connect_state.tables.schemas import CONNECTORS, WATERMARKS
from connect_state.tables.small_writes import read
from tests.integration.helpers import api_client, continuous_job, create_topic, job_settings, unique

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PREFIX = "autorestart"
BASE_MS = 3000  # backoff base: restart at once, then 2 x 3 s after it
WAIT_S = 180.0  # generous: a loaded two-core machine can take over a minute for a micro-batch


@pytest.fixture(scope="module")
def settings(stack_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return job_settings(
        stack_settings,
        tmp_path_factory.mktemp("autorestart"),
        **{
            "trigger.interval": "1 second",
            "restart.auto.connectors": f"{PREFIX}-*",
            "restart.auto.backoff.base.ms": str(BASE_MS),
            "restart.auto.backoff.max.ms": str(10 * BASE_MS),
            "restart.auto.max.attempts": "2",
            "restart.auto.reset.after.ms": "600000",
        },
    )


@pytest.fixture(scope="module")
def states_job(spark: SparkSession, settings: Settings) -> Iterator[None]:
    """The connector-state job, continuously, for the module: the ``connectors`` table the restarts job reads."""
    with continuous_job(connector_states.JOB, spark, settings):
        wait_until(lambda: caught_up(settings), "the connector-state job's first batch")
        yield


def wait_until(predicate: Callable[[], object], what: str, seen: Callable[[], object] = lambda: None) -> Any:
    """``predicate()`` once truthy; fails after :data:`WAIT_S` naming ``what`` and what ``seen()`` says then."""
    deadline = time.monotonic() + WAIT_S
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out after {WAIT_S:g} s waiting for {what}; seen: {seen()}"
        time.sleep(0.5)
    return value


def caught_up(settings: Settings) -> bool:
    """The connector-state query has committed a batch (its ``watermarks`` rows)."""
    try:
        rows = read(str(settings.table_path(WATERMARKS.name)), ["query"]).to_pylist()
    except DeltaTableNotFoundError:
        return False
    return any(row["query"] == "connector_states" for row in rows)


def failing_sink(settings: Settings, connect: ConnectRestClient, created: list[str], name: str, blocker: Path) -> int:
    """A FileStreamSink writing under ``blocker``, a regular file: its task FAILS at start. Waits for FAILED on
    Connect's REST; returns when the connector was created (epoch ms)."""
    blocker.write_text("a file, not a directory\n", encoding="utf-8")
    topic = f"{name}-in"
    create_topic(settings, topic, 1)
    created.append(name)
    at = int(time.time() * 1000)
    connect.create_connector(name, file_sink_config(name, blocker / "out.txt", [topic]))
    connect.wait_for(lambda: task_state(connect, name) == "FAILED", WAIT_S, description=f"{name} task FAILED")
    return at


def task_state(connect: ConnectRestClient, name: str) -> str | None:
    status = connect.connector_status(name)
    tasks = status.get("tasks", []) if status else []
    return tasks[0].get("state") if tasks else None


def table_health(settings: Settings, name: str) -> Any:
    """The connector as the ``connectors`` table has it now (None before the job folded it)."""
    try:
        rows = read(str(settings.table_path(CONNECTORS.name)), CONNECTORS.column_names).to_pylist()
    except DeltaTableNotFoundError:
        return None
    found = [health_from_row(row) for row in rows if row["name"] == name]
    return found[0] if found else None


def restarts(api: FlaskClient, name: str) -> list[dict[str, Any]]:
    response = api.get(f"/connectors/{name}/restarts")
    assert response.status_code == 200, response.get_data(as_text=True)
    return list(reversed(response.get_json()["restarts"]))  # oldest first


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def test_a_failed_sink_fixed_is_restarted_once_and_recovers(
    spark: SparkSession,
    settings: Settings,
    states_job: None,
    connect: ConnectRestClient,
    created: list[str],
    tmp_path: Path,
) -> None:
    name = unique(PREFIX)
    blocker = tmp_path / "blocker"
    failing_sink(settings, connect, created, name, blocker)
    connect.wait_for(lambda: (h := table_health(settings, name)) is not None and h.failed, WAIT_S,
                     description=f"{name} FAILED in the connectors table")  # fmt: skip
    blocker.unlink()  # the cause fixed: the parent is a directory now
    blocker.mkdir()
    api = api_client(settings)
    assert restarts(api, name) == []
    started = int(time.time() * 1000)
    with continuous_job(RestartsJob(), spark, settings):
        connect.wait_until_running(name, WAIT_S)
        rows = wait_until(
            lambda: (r := restarts(api, name)) and r[-1]["outcome"] == "recovered" and r,
            f"{name}'s restart recorded as recovered",
            lambda: f"{restarts(api, name)}; the table: {table_health(settings, name)}",
        )
    assert len(rows) == 1, rows
    (row,) = rows
    assert (row["attempt"], row["reason"]) == (1, "task 0 FAILED")
    assert "out.txt" in (row["trace"] or ""), row["trace"]
    assert connect.is_running(name)
    assert (tmp_path / "blocker" / "out.txt").exists()  # the restarted task opened its file
    requested, recovered, failed = ms(row["requested_at"]), ms(row["outcome_at"]), ms(row["failed_since"])
    print(
        f"\nTIMING recovered: job start -> restart request {requested - started} ms; request -> RUNNING "
        f"{recovered - requested} ms (FAILED was {requested - failed} ms before the request, the fix in between)"
    )


def test_backoff_maximum_and_never_while_paused_or_not_opted_in(
    spark: SparkSession,
    settings: Settings,
    states_job: None,
    connect: ConnectRestClient,
    created: list[str],
    tmp_path: Path,
) -> None:
    keeps_failing, paused, not_opted = unique(PREFIX), unique(PREFIX), unique("manual")
    for name in (paused, not_opted):
        failing_sink(settings, connect, created, name, tmp_path / f"{name}-blocker")
    assert connect.put(connect.connector_path(paused, "pause"))[0] == 202
    connect.wait_for(
        lambda: (p := table_health(settings, paused)) is not None and p.target_state == "PAUSED" and p.failed
        and (n := table_health(settings, not_opted)) is not None and n.failed, WAIT_S,
        description="the paused and the not opted-in sinks FAILED in the connectors table",
    )  # fmt: skip
    api = api_client(settings)
    with continuous_job(RestartsJob(), spark, settings):
        created_at = failing_sink(settings, connect, created, keeps_failing, tmp_path / "keeps-failing-blocker")
        rows = connect.wait_for(
            lambda: (r := restarts(api, keeps_failing)) and len(r) == 2 and r[-1]["outcome"] != "pending" and r,
            WAIT_S,
            description=f"two restarts of {keeps_failing}, both judged",
        )
        time.sleep(3 * BASE_MS / 1000)  # a third restart would be due 6 x base after the second: none comes
        assert restarts(api, keeps_failing) == rows
        assert restarts(api, paused) == [] and restarts(api, not_opted) == []
        assert task_state(connect, paused) == "FAILED" and task_state(connect, not_opted) == "FAILED"
        connect.resume_connector(paused)  # the task stays FAILED: the job restarts it now
        resumed = connect.wait_for(lambda: restarts(api, paused), WAIT_S, description=f"{paused} restarted")
    assert [(r["attempt"], r["outcome"]) for r in rows] == [(1, "failed-again"), (2, "failed-again")], rows
    first, second = ms(rows[0]["requested_at"]), ms(rows[1]["requested_at"])
    assert second - first >= 2 * BASE_MS, rows  # (1² + 1) x base after the first
    assert resumed[0]["attempt"] == 1 and restarts(api, not_opted) == []
    failed, again = ms(rows[0]["failed_since"]), ms(rows[0]["outcome_at"])
    print(
        f"\nTIMING keeps failing: created -> FAILED {failed - created_at} ms; FAILED -> restart request "
        f"{first - failed} ms (job running, trigger 1 s); request -> FAILED again {again - first} ms; second "
        f"request {second - first} ms after the first"
    )
