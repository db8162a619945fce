"""``fleet`` and ``move`` (issue 37): questions over every Connect cluster, and a connector moved between two.

* ``fleet [--state S] [--verdict V] [--topic T] [--name N] [--plugin-version P]``: ``GET /fleet/connectors``
  (asked at the API's root, whatever ``--cluster`` says): every cluster's connectors, one line each with its
  cluster; a cluster whose tables cannot be read is named after the list.
* ``move NAME --to CLUSTER``: ``POST /connectors/<name>/move?to=<cluster>`` under the cluster the commands talk to
  (``--cluster``): the STOPPED connector created STOPPED in ``CLUSTER`` with its config and offsets; the answer's
  offsets per partition, and the next steps.
"""

from __future__ import annotations

from typing import Any

import click

from connect_state.cli.client import connector_path
from connect_state.cli.output import emit, output_option, table
from connect_state.cli.session import Session, pass_session


def _fleet_text(body: Any) -> str:
    entries = (body or {}).get("connectors") or []
    rows = [
        [e.get("cluster"), e.get("name"), e.get("type"), e.get("version") or "-", e.get("state"),
         ",".join(str(t.get("state")) for t in e.get("tasks") or []), e.get("verdict"), ",".join(e.get("topics") or [])]
        for e in entries
    ]  # fmt: skip
    lines = [table(["CLUSTER", "NAME", "TYPE", "VERSION", "STATE", "TASKS", "VERDICT", "TOPICS"], rows)]
    lines += [f"unavailable: {u.get('cluster')}: {u.get('message')}" for u in (body or {}).get("unavailable") or []]
    return "\n".join(lines)


@click.command()
@click.option("--state", help="Only connectors in this Connect state (RUNNING, PAUSED, STOPPED, FAILED, ...).")
@click.option("--verdict", help="Only connectors with this verdict (stalled, failing, flapping, ...).")
@click.option("--topic", help="Only connectors whose active topics hold this topic.")
@click.option("--name", help="Only connectors of this name, in whichever clusters have one.")
@click.option("--plugin-version", help="Only connectors whose status reports this plugin version.")
@output_option
@pass_session
def fleet(
    session: Session,
    state: str | None,
    verdict: str | None,
    topic: str | None,
    name: str | None,
    plugin_version: str | None,
    output: str,
) -> None:
    """Every cluster's connectors in one list, or those in a state, with a verdict, on a topic, of a name or of a
    plugin version."""
    wanted = {"state": state, "verdict": verdict, "topic": topic, "name": name, "version": plugin_version}
    params = {key: value for key, value in wanted.items() if value is not None}
    emit(session.client().get("/fleet/connectors", params, root=True), output, _fleet_text)


def _move_text(body: Any) -> str:
    body = body or {}
    rows = [[e.get("partition"), e.get("before"), e.get("offset"), e.get("change")] for e in body.get("offsets") or []]
    message = str(body.get("message", ""))
    return (table(["PARTITION", "BEFORE", "OFFSET", "CHANGE"], rows) + "\n" + message) if rows else message


@click.command()
@click.argument("name")
@click.option("--to", "target", required=True, help="The id of the cluster to move the connector to.")
@output_option
@pass_session
def move(session: Session, name: str, target: str, output: str) -> None:
    """Copy a STOPPED connector's config and offsets to another cluster, where it is created STOPPED."""
    answer = session.client().request("POST", connector_path(name, "move"), params={"to": target})
    emit(answer.body, output, _move_text)


def register(root: click.Group) -> None:
    root.add_command(fleet)
    root.add_command(move)
