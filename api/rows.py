"""The ``connectors`` table's rows as the views read them (shared by the blueprints; not a blueprint itself).

* :func:`connector_row`: a connector's row (deleted ones included); :func:`status_row`: with the status records the
  jobs have not folded yet (:mod:`connect_state.api.live`); :func:`is_configured` / :func:`configured_row`: whether
  the config snapshot has it (Connect's 404 ``"Connector <name> not found"`` otherwise);
* :func:`expanded_connectors`: ``GET /connectors?expand=...``; :func:`redacted` / :func:`redacted_info`: configs with
  their secrets redacted (:mod:`connect_state.security.redaction`, issue 13);
* :func:`json_or_text`: a JSON cell as the answers show it (a timestamp: :func:`~connect_state.tables.schemas.iso_utc`).
"""

from __future__ import annotations

import json
from typing import Any

from connect_state.api import live
from connect_state.api.errors import ConnectRestException
from connect_state.api.resources import get_settings, get_tables
from connect_state.connect import rest
from connect_state.security.redaction import redact_config, settings_patterns
from connect_state.tables.schemas import CONNECTORS


def connector_row(name: str) -> dict[str, Any] | None:
    """The connector's row of the ``connectors`` table (deleted ones included), or None when there is none."""
    rows = get_tables().rows(CONNECTORS, filters=[("name", "=", name)])
    return rows[0] if rows else None


def status_row(name: str) -> dict[str, Any] | None:
    """The connector's row with the status records the jobs have not folded yet (:mod:`connect_state.api.live`):
    what a status answer is made of."""
    return live.connector_row(name, lambda: connector_row(name))


def is_configured(row: dict[str, Any] | None) -> bool:
    """Whether the config snapshot has the connector: a row that has a config and is not deleted."""
    return row is not None and row.get("config") is not None and not row.get("deleted")


def configured_row(connector: str) -> dict[str, Any]:
    """The connector's row when the config snapshot has it, else Connect's 404 ``"Connector <name> not found"``."""
    row = connector_row(connector)
    if row is None or not is_configured(row):
        raise ConnectRestException(404, rest.connector_not_found_message(connector))
    return row


def redacted(config: Any) -> Any:
    """A config with its secrets redacted (issue 13); anything else (a missing task config: null) as it is."""
    return redact_config(config, settings_patterns(get_settings())) if isinstance(config, dict) else config


def redacted_info(info: dict[str, Any]) -> dict[str, Any]:
    return {**info, "config": redacted(info["config"])}


def expanded_connectors(expand: list[str]) -> dict[str, dict[str, object]]:
    """``GET /connectors?expand=...``: the configured connectors' expansions, their configs redacted."""
    rows = [row for row in get_tables().rows(CONNECTORS) if is_configured(row)]
    body = rest.expanded_connectors(sorted(rows, key=lambda row: str(row["name"])), expand)
    for expansions in body.values():
        if isinstance(expansions.get("info"), dict):
            expansions["info"] = redacted_info(expansions["info"])  # type: ignore[arg-type]
    return body


def json_or_text(text: object) -> Any:
    """A JSON cell parsed; text that is not JSON as it is; None for anything but text."""
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
