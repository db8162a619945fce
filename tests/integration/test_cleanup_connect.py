"""KIP-883 cleanup on deletion against the real worker: deletions made through Connect's REST (and through ours) are
cleaned by the cleanup job, and Connect honours the result when a connector with the same name is created again.

* source, offset cleanup on (per connector) → recreated, it reads its file from the beginning; off → it resumes;
  deleted and recreated before the job ran → nothing shared is touched, it resumes;
* the deletions happen while no cleanup job runs; the next pass finds them;
* a counting hook runs exactly once per deletion across job restarts; a failing hook is recorded and retried while
  the other steps complete;
* sink: deleted through our ``DELETE /connectors/<name>`` (Connect drops it), its consumer group is deleted, and the
  recreated sink consumes the topic from the beginning again;
* no confused deputy: a sink whose config names another application's idle group (``consumer.override.group.id``)
  and turns offset cleanup on is deleted: the group survives, the step is ``refused`` with the reason;
* hooks per class: a FileStreamSource hook gets Connect's task configs, offsets and active topics of the deleted
  connector, after Connect stopped it; a FileStreamSink hook is not planned; a hung hook fails at its deadline.

The module has a Connect cluster of its own (``module_connect_worker``): a cleanup pass handles every deletion of its
worker, and on the session's shared worker each test's first pass would also handle every connector the suite deleted
before (the steps and hooks of each: minutes in a full run).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from connect_state.cleanup.reconciler import FAILED, REFUSED, SKIPPED, SUCCEEDED, CleanupReconciler, DeletedConnector
from connect_state.connect.filestream import FILE_SOURCE_CLASS
from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.dev.local_stack import ConnectWorker
from connect_state.kafka import ConsumerGroupAdmin
from connect_state.spark import source_offsets
from connect_state.spark.cleanup import cleanup_reconciler
from connect_state.tables.schemas import CONNECTOR_DELETIONS
from tests.fixtures.spark import await_query
from tests.integration.helpers import (
    api_client,
    connect_offsets,
    create_topic,
    delete_and_wait,
    job_settings,
    run_active_topics,
    run_connector_states,
    source_position,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]
WAIT_S = 90.0
OFFSETS_ON = {"cleanup.offsets.on.delete": "true"}


@pytest.fixture(scope="module")
def connect(module_connect_worker: ConnectWorker) -> ConnectRestClient:
    """The module's own Connect cluster (``module_connect_worker``): each test's first cleanup pass handles the
    deletions of this module only, not every connector the suite deleted before on the shared worker."""
    return module_connect_worker.client()


@pytest.fixture(scope="module")
def worker_settings(module_connect_worker: ConnectWorker) -> Settings:
    """The session's settings on the module's Connect cluster (its internal topics and REST URL)."""
    return module_connect_worker.worker_settings()


# --- helpers --------------------------------------------------------------------------------------------------------


class CountingHook:
    """Appends the connector's name to a file at each call (the file survives job restarts)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
        assert is_deleted is True
        with self.path.open("a", encoding="utf-8") as out:
            out.write(f"{connector} {config.get('connector.class', '?')}\n")

    def calls(self, connector: str) -> int:
        if not self.path.exists():
            return 0
        return sum(1 for line in self.path.read_text(encoding="utf-8").splitlines() if line.split()[0] == connector)


class FlakyHook(CountingHook):
    """Fails on its first call for each connector, succeeds afterwards."""

    def __call__(self, connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
        first = self.calls(connector) == 0
        super().__call__(connector, config, is_deleted=is_deleted)
        if first:
            raise RuntimeError(f"external system unavailable for {connector}")


def cleanup_settings(stack_settings: Settings, tmp_path: Path) -> Settings:
    # Global offset cleanup stays off (Connect's behaviour): connectors opt in with the key in their config. Retries
    # are due at once, so the next pass retries.
    return job_settings(
        stack_settings,
        tmp_path,
        **{"cleanup.offsets.on.delete": "false", "cleanup.retry.backoff.ms": "1", "cleanup.retry.backoff.max.ms": "1"},
    )


def catch_up(spark, settings: Settings) -> None:
    """The connector-state and source-offsets jobs caught up with the topics."""
    run_connector_states(spark, settings)
    await_query(source_offsets.start(spark, settings, available_now=True))


def steps_of(spark, settings: Settings, name: str) -> dict[str, dict[str, Any]]:
    """The connector's ``connector_deletions`` rows by step (one deletion per name in these tests)."""
    rows = spark.read.format("delta").load(str(settings.table_path(CONNECTOR_DELETIONS.name)))
    found = [row.asDict() for row in rows.filter(rows.connector == name).collect()]
    assert len({row["deletion_offset"] for row in found}) <= 1, found
    return {row["step"]: row for row in found}


def status_of(steps: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[str, int]]:
    return {step: (row["status"], row["attempts"]) for step, row in steps.items()}


def record_count(settings: Settings, topic: str) -> int:
    """Records in ``topic`` (no compaction, no transactions: the sum of end offsets)."""
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap_servers)
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in partitions])
        return sum(ends.values())
    finally:
        consumer.close()


def wait_settled(connect, name: str, file: Path) -> None:
    """Until Connect has committed the whole file for the source ``name`` (every record it sent is acknowledged)."""
    size = file.stat().st_size
    connect.wait_for(lambda: source_position(connect, name) == size, WAIT_S, description=f"{name} at {size}")


def run_passes(job_factory: Callable[[], CleanupReconciler], passes: int = 1) -> None:
    job = job_factory()
    try:
        for _ in range(passes):
            job.run_pass()
    finally:
        job.close()


# --- sources --------------------------------------------------------------------------------------------------------


def test_source_offsets_cleanup_hooks_and_recreation(spark, connect, worker_settings, tmp_path):
    settings = cleanup_settings(worker_settings, tmp_path)
    counting, flaky = CountingHook(tmp_path / "counting.log"), FlakyHook(tmp_path / "flaky.log")
    hooks = {"counting": counting, "flaky": flaky}

    def new_job() -> CleanupReconciler:  # a fresh instance is a job restart: all it knows is in Delta
        return cleanup_reconciler(spark, settings, hooks)

    cleaned, kept, recreated = unique("clean-src"), unique("kept-src"), unique("recreated-src")
    files = {name: tmp_path / f"{name}.txt" for name in (cleaned, kept, recreated)}
    topics = {name: unique("cleanup-topic") for name in files}
    configs = {
        cleaned: file_source_config(cleaned, files[cleaned], topics[cleaned], **OFFSETS_ON),
        kept: file_source_config(kept, files[kept], topics[kept]),
        recreated: file_source_config(recreated, files[recreated], topics[recreated], **OFFSETS_ON),
    }
    for name, config in configs.items():
        append_lines(files[name], [f"{name} line {i}" for i in (1, 2, 3)])
        connect.create_connector(name, config)
    for name in configs:
        wait_settled(connect, name, files[name])
        assert record_count(settings, topics[name]) == 3

    # The cleanup job runs once while the connectors exist: nothing to do for them.
    catch_up(spark, settings)
    run_passes(new_job)
    for name in configs:
        assert steps_of(spark, settings, name) == {}

    # Deleted while no cleanup job runs; one name is recreated at once, before the job sees its deletion.
    for name in configs:
        delete_and_wait(connect, name)
    connect.create_connector(recreated, configs[recreated])
    connect.wait_until_running(recreated, WAIT_S)
    recreated_offset_seen = source_position(connect, recreated)
    for name in configs:
        append_lines(files[name], [f"{name} line 4"])

    # First pass after the restart: everything but the failing hook completes.
    catch_up(spark, settings)
    run_passes(new_job)
    steps = steps_of(spark, settings, cleaned)
    assert status_of(steps) == {
        "active_topics": (SUCCEEDED, 1),
        "offsets": (SUCCEEDED, 1),
        "hook:counting": (SUCCEEDED, 1),
        "hook:flaky": (FAILED, 1),
    }
    assert steps["offsets"]["detail"] == f"source-offset tombstones written: 1 to {settings.offset_storage_topic}"
    assert steps["hook:flaky"]["error"] == f"RuntimeError: external system unavailable for {cleaned}"
    assert steps["hook:flaky"]["next_attempt_at"] is not None
    assert steps["offsets"]["connector_type"] == "source"
    kept_steps = steps_of(spark, settings, kept)
    assert status_of(kept_steps)["offsets"] == (SKIPPED, 0)
    assert kept_steps["offsets"]["detail"] == "offset cleanup disabled (cleanup.offsets.on.delete=false)"
    assert status_of(kept_steps)["active_topics"] == (SUCCEEDED, 1)
    recreated_steps = steps_of(spark, settings, recreated)
    assert {s: recreated_steps[s]["status"] for s in ("active_topics", "offsets", "hook:counting")} == {
        "active_topics": SKIPPED,
        "offsets": SKIPPED,
        "hook:counting": SUCCEEDED,
    }
    assert recreated_steps["offsets"]["detail"].startswith("connector recreated at config offset ")
    assert int(recreated_steps["offsets"]["detail"].rsplit(" ", 1)[1]) > recreated_steps["offsets"]["deletion_offset"]

    # Restarted twice more: the failed hook is retried and succeeds; no hook that succeeded runs again.
    run_passes(new_job)
    run_passes(new_job)
    assert status_of(steps_of(spark, settings, cleaned))["hook:flaky"] == (SUCCEEDED, 2)
    for name in configs:
        assert counting.calls(name) == 1, name
        assert flaky.calls(name) == 2, name
        assert all(row["status"] in (SUCCEEDED, SKIPPED) for row in steps_of(spark, settings, name).values())
    body = api_client(settings).get(f"/connectors/{cleaned}/deletions").get_json()
    assert [d["status"] for d in body["deletions"]] == ["complete"]

    # Recreated: the cleaned source starts from the beginning of its file, the others resume.
    connect.create_connector(cleaned, configs[cleaned])
    connect.create_connector(kept, configs[kept])
    for name in configs:
        wait_settled(connect, name, files[name])
    assert record_count(settings, topics[cleaned]) == 3 + 4
    assert record_count(settings, topics[kept]) == 3 + 1
    assert record_count(settings, topics[recreated]) == 3 + 1
    assert recreated_offset_seen is not None  # it had kept its position when it came back
    for name in configs:
        connect.delete_connector(name)


# --- sinks, and our DELETE ------------------------------------------------------------------------------------------


def test_sink_deleted_through_our_api_loses_its_consumer_group(spark, connect, worker_settings, tmp_path):
    settings = cleanup_settings(worker_settings, tmp_path)
    source, sink, topic = unique("feed-src"), unique("clean-sink"), unique("cleanup-sink-topic")
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    append_lines(source_file, ["a", "b", "c"])
    connect.create_connector(source, file_source_config(source, source_file, topic))
    sink_config = file_sink_config(sink, sink_file, [topic], **OFFSETS_ON)
    connect.create_connector(sink, sink_config)
    connect.wait_for(
        lambda: sink_file.exists() and len(sink_file.read_text().splitlines()) == 3, WAIT_S, description="sink output"
    )
    catch_up(spark, settings)

    # Our DELETE: Connect drops the connector.
    api = api_client(settings)
    response = api.delete(f"/connectors/{sink}")
    assert response.status_code == 204
    connect.wait_for(lambda: sink not in connect.list_connectors(), WAIT_S, description=f"{sink} gone from Connect")
    connect.wait_for(lambda: connect.connector_status(sink) is None, WAIT_S, description=f"{sink} status removed")
    assert api.delete(f"/connectors/{unique('never')}").status_code == 404

    # The group may still have a member for a moment (GroupNotEmptyError): a failure, retried by the next pass.
    catch_up(spark, settings)
    job = cleanup_reconciler(spark, settings, {})

    def offsets_step_done() -> bool:
        job.run_pass()
        return steps_of(spark, settings, sink).get("offsets", {}).get("status") == SUCCEEDED

    try:
        connect.wait_for(offsets_step_done, WAIT_S, description=f"{sink} offsets step succeeded")
    finally:
        job.close()
    steps = steps_of(spark, settings, sink)
    assert steps["offsets"]["status"] == SUCCEEDED, steps["offsets"]
    assert steps["offsets"]["detail"] == f"consumer group connect-{sink} deleted"
    assert steps["offsets"]["connector_type"] == "sink"

    from connect_state.kafka import ConsumerGroupAdmin

    admin = ConsumerGroupAdmin(settings)
    try:
        assert admin.list_group_offsets(f"connect-{sink}") == {}
    finally:
        admin.close()

    # Recreated, the sink consumes the topic from the beginning again.
    connect.create_connector(sink, sink_config)
    connect.wait_for(
        lambda: len(sink_file.read_text().splitlines()) == 6, WAIT_S, description="sink output written again"
    )
    assert sink_file.read_text().splitlines() == ["a", "b", "c", "a", "b", "c"]
    for name in (source, sink):
        connect.delete_connector(name)


# --- no confused deputy: a sink's config cannot steer the job to another application's group (issue 33) -----------


def test_a_sink_naming_another_live_but_idle_group_is_deleted_and_that_group_survives(
    spark, connect, worker_settings, tmp_path
):
    """Anyone who may create a sink in Connect names someone else's consumer group in ``consumer.override.group.id``
    and turns ``cleanup.offsets.on.delete`` on in the same config, then deletes the sink: the job refuses to delete
    the group (``refused``, with the reason) and the group keeps its offsets."""
    settings = cleanup_settings(worker_settings, tmp_path)
    victim_group, victim_topic = unique("payments"), unique("payments-topic")
    evil, evil_topic = unique("evil-sink"), unique("evil-topic")
    create_topic(settings, victim_topic, 1)
    create_topic(settings, evil_topic, 1)
    admin = ConsumerGroupAdmin(settings)
    try:
        admin.alter_group_offsets(victim_group, {(victim_topic, 0): 3})  # another application's group, idle
        config = file_sink_config(
            evil, tmp_path / "evil.txt", [evil_topic], **{"consumer.override.group.id": victim_group}, **OFFSETS_ON
        )
        connect.create_connector(evil, config)
        connect.wait_for(
            lambda: [t.get("state") for t in (connect.connector_status(evil) or {}).get("tasks", [])] == ["RUNNING"],
            WAIT_S,
            description=f"{evil}'s task running in {victim_group}",
        )
        connect.delete_connector(evil)
        connect.wait_for(lambda: connect.connector_status(evil) is None, WAIT_S, description=f"{evil} status removed")
        catch_up(spark, settings)
        job = cleanup_reconciler(spark, settings, {})

        def offsets_step_final() -> bool:
            job.run_pass()
            return steps_of(spark, settings, evil).get("offsets", {}).get("status") in (SUCCEEDED, REFUSED)

        try:
            connect.wait_for(offsets_step_final, WAIT_S, description=f"{evil} offsets step done")
        finally:
            job.close()
        step = steps_of(spark, settings, evil)["offsets"]
        assert (step["status"], step["error"]) == (REFUSED, None), step
        assert step["detail"] == (
            f"consumer.override.group.id {victim_group!r} of connector {evil} is not the connector's consumer group: "
            f"connect-state alters or deletes only connect-{evil} and groups matching cleanup.allowed.groups"
        )
        assert admin.list_group_offsets(victim_group).get((victim_topic, 0)) == 3
    finally:
        admin.close()


# --- KIP-883 hooks per class, with a deadline and the deleted connector's context -----------------------------------


def test_class_hooks_get_the_deleted_connectors_context_after_its_tasks_stopped(
    spark, connect, worker_settings, tmp_path
):
    """Hooks registered for FileStreamSource run for it, one for FileStreamSink does not; each gets what Connect
    showed before the deletion (task configs, offsets, active topics), is called once Connect no longer runs the
    connector, and a hung catch-all is recorded as failed at its deadline while the others complete."""
    settings = cleanup_settings(worker_settings, tmp_path).with_overrides(**{"cleanup.hook.timeout.ms": "1000"})
    name, topic, source_file = unique("ctx-src"), unique("ctx-topic"), tmp_path / "ctx.txt"
    append_lines(source_file, ["one", "two"])
    connect.create_connector(name, file_source_config(name, source_file, topic))
    wait_settled(connect, name, source_file)
    connect.wait_for(lambda: connect.active_topics(name) == {topic}, WAIT_S, description=f"{name} active topic")
    status, tasks = connect.get(connect.connector_path(name, "tasks"))
    assert status == 200
    expected_tasks = {task["id"]["task"]: task["config"] for task in tasks}
    expected_offsets = [(e["partition"], e["offset"]) for e in connect_offsets(connect, name)]

    seen: dict[str, Any] = {}
    release = threading.Event()

    def source_hook(connector: str, config: Mapping[str, str], *, is_deleted: bool, context: DeletedConnector) -> None:
        # the shared worker may have other deleted FileStreamSource connectors: keep each one's context
        seen[connector] = (context, connect.connector_status(connector))  # Connect no longer runs it

    def sink_hook(connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
        seen.setdefault("sink", []).append(connector)

    hung_waiting: set[str] = set()  # the hung hook's calls that have not returned

    def hung_hook(connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
        if connector != name:  # a catch-all: it also runs for the module's other deletions, and hangs for this one
            return
        hung_waiting.add(connector)
        release.wait(600)  # set when the test ends
        hung_waiting.discard(connector)

    hooks = {"source": source_hook, "sink": sink_hook, "hung": hung_hook}
    classes = {"source": frozenset({"FileStreamSource"}), "sink": frozenset({"FileStreamSink"})}
    delete_and_wait(connect, name)
    catch_up(spark, settings)
    run_active_topics(spark, settings)
    job = cleanup_reconciler(spark, settings, hooks, hook_classes=classes)
    try:
        job.run_pass()
        # The pass ended while the hung hook still waits: its deadline, not the hook, decided when the pass went on.
        # (Not a wall-clock bound: the pass also handles every other deletion on the shared worker.)
        assert name in hung_waiting
    finally:
        release.set()
        job.close()
    steps = status_of(steps_of(spark, settings, name))
    assert steps == {
        "active_topics": (SUCCEEDED, 1),
        "offsets": (SKIPPED, 0),
        "hook:source": (SUCCEEDED, 1),
        "hook:hung": (FAILED, 1),
    }
    assert "did not return within 1000 ms" in steps_of(spark, settings, name)["hook:hung"]["error"]
    context, status_at_call = seen[name]
    assert status_at_call is None and name not in seen.get("sink", [])
    assert {task: dict(config) for task, config in context.task_configs.items()} == expected_tasks
    assert [(dict(p or {}), dict(o or {})) for p, o in context.source_offsets] == expected_offsets
    # Connect resets the topic statuses right after the deletion: the hook gets those in use when it was deleted
    assert list(context.active_topics) == [topic]
    assert context.connector_class == FILE_SOURCE_CLASS and context.connector_type == "source"
