"""``pause|resume|stop|restart connector NAME... | -e REGEX``: Connect's target-state and restart requests through the
API, on one connector or many (:mod:`connect_state.cli.bulk`).

``restart`` takes Connect's ``includeTasks`` and ``onlyFailed`` (``--include-tasks``, ``--only-failed``); with either
the API answers the restart plan (what restarts shown ``RESTARTING``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import click

from connect_state.cli import bulk
from connect_state.cli.client import Answer, connector_path
from connect_state.cli.output import OutputFormat, document, output_option
from connect_state.cli.session import Session, complete_connectors, pass_session

RESTARTING = "RESTARTING"


class Verb(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"
    RESTART = "restart"


@dataclass(frozen=True)
class Action:
    verb: Verb
    method: str
    done: str
    params: Mapping[str, str] = field(default_factory=dict)

    def call(self, session: Session) -> Callable[[str], Answer]:
        client = session.client()
        return lambda name: client.request(self.method, connector_path(name, self.verb.value), self.params or None)


def describe_restart(outcome: bulk.Outcome) -> str:
    """What a restart plan (202) restarts; a 204 restarts the connector alone."""
    plan = outcome.body
    if not isinstance(plan, dict):
        return "restart requested"
    what = ["connector"] if (plan.get("connector") or {}).get("state") == RESTARTING else []
    tasks = sum(1 for task in plan.get("tasks") or [] if task.get("state") == RESTARTING)
    if tasks:
        what.append(f"{tasks} task{'s' if tasks != 1 else ''}")
    return f"restarting {' and '.join(what)}" if what else "restart requested (nothing to restart)"


def act(
    session: Session,
    action: Action,
    names: tuple[str, ...],
    regex: tuple[str, ...],
    yes: bool,
    dry_run: bool,
    output: str,
) -> None:
    """Select, confirm, act, report (:mod:`connect_state.cli.bulk`)."""
    patterns = bulk.compile_patterns(regex)
    targets = bulk.select(session.client(), names, patterns)
    fmt = OutputFormat(output)
    if dry_run:
        click.echo("\n".join(targets) if fmt == OutputFormat.TABLE else document(targets, fmt))
        return
    bulk.confirm(action.verb.value.capitalize(), targets, ask=bool(patterns) or len(targets) > 1, yes=yes)
    describe: Callable[[bulk.Outcome], str] = (
        describe_restart if action.verb == Verb.RESTART else (lambda _outcome: action.done)
    )
    outcomes = bulk.run(targets, action.call(session), describe, to_stderr=fmt != OutputFormat.TABLE)
    if fmt != OutputFormat.TABLE:
        click.echo(document([outcome.as_dict() for outcome in outcomes], fmt))
    bulk.finish(outcomes)


def _selection(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options every action takes: names, ``-e``, ``--yes``, ``--dry-run``, ``-o``."""
    for decorator in reversed(
        (
            click.argument("names", nargs=-1, metavar="[NAME]...", shell_complete=complete_connectors),
            click.option(
                "-e",
                "--regex",
                multiple=True,
                metavar="REGEX",
                help="Every connector whose whole name matches (repeatable).",
            ),
            click.option("-y", "--yes", is_flag=True, help="Do not ask before acting on several connectors."),
            click.option("--dry-run", is_flag=True, help="Print the connectors it would act on, do nothing."),
            output_option,
            pass_session,
        )
    ):
        function = decorator(function)
    return function


def _verb_group(verb: Verb, command: click.Command) -> click.Group:
    group = click.Group(verb.value, help=f"{verb.value.capitalize()} connectors.")
    group.add_command(command, "connector")
    return group


def _simple(verb: Verb, done: str) -> click.Group:
    action = Action(verb, "PUT", done)

    @click.command(help=f"{verb.value.capitalize()} connectors: NAME..., or -e REGEX.")
    @_selection
    def connector(
        session: Session, names: tuple[str, ...], regex: tuple[str, ...], yes: bool, dry_run: bool, output: str
    ) -> None:
        act(session, action, names, regex, yes, dry_run, output)

    return _verb_group(verb, connector)


@click.command(help="Restart connectors (a KIP-745 restart request): NAME..., or -e REGEX.")
@click.option("--include-tasks", is_flag=True, help="Restart their tasks too (Connect's includeTasks).")
@click.option("--only-failed", is_flag=True, help="Only what has FAILED (Connect's onlyFailed).")
@_selection
def restart_connector(
    session: Session,
    include_tasks: bool,
    only_failed: bool,
    names: tuple[str, ...],
    regex: tuple[str, ...],
    yes: bool,
    dry_run: bool,
    output: str,
) -> None:
    params = {"includeTasks": str(include_tasks).lower(), "onlyFailed": str(only_failed).lower()}
    act(session, Action(Verb.RESTART, "POST", "restart requested", params), names, regex, yes, dry_run, output)


def register(root: click.Group) -> None:
    root.add_command(_simple(Verb.PAUSE, "pause requested"))
    root.add_command(_simple(Verb.RESUME, "resume requested"))
    root.add_command(_simple(Verb.STOP, "stop requested"))
    root.add_command(_verb_group(Verb.RESTART, restart_connector))
