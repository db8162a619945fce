"""Byte-exact formats of Kafka Connect's internal topics and offsets REST bodies, as Kafka's sources write them (the
paths below are relative to ``connect/runtime/src/main/java/org/apache/kafka/connect`` in apache/kafka). Pure
standard library.

* :mod:`connect_state.formats.jsonconv`: the JSON rules every topic shares: Connect's internal ``JsonConverter``
  (``connect/json/src/main/java/org/apache/kafka/connect/json/JsonConverter.java``, schemas disabled) reading and
  writing.
* :mod:`connect_state.formats.javalang`: the Java language semantics the topic modules share: int/long ranges and
  narrowing casts, ``Integer.parseInt`` / ``Long.parseLong``, ``Double.toString``, ``new String(bytes, UTF_8)`` for
  string keys, ``String.hashCode``, ``java.util.HashMap`` iteration order, and the class names of the values
  ``JsonConverter`` reads.
* :mod:`connect_state.formats.status`: the status topic (``storage/KafkaStatusBackingStore.java``): connector, task and
  topic (KIP-558) status keys and values.
* :mod:`connect_state.formats.config`: the config topic (``storage/KafkaConfigBackingStore.java``): connector and task
  configs, task commits, target states (STOPPED written as ``{"state":"PAUSED","state.v2":"STOPPED"}``), task-count
  records, the session key, restart requests and cluster logger levels; plus the records the herder writes to stop,
  pause, resume and delete a connector.
* :mod:`connect_state.formats.offsets`: the offsets topic (``storage/KafkaOffsetBackingStore.java``, ``OffsetUtils``):
  JSON keys ``[connector, partition]`` whose partition maps Connect re-serialises in HashMap order; and the
  ``PATCH /offsets`` bodies (``util/SinkUtils.java``): Jackson binding, ``toMap()``, source normalisation, sink
  parsing, and the success messages.

Each topic module parses keys and values with Connect's own rules and raises
:class:`connect_state.core.errors.RecordFormatError` with Connect's log text for records a worker would discard
(``config.ConfigCallbackError`` for records on which the worker's consume callback throws;
``offsets.BadOffsetsRequest`` for REST bodies, with the HTTP status). The partition a key belongs to is
:func:`connect_state.kafka.partitioner.partition_for_key`.
"""
