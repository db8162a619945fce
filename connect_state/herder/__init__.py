"""The herder: every decision of a write the API makes, in one place, as Connect's herder makes it (KIP-558, KIP-745,
KIP-875, KIP-618).

Pure Python (no Spark, Kafka, Delta or Flask): :class:`Herder` decides what a stop, pause, resume, deletion,
restart, topics reset or offsets change writes, and whether it may, and does every read and write through a small
I/O interface (:class:`~connect_state.herder.io.HerderIO`: the config topic's tail, the offsets stores, the Kafka
writer, the consumer-group admin; on the API's resources: :mod:`connect_state.api.herder_io`). Its refusals are
typed (:mod:`connect_state.herder.errors`); the API maps each to Connect's status code. A REST view parses the
request, calls the herder and renders its answer, as Connect's ``ConnectorsResource`` calls ``herder.*``.
"""

from __future__ import annotations

from connect_state.herder.errors import (
    BadRequestError,
    ConflictError,
    ConnectError,
    ForbiddenError,
    HerderError,
    KafkaUnreachableError,
    NotEstablishedError,
    NotFoundError,
    UnsupportedError,
)
from connect_state.herder.herder import Herder
from connect_state.herder.io import GroupAdmin, HerderIO, OpenTransaction, RecordWriter
from connect_state.herder.offsets import OffsetsChange, row_config, source_timeout_message
from connect_state.herder.restore import OffsetsHistory, OffsetsRestore, RestoreChange
from connect_state.herder.revive import ConnectorHistory, ConnectorRestore, InitialState

__all__ = [
    "BadRequestError",
    "ConflictError",
    "ConnectError",
    "ConnectorHistory",
    "ConnectorRestore",
    "ForbiddenError",
    "GroupAdmin",
    "Herder",
    "HerderError",
    "HerderIO",
    "InitialState",
    "KafkaUnreachableError",
    "NotEstablishedError",
    "NotFoundError",
    "OffsetsChange",
    "OffsetsHistory",
    "OffsetsRestore",
    "OpenTransaction",
    "RecordWriter",
    "RestoreChange",
    "UnsupportedError",
    "row_config",
    "source_timeout_message",
]
