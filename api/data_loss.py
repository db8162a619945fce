"""Records the jobs could not read: ``GET /data-loss`` from the ``data_loss`` table.

Connect has no such endpoint. A streaming query that finds records gone before it read them (retention or
``deleteRecords`` past its checkpoint, a deleted or recreated topic) goes on from the earliest offset still there and
records what it lost (:mod:`connect_state.progress.positions`). The answer is 200 with every loss, newest first::

    {"data_loss": [{"query": "source_offsets", "topic": "own-offsets", "partition": 0, "expected_offset": 12,
                    "earliest_offset": null, "cause": "partition_gone", "batch_id": 7,
                    "detected_at": "2025-05-01T12:00:00.000Z"}, ...]}

``?query=`` and ``?topic=`` narrow it down. An empty list means no query has lost anything; 503 until a job has
created the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flask import Blueprint, Response, jsonify, request

from connect_state.api.openapi import ANY, documented, json_answer
from connect_state.api.resources import get_tables
from connect_state.tables.schemas import DATA_LOSS, iso_utc

bp = Blueprint("data_loss", __name__)


def data_loss_body(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The response body: every row, newest first (then by query, topic, partition)."""
    ordered = sorted(
        rows,
        key=lambda row: (
            -(row["detected_at"].timestamp() if row.get("detected_at") else 0.0),
            str(row["query"]),
            str(row["topic"]),
            int(row["partition"]),
            int(row["expected_offset"]),
        ),
    )
    return {
        "data_loss": [
            {
                "query": row["query"],
                "topic": row["topic"],
                "partition": row["partition"],
                "expected_offset": row["expected_offset"],
                "earliest_offset": row.get("earliest_offset"),
                "cause": row.get("cause"),
                "batch_id": row.get("batch_id"),
                "detected_at": iso_utc(row.get("detected_at")),
            }
            for row in ordered
        ]
    }


@bp.get("/data-loss")
@documented("Records the jobs expected and could not read", {"200": json_answer(ANY, "Data loss")})
def get_data_loss() -> Response:
    """Every data loss the jobs recorded, newest first (``?query=``, ``?topic=`` filter)."""
    filters = [(column, "=", request.args[column]) for column in ("query", "topic") if request.args.get(column)]
    return jsonify(data_loss_body(get_tables().rows(DATA_LOSS, filters=filters or None)))
