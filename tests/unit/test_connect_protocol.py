"""The Connect workers' join metadata (``ConnectProtocol`` v0, ``IncrementalCooperativeConnectProtocol`` v1/v2),
decoded from bytes laid out as Connect's ``serializeMetadata`` writes them, and the worker id of its URL."""

from __future__ import annotations

import pytest

from connect_state.core.errors import RecordFormatError
from connect_state.formats.connect_protocol import WorkerMetadata, decode_worker_metadata, worker_id

URL = b"http://127.0.0.1:8083/"  # 22 bytes
# Version int16 | url: int16 length + UTF-8 | config offset int64 (ConnectProtocol.serializeMetadata).
V0 = b"\x00\x00" + b"\x00\x16" + URL + b"\x00\x00\x00\x00\x00\x00\x00\x2a"
# IncrementalCooperativeConnectProtocol.serializeMetadata with no assignment yet: allocation null (int32 -1).
V1_NO_ALLOCATION = b"\x00\x01" + b"\x00\x16" + URL + b"\x00\x00\x00\x00\x00\x00\x01\x00" + b"\xff\xff\xff\xff"
# ... sessioned (v2), with an allocation: the serialized assignment (header v2, error 0, leader, leader url, config
# offset, [connector "sink", tasks [-1, 0]], no revoked, delay 0) as nullable bytes.
LEADER = b"\x00\x04lead" + b"\x00\x16" + URL
ASSIGNMENT = (
    b"\x00\x02"
    + b"\x00\x00"
    + LEADER
    + b"\x00\x00\x00\x00\x00\x00\x00\x07"
    + b"\x00\x00\x00\x01"
    + b"\x00\x04sink"
    + b"\x00\x00\x00\x02\xff\xff\xff\xff\x00\x00\x00\x00"
    + b"\x00\x00\x00\x00"
    + b"\x00\x00\x00\x00"
)
V2 = (
    b"\x00\x02"
    + b"\x00\x1f"
    + b"http://worker-2.example:18083/a"
    + b"\x00\x00\x00\x00\x00\x00\x00\x07"
    + len(ASSIGNMENT).to_bytes(4, "big")
    + ASSIGNMENT
)

DECODED = {
    "v0 (default, eager)": (V0, WorkerMetadata(0, "http://127.0.0.1:8083/", 42), "127.0.0.1:8083"),
    "v1 (compatible), no allocation": (V1_NO_ALLOCATION, WorkerMetadata(1, URL.decode(), 256), "127.0.0.1:8083"),
    "v2 (sessioned), an allocation": (
        V2,
        WorkerMetadata(2, "http://worker-2.example:18083/a", 7),
        "worker-2.example:18083",
    ),
    "a later version reads as the latest": (b"\x00\x05" + V2[2:], WorkerMetadata(5, V2[4:35].decode(), 7), None),
}


@pytest.mark.parametrize("case", sorted(DECODED))
def test_decodes_what_connect_writes(case: str) -> None:
    data, expected, worker = DECODED[case]
    decoded = decode_worker_metadata(data)
    assert decoded == expected
    if worker is not None:
        assert decoded.worker_id == worker


REFUSED = {
    "empty": b"",
    "a negative version": b"\xff\xff" + V0[2:],
    "the url cut short": V0[:10],
    "no config offset": V0[:24],
    "v1 without its allocation": V1_NO_ALLOCATION[:-4],
    "an allocation shorter than its length": V2[:-3],
    "a url that is not UTF-8": b"\x00\x00\x00\x02\xc3\x28" + b"\x00" * 8,
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refuses_what_connect_cannot_read(case: str) -> None:
    with pytest.raises(RecordFormatError, match="Connect member metadata"):
        decode_worker_metadata(REFUSED[case])


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8083/", "127.0.0.1:8083"),
        ("https://Connect-1.Example.com:8443", "Connect-1.Example.com:8443"),  # java.net.URI keeps the case
        ("http://[::1]:8083/", "[::1]:8083"),  # and an IPv6 host's brackets
        ("http://user@host:8083/path?q#f", "host:8083"),
        ("http://host/", "host:-1"),  # getPort() of a URL without a port
    ],
)
def test_worker_id_is_host_and_port_as_connect_names_it(url: str, expected: str) -> None:
    assert worker_id(url) == expected
