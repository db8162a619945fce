"""``connect-state``: the root command, its global options and the command modules.

Each command module adds its commands with ``register(root)``; a new feature of the API is one more module in
:data:`MODULES`. Shell completion is click's (``_CONNECT_STATE_COMPLETE=bash_source connect-state``; README "Command
line"), connector and context names included.
"""

from __future__ import annotations

from pathlib import Path

import click

from connect_state.cli import (
    actions,
    availability,
    clusters,
    connectors,
    context_commands,
    fleet,
    offsets,
    revive,
    timeline,
)
from connect_state.cli.contexts import CLUSTER_ENV, CONFIG_ENV
from connect_state.cli.errors import ExitCode
from connect_state.cli.session import DEFAULT_TIMEOUT_S, Session, complete_contexts

PROG = "connect-state"
MODULES = (context_commands, connectors, actions, offsets, revive, timeline, availability, clusters, fleet)

EPILOG = "\b\nExit codes:\n" + "\n".join(f"  {code.value}  {code.name.lower().replace('_', ' ')}" for code in ExitCode)


@click.group(
    epilog=EPILOG,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
)
@click.version_option(package_name="connect-state", prog_name=PROG)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar=CONFIG_ENV,
    help=f"The contexts file [default: ~/.config/connect-state/contexts.yaml; env: {CONFIG_ENV}].",
)
@click.option(
    "--context",
    "context_name",
    metavar="NAME",
    shell_complete=complete_contexts,
    help="Use this context instead of the current one.",
)
@click.option(
    "--cluster",
    metavar="ID",
    envvar=CLUSTER_ENV,
    help=f"Talk to this Connect cluster (an id `connect-state clusters` lists) [env: {CLUSTER_ENV}].",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="Seconds to wait for each answer of the API.",
)
@click.pass_context
def cli(ctx: click.Context, config: Path | None, context_name: str | None, cluster: str | None, timeout: float) -> None:
    """The command line of connect-state's API: Kafka Connect's connectors, their offsets and their history."""
    ctx.obj = Session.from_options(config, context_name, timeout, cluster)


for _module in MODULES:
    _module.register(cli)


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
