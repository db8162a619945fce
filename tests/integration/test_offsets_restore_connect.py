"""Offsets restored as of a time through our API against the real Connect worker (issue 36): a FileStream source
moved forward, stopped, restored to a time before the move; Connect's own ``GET /offsets`` shows the restored offsets
and the resumed source reads again from there (the worker is the oracle). Bad input (a running connector, a time
before any history, a bad ``apply``) writes nothing. The tables come from catch-up runs (``AvailableNow``) of the
connector-state and offsets jobs, as in test_offsets_api_connect.py."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from connect_state.connect.rest import not_stopped_message
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.herder.restore import restore_before_history_message
from connect_state.spark import source_offsets
from tests.fixtures.spark import await_query
from tests.integration.helpers import (
    api_client,
    connect_offsets,
    job_settings,
    run_connector_states,
    unique,
    wait_state,
)
from tests.integration.test_offsets_api_connect import WAIT_S, stop_through_our_api, wait_lines

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def test_a_source_restored_to_a_time_before_a_move(spark, connect, stack_settings, tmp_path):
    audit_file = tmp_path / "audit.jsonl"
    settings = job_settings(stack_settings, tmp_path, **{"api.audit.file": str(audit_file), "api.audit.table": "false"})
    api = api_client(settings)
    source, sink, topic = unique("restore-source"), unique("restore-sink"), unique("restore-topic")
    source_file, out_file = tmp_path / "in.txt", tmp_path / "out.txt"
    partition = {"filename": str(source_file)}

    def at_position(position: int) -> None:
        connect.wait_for(
            lambda: connect_offsets(connect, source) == [{"partition": partition, "offset": {"position": position}}],
            WAIT_S,
            description=f"source offset at {position}",
        )

    def run_jobs() -> None:
        run_connector_states(spark, settings)
        await_query(source_offsets.start(spark, settings, available_now=True), 240.0)

    def restore(at: int | str, apply: str | None = None) -> tuple[int, dict]:
        query = {"at": at} if apply is None else {"at": at, "apply": apply}
        response = api.post(f"/connectors/{source}/offsets/restore", query_string=query)
        return response.status_code, response.get_json()

    append_lines(source_file, ["a", "b"])
    connect.create_connector(source, file_source_config(source, source_file, topic))
    connect.create_connector(sink, file_sink_config(sink, out_file, [topic]))
    wait_state(connect, source, "RUNNING", 1)
    wait_lines(connect, out_file, Counter("ab"))
    at_position(4)
    before_move = int(time.time() * 1000)
    time.sleep(1.0)  # the move's records get later Kafka timestamps
    append_lines(source_file, ["c", "d"])
    wait_lines(connect, out_file, Counter("abcd"))
    at_position(8)
    run_jobs()

    # Running: a dry run answers (the difference), apply is refused as PATCH is; nothing written.
    status, body = restore(before_move)
    assert status == 200, body
    assert body["applied"] is False
    assert body["offsets"] == [
        {"partition": partition, "current": {"position": 8}, "restored": {"position": 4}, "change": "altered"}
    ]
    assert restore(before_move, "true") == (400, {"error_code": 400, "message": not_stopped_message(source)})

    stop_through_our_api(spark, api, connect, settings, source)
    run_jobs()
    # A time before any history of the connector, and a bad apply: 400, nothing written.
    status, body = restore(1, "true")
    assert status == 400, body
    assert body["message"].startswith(restore_before_history_message(source, 1, None).split(":")[0])
    assert "the history kept for it starts at" in body["message"]
    assert restore(before_move, "yes")[0] == 400
    at_position(8)

    # Restored (ISO-8601 time, as the other at parameters take): Connect's own GET /offsets shows position 4.
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(before_move // 1000)) + f".{before_move % 1000:03d}Z"
    status, body = restore(iso, "true")
    assert status == 200, body
    assert body["applied"] is True and body["at"] == before_move
    at_position(4)

    # Resumed through Connect: the source re-reads from byte 4, so "c" and "d" arrive a second time.
    assert connect.put(connect.connector_path(source, "resume"))[0] == 202
    wait_lines(connect, out_file, Counter("abcdcd"))
    at_position(8)

    rows = [json.loads(line) for line in audit_file.read_text().splitlines()]
    restores = [row for row in rows if row["endpoint"] == "offsets.restore_connector_offsets"]
    applied = [row for row in restores if row["status"] == 200 and "dry run" not in (row["message"] or "")]
    assert len(applied) == 1 and f"({before_move})" in applied[0]["message"]
    assert [w["key"] for w in applied[0]["written"]] == [json.dumps([source, partition], separators=(",", ":"))]
    refused = [row for row in restores if row["status"] == 400]
    assert len(refused) == 3 and all(row["written"] == [] for row in refused)
    for name in (source, sink):
        connect.delete_connector(name)
