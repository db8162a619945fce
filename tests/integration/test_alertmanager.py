"""The alerts job's Alertmanager channel against a real Alertmanager (Debian's ``prometheus-alertmanager``), and its
webhook and Slack channels against a loopback receiver: a connector's verdict goes bad, the job's passes send it,
Alertmanager routes it to its webhook receiver; the verdict comes back healthy, the resolution is routed too.

The verdicts job is not on this branch, so the test writes the ``connector_verdicts`` rows itself (the table its
contract names); no broker or worker is needed. The end-to-end test over a condition the real worker makes is
test_alerts_connect.py.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import requests
from deltalake import write_deltalake

from connect_state.core.settings import Settings, load_settings
from connect_state.dev.jvm_service import free_port
from connect_state.spark.alerts import alerts_reconciler
from tests.fixtures.alerting import WebhookReceiver, alertmanager, wait_until

pytestmark = [pytest.mark.integration]

VERDICTS = pa.schema([("connector", pa.string()), ("verdict", pa.string()), ("since", pa.timestamp("us", tz="UTC")),
                      ("evidence", pa.string()), ("updated", pa.timestamp("us", tz="UTC"))])  # fmt: skip


def write_verdict(settings: Settings, connector: str, verdict: str, since_s: float) -> None:
    since = datetime.fromtimestamp(since_s, tz=UTC)
    rows = pa.Table.from_pylist(
        [{"connector": connector, "verdict": verdict, "since": since, "evidence": '{"lag": 120}',
          "updated": datetime.now(tz=UTC)}],
        schema=VERDICTS,
    )  # fmt: skip
    write_deltalake(str(settings.table_path("connector_verdicts")), rows, mode="overwrite")


def settings_for(tmp_path: Path, channels: str) -> Settings:
    rules = tmp_path / "rules.yml"
    rules.write_text(
        "rules:\n  - name: ConnectorUnhealthy\n    when: verdict\n    verdicts: [failed, stalled]\n    for: 2s\n"
        '    severity: critical\n    summary: "connector {connector} is {verdict}"\n'
    )
    return load_settings(
        overrides={"delta.root": str(tmp_path / "delta"), "alerts.rules.file": str(rules), "alerts.channels": channels,
                   "alerts.retry.backoff.ms": "200", "alerts.retry.backoff.max.ms": "1000",
                   "alerts.generator.url": "http://127.0.0.1:8090"},
        environ={},
    )  # fmt: skip


def am_alerts(base: str) -> list[dict[str, Any]]:
    return requests.get(f"{base}/api/v2/alerts", timeout=5).json()


def test_alertmanager_routes_our_alert_and_its_resolution(tmp_path: Path) -> None:
    receiver = WebhookReceiver()
    try:
        with alertmanager(tmp_path, receiver.url("/from-am")) as am:
            channels = f"am=alertmanager:{am},hook=webhook:{receiver.url('/hook')},team=slack:{receiver.url('/slack')}"
            settings = settings_for(tmp_path, channels)
            job = alerts_reconciler(settings)
            began = time.time()
            write_verdict(settings, "orders", "stalled", began)
            job.run_pass()
            assert receiver.received == [], "pending: the rule's for is 2 s"
            assert wait_until(lambda: job.run_pass() and receiver.bodies("/hook"), 10, "firing sent", step_s=0.5)

            # Alertmanager has it, with our labels, and routed it to its receiver.
            (held,) = wait_until(lambda: am_alerts(am), 10, "Alertmanager holds the alert")
            assert held["labels"] == {
                "alertname": "ConnectorUnhealthy",
                "severity": "critical",
                "kind": "verdict",
                "source": "connect-state",
                "connector": "orders",
            }
            assert held["annotations"] == {
                "summary": "connector orders is stalled",
                "verdict": "stalled",
                "description": '{"lag": 120}',
            }
            assert held["status"]["state"] == "active"
            assert held["generatorURL"].startswith("http://127.0.0.1:8090/alerts?id=")
            (routed,) = wait_until(lambda: receiver.bodies("/from-am"), 15, "Alertmanager notified its receiver")
            assert routed["status"] == "firing" and routed["receiver"] == "hook"
            assert [a["labels"]["connector"] for a in routed["alerts"]] == ["orders"]
            fired_at = receiver.times("/from-am")[0]

            (generic,) = receiver.bodies("/hook")
            assert (generic["status"], generic["rule"], generic["connector"], generic["values"]) == (
                "firing", "ConnectorUnhealthy", "orders", {"verdict": "stalled"})  # fmt: skip
            (slack,) = receiver.bodies("/slack")
            assert slack["text"] == "[FIRING] ConnectorUnhealthy: connector orders is stalled"
            assert slack["blocks"][0]["type"] == "section"

            # A restart of the job sends nothing again; the verdict turns healthy: one resolution, routed.
            job = alerts_reconciler(settings)
            job.run_pass()
            assert len(receiver.bodies("/hook")) == 1
            write_verdict(settings, "orders", "healthy", time.time())
            job.run_pass()
            resolved = wait_until(
                lambda: [b for b in receiver.bodies("/from-am") if b["status"] == "resolved"], 15, "resolution routed"
            )
            assert [a["labels"]["connector"] for a in resolved[0]["alerts"]] == ["orders"]
            assert [b["status"] for b in receiver.bodies("/hook")] == ["firing", "resolved"]
            assert [b["text"].split("]")[0] for b in receiver.bodies("/slack")] == ["[FIRING", "[RESOLVED"]
            print(f"\nstall -> Alertmanager's receiver: {fired_at - began:.1f} s (rule for: 2 s)")
    finally:
        receiver.close()


def test_an_unreachable_alertmanager_is_retried_until_it_comes_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = WebhookReceiver()
    try:
        port = free_port()
        settings = settings_for(tmp_path, f"am=alertmanager:http://127.0.0.1:{port}")
        job = alerts_reconciler(settings)
        write_verdict(settings, "billing", "failed", time.time() - 10)
        job.run_pass()
        assert f"delivery to channel am (alertmanager http://127.0.0.1:{port}/api/v2/alerts) failed" in caplog.text
        assert "Connection refused" in caplog.text and "retrying in 0.2 s" in caplog.text
        # Alertmanager starts on that port: the pending delivery reaches it.
        with alertmanager(tmp_path, receiver.url("/from-am"), port) as am:
            wait_until(lambda: job.run_pass() is not None and am_alerts(am), 20, "delivered once it is up", 0.5)
            (routed,) = wait_until(lambda: receiver.bodies("/from-am"), 15, "routed")
            assert routed["alerts"][0]["labels"]["connector"] == "billing"
    finally:
        receiver.close()
