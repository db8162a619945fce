"""A KIP-883 deletion hook for the demo (``make run``): it logs what it would release.

Register it with ``cleanup.hooks=connect_state.dev.demo_hooks:log_deletion``. A real hook has the same signature
(:class:`connect_state.cleanup.reconciler.DeletionHook`) and releases what the deleted connector provisioned outside
Kafka (an audit table, database triggers, a queue); it must be idempotent, since a failed call is retried.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from connect_state.connect.connector_types import CONNECTOR_CLASS_CONFIG
from connect_state.connect.filestream import FILE_CONFIG

log = logging.getLogger("connect_state.dev.demo_hooks")


def log_deletion(connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
    """Log the deletion of ``connector`` with its class and the file a FileStream connector used."""
    log.info(
        "deletion hook: connector %s deleted (is_deleted=%s, class %s, file %s): nothing external to release",
        connector,
        is_deleted,
        config.get(CONNECTOR_CLASS_CONFIG, "?"),
        config.get(FILE_CONFIG, "-"),
    )
