"""Alerts end to end against the real worker: a condition the real jobs record (a KIP-883 cleanup hook that fails
for a connector deleted through Connect, in ``connector_deletions``) is alerted by the alerts job, running
continuously as ``connect-state-jobs`` runs it, to a generic webhook, a Slack webhook, a webhook that is unreachable
until the middle of the test, and a real Alertmanager that routes it to its own webhook receiver; the hook is fixed,
the cleanup job's retry succeeds, and the resolution reaches them all. The API shows the alert and its deliveries.

And the whole chain over the verdicts: the real worker's status topic -> the connector-state job -> the watch job
(``connector_verdicts``) -> the alerts job -> a webhook, the three running side by side as ``connect-state-jobs``
runs them. A FileStreamSink that FAILS (its file's parent is a regular file) is notified once, fixed and restarted
through Connect's REST, resolved once; a second failing sink silenced through our API is never notified.

Prints the timings: from the hook's first failure to each receiver, and from its success to the resolutions; from
the FAILED status (on Connect's REST) to the firing notification, and from RUNNING to the resolution.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError

from connect_state.cleanup.reconciler import FAILED, SUCCEEDED
from connect_state.core.settings import Settings
from connect_state.dev.connect_rest import ConnectRestClient
from connect_state.dev.filestream import append_lines, file_sink_config, file_source_config
from connect_state.dev.jvm_service import free_port
from connect_state.spark.alerts import AlertsJob
from connect_state.spark.all_jobs import every_job, select_jobs
from connect_state.spark.cleanup import CleanupJob
from connect_state.spark.streaming import run_continuous
from connect_state.tables.schemas import CONNECTOR_DELETIONS, CONNECTORS, VERDICT_HISTORY, epoch_ms
from connect_state.tables.small_writes import read
from tests.fixtures.alerting import WebhookReceiver, alertmanager, wait_until
from tests.integration.helpers import (
    api_client,
    connector_state,
    continuous_job,
    create_topic,
    delete_and_wait,
    delta_table,
    job_settings,
    run_connector_states,
    running,
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


VERDICT_RULES = """\
rules:
  - name: SinkFailed
    when: verdict
    verdicts: [failed]
    for: 1s
    connectors: "verdict-alert-*"
    severity: critical
    summary: "connector {connector} is {verdict}"
"""


def failing_sink(connect: ConnectRestClient, settings: Settings, created: list[str], name: str, blocker: Path) -> None:
    """A FileStreamSink writing under ``blocker``, a regular file: its task FAILS when it opens its file."""
    blocker.write_text("a file where a directory should be\n", encoding="utf-8")
    topic = f"{name}-in"
    create_topic(settings, topic, 1)
    created.append(name)
    connect.create_connector(name, file_sink_config(name, blocker / "out.txt", [topic]))


def folded_failed(settings: Settings, name: str) -> bool:
    """The connector-state job has folded the task's FAILED status into ``connectors``."""
    try:
        rows = read(str(settings.table_path(CONNECTORS.name)), ["name", "tasks"]).to_pylist()
    except DeltaTableNotFoundError:
        return False
    return any(row["name"] == name and [t["state"] for t in row["tasks"] or []] == ["FAILED"] for row in rows)


def seen_at(check: Callable[[], object], what: str) -> float:
    """When (epoch s) ``check()`` first held, polled every 0.2 s."""
    wait_until(check, WAIT_S, what, 0.2)
    return time.time()


def test_a_failed_sink_verdict_is_alerted_once_and_resolved_once(
    spark, connect, stack_settings, tmp_path: Path, created: list[str]
) -> None:
    rules, audit = tmp_path / "rules.yml", tmp_path / "audit.jsonl"
    rules.write_text(VERDICT_RULES, encoding="utf-8")
    receiver = WebhookReceiver()
    settings = job_settings(
        stack_settings,
        tmp_path,
        **{"trigger.interval": "1 second", "verdict.trigger.interval": "1 second",
           "alerts.rules.file": str(rules), "alerts.channels": f"hook=webhook:{receiver.url('/verdict')}",
           "alerts.evaluation.interval.ms": "1000", "lease.renew.interval.ms": "2000", "lease.duration.ms": "6000",
           "api.audit.file": str(audit), "api.audit.table": "false"},
    )  # fmt: skip
    failing, muted = unique("verdict-alert"), unique("verdict-alert-muted")
    sent = lambda name: [b for b in receiver.bodies("/verdict") if b["connector"] == name]  # noqa: E731
    api = api_client(settings)
    silence = api.post(f"/connectors/{muted}/silence?for=10m&comment=maintenance")
    assert silence.status_code == 201, silence.get_data(as_text=True)
    # As connect-state-jobs runs them: side by side in one driver, each with its own supervisor.
    jobs = select_jobs(every_job(hooks={}), "connector_states,watch,alerts")
    try:
        with running("connect-state-jobs", lambda stop: run_continuous(jobs, spark, settings, stop=stop), 240):
            # Started: the connector-state job has written its table (the timings below are not its start's).
            wait_until(lambda: api.get("/verdicts").status_code == 200, 240, "the connectors table", 0.5)
            blocker = tmp_path / "blocker"
            failing_sink(connect, settings, created, failing, blocker)
            failing_sink(connect, settings, created, muted, tmp_path / "muted-blocker")
            failed_at = seen_at(lambda: connector_state(connect, failing)[1] == ["FAILED"], f"{failing} FAILED")
            folded_s = seen_at(lambda: folded_failed(settings, failing), f"{failing} FAILED in connectors") - failed_at
            firing = wait_until(lambda: sent(failing), WAIT_S, f"the firing notification of {failing}", 0.2)
            fired_s = receiver.times("/verdict")[receiver.bodies("/verdict").index(firing[0])] - failed_at
            assert (firing[0]["status"], firing[0]["rule"], firing[0]["values"]["verdict"]) == (
                "firing", "SinkFailed", "failed")  # fmt: skip
            assert firing[0]["summary"] == f"connector {failing} is failed"
            assert "blocker" in firing[0]["detail"], firing[0]["detail"]  # the verdict's evidence: the trace

            # The silenced one fires too (recorded, silenced), and is not sent.
            assert connector_state(connect, muted)[1] == ["FAILED"]
            wait_until(
                lambda: [a for a in api.get(f"/alerts?connector={muted}").get_json()["alerts"]
                         if a["state"] == "firing" and a["silenced"] and not a["notified"]],
                WAIT_S, f"the silenced alert of {muted} firing",
            )  # fmt: skip

            # Fixed, and restarted through Connect's REST: the verdict leaves failed, the alert resolves once.
            blocker.unlink()
            blocker.mkdir()
            path = connect.connector_path(failing, "restart") + "?includeTasks=true&onlyFailed=true"
            status, body = connect.post(path)
            assert status == 202, body
            running_at = seen_at(lambda: connect.is_running(failing), f"{failing} RUNNING again")
            wait_until(lambda: len(sent(failing)) == 2, WAIT_S, f"the resolution of {failing}", 0.2)
            resolved_s = receiver.times("/verdict")[receiver.bodies("/verdict").index(sent(failing)[1])] - running_at
            time.sleep(3)  # a few more passes: nothing is sent again
            assert [b["status"] for b in sent(failing)] == ["firing", "resolved"]
            assert sent(muted) == []
            assert (blocker / "out.txt").exists()  # the restarted task opened its file
        (alert,) = api.get(f"/alerts?connector={failing}").get_json()["alerts"]
        assert (alert["rule"], alert["state"], alert["notified"]) == ("SinkFailed", "resolved", True)
        (muted_alert,) = api.get(f"/alerts?connector={muted}").get_json()["alerts"]
        assert (muted_alert["state"], muted_alert["silenced"], muted_alert["notified"]) == ("firing", True, False)
        history = read(str(settings.table_path(VERDICT_HISTORY.name)), ["connector", "verdict", "at"]).to_pylist()
        judged = [epoch_ms(r["at"]) for r in history if (r["connector"], r["verdict"]) == (failing, "failed")]
        judged_s = (judged[0] or 0) / 1000 - failed_at
        (shown,) = api.get(f"/connectors/{muted}/silences").get_json()["silences"]
        assert (shown["comment"], shown["id"]) == ("maintenance", silence.get_json()["id"])
        rows = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
        assert [(r["method"], r["endpoint"], r["connector"], r["status"]) for r in rows] == [
            ("POST", "alerts.silence_connector", muted, 201)
        ]
        print(f"\nverdict alert: FAILED on Connect's REST -> in connectors {folded_s:.1f} s, the watch job's verdict "
              f"{judged_s:.1f} s, "
              f"firing at the webhook {fired_s:.1f} s; RUNNING again -> resolved {resolved_s:.1f} s")  # fmt: skip
    finally:
        receiver.close()
