"""Verdicts against the real worker (issue 35): every job running continuously beside one Connect worker, thresholds
in seconds, and for each case the verdict our API must give and how long after its evidence it came (printed; run
with ``-s`` to see the timings, which bench/RESULTS.md keeps).

* a sink whose file cannot be opened (its parent is a regular file): ``failed``;
* a sink writing into a named pipe whose reader reads a little and then stops, so that ``put()`` blocks once the pipe
  is full while the task stays RUNNING: ``stalled``;
* a source reading a named pipe nobody writes (RUNNING, nothing moves, no provider to tell): ``quiet``;
* a source that read its file and has nothing new, with a KIP-910 provider (the demo's): ``idle``;
* a sink restarted (``includeTasks=true``) more often than ``verdict.flapping.count``: ``flapping``;
* a sink with ``errors.tolerance=all`` and a dead-letter queue fed records its converter rejects: ``dropping``;
* a two-task sink one of whose tasks ran on a worker that left: ``degraded``, whether the leaving worker's UNASSIGNED
  status write landed (``unassigned_tasks``) or not (the task still RUNNING on a worker no longer in the Connect
  group: ``lost_tasks``, from DescribeGroups of ``connect.group.id``).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from connect_state.connect.filestream import FILE_SOURCE_CLASS
from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.spark.all_jobs import every_job, select_jobs
from connect_state.spark.streaming import run_continuous
from tests.integration.helpers import (
    api_client,
    connector_state,
    create_topic,
    job_settings,
    produce_values,
    running,
    source_position,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

STALL_MS = 8000
WAIT_S = 120.0
JSON = "org.apache.kafka.connect.json.JsonConverter"
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def settings(stack_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    base = tmp_path_factory.mktemp("verdicts")
    return job_settings(
        stack_settings,
        base,
        **{
            "trigger.interval": "1 second",
            "verdict.trigger.interval": "1 second",
            "verdict.sink.stall.ms": str(STALL_MS),
            "verdict.source.stall.ms": str(STALL_MS),
            "verdict.flapping.count": "3",
            "verdict.flapping.window.ms": "120000",
            "verdict.dropping.records": "0",
            "verdict.dropping.window.ms": "60000",
            "heartbeat.interval.ms": "600000",  # the idle source sets its own 2 s
            "heartbeat.records.topic": unique("verdict-heartbeats"),
            "heartbeat.topics.create": "true",
            "heartbeat.providers": f"{FILE_SOURCE_CLASS}=connect_state.dev.demo_heartbeats:provider",
        },
    )


@pytest.fixture(scope="module")
def jobs(spark: Any, settings: Settings) -> Iterator[None]:
    """The jobs whose tables the verdicts read, and the watch job, running continuously for the module; the tests
    start once the API answers ``GET /verdicts`` (the connector-states job has created its table)."""
    needed = select_jobs(every_job(hooks={}), "active_topics,connector_states,offsets,heartbeats,watch")
    with running("connect-state-jobs", lambda stop: run_continuous(needed, spark, settings, stop=stop), 240):
        client = api_client(settings)
        wait(lambda: client.get("/verdicts").status_code == 200, "connectors table", timeout_s=300)
        yield


@pytest.fixture(scope="module", autouse=True)
def timings() -> Iterator[None]:
    yield
    print("\nverdict timings: " + ", ".join(f"{case}: {s:.1f} s" for case, s in TIMINGS.items()))


@pytest.fixture
def api(jobs: None, settings: Settings) -> Any:
    return api_client(settings)


def verdict(api: Any, name: str) -> dict[str, Any]:
    response = api.get(f"/connectors/{name}/verdict")
    return response.get_json() if response.status_code == 200 else {"verdict": None, "status": response.status_code}


def wait(predicate: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.25)
    raise AssertionError(f"no {what} within {timeout_s} s")


def wait_verdict(
    api: Any,
    name: str,
    expected: str,
    evidence_at: float,
    case: str,
    timeout_s: float = WAIT_S,
    until: Callable[[dict[str, Any]], object] = lambda found: True,
    **threshold: float,
) -> dict:
    """Until our API gives ``expected`` (and ``until`` holds of the answer); records how long after ``evidence_at``
    (monotonic) it came."""
    last: dict[str, Any] = {}

    def arrived() -> dict[str, Any] | None:
        last.clear()
        last.update(verdict(api, name))
        return dict(last) if last.get("verdict") == expected and until(last) else None

    try:
        found = wait(arrived, f"{expected} verdict of {name}", timeout_s)
    except AssertionError as err:
        raise AssertionError(f"{err}; last answer {last}") from None
    latency = time.monotonic() - evidence_at
    TIMINGS[case] = latency
    extra = f" (threshold {threshold['threshold_s']:.0f} s)" if threshold else ""
    print(f"\nverdict timing: {case}: {expected} {latency:.1f} s after the evidence{extra}")
    return found


def task_states(connect: ConnectRestClient, name: str) -> list[str]:
    return connector_state(connect, name)[1]


@pytest.fixture
def created(connect: ConnectRestClient) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        connect.delete_connector(name, missing_ok=True)


# --- the cases ------------------------------------------------------------------------------------------------------


def test_a_sink_that_cannot_write_its_file_is_failed(api, connect, settings, tmp_path, created):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where a directory should be\n")
    name, topic = unique("verdict-failed"), unique("verdict-failed-topic")
    create_topic(settings, topic, 1)
    created.append(name)
    connect.create_connector(name, file_sink_config(name, blocker / "out.txt", [topic]))
    wait(lambda: task_states(connect, name) == ["FAILED"], "FAILED task")
    seen = time.monotonic()
    found = wait_verdict(api, name, "failed", seen, "failed (sink cannot open its file)")
    assert "not-a-directory" in str(found["evidence"]["traces"]), found
    assert found["tasks"][0]["verdict"] == "failed"
    # The list, the filter, the expansion and the gauge say the same.
    listed = api.get("/verdicts?state=failed").get_json()["verdicts"]
    assert name in [view["name"] for view in listed]
    assert api.get("/connectors?expand=verdict").get_json()[name]["verdict"]["verdict"] == "failed"
    metrics = api.get("/metrics").get_data(as_text=True)
    assert f'connect_state_connector_verdict{{connector="{name}",verdict="failed"}} 1.0' in metrics
    assert f'connect_state_connector_verdict{{connector="{name}",verdict="healthy"}} 0.0' in metrics


class PipeReader:
    """Opens a named pipe for reading (without waiting for a writer), reads ``limit`` bytes, then stops reading while
    keeping it open (the writer blocks once the pipe is full); :meth:`drain` reads everything from then on."""

    def __init__(self, path: Path, limit: int) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.limit = limit
        self.read = 0
        self.stopped = threading.Event()
        self.draining = threading.Event()
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.closed.is_set():
            if self.read >= self.limit and not self.draining.is_set():
                self.stopped.set()
                time.sleep(0.1)
                continue
            try:
                chunk = os.read(self.fd, 4096 if self.draining.is_set() else min(4096, self.limit - self.read))
            except BlockingIOError:
                chunk = b""
            self.read += len(chunk)
            if not chunk:
                time.sleep(0.05)

    def drain(self) -> None:
        self.draining.set()

    def close(self) -> None:
        self.closed.set()
        self.thread.join(5)
        os.close(self.fd)


def test_a_sink_blocked_in_put_while_running_is_stalled(api, connect, settings, tmp_path, created):
    pipe = tmp_path / "sink.fifo"
    os.mkfifo(pipe)
    reader = PipeReader(pipe, limit=1000)  # before the task opens it: an unread pipe blocks start()
    name, topic = unique("verdict-stalled"), unique("verdict-stalled-topic")
    create_topic(settings, topic, 1)
    try:
        created.append(name)
        connect.create_connector(name, file_sink_config(name, pipe, [topic]))
        connect.wait_until_running(name, WAIT_S)
        line = b"x" * 1000
        produce_values(settings.bootstrap_servers, topic, [(0, line)] * 300)  # 300 kB: more than a pipe holds
        wait(reader.stopped.is_set, "the reader to stop")
        began = time.monotonic()
        found = wait_verdict(api, name, "stalled", began, "stalled (sink blocked in put)", threshold_s=STALL_MS / 1000)
        assert task_states(connect, name) == ["RUNNING"], "the task still says RUNNING"
        assert found["evidence"]["lag"] > 0 and found["evidence"]["stalled_for_ms"] > STALL_MS, found
    finally:
        reader.drain()  # let put() return so that the task can stop
        connect.delete_connector(name, missing_ok=True)
        time.sleep(2)
        reader.close()


def test_a_source_reading_a_pipe_nobody_writes_is_quiet(api, connect, settings, tmp_path, created):
    pipe = tmp_path / "source.fifo"
    os.mkfifo(pipe)
    name, topic = unique("verdict-quiet"), unique("verdict-quiet-topic")
    created.append(name)
    try:
        connect.create_connector(name, file_source_config(name, pipe, topic))
        connect.wait_until_running(name, WAIT_S)
        running_at = time.monotonic()
        found = wait_verdict(
            api, name, "quiet", running_at, "quiet (source on a silent pipe)", threshold_s=STALL_MS / 1000
        )
        assert found["evidence"]["heartbeat_provider"] is False and found["evidence"]["offsets_moved_at"] is None
    finally:
        connect.delete_connector(name, missing_ok=True)
        try:  # the task waits in open() for a writer: open and close one so that it can stop
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as err:
            assert err.errno == errno.ENXIO, err  # no reader (any more)


def test_an_idle_source_with_a_heartbeat_provider_is_idle(api, connect, settings, tmp_path, created):
    name, topic = unique("verdict-idle"), unique("verdict-idle-topic")
    file = tmp_path / "idle.txt"
    append_lines(file, ["one", "two"])
    created.append(name)
    connect.create_connector(name, file_source_config(name, file, topic, **{"heartbeat.interval.ms": "2000"}))
    wait(lambda: source_position(connect, name) == file.stat().st_size, "the source's offset")
    moved = time.monotonic()
    found = wait_verdict(api, name, "idle", moved, "idle (KIP-910 provider answered)", threshold_s=STALL_MS / 1000)
    assert found["evidence"]["heartbeat_outcome"] == "produced", found


def test_a_connector_restarted_again_and_again_is_flapping(api, connect, settings, tmp_path, created):
    name, topic = unique("verdict-flapping"), unique("verdict-flapping-topic")
    create_topic(settings, topic, 1)
    created.append(name)
    connect.create_connector(name, file_sink_config(name, tmp_path / "flapping.txt", [topic]))
    connect.wait_until_running(name, WAIT_S)
    wait(lambda: verdict(api, name)["verdict"] == "healthy", "healthy verdict first")
    for _ in range(2):  # connector and task RESTARTING each time: 4 transitions > 3
        status, body = connect.post(connect.connector_path(name, "restart") + "?includeTasks=true")
        assert status == 202, body
        connect.wait_until_running(name, WAIT_S)
    restarted = time.monotonic()
    found = wait_verdict(api, name, "flapping", restarted, "flapping (restarts)")
    assert found["evidence"]["restarts"] >= 4 and found["evidence"]["threshold"] == 3, found


def test_a_sink_sending_records_to_its_dead_letter_queue_is_dropping(api, connect, settings, tmp_path, created):
    name, topic, dlq = unique("verdict-dropping"), unique("verdict-dropping-topic"), unique("verdict-dlq")
    create_topic(settings, topic, 1)
    create_topic(settings, dlq, 1)
    created.append(name)
    config = file_sink_config(
        name,
        tmp_path / "dropping.txt",
        [topic],
        **{
            "value.converter": JSON,
            "value.converter.schemas.enable": "false",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
        },
    )
    connect.create_connector(name, config)
    connect.wait_until_running(name, WAIT_S)
    wait(lambda: verdict(api, name)["verdict"] == "healthy", "healthy verdict first")
    time.sleep(2)  # the watch has counted the empty dead-letter queue
    produce_values(settings.bootstrap_servers, topic, [(0, b"{not json")] * 5 + [(0, b'{"ok": 1}')])
    sent = time.monotonic()
    found = wait_verdict(api, name, "dropping", sent, "dropping (dead-letter queue)")
    assert found["evidence"]["dead_letter_topic"] == dlq and found["evidence"]["records"] == 5, found
    assert task_states(connect, name) == ["RUNNING"]


def test_a_sink_whose_worker_left_is_degraded(
    api, connect, settings, stack_settings, tmp_path, created, extra_connect_worker
):
    """A second worker of the same cluster runs one of the sink's two tasks, then stops (the remaining worker waits
    scheduled.rebalance.max.delay.ms, 5 minutes, before it takes the task over): one task of two is lost. The
    stopping worker's UNASSIGNED status write races its shutdown: when it lands the task is UNASSIGNED, when it does
    not the task stays RUNNING with the departed worker's id, and only the Connect group's members tell."""
    extra = extra_connect_worker(
        {
            "group.id": stack_settings.connect_group_id,
            "config.storage.topic": stack_settings.config_storage_topic,
            "offset.storage.topic": stack_settings.offset_storage_topic,
            "status.storage.topic": stack_settings.status_storage_topic,
        }
    )
    name, topic = unique("verdict-degraded"), unique("verdict-degraded-topic")
    create_topic(settings, topic, 2)
    created.append(name)
    connect.create_connector(name, file_sink_config(name, tmp_path / "degraded.txt", [topic], **{"tasks.max": "2"}))
    workers = wait(
        lambda: (
            connect.is_running(name, min_tasks=2)
            and {t["worker_id"] for t in (connect.connector_status(name) or {}).get("tasks", [])}
        ),
        "two RUNNING tasks",
    )
    assert len(workers) == 2, f"the tasks should run on both workers: {workers}"
    departed = f"127.0.0.1:{extra.port}"
    (on_extra,) = [t["id"] for t in connect.connector_status(name)["tasks"] if t["worker_id"] == departed]
    wait(lambda: verdict(api, name)["verdict"] == "healthy", "healthy verdict first")
    extra.stop()
    lost_at = time.monotonic()
    # the departed worker's connector instance may be judged lost a pass before its task is (the task's RUNNING row
    # with the departed worker's id not folded yet): wait until the evidence names the task
    try:
        found = wait_verdict(
            api, name, "degraded", lost_at, "degraded (a worker left)", timeout_s=60,
            until=lambda answer: answer["evidence"].get("unassigned_tasks") or answer["evidence"].get("lost_tasks"),
        )  # fmt: skip
    except AssertionError as err:  # what Connect itself says then (the oracle) beside our connectors row's status
        tasks = connect.get(connect.connector_path(name, "tasks"))
        ours = api.get(f"/connectors/{name}/status").get_json()
        raise AssertionError(
            f"{err}; Connect's status {connect.connector_status(name)}; Connect's tasks {tasks}; our status {ours}"
        ) from None
    evidence = found["evidence"]
    if evidence["unassigned_tasks"]:  # the UNASSIGNED write landed
        decided_by = "UNASSIGNED status"
        assert evidence["unassigned_tasks"] == [on_extra], found
    else:  # it did not: the task is still RUNNING on the departed worker, which the group no longer has
        decided_by = "Connect group members"
        assert evidence.get("lost_tasks") == [on_extra] and evidence["departed_workers"] == [departed], found
        assert departed not in evidence["live_workers"] and evidence["live_workers"], found
        assert evidence["connect_group"] == stack_settings.connect_group_id and evidence["missing_since"], found
        assert {t["id"]: t["verdict"] for t in found["tasks"]}[on_extra] == "degraded", found
    assert evidence["running"] == 1, found
    now = task_states(connect, name)
    print(f"\ndegraded decided by: {decided_by}; task {on_extra} ran on {departed}; task states now {now}")
    print(f"degraded evidence: {evidence}")


def test_the_api_answers_like_connect_for_unknown_names_and_bad_states(api):
    missing = api.get("/connectors/no-such-connector/verdict")
    assert missing.status_code == 404
    assert missing.get_json() == {"error_code": 404, "message": "Connector no-such-connector not found"}
    bad = api.get("/verdicts?state=sleepy")
    assert bad.status_code == 400 and "healthy" in bad.get_json()["message"]
