"""Which connector a record of the status or offsets topic is about, from its key alone (no value parsed); for
``__consumer_offsets``, which consumer group an offset commit is of (a sink connector's offsets are its group's).

Used by the API's follower of those topics (:mod:`connect_state.kafka.follower`) to file each record under its
connector (or group) as it arrives, so that a GET picks one connector's records without parsing the others.
"""

from __future__ import annotations

from collections.abc import Callable

from connect_state.core.errors import RecordFormatError
from connect_state.formats.consumer_offsets import OffsetCommitKey, parse_record_key
from connect_state.formats.offsets import parse_offset_key
from connect_state.formats.status import parse_status_key


def record_connector(
    status_topic: str, offsets_topic: str, consumer_offsets_topic: str | None = None
) -> Callable[[str, bytes | None], str | None]:
    """``connector_of(topic, key)``: the connector of a status key (connector, task or topic status) or of an
    offsets key (``[connector, partition]``), the group of an offset-commit key of ``consumer_offsets_topic``; None
    for a key Connect (or the group coordinator) would not read, another coordinator record, or another topic."""

    def connector_of(topic: str, key: bytes | None) -> str | None:
        try:
            if topic == status_topic:
                return parse_status_key(key).connector
            if topic == offsets_topic:
                return parse_offset_key(key).connector
            if topic == consumer_offsets_topic:
                record_key = parse_record_key(key)
                return record_key.group if isinstance(record_key, OffsetCommitKey) else None
        except RecordFormatError:
            return None
        return None

    return connector_of
