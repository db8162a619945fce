"""Where the tables and checkpoints live: a local directory or an object-store URI, and how each side reaches it.

``delta.root`` and ``checkpoint.root`` are :class:`Location` values: a local path (relative ones resolved against the
directory the command runs in, ``file:`` URIs turned into plain paths) or a URI Spark's Hadoop filesystems and
``deltalake``'s object stores understand: ``s3a://`` and ``s3://``, ``abfss://``, ``gs://``, ``dbfs:/``.

The jobs reach a location through Spark and Hadoop's ``FileSystem`` only (:mod:`connect_state.spark.storage`, with
:func:`hadoop_options`); the API through ``deltalake`` with :func:`deltalake_options`. Both take their S3 endpoint,
region and addressing style from the ``storage.*`` settings and their credentials from the environment or the instance
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a profile, an instance or pod role): no secret is a setting.

Only the standard library is used here (the settings and the API import it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

from connect_state.core.errors import ConfigError

#: URI schemes of the object stores the project is documented for (others are passed through as they are).
OBJECT_STORE_SCHEMES = ("s3a", "s3", "abfss", "abfs", "gs", "dbfs")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
#: The object stores ``deltalake`` (delta-rs) commits to (``dbfs:`` is not one of them).
DELTALAKE_SCHEMES = ("s3a", "s3", "abfss", "abfs", "gs")
#: Local paths that are FUSE mounts of object storage with neither rename nor link (Databricks' Unity Catalog volumes
#: and DBFS): a ``deltalake`` commit fails there with "Function not implemented" (delta-io/delta-rs#2540).
FUSE_MOUNTS = ("/Volumes/", "/dbfs/")


class Location:
    """A directory of tables or checkpoints: an absolute local path or a URI, with ``/`` to name what is inside.

    ``str()`` gives what Spark and ``deltalake`` are handed (a plain absolute path for local directories, as before).
    ``os.fspath()`` works for local locations only, so ``pathlib`` can never be used on an object store by accident.
    """

    __slots__ = ("uri",)

    def __init__(self, uri: str) -> None:
        self.uri = uri

    @classmethod
    def parse(cls, value: str, base: Path | None = None) -> Location:
        """A setting's value as a location: URIs kept (without trailing ``/``), ``file:`` URIs and paths made
        absolute local paths (relative paths against ``base``, default the current directory)."""
        text = value.strip()
        if not text:
            raise ConfigError("expected a path or a URI, got an empty value")
        match = _SCHEME.match(text)
        if match is None or len(match.group(1)) == 1:  # no scheme (a one-letter "scheme" is a Windows drive)
            path = Path(text).expanduser()
            return cls(str(path if path.is_absolute() else (base or Path.cwd()).resolve() / path))
        scheme = match.group(1).lower()
        if scheme == "file":
            parts = urlsplit(text)
            if parts.netloc not in ("", "localhost"):
                raise ConfigError(f"{value!r}: a file: URI must name a local path (file:/path or file:///path)")
            return cls(str(Path(unquote(parts.path))))
        if scheme != "dbfs" and not urlsplit(text).netloc:
            raise ConfigError(f"{value!r}: expected {scheme}://<bucket or container>[/<path>]")
        trimmed = text.rstrip("/")
        return cls(trimmed if len(trimmed) > match.end() + 1 else text)

    @property
    def scheme(self) -> str:
        """The URI scheme in lower case; ``""`` for a local path."""
        match = _SCHEME.match(self.uri)
        return match.group(1).lower() if match else ""

    @property
    def is_local(self) -> bool:
        return not self.scheme

    @property
    def deltalake_commits(self) -> bool:
        """Whether ``deltalake`` (delta-rs) can commit to a Delta table here: a local disk or an object store it
        knows, not a Databricks FUSE mount (:data:`FUSE_MOUNTS`) nor ``dbfs:``, where only Spark can."""
        if self.is_local:
            return not (self.uri.rstrip("/") + "/").startswith(FUSE_MOUNTS)
        return self.scheme in DELTALAKE_SCHEMES

    @property
    def name(self) -> str:
        """The last component."""
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    def __truediv__(self, name: str) -> Location:
        if not name or name.startswith("/"):
            raise ValueError(f"expected a relative name, got {name!r}")
        return Location(f"{self.uri.rstrip('/')}/{name}")

    def __fspath__(self) -> str:
        if not self.is_local:
            raise TypeError(f"{self.uri} is not a local path")
        return self.uri

    def __str__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"Location({self.uri!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Location):
            return self.uri == other.uri
        if isinstance(other, str | os.PathLike) and self.is_local:
            return self.uri == os.fspath(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.uri)


def check_endpoint(endpoint: str, allow_http: bool) -> None:
    """An S3 endpoint must be ``https://`` unless plain HTTP is allowed (``storage.allow.http``, local servers)."""
    if not endpoint:
        return
    scheme = urlsplit(endpoint).scheme.lower()
    if scheme not in ("http", "https"):
        raise ConfigError(f"storage.s3.endpoint: expected http(s)://host[:port], got {endpoint!r}")
    if scheme == "http" and not allow_http:
        raise ConfigError(
            f"storage.s3.endpoint {endpoint} is plain HTTP: set storage.allow.http=true to allow it (a local server)"
        )


class StorageSettings(Protocol):
    """The ``storage.*`` settings (:class:`~connect_state.core.settings.Settings` has them)."""

    @property
    def storage_s3_endpoint(self) -> str: ...

    @property
    def storage_s3_region(self) -> str: ...

    @property
    def storage_s3_path_style_access(self) -> bool: ...

    @property
    def storage_allow_http(self) -> bool: ...

    @property
    def storage_options(self) -> Mapping[str, str]: ...


def hadoop_options(settings: StorageSettings) -> dict[str, str]:
    """The Hadoop settings (``fs.s3a.*``) the ``storage.*`` settings ask for; none when they are left empty, so a
    cluster's own configuration (spark-submit ``--conf spark.hadoop.*``, Databricks) is left alone."""
    options: dict[str, str] = {}
    if settings.storage_s3_endpoint:
        options["fs.s3a.endpoint"] = settings.storage_s3_endpoint
        if settings.storage_s3_endpoint.lower().startswith("http://"):
            options["fs.s3a.connection.ssl.enabled"] = "false"
    if settings.storage_s3_region:
        options["fs.s3a.endpoint.region"] = settings.storage_s3_region
    if settings.storage_s3_path_style_access:
        options["fs.s3a.path.style.access"] = "true"
    return options


def deltalake_options(settings: StorageSettings) -> dict[str, str]:
    """The storage options of ``deltalake`` (object_store keys) for the API: endpoint, region, addressing style, plain
    HTTP when allowed, then ``storage.options``. Credentials come from the environment or the instance."""
    options: dict[str, str] = {}
    if settings.storage_s3_endpoint:
        options["AWS_ENDPOINT_URL"] = settings.storage_s3_endpoint
    if settings.storage_s3_region:
        options["AWS_REGION"] = settings.storage_s3_region
    if settings.storage_s3_path_style_access:
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    if settings.storage_allow_http:
        options["AWS_ALLOW_HTTP"] = "true"
        options["AZURE_ALLOW_HTTP"] = "true"
    options.update(settings.storage_options)
    return options


def storage_settings(endpoint: str, region: str = "us-east-1", path_style: bool = True) -> Mapping[str, str]:
    """The ``storage.*`` settings of an S3-compatible server at ``endpoint`` (a local one allows plain HTTP)."""
    return {
        "storage.s3.endpoint": endpoint,
        "storage.s3.region": region,
        "storage.s3.path.style.access": str(path_style).lower(),
        "storage.allow.http": str(endpoint.lower().startswith("http://")).lower(),
    }
