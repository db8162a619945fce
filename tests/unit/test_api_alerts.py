"""``GET /alerts``, ``GET /alerts/deliveries`` and the silences (api/alerts.py) over the real Delta tables the job and
the API write (connect_state/alerts/store.py), on a temporary ``delta.root``."""

from __future__ import annotations

import json
from pathlib import Path

from flask.testing import FlaskClient

from connect_state.alerts.channels import ChannelKind
from connect_state.alerts.engine import Alert, AlertState, Event
from connect_state.alerts.reconciler import Delivery, DeliveryStatus
from connect_state.alerts.rules import ConditionKind, Severity
from connect_state.alerts.store import DeltaAlertsIO, SilenceStore
from connect_state.core.settings import Settings
from tests.unit.conftest import MakeClient


def test_silence_list_and_lift(make_client: MakeClient, settings: Settings) -> None:
    client = make_client()
    created = client.post("/connectors/orders/silence?for=2h&comment=upgrade")
    assert created.status_code == 201, created.get_data(as_text=True)
    body = created.get_json()
    assert (body["connector"], body["comment"], body["created_by"], body["lifted_at"]) == (
        "orders", "upgrade", "anonymous", None)  # fmt: skip
    (stored,) = SilenceStore(settings).all()
    assert stored.ends_at - stored.starts_at == 7_200_000 and stored.active(stored.starts_at)
    assert [s["id"] for s in client.get("/silences").get_json()["silences"]] == [body["id"]]
    assert client.get("/connectors/billing/silences").get_json() == {"silences": []}
    lifted = client.delete("/connectors/orders/silence")
    assert lifted.status_code == 200 and lifted.get_json()["lifted"][0]["lifted_by"] == "anonymous"
    assert client.get("/connectors/orders/silences").get_json() == {"silences": []}
    assert len(client.get("/connectors/orders/silences?all=true").get_json()["silences"]) == 1
    assert SilenceStore(settings).all()[0].lifted_at is not None


def test_bad_durations_and_nothing_to_lift(make_client: MakeClient) -> None:
    client = make_client()
    bad = client.post("/connectors/orders/silence?for=soon")
    assert bad.status_code == 400
    assert bad.get_json()["message"] == "for: expected a duration such as 30s, 2m or 1h, got 'soon'"
    assert client.post("/connectors/orders/silence?for=31d").status_code == 400
    missing = client.delete("/connectors/orders/silence")
    assert (missing.status_code, missing.get_json()["message"]) == (404, "Connector orders has no silence in force")


def test_silences_are_audited(make_client: MakeClient, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    client = make_client(overrides={"api.audit.file": str(audit), "api.audit.table": "false"})
    assert client.post("/connectors/orders/silence?for=10m").status_code == 201
    assert client.delete("/connectors/orders/silence").status_code == 200
    rows = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["method"], r["endpoint"], r["connector"], r["role"], r["status"], r["outcome"]) for r in rows] == [
        ("POST", "alerts.silence_connector", "orders", "operate", 201, "succeeded"),
        ("DELETE", "alerts.lift_silence", "orders", "operate", 200, "succeeded"),
    ]


def test_alerts_and_deliveries(make_client: MakeClient, settings: Settings) -> None:
    io = DeltaAlertsIO(settings, sender=None)
    alert = Alert(
        "a1",
        "Stuck",
        ConditionKind.VERDICT,
        "orders",
        "",
        Severity.CRITICAL,
        "orders is stalled",
        "lag",
        {},
        AlertState.FIRING,
        1_000,
        fired_at=61_000,
        notified=True,
        updated_at=61_000,
        values={"verdict": "stalled"},
    )
    io.record_alerts([alert])
    delivery = Delivery("a1", Event.FIRING, "hook", ChannelKind.WEBHOOK, DeliveryStatus.PENDING, 61_000, 62_000, 1,
                        last_error="cannot reach http://x: refused")  # fmt: skip
    io.record_deliveries([delivery])
    assert io.open_alerts() == [alert] and io.pending_deliveries() == [delivery], "the rows read back as written"
    client = make_client()
    (shown,) = client.get("/alerts?state=firing").get_json()["alerts"]
    assert (shown["id"], shown["state"], shown["started_at"], shown["fired_at"]) == (
        "a1", "firing", "1970-01-01T00:00:01.000Z", "1970-01-01T00:01:01.000Z")  # fmt: skip
    assert client.get("/alerts?state=resolved").get_json() == {"alerts": []}
    (row,) = client.get("/alerts/deliveries?alert=a1").get_json()["deliveries"]
    assert (row["status"], row["attempts"], row["last_error"]) == ("pending", 1, "cannot reach http://x: refused")
    io.record_deliveries([Delivery("a1", Event.FIRING, "hook", ChannelKind.WEBHOOK, DeliveryStatus.DELIVERED, 61_000,
                                   62_000, 2, delivered_at=63_000, http_status=200, latency_ms=62_000)])  # fmt: skip
    (row,) = client.get("/alerts/deliveries").get_json()["deliveries"]
    assert (row["status"], row["attempts"], row["latency_ms"]) == ("delivered", 2, 62_000)
    assert io.pending_deliveries() == []


def test_no_tables_yet(client: FlaskClient) -> None:
    assert client.get("/alerts").get_json() == {"alerts": []}
    assert client.get("/alerts/deliveries").get_json() == {"deliveries": []}
    assert client.get("/silences").get_json() == {"silences": []}


class Sent:
    def __init__(self) -> None:
        self.bodies: list[dict] = []

    def send(self, channel, data: bytes):  # type: ignore[no-untyped-def]
        from connect_state.alerts.reconciler import SendResult

        self.bodies.append(json.loads(data))
        return SendResult(True, 200)


def test_a_silence_made_through_the_api_holds_the_jobs_notification(
    make_client: MakeClient, settings: Settings
) -> None:
    """The API's silence and the job's pass meet in the alert_silences table."""
    import logging
    import time

    import pyarrow as pa
    from deltalake import write_deltalake

    from connect_state.alerts.channels import Backoff, parse_channels
    from connect_state.alerts.reconciler import AlertsReconciler
    from connect_state.alerts.rules import load_rules

    now = int(time.time() * 1000)
    verdicts = pa.Table.from_pylist(
        [{"connector": "orders", "verdict": "failed", "since": now - 600_000, "evidence": "{}"}],
        schema=pa.schema([("connector", pa.string()), ("verdict", pa.string()), ("since", pa.timestamp("ms", tz="UTC")),
                          ("evidence", pa.string())]),
    )  # fmt: skip
    write_deltalake(str(settings.table_path("connector_verdicts")), verdicts)
    client = make_client()
    assert client.post("/connectors/orders/silence?for=1h").status_code == 201
    sent = Sent()
    job = AlertsReconciler(DeltaAlertsIO(settings, sent), load_rules(None), parse_channels({"h": "webhook:http://h"}),
                           Backoff(1000, 2000), generator_url="http://api", resend_ms=60_000,
                           clock=lambda: int(time.time() * 1000), log=logging.getLogger("t"))  # fmt: skip
    job.run_pass()
    assert sent.bodies == []
    (alert,) = client.get("/alerts?connector=orders").get_json()["alerts"]
    assert (alert["state"], alert["silenced"], alert["notified"]) == ("firing", True, False)
    assert client.delete("/connectors/orders/silence").status_code == 200
    job.run_pass()
    assert [(b["status"], b["connector"], b["rule"]) for b in sent.bodies] == [
        ("firing", "orders", "ConnectorUnhealthy")
    ]
