"""``get connectors`` and ``describe connector NAME``.

``get connectors`` lists every connector (``GET /connectors``) with what ``GET /connectors?expand=status&expand=info``
``&expand=verdict`` says of it (Connect leaves out a connector without a status yet: it is listed with ``-``; the
verdict is connect-state's, issue 35: ``-`` from an API without it, which ignores the expansion as Connect does).
The table's columns are :data:`COLUMNS`; a module with more to say of each connector adds a column with
:func:`add_column` (its value may ask the API once per listing through :meth:`Listing.get`). ``-o json|yaml``: each
connector's expansion.

``describe connector NAME`` gathers ``GET /connectors/<name>`` (404 when it does not exist; its config redacted by the
API), ``/status``, ``/topics`` and ``/offsets``. ``-o json|yaml``: the four answers as they are (an error as Connect's
error body, e.g. ``/topics`` when topic tracking is disabled).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click

from connect_state.cli.client import ApiClient, connector_path
from connect_state.cli.errors import ApiError
from connect_state.cli.output import NONE, cell, emit, output_option, table
from connect_state.cli.session import Session, complete_connectors, pass_session

RUNNING = "RUNNING"


@dataclass
class Listing:
    """One ``get connectors``: the client, each connector's expansion, the answers columns asked for (once each)."""

    client: ApiClient
    entries: dict[str, Any]
    answers: dict[str, Any] = field(default_factory=dict)

    def get(self, path: str) -> Any:
        if path not in self.answers:
            self.answers[path] = self.client.get(path)
        return self.answers[path]


@dataclass(frozen=True)
class Column:
    header: str
    value: Callable[[Listing, str], Any]


def _status(listing: Listing, name: str) -> dict[str, Any]:
    return listing.entries[name].get("status") or {}


def _type(listing: Listing, name: str) -> Any:
    entry = listing.entries[name]
    return (entry.get("info") or {}).get("type") or _status(listing, name).get("type")


def _tasks(listing: Listing, name: str) -> str:
    tasks = _status(listing, name).get("tasks")
    if tasks is None:
        return NONE
    return f"{sum(1 for task in tasks if task.get('state') == RUNNING)}/{len(tasks)}"


#: The table's columns, in order. TASKS is running/total, from the tasks' statuses.
COLUMNS: list[Column] = [
    Column("NAME", lambda _listing, name: name),
    Column("TYPE", _type),
    Column("STATE", lambda listing, name: (_status(listing, name).get("connector") or {}).get("state")),
    Column("TASKS", _tasks),
    Column("VERDICT", lambda listing, name: (listing.entries[name].get("verdict") or {}).get("verdict")),
]


def add_column(column: Column) -> None:
    """One more column, at the end (a verdict per connector, say)."""
    COLUMNS.append(column)


@click.group()
def get() -> None:
    """List things."""


@get.command("connectors")
@output_option
@pass_session
def get_connectors(session: Session, output: str) -> None:
    """Every connector with its type, state, tasks running/total and verdict."""
    client = session.client()
    names = client.get("/connectors")
    expanded = client.get("/connectors", {"expand": ["status", "info", "verdict"]})
    listing = Listing(client, {name: expanded.get(name) or {} for name in names})
    emit(
        listing.entries,
        output,
        lambda entries: table(
            [column.header for column in COLUMNS],
            [[column.value(listing, name) for column in COLUMNS] for name in entries],
        ),
    )


def _answer(client: ApiClient, path: str) -> Any:
    """The body of ``GET path``, or Connect's error body when it answers an error."""
    try:
        return client.get(path)
    except ApiError as err:
        return {"error_code": err.status, "message": err.message}


def _is_error(body: Any) -> bool:
    return isinstance(body, dict) and "error_code" in body


def _section(title: str, body: Any, lines: Callable[[Any], list[str]]) -> list[str]:
    if _is_error(body):
        return [f"{title}: unavailable: {body['message']} (HTTP {body['error_code']})"]
    return [f"{title}:", *(f"  {line}" for line in lines(body))]


def _describe_table(doc: dict[str, Any]) -> str:
    info, status = doc["info"], doc["status"]
    connector = {} if _is_error(status) else status.get("connector") or {}
    state = f"{cell(connector.get('state'))} on {cell(connector.get('worker_id'))}" if connector else NONE
    lines = [f"Name:   {info['name']}", f"Type:   {cell(info.get('type'))}", f"State:  {state}"]
    config = sorted((info.get("config") or {}).items())
    lines += ["Config:", *(f"  {line}" for line in table(["KEY", "VALUE"], config).splitlines())]
    tasks = [] if _is_error(status) else status.get("tasks") or []
    rows = [
        [t.get("id"), t.get("state"), t.get("worker_id"), (t.get("trace") or "").split("\n")[0] or None] for t in tasks
    ]
    lines += _section("Tasks", rows, lambda r: table(["ID", "STATE", "WORKER", "TRACE"], r).splitlines())
    topics = doc["topics"]
    if not _is_error(topics):
        topics = {"topics": (topics.get(info["name"]) or {}).get("topics") or []}
    lines += _section("Topics", topics, lambda t: [", ".join(t["topics"]) or NONE])
    lines += _section(
        "Offsets",
        doc["offsets"],
        lambda o: table(
            ["PARTITION", "OFFSET"], [[e.get("partition"), e.get("offset")] for e in o.get("offsets") or []]
        ).splitlines(),
    )
    return "\n".join(lines)


@click.group()
def describe() -> None:
    """Show one thing in detail."""


@describe.command("connector")
@click.argument("name", shell_complete=complete_connectors)
@output_option
@pass_session
def describe_connector(session: Session, name: str, output: str) -> None:
    """A connector's config (secrets redacted by the API), status, tasks, topics and offsets."""
    client = session.client()
    doc = {"info": client.get(connector_path(name))}
    for part in ("status", "topics", "offsets"):
        doc[part] = _answer(client, connector_path(name, part))
    emit(doc, output, _describe_table)


def register(root: click.Group) -> None:
    root.add_command(get)
    root.add_command(describe)
