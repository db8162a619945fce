"""Alerts end to end against the real worker: a condition the real jobs record (a KIP-883 cleanup hook that fails
for a connector deleted through Connect, in ``connector_deletions``) is alerted by the alerts job, running
continuously as ``connect-state-jobs`` runs it, to a generic webhook, a Slack webhook, a webhook that is unreachable
until the middle of the test, and a real Alertmanager that routes it to its own webhook receiver; the hook is fixed,
the cleanup job's retry succeeds, and the resolution reaches them all. The API shows the alert and its deliveries.

Prints the timings: from the hook's first failure to each receiver, and from its success to the resolutions.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from connect_state.cleanup.reconciler import FAILED, SUCCEEDED
from connect_state.dev.filestream import append_lines, file_source_config
from connect_state.dev.jvm_service import free_port
from connect_state.spark.alerts import AlertsJob
from connect_state.spark.cleanup import CleanupJob
from connect_state.tables.schemas import CONNECTOR_DELETIONS
from tests.fixtures.alerting import WebhookReceiver, alertmanager, wait_until
from tests.integration.helpers import (
    api_client,
    continuous_job,
    delete_and_wait,
    delta_table,
    job_settings,
    run_connector_states,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.spark]
WAIT_S = 90.0


class SwitchableHook:
    """A deletion hook that fails while ``failing`` is set; notes when it first failed and first succeeded."""

    def __init__(self) -> None:
        self.failing = threading.Event()
        self.failing.set()
        self.first_failure: float | None = None
        self.first_success: float | None = None

    def __call__(self, connector: str, config: Mapping[str, str], *, is_deleted: bool) -> None:
        if self.failing.is_set():
            self.first_failure = self.first_failure or time.time()
            raise RuntimeError(f"ticket system unavailable for {connector}")
        self.first_success = self.first_success or time.time()


def test_a_failing_cleanup_hook_is_alerted_and_resolved(spark, connect, stack_settings, tmp_path: Path) -> None:
    t0 = time.monotonic()
    step = lambda what: print(f"[{time.monotonic() - t0:6.1f} s] {what}", flush=True)  # noqa: E731
    receiver = WebhookReceiver()
    late_port = free_port()  # a webhook receiver that is down until the middle of the test
    late: WebhookReceiver | None = None
    try:
        with alertmanager(tmp_path, receiver.url("/from-am")) as am:
            channels = ",".join([
                f"hook=webhook:{receiver.url('/hook')}",
                f"team=slack:{receiver.url('/slack')}",
                f"late=webhook:http://127.0.0.1:{late_port}/late",
                f"am=alertmanager:{am}",
            ])  # fmt: skip
            settings = job_settings(
                stack_settings,
                tmp_path,
                **{"trigger.interval": "1 second", "cleanup.retry.backoff.ms": "500",
                   "cleanup.retry.backoff.max.ms": "1000", "alerts.channels": channels,
                   "alerts.evaluation.interval.ms": "1000", "alerts.retry.backoff.ms": "500",
                   "alerts.retry.backoff.max.ms": "2000", "lease.renew.interval.ms": "2000",
                   "lease.duration.ms": "6000"},
            )  # fmt: skip
            name, file = unique("alerted-src"), tmp_path / "source.txt"
            append_lines(file, ["one line"])
            connect.create_connector(name, file_source_config(name, file, unique("alerted-topic")))
            connect.wait_until_running(name, WAIT_S)
            delete_and_wait(connect, name)
            step("connector deleted")
            run_connector_states(spark, settings)  # the deletion, with the connector's last config
            step("connector states caught up")

            hook = SwitchableHook()
            with continuous_job(CleanupJob({"ticket": hook}), spark, settings), \
                    continuous_job(AlertsJob(), spark, settings):  # fmt: skip
                firing = wait_until(lambda: receiver.bodies("/hook"), 120, "the firing notification", 0.5)
                assert hook.first_failure is not None
                assert (firing[0]["status"], firing[0]["rule"], firing[0]["connector"]) == (
                    "firing", "CleanupFailed", name)  # fmt: skip
                assert firing[0]["labels"]["step"] == "hook:ticket"
                assert firing[0]["detail"] == f"RuntimeError: ticket system unavailable for {name}"
                slack = wait_until(lambda: receiver.bodies("/slack"), 30, "the Slack notification")
                assert slack[0]["text"].startswith(f"[FIRING] CleanupFailed: cleanup of deleted connector {name}")
                routed = wait_until(lambda: receiver.bodies("/from-am"), 30, "Alertmanager routed it")
                assert routed[0]["status"] == "firing"
                assert routed[0]["alerts"][0]["labels"]["connector"] == name
                step("firing routed")
                first = {path: receiver.times(path)[0] - hook.first_failure for path in ("/hook", "/slack", "/from-am")}

                # The unreachable webhook: its delivery waits (pending, attempts counted), then arrives.
                api = api_client(settings)
                pending = wait_until(
                    lambda: [d for d in api.get("/alerts/deliveries?channel=late").get_json()["deliveries"]
                             if d["attempts"] >= 2],
                    30, "the late channel retried",
                )  # fmt: skip
                assert pending[0]["status"] == "pending"
                assert f"cannot reach http://127.0.0.1:{late_port}/late" in pending[0]["last_error"]
                late = WebhookReceiver(late_port)
                wait_until(lambda: late is not None and late.bodies("/late"), 30, "the late webhook got it")
                late_s = late.times("/late")[0] - hook.first_failure

                # Fixed: the cleanup job's retry succeeds, every channel gets the resolution once.
                hook.failing.clear()
                wait_until(lambda: len(receiver.bodies("/hook")) == 2, 120, "the resolution", 0.5)
                assert hook.first_success is not None
                wait_until(lambda: len(late.bodies("/late")) == 2, 30, "the late webhook's resolution")
                wait_until(lambda: len(receiver.bodies("/slack")) == 2, 30, "Slack's resolution")
                wait_until(lambda: [b for b in receiver.bodies("/from-am") if b["status"] == "resolved"], 30,
                           "Alertmanager routed the resolution")  # fmt: skip
                step("resolved")
                resolved = {path: receiver.times(path)[-1] - hook.first_success for path in ("/hook", "/slack")}
                time.sleep(3)  # a few more passes: nothing is sent again
            step("jobs stopped")
            assert [b["status"] for b in receiver.bodies("/hook")] == ["firing", "resolved"]
            assert [b["status"] for b in late.bodies("/late")] == ["firing", "resolved"]
            rows = delta_table(spark, settings, CONNECTOR_DELETIONS.name).filter(f"connector = '{name}'").collect()
            statuses = {row.step: row.status for row in rows}
            assert statuses["hook:ticket"] == SUCCEEDED and FAILED not in statuses.values()

            (alert,) = api.get(f"/alerts?connector={name}").get_json()["alerts"]
            assert (alert["rule"], alert["state"], alert["notified"]) == ("CleanupFailed", "resolved", True)
            deliveries = api.get(f"/alerts/deliveries?alert={alert['id']}").get_json()["deliveries"]
            assert sorted((d["channel"], d["event"], d["status"]) for d in deliveries) == [
                (channel, event, "delivered")
                for channel in ("am", "hook", "late", "team")
                for event in ("firing", "resolved")
            ]
            print(f"\nfirst hook failure -> firing at: {', '.join(f'{p} {s:.1f} s' for p, s in first.items())}; "
                  f"/late (down until then) {late_s:.1f} s")  # fmt: skip
            print(f"hook fixed -> resolved at: {', '.join(f'{p} {s:.1f} s' for p, s in resolved.items())}")
    finally:
        receiver.close()
        if late is not None:
            late.close()
