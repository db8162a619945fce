"""A real S3-compatible server on loopback, for the tests and ``connect-state-stack start --s3``: s3proxy.

s3proxy (``org.gaul:s3proxy``, one jar with its dependencies, fetched by ``make jars`` into ``jvm/s3/lib``) runs in its
own JVM and process group like the broker and the worker (:mod:`connect_state.dev.local_stack`), with jclouds'
in-memory ``transient`` storage: objects are flat keys, as in S3 (s3proxy's filesystem backends turn S3A's directory
markers into files), and everything is gone when it stops. It checks AWS signatures (V2 and V4) against one access
key, so the jobs (Hadoop's S3A) and the API (deltalake) reach it with real credentials, from the environment.

    <local.data.dir>/s3/s3proxy.properties, logs/s3.out

The buckets are created once it answers, with a signed ``PUT /<bucket>`` (SigV4, standard library only).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote
from xml.etree import ElementTree

from connect_state.core.errors import LocalStackError
from connect_state.core.settings import Settings
from connect_state.core.storage import storage_settings
from connect_state.dev.jvm_service import LOOPBACK, JavaService, write_properties

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_S3_LIB = REPO_ROOT / "jvm" / "s3" / "lib"
S3_LIB_ENV = "CONNECT_STATE_S3_LIB"
"""Environment variable naming another directory holding s3proxy's jar."""

ACCESS_KEY = "connect-state-local"
SECRET_KEY = "connect-state-local-secret"
REGION = "us-east-1"


def find_s3_lib(lib_dir: str | os.PathLike[str] | None = None) -> Path:
    """The directory of s3proxy's jar: ``lib_dir``, else ``$CONNECT_STATE_S3_LIB``, else ``jvm/s3/lib``."""
    path = Path(lib_dir or os.environ.get(S3_LIB_ENV) or DEFAULT_S3_LIB).resolve()
    if not (path.is_dir() and any(p.name.startswith("s3proxy-") for p in path.glob("*.jar"))):
        raise LocalStackError(f"s3proxy's jar not found in {path}; run `make jars` (or point ${S3_LIB_ENV} at it)")
    return path


def credentials_env() -> dict[str, str]:
    """The environment that gives AWS clients (Hadoop's S3A, deltalake) the local server's credentials."""
    return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION}


class S3Server(JavaService):
    """s3proxy on ``127.0.0.1:<local.s3.port>`` with in-memory storage and ``buckets`` created at start."""

    main_class = "org.gaul.s3proxy.Main"
    config_name = "s3proxy.properties"
    ready_interval = 0.1

    def __init__(
        self,
        settings: Settings,
        *,
        port: int | None = None,
        buckets: Iterable[str] = (),
        data_dir: str | os.PathLike[str] | None = None,
        lib_dir: str | os.PathLike[str] | None = None,
        heap: str = "384m",
        start_timeout: float = 60.0,
        stop_timeout: float = 10.0,
    ) -> None:
        super().__init__(
            "s3", settings, data_dir, lib_dir=lib_dir, heap=heap, start_timeout=start_timeout, stop_timeout=stop_timeout
        )
        self.port = settings.local_s3_port if port is None else port
        self.buckets = tuple(buckets) or (settings.local_s3_bucket,)

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def storage_settings(self, bucket: str | None = None, prefix: str = "") -> dict[str, str]:
        """Settings that put the tables and checkpoints in ``bucket`` (default the first) under ``prefix``, with this
        server as the S3 endpoint (credentials: :func:`credentials_env`)."""
        root = f"s3a://{bucket or self.buckets[0]}/{prefix.strip('/') + '/' if prefix.strip('/') else ''}"
        return {
            "delta.root": root + "delta",
            "checkpoint.root": root + "checkpoints",
            **storage_settings(self.endpoint, REGION),
        }

    def hadoop_credentials(self, bucket: str | None = None) -> Mapping[str, str]:
        """Per-bucket S3A credentials, for a Spark JVM launched before the credentials were in its environment."""
        name = bucket or self.buckets[0]
        return {f"fs.s3a.bucket.{name}.access.key": ACCESS_KEY, f"fs.s3a.bucket.{name}.secret.key": SECRET_KEY}

    def _find_lib(self) -> Path:
        return find_s3_lib(self._lib_dir_arg)

    def _ports(self) -> dict[str, int]:
        return {"local.s3.port": self.port}

    def _prepare(self, java: str, lib_dir: Path) -> None:
        props = {
            "s3proxy.endpoint": self.endpoint,
            "s3proxy.authorization": "aws-v2-or-v4",
            "s3proxy.identity": ACCESS_KEY,
            "s3proxy.credential": SECRET_KEY,
            # The AWS SDK sends checksum headers (x-amz-checksum-crc32 on DeleteObjects) s3proxy does not know; it
            # would answer 501 NotImplemented. S3 itself accepts them.
            "s3proxy.ignore-unknown-headers": "true",
            "jclouds.provider": "transient",
            "jclouds.identity": ACCESS_KEY,
            "jclouds.credential": SECRET_KEY,
        }
        write_properties(self.config_file, props, "s3proxy, written by connect_state/dev/s3_server.py")

    def _args(self) -> list[str]:
        return ["--properties", str(self.config_file)]

    def _probe(self, timeout: float) -> str | None:
        conn = http.client.HTTPConnection(LOOPBACK, self.port, timeout=timeout)
        try:
            conn.request("GET", "/")
            conn.getresponse().read()  # any answer (403 for an anonymous request) means it serves
        finally:
            conn.close()
        return None

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until it answers, then create the buckets."""
        super().wait_ready(timeout)
        for bucket in self.buckets:
            self.create_bucket(bucket)

    def create_bucket(self, bucket: str) -> None:
        status, body = self.request("PUT", f"/{bucket}")
        if status not in (200, 409):  # 409: BucketAlreadyOwnedByYou
            raise self.error(f"creating bucket {bucket} answered {status}: {body[:300]!r}")

    def list_keys(self, bucket: str, prefix: str = "") -> list[str]:
        """The keys under ``prefix`` in ``bucket`` (the first 1000), sorted: what a test checks the jobs wrote."""
        status, body = self.request("GET", f"/{bucket}", {"list-type": "2", "prefix": prefix})
        if status != 200:
            raise self.error(f"listing {bucket}/{prefix} answered {status}: {body[:300]!r}")
        root = ElementTree.fromstring(body)
        return sorted(el.text or "" for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "Key")

    def request(
        self, method: str, path: str, query: Mapping[str, str] | None = None, timeout: float = 10.0
    ) -> tuple[int, bytes]:
        """An AWS SigV4-signed request without a body (path-style), answered ``(status, body)``."""
        host = f"{LOOPBACK}:{self.port}"
        now = datetime.now(UTC)
        amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        payload_hash = hashlib.sha256(b"").hexdigest()
        headers = {"host": host, "x-amz-content-sha256": payload_hash, "x-amz-date": amz_date}
        signed = ";".join(sorted(headers))
        query_string = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in sorted((query or {}).items()))
        canonical = "\n".join(
            [method, path, query_string, *(f"{k}:{headers[k]}" for k in sorted(headers)), "", signed, payload_hash]
        )
        scope = f"{day}/{REGION}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = f"AWS4{SECRET_KEY}".encode()
        for part in (day, REGION, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{scope}, SignedHeaders={signed}, Signature={signature}"
        )
        conn = http.client.HTTPConnection(LOOPBACK, self.port, timeout=timeout)
        try:
            conn.request(method, f"{path}?{query_string}" if query_string else path, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()
