"""The root command's options as the commands see them: which contexts file, which context, how long to wait; the
API client is made on first use (``context`` commands need none)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from connect_state.cli.client import ApiClient
from connect_state.cli.contexts import ContextsFile, default_path, load
from connect_state.cli.errors import CliError

DEFAULT_TIMEOUT_S = 60.0
COMPLETION_TIMEOUT_S = 3.0


@dataclass
class Session:
    config: Path
    context_name: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    cluster: str | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    _client: ApiClient | None = None

    @classmethod
    def from_options(
        cls, config: Path | None, context_name: str | None, timeout_s: float, cluster: str | None = None
    ) -> Session:
        return cls(config or default_path(os.environ), context_name, timeout_s, cluster)

    def contexts(self) -> ContextsFile:
        return load(self.config)

    def client(self) -> ApiClient:
        """The client of the chosen context, its references resolved now."""
        if self._client is None:
            name, context = self.contexts().chosen(self.context_name)
            resolved = context.resolved(name, self.config.parent, self.environ)
            self._client = ApiClient(name, resolved, self.timeout_s, self.cluster)
        return self._client


pass_session = click.make_pass_decorator(Session)


def _completion_session(ctx: click.Context) -> Session:
    """Shell completion parses without running the root command: its options are read from the parsed params."""
    root = ctx.find_root()
    if isinstance(root.obj, Session):
        return root.obj
    params = root.params
    return Session.from_options(
        params.get("config"), params.get("context_name"), COMPLETION_TIMEOUT_S, params.get("cluster")
    )


def complete_connectors(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    """Connector names from the API for shell completion; none when it cannot answer."""
    try:
        names: Any = _completion_session(ctx).client().get("/connectors")
    except CliError:
        return []
    return [name for name in names if isinstance(name, str) and name.startswith(incomplete)]


def complete_contexts(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[str]:
    """Context names from the contexts file for shell completion."""
    try:
        names = _completion_session(ctx).contexts().contexts
    except CliError:
        return []
    return [name for name in sorted(names) if name.startswith(incomplete)]
