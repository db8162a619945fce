"""The HTTP client of one context: ``requests`` with the context's credentials and TLS settings.

Every answer of 400 or more becomes the typed error of its status (:func:`connect_state.cli.errors.error_for_status`)
with the message of the API's error body (Connect's ``{"error_code", "message"}``); no answer at all (connection
refused, unknown host, TLS, timeout) is :class:`~connect_state.cli.errors.Unreachable`, in one line naming the context.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import quote

import requests
import urllib3

from connect_state.cli.contexts import Context
from connect_state.cli.errors import ApiFailure, Unreachable, UsageProblem, error_for_status
from connect_state.core.clusters import CLUSTER_ID, CLUSTER_ID_RULE

CONNECT_TIMEOUT_S = 10.0


def connector_path(name: str, *rest: str) -> str:
    """``/connectors/<name>[/rest...]``, the name escaped whole (a ``/`` or ``?`` in it stays in the name)."""
    return "/".join(("/connectors", quote(name, safe=""), *rest))


def _package_version() -> str:
    try:
        return version("connect-state")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown"


def _cause(err: BaseException) -> str:
    """The innermost reason of a ``requests`` connection error, e.g. ``Connection refused``."""
    seen: set[int] = set()
    while id(err) not in seen:
        seen.add(id(err))
        inner = next(
            (
                e
                for e in (getattr(err, "reason", None), *err.args[:1], err.__cause__, err.__context__)
                if isinstance(e, BaseException)
            ),
            None,
        )
        if inner is None:
            break
        err = inner
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return str(err) or type(err).__name__


def _message(response: requests.Response) -> str:
    """The error body's ``message`` (Connect's ``ErrorMessage``), else the first line of the body, else the status."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    text = response.text.strip().splitlines()
    return text[0][:200] if text else f"HTTP {response.status_code} {response.reason}"


@dataclass(frozen=True)
class Answer:
    """A successful answer: its status and its JSON body (None for 204 and empty bodies)."""

    status: int
    body: Any


class ApiClient:
    """Requests to the API of the context ``name`` (its references already resolved)."""

    def __init__(self, name: str, context: Context, timeout_s: float, cluster: str | None = None) -> None:
        """``cluster`` (else the context's): every path asked under ``/clusters/<cluster>`` (the API's default
        cluster when neither names one)."""
        self.name = name
        self.cluster = cluster or context.cluster
        if self.cluster is not None and not CLUSTER_ID.fullmatch(self.cluster):
            raise UsageProblem(f"cluster {self.cluster!r}: {CLUSTER_ID_RULE} (connect-state clusters lists them)")
        self.root = context.url.rstrip("/")
        self.base = self.root + (f"/clusters/{quote(self.cluster, safe='')}" if self.cluster else "")
        self.timeout_s = timeout_s
        self.session = requests.Session()
        self.session.headers.update({"Accept": "application/json", "User-Agent": f"connect-state/{_package_version()}"})
        if context.username is not None:
            self.session.auth = (context.username, context.password or "")
        if context.token is not None:
            self.session.headers["Authorization"] = f"Bearer {context.token}"
        if context.cert_file is not None:
            self.session.cert = (context.cert_file, context.key_file) if context.key_file else context.cert_file
        # Passed with each request: a Session's own verify loses to REQUESTS_CA_BUNDLE (psf/requests#3829).
        self.verify: bool | str = False if context.insecure else (context.ca_file or True)

    def request(
        self, method: str, path: str, params: Mapping[str, Any] | None = None, body: Any = None, *, root: bool = False
    ) -> Answer:
        """``method path`` (under the cluster's prefix, unless ``root``: the API's own, ``/clusters``); the answer
        when its status is below 400, else the error of its status."""
        try:
            with warnings.catch_warnings():
                if self.verify is False:  # asked for with insecure: true
                    warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                response = self.session.request(
                    method,
                    (self.root if root else self.base) + path,
                    params=params,
                    json=body,
                    timeout=(min(CONNECT_TIMEOUT_S, self.timeout_s), self.timeout_s),
                    verify=self.verify,
                )
        except requests.Timeout:
            maybe = "" if method == "GET" else "; the request may still have been carried out"
            raise Unreachable(
                f"no answer from {self.base} (context {self.name}) within {self.timeout_s:g} s{maybe}"
            ) from None
        except requests.RequestException as err:
            raise Unreachable(f"cannot reach {self.base} (context {self.name}): {_cause(err)}") from None
        if response.status_code >= 400:
            raise error_for_status(response.status_code, _message(response))
        if not response.content:
            return Answer(response.status_code, None)
        try:
            return Answer(response.status_code, response.json())
        except ValueError:
            raise ApiFailure(
                response.status_code, f"{method} {path} answered {response.status_code} with a body that is not JSON"
            ) from None

    def get(self, path: str, params: Mapping[str, Any] | None = None, *, root: bool = False) -> Any:
        """The JSON body of ``GET path``."""
        return self.request("GET", path, params, root=root).body
