"""ETag / 304 through the production server process (gunicorn; api/etags.py, issue 34). No broker is needed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import requests
from deltalake import write_deltalake

from connect_state.progress.freshness import HEADER
from connect_state.tables.schemas import ACTIVE_TOPICS
from tests.fixtures.api_server import no_kafka_settings, serving_api


def test_a_hot_get_answers_304_until_its_table_changes(tmp_path: Path) -> None:
    settings = no_kafka_settings(tmp_path)
    table = f"{settings['delta.root']}/{ACTIVE_TOPICS.name}"
    write_deltalake(table, pa.Table.from_pylist([], schema=ACTIVE_TOPICS.schema))
    with serving_api(settings) as url, requests.Session() as session:
        path = f"{url}/connectors/c/topics"
        first = session.get(path, timeout=10)
        etag = first.headers.get("ETag")
        assert (first.status_code, first.json()) == (200, {"c": {"topics": []}}) and etag

        again = session.get(path, headers={"If-None-Match": etag}, timeout=10)
        assert (again.status_code, again.content, again.headers.get("ETag")) == (304, b"", etag)
        assert HEADER in again.headers

        row = {"connector": "c", "topic": "orders", "task": 0, "kafka_partition": 0, "kafka_offset": 1}
        write_deltalake(table, pa.Table.from_pylist([row], schema=ACTIVE_TOPICS.schema), mode="append")
        changed = session.get(path, headers={"If-None-Match": etag}, timeout=10)
        assert (changed.status_code, changed.json()) == (200, {"c": {"topics": ["orders"]}})
        assert changed.headers.get("ETag") not in (None, etag)
