"""The Connect clusters a deployment watches (issue 37): each one's id, its Kafka, its three internal topics and its
workers' ``group.id``. Pure: settings in, clusters out.

Today a deployment watches one cluster, its *default*: the one today's settings describe (``bootstrap.servers`` and
the Kafka client properties, ``status.storage.topic``, ``config.storage.topic``, ``offset.storage.topic``,
``connect.group.id``), whose id is ``cluster.id`` (empty, the default: the workers' ``group.id``, as a Connect
cluster is its group on its Kafka). The API answers Connect's paths for it unchanged, and the same paths under
``/clusters/<id>/...`` (:mod:`connect_state.api.clusters`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from connect_state.core.errors import ConfigError
from connect_state.core.settings import Settings

__all__ = ["CLUSTER_ID", "Cluster", "clusters", "default_cluster"]

#: A cluster id: one URL path segment, plain (it names the cluster in ``/clusters/<id>/...`` and in the tables).
CLUSTER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class Cluster:
    """One Connect cluster: where its workers keep their state, as their own properties name it."""

    id: str
    bootstrap_servers: str
    status_storage_topic: str
    config_storage_topic: str
    offset_storage_topic: str
    group_id: str
    default: bool = False


def default_cluster(settings: Settings) -> Cluster:
    """The cluster today's settings describe; ConfigError when its id is not a plain path segment."""
    cluster_id = settings.cluster_id or settings.connect_group_id
    if not CLUSTER_ID.fullmatch(cluster_id):
        source = "cluster.id" if settings.cluster_id else "connect.group.id (cluster.id is empty)"
        raise ConfigError(
            f"{source}: a cluster id is 1 to 128 letters, digits, '.', '_' or '-', not starting with '.', '_' or "
            f"'-' (it is a URL path segment), got {cluster_id!r}; set cluster.id"
        )
    return Cluster(
        id=cluster_id,
        bootstrap_servers=settings.bootstrap_servers,
        status_storage_topic=settings.status_storage_topic,
        config_storage_topic=settings.config_storage_topic,
        offset_storage_topic=settings.offset_storage_topic,
        group_id=settings.connect_group_id,
        default=True,
    )


def clusters(settings: Settings) -> tuple[Cluster, ...]:
    """Every cluster the deployment watches, the default first (today: the default only)."""
    return (default_cluster(settings),)
