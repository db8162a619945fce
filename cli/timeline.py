"""``history``, ``deletions`` and ``heartbeats`` of a connector: the API's own endpoints over the history tables.

* ``history NAME``: the timeline, ``GET /connectors/<name>/events`` (oldest first, paged: ``--limit``, ``--offset``;
  ``--kind`` repeatable; ``--since``/``--until`` as epoch milliseconds or ISO-8601). A page that is not the last says
  on stderr where the next one starts.
* ``deletions NAME``: every deletion of the name and its KIP-883 cleanup steps, ``GET /connectors/<name>/deletions``.
* ``heartbeats NAME``: KIP-910, ``GET /connectors/<name>/heartbeats``: each source partition's idle age and next
  heartbeat, then the latest heartbeats.
"""

from __future__ import annotations

from typing import Any

import click

from connect_state.cli.client import connector_path
from connect_state.cli.output import NONE, cell, duration_ms, emit, epoch_ms, output_option, table
from connect_state.cli.session import Session, complete_connectors, pass_session

DETAILS_WIDTH = 100


def _details(details: Any) -> str:
    """An event's details as ``key=value`` pairs; a config as its key count (``-o json`` shows it, redacted)."""
    if not isinstance(details, dict):
        return cell(details)
    parts = []
    for key, value in details.items():
        shown = f"{len(value)} keys" if key == "config" and isinstance(value, dict) else cell(value)
        parts.append(f"{key}={shown}")
    text = " ".join(parts)
    return text if len(text) <= DETAILS_WIDTH else text[: DETAILS_WIDTH - 1] + "…"


def _events_table(body: Any) -> str:
    rows = [
        [
            epoch_ms(event.get("kafka_timestamp")),
            event.get("event"),
            event.get("source"),
            _details(event.get("details")),
        ]
        for event in body.get("events") or []
    ]
    return table(["TIME", "EVENT", "SOURCE", "DETAILS"], rows)


@click.command()
@click.argument("name", shell_complete=complete_connectors)
@click.option("--kind", multiple=True, help="Only events of this kind (repeatable): created, status_changed, ...")
@click.option("--since", metavar="TIME", help="From this time: epoch milliseconds or ISO-8601.")
@click.option("--until", metavar="TIME", help="Up to this time.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True, help="Events per page.")
@click.option("--offset", type=click.IntRange(0), default=0, show_default=True, help="Events to skip.")
@output_option
@pass_session
def history(
    session: Session,
    name: str,
    kind: tuple[str, ...],
    since: str | None,
    until: str | None,
    limit: int,
    offset: int,
    output: str,
) -> None:
    """A connector's timeline: created, reconfigured, state and task changes, deleted."""
    params: dict[str, Any] = {"kind": list(kind), "since": since, "until": until, "limit": limit, "offset": offset}
    body = session.client().get(connector_path(name, "events"), params)
    emit(body, output, _events_table)
    if body.get("next_offset") is not None:
        click.echo(
            f"{len(body['events'])} of {body['total']} events: --offset {body['next_offset']} for more", err=True
        )


def _steps(steps: list[dict[str, Any]]) -> str:
    return (
        ", ".join(
            f"{step.get('step')}: {step.get('status')}" + (f" ({step['error']})" if step.get("error") else "")
            for step in steps
        )
        or NONE
    )


def _deletions_table(body: Any) -> str:
    rows = [
        [d.get("deleted_at"), d.get("type"), d.get("status"), _steps(d.get("steps") or [])] for d in body["deletions"]
    ]
    return (
        table(["DELETED AT", "TYPE", "CLEANUP", "STEPS"], rows) if rows else f"No deletion of {body['name']} recorded."
    )


@click.command()
@click.argument("name", shell_complete=complete_connectors)
@output_option
@pass_session
def deletions(session: Session, name: str, output: str) -> None:
    """Every deletion of a connector name and its cleanup (KIP-883), newest first."""
    emit(session.client().get(connector_path(name, "deletions")), output, _deletions_table)


def _heartbeats_table(body: Any) -> str:
    partitions = [
        [
            p.get("partition"),
            p.get("offset"),
            duration_ms(p.get("idle_ms")),
            "yes" if p.get("eligible") else f"no: {p.get('reason')}",
            epoch_ms(p.get("next_heartbeat_at")),
        ]
        for p in body.get("partitions") or []
    ]
    sent = [
        [epoch_ms(h.get("emitted_at")), h.get("outcome"), h.get("partition"), h.get("committed_offset"), h.get("error")]
        for h in body.get("heartbeats") or []
    ]
    return "\n".join(
        (
            table(["PARTITION", "OFFSET", "IDLE", "ELIGIBLE", "NEXT HEARTBEAT"], partitions),
            "",
            table(["EMITTED AT", "OUTCOME", "PARTITION", "OFFSET", "ERROR"], sent),
        )
    )


@click.command()
@click.argument("name", shell_complete=complete_connectors)
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="Latest heartbeats shown.")
@output_option
@pass_session
def heartbeats(session: Session, name: str, limit: int, output: str) -> None:
    """A source connector's idle partitions and its latest heartbeats (KIP-910)."""
    emit(session.client().get(connector_path(name, "heartbeats"), {"limit": limit}), output, _heartbeats_table)


def register(root: click.Group) -> None:
    for command in (history, deletions, heartbeats):
        root.add_command(command)
