"""The bodies of the notifications, one per channel kind (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from connect_state.alerts.channels import ChannelKind
from connect_state.alerts.engine import Alert, Event
from connect_state.core.clusters import CLUSTER_LABEL

SOURCE = "connect-state"


def iso(ms: int | None) -> str | None:
    """Epoch ms as RFC 3339 UTC with milliseconds (Alertmanager's ``startsAt``)."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def labels_of(alert: Alert, cluster: str | None = None) -> dict[str, str]:
    """The alert's identity as Alertmanager labels: alertname, severity, kind, the Connect cluster
    (:data:`~connect_state.core.clusters.CLUSTER_LABEL`, when the deployment names it:
    :func:`connect_state.core.clusters.cluster_label`), connector, subject and the condition's own (the step, the
    topic...), none of which changes while the alert lasts."""
    labels = {"alertname": alert.rule, "severity": str(alert.severity), "kind": str(alert.when), "source": SOURCE}
    if cluster is not None:
        labels[CLUSTER_LABEL] = cluster
    if alert.connector is not None:
        labels["connector"] = alert.connector
    if alert.subject:
        labels["subject"] = alert.subject
    for name, value in alert.labels.items():
        labels.setdefault(name, value)
    return labels


def webhook_body(
    alert: Alert, event: Event, now_ms: int, generator_url: str, cluster: str | None = None
) -> dict[str, Any]:
    """The generic JSON body; ``cluster`` only when the deployment names its clusters (a one-cluster deployment's
    bodies are as they were)."""
    data: dict[str, Any] = {
        "source": SOURCE,
        "status": str(event),
        "id": alert.id,
        "rule": alert.rule,
        "kind": str(alert.when),
        "severity": str(alert.severity),
        "connector": alert.connector,
        "subject": alert.subject,
        "summary": alert.summary,
        "detail": alert.detail,
        "labels": dict(alert.labels),
        "values": dict(alert.values),
        "started_at": iso(alert.started_at),
        "fired_at": iso(alert.fired_at),
        "resolved_at": iso(alert.resolved_at),
        "sent_at": iso(now_ms),
        "url": generator_url,
    }
    return data if cluster is None else {"cluster": cluster, **data}


_EMOJI = {Event.FIRING: ":rotating_light:", Event.RESOLVED: ":white_check_mark:"}


def slack_body(
    alert: Alert, event: Event, now_ms: int, generator_url: str, cluster: str | None = None
) -> dict[str, Any]:
    """Slack's incoming-webhook body: ``text`` (the notification's fallback) and Block Kit ``blocks``; the title
    names the cluster when the deployment names it."""
    where = f" ({cluster})" if cluster is not None else ""
    title = f"[{str(event).upper()}] {alert.rule}{where}: {alert.summary}"
    when = f"started {iso(alert.started_at)}" + (f", resolved {iso(alert.resolved_at)}" if alert.resolved_at else "")
    fields = [f"*Severity:* {alert.severity}", f"*Connector:* {alert.connector or '-'}"]
    if cluster is not None:
        fields.append(f"*Cluster:* {cluster}")
    if alert.subject:
        fields.append(f"*Subject:* {alert.subject}")
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"{_EMOJI[event]} *{_escape(title)}*"}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": _escape(text)} for text in fields]},
    ]
    if alert.detail:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"```{_escape(alert.detail[:2900])}```"}})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"{when} · <{generator_url}|details>"}]})
    return {"text": title, "blocks": blocks}


def _escape(text: str) -> str:
    """Slack's mrkdwn escapes: &, < and >."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def alertmanager_body(
    alert: Alert, event: Event, now_ms: int, generator_url: str, ends_after_ms: int, cluster: str | None = None
) -> list[Any]:
    """Alertmanager's ``POST /api/v2/alerts`` body: a list of one alert. A firing alert's ``endsAt`` is
    ``ends_after_ms`` from now (Alertmanager resolves it then unless it is sent again, as Prometheus does); a
    resolved one's is when it resolved."""
    ends = alert.resolved_at if event == Event.RESOLVED else now_ms + ends_after_ms
    annotations = {"summary": alert.summary, **alert.values}
    if alert.detail:
        annotations["description"] = alert.detail
    return [
        {
            "labels": labels_of(alert, cluster),
            "annotations": annotations,
            "startsAt": iso(alert.fired_at or alert.started_at),
            "endsAt": iso(ends),
            "generatorURL": generator_url,
        }
    ]


def body(
    kind: ChannelKind,
    alert: Alert,
    event: Event,
    now_ms: int,
    generator_url: str,
    ends_after_ms: int,
    cluster: str | None = None,
) -> bytes:
    """The JSON bytes a channel of ``kind`` is sent; ``cluster``: the alert's Connect cluster, when the deployment
    names it."""
    match kind:
        case ChannelKind.WEBHOOK:
            data: Any = webhook_body(alert, event, now_ms, generator_url, cluster)
        case ChannelKind.SLACK:
            data = slack_body(alert, event, now_ms, generator_url, cluster)
        case ChannelKind.ALERTMANAGER:
            data = alertmanager_body(alert, event, now_ms, generator_url, ends_after_ms, cluster)
    return json.dumps(data, ensure_ascii=False).encode()
