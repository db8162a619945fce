"""Deadlines for third-party code: one home for calling a plug-in so that a hung one holds up nothing (issue 33).

Operators register Python plug-ins that connect-state calls: KIP-883 deletion hooks (the cleanup job), KIP-875
``alterOffsets`` rules (the API, in the request's thread) and KIP-910 heartbeat providers (the heartbeats job's
timer). Each call goes through a :class:`DeadlineRunner`: it runs in a daemon thread of its own and is waited for up
to the deadline of its setting (``cleanup.hook.timeout.ms``, ``offsets.alter.timeout.ms``,
``heartbeat.provider.timeout.ms``; 0: no deadline). A call still running then raises :class:`PluginTimeout` (naming
the plug-in, the deadline and its setting) and is left to finish in the background: Python cannot stop a thread.
While that abandoned call still runs, the next call of the same key fails at once (``earlier`` set) instead of
starting a second one, so a plug-in that hangs every time holds one thread, not one per call.

What the caller does with a :class:`PluginTimeout` is its own: a deletion hook's step is recorded failed and retried,
the API answers 500 in Connect's shape, a heartbeat provider's turn is skipped and recorded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

from connect_state.core.errors import ConnectStateError

__all__ = ["DeadlineRunner", "PluginTimeout", "plugin_name"]

T = TypeVar("T")


def plugin_name(target: object) -> str:
    """A plug-in as ``module:qualified name`` (a function or class by itself, any other object by its class), for
    messages."""
    named = target if hasattr(target, "__qualname__") else type(target)
    return f"{getattr(named, '__module__', '?')}:{getattr(named, '__qualname__', '?')}"


class PluginTimeout(ConnectStateError):
    """A plug-in call did not return by its deadline (``earlier``: the call was not even made, because an earlier
    call of the same plug-in that missed its deadline still runs)."""

    def __init__(self, plugin: str, timeout_ms: int, setting: str, *, earlier: bool = False) -> None:
        self.plugin = plugin
        self.timeout_ms = timeout_ms
        self.setting = setting
        self.earlier = earlier
        if earlier:
            text = f"{plugin}: an earlier call that missed its deadline of {timeout_ms} ms ({setting}) still runs"
        else:
            text = f"{plugin} did not return within {timeout_ms} ms ({setting})"
        super().__init__(text)


class DeadlineRunner:
    """Runs plug-in calls with the deadline ``timeout_ms`` (the setting ``setting``; 0 or less: none), each in a daemon
    thread, one abandoned call at most per key (see the module docstring). Thread-safe: the API calls it from several
    request threads."""

    def __init__(self, timeout_ms: int, setting: str) -> None:
        self.timeout_ms = timeout_ms
        self.setting = setting
        self._abandoned: dict[Hashable, threading.Thread] = {}
        self._lock = threading.Lock()

    def run(self, key: Hashable, plugin: str, call: Callable[[], T]) -> T:
        """``call()``'s result, or what it raised, re-raised here; :class:`PluginTimeout` when it does not return by
        the deadline, or at once while an earlier call of ``key`` that missed its deadline still runs."""
        with self._lock:
            previous = self._abandoned.get(key)
            if previous is not None and previous.is_alive():
                raise PluginTimeout(plugin, self.timeout_ms, self.setting, earlier=True)
            self._abandoned.pop(key, None)
        outcome: list[tuple[bool, object]] = []

        def target() -> None:
            try:
                outcome.append((True, call()))
            except BaseException as err:  # handed to the caller's thread
                outcome.append((False, err))

        thread = threading.Thread(target=target, name=f"plugin-{plugin}", daemon=True)
        thread.start()
        thread.join(self.timeout_ms / 1000.0 if self.timeout_ms > 0 else None)
        if thread.is_alive():
            with self._lock:
                self._abandoned[key] = thread
            raise PluginTimeout(plugin, self.timeout_ms, self.setting)
        returned, value = outcome[0]
        if not returned:
            raise value  # type: ignore[misc]
        return value  # type: ignore[return-value]
