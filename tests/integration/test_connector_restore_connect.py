"""A deleted connector brought back through our API against the real Connect worker (issue 36): a FileStream source
(with a secret in its config) deleted through Connect's REST, then ``POST /connectors/<name>/restore``; Connect's own
``GET /connectors/<name>`` shows the config it had, secret included, and ``/status`` shows it STOPPED (the worker is
the oracle); our answer never shows the secret. Resumed through Connect it carries on from the offsets Connect kept.
Restoring again is Connect's 409 and writes nothing (the audit row's ``written``). The tables come from catch-up runs
(``AvailableNow``) of the connector-state job, as in test_offsets_restore_connect.py."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.herder.revive import already_exists_message
from tests.integration.helpers import (
    api_client,
    delete_and_wait,
    job_settings,
    run_connector_states,
    unique,
    wait_state,
)
from tests.integration.test_offsets_api_connect import wait_lines

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
