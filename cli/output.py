"""What the commands print: ``-o table`` (for people), ``-o json`` and ``-o yaml`` (the API's answers as they are,
for scripts).

Tables are kubectl's plain columns: upper-case headers, left-aligned, two spaces apart, no trailing blanks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import click
import yaml

NONE = "-"


class OutputFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


output_option = click.option(
    "-o",
    "--output",
    "output",
    type=click.Choice([f.value for f in OutputFormat]),
    default=OutputFormat.TABLE.value,
    show_default=True,
    help="table for people; json or yaml: the API's answers as they are.",
)


def document(data: Any, fmt: OutputFormat) -> str:
    """``data`` as JSON (two-space indent) or YAML (block style, keys in the API's order)."""
    if fmt == OutputFormat.JSON:
        return json.dumps(data, indent=2, ensure_ascii=False)
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True).rstrip("\n")


def emit(data: Any, fmt: str, table: Callable[[Any], str]) -> None:
    """Print ``data`` in the format asked for: ``table(data)`` for a table."""
    chosen = OutputFormat(fmt)
    click.echo(table(data) if chosen == OutputFormat.TABLE else document(data, chosen))


def cell(value: Any) -> str:
    """A table cell: ``-`` for None, compact JSON for lists and objects, text for the rest."""
    if value is None:
        return NONE
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Plain columns; every cell through :func:`cell`."""
    lines = [list(headers), *([cell(value) for value in row] for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def epoch_ms(value: Any) -> str:
    """Epoch milliseconds (the API's times) as ISO-8601 UTC, ``-`` for None."""
    if not isinstance(value, int | float):
        return NONE
    moment = datetime.fromtimestamp(value / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def duration_ms(value: Any) -> str:
    """Milliseconds as ``1h02m03s`` / ``4.5s``, ``-`` for None."""
    if not isinstance(value, int | float):
        return NONE
    seconds = value / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
