"""The Connect workers' group described (:mod:`connect_state.kafka.connect_group`): a DescribeGroups answer as the
broker encodes it keeps Connect's member metadata as bytes (kafka-python alone fails on it), and only a Stable
``connect`` group whose members all decode gives live workers."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import DescribeGroupsResponse

from connect_state.core.errors import ConnectStateError, KafkaUnavailableError
from connect_state.core.settings import Settings
from connect_state.formats.connect_protocol import WorkerMetadata
from connect_state.kafka.connect_group import ConnectGroup, _ConnectGroupClient

Group = DescribeGroupsResponse.DescribedGroup
Member = Group.DescribedGroupMember


def metadata(url: str, offset: int = 5) -> bytes:
    """Connect's v1 member metadata (IncrementalCooperativeConnectProtocol.serializeMetadata, no assignment)."""
    raw = url.encode()
    return b"\x00\x01" + len(raw).to_bytes(2, "big") + raw + offset.to_bytes(8, "big") + b"\xff\xff\xff\xff"


def wire(*groups: Any) -> Any:
    """A DescribeGroups v5 response, encoded and decoded as it comes off the wire."""
    return DescribeGroupsResponse.decode(
        DescribeGroupsResponse(throttle_time_ms=0, groups=list(groups)).encode(version=5), version=5
    )


def member(member_id: str, data: bytes) -> Any:
    return Member(
        member_id=member_id,
        group_instance_id=None,
        client_id="connect-1",
        client_host="/127.0.0.1",
        member_metadata=data,
        member_assignment=b"\x00\x01",
    )


def connect_group(*members: Any, state: str = "Stable", kind: str = "connect") -> Any:
    return Group(
        error_code=0,
        group_id="connect-cluster",
        group_state=state,
        protocol_type=kind,
        protocol_data="sessioned",
        members=list(members),
    )


def test_the_client_keeps_connect_metadata_as_bytes() -> None:
    data = metadata("http://127.0.0.1:8083/")
    client = object.__new__(_ConnectGroupClient)
    described = client._describe_groups_process_response(wire(connect_group(member("m1", data))))
    (found,) = described["connect-cluster"]["members"]
    assert found["member_metadata"] == data and found["member_assignment"] == b"\x00\x01"
    # kafka-python itself decodes it as a consumer subscription, and fails: why the client above exists.
    with pytest.raises(ValueError, match="Buffer underrun"):
        KafkaAdminClient._describe_groups_process_response(client, wire(connect_group(member("m1", data))))


class FakeAdmin:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls = 0

    def describe_groups(self, group_ids: list[str]) -> Any:
        self.calls += 1
        if isinstance(self.answer, BaseException):
            raise self.answer
        return {group_ids[0]: self.answer}

    def close(self) -> None:
        pass


def described(*members: tuple[str, bytes], state: str = "Stable", kind: str = "connect") -> dict[str, Any]:
    return {
        "group_state": state,
        "protocol_type": kind,
        "error": None,
        "members": [{"member_id": m, "member_metadata": data} for m, data in members],
    }


def group_with(settings: Settings, answer: Any) -> ConnectGroup:
    group = ConnectGroup(settings, client_id="test")
    group._admin = FakeAdmin(answer)  # type: ignore[assignment]
    return group


def test_a_stable_group_names_its_live_workers(settings: Settings) -> None:
    answer = described(("m1", metadata("http://127.0.0.1:8083/")), ("m2", metadata("http://127.0.0.1:8084/", 9)))
    members = group_with(settings, answer).members()
    assert members is not None and members.group == settings.connect_group_id
    assert members.workers == {
        "127.0.0.1:8083": WorkerMetadata(1, "http://127.0.0.1:8083/", 5),
        "127.0.0.1:8084": WorkerMetadata(1, "http://127.0.0.1:8084/", 9),
    }


@pytest.mark.parametrize(
    "answer",
    [
        described(("m1", b""), state="PreparingRebalance"),  # members without metadata while rebalancing
        described(state="Empty"),
        described(state="Dead"),
        described(("m1", metadata("http://a:1/")), kind="consumer"),  # not Connect's group
        described(("m1", metadata("http://a:1/")), ("m2", b"\x00\x01\x00")),  # a member that does not decode
    ],
    ids=["rebalancing", "empty", "dead", "a consumer group", "undecodable member"],
)
def test_no_answer_unless_stable_and_decodable(settings: Settings, answer: Any) -> None:
    assert group_with(settings, answer).members() is None


@pytest.mark.parametrize(
    "answer",
    [KafkaUnavailableError("no broker"), ValueError("Buffer underrun"), {**described(), "error": "GroupAuthFailed"}],
    ids=["unreachable", "a decoding failure", "an error code"],
)
def test_a_failed_describe_is_a_typed_error(settings: Settings, answer: Any) -> None:
    with pytest.raises(ConnectStateError):
        group_with(settings, answer).members()
