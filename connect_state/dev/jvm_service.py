"""One Kafka JVM run from the jars, the base of the local harness's services: the broker and the worker
(:mod:`connect_state.dev.local_stack`) and the S3-compatible server (:mod:`connect_state.dev.s3_server`).

Each service runs in its own JVM and its own process group, logs at INFO to ``logs/<name>.log`` through Log4j2
(``logs/<name>.out`` catches stdout and stderr), and is stopped with SIGTERM, a bounded wait, then SIGKILL. Every
failure raises :class:`~connect_state.core.errors.LocalStackError` with the tail of those files.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, ClassVar, Self
from xml.sax.saxutils import quoteattr

from connect_state.core.errors import ConnectStateError, LocalStackError
from connect_state.core.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_KAFKA_LIB = REPO_ROOT / "jvm" / "kafka" / "lib"
KAFKA_LIB_ENV = "CONNECT_STATE_KAFKA_LIB"
"""Environment variable naming another directory of Kafka jars."""
LOOPBACK = "127.0.0.1"
REQUIRED_JARS = ("kafka_2.13-", "connect-runtime-", "connect-file-", "log4j-slf4j-impl-")
LOG_TAIL_LINES = 40
LIVE: set[JavaService] = set()
"""Services started and not stopped yet, stopped at interpreter exit if the program forgot them."""


def find_kafka_lib(lib_dir: str | os.PathLike[str] | None = None) -> Path:
    """The directory of Kafka jars: ``lib_dir``, else ``$CONNECT_STATE_KAFKA_LIB``, else ``jvm/kafka/lib``.

    Raises LocalStackError (telling to run ``make jars``) when the jars are not there.
    """
    path = Path(lib_dir or os.environ.get(KAFKA_LIB_ENV) or DEFAULT_KAFKA_LIB).resolve()
    names = [p.name for p in path.glob("*.jar")] if path.is_dir() else []
    missing = [prefix for prefix in REQUIRED_JARS if not any(n.startswith(prefix) for n in names)]
    if missing:
        raise LocalStackError(
            f"Kafka jars not found in {path} (missing {', '.join(p + '*.jar' for p in missing)}); "
            f"run `make jars` (or point ${KAFKA_LIB_ENV} at a directory of Kafka jars)"
        )
    return path


def find_java() -> str:
    """``$JAVA_HOME/bin/java`` if it exists, else ``java`` on the PATH (Kafka 4.x needs Java 17+)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise LocalStackError("no `java` found on the PATH or in $JAVA_HOME; Kafka 4.x needs Java 17 or newer")
    return java


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (all held open at once while picking, so they differ)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for sock in socks:
            sock.bind((LOOPBACK, 0))
        return [sock.getsockname()[1] for sock in socks]


def check_port_free(port: int, what: str) -> None:
    """Raise LocalStackError if something already listens on 127.0.0.1:``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # ignore TIME_WAIT leftovers, as the JVM does
        try:
            sock.bind((LOOPBACK, port))
        except OSError as err:
            raise LocalStackError(
                f"port {port} ({what}) on {LOOPBACK} is already in use ({err.strerror}); is another broker or "
                f"`make run` running? Stop it, or pick other ports with --set {what}=<port>"
            ) from None


def write_properties(path: Path, props: Mapping[str, str], header: str) -> None:
    """Write ``key=value`` lines (values are ours: no escaping needed beyond what Kafka's loader accepts)."""
    lines = [f"# {header}", *(f"{k}={v}" for k, v in props.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_log4j2_config(path: Path, log_file: Path, level: str = "INFO") -> None:
    """A Log4j2 XML config sending everything at ``level`` to a size-rolled ``log_file`` (and nothing to stdout)."""
    file_attr = quoteattr(str(log_file))
    pattern_attr = quoteattr(f"{log_file}.%i")
    path.write_text(
        f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by connect_state.dev.local_stack on every start. -->
<Configuration status="warn">
  <Appenders>
    <RollingFile name="file" fileName={file_attr} filePattern={pattern_attr}>
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
      <Policies><SizeBasedTriggeringPolicy size="50 MB"/></Policies>
      <DefaultRolloverStrategy max="3"/>
    </RollingFile>
  </Appenders>
  <Loggers>
    <Root level="{level}"><AppenderRef ref="file"/></Root>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="org.reflections" level="ERROR"/>
  </Loggers>
</Configuration>
""",
        encoding="utf-8",
    )


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a text file ('' if it does not exist)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 256 * lines))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class Service:
    """Something started and stopped; ``with`` starts it and stops it on the way out."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> object:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class JavaService(Service):
    """A Kafka JVM (broker or worker) run from the jars: start, readiness, logs and a clean stop."""

    main_class: ClassVar[str]
    config_name: ClassVar[str]
    """The properties file the main class is started with, in the service's home."""
    ready_interval: ClassVar[float] = 0.25
    stop_order: ClassVar[int] = 0
    """Services forgotten at exit are stopped lowest first (a broker after the workers that use it)."""

    def __init__(
        self,
        name: str,
        settings: Settings,
        data_dir: str | os.PathLike[str] | None,
        *,
        lib_dir: str | os.PathLike[str] | None,
        heap: str,
        start_timeout: float,
        stop_timeout: float,
    ) -> None:
        self.name = name
        self.home = Path(data_dir) if data_dir is not None else settings.local_data_dir / name
        self._lib_dir_arg = lib_dir
        self.heap = heap
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._out: IO[bytes] | None = None

    # paths

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def log_file(self) -> Path:
        """The Log4j2 log (INFO)."""
        return self.log_dir / f"{self.name}.log"

    @property
    def out_file(self) -> Path:
        """The JVM's stdout and stderr."""
        return self.log_dir / f"{self.name}.out"

    @property
    def log4j2_file(self) -> Path:
        return self.home / "log4j2.xml"

    @property
    def config_file(self) -> Path:
        return self.home / self.config_name

    # what subclasses provide

    def _find_lib(self) -> Path:
        """The directory of the jars the JVM runs from (Kafka's; the S3 server has its own)."""
        return find_kafka_lib(self._lib_dir_arg)

    def _ports(self) -> dict[str, int]:
        """The ports this service binds, by the setting that names them."""
        raise NotImplementedError

    def _prepare(self, java: str, lib_dir: Path) -> None:
        """Write the config files (and format storage) before the JVM starts."""
        raise NotImplementedError

    def _args(self) -> list[str]:
        """The main class's arguments: its properties file."""
        return [str(self.config_file)]

    def _probe(self, timeout: float) -> str | None:
        """None when ready, else what is still missing (raising OSError counts as not ready)."""
        raise NotImplementedError

    # lifecycle

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, wait: bool = True) -> None:
        """Launch the JVM; with ``wait``, block until ready (at most ``start_timeout`` s) or stop it and raise."""
        if self.is_running():
            return
        lib_dir = self._find_lib()
        java = find_java()
        self._check_ports()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        write_log4j2_config(self.log4j2_file, self.log_file)
        self._prepare(java, lib_dir)
        self._launch(java, lib_dir)
        if wait:
            try:
                self.wait_ready(self.start_timeout)
            except BaseException:
                self.stop()
                raise

    @property
    def pid_file(self) -> Path:
        return self.home / f"{self.name}.pid"

    def _check_ports(self) -> None:
        """Fail clearly when a port is taken, naming a JVM of an earlier run (from its pid file) if it still runs."""
        try:
            for setting, port in self._ports().items():
                check_port_free(port, setting)
        except LocalStackError as err:
            stale = _read_pid(self.pid_file)
            if stale is not None and _process_exists(stale):
                raise LocalStackError(
                    f"{err}. A {self.name} started earlier from {self.home} still runs as pid {stale}"
                ) from None
            raise

    def java_command(self, java: str, lib_dir: Path, main_class: str, args: list[str]) -> list[str]:
        """The full ``java ...`` command line for ``main_class`` on the Kafka classpath."""
        return [
            java,
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log4j2_file}",
            f"-Dkafka.logs.dir={self.log_dir}",
            "-cp",
            str(lib_dir / "*"),
            main_class,
            *args,
        ]

    def _launch(self, java: str, lib_dir: Path) -> None:
        self._out = self.out_file.open("ab")
        self._out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {self.name}\n".encode())
        self._out.flush()
        self._proc = subprocess.Popen(
            self.java_command(java, lib_dir, self.main_class, self._args()),
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: Ctrl-C reaches us only, we stop it ourselves
        )
        LIVE.add(self)
        self.pid_file.write_text(f"{self._proc.pid}\n", encoding="utf-8")

    def wait_ready(self, timeout: float | None = None) -> None:
        """Poll until the service answers as ready; raise LocalStackError (with the log tail) after ``timeout`` s."""
        timeout = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            if self._proc is None:
                raise LocalStackError(f"{self.name} is not started")
            code = self._proc.poll()
            if code is not None:
                raise self.error(f"{self.name} exited with code {code} before it was ready")
            remaining = deadline - time.monotonic()
            try:
                missing = self._probe(max(0.5, min(5.0, remaining)))
            except (OSError, ConnectStateError) as err:
                missing = str(err) or type(err).__name__
            if missing is None:
                return
            if remaining <= 0:
                raise self.error(f"{self.name} not ready after {timeout:g}s: {missing}")
            time.sleep(min(self.ready_interval, max(0.0, deadline - time.monotonic())))

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM the process group, wait ``timeout`` s (``stop_timeout``), then SIGKILL; return the exit code."""
        proc, self._proc = self._proc, None
        code = None
        if proc is not None:
            code = terminate_process_group(proc, self.stop_timeout if timeout is None else timeout)
        if self._out is not None:
            self._out.close()
            self._out = None
        LIVE.discard(self)
        if proc is not None and _read_pid(self.pid_file) == proc.pid:
            self.pid_file.unlink(missing_ok=True)
        return code

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the service's log and of its stdout/stderr."""
        parts = []
        for path in (self.log_file, self.out_file):
            text = tail(path, lines)
            if text.strip():
                parts.append(f"--- last lines of {path}:\n{text}")
        return "\n".join(parts) or f"(no output in {self.log_dir})"

    def error(self, message: str) -> LocalStackError:
        """A LocalStackError with ``message`` and the log tail."""
        return LocalStackError(f"{message}\n{self.log_tail()}")


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: existence check only, nothing is sent
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def terminate_process_group(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """SIGTERM ``proc``'s process group (started with ``start_new_session=True``), wait ``timeout`` s, then SIGKILL it
    and wait 10 s more; return the exit code (None if it still runs)."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        if proc.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)
    return proc.poll()


@atexit.register
def _stop_leftovers() -> None:
    """Stop services the program forgot (they run in their own sessions and would outlive us)."""
    for service in sorted(LIVE, key=lambda s: s.stop_order):  # workers before brokers
        service.stop()
