"""Writes to Kafka the way a Connect worker does: one shared producer, Java key placement, one send path.

:class:`InternalTopicWriter` wraps **one** kafka-python ``KafkaProducer`` per process (created on first use, safe to
share between threads, closed by :meth:`InternalTopicWriter.close`) and the layer's admin client
(:class:`~connect_state.kafka.admin.KafkaAdmin`) for partition counts and topic creation. It is used by the API
(``PUT .../topics/reset``, offsets), by the cleanup job and by the heartbeat emitter; nothing here knows about Flask
or Spark.

What it guarantees:

* ``acks=all``, idempotence on by default (kafka-python 3.x's idempotent producer: a retried batch is never written
  twice; ``enable.idempotence=false`` in ``kafka.client.properties`` turns it off, e.g. for a cluster whose ACLs do
  not grant ``IDEMPOTENT_WRITE``, which is why Connect turns it off on its stores), raw ``bytes`` keys and values, a
  ``None`` value is a tombstone. :meth:`InternalTopicWriter.send` refuses null keys (a null key makes a Connect
  worker skip the rest of its poll batch); :meth:`InternalTopicWriter.send_messages` (the heartbeat topic) takes
  records with headers and optional keys.
* The partition of a keyed record is chosen **explicitly** with
  :func:`~connect_state.kafka.partitioner.partition_for_key` (the Java producer's murmur2 partitioner), whatever
  kafka-python's own default would do, so every key lands where a worker writes it and compaction / last-writer-wins
  keep working.
* Exactly-once source connectors (KIP-618, :mod:`connect_state.connect.exactly_once`): :meth:`InternalTopicWriter.
  fence_producers` fences transactional ids as ``Admin.fenceProducers`` does (one ``InitProducerId`` each, through a
  short-lived transactional producer), and :meth:`InternalTopicWriter.begin_transaction` opens one transaction of a
  short-lived producer with a given transactional id (as ``Worker.modifySourceConnectorOffsets`` does with task
  0's), initialised before anything is written; :class:`Transaction` writes and commits it, or aborts it. All are
  bounded by their ``timeout_ms``.
* Every send goes through one send path: the records are sent in order (one request in flight per broker, so a
  retry cannot reorder them), flushed, and every acknowledgement is awaited within ``timeout_ms``. Failures raise
  the typed errors of :mod:`connect_state.core.errors`: :class:`KafkaWriteTimeout` (not acknowledged in time; a
  timed-out record may still be delivered later: like any Kafka client, we cannot take back a record in flight),
  :class:`KafkaUnavailableError` (Kafka not reached), :class:`TopicNotFoundError`, else :class:`KafkaWriteError`.

A producer asked about a topic that does not exist keeps that topic in its metadata forever and re-requests metadata
every ``retry_backoff_ms`` with an ERROR log line each time, after blocking ``max_block_ms`` on the first call
(kafka-python 3.0.x). So the partition count (and the existence check) comes from the admin client (one Metadata
request, ``allow_auto_topic_creation=false``); the producer only ever sees topics that exist.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self

from kafka import KafkaProducer
from kafka import errors as kafka_errors

from connect_state.core.errors import KafkaWriteError, KafkaWriteTimeout, ZombieFencingError, describe_error
from connect_state.core.settings import Settings
from connect_state.kafka.admin import KafkaAdmin
from connect_state.kafka.config import kafka_python_config
from connect_state.kafka.errors import unreachable, write_error
from connect_state.kafka.partitioner import partition_for_key

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]
"""``(key, value)``; a ``None`` value is a tombstone."""

Header = tuple[str, bytes | None]
Message = tuple[bytes | None, bytes | None, Sequence[Header] | None]
"""``(key, value, headers)``: a record that may carry headers and may have no key."""

CLIENT_ID = "connect-state-writer"

# Defaults the client properties may change: idempotence (it needs acks=all and at most 5 requests in flight, both
# forced below; verified against the real broker by tests/integration/test_kafka_writer.py).
_DEFAULT_PRODUCER_CONFIG: dict[str, Any] = {
    "enable_idempotence": True,
}
# Settings Connect forces on its internal-topic producers (plus what keeps `send` ordered and explicit).
_FORCED_PRODUCER_CONFIG: dict[str, Any] = {
    "acks": -1,  # "all"
    "allow_auto_create_topics": False,
    "max_in_flight_requests_per_connection": 1,
}


@dataclass(frozen=True)
class RecordPosition:
    """Where an acknowledged record was written."""

    topic: str
    partition: int
    offset: int


class InternalTopicWriter:
    """One lazily created kafka-python producer for writing records to Connect's internal topics (and others).

    Thread-safe: share one instance per process. ``timeout_ms`` defaults to ``api.kafka.write.timeout.ms``; it is
    also the longest a ``send`` may block waiting for metadata or for a connection (``max.block.ms``).
    """

    def __init__(self, settings: Settings, *, client_id: str = CLIENT_ID) -> None:
        self.settings = settings
        self.bootstrap_servers = settings.bootstrap_servers
        self.default_timeout_ms = settings.api_kafka_write_timeout_ms
        self.client_id = client_id
        self.admin = KafkaAdmin(
            settings.kafka_client_config(),
            client_id=f"{client_id}-metadata",
            timeout_ms=self.default_timeout_ms,
            name="Kafka writer's admin client",
            warn_unsupported=False,  # the producer's configuration already warns
        )
        self._lock = threading.Lock()
        self._producer: KafkaProducer | None = None
        self._ensured: set[str] = set()
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
            **_DEFAULT_PRODUCER_CONFIG,
        }
        config.update(kafka_python_config(self.settings.kafka_client_config(), KafkaProducer.DEFAULT_CONFIG))
        for key, value in _FORCED_PRODUCER_CONFIG.items():
            if key in config and config[key] != value:
                log.warning(
                    "kafka.client.properties: %s=%r ignored, the writer always uses %r", key, config[key], value
                )
            config[key] = value
        return config

    def _check_open(self) -> None:
        """Raise when closed; register the ``atexit`` fallback before the first client is created."""
        with self._lock:
            if self._closed:
                raise KafkaWriteError("the Kafka writer is closed")
            if not self._atexit_registered:
                atexit.register(self.close)
                self._atexit_registered = True

    def _producer_client(self) -> KafkaProducer:
        self._check_open()
        with self._lock:
            if self._producer is None:
                try:
                    self._producer = KafkaProducer(**self.producer_config())
                except kafka_errors.KafkaError as err:
                    raise unreachable(err, self.bootstrap_servers) from err
            return self._producer

    # --- topics ------------------------------------------------------------------------------------------------

    def partition_count(self, topic: str, timeout_ms: int | None = None) -> int:
        """The number of partitions of ``topic``, from cluster metadata, cached per writer.

        Retriable metadata errors (no broker ready yet, a leader election) are retried within ``timeout_ms``
        (default ``api.kafka.write.timeout.ms``). Raises :class:`TopicNotFoundError` when the topic does not exist,
        :class:`KafkaWriteTimeout` / :class:`KafkaUnavailableError` / :class:`KafkaWriteError` when the metadata
        cannot be read.
        """
        self._check_open()
        return self.admin.partition_count(topic, timeout_ms)

    def ensure_topic(self, topic: str) -> None:
        """Create ``topic`` with the broker's default partitions and replication factor unless it exists."""
        if topic in self._ensured:
            return
        self._check_open()
        self.admin.create_topic(topic, self.default_timeout_ms)
        self._ensured.add(topic)

    # --- writing -----------------------------------------------------------------------------------------------

    def send(self, topic: str, records: Sequence[Record], timeout_ms: int | None = None) -> list[RecordPosition]:
        """Write keyed ``records`` to ``topic`` in order and wait until every one is acknowledged (``acks=all``).

        Each key goes to ``partition_for_key(key, partition_count(topic))``. Returns the positions in record order.
        Raises :class:`TopicNotFoundError` on a missing topic, :class:`KafkaUnavailableError` when Kafka cannot be
        reached, :class:`KafkaWriteTimeout` when the acknowledgements do not all arrive within ``timeout_ms``
        (default ``api.kafka.write.timeout.ms``), :class:`KafkaWriteError` on a failed write.
        """
        for key, value in records:
            if not isinstance(key, bytes) or not isinstance(value, bytes | None):
                raise TypeError(
                    f"records must be (bytes, bytes | None) pairs, got ({type(key).__name__}, {type(value).__name__})"
                )
        return self._send(topic, [(key, value, None) for key, value in records], timeout_ms)

    def send_messages(
        self, topic: str, messages: Sequence[Message], timeout_ms: int | None = None
    ) -> list[RecordPosition]:
        """:meth:`send` for records with headers and optional keys (``(key, value, headers)``).

        A keyed record still goes where Java's producer puts it; kafka-python's partitioner places the others.
        """
        return self._send(topic, messages, timeout_ms)

    # --- transactions (exactly-once source connectors) ------------------------------------------------------------

    def _transactional_producer(self, transactional_id: str, timeout_ms: int) -> KafkaProducer:
        """A new producer with ``transactional_id`` (idempotent, as Connect's exactly-once producers are), its
        ``init_transactions`` done within ``timeout_ms``: the id's earlier producers are fenced and their open
        transaction aborted. Raises kafka-python's errors."""
        self._check_open()
        timeout_ms = max(timeout_ms, 1)
        config = self.producer_config()
        config.update(
            transactional_id=transactional_id,
            enable_idempotence=True,
            max_block_ms=timeout_ms,
            bootstrap_timeout_ms=timeout_ms,
            client_id=f"{self.client_id}-{transactional_id}",
        )
        producer = KafkaProducer(**config)
        try:
            producer.init_transactions()
        except BaseException:
            _close_now(producer)
            raise
        return producer

    def fence_producers(self, transactional_ids: Sequence[str], timeout_ms: int | None = None) -> None:
        """Fence the producers of ``transactional_ids`` (``Admin.fenceProducers``): for each id, an ``InitProducerId``
        that bumps its epoch and aborts its open transaction. Raises :class:`ZombieFencingError` when the broker
        refuses or does not answer one within ``timeout_ms`` (default ``api.kafka.write.timeout.ms``, for all)."""
        timeout_ms = self.default_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        for transactional_id in transactional_ids:
            remaining = int((deadline - time.monotonic()) * 1000)
            try:
                if remaining <= 0:
                    raise kafka_errors.KafkaTimeoutError(f"no time left of {timeout_ms} ms")
                _close_now(self._transactional_producer(transactional_id, remaining))
            except kafka_errors.KafkaError as err:
                raise ZombieFencingError(
                    f"fencing transactional id {transactional_id!r} on Kafka at {self.bootstrap_servers} failed: "
                    f"{describe_error(err)}"
                ) from err
            log.info("Fenced the producers of transactional id %s", transactional_id)

    def begin_transaction(self, transactional_id: str, timeout_ms: int | None = None) -> Transaction:
        """A transaction of a new producer with ``transactional_id``, begun: ``init_transactions`` (which fences the
        id's earlier producers) is done before anything is written, as ``Worker.modifySourceConnectorOffsets`` does.
        Raises :class:`ZombieFencingError` when it cannot be (nothing is written). Use it as a context manager:
        :meth:`Transaction.commit` writes and commits; leaving without a commit aborts and closes."""
        timeout_ms = self.default_timeout_ms if timeout_ms is None else timeout_ms
        try:
            producer = self._transactional_producer(transactional_id, timeout_ms)
        except kafka_errors.KafkaError as err:
            raise ZombieFencingError(
                f"initialising transactional id {transactional_id!r} on Kafka at {self.bootstrap_servers} failed: "
                f"{describe_error(err)}"
            ) from err
        try:
            producer.begin_transaction()
        except kafka_errors.KafkaError as err:
            _close_now(producer)
            raise ZombieFencingError(
                f"initialising transactional id {transactional_id!r} on Kafka at {self.bootstrap_servers} failed: "
                f"{describe_error(err)}"
            ) from err
        return Transaction(self, transactional_id, producer)

    # --- the send path -----------------------------------------------------------------------------------------

    def _send(
        self,
        topic: str,
        messages: Sequence[Message],
        timeout_ms: int | None,
        producer: KafkaProducer | None = None,
    ) -> list[RecordPosition]:
        """The one send path: place, send in order, flush, await every acknowledgement before the deadline (on the
        shared producer, or ``producer``)."""
        if not messages:
            return []
        timeout_ms = self.default_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        count = self.partition_count(topic, max(int((deadline - time.monotonic()) * 1000), 0))
        shared = producer is None
        producer = producer or self._producer_client()
        try:
            return self._send_on(producer, topic, messages, count, timeout_ms, deadline)
        finally:
            if shared and _in_fatal_state(producer):
                self._retire(producer)

    def _send_on(
        self,
        producer: KafkaProducer,
        topic: str,
        messages: Sequence[Message],
        count: int,
        timeout_ms: int,
        deadline: float,
    ) -> list[RecordPosition]:
        """Send ``messages`` on ``producer`` in ``count`` partitions (murmur2 of the key) and await them."""
        futures = []
        try:
            for key, value, headers in messages:
                partition = partition_for_key(key, count) if key is not None else None
                futures.append(
                    producer.send(topic, key=key, value=value, headers=list(headers or []), partition=partition)
                )
        except kafka_errors.KafkaTimeoutError as err:
            raise KafkaWriteTimeout(
                f"timed out sending to topic {topic!r} on Kafka at {self.bootstrap_servers} "
                f"({len(futures)} of {len(messages)} records handed to the producer): {describe_error(err)}"
            ) from err
        except kafka_errors.KafkaError as err:
            raise write_error(err)(f"write to topic {topic!r} failed: {describe_error(err)}") from err
        # A flush also waits for other threads' records, which may be the slow ones: our own futures decide below.
        with contextlib.suppress(kafka_errors.KafkaTimeoutError):
            producer.flush(timeout=max(deadline - time.monotonic(), 0))
        positions = []
        for index, future in enumerate(futures):
            try:
                metadata = future.get(timeout=max(deadline - time.monotonic(), 0))
            except kafka_errors.KafkaTimeoutError as err:
                raise KafkaWriteTimeout(
                    f"timed out after {timeout_ms} ms waiting for Kafka at {self.bootstrap_servers} to acknowledge "
                    f"the write to topic {topic!r} ({index} of {len(messages)} records acknowledged)"
                ) from err
            except kafka_errors.KafkaError as err:
                raise write_error(err)(
                    f"write to topic {topic!r} failed ({index} of {len(messages)} records acknowledged): "
                    f"{describe_error(err)}"
                ) from err
            positions.append(RecordPosition(metadata.topic, metadata.partition, metadata.offset))
        return positions

    def _retire(self, producer: KafkaProducer) -> None:
        """Replace the shared producer after an error kafka-python holds fatal, closing it in the background.

        kafka-python's idempotent producer enters a fatal state on a refusal such as TopicAuthorizationFailed and then
        fails every later send; Java's producer fails only the batch. The next send gets a new producer, so one topic
        this process may not write does not stop its writes to the others; other threads' records still in the old
        producer get its close's grace period.
        """
        close = producer.close
        with self._lock:
            if self._producer is not producer:
                return
            self._producer = None
        log.warning("the Kafka producer entered a fatal error state; the next write uses a new one")
        threading.Thread(target=close, kwargs={"timeout": self.default_timeout_ms / 1000}, daemon=True).start()

    def close(self, timeout_ms: int | None = None) -> None:
        """Flush and close the clients (idempotent). Later ``send`` calls raise KafkaWriteError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            producer, self._producer = self._producer, None
            registered = self._atexit_registered
        if registered:
            atexit.unregister(self.close)
        timeout = (self.default_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        if producer is not None:
            try:
                producer.close(timeout=timeout)
            except Exception:
                log.warning("error closing the Kafka producer", exc_info=True)
        self.admin.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _bounded(call: Any, deadline: float, what: str) -> None:
    """Run ``call`` (a kafka-python call without a timeout of its own) in a helper thread; raise kafka-python's
    ``KafkaTimeoutError`` when it has not returned by ``deadline`` (``time.monotonic()``), or the error it raised."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as err:  # handed to the caller
            outcome.append(err)

    thread = threading.Thread(target=run, name=f"kafka-{what}", daemon=True)
    thread.start()
    thread.join(max(deadline - time.monotonic(), 0))
    if not outcome:
        raise kafka_errors.KafkaTimeoutError(f"{what} did not finish in time")
    if outcome[0] is not None:
        raise outcome[0]


def _in_fatal_state(producer: KafkaProducer) -> bool:
    """Whether kafka-python's idempotence state machine has failed for good (its ``TransactionManager``)."""
    manager = getattr(producer, "_transaction_manager", None)
    return manager is not None and bool(manager.has_fatal_error())


def _close_now(producer: KafkaProducer) -> None:
    """Close a short-lived producer without waiting (its records are acknowledged or abandoned already); a flush
    that cannot finish in no time is not an error here."""
    try:
        producer.close(timeout=0)
    except Exception:
        log.debug("closing a transactional producer", exc_info=True)


class Transaction:
    """One begun transaction of a short-lived transactional producer (:meth:`InternalTopicWriter.begin_transaction`).

    :meth:`commit` sends records through the writer's one send path and commits, within its ``timeout_ms``. Closing
    (or leaving the ``with`` block) without a commit aborts; when the abort cannot be confirmed at once, the id is
    initialised again (which makes the broker abort it), so no open transaction holds up ``read_committed`` readers.
    """

    def __init__(self, writer: InternalTopicWriter, transactional_id: str, producer: KafkaProducer) -> None:
        self.writer = writer
        self.transactional_id = transactional_id
        self._producer: KafkaProducer | None = producer
        self.committed = False

    def commit(self, topic: str, records: Sequence[Record], timeout_ms: int | None = None) -> list[RecordPosition]:
        """Write ``records`` to ``topic`` (as :meth:`InternalTopicWriter.send`) and commit; raises the same typed
        errors, a commit not acknowledged in time being a :class:`KafkaWriteTimeout` (outcome unknown)."""
        if self._producer is None or self.committed:
            raise KafkaWriteError(f"the transaction of {self.transactional_id!r} is closed")
        timeout_ms = self.writer.default_timeout_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        messages: list[Message] = [(key, value, None) for key, value in records]
        positions = self.writer._send(topic, messages, timeout_ms, self._producer)
        try:
            _bounded(self._producer.commit_transaction, deadline, f"committing {self.transactional_id}")
        except kafka_errors.KafkaError as err:
            raise write_error(err)(
                f"commit of the transaction of {self.transactional_id!r} on topic {topic!r} failed: "
                f"{describe_error(err)}"
            ) from err
        self.committed = True
        return positions

    def close(self) -> None:
        """Abort unless committed, then close the producer (idempotent)."""
        producer, self._producer = self._producer, None
        if producer is None:
            return
        aborted = self.committed
        if not self.committed:
            try:
                _bounded(producer.abort_transaction, time.monotonic() + 1.0, f"aborting {self.transactional_id}")
                aborted = True
            except Exception:
                log.warning("could not abort the transaction of %s at once", self.transactional_id, exc_info=True)
        _close_now(producer)
        if not aborted:
            try:
                self.writer.fence_producers([self.transactional_id])
            except ZombieFencingError:
                log.warning(
                    "the transaction of %s stays open until the broker's transaction timeout", self.transactional_id
                )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
