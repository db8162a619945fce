"""The Kafka layer's typed errors for a read that timed out (connect_state/kafka/errors.py): Kafka slow (a timeout,
409 in the API) or Kafka away (unavailable, 503)."""

from __future__ import annotations

import socket

from kafka import errors as kafka_errors

from connect_state.core.errors import KafkaUnavailableError, KafkaWriteError, KafkaWriteTimeout, describe_error
from connect_state.kafka.errors import CLIENT_CALL_ERRORS, any_listening, client_error, read_error, write_error


def test_a_read_timeout_with_no_broker_listening_is_kafka_unavailable() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        up = f"PLAINTEXT://127.0.0.1:{listening.getsockname()[1]}"
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
            down = f"127.0.0.1:{closed.getsockname()[1]}"
            assert any_listening(f"{down},{up}") and not any_listening(down)
            timeout = kafka_errors.KafkaTimeoutError()
            assert read_error(timeout, down) is KafkaUnavailableError
            assert read_error(timeout, f"{down},{up}") is KafkaWriteTimeout
            assert read_error(kafka_errors.UnknownTopicOrPartitionError(), down) is KafkaWriteError


def test_kafka_pythons_key_error_mid_call_is_a_timeout() -> None:
    """kafka-python 3.0.x raises a KeyError from offset lookups when the broker goes away mid-call."""
    lost = KeyError(1)
    assert isinstance(lost, CLIENT_CALL_ERRORS)
    assert isinstance(client_error(lost), kafka_errors.KafkaTimeoutError)
    assert write_error(client_error(lost)) is KafkaWriteTimeout
    assert describe_error(client_error(KeyError("TopicPartition(topic='t', partition=0)"))) == (
        "KafkaTimeoutError: no answer in time (kafka-python's KeyError: \"TopicPartition(topic='t', partition=0)\")"
    )
    own = kafka_errors.UnknownTopicOrPartitionError()
    assert client_error(own) is own and write_error(client_error(own)) is KafkaWriteError
