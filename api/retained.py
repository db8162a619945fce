"""The API's side of the history tables' retention (issue 33, finding 7): an as-of ``at``, a ``since`` or an ``until``
before the oldest time still answerable (now minus the table's retention, :mod:`connect_state.tables.retention`)
answers 400 in Connect's error JSON, saying what is kept, instead of an answer the clean-up has made incomplete; and
the clean-up of the table the API writes, ``audit`` (:class:`AuditRetention`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from flask import request

from connect_state.api.args import time_arg
from connect_state.api.errors import ConnectRestException
from connect_state.api.resources import get_settings
from connect_state.core.settings import Settings
from connect_state.tables.audit_table import AuditTable
from connect_state.tables.retention import POLICIES, cutoff_ms, oldest_answerable, retention_ms
from connect_state.tables.retention_io import Cleaned, iso
from connect_state.tables.schemas import AUDIT, TableSpec, now_ms

log = logging.getLogger("connect_state.retention")
AUDIT_POLICY = next(policy for policy in POLICIES if policy.spec is AUDIT)


def kept_time_arg(name: str, spec: TableSpec) -> int | None:
    """The query argument ``name`` as epoch ms (:func:`~connect_state.api.args.time_arg`), refused (400) when it is
    before the oldest time ``spec``'s history still answers for."""
    at = time_arg(name)
    if at is None:
        return None
    settings = get_settings()
    oldest = oldest_answerable(settings, spec.name, now_ms())
    if oldest is not None and at < oldest:
        days = retention_ms(settings, spec.name) / 86_400_000
        raise ConnectRestException(
            400,
            f"Invalid {name} {request.args.get(name)!r}: {spec.name} keeps {days:g} days of history "
            f"(history.retention.ms); the oldest time still answerable is {iso(oldest)} ({oldest})",
        )
    return at


class AuditRetention:
    """The audit table's clean-up, by its writer: each API process's spool flusher (:class:`connect_state.api.audit.
    AuditTrail`) runs it after a flush, at its first and then every ``history.retention.check.interval.ms``; the
    processes sharing the spool take turns through its ``flock``. A failure is logged; the next one is due an
    interval later."""

    def __init__(
        self,
        settings: Settings,
        clock: Callable[[], int] = now_ms,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.retention = retention_ms(settings, AUDIT.name)
        self.interval_s = settings.history_retention_check_interval_ms / 1000
        self.clock = clock
        self.monotonic = monotonic
        self._next = 0.0

    def maybe_run(self, table: AuditTable) -> Cleaned | None:
        cutoff = cutoff_ms(self.clock(), self.retention)
        if cutoff is None or self.monotonic() < self._next:
            return None
        self._next = self.monotonic() + self.interval_s
        try:
            cleaned = table.clean(AUDIT_POLICY, cutoff)
        except Exception as err:
            log.warning("audit: retention failed (%s); next pass in %.0f s", err, self.interval_s)
            return None
        if cleaned.deleted:
            log.info("retention: %s", cleaned.line())
        return cleaned
