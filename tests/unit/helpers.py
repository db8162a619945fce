"""Helpers shared by the API unit tests: Delta tables written with ``deltalake``, Connect's answers checked."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from connect_state.tables import TableSpec


def write_table(delta_root: Path, spec: TableSpec, rows: Iterable[Mapping[str, Any]], mode: str = "append") -> None:
    """Write ``rows`` to the table of ``spec`` under ``delta_root`` in the table's schema (missing columns null).

    The jobs write the same schema with Spark; ``mode="overwrite"`` replaces the rows, as a new table version.
    """
    write_deltalake(delta_root / spec.name, pa.Table.from_pylist(list(rows), schema=spec.schema), mode=mode)


def assert_connect_error(response: Any, status: int, message: str | None) -> None:
    """Connect's error body: ``{"error_code": status, "message": message}``, in that key order, as JSON."""
    assert response.status_code == status
    assert response.mimetype == "application/json"
    assert response.get_json() == {"error_code": status, "message": message}
    assert list(response.get_json()) == ["error_code", "message"]


def assert_no_content(response: Any, status: int) -> None:
    """An answer without a body and without a Content-Type (Connect's 202/204 answers)."""
    assert response.status_code == status
    assert response.get_data() == b""
    assert "Content-Type" not in response.headers
