"""``restore connector NAME [--at TIME] [--initial-state S]``: ours, ``POST /connectors/<name>/restore``: a deleted
connector created again with its last config (at or before ``--at``; default: the one its last deletion removed), in
KIP-980's initial state (``STOPPED`` by default). The answer never shows the config; it says which cleanup hooks
already ran for that deletion (what they removed is not restored).
"""

from __future__ import annotations

from typing import Any

import click

from connect_state.cli.client import connector_path
from connect_state.cli.output import emit, output_option
from connect_state.cli.session import Session, pass_session

INITIAL_STATES = ("RUNNING", "PAUSED", "STOPPED")


@click.group()
def restore() -> None:
    """Bring back what was deleted: a connector, with its last config."""


def _restore_text(body: Any) -> str:
    return str((body or {}).get("message", ""))


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
@output_option
@pass_session
def restore_connector(session: Session, name: str, at: str | None, initial_state: str, output: str) -> None:
    """Create a deleted connector again with its last config (secrets as written, never shown)."""
    params = {"initial_state": initial_state.upper()}
    if at is not None:
        params["at"] = at
    answer = session.client().request("POST", connector_path(name, "restore"), params=params)
    emit(answer.body, output, _restore_text)


def register(root: click.Group) -> None:
    root.add_command(restore)
