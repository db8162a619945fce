"""KIP-910 heartbeats for idle source partitions: the provider interface and the heartbeat record format.

KIP-910 proposed ``SourceTask.produceHeartbeatRecords()``: when a task's heartbeat timer expires (its offsets have not
moved for ``heartbeat.interval.ms``), the framework (``AbstractWorkerSourceTask#execute``, before ``poll()``) asks the
task for records, sends them to ``heartbeat.records.topic`` and commits their source offsets like those of any
produced record. The default method returns an empty list. The KIP was never merged, so connect-state provides it
from outside the workers: ``connect-state-heartbeats`` (spark/heartbeats.py) finds idle source partitions in the
offsets topic and calls a :class:`HeartbeatProvider` registered for the connector's class.

**Providers.** A provider implements :meth:`HeartbeatProvider.produce_heartbeat_records` ``(connector, config,
partition, last_offset) -> list[HeartbeatRecord]``; the base class returns ``[]`` exactly as the KIP's default
method. Register one per connector class (the full ``connector.class``; its aliases, the simple name with or without
``Connector``, match too):

* in ``conf/``: ``heartbeat.providers=org.example.MySourceConnector=my_pkg.heartbeats:provider`` (comma-separated
  ``<class>=<module:attribute>`` pairs), or
* as a Python entry point of group ``connect_state.heartbeat_providers`` whose name is the connector class.

The attribute may be a provider instance, a class with a no-argument constructor, an object with either method, or a
plain function with the signature of ``produce_heartbeat_records`` (:func:`as_provider`). A provider has the
**offsets-update form** (:meth:`HeartbeatProvider.update_offsets`: partitions and offsets in, offsets to commit out,
nothing produced: the KIP's proposed change), the **heartbeat-records form** (:meth:`HeartbeatProvider.
produce_heartbeat_records`), or both. Only connectors whose class has a provider are eligible (as only tasks that
implement the KIP's method take part); a provider that overrides neither method sends nothing, and its heartbeats are
recorded ``no_records``.

**When.** A partition is due when its connector is eligible (a source connector whose class has a provider, whose
effective target state is STARTED and whose connector status is RUNNING, with ``heartbeat.interval.ms`` > 0) and, in
``idle`` mode, neither its offset has moved nor a heartbeat was sent for the interval; in ``timer`` mode, when the
connector's timer fires (every interval, KIP-910's timer; :mod:`connect_state.heartbeats.fold`).
``heartbeat.interval.ms``, ``heartbeat.mode`` and ``heartbeat.records.topic`` in the connector's own config override
the connect-state settings of the same names.

**Heartbeat record format** (what lands in the heartbeat topic):

* **topic**: the connector's ``heartbeat.records.topic`` (default ``connect-heartbeats``): ours, or one matching
  ``heartbeat.allowed.topics``, never an internal topic (:class:`connect_state.security.guards.Guards`); created if
  missing only with ``heartbeat.topics.create=true`` (the broker's default partition count and replication factor);
* **key** and **value**: what the provider returned, serialised by :func:`serialize_payload`: ``bytes`` as is, a
  ``str`` as UTF-8, ``None`` as a null key or value, anything else as compact JSON (``json.dumps`` with
  ``separators=(",", ":")``, non-ASCII written as is: the ``JsonConverter`` with ``schemas.enable=false``);
* **partition**: a record with a key goes where Java's producer puts it (murmur2 of the key bytes); a null key leaves
  the choice to the producer;
* **headers**, in this order: ``connect.heartbeat.connector`` (the connector name, UTF-8),
  ``connect.heartbeat.source.partition`` (the source partition as Connect's offsets-topic key writes it: JSON, keys
  in Java ``HashMap`` order), then the provider's own headers (``str`` values as UTF-8; the two names above are
  reserved).

Example, the demo provider for the FileStream source (:mod:`connect_state.dev.demo_heartbeats`)::

    key     b'/var/demo/input.txt'
    value   b'{"connector":"demo-source","filename":"/var/demo/input.txt","position":1234}'
    headers connect.heartbeat.connector=b'demo-source',
            connect.heartbeat.source.partition=b'{"filename":"/var/demo/input.txt"}'

**Offsets.** A record whose ``source_offset`` is not None commits that offset once the record is acknowledged, as the
framework does for a produced ``SourceRecord``: to the worker's offsets topic, under Connect's exact key bytes
``[connector, partition]`` (:func:`~connect_state.formats.offsets.offset_key_bytes`) with the value
``OffsetStorageWriter`` writes (:func:`~connect_state.formats.offsets.serialize_offset_value`), in the partition
Java's producer picks. ``source_partition`` names another partition of the same connector (default: the idle one).
Offsets must pass ``OffsetUtils.validateFormat`` (a map of primitive values). When several records of one heartbeat
carry offsets for the same partition, the last one is committed (``OffsetStorageWriter`` keeps the latest).

Pure standard library plus :mod:`connect_state.formats` and :mod:`connect_state.connect`: providers import only this
module.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from connect_state.connect.connector_types import registered_for
from connect_state.core.deadlines import plugin_name
from connect_state.core.errors import RecordFormatError
from connect_state.formats.offsets import serialize_offset_value, validate_offset_map

__all__ = [
    "CONNECTOR_HEADER",
    "DEFAULT_PROVIDER",
    "PARTITION_HEADER",
    "RESERVED_HEADERS",
    "HeartbeatProvider",
    "HeartbeatRecord",
    "HeartbeatRecordError",
    "SourceOffset",
    "as_provider",
    "checked_offsets",
    "implements_heartbeat_records",
    "implements_update_offsets",
    "provider_for",
    "provider_name",
    "record_headers",
    "serialize_payload",
]

CONNECTOR_HEADER = "connect.heartbeat.connector"
PARTITION_HEADER = "connect.heartbeat.source.partition"
RESERVED_HEADERS = frozenset({CONNECTOR_HEADER, PARTITION_HEADER})

Header = tuple[str, bytes | str | None]


class HeartbeatRecordError(ValueError):
    """A provider returned something that is not a valid heartbeat record (recorded as a failed heartbeat)."""


@dataclass(frozen=True)
class HeartbeatRecord:
    """One record a provider asks to send to the heartbeat topic (the KIP's ``SourceRecord``).

    ``key`` / ``value``: bytes, str, None or JSON-able values (see :func:`serialize_payload`). ``headers``: extra
    ``(name, value)`` pairs. ``source_offset``: the offset to commit for ``source_partition`` (default: the idle
    partition) once the record is acknowledged; None commits nothing.
    """

    key: Any = None
    value: Any = None
    headers: Sequence[Header] = ()
    source_offset: Mapping[str, object] | None = field(default=None, hash=False)
    source_partition: Mapping[str, object] | None = field(default=None, hash=False)

    def validate(self) -> None:
        """Raise :class:`HeartbeatRecordError` when the record cannot be sent or its offset could not be stored."""
        for header in self.headers:
            if not (isinstance(header, tuple) and len(header) == 2 and isinstance(header[0], str)):
                raise HeartbeatRecordError(f"a header must be a (name, value) pair with a str name, got {header!r}")
            if header[0] in RESERVED_HEADERS:
                raise HeartbeatRecordError(f"header {header[0]!r} is reserved for the framework")
            if header[1] is not None and not isinstance(header[1], bytes | str):
                raise HeartbeatRecordError(f"header {header[0]!r}: value must be bytes, str or None")
        try:
            serialize_payload(self.key)
            serialize_payload(self.value)
        except (TypeError, ValueError) as err:
            raise HeartbeatRecordError(f"key or value is not serialisable: {err}") from err
        for what, value in (("source offset", self.source_offset), ("source partition", self.source_partition)):
            if value is None:
                continue
            try:
                validate_offset_map(value, "Offsets" if what == "source offset" else "Partitions")
            except (RecordFormatError, TypeError) as err:
                raise HeartbeatRecordError(f"{what}: {err}") from err


def serialize_payload(payload: object) -> bytes | None:
    """A heartbeat key or value as bytes: bytes as is, str as UTF-8, None as None, else compact JSON."""
    if payload is None:
        return None
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    if isinstance(payload, str):
        return payload.encode("utf-8")
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def record_headers(
    connector: str, partition: Mapping[str, object], record: HeartbeatRecord
) -> list[tuple[str, bytes | None]]:
    """The headers sent with ``record``: the connector, the source partition (as the offsets key writes it), then the
    provider's own."""
    partition_json = serialize_offset_value(partition)  # the map as the offsets key writes it: HashMap order
    headers: list[tuple[str, bytes | None]] = [
        (CONNECTOR_HEADER, connector.encode("utf-8")),
        (PARTITION_HEADER, partition_json),
    ]
    for name, value in record.headers:
        headers.append((name, value.encode("utf-8") if isinstance(value, str) else value))
    return headers


#: A source partition and its offset, as the offsets-update form takes and returns them (offset None: a tombstone).
SourceOffset = tuple[Mapping[str, object], Mapping[str, object] | None]


class HeartbeatProvider:
    """Moves the source offsets of one connector class's partitions without data (KIP-910), in either form or both.

    * the **offsets-update form** (the KIP's proposed change): override :meth:`update_offsets`: the partitions and
      their offsets in, the partitions and offsets to commit out; nothing is produced;
    * the **heartbeat-records form** (the KIP's ``produceHeartbeatRecords``): override
      :meth:`produce_heartbeat_records`: records sent to the heartbeat topic, their source offsets committed.

    Called on the job's driver, once per due partition; it should be quick and must not block for long (it holds up
    the job's micro-batch).
    """

    def update_offsets(
        self, connector: str, config: Mapping[str, object], offsets: Sequence[SourceOffset]
    ) -> Sequence[SourceOffset] | None:
        """The offsets to commit for ``connector``'s partitions, given their last committed ``offsets`` (empty for a
        timer-mode connector that has none yet). The default commits nothing (the KIP's default returns an empty
        map). Returned partitions may be new ones; an offset of None commits a tombstone."""
        return None

    def produce_heartbeat_records(
        self,
        connector: str,
        config: Mapping[str, object],
        partition: Mapping[str, object],
        last_offset: Mapping[str, object] | None,
    ) -> list[HeartbeatRecord]:
        """Records to send because ``partition`` of ``connector`` has been idle for the heartbeat interval.

        ``config`` is the connector's config as the config topic holds it, ``last_offset`` the partition's last
        committed offset. The default returns no records, as the KIP's default ``produceHeartbeatRecords``.
        """
        return []


DEFAULT_PROVIDER = HeartbeatProvider()


class _FunctionProvider(HeartbeatProvider):
    """A plain function with the signature of :meth:`HeartbeatProvider.produce_heartbeat_records`, as a provider."""

    def __init__(self, function: Callable[..., list[HeartbeatRecord]]) -> None:
        self.function = function

    def produce_heartbeat_records(self, *args: Any, **kwargs: Any) -> list[HeartbeatRecord]:
        return self.function(*args, **kwargs)


class _DuckProvider(HeartbeatProvider):
    """An object with either method (or both) that does not subclass :class:`HeartbeatProvider`."""

    def __init__(self, target: Any) -> None:
        self.target = target
        if callable(getattr(target, "update_offsets", None)):
            self.update_offsets = target.update_offsets  # type: ignore[method-assign]
        if callable(getattr(target, "produce_heartbeat_records", None)):
            self.produce_heartbeat_records = target.produce_heartbeat_records  # type: ignore[method-assign]


def as_provider(plugin: object) -> HeartbeatProvider:
    """A loaded plugin as a provider: a :class:`HeartbeatProvider`, an object with ``update_offsets`` and/or
    ``produce_heartbeat_records``, a class to instantiate, or a function with the signature of
    ``produce_heartbeat_records``."""
    if isinstance(plugin, type):
        plugin = plugin()
    if isinstance(plugin, HeartbeatProvider):
        return plugin
    if callable(getattr(plugin, "produce_heartbeat_records", None)) or callable(
        getattr(plugin, "update_offsets", None)
    ):
        return _DuckProvider(plugin)
    if callable(plugin):
        return _FunctionProvider(plugin)
    raise TypeError(
        f"{plugin!r} is not a heartbeat provider (no update_offsets or produce_heartbeat_records method, not callable)"
    )


def _overrides(provider: HeartbeatProvider, method: str) -> bool:
    if isinstance(provider, _DuckProvider):
        return method in vars(provider)
    return getattr(type(provider), method) is not getattr(HeartbeatProvider, method)


def implements_update_offsets(provider: HeartbeatProvider) -> bool:
    """Whether the provider has the offsets-update form (overrides :meth:`HeartbeatProvider.update_offsets`)."""
    return _overrides(provider, "update_offsets")


def implements_heartbeat_records(provider: HeartbeatProvider) -> bool:
    """Whether the provider has the heartbeat-records form; a provider with neither form counts as this one (the
    default: no records, the heartbeat is recorded as ``no_records``)."""
    return _overrides(provider, "produce_heartbeat_records") or not implements_update_offsets(provider)


def checked_offsets(offsets: object) -> list[SourceOffset]:
    """What ``update_offsets`` returned, checked: ``(partition, offset)`` pairs whose maps pass
    ``OffsetUtils.validateFormat``; raises :class:`HeartbeatRecordError` otherwise."""
    if offsets is None:
        return []
    if isinstance(offsets, Mapping):
        raise HeartbeatRecordError("update_offsets must return (partition, offset) pairs, not a mapping")
    pairs: list[SourceOffset] = []
    for item in offsets:  # type: ignore[attr-defined]
        if not (isinstance(item, tuple | list) and len(item) == 2 and isinstance(item[0], Mapping)):
            raise HeartbeatRecordError(f"update_offsets returned {item!r}, not a (partition, offset) pair")
        partition, offset = item
        for what, value in (("Partitions", partition), ("Offsets", offset)):
            if value is None:
                continue
            try:
                validate_offset_map(value, what)
            except (RecordFormatError, TypeError) as err:
                raise HeartbeatRecordError(f"{what.lower()[:-1]} {value!r}: {err}") from err
        pairs.append((dict(partition), dict(offset) if offset is not None else None))
    return pairs


def provider_name(provider: HeartbeatProvider) -> str:
    """The plug-in behind ``provider`` as ``module:qualified name`` (the function, the object's class), for messages."""
    target: object = provider
    if isinstance(provider, _FunctionProvider):
        target = provider.function
    elif isinstance(provider, _DuckProvider):
        target = provider.target
    return plugin_name(target)


def provider_for(providers: Mapping[str, HeartbeatProvider], connector_class: str | None) -> HeartbeatProvider:
    """The provider registered for ``connector_class`` (exactly, or through a ``PluginUtils`` alias of either side,
    :func:`~connect_state.connect.connector_types.plugin_aliases`), else the default provider (no records)."""
    provider = registered_for(providers, connector_class)
    return DEFAULT_PROVIDER if provider is None else provider
