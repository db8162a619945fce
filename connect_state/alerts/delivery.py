"""Sending a notification: one HTTP POST of its JSON body (requests), its outcome as a
:class:`~connect_state.alerts.reconciler.SendResult` (the edge of the alerts job)."""

from __future__ import annotations

import requests

from connect_state.alerts.channels import Channel
from connect_state.alerts.reconciler import SendResult

USER_AGENT = "connect-state-alerts"


class HttpSender:
    def __init__(self, timeout_ms: int) -> None:
        self.timeout_s = timeout_ms / 1000
        self.session = requests.Session()

    def send(self, channel: Channel, data: bytes) -> SendResult:
        url = channel.endpoint
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        try:
            response = self.session.post(url, data=data, headers=headers, timeout=self.timeout_s)
        except requests.Timeout:
            return SendResult(False, None, f"no answer from {url} within {self.timeout_s:g} s")
        except requests.ConnectionError as err:
            return SendResult(False, None, f"cannot reach {url}: {_reason(err)}")
        except requests.RequestException as err:
            return SendResult(False, None, f"cannot send to {url}: {type(err).__name__}: {err}")
        if 200 <= response.status_code < 300:
            return SendResult(True, response.status_code)
        text = response.text[:300].strip()
        return SendResult(False, response.status_code, f"{url} answered {response.status_code}: {text}")

    def close(self) -> None:
        self.session.close()


def _reason(err: requests.ConnectionError) -> str:
    """The innermost cause (``[Errno 111] Connection refused``), not urllib3's whole chain."""
    cause: BaseException = err
    while cause.__cause__ is not None or (cause.__context__ is not None and not cause.__suppress_context__):
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    reason = getattr(cause, "reason", None)
    return str(reason or cause)
