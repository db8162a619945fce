"""The member metadata a Connect worker sends when it joins its group (``group.id``, our ``connect.group.id``), as a
DescribeGroups answer returns it for each member of a Stable group (protocol type ``connect``).

Connect writes it in ``ConnectProtocol.serializeMetadata`` (protocol ``default``, eager, version 0) and
``IncrementalCooperativeConnectProtocol.serializeMetadata`` (``compatible``: version 1, ``sessioned``: version 2),
``connect/runtime/src/main/java/org/apache/kafka/connect/runtime/distributed/``::

    Version        => Int16
    Url            => String (Int16 length, UTF-8)
    ConfigOffset   => Int64
    Allocation     => Nullable Bytes (Int32 length, -1 for null)   (versions 1 and 2 only; not decoded here)

The URL is the worker's advertised REST URL (``http://host:port/``); the worker id its status records carry
(``worker_id``) is ``host:port`` of that URL (``ConnectDistributed``: ``advertisedUrl.getHost() + ":" +
advertisedUrl.getPort()``): :func:`worker_id`.

Like Connect's ``checkVersionCompatibility``, a version below 0 is refused and any higher one read as the latest
(its fields come first). Pure standard library.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from connect_state.core.errors import RecordFormatError

__all__ = ["WorkerMetadata", "decode_worker_metadata", "worker_id"]

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True)
class WorkerMetadata:
    """A Connect worker's join metadata: protocol version, advertised REST URL, the config topic offset it has read."""

    version: int
    url: str
    config_offset: int

    @property
    def worker_id(self) -> str:
        return worker_id(self.url)


def _take(data: bytes, at: int, size: int, what: str) -> bytes:
    if size < 0 or at + size > len(data):
        raise RecordFormatError(f"Connect member metadata: {what} needs {size} bytes at {at}, {len(data) - at} left")
    return data[at : at + size]


def decode_worker_metadata(data: bytes) -> WorkerMetadata:
    """``data`` as Connect's ``deserializeMetadata`` reads it; :class:`RecordFormatError` where Connect's would fail."""
    (version,) = _INT16.unpack(_take(data, 0, 2, "the version"))
    if version < 0:
        raise RecordFormatError(f"Connect member metadata: Unsupported subscription version: {version}")
    (length,) = _INT16.unpack(_take(data, 2, 2, "the url's length"))
    if length < 0:
        raise RecordFormatError(f"Connect member metadata: the url's length is {length}")
    raw = _take(data, 4, length, "the url")
    try:
        url = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RecordFormatError(f"Connect member metadata: the url is not UTF-8 ({err.reason})") from err
    (offset,) = _INT64.unpack(_take(data, 4 + length, 8, "the config offset"))
    at = 12 + length
    if version >= 1:  # the allocation must be there (Connect reads it), though we do not decode it
        (size,) = _INT32.unpack(_take(data, at, 4, "the allocation's length"))
        if size >= 0:
            _take(data, at + 4, size, "the allocation")
    return WorkerMetadata(version, url, offset)


def worker_id(url: str) -> str:
    """``host:port`` of a worker's advertised URL, as Connect names the worker (``java.net.URI`` ``getHost()``, which
    keeps an IPv6 host's brackets, and ``getPort()``, -1 when the URL has none)."""
    rest = url.partition("://")[2] if "://" in url else url
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].rpartition("@")[2]
    if authority.startswith("["):
        host, _, tail = authority.partition("]")
        host += "]"
        port = tail[1:] if tail.startswith(":") else ""
    else:
        host, sep, port = authority.rpartition(":")
        if not sep:
            host, port = authority, ""
    return f"{host}:{port if port.isdigit() else -1}"
