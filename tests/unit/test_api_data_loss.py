"""``GET /data-loss`` (api/data_loss.py): the records the jobs could not read, from the ``data_loss`` table."""

from __future__ import annotations

import datetime as dt
from typing import Any

from connect_state.tables.schemas import DATA_LOSS
from tests.unit.conftest import MakeClient
from tests.unit.fakes import InMemoryTables

UTC = dt.UTC


def loss(query: str, topic: str, partition: int, expected: int, earliest: int | None, cause: str, second: int) -> dict:
    return {
        "query": query,
        "topic": topic,
        "partition": partition,
        "expected_offset": expected,
        "earliest_offset": earliest,
        "cause": cause,
        "batch_id": 7,
        "detected_at": dt.datetime(2025, 5, 1, 12, 0, second, 250_000, tzinfo=UTC),
    }


ROWS = [
    loss("active_topics", "connect-status", 2, 10, 14, "records_deleted", 1),
    loss("source_offsets", "own-offsets", 0, 5, None, "partition_gone", 3),
]


def test_every_loss_newest_first(make_client: MakeClient) -> None:
    client = make_client(tables=InMemoryTables({DATA_LOSS.name: ROWS}))
    response = client.get("/data-loss")
    assert response.status_code == 200
    body: dict[str, Any] = response.get_json()
    assert body == {
        "data_loss": [
            {
                "query": "source_offsets",
                "topic": "own-offsets",
                "partition": 0,
                "expected_offset": 5,
                "earliest_offset": None,
                "cause": "partition_gone",
                "batch_id": 7,
                "detected_at": "2025-05-01T12:00:03.250Z",
            },
            {
                "query": "active_topics",
                "topic": "connect-status",
                "partition": 2,
                "expected_offset": 10,
                "earliest_offset": 14,
                "cause": "records_deleted",
                "batch_id": 7,
                "detected_at": "2025-05-01T12:00:01.250Z",
            },
        ]
    }


def test_filters_by_query_and_topic(make_client: MakeClient) -> None:
    client = make_client(tables=InMemoryTables({DATA_LOSS.name: ROWS}))
    assert [r["topic"] for r in client.get("/data-loss?query=active_topics").get_json()["data_loss"]] == [
        "connect-status"
    ]
    assert client.get("/data-loss?topic=nope").get_json() == {"data_loss": []}


def test_503_until_a_job_created_the_table(make_client: MakeClient) -> None:
    response = make_client(tables=InMemoryTables({})).get("/data-loss")
    assert response.status_code == 503
    assert "data_loss" in response.get_json()["message"]
