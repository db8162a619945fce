"""``offsets get|patch|reset|restore NAME``: KIP-875's ``GET``, ``PATCH`` and ``DELETE /connectors/<name>/offsets``,
and ours, ``POST /connectors/<name>/offsets/restore?at=<time>`` (a dry run unless ``--apply``).

``patch`` sends a file (``-f FILE``, ``-f -`` for stdin) in Connect's PATCH body shape,
``{"offsets": [{"partition": {...}, "offset": {...} | null}]}``, as it is: the API checks it as Connect does (the
connector STOPPED, the partitions' shape for its type) and refuses with Connect's message. A file that is not JSON is
a usage error, and nothing is sent.
"""

from __future__ import annotations

import json
from typing import IO, Any

import click

from connect_state.cli.client import connector_path
from connect_state.cli.errors import UsageProblem
from connect_state.cli.output import emit, output_option, table
from connect_state.cli.session import Session, complete_connectors, pass_session


@click.group()
def offsets() -> None:
    """A connector's offsets (KIP-875): get, patch (STOPPED only), reset (STOPPED only), restore as of a time."""


def _offsets_table(body: Any) -> str:
    entries = body.get("offsets") or []
    return table(["PARTITION", "OFFSET"], [[entry.get("partition"), entry.get("offset")] for entry in entries])


def _message_table(body: Any) -> str:
    return str((body or {}).get("message", ""))


@offsets.command("get")
@click.argument("name", shell_complete=complete_connectors)
@output_option
@pass_session
def get_offsets(session: Session, name: str, output: str) -> None:
    """The connector's offsets, as Connect's GET /connectors/NAME/offsets answers them."""
    emit(session.client().get(connector_path(name, "offsets")), output, _offsets_table)


def _read_body(source: IO[str]) -> Any:
    try:
        return json.load(source)
    except ValueError as err:
        raise UsageProblem(f"{source.name} is not JSON: {err}") from None


@offsets.command("patch")
@click.argument("name", shell_complete=complete_connectors)
@click.option(
    "-f",
    "--file",
    "source",
    type=click.File("r", encoding="utf-8"),
    required=True,
    help='Connect\'s PATCH body: {"offsets":[{"partition":{...},"offset":{...}}]}; - for stdin.',
)
@output_option
@pass_session
def patch_offsets(session: Session, name: str, source: IO[str], output: str) -> None:
    """Alter a STOPPED connector's offsets (an offset of null removes the partition's)."""
    body = _read_body(source)
    answer = session.client().request("PATCH", connector_path(name, "offsets"), body=body)
    emit(answer.body, output, _message_table)


@offsets.command("reset")
@click.argument("name", shell_complete=complete_connectors)
@output_option
@pass_session
def reset_offsets(session: Session, name: str, output: str) -> None:
    """Reset a STOPPED connector's offsets: every source partition's, or the sink's consumer group."""
    answer = session.client().request("DELETE", connector_path(name, "offsets"))
    emit(answer.body, output, _message_table)


def _restore_table(body: Any) -> str:
    entries = body.get("offsets") or []
    rows = [[e.get("partition"), e.get("current"), e.get("restored"), e.get("change")] for e in entries]
    return table(["PARTITION", "CURRENT", "RESTORED", "CHANGE"], rows) + "\n" + str(body.get("message", ""))


@offsets.command("restore")
@click.argument("name", shell_complete=complete_connectors)
@click.option("--at", "at", required=True, help="The time to restore to: epoch milliseconds or ISO-8601.")
@click.option("--apply", is_flag=True, help="Write the difference (the connector must be STOPPED); default: dry run.")
@output_option
@pass_session
def restore_offsets(session: Session, name: str, at: str, apply: bool, output: str) -> None:
    """The difference between the offsets now and as of --at, per partition; written with --apply."""
    params = {"at": at, "apply": "true" if apply else "false"}
    answer = session.client().request("POST", connector_path(name, "offsets", "restore"), params=params)
    emit(answer.body, output, _restore_table)


def register(root: click.Group) -> None:
    root.add_command(offsets)
