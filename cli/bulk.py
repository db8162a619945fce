"""One action on many connectors (kcctl's ``-e``): choose them by name or by regular expression, say which, ask,
act, report each as it is done.

* Names are taken as given (the API answers 404 for an unknown one); each ``-e REGEX`` must match whole names
  (``re.fullmatch``, as kcctl's ``Pattern.matches``) of ``GET /connectors`` and match at least one: a bad expression
  is a usage error, one that matches nothing is not found, before anything is written.
* The list is printed (stderr) and confirmed when a regular expression chose it or it has more than one connector,
  unless ``--yes``; ``--dry-run`` prints the list (stdout) and does nothing.
* Each connector's outcome is printed as it comes (``[2/5] orders-eu: paused``); a failure does not stop the others,
  except an API that cannot be reached. One connector: its error's exit code; several with a failure: partial.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from connect_state.cli.client import Answer, ApiClient
from connect_state.cli.errors import Aborted, ApiError, NoMatch, PartialFailure, UsageProblem, error_for_status


@dataclass(frozen=True)
class Outcome:
    """What one connector's request came to: the answer's status, the error's message or the answer's body."""

    connector: str
    ok: bool
    status: int
    message: str | None = None
    body: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "connector": self.connector,
            "ok": self.ok,
            "status": self.status,
            "message": self.message,
            "body": self.body,
        }


def compile_patterns(patterns: Sequence[str]) -> list[re.Pattern[str]]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as err:
            raise UsageProblem(f"bad regular expression {pattern!r}: {err.msg} at position {err.pos}") from None
    return compiled


def select(client: ApiClient, names: Sequence[str], patterns: Sequence[re.Pattern[str]]) -> list[str]:
    """The connectors named, then those the patterns match (in the API's order), each once."""
    if not names and not patterns:
        raise UsageProblem("name a connector, or choose connectors with -e REGEX")
    chosen = list(dict.fromkeys(names))
    if patterns:
        known = [name for name in client.get("/connectors") if isinstance(name, str)]
        for pattern in patterns:
            matched = [name for name in known if pattern.fullmatch(name)]
            if not matched:
                raise NoMatch(f"no connector matches {pattern.pattern!r} (of {len(known)} connectors)")
            chosen += [name for name in matched if name not in chosen]
    return chosen


def confirm(verb: str, targets: Sequence[str], *, ask: bool, yes: bool) -> None:
    """List the targets on stderr and, when ``ask`` and not ``yes``, ask; a no (or no terminal) aborts."""
    if not ask:
        return
    click.echo(f"{verb} {len(targets)} connector{'s' if len(targets) != 1 else ''}:", err=True)
    for name in targets:
        click.echo(f"  {name}", err=True)
    if yes:
        return
    try:
        agreed = click.confirm("Go on?", default=False, err=True)
    except click.Abort:
        agreed = False
    if not agreed:
        raise Aborted("nothing done (answer y, or pass --yes)")


def run(
    targets: Sequence[str], call: Callable[[str], Answer], describe: Callable[[Outcome], str], *, to_stderr: bool
) -> list[Outcome]:
    """``call`` each target in turn, printing each outcome as it comes (stderr when ``to_stderr``)."""
    outcomes = []
    for index, name in enumerate(targets, 1):
        try:
            answer = call(name)
            outcome = Outcome(name, True, answer.status, body=answer.body)
        except ApiError as err:
            outcome = Outcome(name, False, err.status, message=err.message)
        outcomes.append(outcome)
        if len(targets) > 1 or outcome.ok:
            prefix = f"[{index}/{len(targets)}] " if len(targets) > 1 else ""
            text = describe(outcome) if outcome.ok else f"failed: {outcome.message} (HTTP {outcome.status})"
            click.echo(f"{prefix}{name}: {text}", err=to_stderr)
    return outcomes


def finish(outcomes: Sequence[Outcome]) -> None:
    """Raise the error the outcomes come to: one connector's own, or a partial failure naming every failed one."""
    failed = [outcome for outcome in outcomes if not outcome.ok]
    if not failed:
        return
    if len(outcomes) == 1:
        raise error_for_status(failed[0].status, failed[0].message or "")
    names = ", ".join(f"{outcome.connector} (HTTP {outcome.status})" for outcome in failed)
    raise PartialFailure(f"{len(failed)} of {len(outcomes)} connectors failed: {names}")
