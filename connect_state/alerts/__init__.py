"""Alerts (issue 35): rules over the verdicts, cleanup failures, heartbeat failures and data loss, sent to webhooks,
Slack and Alertmanager; silences; the Prometheus rules file shipped for those who alert from ``/metrics``.

Pure: :mod:`~connect_state.alerts.rules` (the rules file), :mod:`~connect_state.alerts.engine` (when an alert starts,
fires and resolves), :mod:`~connect_state.alerts.render` (the bodies), :mod:`~connect_state.alerts.channels` (the
channels and their backoff), :mod:`~connect_state.alerts.reconciler` (a pass, behind :class:`~connect_state.alerts.
reconciler.AlertsIO`). The edges: :mod:`~connect_state.alerts.store` (the Delta tables, with ``deltalake``) and
:mod:`~connect_state.alerts.delivery` (HTTP). The job is :mod:`connect_state.spark.alerts`.
"""
