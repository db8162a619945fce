"""connect-state's REST API: Connect's endpoints answered from our Delta tables, writes sent to Kafka.

The request path never starts a JVM: tables are read with ``deltalake`` (:mod:`connect_state.tables.reader`), records
are written with kafka-python (:mod:`connect_state.kafka`). Serve it with ``connect-state-api``
(:mod:`connect_state.api.server`).
"""

from __future__ import annotations

from collections.abc import Mapping

from flask import Flask

from connect_state.api.errors import register_error_handlers
from connect_state.api.resources import AppResources, RecordWriter, TableSource, init_app, owned_resources
from connect_state.api.routing import ConnectStateFlask
from connect_state.core.settings import Settings, load_settings
from connect_state.kafka.follower import TopicFollower
from connect_state.kafka.log import TopicLog


def create_app(
    settings: Settings | None = None,
    *,
    table_reader: TableSource | None = None,
    writer: RecordWriter | None = None,
    topics: TopicLog | None = None,
    follower: TopicFollower | None = None,
    group_follower: TopicFollower | None = None,
    cluster_resources: Mapping[str, AppResources] | None = None,
) -> Flask:
    """The Flask app (application factory).

    ``settings`` default to :func:`connect_state.core.settings.load_settings`; ``table_reader`` to a
    :class:`connect_state.tables.reader.TableReader` on ``delta.root``. Without ``writer`` the app creates one
    :class:`~connect_state.kafka.InternalTopicWriter` on the first write and closes it in
    :func:`close_app` (or at exit); a ``writer`` passed in stays the caller's to close. Likewise the Kafka readers of
    the fresh view and the lag header (:mod:`connect_state.kafka.log`), unless ``topics`` is given (it then serves
    all of them and stays the caller's). A ``follower`` of the status and offsets topics (:mod:`connect_state.api.
    live`) passed in stays the caller's too; without one the app starts its own on first use (``api.follow.topics``),
    unless ``topics`` is given. The same for a ``group_follower`` of ``__consumer_offsets`` (sink connectors' offsets,
    ``api.follow.consumer.offsets``).

    All of these are the default cluster's. Each further cluster of the settings (issue 37) is served with its
    ``cluster_resources`` entry (the caller's to close), else with resources the app creates on its settings.
    """
    from connect_state.api import (
        alerts,
        audit,
        auth,
        availability,
        clusters,
        connect_read,
        connectors,
        dashboard,
        data_loss,
        deletions,
        etags,
        fleet,
        health,
        heartbeats,
        history,
        lag,
        leases,
        limits,
        metrics,
        moves,
        network,
        offsets,
        openapi,
        restart,
        restarts,
        revive,
        same_origin,
        verdicts,
        write_slots,
    )
    from connect_state.api import topics as topics_views

    settings = settings if settings is not None else load_settings()
    app = ConnectStateFlask(__name__)  # routed as Connect's Jersey routes: a trailing slash changes nothing
    # Keep our field order (Connect's entities have a fixed one) and write non-ASCII as is, like Jackson.
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.json.ensure_ascii = False  # type: ignore[attr-defined]
    init_app(app, AppResources(settings, table_reader, writer, topics, follower, group_follower))
    network.init_proxies(app, settings)  # X-Forwarded-For from api.trusted.proxies proxies only
    metrics.init_app(app, settings)  # first: its after_request runs last, when the answer is final
    register_error_handlers(app)
    same_origin.init_app(app, settings)  # first: a web page of another origin may not write, whoever it is
    auth.init_app(app, settings)  # before any other check: who asks, and may they (issue 13)
    clusters.init_app(app, cluster_resources)  # after auth: an unknown /clusters/<id> answers 404 to those who may ask
    limits.init_app(app, settings)
    write_slots.init_app(app, settings)  # after auth: a refused request takes no slot
    audit.init_app(app, settings)
    lag.init_app(app)
    etags.init_app(app)  # last: after who asks and may they; its after_request runs before the lag header's
    for views in (topics_views, connectors, heartbeats, deletions, offsets, data_loss, connect_read, restart, history,
                  openapi, health, metrics, dashboard, leases, audit, revive, verdicts, alerts,
                  availability, restarts, clusters, moves, fleet):  # fmt: skip
        app.register_blueprint(views.bp)
    auth.check_routes(app)  # every route says which role it needs
    return app


def close_app(app: Flask) -> None:
    """Release the app's resources, every cluster's (closes the Kafka clients the app created). Idempotent."""
    for resources in owned_resources(app):
        resources.close()


__all__ = ["AppResources", "close_app", "create_app"]
