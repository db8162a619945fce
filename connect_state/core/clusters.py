"""The Connect clusters a deployment watches (issue 37): each one's id, its Kafka, its three internal topics and its
workers' ``group.id``, with the settings the jobs and the API use for it. Pure: settings in, clusters out.

The *default* cluster is the one the top-level settings describe (``bootstrap.servers`` and the Kafka client
properties, ``status.storage.topic``, ``config.storage.topic``, ``offset.storage.topic``, ``connect.group.id``); its id
is ``cluster.id`` (empty, the default: the workers' ``group.id``, as a Connect cluster is its group on its Kafka), and
its tables and checkpoints are at ``delta.root`` and ``checkpoint.root``, as they were before there were several.

Each id of ``clusters`` is a further cluster: the default's settings, but for the :data:`~connect_state.core.settings.
CLUSTER_KEYS` it sets as ``clusters.<id>.<key>``, with its tables and checkpoints under ``<delta.root>/clusters/<id>``
and ``<checkpoint.root>/clusters/<id>``. So each cluster's state is folded by queries and read by an API of its own,
exactly as a one-cluster deployment's is, and adding or removing one leaves the others' tables and checkpoints as they
are. Two clusters may share a Kafka (several Connect clusters on one Kafka: their internal topics and ``group.id``
differ) or not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from connect_state.core.errors import ConfigError
from connect_state.core.settings import CLUSTERS_PREFIX, Settings, cluster_key
from connect_state.core.vocabulary import FleetTables

__all__ = [
    "CLUSTERS_DIR",
    "CLUSTER_ID",
    "CLUSTER_ID_RULE",
    "CLUSTER_LABEL",
    "Cluster",
    "checked_id",
    "cluster_label",
    "cluster_settings",
    "clusters",
    "default_cluster",
    "fleet_tables_on",
    "listed_ids",
]

#: A cluster id: one URL path segment, plain (it names the cluster in ``/clusters/<id>/...`` and in the tables).
CLUSTER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: :data:`CLUSTER_ID` in words, for the errors that refuse an id.
CLUSTER_ID_RULE = (
    "a cluster id is 1 to 128 letters, digits, '.', '_' or '-', not starting with '.', '_' or '-' (it is a URL path "
    "segment)"
)
#: The Kafka client settings a further cluster on another Kafka does not take from the default (its credentials are
#: the default Kafka's): it sets its own, or has none.
KAFKA_CLIENT_KEYS = ("kafka.client.config.file", "kafka.client.properties")
#: The label naming a Connect cluster in Prometheus series and Alertmanager alerts: not ``cluster``, which many
#: Prometheus set-ups already give every series (the Kubernetes cluster, an external label) and route alerts by.
CLUSTER_LABEL = "connect_cluster"
#: The directory, under ``delta.root`` and ``checkpoint.root``, of the further clusters' tables and checkpoints.
CLUSTERS_DIR = "clusters"


@dataclass(frozen=True)
class Cluster:
    """One Connect cluster: where its workers keep their state, as their own properties name it, and the settings
    the jobs and the API use for it (``settings``: its Kafka, topics, tables and checkpoints)."""

    id: str
    bootstrap_servers: str
    status_storage_topic: str
    config_storage_topic: str
    offset_storage_topic: str
    group_id: str
    settings: Settings = field(compare=False, repr=False)
    default: bool = False


def checked_id(cluster_id: str, source: str) -> str:
    """``cluster_id``, or ConfigError (naming ``source``) unless it follows :data:`CLUSTER_ID_RULE`."""
    if not CLUSTER_ID.fullmatch(cluster_id):
        raise ConfigError(f"{source}: {CLUSTER_ID_RULE}, got {cluster_id!r}")
    return cluster_id


def _cluster(cluster_id: str, settings: Settings, default: bool) -> Cluster:
    return Cluster(
        id=cluster_id,
        bootstrap_servers=settings.bootstrap_servers,
        status_storage_topic=settings.status_storage_topic,
        config_storage_topic=settings.config_storage_topic,
        offset_storage_topic=settings.offset_storage_topic,
        group_id=settings.connect_group_id,
        default=default,
        settings=settings,
    )


def default_cluster(settings: Settings) -> Cluster:
    """The cluster the top-level settings describe; ConfigError when its id is not a plain path segment."""
    if settings.cluster_id:
        cluster_id = checked_id(settings.cluster_id, "cluster.id")
    else:
        cluster_id = checked_id(settings.connect_group_id, "connect.group.id (cluster.id is empty; set cluster.id)")
    return _cluster(cluster_id, settings, default=True)


def cluster_label(settings: Settings) -> str | None:
    """The id that names ``settings``'s cluster to people outside (the :data:`CLUSTER_LABEL` of the alerts and the
    API's gauges, the bodies sent to channels, their links under ``/clusters/<id>``): a further cluster's id, or the
    default's when it sets ``cluster.id`` or the deployment lists further clusters; None for a one-cluster deployment
    without ``cluster.id``, whose notifications and gauges stay as they were."""
    if settings.cluster_id:
        return settings.cluster_id
    return default_cluster(settings).id if listed_ids(settings) else None


def fleet_tables_on(settings: Settings) -> bool:
    """Whether the jobs keep the fleet's tables: ``fleet.tables=on``; with ``auto``, when ``clusters`` lists further
    clusters and ``deltalake``, which writes them, can commit to ``fleet.delta.root`` and ``delta.root`` (not
    ``dbfs:`` or a FUSE mount)."""
    if settings.fleet_tables is not FleetTables.AUTO:
        return settings.fleet_tables is FleetTables.ON
    roots = (settings.fleet_delta_root, settings.delta_root)
    return bool(listed_ids(settings)) and all(root.deltalake_commits for root in roots)


def listed_ids(settings: Settings) -> list[str]:
    """The ids of ``clusters``, in order, each checked."""
    return [checked_id(item.strip(), "clusters") for item in settings.clusters.split(",") if item.strip()]


def cluster_settings(settings: Settings, cluster_id: str) -> Settings:
    """The settings of the further cluster ``cluster_id``: the default's, its own ``clusters.<id>.<key>`` values
    replacing theirs, its tables and checkpoints under ``clusters/<id>``, and no further clusters of its own. Two of
    the default's are not taken: ``api.kafka.cluster.id`` (another Kafka's id, asked of its own unless set), and, for
    a cluster on another Kafka, the Kafka client settings (:data:`KAFKA_CLIENT_KEYS`: the default Kafka's
    credentials)."""
    props = {key: value for key, value in settings.raw.items() if not key.startswith(CLUSTERS_PREFIX)}
    splits = ((cluster_key(key), value) for key, value in settings.raw.items())
    own = {split[1]: value for split, value in splits if split is not None and split[0] == cluster_id}
    props["api.kafka.cluster.id"] = ""  # asked of its own Kafka unless it sets it
    if own.get("bootstrap.servers", settings.bootstrap_servers) != settings.bootstrap_servers:
        props.update({key: "" for key in KAFKA_CLIENT_KEYS})  # another Kafka: none of the default's credentials
    props.update(own)
    props.update(
        {
            "cluster.id": cluster_id,
            "clusters": "",
            "delta.root": (settings.delta_root / CLUSTERS_DIR / cluster_id).uri,
            "checkpoint.root": (settings.checkpoint_root / CLUSTERS_DIR / cluster_id).uri,
            "fleet.delta.root": settings.fleet_delta_root.uri,  # the deployment's fleet tables, every cluster's
            "fleet.tables": (FleetTables.ON if fleet_tables_on(settings) else FleetTables.OFF).value,
        }
    )
    try:
        return Settings.from_mapping(props, environ=settings.environ)
    except ConfigError as err:
        raise ConfigError(f"cluster {cluster_id}: {err}") from None


def clusters(settings: Settings) -> tuple[Cluster, ...]:
    """Every cluster the deployment watches, the default first, then those of ``clusters`` in order.

    ConfigError for an id that is no plain path segment, an id named twice (the default's included), a
    ``clusters.<id>.<key>`` whose id is not listed, and a further cluster that is the default again or another one
    again (the same Kafka, ``group.id`` and status topic): the same topics folded twice."""
    first = default_cluster(settings)
    found = [first]
    ids = listed_ids(settings)
    for key in settings.raw:
        split = cluster_key(key)
        if split is not None and split[0] not in ids:
            raise ConfigError(f"{key}: {split[0]!r} is not one of clusters ({settings.clusters or 'empty'})")
    for cluster_id in ids:
        if any(cluster.id == cluster_id for cluster in found):
            raise ConfigError(f"clusters: {cluster_id!r} is named twice (the default cluster's id is {first.id!r})")
        cluster = _cluster(cluster_id, cluster_settings(settings, cluster_id), default=False)
        for other in found:
            if _same_state(cluster, other):
                raise ConfigError(
                    f"clusters: {cluster.id!r} has the same bootstrap.servers, connect.group.id and "
                    f"status.storage.topic as {other.id!r}; give it its own (clusters.{cluster.id}.<key>)"
                )
        found.append(cluster)
    return tuple(found)


def _same_state(one: Cluster, other: Cluster) -> bool:
    return (one.bootstrap_servers, one.group_id, one.status_storage_topic) == (
        other.bootstrap_servers,
        other.group_id,
        other.status_storage_topic,
    )
