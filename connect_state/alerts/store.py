"""The alerts job's Delta I/O through ``deltalake`` (no Spark): the conditions read from the tables the other jobs
write, the job's own ``alerts`` and ``alert_deliveries``, and the ``alert_silences`` the API writes.

The conditions: a ``connector_verdicts`` row (the verdicts job's; no table yet: no verdict condition); a
``connector_deletions`` step whose status is ``failed``; a source partition whose latest ``heartbeats`` row failed or
timed out (since the first of its failures in a row); a ``data_loss`` row.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError

from connect_state.alerts.channels import Channel, ChannelKind
from connect_state.alerts.engine import Alert, AlertState, Condition, Event, Silence
from connect_state.alerts.reconciler import Delivery, DeliveryStatus, SendResult
from connect_state.alerts.rules import ConditionKind, Severity
from connect_state.core.settings import Settings
from connect_state.core.storage import deltalake_options
from connect_state.tables import small_writes
from connect_state.tables.merge_spec import MergeSpec, matched_update, not_matched_insert, source_values
from connect_state.tables.schemas import (
    ALERT_DELIVERIES,
    ALERT_SILENCES,
    ALERTS,
    CONNECTOR_DELETIONS,
    DATA_LOSS,
    HEARTBEATS,
    TABLE_PROPERTIES,
    TableSpec,
    epoch_ms,
    timestamp,
)

#: The verdicts job's table: one row per connector (connector, verdict, since, evidence, updated).
VERDICTS_TABLE = "connector_verdicts"
_HEARTBEAT_FAILURES = ("failed", "timed_out")


def upsert_merge(spec: TableSpec) -> MergeSpec:
    condition = " AND ".join(f"t.`{k}` = s.`{k}`" for k in spec.key)
    values = source_values(spec.column_names)
    return MergeSpec(condition, (matched_update(values), not_matched_insert(values)))


class DeltaTables:
    """Reads and upserts of the tables under ``delta.root``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.options = deltalake_options(settings)

    def path(self, name: str) -> str:
        return str(self.settings.table_path(name))

    def rows(self, name: str, columns: list[str]) -> list[dict[str, Any]]:
        """``columns`` of every row of table ``name``; none while the table does not exist."""
        try:
            return small_writes.read(self.path(name), columns, self.options).to_pylist()
        except DeltaTableNotFoundError:
            return []

    def upsert(self, spec: TableSpec, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert or replace ``rows`` by ``spec``'s key (the table is created when absent)."""
        if not rows:
            return
        path = self.path(spec.name)
        with small_writes.commit_lock(path):
            small_writes.open_or_create(path, spec, TABLE_PROPERTIES, self.options)
        source = pa.Table.from_pylist([dict(row) for row in rows], schema=spec.schema)
        small_writes.merge_rows(source, path, upsert_merge(spec), self.options)


# --- the conditions ---------------------------------------------------------------------------------------------


def verdict_conditions(rows: Iterable[Mapping[str, Any]]) -> list[Condition]:
    return [
        Condition(
            ConditionKind.VERDICT,
            str(row["connector"]),
            "",
            epoch_ms(row.get("since") or row.get("updated")) or 0,
            str(row.get("evidence") or ""),
            values={"verdict": str(row["verdict"])},
        )
        for row in rows
        if row.get("connector") and row.get("verdict")
    ]


def cleanup_conditions(rows: Iterable[Mapping[str, Any]]) -> list[Condition]:
    return [
        Condition(
            ConditionKind.CLEANUP_FAILED,
            str(row["connector"]),
            f"{row['step']} of the deletion at offset {row['deletion_offset']}",
            epoch_ms(row.get("updated_at") or row.get("deleted_at")) or 0,
            str(row.get("error") or row.get("detail") or ""),
            {"step": str(row["step"]), "deletion_offset": str(row["deletion_offset"])},
        )
        for row in rows
        if row.get("status") == "failed"
    ]


def heartbeat_conditions(rows: Iterable[Mapping[str, Any]]) -> list[Condition]:
    """A partition whose latest heartbeat failed or timed out, since the first failure of its last run of them."""
    by_partition: dict[tuple[str, bytes], list[Mapping[str, Any]]] = {}
    for row in rows:
        by_partition.setdefault((str(row["connector"]), bytes(row["source_key"] or b"")), []).append(row)
    conditions = []
    for (connector, _), history in by_partition.items():
        history.sort(key=lambda r: (epoch_ms(r["emitted_at"]) or 0, r.get("record_index") or 0))
        failing = []
        for row in reversed(history):
            if row["outcome"] not in _HEARTBEAT_FAILURES:
                break
            failing.append(row)
        if failing:
            last, first = failing[0], failing[-1]
            conditions.append(
                Condition(
                    ConditionKind.HEARTBEAT_FAILED,
                    connector,
                    str(last.get("partition") or ""),
                    epoch_ms(first["emitted_at"]) or 0,
                    str(last.get("error") or last["outcome"]),
                    values={"outcome": str(last["outcome"]), "failures": str(len(failing))},
                )
            )
    return conditions


def data_loss_conditions(rows: Iterable[Mapping[str, Any]]) -> list[Condition]:
    conditions = []
    for row in rows:
        lost = f"{row['query']}: {row['topic']}-{row['partition']} from offset {row['expected_offset']}"
        earliest = row.get("earliest_offset")
        detail = f"earliest offset still there: {earliest}" if earliest is not None else "the partition is gone"
        labels = {"query": str(row["query"]), "topic": str(row["topic"]), "partition": str(row["partition"]),
                  "cause": str(row.get("cause") or "")}  # fmt: skip
        conditions.append(
            Condition(ConditionKind.DATA_LOSS, None, lost, epoch_ms(row["detected_at"]) or 0, detail, labels)
        )
    return conditions


# --- rows <-> records -------------------------------------------------------------------------------------------


def alert_row(alert: Alert) -> dict[str, Any]:
    return {
        "id": alert.id,
        "rule": alert.rule,
        "kind": str(alert.when),
        "connector": alert.connector,
        "subject": alert.subject,
        "severity": str(alert.severity),
        "summary": alert.summary,
        "detail": alert.detail,
        "labels": json.dumps(dict(alert.labels), sort_keys=True),
        "values": json.dumps(dict(alert.values), sort_keys=True),
        "state": str(alert.state),
        "started_at": timestamp(alert.started_at),
        "fired_at": timestamp(alert.fired_at),
        "resolved_at": timestamp(alert.resolved_at),
        "notified": alert.notified,
        "silenced": alert.silenced,
        "updated_at": timestamp(alert.updated_at),
    }


def alert_of(row: Mapping[str, Any]) -> Alert:
    return Alert(
        id=row["id"],
        rule=row["rule"],
        when=ConditionKind(row["kind"]),
        connector=row["connector"],
        subject=row["subject"] or "",
        severity=Severity(row["severity"]),
        summary=row["summary"] or "",
        detail=row["detail"] or "",
        labels=json.loads(row["labels"] or "{}"),
        state=AlertState(row["state"]),
        started_at=epoch_ms(row["started_at"]),
        fired_at=epoch_ms(row["fired_at"]),
        resolved_at=epoch_ms(row["resolved_at"]),
        notified=bool(row["notified"]),
        silenced=bool(row["silenced"]),
        updated_at=epoch_ms(row["updated_at"]) or 0,
        values=json.loads(row["values"] or "{}"),
    )


def delivery_row(delivery: Delivery) -> dict[str, Any]:
    return {
        "alert_id": delivery.alert_id,
        "event": str(delivery.event),
        "channel": delivery.channel,
        "kind": str(delivery.kind),
        "status": str(delivery.status),
        "attempts": delivery.attempts,
        "created_at": timestamp(delivery.created_at),
        "next_attempt_at": timestamp(delivery.next_attempt_at),
        "delivered_at": timestamp(delivery.delivered_at),
        "http_status": delivery.http_status,
        "last_error": delivery.last_error,
        "latency_ms": delivery.latency_ms,
    }


def delivery_of(row: Mapping[str, Any]) -> Delivery:
    return Delivery(
        alert_id=row["alert_id"],
        event=Event(row["event"]),
        channel=row["channel"],
        kind=ChannelKind(row["kind"]),
        status=DeliveryStatus(row["status"]),
        created_at=epoch_ms(row["created_at"]),
        next_attempt_at=epoch_ms(row["next_attempt_at"]),
        attempts=int(row["attempts"] or 0),
        delivered_at=epoch_ms(row["delivered_at"]),
        last_error=row["last_error"],
        http_status=row["http_status"],
        latency_ms=row["latency_ms"],
    )


def silence_row(silence: Silence) -> dict[str, Any]:
    return {
        "id": silence.id,
        "connector": silence.connector,
        "starts_at": timestamp(silence.starts_at),
        "ends_at": timestamp(silence.ends_at),
        "created_by": silence.created_by,
        "comment": silence.comment,
        "lifted_at": timestamp(silence.lifted_at),
        "lifted_by": silence.lifted_by,
    }


def silence_of(row: Mapping[str, Any]) -> Silence:
    return Silence(
        id=row["id"],
        connector=row["connector"],
        starts_at=epoch_ms(row["starts_at"]),
        ends_at=epoch_ms(row["ends_at"]),
        created_by=row["created_by"] or "",
        comment=row["comment"] or "",
        lifted_at=epoch_ms(row["lifted_at"]),
        lifted_by=row["lifted_by"],
    )


class SilenceStore:
    """The ``alert_silences`` table: what the API writes and the job reads."""

    def __init__(self, settings: Settings) -> None:
        self.tables = DeltaTables(settings)

    def all(self) -> list[Silence]:
        return [silence_of(row) for row in self.tables.rows(ALERT_SILENCES.name, ALERT_SILENCES.column_names)]

    def put(self, silences: Sequence[Silence]) -> None:
        self.tables.upsert(ALERT_SILENCES, [silence_row(s) for s in silences])


class DeltaAlertsIO:
    """:class:`~connect_state.alerts.reconciler.AlertsIO` on the Delta tables, sending through ``sender``."""

    def __init__(self, settings: Settings, sender: Any) -> None:
        self.tables = DeltaTables(settings)
        self.silence_store = SilenceStore(settings)
        self.sender = sender

    def conditions(self, now_ms: int) -> list[Condition]:
        rows = self.tables.rows
        return [
            *verdict_conditions(rows(VERDICTS_TABLE, ["connector", "verdict", "since", "evidence"])),
            *cleanup_conditions(
                rows(
                    CONNECTOR_DELETIONS.name,
                    ["connector", "deletion_offset", "step", "status", "error", "detail", "deleted_at", "updated_at"],
                )
            ),
            *heartbeat_conditions(
                rows(
                    HEARTBEATS.name,
                    ["connector", "partition", "source_key", "outcome", "error", "emitted_at", "record_index"],
                )
            ),
            *data_loss_conditions(rows(DATA_LOSS.name, DATA_LOSS.column_names)),
        ]

    def silences(self) -> list[Silence]:
        return self.silence_store.all()

    def _alerts(self) -> list[Alert]:
        return [alert_of(row) for row in self.tables.rows(ALERTS.name, ALERTS.column_names)]

    def open_alerts(self) -> list[Alert]:
        return [alert for alert in self._alerts() if alert.open]

    def alerts(self, ids: Iterable[str]) -> list[Alert]:
        wanted = set(ids)
        return [alert for alert in self._alerts() if alert.id in wanted] if wanted else []

    def pending_deliveries(self) -> list[Delivery]:
        rows = self.tables.rows(ALERT_DELIVERIES.name, ALERT_DELIVERIES.column_names)
        return [delivery_of(row) for row in rows if row["status"] == DeliveryStatus.PENDING]

    def record_alerts(self, alerts: Sequence[Alert]) -> None:
        self.tables.upsert(ALERTS, [alert_row(alert) for alert in alerts])

    def record_deliveries(self, deliveries: Sequence[Delivery]) -> None:
        self.tables.upsert(ALERT_DELIVERIES, [delivery_row(d) for d in deliveries])

    def send(self, channel: Channel, data: bytes) -> SendResult:
        result: SendResult = self.sender.send(channel, data)
        return result
