"""``context set|use|list|delete``: the contexts file (:mod:`connect_state.cli.contexts`).

``set NAME`` creates a context or changes the settings given (an empty value removes one); the first context made
becomes the current one. A command that fails writes nothing. ``list`` never shows a secret (a value made only of
``${env:...}``/``${file:...}`` references is shown, it holds none).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import click

from connect_state.cli.contexts import Context
from connect_state.cli.errors import UsageProblem
from connect_state.cli.output import emit, output_option, table
from connect_state.cli.session import Session, complete_contexts, pass_session


@click.group()
def context() -> None:
    """The contexts: which API to talk to, with which credentials and TLS settings."""


@context.command("set")
@click.argument("name")
@click.option("--url", help="The API's base URL, e.g. https://connect-state.example:8090.")
@click.option(
    "--cluster", help="The Connect cluster to talk to (its id in GET /clusters) [default: the API's default]."
)
@click.option("--username", help="HTTP Basic user (with --password).")
@click.option("--password", help="HTTP Basic password; better a reference: '${env:NAME}'.")
@click.option("--token", help="Bearer token; better a reference: '${env:NAME}'.")
@click.option("--ca-file", help="CA certificates (PEM) to verify the API's certificate with.")
@click.option("--cert-file", help="Client certificate (PEM), for mutual TLS.")
@click.option("--key-file", help="The client certificate's key (PEM), unless it is in --cert-file.")
@click.option("--insecure/--no-insecure", default=None, help="Do not verify the API's certificate.")
@pass_session
def set_context(session: Session, name: str, **given: Any) -> None:
    """Create the context NAME or change its settings (an empty value removes a setting)."""
    contexts = session.contexts()
    changes: dict[str, Any] = {
        key: value or None if isinstance(value, str) else value for key, value in given.items() if value is not None
    }
    if name in contexts.contexts:
        updated = replace(contexts.contexts[name], **changes)
    elif changes.get("url"):
        updated = Context(**changes)
    else:
        raise UsageProblem(f"context {name!r} is new: --url is required")
    if not updated.url:
        raise UsageProblem(f"context {name}: url cannot be removed")
    updated.check(name)
    contexts.contexts[name] = updated
    if contexts.current is None:
        contexts.current = name
    contexts.save()
    click.echo(f"context {name} saved in {contexts.path}" + (" (current)" if contexts.current == name else ""))


@context.command("use")
@click.argument("name", shell_complete=complete_contexts)
@pass_session
def use_context(session: Session, name: str) -> None:
    """Make NAME the current context."""
    contexts = session.contexts()
    contexts.named(name)
    contexts.current = name
    contexts.save()
    click.echo(f"current context: {name}")


@context.command("list")
@output_option
@pass_session
def list_contexts(session: Session, output: str) -> None:
    """The contexts (secrets hidden); * marks the current one."""
    contexts = session.contexts()
    shown = {name: c.shown() for name, c in sorted(contexts.contexts.items())}
    doc = {"current-context": contexts.current, "contexts": shown}

    def rows(_doc: Any) -> str:
        tls = {
            name: ("insecure" if c.insecure else f"ca {c.ca_file}" if c.ca_file else "-")
            for name, c in contexts.contexts.items()
        }
        return table(
            ["CURRENT", "NAME", "URL", "CLUSTER", "AUTH", "TLS"],
            [
                ["*" if name == contexts.current else "", name, c.url, c.cluster, c.auth(), tls[name]]
                for name, c in sorted(contexts.contexts.items())
            ],
        )

    emit(doc, output, rows)


@context.command("delete")
@click.argument("name", shell_complete=complete_contexts)
@pass_session
def delete_context(session: Session, name: str) -> None:
    """Remove the context NAME (no current context is left when it was the current one)."""
    contexts = session.contexts()
    contexts.named(name)
    del contexts.contexts[name]
    if contexts.current == name:
        contexts.current = None
    contexts.save()
    click.echo(f"context {name} deleted")


def register(root: click.Group) -> None:
    root.add_command(context)
