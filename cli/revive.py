"""``restore connector NAME [--at TIME] [--initial-state S] [--offsets]``: ours, ``POST /connectors/<name>/restore``:
a deleted connector created again with its last config (at or before ``--at``; default: the one its last deletion
removed), in KIP-980's initial state (``STOPPED`` by default); with ``--offsets`` (STOPPED only) its offsets as of that
time too (default: as of its deletion), shown per partition as ``offsets restore`` shows them. The answer never shows
the config; it says which cleanup hooks already ran for that deletion (what they removed is not restored).
"""

from __future__ import annotations

from typing import Any

import click

from connect_state.cli.client import connector_path
from connect_state.cli.output import emit, output_option, table
from connect_state.cli.session import Session, pass_session

INITIAL_STATES = ("RUNNING", "PAUSED", "STOPPED")


@click.group()
def restore() -> None:
    """Bring back what was deleted: a connector, with its last config."""


def _restore_text(body: Any) -> str:
    body = body or {}
    message = str(body.get("message", ""))
    entries = body.get("offsets")
    if not entries:
        return message
    rows = [[e.get("partition"), e.get("current"), e.get("restored"), e.get("change")] for e in entries]
    return table(["PARTITION", "CURRENT", "RESTORED", "CHANGE"], rows) + "\n" + message


@restore.command("connector")
@click.argument("name")
@click.option("--at", "at", help="The config at or before this time (epoch ms or ISO-8601); default: before deletion.")
@click.option(
    "--initial-state",
    type=click.Choice(INITIAL_STATES, case_sensitive=False),
    default="STOPPED",
    show_default=True,
    help="KIP-980's initial state of the connector restored.",
)
@click.option(
    "--offsets", "with_offsets", is_flag=True, help="Its offsets as of --at too (default: as of its deletion); STOPPED."
)
@output_option
@pass_session
def restore_connector(
    session: Session, name: str, at: str | None, initial_state: str, with_offsets: bool, output: str
) -> None:
    """Create a deleted connector again with its last config (secrets as written, never shown), and its offsets."""
    params = {"initial_state": initial_state.upper()}
    if at is not None:
        params["at"] = at
    if with_offsets:
        params["offsets"] = "true"
    answer = session.client().request("POST", connector_path(name, "restore"), params=params)
    emit(answer.body, output, _restore_text)


def register(root: click.Group) -> None:
    root.add_command(restore)
