"""Quarantined records as a reader may see them (issue 33): secrets redacted for anyone without the role ``admin``.

``GET /rejected-records`` shows the bytes of the records the jobs quarantined. Those of Connect's config topic are
connector and task configs, or the workers' session key: every secret of a connector may be in them. A principal without
``admin`` (:func:`sees_secrets`) gets each value redacted as the API redacts configs
(:func:`connect_state.security.redaction.redact_record_value`): a JSON value with its secret keys hidden and the
credentials of URIs masked, the session key's ``key`` hidden, a config-topic value that is not JSON withheld (``"value":
null``). JSON values of the other internal topics are redacted the same way; their other values are shown. Each record
says whether its value was changed (``"redacted"``); an ``admin`` gets the bytes as quarantined.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from connect_state.api.auth import Role, allowed_here
from connect_state.api.resources import get_settings
from connect_state.formats.config import SESSION_KEY_KEY
from connect_state.security.redaction import redact_record_value, settings_patterns

__all__ = ["redact_rejected_records", "sees_secrets"]

#: The fields of the session key record (``{"key":"<base64>","algorithm":...}``) that are the secret.
SESSION_KEY_SECRET_FIELDS = ("key",)


def sees_secrets() -> bool:
    """Whether the request's principal has the role ``admin`` in the request's cluster (the open API's anonymous
    principal has every role)."""
    return allowed_here(Role.ADMIN)


def _decoded(text: str | None) -> bytes | None:
    return base64.b64decode(text) if text is not None else None


def redact_rejected_records(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` as answered by ``GET /rejected-records`` (key and value base64), each with ``redacted``: its value
    redacted unless the reader :func:`sees_secrets`."""
    if sees_secrets():
        return [{**record, "redacted": False} for record in records]
    settings = get_settings()
    patterns = settings_patterns(settings)
    answer = []
    for record in records:
        config_topic = record["topic"] == settings.config_storage_topic
        session_key = config_topic and _decoded(record["key"]) == SESSION_KEY_KEY.encode()
        value, redacted = redact_record_value(
            _decoded(record["value"]),
            patterns,
            secret_fields=SESSION_KEY_SECRET_FIELDS if session_key else (),
            withhold_unparsed=config_topic,
        )
        encoded = base64.b64encode(value).decode("ascii") if value is not None else None
        answer.append({**record, "value": encoded if redacted else record["value"], "redacted": redacted})
    return answer
