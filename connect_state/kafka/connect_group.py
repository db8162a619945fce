"""The Connect workers' group (``connect.group.id``, the workers' ``group.id``): who its live members are, from one
DescribeGroups request (the watch job's evidence of a lost worker, issue 35).

The coordinator returns each member's metadata only while the group is Stable (``GroupMetadataManager.describeGroups``:
members without metadata otherwise); then each member's metadata is Connect's own
(:mod:`connect_state.formats.connect_protocol`), whose URL names the worker as its status records do (``host:port``).
Any other state (a rebalance under way, an empty or unknown group) has no answer: :meth:`ConnectGroup.members`
returns None, and the caller has no evidence that pass.

kafka-python 3.0 decodes every member's metadata as a consumer subscription whatever the group's protocol type, and
fails (``ValueError``) on Connect's: :class:`_ConnectGroupClient` leaves the metadata of non-consumer groups as bytes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kafka import KafkaAdminClient
from kafka import errors as kafka_errors

from connect_state.core.errors import ConnectStateError, RecordFormatError, describe_error
from connect_state.core.settings import Settings
from connect_state.formats.connect_protocol import WorkerMetadata, decode_worker_metadata
from connect_state.kafka.admin import KafkaAdmin, _AdminClient

__all__ = ["CONNECT_PROTOCOL_TYPE", "ConnectGroup", "ConnectGroupMembers"]

log = logging.getLogger(__name__)

CONNECT_PROTOCOL_TYPE = "connect"
STABLE = "Stable"


class _ConnectGroupClient(_AdminClient):
    """The admin client, except that DescribeGroups leaves a non-consumer group's member metadata undecoded."""

    def _describe_groups_process_response(self, response: Any) -> Any:
        raw: dict[tuple[str, str], tuple[bytes, bytes]] = {}
        for group in response.groups:
            if group.protocol_type != "consumer":
                for member in group.members:
                    raw[(group.group_id, member.member_id)] = (member.member_metadata, member.member_assignment)
                    member.member_metadata = member.member_assignment = b""  # falsy: kafka-python skips decoding
        results = super()._describe_groups_process_response(response)
        for group_id, result in results.items():
            for member in result.get("members") or []:
                found = raw.get((group_id, member.get("member_id")))
                if found is not None:
                    member["member_metadata"], member["member_assignment"] = found
        return results


@dataclass(frozen=True)
class ConnectGroupMembers:
    """The live workers of a Stable Connect group: worker id (``host:port``) -> its metadata."""

    group: str
    workers: dict[str, WorkerMetadata]


class ConnectGroup(KafkaAdmin):
    """Describes the Connect workers' group of ``settings`` (``connect.group.id``), one request per call."""

    client_class: type[KafkaAdminClient] = _ConnectGroupClient

    def __init__(self, settings: Settings, *, client_id: str, timeout_ms: int | None = None) -> None:
        super().__init__(
            settings.kafka_client_config(),
            client_id=client_id,
            timeout_ms=settings.api_kafka_write_timeout_ms if timeout_ms is None else timeout_ms,
            name="Connect group admin client",
        )
        self.group = settings.connect_group_id

    def members(self) -> ConnectGroupMembers | None:
        """The group's live workers when it is a Stable ``connect`` group; None when the answer cannot tell (another
        state, another protocol type, a member whose metadata does not decode). Errors reaching Kafka raise
        :class:`ConnectStateError` (kafka-python's errors are mapped)."""
        try:
            described = self.call(lambda admin: admin.describe_groups([self.group])).get(self.group) or {}
        except ConnectStateError:
            raise
        except (kafka_errors.KafkaError, OSError, ValueError) as err:
            raise ConnectStateError(f"describe group {self.group!r}: {describe_error(err)}") from err
        if described.get("error"):
            raise ConnectStateError(f"describe group {self.group!r}: {described['error']}")
        state, kind = described.get("group_state"), described.get("protocol_type")
        if state != STABLE or kind != CONNECT_PROTOCOL_TYPE:
            log.debug("Connect group %s is %s (protocol type %r): no member evidence", self.group, state, kind)
            return None
        workers: dict[str, WorkerMetadata] = {}
        for member in described.get("members") or []:
            metadata = member.get("member_metadata")
            if not isinstance(metadata, bytes | bytearray):
                return None
            try:
                worker = decode_worker_metadata(bytes(metadata))
            except RecordFormatError as err:
                log.warning("Connect group %s, member %s: %s", self.group, member.get("member_id"), err.reason)
                return None
            workers[worker.worker_id] = worker
        return ConnectGroupMembers(self.group, workers)
