"""The Kafka layer: every kafka-python client of connect-state, and nothing else talks to Kafka.

* :mod:`~connect_state.kafka.config`: Java-style client properties as kafka-python arguments;
* :mod:`~connect_state.kafka.admin`: the one admin client (:class:`KafkaAdmin`): cluster and topic description,
  partition counts, topic creation;
* :mod:`~connect_state.kafka.groups`: consumer-group administration for sink connectors
  (:class:`ConsumerGroupAdmin`, built on the admin client);
* :mod:`~connect_state.kafka.producer`: the one send path (:class:`InternalTopicWriter`), keys placed as the Java
  producer places them (:mod:`~connect_state.kafka.partitioner`, on kafka-python's murmur2), headers optional;
* :mod:`~connect_state.kafka.reader`: reading one key back from the offsets topic (:class:`OffsetsTopicReader`);
* :mod:`~connect_state.kafka.log`: reading topics up to their end offsets (:class:`TopicLogReader`), the config
  topic read to its end incrementally (:class:`ConfigTopicTail`) and cached start/end offsets (:class:`OffsetsCache`):
  the API's fresh view (issue 10);
* :mod:`~connect_state.kafka.errors`: kafka-python's exceptions as the typed errors of :mod:`connect_state.core.errors`
  (:class:`KafkaWriteTimeout`, :class:`KafkaUnavailableError`, :class:`TopicNotFoundError`, ...).

Nothing here knows about Flask or Spark.
"""

from __future__ import annotations

from connect_state.core.errors import (
    ConsumerGroupAdminError,
    ConsumerGroupAdminTimeout,
    GroupNotEmptyError,
    KafkaUnavailableError,
    KafkaWriteError,
    KafkaWriteTimeout,
    TopicNotFoundError,
)
from connect_state.kafka.admin import ClusterDescription, KafkaAdmin
from connect_state.kafka.config import kafka_python_config
from connect_state.kafka.groups import ConsumerGroupAdmin
from connect_state.kafka.log import ConfigTopicTail, LogRecord, OffsetsCache, TopicLogReader, TopicOffsets
from connect_state.kafka.partitioner import murmur2, partition_for_key, to_positive
from connect_state.kafka.producer import InternalTopicWriter, Message, Record, RecordPosition, Transaction
from connect_state.kafka.reader import OffsetsTopicReader

__all__ = [
    "ClusterDescription",
    "ConfigTopicTail",
    "ConsumerGroupAdmin",
    "ConsumerGroupAdminError",
    "ConsumerGroupAdminTimeout",
    "GroupNotEmptyError",
    "InternalTopicWriter",
    "KafkaAdmin",
    "KafkaUnavailableError",
    "KafkaWriteError",
    "KafkaWriteTimeout",
    "LogRecord",
    "Message",
    "OffsetsCache",
    "OffsetsTopicReader",
    "Record",
    "RecordPosition",
    "TopicLogReader",
    "TopicNotFoundError",
    "TopicOffsets",
    "Transaction",
    "kafka_python_config",
    "murmur2",
    "partition_for_key",
    "to_positive",
]
