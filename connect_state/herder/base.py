"""What every write of the herder shares: its settings and I/O, the existence check, acknowledged sends."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from connect_state.core.errors import KafkaUnavailableError, KafkaWriteTimeout
from connect_state.core.settings import Settings
from connect_state.folds.config_snapshot import ConnectorConfigView
from connect_state.formats.config import ConfigWrite
from connect_state.herder.errors import ConnectError, KafkaUnreachableError, NotFoundError
from connect_state.herder.io import HerderIO

log = logging.getLogger("connect_state.herder")


def write_outcome_unknown_message(what: str, timeout_ms: int, check: str) -> str:
    """Ours: a write whose acknowledgement did not come in time
    (:class:`~connect_state.core.errors.KafkaWriteTimeout`)."""
    return (
        f"Kafka did not acknowledge {what} within {timeout_ms} ms (api.kafka.write.timeout.ms): the outcome is "
        f"unknown, the records may still be written. {check}"
    )


class HerderBase:
    """The herder's settings and I/O (:class:`~connect_state.herder.io.HerderIO`), and what its writes share."""

    def __init__(self, settings: Settings, io: HerderIO) -> None:
        self.settings = settings
        self.io = io

    def _configured(self, name: str, missing: Callable[[str], str]) -> ConnectorConfigView:
        """The connector as the config topic read to its end has it; :class:`NotFoundError` with ``missing(name)``
        unless it has a config."""
        view = self.io.connector(name)
        if not view.exists:
            raise NotFoundError(missing(name))
        return view

    def _send(
        self, topic: str, records: Sequence[tuple[bytes, bytes | None]], what: str, outcome_unknown: str
    ) -> list[Any]:
        """Send ``records`` to ``topic`` in order; their positions once all are acknowledged. Kafka unreachable is
        :class:`KafkaUnreachableError` (nothing was sent), an acknowledgement not in time :class:`ConnectError` with
        ``outcome_unknown``; any other failure propagates."""
        try:
            return list(self.io.writer().send(topic, records, self.settings.api_kafka_write_timeout_ms))
        except KafkaUnavailableError as err:
            raise KafkaUnreachableError(f"Nothing was written for {what}: {err}") from err
        except KafkaWriteTimeout as err:
            log.error("Write to %s for %s not acknowledged in time: %s", topic, what, err)
            raise ConnectError(outcome_unknown) from err

    def _send_config(self, records: Sequence[ConfigWrite], what: str, check: str) -> list[Any]:
        """:meth:`_send` to the config topic; a timeout says the outcome is unknown and how to find out (``check``)."""
        timeout_ms = self.settings.api_kafka_write_timeout_ms
        encoded = [(key.encode("utf-8"), value) for key, value in records]
        unknown = write_outcome_unknown_message(what, timeout_ms, check)
        return self._send(self.settings.config_storage_topic, encoded, what, unknown)
