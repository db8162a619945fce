"""The one admin client of the Kafka layer: cluster and topic description, topic creation, the consumer-group calls.

:class:`KafkaAdmin` owns **one** kafka-python ``KafkaAdminClient``, created on first use (bootstrapping within the
timeout) and closed by :meth:`KafkaAdmin.close`; calls are serialized, so one instance is safe to share between
threads. The writer uses it for partition counts and topic creation, the consumer-group admin
(:class:`~connect_state.kafka.groups.ConsumerGroupAdmin`) is built on it, and the local stack asks it whether the
broker and the worker's topics are ready.

Errors are typed (:mod:`connect_state.core.errors`): no broker reached in time -> :class:`KafkaUnavailableError`, a
topic that does not exist -> :class:`TopicNotFoundError`, retriable errors until the deadline ->
:class:`KafkaWriteTimeout`, anything else -> :class:`KafkaWriteError`.

kafka-python quirks handled here (3.0.x):

* ``KafkaAdminClient.__init__`` starts its IO thread before bootstrapping and, when bootstrapping fails, raises with
  that thread still running (one leaked thread per attempt while Kafka is down): :class:`StopIOOnFailedInit` stops
  it (``KafkaConsumer`` has the same quirk).
* Concurrent calls on one admin client can fail with ``NodeNotReadyError``: calls are serialized, and retriable
  metadata errors are retried until the call's timeout.
* A Metadata request for a topic that does not exist never creates it (``allow_auto_topic_creation=false``, which
  ``describe_topics`` sends), unlike a producer's, which also keeps asking for that topic forever.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from kafka import KafkaAdminClient, KafkaConsumer
from kafka import errors as kafka_errors

from connect_state.core.errors import KafkaWriteError, KafkaWriteTimeout, TopicNotFoundError, describe_error
from connect_state.kafka.config import kafka_python_config
from connect_state.kafka.errors import unreachable, write_error

log = logging.getLogger(__name__)

T = TypeVar("T")

_METADATA_RETRY_BACKOFF_S = 0.1


class StopIOOnFailedInit:
    """Mixin for kafka-python clients that start their IO thread before bootstrapping (``KafkaAdminClient``,
    ``KafkaConsumer``): when ``__init__`` raises, stop that thread instead of leaking one per attempt."""

    def __init__(self, **configs: Any) -> None:
        try:
            super().__init__(**configs)
        except BaseException:
            for name, stop in (("_client", "close"), ("_net", "stop")):
                part = getattr(self, name, None)
                if part is not None:
                    with contextlib.suppress(Exception):
                        getattr(part, stop)()
            raise


class SafeConsumer(StopIOOnFailedInit, KafkaConsumer):
    """``KafkaConsumer`` that does not leak its IO thread when it cannot bootstrap (kafka-python 3.0.x does)."""


class _AdminClient(StopIOOnFailedInit, KafkaAdminClient):
    """``KafkaAdminClient`` that does not leak its IO thread when it cannot bootstrap (kafka-python 3.0.x does)."""


class _RetriableMetadataError(Exception):
    """A metadata answer worth asking again (within the caller's timeout)."""


@dataclass(frozen=True)
class ClusterDescription:
    """What a broker answers about its cluster (``DescribeCluster``): the cluster id, controller and brokers."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[tuple[int, str, int], ...]
    """``(node id, host, port)`` of every broker."""


class KafkaAdmin:
    """One lazily created, thread-safe kafka-python admin client on the cluster of ``properties``.

    ``properties`` are Java-style client properties (``bootstrap.servers``, ``security.protocol``, ...; see
    :func:`~connect_state.kafka.config.kafka_python_config`); ``timeout_ms`` bounds the bootstrap, each request and,
    retries included, each call. ``name`` names the client in the error raised once it is closed.
    """

    #: The kafka-python admin client class (a subclass may change how answers are decoded); None: the module's
    #: ``_AdminClient``, looked up when the client is made.
    client_class: type[KafkaAdminClient] | None = None

    def __init__(
        self,
        properties: Mapping[str, str],
        *,
        client_id: str,
        timeout_ms: int,
        name: str = "Kafka admin client",
        warn_unsupported: bool = True,
    ) -> None:
        self.properties = dict(properties)
        self.bootstrap_servers = self.properties.get("bootstrap.servers", "")
        self.client_id = client_id
        self.timeout_ms = timeout_ms
        self.name = name
        self.warn_unsupported = warn_unsupported
        self._lock = threading.Lock()
        self._call_lock = threading.Lock()
        self._admin: KafkaAdminClient | None = None
        self._partition_counts: dict[str, int] = {}
        self._closed = False

    # --- the client ----------------------------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """The keyword arguments of the kafka-python admin client: connection and security properties."""
        config: dict[str, Any] = {
            "client_id": self.client_id,
            "bootstrap_timeout_ms": self.timeout_ms,
            "request_timeout_ms": self.timeout_ms,
        }
        config.update(kafka_python_config(self.properties, KafkaAdminClient.DEFAULT_CONFIG, warn=self.warn_unsupported))
        return config

    def client(self) -> KafkaAdminClient:
        """The kafka-python admin client, created (bootstrapped) on first use.

        Raises :class:`KafkaUnavailableError` when no broker answers within the timeout, :class:`KafkaWriteError`
        when the client is closed or cannot be created otherwise.
        """
        with self._lock:
            if self._closed:
                raise KafkaWriteError(f"the {self.name} is closed")
            if self._admin is None:
                try:
                    self._admin = (self.client_class or _AdminClient)(**self.config())
                except kafka_errors.KafkaError as err:
                    raise unreachable(err, self.bootstrap_servers) from err
            return self._admin

    def call(self, call: Callable[[KafkaAdminClient], T]) -> T:
        """Run ``call`` on the client, one call at a time (kafka-python fails concurrent ones); errors unmapped."""
        admin = self.client()
        with self._call_lock:
            return call(admin)

    def close(self) -> None:
        """Close the client (idempotent); later calls raise :class:`KafkaWriteError`."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:
                log.warning("error closing the Kafka admin client", exc_info=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the cluster -----------------------------------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        """The cluster id, controller and brokers (kafka-python's ``describe_cluster``)."""
        try:
            described = self.call(lambda admin: admin.describe_cluster())
        except kafka_errors.KafkaError as err:
            reason = describe_error(err)
            raise write_error(err)(f"cannot describe the Kafka cluster at {self.bootstrap_servers}: {reason}") from err
        brokers = tuple(
            (int(b.get("broker_id", b.get("node_id", -1))), str(b.get("host") or ""), int(b.get("port") or 0))
            for b in described.get("brokers") or []
        )
        return ClusterDescription(described.get("cluster_id"), int(described.get("controller_id", -1)), brokers)

    # --- topics ----------------------------------------------------------------------------------------------------

    def _describe_topics(self, topics: list[str], what: str) -> list[dict[str, Any]]:
        """One Metadata request for ``topics`` (never auto-created). Retriable errors -> _RetriableMetadataError."""
        try:
            return self.call(lambda admin: admin.describe_topics(topics))
        except kafka_errors.KafkaError as err:
            if err.retriable:
                raise _RetriableMetadataError(describe_error(err)) from err
            reason = describe_error(err)
            raise KafkaWriteError(
                f"cannot read the metadata of {what} from Kafka at {self.bootstrap_servers}: {reason}"
            ) from err

    def partition_count(self, topic: str, timeout_ms: int | None = None) -> int:
        """The number of partitions of ``topic``, from cluster metadata, cached per client.

        Retriable metadata errors (no broker ready yet, a leader election) are retried within ``timeout_ms`` (default:
        the client's timeout), then raise :class:`KafkaWriteTimeout`. Raises :class:`TopicNotFoundError` when the
        topic does not exist, :class:`KafkaUnavailableError` when Kafka cannot be reached, :class:`KafkaWriteError`
        when the metadata cannot be read otherwise.
        """
        cached = self._partition_counts.get(topic)
        if cached is not None:
            return cached
        deadline = time.monotonic() + (self.timeout_ms if timeout_ms is None else timeout_ms) / 1000
        while True:
            try:
                count = self._describe_partition_count(topic)
            except _RetriableMetadataError as err:
                if time.monotonic() + _METADATA_RETRY_BACKOFF_S >= deadline:
                    raise KafkaWriteTimeout(
                        f"cannot read the metadata of topic {topic!r} from Kafka at {self.bootstrap_servers}: {err}"
                    ) from err
                time.sleep(_METADATA_RETRY_BACKOFF_S)
                continue
            self._partition_counts[topic] = count
            return count

    def _describe_partition_count(self, topic: str) -> int:
        """One Metadata request for ``topic``: its partition count."""
        described = self._describe_topics([topic], f"topic {topic!r}")
        info = next((t for t in described if t.get("name") == topic), None)
        if info is None:
            raise KafkaWriteError(f"Kafka at {self.bootstrap_servers} returned no metadata for topic {topic!r}")
        error = kafka_errors.for_code(info.get("error_code", 0))
        if error is kafka_errors.UnknownTopicOrPartitionError:
            raise TopicNotFoundError(
                f"topic {topic!r} does not exist on the Kafka cluster at {self.bootstrap_servers}; "
                "check the internal topic names in the settings (e.g. status.storage.topic)"
            )
        if error is not kafka_errors.NoError:
            if error.retriable:
                raise _RetriableMetadataError(error.__name__)
            raise KafkaWriteError(f"cannot read the metadata of topic {topic!r}: {error.__name__}")
        count = len(info.get("partitions") or [])
        if count < 1:
            raise _RetriableMetadataError(f"topic {topic!r} has no partitions in the metadata yet")
        return count

    def ready_topics(self, topics: Iterable[str]) -> dict[str, int]:
        """The partition count of each of ``topics`` that exists with a leader for every partition (one request).

        Topics that do not exist (or not yet everywhere) are left out; a retriable error leaves every topic out.
        """
        names = list(topics)
        try:
            described = self._describe_topics(names, "topics " + ", ".join(names))
        except _RetriableMetadataError:
            return {}
        ready = {}
        for info in described:
            error = kafka_errors.for_code(info.get("error_code", 0))
            if error is not kafka_errors.NoError:
                if error is kafka_errors.UnknownTopicOrPartitionError or error.retriable:
                    continue
                raise KafkaWriteError(f"cannot read the metadata of topic {info.get('name')!r}: {error.__name__}")
            partitions = info.get("partitions") or []
            if partitions and all(p.get("error_code", 0) == 0 and p.get("leader_id", -1) >= 0 for p in partitions):
                ready[info["name"]] = len(partitions)
        return ready

    def create_topic(self, topic: str, timeout_ms: int | None = None) -> bool:
        """Create ``topic`` with the broker's default partitions and replication factor, and wait until it has
        leaders; False when it already exists."""
        timeout = self.timeout_ms if timeout_ms is None else timeout_ms
        try:
            self.call(lambda admin: admin.create_topics({topic: {}}, timeout_ms=timeout, wait_for_metadata=True))
        except kafka_errors.TopicAlreadyExistsError:
            return False
        except kafka_errors.KafkaError as err:
            raise write_error(err)(f"cannot create topic {topic!r}: {describe_error(err)}") from err
        log.info("created topic %s", topic)
        return True
