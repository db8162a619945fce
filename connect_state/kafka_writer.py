"""Writes to Connect's internal topics the way a Connect worker does: one shared producer, Java key placement.

:class:`InternalTopicWriter` wraps **one** kafka-python ``KafkaProducer`` per process (created on first use, safe to
share between threads, closed by :meth:`InternalTopicWriter.close`). It is used by the API (``PUT .../topics/reset``)
and by jobs; nothing here knows about Flask or Spark.

What it guarantees (spec §1):

* ``acks=all``, idempotence off (Connect forces it off on its stores), raw ``bytes`` keys and values, a ``None``
  value is a tombstone; null keys are refused (a null key makes a Connect worker skip the rest of its poll batch).
* The partition is chosen **explicitly** with :func:`connect_state.partitioner.partition_for_key` (the Java
  producer's murmur2 partitioner), whatever kafka-python's own default would do, so every key lands where a worker
  writes it and compaction / last-writer-wins keep working.
* :meth:`InternalTopicWriter.send` sends the records in order (one request in flight per broker, so a retry cannot
  reorder them), flushes, and waits for every acknowledgement within ``timeout_ms``; anything else raises
  :class:`KafkaWriteError`. A timed-out record may still be delivered later: like any Kafka client, we cannot take
  back a record that is already in flight.

kafka-python quirks handled here (3.0.x):

* A producer asked about a topic that does not exist keeps that topic in its metadata forever and re-requests
  metadata every ``retry_backoff_ms`` with an ERROR log line each time, after blocking ``max_block_ms`` on the first
  call. So the partition count (and the existence check) comes from a small admin client's ``describe_topics``
  (one Metadata request, ``allow_auto_topic_creation=false``); the producer only ever sees topics that exist.
* ``KafkaAdminClient.__init__`` leaks its IO thread when it cannot bootstrap; :class:`_MetadataClient` stops it.
* Concurrent ``describe_topics`` calls on one admin client can fail with ``NodeNotReadyError``: metadata requests
  are serialized, and retriable metadata errors are retried until the call's timeout.
* Java-style client properties (``security.protocol``, ``sasl.jaas.config``, ...) are mapped to kafka-python's
  keyword arguments by :func:`kafka_python_config`.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer
from kafka import errors as kafka_errors

from connect_state.errors import ConfigError, KafkaWriteError
from connect_state.partitioner import partition_for_key
from connect_state.settings import Settings

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]
"""``(key, value)``; a ``None`` value is a tombstone."""

CLIENT_ID = "connect-state-writer"
_METADATA_RETRY_BACKOFF_S = 0.1

# Settings Connect forces on its internal-topic producers (plus what keeps `send` ordered and explicit).
_FORCED_PRODUCER_CONFIG: dict[str, Any] = {
    "acks": -1,  # "all"
    "enable_idempotence": False,
    "allow_auto_create_topics": False,
    "max_in_flight_requests_per_connection": 1,
}
# kafka-python arguments that are not plain values, or that this writer owns; never taken from properties.
_NOT_FROM_PROPERTIES = frozenset(
    {
        "key_serializer",
        "value_serializer",
        "partitioner",
        "transactional_id",
        "kafka_client",
        "selector",
        "metric_reporters",
        "socket_options",
        "ssl_context",
        "sasl_oauth_token_provider",
        "api_version",
    }
)
# Java keys consumed by the special cases of kafka_python_config, never reported as unsupported.
_CONSUMED_JAVA_KEYS = frozenset({"ssl.truststore.type", "ssl.keystore.type"})
_JAAS_OPTION = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=\s|;|$)""")


class _MetadataClient(KafkaAdminClient):
    """``KafkaAdminClient`` that does not leak its IO thread when it cannot bootstrap.

    kafka-python 3.0.x starts the admin client's IO thread before bootstrapping and, when bootstrapping fails, raises
    from ``__init__`` with that thread still running (one leaked thread per attempt while Kafka is down).
    """

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


class _RetriableMetadataError(Exception):
    """A metadata answer worth asking again (within the caller's timeout)."""


@dataclass(frozen=True)
class RecordPosition:
    """Where an acknowledged record was written."""

    topic: str
    partition: int
    offset: int


def _convert(java_key: str, python_key: str, value: str, default: Any) -> Any:
    """A Java property's string value as the type kafka-python expects for ``python_key``."""
    try:
        if python_key == "acks":
            return -1 if value.strip().lower() == "all" else int(value)
        if isinstance(default, bool):
            lowered = value.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError(value)
            return lowered == "true"
        if isinstance(default, int | float) or (default is None and python_key.endswith(("_ms", "_bytes"))):
            return int(value)
    except ValueError:
        raise ConfigError(f"kafka.client.properties: {java_key}: expected a number or boolean, got {value!r}") from None
    if python_key == "compression_type" and value.strip().lower() == "none":
        return None
    return value


def _parse_jaas(value: str) -> dict[str, str]:
    """``username``/``password`` of a ``sasl.jaas.config`` (PLAIN or SCRAM login module) as kafka-python keys."""
    options = {
        m.group(1): re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None else m.group(3)
        for m in _JAAS_OPTION.finditer(value)
    }
    mapped = {}
    if "username" in options:
        mapped["sasl_plain_username"] = options["username"]
    if "password" in options:
        mapped["sasl_plain_password"] = options["password"]
    return mapped


def kafka_python_config(
    properties: Mapping[str, str], accepted: Mapping[str, Any], *, warn: bool = True
) -> dict[str, Any]:
    """Map Java-style client properties (``security.protocol``) to kafka-python keyword arguments.

    ``accepted`` is the client class's ``DEFAULT_CONFIG`` (the keys it accepts and their default values, which give
    the type a string value is converted to). Generic rule: ``a.b.c`` -> ``a_b_c``. Special cases: PEM
    ``ssl.truststore.location`` -> ``ssl_cafile``, PEM ``ssl.keystore.location`` -> ``ssl_certfile``,
    ``ssl.key.password`` -> ``ssl_password``, ``ssl.endpoint.identification.algorithm`` -> ``ssl_check_hostname``,
    ``sasl.jaas.config`` (PLAIN/SCRAM) -> ``sasl_plain_username``/``sasl_plain_password``,
    ``compression.type=none`` -> ``None``. Keys the client does not support are logged (``warn``) and skipped.
    """
    config: dict[str, Any] = {}
    unsupported: list[str] = []
    pem_truststore = properties.get("ssl.truststore.type", "").upper() == "PEM"
    pem_keystore = properties.get("ssl.keystore.type", "").upper() == "PEM"
    for java_key, value in properties.items():
        mapped: dict[str, Any]
        if java_key in _CONSUMED_JAVA_KEYS:
            continue
        if java_key == "ssl.truststore.location" and (pem_truststore or value.endswith((".pem", ".crt"))):
            mapped = {"ssl_cafile": value}
        elif java_key == "ssl.keystore.location" and (pem_keystore or value.endswith(".pem")):
            mapped = {"ssl_certfile": value}
        elif java_key == "ssl.key.password":
            mapped = {"ssl_password": value}
        elif java_key == "ssl.endpoint.identification.algorithm":
            mapped = {"ssl_check_hostname": value.strip().lower() == "https"}
        elif java_key == "sasl.jaas.config":
            mapped = _parse_jaas(value)
            if not mapped:
                unsupported.append(java_key)
        else:
            python_key = java_key.replace(".", "_").replace("-", "_")
            if python_key in _NOT_FROM_PROPERTIES or python_key not in accepted:
                unsupported.append(java_key)
                continue
            mapped = {python_key: _convert(java_key, python_key, value, accepted[python_key])}
        config.update({k: v for k, v in mapped.items() if k in accepted})
    if unsupported and warn:
        log.warning("kafka.client.properties not supported by kafka-python, ignored: %s", ", ".join(unsupported))
    return config


class InternalTopicWriter:
    """One lazily created kafka-python producer for writing records to Connect's internal topics.

    Thread-safe: share one instance per process. ``timeout_ms`` defaults to ``api.kafka.write.timeout.ms``; it is
    also the longest a ``send`` may block waiting for metadata or for a connection (``max.block.ms``).
    """

    def __init__(self, settings: Settings, *, client_id: str = CLIENT_ID) -> None:
        self.settings = settings
        self.bootstrap_servers = settings.bootstrap_servers
        self.default_timeout_ms = settings.api_kafka_write_timeout_ms
        self.client_id = client_id
        self._lock = threading.Lock()
        self._metadata_lock = threading.Lock()
        self._producer: KafkaProducer | None = None
        self._admin: _MetadataClient | None = None
        self._partition_counts: dict[str, int] = {}
        self._closed = False
        self._atexit_registered = False

    # --- clients -----------------------------------------------------------------------------------------------

    def producer_config(self) -> dict[str, Any]:
        """The keyword arguments of the producer: client properties, then this writer's defaults and forced keys."""
        timeout = self.default_timeout_ms
        config: dict[str, Any] = {
            "client_id": self.client_id,
            "max_block_ms": timeout,
            "bootstrap_timeout_ms": timeout,
        }
        config.update(kafka_python_config(self.settings.kafka_client_config(), KafkaProducer.DEFAULT_CONFIG))
        for key, value in _FORCED_PRODUCER_CONFIG.items():
            if key in config and config[key] != value:
                log.warning(
                    "kafka.client.properties: %s=%r ignored, the writer always uses %r", key, config[key], value
                )
            config[key] = value
        return config

    def admin_config(self) -> dict[str, Any]:
        """The keyword arguments of the metadata (admin) client: the connection and security properties."""
        config: dict[str, Any] = {
            "client_id": f"{self.client_id}-metadata",
            "bootstrap_timeout_ms": self.default_timeout_ms,
            "request_timeout_ms": self.default_timeout_ms,
        }
        config.update(
            kafka_python_config(self.settings.kafka_client_config(), KafkaAdminClient.DEFAULT_CONFIG, warn=False)
        )
        return config

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaWriteError("the Kafka writer is closed")

    def _register_atexit(self) -> None:
        if not self._atexit_registered:
            atexit.register(self.close)
            self._atexit_registered = True

    def _admin_client(self) -> _MetadataClient:
        with self._lock:
            self._check_open()
            if self._admin is None:
                try:
                    self._admin = _MetadataClient(**self.admin_config())
                except kafka_errors.KafkaError as err:
                    reason = describe_error(err)
                    raise KafkaWriteError(f"cannot reach Kafka at {self.bootstrap_servers}: {reason}") from err
                self._register_atexit()
            return self._admin

    def _producer_client(self) -> KafkaProducer:
        with self._lock:
            self._check_open()
            if self._producer is None:
                try:
                    self._producer = KafkaProducer(**self.producer_config())
                except kafka_errors.KafkaError as err:
                    reason = describe_error(err)
                    raise KafkaWriteError(f"cannot reach Kafka at {self.bootstrap_servers}: {reason}") from err
                self._register_atexit()
            return self._producer

    # --- metadata ----------------------------------------------------------------------------------------------

    def partition_count(self, topic: str, timeout_ms: int | None = None) -> int:
        """The number of partitions of ``topic``, from cluster metadata, cached per writer.

        Retriable metadata errors (no broker ready yet, a leader election) are retried within ``timeout_ms``
        (default ``api.kafka.write.timeout.ms``). Raises KafkaWriteError when the topic does not exist or the metadata
        cannot be read.
        """
        cached = self._partition_counts.get(topic)
        if cached is not None:
            return cached
        deadline = time.monotonic() + (self.default_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        admin = self._admin_client()
        # One metadata request at a time: kafka-python's admin client fails concurrent calls with NodeNotReadyError.
        with self._metadata_lock:
            cached = self._partition_counts.get(topic)
            if cached is not None:
                return cached
            while True:
                try:
                    count = self._describe_partition_count(admin, topic)
                except _RetriableMetadataError as err:
                    if time.monotonic() + _METADATA_RETRY_BACKOFF_S >= deadline:
                        raise KafkaWriteError(
                            f"cannot read the metadata of topic {topic!r} from Kafka at {self.bootstrap_servers}: {err}"
                        ) from err
                    time.sleep(_METADATA_RETRY_BACKOFF_S)
                    continue
                self._partition_counts[topic] = count
                return count

    def _describe_partition_count(self, admin: _MetadataClient, topic: str) -> int:
        """One Metadata request for ``topic``: its partition count."""
        try:
            described = admin.describe_topics([topic])
        except kafka_errors.KafkaError as err:
            if err.retriable:
                raise _RetriableMetadataError(describe_error(err)) from err
            reason = describe_error(err)
            raise KafkaWriteError(
                f"cannot read the metadata of topic {topic!r} from Kafka at {self.bootstrap_servers}: {reason}"
            ) from err
        info = next((t for t in described if t.get("name") == topic), None)
        if info is None:
            raise KafkaWriteError(f"Kafka at {self.bootstrap_servers} returned no metadata for topic {topic!r}")
        error = kafka_errors.for_code(info.get("error_code", 0))
        if error is kafka_errors.UnknownTopicOrPartitionError:
            raise KafkaWriteError(
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

    # --- writing -----------------------------------------------------------------------------------------------

    def send(self, topic: str, records: Sequence[Record], timeout_ms: int | None = None) -> list[RecordPosition]:
        """Write ``records`` to ``topic`` in order and wait until every one is acknowledged (``acks=all``).

        Each key goes to ``partition_for_key(key, partition_count(topic))``. Returns the positions in record order.
        Raises KafkaWriteError on a missing topic, an unreachable cluster, a failed write, or when the
        acknowledgements do not all arrive within ``timeout_ms`` (default ``api.kafka.write.timeout.ms``).
        """
        for key, value in records:
            if not isinstance(key, bytes) or not isinstance(value, bytes | None):
                raise TypeError(
                    f"records must be (bytes, bytes | None) pairs, got ({type(key).__name__}, {type(value).__name__})"
                )
        if not records:
            return []
        timeout_ms = self.default_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        count = self.partition_count(topic, max(int((deadline - time.monotonic()) * 1000), 0))
        producer = self._producer_client()
        futures = []
        try:
            for key, value in records:
                futures.append(producer.send(topic, key=key, value=value, partition=partition_for_key(key, count)))
        except kafka_errors.KafkaTimeoutError as err:
            raise KafkaWriteError(
                f"timed out sending to topic {topic!r} on Kafka at {self.bootstrap_servers} "
                f"({len(futures)} of {len(records)} records handed to the producer): {describe_error(err)}"
            ) from err
        except kafka_errors.KafkaError as err:
            raise KafkaWriteError(f"write to topic {topic!r} failed: {describe_error(err)}") from err
        # A flush also waits for other threads' records, which may be the slow ones: our own futures decide below.
        with contextlib.suppress(kafka_errors.KafkaTimeoutError):
            producer.flush(timeout=max(deadline - time.monotonic(), 0))
        positions = []
        for index, future in enumerate(futures):
            try:
                metadata = future.get(timeout=max(deadline - time.monotonic(), 0))
            except kafka_errors.KafkaTimeoutError as err:
                raise KafkaWriteError(
                    f"timed out after {timeout_ms} ms waiting for Kafka at {self.bootstrap_servers} to acknowledge "
                    f"the write to topic {topic!r} ({index} of {len(records)} records acknowledged)"
                ) from err
            except kafka_errors.KafkaError as err:
                raise KafkaWriteError(
                    f"write to topic {topic!r} failed ({index} of {len(records)} records acknowledged): "
                    f"{describe_error(err)}"
                ) from err
            positions.append(RecordPosition(metadata.topic, metadata.partition, metadata.offset))
        return positions

    def close(self, timeout_ms: int | None = None) -> None:
        """Flush and close the clients (idempotent). Later ``send`` calls raise KafkaWriteError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            producer, admin = self._producer, self._admin
            self._producer = self._admin = None
        if self._atexit_registered:
            atexit.unregister(self.close)
        timeout = (self.default_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        if producer is not None:
            try:
                producer.close(timeout=timeout)
            except Exception:
                log.warning("error closing the Kafka producer", exc_info=True)
        if admin is not None:
            try:
                admin.close()
            except Exception:
                log.warning("error closing the Kafka admin client", exc_info=True)

    def __enter__(self) -> InternalTopicWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def describe_error(err: BaseException) -> str:
    """An exception as ``Type: message`` (kafka-python messages alone are often just the class name)."""
    text = str(err)
    name = type(err).__name__
    return text if text.startswith(name) else f"{name}: {text}" if text else name
