"""Failed logins, counted (issue 33 finding 6): past a number of failures in a sliding window, a claimed name or a
client address is refused before its credentials are checked, so that guessing costs time and no hash.

:class:`LoginThrottle` counts each failure twice: under the user name the credentials claimed (an unknown name counts
as a known one does: the answers do not tell them apart) and under the client's address (an IPv6 address by its /64,
what one host is usually given: :func:`address_key`). :meth:`LoginThrottle.refused` answers a :class:`Throttled`
while either has reached its limit in the window, with the seconds until its oldest counted failure leaves it. A
success clears nothing (a guess that happens to be right must not reopen an address others are hammering), and a
refused attempt is not counted (the refusal ends one window after the last counted failure). Memory is bounded: at
most ``tracked`` names and addresses, the least recently failing forgotten first. Counts live in the process's memory.

Pure: no Flask, no clock but the one passed in.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["LimitKind", "LoginThrottle", "Throttled", "address_key"]

#: The prefix an IPv6 client is counted by: the /64 a host (or a home, a phone) is usually given.
IPV6_PREFIX = 64
#: A claimed name longer than this is counted by its digest (a header may hold kilobytes: memory stays bounded).
MAX_NAME = 256


class LimitKind(StrEnum):
    PRINCIPAL = "principal"
    ADDRESS = "address"


@dataclass(frozen=True)
class Throttled:
    """Why an attempt is refused: which limit, for whom, and how many seconds until it may try again."""

    kind: LimitKind
    subject: str
    retry_after_s: int


def address_key(address: str | None) -> str | None:
    """What a client address is counted by: an IPv4 address itself (an IPv4-mapped IPv6 one as IPv4), an IPv6
    address by its /64 network (``2001:db8:1:2::/64``); anything else as it is."""
    if not address:
        return None
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, IPV6_PREFIX), strict=False))
    return str(parsed)


class LoginThrottle:
    """Failures per claimed name and per address over a sliding window of ``window_s`` seconds; ``per_principal``
    and ``per_address`` failures refuse (0: no such limit); at most ``tracked`` keys are kept."""

    def __init__(
        self,
        window_s: float,
        per_principal: int,
        per_address: int,
        tracked: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window_s < 0 or per_principal < 0 or per_address < 0 or tracked < 1:
            raise ValueError("the window and the limits must not be negative, and at least one key must be tracked")
        self.window_s = window_s
        self.limits = {LimitKind.PRINCIPAL: per_principal, LimitKind.ADDRESS: per_address}
        self.tracked = tracked
        self.clock = clock
        self._failures: OrderedDict[tuple[LimitKind, str], deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.window_s > 0 and any(self.limits.values())

    def _keys(self, principal: str | None, address: str | None) -> list[tuple[LimitKind, str]]:
        keys = []
        if principal is not None and self.limits[LimitKind.PRINCIPAL]:
            if len(principal) > MAX_NAME:
                principal = "sha256:" + hashlib.sha256(principal.encode("utf-8", "replace")).hexdigest()
            keys.append((LimitKind.PRINCIPAL, principal))
        counted = address_key(address)
        if counted is not None and self.limits[LimitKind.ADDRESS]:
            keys.append((LimitKind.ADDRESS, counted))
        return keys

    def _recent(self, key: tuple[LimitKind, str], now: float) -> deque[float] | None:
        """The key's failures still in the window (the older ones dropped); None when it has none."""
        failures = self._failures.get(key)
        if failures is None:
            return None
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        if not failures:
            del self._failures[key]
            return None
        return failures

    def refused(self, principal: str | None, address: str | None) -> Throttled | None:
        """Whether an attempt claiming ``principal`` (None: no name, e.g. a token) from ``address`` is refused now."""
        if not self.enabled:
            return None
        now = self.clock()
        with self._lock:
            for kind, subject in self._keys(principal, address):
                failures = self._recent((kind, subject), now)
                if failures is not None and len(failures) >= self.limits[kind]:
                    wait = failures[0] + self.window_s - now
                    return Throttled(kind, subject, max(1, math.ceil(wait)))
        return None

    def failed(self, principal: str | None, address: str | None) -> None:
        """Count a failed attempt claiming ``principal`` from ``address``."""
        if not self.enabled:
            return
        now = self.clock()
        with self._lock:
            for kind, subject in self._keys(principal, address):
                key = (kind, subject)
                failures = self._recent(key, now)
                if failures is None:
                    failures = self._failures[key] = deque(maxlen=self.limits[kind])
                failures.append(now)
                self._failures.move_to_end(key)
            while len(self._failures) > self.tracked:
                self._failures.popitem(last=False)

    def __len__(self) -> int:
        return len(self._failures)
