"""The embedded local stack: a real single-node KRaft broker and a real distributed Kafka Connect worker.

Both run from the Maven jars in ``jvm/kafka/lib`` (``make jars``), each in its own JVM and its own process group, so
that Ctrl-C reaches only us and we stop them in order (worker first, then broker: SIGTERM, a bounded wait, then
SIGKILL). Everything lives under ``local.data.dir`` (``var/local`` by default)::

    <local.data.dir>/broker/server.properties, log4j2.xml, kraft/ (log.dirs), logs/broker.log, logs/broker.out
    <local.data.dir>/connect/worker.properties, log4j2.xml, logs/connect.log, logs/connect.out

The JVMs log at INFO to ``logs/<name>.log`` through Log4j2; ``logs/<name>.out`` catches their stdout and stderr.
Every failure raises :class:`LocalStackError` with the tail of those files.

Readiness is checked with real requests through the Kafka layer (:mod:`connect_state.kafka`): the broker describes
a cluster with the cluster id we formatted and itself among the brokers; for the worker ``GET /``, ``GET /health`` and
``GET /connectors`` answer 200 and its three internal topics exist on the broker with a leader for every partition.

``connect-state-stack start`` runs the stack in the foreground until Ctrl-C or SIGTERM; with ``--s3`` it also runs an
S3-compatible server on loopback (:mod:`connect_state.dev.s3_server`) for tables and checkpoints in a bucket.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import IO

from connect_state.core.errors import ConnectStateError, LocalStackError
from connect_state.core.settings import Settings, add_config_arguments, settings_from_args
from connect_state.dev.connect_rest import ConnectRestClient, ConnectRestError
from connect_state.dev.jvm_service import (
    DEFAULT_KAFKA_LIB,
    KAFKA_LIB_ENV,
    LOOPBACK,
    JavaService,
    Service,
    find_kafka_lib,
    write_properties,
)
from connect_state.dev.s3_server import S3Server, credentials_env
from connect_state.kafka.admin import ClusterDescription, KafkaAdmin

DATA_DIR_MARKER = ".connect-state-local"
"""File written into ``local.data.dir``; ``--fresh`` only wipes directories that carry it (or are empty)."""


# --- small helpers --------------------------------------------------------------------------------------------------


def parse_host_port(address: str) -> tuple[str, int]:
    """``host:port`` (the first of a comma-separated bootstrap list) -> ``(host, port)``."""
    first = address.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit():
        raise LocalStackError(f"expected host:port, got {address!r}")
    return host.strip("[]") or LOOPBACK, int(port)


# --- asking the broker, through the Kafka layer ----------------------------------------------------------------------


def _kafka_admin(bootstrap_servers: str, timeout: float) -> KafkaAdmin:
    """The Kafka layer's admin client on the loopback broker (plain text: no client properties from the settings)."""
    timeout_ms = max(1, int(timeout * 1000))
    return KafkaAdmin(
        {"bootstrap.servers": bootstrap_servers}, client_id="connect-state-local-stack", timeout_ms=timeout_ms
    )


def _check_listening(bootstrap_servers: str, timeout: float) -> None:
    """Raise OSError unless something accepts a TCP connection at ``bootstrap_servers`` (before any Kafka client, so
    a broker that is not listening yet costs no client thread and no kafka-python log lines)."""
    with socket.create_connection(parse_host_port(bootstrap_servers), timeout=timeout):
        pass


def describe_cluster(bootstrap_servers: str, timeout: float = 5.0) -> ClusterDescription:
    """The cluster as the broker at ``bootstrap_servers`` describes it (kafka-python's ``describe_cluster``).

    Raises OSError when nothing listens there, :class:`~connect_state.core.errors.KafkaWriteError` (a subclass of
    ``ConnectStateError``) when no broker answers within ``timeout`` seconds.
    """
    _check_listening(bootstrap_servers, timeout)
    with _kafka_admin(bootstrap_servers, timeout) as admin:
        return admin.describe_cluster()


def ready_topics(bootstrap_servers: str, topics: list[str], timeout: float = 5.0) -> dict[str, int]:
    """The partition count of each of ``topics`` that exists with a leader for every partition (never created)."""
    _check_listening(bootstrap_servers, timeout)
    with _kafka_admin(bootstrap_servers, timeout) as admin:
        return admin.ready_topics(topics)


# --- one JVM --------------------------------------------------------------------------------------------------------


# --- the broker -----------------------------------------------------------------------------------------------------


class KafkaBroker(JavaService):
    """A single-node KRaft broker (combined broker and controller) on 127.0.0.1.

    Its storage is formatted with ``kafka.tools.StorageTool`` on first start and reused afterwards.
    ``overrides`` are extra or replacing ``server.properties`` entries.
    """

    stop_order = 1

    main_class = "kafka.Kafka"
    config_name = "server.properties"
    storage_tool = "kafka.tools.StorageTool"
    node_id = 1

    def __init__(
        self,
        settings: Settings,
        *,
        port: int | None = None,
        controller_port: int | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, str] | None = None,
        lib_dir: str | os.PathLike[str] | None = None,
        heap: str = "512m",
        start_timeout: float = 90.0,
        stop_timeout: float = 30.0,
    ) -> None:
        super().__init__(
            "broker",
            settings,
            data_dir,
            lib_dir=lib_dir,
            heap=heap,
            start_timeout=start_timeout,
            stop_timeout=stop_timeout,
        )
        self.port = settings.local_broker_port if port is None else port
        self.controller_port = settings.local_controller_port if controller_port is None else controller_port
        self.overrides = dict(overrides or {})

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def storage_dir(self) -> Path:
        """``log.dirs``: the KRaft metadata log and the topic partitions."""
        return self.home / "kraft"

    @property
    def cluster_id(self) -> str | None:
        """The cluster id in the formatted storage (None before formatting)."""
        meta = self.storage_dir / "meta.properties"
        if not meta.is_file():
            return None
        for line in meta.read_text(encoding="utf-8").splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
        return None

    def server_properties(self) -> dict[str, str]:
        """``server.properties``: spec §8.3 on loopback, plus ``overrides``."""
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{self.node_id}@{LOOPBACK}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{LOOPBACK}:{self.port},CONTROLLER://{LOOPBACK}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.storage_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.overrides)
        return props

    def _ports(self) -> dict[str, int]:
        return {"local.broker.port": self.port, "local.controller.port": self.controller_port}

    def _prepare(self, java: str, lib_dir: Path) -> None:
        self.storage_dir.mkdir(parents=True, exist_ok=True)
        write_properties(self.config_file, self.server_properties(), "KRaft broker, written by local_stack.py")
        if self.cluster_id is None:
            self._format_storage(java, lib_dir)

    def _storage_tool(self, java: str, lib_dir: Path, args: list[str]) -> str:
        command = self.java_command(java, lib_dir, self.storage_tool, args)
        try:
            done = subprocess.run(command, cwd=self.home, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            raise self.error(f"StorageTool {args[0]} did not finish in 120 s") from None
        if done.returncode != 0:
            raise self.error(f"StorageTool {args[0]} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        return done.stdout

    def _format_storage(self, java: str, lib_dir: Path) -> None:
        lines = self._storage_tool(java, lib_dir, ["random-uuid"]).split()
        if not lines:
            raise self.error("StorageTool random-uuid printed nothing")
        self._storage_tool(java, lib_dir, ["format", "-t", lines[-1], "-c", str(self.config_file)])

    def describe_cluster(self, timeout: float = 5.0) -> ClusterDescription:
        """The cluster as this broker describes it."""
        return describe_cluster(self.bootstrap_servers, timeout)

    def _probe(self, timeout: float) -> str | None:
        cluster = self.describe_cluster(timeout)
        if not cluster.brokers:
            return "the broker answers but lists no broker yet"
        if cluster.cluster_id != self.cluster_id:
            return f"port {self.port} answers for cluster {cluster.cluster_id}, not ours ({self.cluster_id})"
        return None


# --- the Connect worker ---------------------------------------------------------------------------------------------


class ConnectWorker(JavaService):
    """A distributed Kafka Connect worker on 127.0.0.1, with the FileStream connectors on its classpath.

    Defaults follow spec §8.4 and the settings (internal topic names, topic tracking); Connect creates its internal
    topics with its default partition counts (status 5, offsets 25, configs 1), replication factor 1, compacted.
    ``overrides`` replace or add worker properties: a second worker in its own Connect cluster needs another
    ``group.id``, other ``*.storage.topic`` names, and another ``port`` (and ``name``, which names its directory).
    """

    main_class = "org.apache.kafka.connect.cli.ConnectDistributed"
    config_name = "worker.properties"

    def __init__(
        self,
        settings: Settings,
        *,
        name: str = "connect",
        port: int | None = None,
        bootstrap_servers: str | None = None,
        group_id: str = "connect-cluster",
        offset_flush_interval_ms: int = 1000,
        overrides: Mapping[str, str] | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        lib_dir: str | os.PathLike[str] | None = None,
        heap: str = "512m",
        start_timeout: float = 120.0,
        stop_timeout: float = 30.0,
    ) -> None:
        super().__init__(
            name, settings, data_dir, lib_dir=lib_dir, heap=heap, start_timeout=start_timeout, stop_timeout=stop_timeout
        )
        self.settings = settings
        self.port = settings.local_connect_port if port is None else port
        self.bootstrap_servers = bootstrap_servers or f"{LOOPBACK}:{settings.local_broker_port}"
        self.group_id = group_id
        self.offset_flush_interval_ms = offset_flush_interval_ms
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.properties = self.worker_properties()

    @property
    def rest_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def status_topic(self) -> str:
        return self.properties["status.storage.topic"]

    @property
    def config_topic(self) -> str:
        return self.properties["config.storage.topic"]

    @property
    def offset_topic(self) -> str:
        return self.properties["offset.storage.topic"]

    @property
    def internal_topics(self) -> list[str]:
        return [self.config_topic, self.offset_topic, self.status_topic]

    def client(self, timeout: float = 30.0) -> ConnectRestClient:
        """A REST client on this worker."""
        return ConnectRestClient(self.rest_url, timeout)

    def worker_settings(self) -> Settings:
        """The settings with this worker's bootstrap servers, internal topics, REST URL and topic tracking flags."""
        return self.settings.with_overrides(
            **{
                "bootstrap.servers": self.bootstrap_servers,
                "status.storage.topic": self.status_topic,
                "config.storage.topic": self.config_topic,
                "offset.storage.topic": self.offset_topic,
                "connect.rest.url": self.rest_url,
                "topic.tracking.enable": self.properties["topic.tracking.enable"],
                "topic.tracking.allow.reset": self.properties["topic.tracking.allow.reset"],
            }
        )

    def worker_properties(self) -> dict[str, str]:
        """``worker.properties``: spec §8.4 on loopback, the settings' topic names and flags, then ``overrides``."""
        s = self.settings
        json_converter = "org.apache.kafka.connect.json.JsonConverter"
        props = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.group_id,
            "key.converter": json_converter,
            "value.converter": json_converter,
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "offset.storage.topic": s.offset_storage_topic,
            "config.storage.topic": s.config_storage_topic,
            "status.storage.topic": s.status_storage_topic,
            "offset.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "listeners": f"http://{LOOPBACK}:{self.port}",
            "rest.advertised.host.name": LOOPBACK,
            "rest.advertised.port": str(self.port),
            "offset.flush.interval.ms": str(self.offset_flush_interval_ms),
            "topic.tracking.enable": str(s.topic_tracking_enable).lower(),
            "topic.tracking.allow.reset": str(s.topic_tracking_allow_reset).lower(),
        }
        props.update(self.overrides)
        return props

    def _ports(self) -> dict[str, int]:
        return {"local.connect.port": self.port}

    def _prepare(self, java: str, lib_dir: Path) -> None:
        try:
            describe_cluster(self.bootstrap_servers, timeout=5.0)
        except (OSError, ConnectStateError) as err:
            raise LocalStackError(
                f"no Kafka broker answers at {self.bootstrap_servers} ({err}); start the broker before the worker"
            ) from None
        self.properties = self.worker_properties()
        write_properties(self.config_file, self.properties, "Connect worker, written by local_stack.py")

    def _probe(self, timeout: float) -> str | None:
        client = ConnectRestClient(self.rest_url, timeout)
        for path in ("/", "/health", "/connectors"):
            try:
                status, body = client.get(path)
            except ConnectRestError as err:
                return str(err)
            if status != 200:
                message = body.get("message") if isinstance(body, dict) else None
                return f"GET {path} answered {status}" + (f": {message}" if message else "")
        found = ready_topics(self.bootstrap_servers, self.internal_topics, timeout)
        missing = [t for t in self.internal_topics if t not in found]
        return f"internal topics not created yet: {', '.join(missing)}" if missing else None


# --- broker + worker ------------------------------------------------------------------------------------------------


class LocalStack(Service):
    """A broker, then a worker on it, from one Settings; stopped in reverse order."""

    def __init__(
        self,
        settings: Settings,
        *,
        lib_dir: str | os.PathLike[str] | None = None,
        broker_overrides: Mapping[str, str] | None = None,
        worker_overrides: Mapping[str, str] | None = None,
        offset_flush_interval_ms: int = 1000,
        fresh: bool = False,
        s3: bool = False,
    ) -> None:
        self.settings = settings
        self.fresh = fresh
        self.s3: JavaService | None = S3Server(settings) if s3 else None
        self.broker = KafkaBroker(settings, overrides=broker_overrides, lib_dir=lib_dir)
        self.worker = ConnectWorker(
            settings,
            bootstrap_servers=self.broker.bootstrap_servers,
            offset_flush_interval_ms=offset_flush_interval_ms,
            overrides=worker_overrides,
            lib_dir=lib_dir,
        )

    @property
    def bootstrap_servers(self) -> str:
        return self.broker.bootstrap_servers

    @property
    def connect_url(self) -> str:
        return self.worker.rest_url

    def start(self) -> None:
        """Start the broker and wait for it, then the worker; on any failure stop what was started and raise."""
        find_kafka_lib(self.broker._lib_dir_arg)  # fail fast, before touching the data dir
        self.broker._check_ports()
        self.worker._check_ports()
        if self.s3 is not None:
            self.s3._find_lib()
            self.s3._check_ports()
        prepare_data_dir(self.settings.local_data_dir, wipe=self.fresh)
        self.fresh = False  # a restart of the same object keeps the data
        try:
            if self.s3 is not None:
                self.s3.start()
            self.broker.start()
            self.worker.start()
        except BaseException:
            self.stop()
            raise

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        self.broker.wait_ready(timeout)
        self.worker.wait_ready(max(0.0, deadline - time.monotonic()))

    def stop(self) -> None:
        """Stop the worker, then the broker (then the S3 server)."""
        self.worker.stop()
        self.broker.stop()
        if self.s3 is not None:
            self.s3.stop()

    def dead_service(self) -> JavaService | None:
        """A service that was started and has exited since, if any."""
        for service in (self.broker, self.worker, *([self.s3] if self.s3 is not None else [])):
            if service._proc is not None and service._proc.poll() is not None:
                return service
        return None


def prepare_data_dir(path: Path, wipe: bool = False) -> None:
    """Create ``path`` with its marker file; with ``wipe``, empty it first (only if it is ours or already empty)."""
    path = Path(path)
    if wipe and path.exists():
        if any(path.iterdir()) and not (path / DATA_DIR_MARKER).exists():
            raise LocalStackError(
                f"refusing to wipe {path}: it is not empty and has no {DATA_DIR_MARKER} marker (not a local stack dir)"
            )
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / DATA_DIR_MARKER).touch()


# --- console script -------------------------------------------------------------------------------------------------


class _StopRequested(Exception):
    """Raised by our SIGTERM handler to leave the foreground loop."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _StopRequested


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """Ignore Ctrl-C and SIGTERM while stopping, so a second one cannot leave the JVMs behind."""
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def run_foreground(stack: LocalStack, out: IO[str] = sys.stdout) -> int:
    """Start ``stack``, report where it is, and keep it up until Ctrl-C, SIGTERM or a JVM exiting; then stop it."""
    previous = signal.signal(signal.SIGTERM, _raise_stop)
    try:
        stack.start()
        print(
            f"Kafka broker   {stack.bootstrap_servers}  (logs: {stack.broker.log_file})\n"
            f"Connect worker {stack.connect_url}  (logs: {stack.worker.log_file})\n"
            "Press Ctrl-C to stop.",
            file=out,
            flush=True,
        )
        if stack.s3 is not None:
            print(s3_instructions(stack.s3), file=out, flush=True)
        while (dead := stack.dead_service()) is None:
            time.sleep(1.0)
        raise dead.error(f"{dead.name} exited unexpectedly")
    except (KeyboardInterrupt, _StopRequested):
        print("stopping the local stack...", file=out, flush=True)
        return 0
    finally:
        with _signals_ignored():
            stack.stop()
        signal.signal(signal.SIGTERM, previous)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="connect-state-stack",
        description="Run the embedded local stack: a single-node KRaft broker and a distributed Connect worker.",
    )
    add_config_arguments(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start broker and worker in the foreground until Ctrl-C or SIGTERM")
    start.add_argument("--fresh", action="store_true", help="wipe local.data.dir first (a new, empty cluster)")
    start.add_argument("--lib-dir", help=f"directory of Kafka jars (default: ${KAFKA_LIB_ENV} or {DEFAULT_KAFKA_LIB})")
    start.add_argument(
        "--s3",
        action="store_true",
        help="also start an S3-compatible server (s3proxy, in memory) on local.s3.port with bucket local.s3.bucket",
    )
    return parser


def s3_instructions(server: JavaService) -> str:
    """How to point the jobs and the API at the stack's S3 server: its credentials and the settings."""

    assert isinstance(server, S3Server)
    env = " ".join(f"{k}={v}" for k, v in credentials_env().items())
    sets = " ".join(f"--set {k}={v}" for k, v in server.storage_settings().items())
    return f"S3 server      {server.endpoint}  (bucket {server.buckets[0]}; in memory)\n  {env}\n  {sets}"


def _warn_if_elsewhere(settings: Settings, stack: LocalStack) -> None:
    """Say so when bootstrap.servers or connect.rest.url point somewhere else than the stack being started."""
    pairs = (
        ("bootstrap.servers", settings.bootstrap_servers, stack.bootstrap_servers),
        ("connect.rest.url", settings.connect_rest_url.rstrip("/"), stack.connect_url),
    )
    for key, configured, actual in pairs:
        if configured != actual:
            print(f"note: {key} is {configured}, but the local stack runs at {actual}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``connect-state-stack``."""
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
        stack = LocalStack(settings, lib_dir=args.lib_dir, fresh=args.fresh, s3=args.s3)
        _warn_if_elsewhere(settings, stack)
        return run_foreground(stack)
    except ConnectStateError as err:
        print(f"connect-state-stack: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
