"""Helpers shared by the API unit tests: Delta tables written with ``deltalake``, config-topic records in the
in-memory topics, Connect's answers checked."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

from connect_state.core.settings import Settings, load_settings
from connect_state.formats.config import (
    connector_config_key,
    delete_records,
    serialize_connector_config,
    serialize_target_state,
    target_state_key,
    task_config_records,
)
from connect_state.formats.status import TopicStatus, serialize_topic_status
from connect_state.tables.schemas import TableSpec


def write_table(
    delta_root: str | os.PathLike[str], spec: TableSpec, rows: Iterable[Mapping[str, Any]], mode: str = "append"
) -> None:
    """Write ``rows`` to the table of ``spec`` under ``delta_root`` in the table's schema (missing columns null).

    The jobs write the same schema with Spark; ``mode="overwrite"`` replaces the rows, as a new table version.
    """
    path = Path(delta_root, spec.name)
    write_deltalake(path, pa.Table.from_pylist(list(rows), schema=spec.schema), mode=mode)


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


# --- the config topic, in memory ------------------------------------------------------------------------------------


def write_config(topics: Any, records: Iterable[tuple[str, bytes | None]], topic: str = "connect-configs") -> None:
    """Append config-topic records (``(key, value)``, as :mod:`connect_state.formats.config` builds them)."""
    for key, value in records:
        topics.append(topic, 0, key.encode("utf-8"), value)


def configure(
    topics: Any,
    name: str,
    config: Mapping[str, str] | None = None,
    *,
    target_state: str | None = None,
    tasks: int | None = None,
    topic: str = "connect-configs",
) -> None:
    """What Connect writes for a connector: its target state (when given, first, as for ``initial_state``), its
    config, then ``tasks`` task configs and their commit (when given)."""
    records: list[tuple[str, bytes | None]] = []
    if target_state is not None:
        records.append((target_state_key(name), serialize_target_state(target_state)))
    properties = dict(config or {"connector.class": "FileStreamSource", "name": name})
    records.append((connector_config_key(name), serialize_connector_config(properties)))
    if tasks is not None:
        records += task_config_records(name, [{"task.id": str(task)} for task in range(tasks)])
    write_config(topics, records, topic)


def mirror_connectors(topics: Any, rows: Iterable[Mapping[str, Any]], topic: str = "connect-configs") -> None:
    """Write the config-topic records behind ``connectors`` table rows, so the config topic read to its end agrees
    with the table: a configured row gets its target state, config and task commit; a deleted one is configured then
    deleted with both tombstones (as Connect deletes); a row without config (status only) gets nothing."""
    for row in rows:
        if row.get("config") is None and not row.get("deleted"):
            continue
        config = json.loads(row["config"]) if row.get("config") is not None else {"connector.class": "X"}
        configure(
            topics,
            row["name"],
            config,
            target_state=row.get("target_state") or "STARTED",
            tasks=row.get("task_count") or 0,
            topic=topic,
        )
        if row.get("deleted"):
            write_config(topics, delete_records(row["name"]), topic)


def topic_status_value(topic: str, connector: str, task: int = 0, discover_timestamp: int = 1_746_009_337_985) -> bytes:
    """The value of a ``status-topic-<topic>:connector-<connector>`` record, as a worker writes it."""
    return serialize_topic_status(TopicStatus(topic, connector, task, discover_timestamp))


SOURCE_CONFIG = {"connector.class": "FileStreamSource", "file": "/tmp/in.txt", "topic": "t"}
"""A FileStream source's config, as the API tests' connectors have it."""


def connectors_row(name: str, **fields: Any) -> dict[str, Any]:
    """A ``connectors`` table row of a RUNNING :data:`SOURCE_CONFIG` source with one committed task (no task status);
    ``fields`` replace columns."""
    values: dict[str, Any] = {
        "name": name,
        "type": "source",
        "connector_class": SOURCE_CONFIG["connector.class"],
        "config": json.dumps(SOURCE_CONFIG, sort_keys=True),
        "target_state": "STARTED",
        "task_count": 1,
        "inconsistent": False,
        "connector_state": "RUNNING",
        "tasks": [],
        "deleted": False,
    }
    values.update(fields)
    return values


#: The columns that say when a row was written (``connect_state.spark.write_time``): tests that compare tables leave
#: them out, the pipelines' tests check them.
WRITE_TIME_COLUMNS = ("updated_at", "changed_at", "recorded_at", "seen_at")


def local_clusters(tmp_path: Path, *further: str, **more: str) -> Settings:
    """Settings of a deployment under ``tmp_path`` whose default cluster is ``connect-main`` and whose further
    clusters are ``further``, each ``<id>`` with the group ``connect-<id>`` and the status topic ``<id>-status``;
    ``more`` (property keys with ``_`` for ``.``, or a mapping's keys as they are) replaces any of them."""
    props = {
        "delta.root": str(tmp_path / "delta"),
        "checkpoint.root": str(tmp_path / "checkpoints"),
        "connect.group.id": "connect-main",
        "clusters": ",".join(further),
    }
    for cluster in further:
        props[f"clusters.{cluster}.connect.group.id"] = f"connect-{cluster}"
        props[f"clusters.{cluster}.status.storage.topic"] = f"{cluster}-status"
    return load_settings(overrides={**props, **more}, environ={})
