"""Jobs drivers as processes of their own, for the tests that kill them (``kill -9``) or run two at once.

:class:`DriverProcess` runs ``python -m <module> [args]`` (default ``connect_state.jobs.all``: ``connect-state-jobs``)
from the repository root, with the test's settings written to a properties file (``--conf-file``; no
``CONNECT_STATE_*`` variable of the test's environment leaks in), optionally armed with a fault
(``CONNECT_STATE_FAULT_INJECT``, :mod:`connect_state.core.faults`). The process is the leader of its own process group,
so :meth:`DriverProcess.kill` takes its Spark JVM and Python workers down with it, like a lost machine. Its output
goes to a log file whose tail failing assertions show.

Also here: :class:`CountingHook`, a deletion hook that appends ``<connector> <pid>`` to the file named by
``CONNECT_STATE_TEST_HOOK_LOG`` (so calls made by several processes are counted together), and :func:`main`, a
driver of the two leased jobs only (heartbeats and cleanup), for running two instances at once.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import javaproperties

from connect_state.core.faults import ENV as FAULT_ENV
from connect_state.core.settings import ENV_PREFIX, Settings

REPO = Path(__file__).resolve().parents[2]
HOOK_LOG_ENV = "CONNECT_STATE_TEST_HOOK_LOG"
# The drivers' JVMs are started and killed again and again (the crash test): C1 only and the serial collector start a
# JVM about twice as fast on two cores. The session's long-lived JVM keeps C2 (tests/fixtures/spark.py).
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"


PR_SET_PDEATHSIG = 1
_LIVE: set[DriverProcess] = set()


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the test process dies, however it dies (no driver outlives a killed
    pytest; the driver's JVM follows its driver)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def write_conf(settings: Settings, path: Path) -> Path:
    """The settings as a properties file (every key, as the settings hold it, references unresolved)."""
    path.write_text(javaproperties.dumps(settings.raw, timestamp=False, sort_keys=True), encoding="utf-8")
    return path


class DriverProcess:
    """One jobs driver process; see the module's docstring."""

    def __init__(
        self,
        settings: Settings,
        workdir: Path,
        name: str,
        args: Sequence[str] = (),
        fault: str | None = None,
        module: str = "connect_state.jobs.all",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.name = name
        self.args = list(args)
        self.fault = fault
        self.module = module
        self.extra_env = dict(env or {})
        workdir.mkdir(parents=True, exist_ok=True)
        self.conf_file = write_conf(settings, workdir / f"{name}.properties")
        self.log_file = workdir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0

    def start(self) -> DriverProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        env.update(self.extra_env)
        env.setdefault("JAVA_TOOL_OPTIONS", JVM_OPTIONS)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        if self.fault:
            env[FAULT_ENV] = self.fault
        command = [sys.executable, "-m", self.module, *self.args, "--conf-file", str(self.conf_file)]
        with self.log_file.open("ab") as out:
            out.write(f"--- {time.strftime('%H:%M:%S')} {' '.join(command)} fault={self.fault}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                command, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip
        _LIVE.add(self)
        self.started_at = time.monotonic()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None  # reaps it once it has ended

    def wait(self, timeout_s: float) -> int | None:
        """The exit status (negative: the signal), or None if still running after ``timeout_s``."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> int | None:
        """``kill -9`` of the whole process group (the driver, its JVM, its Python workers), unless the driver has
        already been waited for (its pid may then belong to another process)."""
        if self.proc is None:
            return None
        if self.proc.returncode is None:  # not reaped: its pid, and so its group's id, is still ours
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        code = self.wait(30)
        _LIVE.discard(self)
        return code

    def terminate(self, timeout_s: float = 120.0) -> int | None:
        """SIGTERM to the driver alone (a clean stop: queries stopped, leases released; its JVM ends with it; the
        group would stop the JVM under the driver's feet); ``kill -9`` after ``timeout_s``."""
        if self.proc is None:
            return None
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            if self.wait(timeout_s) is None:
                return self.kill()
        _LIVE.discard(self)
        return self.proc.returncode

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])


def kill_leftovers() -> None:
    """``kill -9`` of every driver still running (a test's teardown, and at exit)."""
    for driver in list(_LIVE):
        driver.kill()


atexit.register(kill_leftovers)


class CountingHook:
    """A deletion hook appending ``<connector> <pid>`` to the file named by ``CONNECT_STATE_TEST_HOOK_LOG``."""

    def __call__(self, connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
        with open(os.environ[HOOK_LOG_ENV], "a", encoding="utf-8") as out:
            out.write(f"{connector} {os.getpid()}\n")


COUNTING = CountingHook()


def hook_calls(path: Path) -> list[tuple[str, int]]:
    """The ``(connector, pid)`` of every call the counting hook recorded in ``path``."""
    if not path.exists():
        return []
    calls = []
    for line in path.read_text(encoding="utf-8").splitlines():
        connector, pid = line.split()
        calls.append((connector, int(pid)))
    return calls


def main(argv: list[str] | None = None) -> int:
    """A continuous driver of the leased jobs only (heartbeats, cleanup): what two instances of them do at once."""
    from connect_state.spark.cleanup import CleanupJob
    from connect_state.spark.heartbeats import HeartbeatsJob
    from connect_state.spark.streaming import job_arguments, main_of, run_continuous

    args = job_arguments("leased-jobs", "the heartbeats and cleanup jobs in one driver").parse_args(argv)
    jobs = [HeartbeatsJob(), CleanupJob()]
    return main_of(
        jobs,
        args,
        "leased-jobs",
        logging.getLogger("connect_state.jobs.leased"),
        lambda spark, settings: run_continuous(jobs, spark, settings),
    )


if __name__ == "__main__":
    raise SystemExit(main())
