"""A deleted connector brought back through our API against the real Connect worker (issue 36): a FileStream source
(with a secret in its config) deleted through Connect's REST, then ``POST /connectors/<name>/restore``; Connect's own
``GET /connectors/<name>`` shows the config it had, secret included, and ``/status`` shows it STOPPED (the worker is
the oracle); our answer never shows the secret. Resumed through Connect it carries on from the offsets Connect kept.
Restoring again is Connect's 409 and writes nothing (the audit row's ``written``). The tables come from catch-up runs
(``AvailableNow``) of the connector-state job, as in test_offsets_restore_connect.py.

With its offsets (``offsets=true``): a FileStream source that read N lines is deleted through Connect, the KIP-883
cleanup job tombstones its offsets and runs a hook, more lines are appended; restored with its offsets as of its
deletion (which the history keeps), Connect's own ``GET /offsets`` shows the position again, and resumed through
Connect it sends exactly the lines after it (no re-read of the first N). A restore of a name that exists (409) and an
``at`` before any history (400) leave the config topic's end offset where it was."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from kafka import KafkaConsumer, TopicPartition

from connect_state.core.settings import Settings
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.herder.revive import already_exists_message
from connect_state.spark import source_offsets
from connect_state.spark.cleanup import cleanup_reconciler
from tests.fixtures.spark import await_query
from tests.integration.helpers import (
    api_client,
    connect_offsets,
    delete_and_wait,
    job_settings,
    read_topic,
    run_connector_states,
    unique,
    wait_state,
)
from tests.integration.test_offsets_api_connect import WAIT_S, wait_lines

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

SECRET = "s3cret-value"


def test_a_deleted_source_restored_stopped_with_its_config(spark, connect, stack_settings, tmp_path):
    audit_file = tmp_path / "audit.jsonl"
    settings = job_settings(stack_settings, tmp_path, **{"api.audit.file": str(audit_file), "api.audit.table": "false"})
    api = api_client(settings)
    source, sink, topic = unique("revive-source"), unique("revive-sink"), unique("revive-topic")
    source_file, out_file = tmp_path / "in.txt", tmp_path / "out.txt"

    append_lines(source_file, ["a", "b"])
    connect.create_connector(source, file_source_config(source, source_file, topic, **{"db.password": SECRET}))
    connect.create_connector(sink, file_sink_config(sink, out_file, [topic]))
    wait_state(connect, source, "RUNNING", 1)
    wait_lines(connect, out_file, Counter("ab"))
    status, before = connect.get(connect.connector_path(source))
    assert status == 200, before
    run_connector_states(spark, settings)

    # Not deleted: Connect's 409, nothing written.
    exists = api.post(f"/connectors/{source}/restore")
    assert exists.status_code == 409
    assert exists.get_json() == {"error_code": 409, "message": already_exists_message(source)}

    delete_and_wait(connect, source)
    run_connector_states(spark, settings)
    assert api.post(f"/connectors/{unique('never')}/restore").status_code == 404

    restored = api.post(f"/connectors/{source}/restore")
    assert restored.status_code == 201, restored.get_json()
    assert SECRET not in restored.get_data(as_text=True)
    assert restored.get_json()["initial_state"] == "STOPPED"
    assert restored.get_json()["cleanup_hooks_ran"] == []
    wait_state(connect, source, "STOPPED", 0)
    status, after = connect.get(connect.connector_path(source))
    assert status == 200, after
    assert after["config"] == before["config"] and after["config"]["db.password"] == SECRET
    assert after["tasks"] == [] and after["type"] == "source"

    # Again: it exists now (the config topic read to its end says so), 409 and nothing written.
    again = api.post(f"/connectors/{source}/restore")
    assert again.status_code == 409
    assert again.get_json()["message"] == already_exists_message(source)

    # Resumed through Connect: the source carries on from the offsets Connect kept (position 4), "a" and "b" once.
    assert connect.put(connect.connector_path(source, "resume"))[0] == 202
    wait_state(connect, source, "RUNNING", 1)
    append_lines(source_file, ["c"])
    wait_lines(connect, out_file, Counter("abc"))

    rows = [json.loads(line) for line in audit_file.read_text().splitlines()]
    restores = [row for row in rows if row["endpoint"] == "revive.restore_connector"]
    assert [row["status"] for row in restores] == [409, 404, 201, 409]
    assert [w["key"] for w in restores[2]["written"]] == [f"target-state-{source}", f"connector-{source}"]
    assert all(row["written"] == [] for row in restores if row["status"] != 201)
    assert "connector restore to before its last deletion, STOPPED" in restores[2]["message"]
    for name in (source, sink):
        connect.delete_connector(name)


def config_topic_end(settings: Settings) -> int:
    """The config topic's end offset (one partition, as Connect requires)."""
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap_servers)
    try:
        partition = TopicPartition(settings.config_storage_topic, 0)
        return int(consumer.end_offsets([partition])[partition])
    finally:
        consumer.close()


def test_a_deleted_source_restored_with_its_offsets_resumes_from_them(spark, extra_connect_worker, tmp_path):
    # A Connect cluster of its own: its config topic holds only this test's deletion (on the shared worker, the
    # cleanup pass would first plan and run the steps and the hook of every connector the suite deleted before).
    worker = extra_connect_worker()
    connect = worker.client()
    audit_file = tmp_path / "audit.jsonl"
    overrides = {"api.audit.file": str(audit_file), "api.audit.table": "false", "cleanup.offsets.on.delete": "false"}
    settings = job_settings(worker.worker_settings(), tmp_path, **overrides)
    api = api_client(settings)
    source, topic, source_file = unique("revive-offsets"), unique("revive-offsets-topic"), tmp_path / "in.txt"
    partition = {"filename": str(source_file)}
    hook_calls: list[str] = []

    def catch_up() -> None:
        run_connector_states(spark, settings)
        await_query(source_offsets.start(spark, settings, available_now=True), 240.0)

    def restore(**query: str) -> tuple[int, dict]:
        response = api.post(f"/connectors/{source}/restore", query_string={"offsets": "true", **query})
        return response.status_code, response.get_json()

    # N = 3 lines read and committed (position 6), then deleted by mistake; the connector opted in to offset cleanup.
    append_lines(source_file, ["a", "b", "c"])
    connect.create_connector(
        source, file_source_config(source, source_file, topic, **{"cleanup.offsets.on.delete": "true"})
    )
    connect.wait_for(
        lambda: connect_offsets(connect, source) == [{"partition": partition, "offset": {"position": 6}}],
        WAIT_S,
        description="position 6 committed",
    )
    delete_and_wait(connect, source)

    # The KIP-883 cleanup job's pass tombstones its offsets and runs a hook; the history keeps the offsets before.
    catch_up()
    job = cleanup_reconciler(
        spark, settings, {"notify": lambda connector, config, *, is_deleted: hook_calls.append(connector)}
    )
    try:
        job.run_pass()
    finally:
        job.close()
    assert hook_calls.count(source) == 1
    await_query(source_offsets.start(spark, settings, available_now=True), 240.0)  # the tombstone in the history
    append_lines(source_file, ["d", "e"])

    # An at before any history: 400 saying what is kept, nothing written.
    end = config_topic_end(settings)
    status, body = restore(at="1")
    assert status == 400, body
    assert body["message"].startswith(f"No config of connector {source} at or before 1970-01-01T00:00:00.001Z (1)")
    assert "its first config kept is of" in body["message"]
    assert config_topic_end(settings) == end

    status, body = restore()
    assert status == 201, body
    assert body["offsets"] == [
        {"partition": partition, "current": None, "restored": {"position": 6}, "change": "restored"}
    ]
    assert body["offsets_at"] == body["deleted_at"] and body["cleanup_hooks_ran"] == ["notify"]
    assert "The KIP-883 cleanup of its deletion had removed its offsets" in body["message"]
    wait_state(connect, source, "STOPPED", 0)
    assert connect_offsets(connect, source) == [{"partition": partition, "offset": {"position": 6}}]  # Connect's view

    # A name that exists: Connect's 409, the config topic untouched.
    end = config_topic_end(settings)
    assert restore() == (409, {"error_code": 409, "message": already_exists_message(source)})
    assert config_topic_end(settings) == end

    # Resumed through Connect: it continues from position 6, so the topic gets d and e only after a, b, c.
    assert connect.put(connect.connector_path(source, "resume"))[0] == 202
    wait_state(connect, source, "RUNNING", 1)
    connect.wait_for(
        lambda: connect_offsets(connect, source) == [{"partition": partition, "offset": {"position": 10}}],
        WAIT_S,
        description="position 10 committed",
    )
    lines = [record.value.decode() for record in read_topic(settings.bootstrap_servers, topic)]
    assert lines == ["a", "b", "c", "d", "e"]

    rows = [json.loads(line) for line in audit_file.read_text().splitlines()]
    restores = [row for row in rows if row["endpoint"] == "revive.restore_connector"]
    assert [row["status"] for row in restores] == [400, 201, 409]
    assert [(w["topic"], w["key"]) for w in restores[1]["written"]] == [
        (settings.config_storage_topic, f"target-state-{source}"),
        (settings.config_storage_topic, f"connector-{source}"),
        (settings.offset_storage_topic, json.dumps([source, partition], separators=(",", ":"))),
    ]
    assert "with its offsets" in restores[1]["message"]
    connect.delete_connector(source)
