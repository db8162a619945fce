"""``availability [NAME]``: how available a connector (or every connector) was over a window,
``GET /connectors/<name>/availability`` or ``GET /availability`` (``--since``/``--until``: epoch milliseconds or
ISO-8601; the API's default: the 7 days until now).

The table shows the share of each state (running with every task running, degraded, failed, paused, stopped,
unknown), the failures, the time they took to recover (mean and worst) and the restarts; for one connector, then
its timeline (each stretch of one state), for every connector, one line each.
"""

from __future__ import annotations

from typing import Any

import click

from connect_state.cli.client import connector_path
from connect_state.cli.output import NONE, duration_ms, emit, epoch_ms, output_option, table
from connect_state.cli.session import Session, complete_connectors, pass_session

STATES = ("running", "degraded", "failed", "paused", "stopped", "unknown")
HEADERS = ["RUNNING", "DEGRADED", "FAILED", "PAUSED", "STOPPED", "UNKNOWN", "FAILURES", "RECOVERY MEAN", "WORST",
           "RESTARTS"]  # fmt: skip


def _percent(share: Any) -> str:
    return f"{share * 100:.2f}%" if isinstance(share, int | float) else NONE


def _figures(body: dict[str, Any]) -> list[Any]:
    shares = body.get("shares") or {}
    recovery = body.get("recovery") or {}
    return [
        *(_percent(shares.get(state)) for state in STATES),
        body.get("failures"),
        duration_ms(recovery.get("mean_ms")),
        duration_ms(recovery.get("worst_ms")),
        body.get("restarts"),
    ]


def _window(body: dict[str, Any]) -> str:
    line = f"{epoch_ms(body.get('since'))} .. {epoch_ms(body.get('until'))}"
    unknown = {reason: ms for reason, ms in (body.get("unknown_ms") or {}).items() if ms}
    if unknown:
        line += "; unknown: " + ", ".join(f"{reason} {duration_ms(ms)}" for reason, ms in unknown.items())
    return line


def _connector_table(body: dict[str, Any]) -> str:
    segments = [
        [epoch_ms(s.get("start")), epoch_ms(s.get("end")), duration_ms(s["end"] - s["start"]), s.get("state"),
         s.get("reason")]
        for s in body.get("segments") or []
    ]  # fmt: skip
    return "\n".join(
        (
            f"{body.get('connector')}: {_window(body)}",
            table(HEADERS, [_figures(body)]),
            "",
            table(["FROM", "UNTIL", "FOR", "STATE", "UNKNOWN BECAUSE"], segments),
        )
    )


def _fleet_table(body: dict[str, Any]) -> str:
    rows = [[c.get("connector"), *_figures(c)] for c in body.get("connectors") or []]
    rows.append([f"all {body.get('connector_count')}", *_figures(body)])
    return "\n".join((_window(body), table(["CONNECTOR", *HEADERS], rows)))


@click.command()
@click.argument("name", required=False, shell_complete=complete_connectors)
@click.option("--since", metavar="TIME", help="From this time: epoch milliseconds or ISO-8601 [default: 7 days ago].")
@click.option("--until", metavar="TIME", help="Up to this time (excluded) [default: now].")
@output_option
@pass_session
def availability(session: Session, name: str | None, since: str | None, until: str | None, output: str) -> None:
    """How available a connector, or every connector, was: share of time running, failures, recovery, restarts."""
    params = {"since": since, "until": until}
    if name is None:
        emit(session.client().get("/availability", params), output, _fleet_table)
    else:
        emit(session.client().get(connector_path(name, "availability"), params), output, _connector_table)


def register(root: click.Group) -> None:
    root.add_command(availability)
