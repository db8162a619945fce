"""Byte-exact formats of Kafka Connect's internal topics (spec ``connect-internals.md``). Pure standard library.

* :mod:`connect_state.formats.jsonconv`: the JSON rules every topic shares (spec §1): Connect's internal
  ``JsonConverter`` (schemas disabled) reading and writing, ``new String(bytes, UTF_8)`` for string keys,
  ``Double.toString``, ``String.hashCode`` and ``java.util.HashMap`` iteration order.
* :mod:`connect_state.formats.status`: the status topic (spec §2, ``KafkaStatusBackingStore``): connector, task and
  topic (KIP-558) status keys and values.
* ``connect_state.formats.config`` (to come): the config topic (spec §3, ``KafkaConfigBackingStore``): connector and
  task configs, task commits, target states, restart requests; string keys like the status topic.
* ``connect_state.formats.offsets`` (to come): the offsets topic (spec §4, ``KafkaOffsetBackingStore`` and
  ``OffsetUtils``): JSON keys ``[connector, partition]``, whose partition maps Connect re-serialises in HashMap
  order (:func:`connect_state.formats.jsonconv.java_hashmap_ordered`).

Each topic module parses keys and values with Connect's own rules and raises
:class:`connect_state.errors.RecordFormatError` with Connect's log text for records a worker would discard. The
partition a key belongs to is :func:`connect_state.partitioner.partition_for_key`.
"""
