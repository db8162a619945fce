"""``clusters``: the Connect clusters the API answers for (``GET /clusters``), each with its health; ``*`` marks the
one the commands talk to (``--cluster``, ``CONNECT_STATE_CLI_CLUSTER`` or the context's ``cluster``; else the API's
default); a chosen id the API does not list is an error (exit code 3), after the list."""

from __future__ import annotations

from typing import Any

import click

from connect_state.cli.errors import NotFound
from connect_state.cli.output import emit, output_option, table
from connect_state.cli.session import Session, pass_session


@click.command()
@output_option
@pass_session
def clusters(session: Session, output: str) -> None:
    """The Connect clusters the API answers for, with their health; * marks the one the commands talk to."""
    client = session.client()
    listed = client.get("/clusters", root=True)

    def rows(found: Any) -> str:
        chosen = client.cluster or next((c.get("id") for c in found if c.get("default")), None)
        return table(
            ["CURRENT", "ID", "DEFAULT", "GROUP.ID", "BOOTSTRAP.SERVERS", "HEALTH"],
            [
                ["*" if c.get("id") == chosen else "", c.get("id"), c.get("default"), c.get("group.id"),
                 c.get("bootstrap.servers"), (c.get("health") or {}).get("status")]
                for c in found
            ],
        )  # fmt: skip

    emit(listed, output, rows)
    if client.cluster is not None and client.cluster not in {c.get("id") for c in listed}:
        raise NotFound(404, f"Cluster {client.cluster} not found")


def register(root: click.Group) -> None:
    root.add_command(clusters)
