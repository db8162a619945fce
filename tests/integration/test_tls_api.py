"""TLS and mutual TLS served by the production server (``connect-state-api``: gunicorn), with certificates this test
makes (``openssl``): a CA, the server's certificate for 127.0.0.1, a client certificate whose CN is the principal.

No broker is needed: the answers checked are the API's own (401, 403, 503 for a table no job has created yet).
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from connect_state.api.passwords import hash_token
from tests.fixtures.api_server import no_kafka_settings, serving_api

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKEN = "integration-token"
NAMESAKE_TOKEN = "token-of-a-user-named-like-the-certificate"

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ca.pem/ca.key; server.pem/server.key (SAN 127.0.0.1, localhost); client.pem/client.key (CN=cert-operator);
    rogue.pem/rogue.key (self-signed, CN=cert-operator: same name, not signed by the CA)."""
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=connect-state test CA", cwd=d)  # fmt: skip
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subject in (("server", "/CN=127.0.0.1"), ("client", "/O=Acme/CN=cert-operator")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", subject, cwd=d)  # fmt: skip
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)  # fmt: skip
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "rogue.key", "-out", "rogue.pem", "-days", "2",
            "-subj", "/CN=cert-operator", cwd=d)  # fmt: skip
    (d / "tokens").write_text(f"bot:{hash_token(TOKEN)}\ncert-operator:{hash_token(NAMESAKE_TOKEN)}\n")
    # the certificate (cert:<CN>) reads; the Bearer principal of the same name operates (issue 33 finding 9)
    (d / "roles").write_text("cert:cert-operator: read\ncert-operator: operate\nbot: operate\n")
    return d


def serve(pki: Path, tmp_path: Path, client_auth: str) -> Iterator[str]:
    settings = {
        **no_kafka_settings(tmp_path),
        "api.tls.cert.file": str(pki / "server.pem"),
        "api.tls.key.file": str(pki / "server.key"),
        "api.tls.ca.file": str(pki / "ca.pem"),
        "api.tls.client.auth": client_auth,
        "api.auth.token.file": str(pki / "tokens"),
        "api.auth.roles.file": str(pki / "roles"),
    }
    with serving_api(settings, scheme="https") as url:
        yield url


@pytest.fixture
def required(pki: Path, tmp_path: Path) -> Iterator[str]:
    yield from serve(pki, tmp_path, "required")


@pytest.fixture
def requested(pki: Path, tmp_path: Path) -> Iterator[str]:
    yield from serve(pki, tmp_path, "requested")


def test_mutual_tls_required(required: str, pki: Path, tmp_path: Path) -> None:
    ca, client = str(pki / "ca.pem"), (str(pki / "client.pem"), str(pki / "client.key"))
    # The client certificate is the principal cert:cert-operator: read is granted, operate is not (the Bearer user
    # cert-operator's grant is not the certificate's).
    read = requests.get(f"{required}/connectors", verify=ca, cert=client, timeout=10)
    assert read.status_code == 503 and read.json()["error_code"] == 503  # authorised; no table yet
    stop = requests.put(f"{required}/connectors/x/stop", verify=ca, cert=client, timeout=10)
    assert stop.status_code == 403
    assert stop.json() == {
        "error_code": 403,
        "message": "cert:cert-operator may not PUT /connectors/x/stop: it needs the role operate on connector x",
    }
    # No certificate, or one the CA did not sign: no connection at all.
    for cert in (None, (str(pki / "rogue.pem"), str(pki / "rogue.key"))):
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(f"{required}/connectors", verify=ca, cert=cert, timeout=10)
    # Plain HTTP on the TLS port: refused too.
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(required.replace("https://", "http://") + "/connectors", timeout=10)
    audit = (tmp_path / "audit.jsonl").read_text()
    assert '"principal":"cert-operator","auth":"certificate"' in audit and '"status":403' in audit


def test_mutual_tls_requested_with_tokens(requested: str, pki: Path) -> None:
    ca = str(pki / "ca.pem")
    anonymous = requests.get(f"{requested}/connectors", verify=ca, timeout=10)
    assert anonymous.status_code == 401
    assert 'Bearer realm="connect-state"' in anonymous.headers["WWW-Authenticate"]
    bot = {"Authorization": f"Bearer {TOKEN}"}
    assert requests.put(f"{requested}/connectors/x/stop", verify=ca, headers=bot, timeout=30).status_code not in (
        401,
        403,
    )
    client = (str(pki / "client.pem"), str(pki / "client.key"))
    assert requests.get(f"{requested}/connectors", verify=ca, cert=client, timeout=10).status_code == 503
    # A certificate and a Bearer principal of the same name are two principals: the token's may operate, the
    # certificate's may only read.
    namesake = {"Authorization": f"Bearer {NAMESAKE_TOKEN}"}
    stop = requests.put(f"{requested}/connectors/x/stop", verify=ca, headers=namesake, timeout=30)
    assert stop.status_code not in (401, 403), stop.text
    stop = requests.put(f"{requested}/connectors/x/stop", verify=ca, cert=client, timeout=30)
    assert stop.status_code == 403 and stop.json()["message"].startswith("cert:cert-operator may not PUT"), stop.text
    # The server's certificate is checked by the client: without the CA, no trust.
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{requested}/connectors", timeout=10)
    context = ssl.create_default_context(cafile=ca)
    host, port = requested.removeprefix("https://").split(":")
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
