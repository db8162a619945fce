"""History queries over the tables' history rows (issue 14): pure functions, no Flask, no Delta.

The API (:mod:`connect_state.api.history`) reads the rows and answers with these. Times are epoch milliseconds (the
tables' ``kafka_timestamp``: when Kafka stored the record), as :func:`connect_state.tables.schemas.epoch_ms` turns them;
"as of ``t``" means every record with a Kafka timestamp at or before ``t`` is applied.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from connect_state.security.redaction import redact_config
from connect_state.tables.schemas import epoch_ms

__all__ = [
    "config_versions",
    "offset_history",
    "parse_time",
    "sink_offsets_as_of",
    "source_offsets_as_of",
    "topic_usage",
    "topics_as_of",
]

Row = Mapping[str, Any]


_DIGITS = re.compile(r"-?\d+")


def parse_time(text: str) -> int:
    """A query's time: epoch milliseconds, or ISO-8601 (``2026-11-22T10:00:00Z``; no zone means UTC). ValueError if
    neither."""
    text = text.strip()
    if _DIGITS.fullmatch(text):
        return int(text)
    parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)


def _order(row: Row) -> tuple[int, int, int]:
    return (epoch_ms(row.get("kafka_timestamp")) or 0, int(row.get("kafka_partition") or 0), int(row["kafka_offset"]))


def _last_per(rows: Iterable[Row], key: Any, at_ms: int | None) -> dict[Any, Row]:
    last: dict[Any, Row] = {}
    for row in sorted(rows, key=_order):
        if at_ms is not None and (epoch_ms(row.get("kafka_timestamp")) or 0) > at_ms:
            continue
        last[key(row)] = row
    return last


def topics_as_of(rows: Iterable[Row], at_ms: int | None) -> list[str]:
    """A connector's active topics as of ``at_ms`` from its ``active_topics_history`` rows: each topic's last change
    at or before then, unless that change is a removal (sorted)."""
    last = _last_per(rows, lambda r: r["topic"], at_ms)
    return sorted(topic for topic, row in last.items() if row["change"] != "removed")


def source_offsets_as_of(rows: Iterable[Row], at_ms: int | None) -> list[dict[str, object]]:
    """A source connector's offsets as of ``at_ms`` from ``source_offsets_history`` rows: per offsets topic and key,
    the last record at or before then unless it was a tombstone; Connect's ``{"partition", "offset"}`` entries plus
    the offsets topic and the record's Kafka timestamp."""
    last = _last_per(rows, lambda r: (r["offsets_topic"], bytes(r["key"] or b"")), at_ms)
    entries = []
    for (topic, _), row in sorted(last.items(), key=lambda item: (item[0][0], str(item[1]["partition"]))):
        if row["change"] == "removed" or row.get("offset") is None:
            continue
        entries.append(
            {
                "partition": json.loads(row["partition"]) if row.get("partition") else None,
                "offset": json.loads(row["offset"]),
                "offsets_topic": topic,
                "kafka_timestamp": epoch_ms(row.get("kafka_timestamp")),
            }
        )
    return entries


def sink_offsets_as_of(rows: Iterable[Row], at_ms: int | None) -> list[dict[str, object]]:
    """A sink connector's committed offsets as of ``at_ms`` from its group's ``sink_offsets_history`` rows, in
    Connect's sink shape (``{"kafka_topic", "kafka_partition"}`` / ``{"kafka_offset"}``) plus the Kafka timestamp."""
    last = _last_per(rows, lambda r: (r["topic"], int(r["partition"])), at_ms)
    return [
        {
            "partition": {"kafka_topic": topic, "kafka_partition": partition},
            "offset": {"kafka_offset": int(row["offset"])},
            "kafka_timestamp": epoch_ms(row.get("kafka_timestamp")),
        }
        for (topic, partition), row in sorted(last.items())
        if row["change"] != "removed" and row.get("offset") is not None
    ]


def offset_history(rows: Iterable[Row], sink: bool) -> list[dict[str, object]]:
    """One partition's offset records in order: ``change`` (set / removed), ``offset`` (JSON for a source, Connect's
    ``{"kafka_offset"}`` for a sink; null when removed) and the Kafka timestamp."""
    history = []
    for row in sorted(rows, key=_order):
        offset: object
        if row.get("offset") is None or row["change"] == "removed":
            offset = None
        elif sink:
            offset = {"kafka_offset": int(row["offset"])}
        else:
            offset = json.loads(row["offset"])
        history.append({"change": row["change"], "offset": offset, "kafka_timestamp": epoch_ms(row["kafka_timestamp"])})
    return history


def topic_usage(history: Iterable[Row], active: Iterable[Row]) -> list[dict[str, object]]:
    """Which connectors use or used a topic: from the topic's ``active_topics_history`` rows, per connector the first
    and last time a record about it was seen (Kafka timestamps), whether it is in the connector's active topics now
    (``active_topics`` rows), sorted by connector."""
    seen: dict[str, list[int]] = {}
    for row in history:
        ts = epoch_ms(row.get("kafka_timestamp")) or 0
        first_last = seen.setdefault(row["connector"], [ts, ts])
        first_last[0], first_last[1] = min(first_last[0], ts), max(first_last[1], ts)
    now = {row["connector"] for row in active}
    for connector in now - seen.keys():
        seen[connector] = [0, 0]
    return [
        {
            "connector": connector,
            "first_seen": first or None,
            "last_seen": last or None,
            "active": connector in now,
        }
        for connector, (first, last) in sorted(seen.items())
    ]


def _diff(before: Mapping[str, object], after: Mapping[str, object]) -> dict[str, object]:
    return {
        "added": {k: after[k] for k in sorted(after.keys() - before.keys())},
        "removed": {k: before[k] for k in sorted(before.keys() - after.keys())},
        "changed": {
            k: {"from": before[k], "to": after[k]}
            for k in sorted(before.keys() & after.keys())
            if json.dumps(before[k], sort_keys=True) != json.dumps(after[k], sort_keys=True)
        },
    }


def config_versions(
    events: Iterable[Row], patterns: Iterable[re.Pattern[str]] | None = None
) -> list[dict[str, object]]:
    """A connector's config versions from its ``connector_events`` rows (``created``, ``reconfigured``, ``deleted``,
    in config-topic order): per version its number (from 1), the event, the config (secrets redacted by
    :func:`~connect_state.security.redaction.redact_config`; null for a deletion, or when the event was recorded before
    configs were kept in events), what changed from the previous version (``added`` / ``removed`` / ``changed``,
    redacted alike; null when either config is unknown), the changed keys, and the record's offset and timestamp."""
    compiled = tuple(patterns) if patterns is not None else None
    relevant = [row for row in events if row["event"] in ("created", "reconfigured", "deleted")]
    versions: list[dict[str, object]] = []
    previous: dict[str, object] | None = None
    for number, row in enumerate(sorted(relevant, key=lambda r: int(r["kafka_offset"])), start=1):
        details = json.loads(row["details"]) if row.get("details") else {}
        config = details.get("config") if row["event"] != "deleted" else None
        redacted = redact_config(config, compiled)
        if row["event"] == "deleted":
            changes = None
            changed_keys = sorted(previous) if previous is not None else []
        elif row["event"] == "created":
            changes = _diff({}, redacted) if redacted is not None else None
            changed_keys = sorted(redacted or {})
        else:
            changes = _diff(previous, redacted) if previous is not None and redacted is not None else None
            changed_keys = list(details.get("changed_keys") or [])
        versions.append(
            {
                "version": number,
                "event": row["event"],
                "config": redacted,
                "changes": changes,
                "changed_keys": changed_keys,
                "kafka_offset": int(row["kafka_offset"]),
                "kafka_timestamp": epoch_ms(row.get("kafka_timestamp")),
            }
        )
        previous = redacted if row["event"] != "deleted" else None
    return versions
