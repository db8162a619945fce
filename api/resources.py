"""The API's resources (settings, table reader, Kafka writer, consumer-group admin, Kafka readers), one set per app
and Connect cluster, via ``flask.g``.

Each cluster the deployment watches (issue 37, :mod:`connect_state.core.clusters`) has its own set, on its own
settings: its Kafka, its topics, its tables. A request's set is its cluster's (the ``/clusters/<id>`` prefix its path
had, :data:`CLUSTER_ENVIRON_KEY`), else the default cluster's; so every view, the herder's reads and writes included,
answers for the request's cluster without knowing there are several.

As in the Flask tutorial's ``get_db()``: a view calls :func:`get_settings`, :func:`get_tables`, :func:`get_writer`
or :func:`get_admin`; the first call in a request puts the resource on ``g``. The Kafka writer behind
:func:`get_writer` is one per app (one producer per process), created on first use and closed by
:meth:`AppResources.close` (the server calls it on shutdown; an ``atexit`` hook is the fallback). The consumer-group
admin behind :func:`get_admin` (sink connectors' offsets) has the same lifecycle; :func:`create_admin` makes it.

The Kafka readers of the fresh view (:mod:`connect_state.api.fresh`) and of the lag header
(:mod:`connect_state.api.lag`) have it too, one consumer each per process (:class:`~connect_state.kafka.log.
TopicLogReader`): the config topic's tail (:meth:`AppResources.config_tail`), the reader of records past a table's
watermark (:meth:`AppResources.topic_reader`) and the cached start and end offsets (:meth:`AppResources.
offsets_cache`). A ``topics`` reader passed in (the unit tests' in-memory topics) serves all three and stays the
caller's. :func:`get_tables` notes which tables a request read (:func:`tables_served`).
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from flask import Flask, current_app, g, has_request_context, request

from connect_state.core.settings import Settings
from connect_state.core.storage import deltalake_options
from connect_state.formats.connector_keys import record_connector
from connect_state.herder import GroupAdmin, RecordWriter
from connect_state.kafka import ConsumerGroupAdmin, InternalTopicWriter
from connect_state.kafka.follower import TopicFollower
from connect_state.kafka.log import ConfigTopicTail, OffsetsCache, TopicLog, TopicLogReader
from connect_state.tables.reader import TableReader
from connect_state.tables.scan import TableScan

T = TypeVar("T")

#: The client id of the API's consumer of ``__consumer_offsets`` (:meth:`AppResources.group_follower`).
GROUP_FOLLOWER_CLIENT_ID = "connect-state-api-group-follower"

EXTENSION = "connect_state"
#: The app's resources of every cluster, by id (the default's too: the same object as under :data:`EXTENSION`).
CLUSTERS_EXTENSION = "connect_state.clusters.resources"
#: The further clusters' resources the app created (and closes).
OWNED_EXTENSION = "connect_state.clusters.owned"
#: The WSGI environ key holding the id a request's ``/clusters/<id>`` prefix named
#: (:class:`connect_state.api.clusters.ClusterPaths` puts it there).
CLUSTER_ENVIRON_KEY = "connect_state.cluster"


class TableSource(Protocol):
    """What the views need from a table reader (see :class:`connect_state.tables.reader.TableReader`)."""

    def rows(
        self, spec: Any, filters: Sequence[tuple[str, str, Any]] | None = None, columns: Sequence[str] | None = None
    ) -> list[dict[str, Any]]: ...

    def derived(self, spec: Any, build: Callable[[list[dict[str, Any]]], T]) -> T: ...

    def scan(self, spec: Any) -> TableScan: ...

    def loaded_at(self, spec: Any) -> float | None: ...

    def rows_as_of(self, spec: Any) -> float | None: ...


class AppResources:
    """The settings, table reader (default: a :class:`~connect_state.tables.reader.TableReader` on ``delta.root``) and
    (lazily created) Kafka writer and consumer-group admin of one app.

    A writer passed in by the caller belongs to the caller and is not closed here; one created here is. The admin is
    always created here (by :func:`create_admin`) and closed by :meth:`close`.
    """

    def __init__(
        self,
        settings: Settings,
        tables: TableSource | None = None,
        writer: RecordWriter | None = None,
        topics: TopicLog | None = None,
        follower: TopicFollower | None = None,
        group_follower: TopicFollower | None = None,
    ) -> None:
        self.settings = settings
        self.tables = tables if tables is not None else TableReader(settings.delta_root, deltalake_options(settings))
        self._writer = writer
        self._owns_writer = False
        self._admin: GroupAdmin | None = None
        self._topics = topics
        self._config_tail: ConfigTopicTail | None = None
        self._topic_reader: TopicLog | None = None
        self._offsets_cache: OffsetsCache | None = None
        self._follower = follower
        self._owns_follower = False
        self._group_follower = group_follower
        self._owns_group_follower = False
        self._lock = threading.Lock()

    def writer(self) -> RecordWriter:
        """The app's writer, created on first use."""
        with self._lock:
            if self._writer is None:
                self._writer = create_writer(self.settings)
                self._owns_writer = True
                atexit.register(self.close)
            return self._writer

    def admin(self) -> GroupAdmin:
        """The app's consumer-group admin, created on first use."""
        with self._lock:
            if self._admin is None:
                self._admin = create_admin(self.settings)
                atexit.register(self.close)  # close() is idempotent; unregister() drops every registration
            return self._admin

    def _reader(self, client_id: str, timeout_ms: int | None = None) -> TopicLog:
        """A new reader for this app (the injected one, shared, when there is one); call with the lock held."""
        if self._topics is not None:
            return self._topics
        atexit.register(self.close)
        return TopicLogReader(self.settings, client_id=client_id, timeout_ms=timeout_ms)

    def config_tail(self) -> ConfigTopicTail:
        """The app's config topic, read to its end on demand (one consumer per process), created on first use."""
        with self._lock:
            if self._config_tail is None:
                reader = self._reader("connect-state-api-config")
                self._config_tail = ConfigTopicTail(reader, self.settings.config_storage_topic)
            return self._config_tail

    def topic_reader(self) -> TopicLog:
        """The app's reader of records past a table's watermark (resets), created on first use."""
        with self._lock:
            if self._topic_reader is None:
                self._topic_reader = self._reader("connect-state-api-reader")
            return self._topic_reader

    def offsets_cache(self) -> OffsetsCache:
        """The app's cache of the topics' start and end offsets (the lag header), created on first use."""
        with self._lock:
            if self._offsets_cache is None:
                timeout_ms = self.settings.api_lag_timeout_ms
                reader = self._reader("connect-state-api-lag", timeout_ms)
                self._offsets_cache = OffsetsCache(reader, self.settings.api_lag_cache_ms, timeout_ms)
            return self._offsets_cache

    def follower(self) -> TopicFollower | None:
        """The app's follower of the status and offsets topics (``api.follow.topics``, :mod:`connect_state.api.live`),
        started on first use (in each server process: a thread does not survive a fork); None when the setting is
        off, or when the app's topics were passed in without a follower (the unit tests' in-memory topics)."""
        with self._lock:
            if self._follower is None and self.settings.api_follow_topics and self._topics is None:
                status, offsets = self.settings.status_storage_topic, self.settings.offset_storage_topic
                self._follower = TopicFollower(
                    self.settings,
                    [status, offsets],
                    record_connector(status, offsets),
                    max_bytes=self.settings.api_follow_max_bytes,
                )
                self._follower.start()
                self._owns_follower = True
            return self._follower

    def group_follower(self) -> TopicFollower | None:
        """The app's follower of ``__consumer_offsets`` (sink connectors' groups: ``api.follow.topics`` and
        ``api.follow.consumer.offsets``), started on first use; None when either setting is off, or when the app's
        topics were passed in without one. A consumer of its own, so that a principal not allowed to read that topic,
        or much commit traffic there, leaves the status and offsets answers as they are."""
        with self._lock:
            settings = self.settings
            follow = settings.api_follow_topics and settings.api_follow_consumer_offsets and self._topics is None
            if self._group_follower is None and follow:
                topic = settings.consumer_offsets_topic
                self._group_follower = TopicFollower(
                    settings,
                    [topic],
                    record_connector(settings.status_storage_topic, settings.offset_storage_topic, topic),
                    max_bytes=settings.api_follow_max_bytes,
                    client_id=GROUP_FOLLOWER_CLIENT_ID,
                )
                self._group_follower.start()
                self._owns_group_follower = True
            return self._group_follower

    def close(self) -> None:
        """Close the writer if this object created it, the admin and the readers and followers this object created
        (idempotent); a later request creates new ones."""
        with self._lock:
            owned = self._detach()
        if owned:
            atexit.unregister(self.close)
        for resource in owned:
            resource.close()

    def _detach(self) -> list[Any]:
        """What this object created, in closing order, detached from it (call with the lock held); an injected
        writer, reader or follower stays the caller's."""
        tail, cache = self._config_tail, self._offsets_cache
        readers = [tail.log if tail else None, self._topic_reader, cache.log if cache else None]
        owned = [
            self._writer if self._owns_writer else None,
            self._admin,
            *(readers if self._topics is None else []),
            self._follower if self._owns_follower else None,
            self._group_follower if self._owns_group_follower else None,
        ]
        if self._owns_writer:
            self._writer, self._owns_writer = None, False
        if self._owns_follower:
            self._follower, self._owns_follower = None, False
        if self._owns_group_follower:
            self._group_follower, self._owns_group_follower = None, False
        self._admin, self._config_tail, self._topic_reader, self._offsets_cache = None, None, None, None
        return [resource for resource in owned if resource is not None]


def create_writer(settings: Settings) -> RecordWriter:
    """The writer an app creates for itself: an :class:`~connect_state.kafka.InternalTopicWriter`."""
    return InternalTopicWriter(settings)


def create_admin(settings: Settings) -> GroupAdmin:
    """The consumer-group admin an app creates for itself: a :class:`~connect_state.kafka.ConsumerGroupAdmin`."""
    return ConsumerGroupAdmin(settings)


def init_app(app: Flask, resources: AppResources) -> None:
    """Attach the default cluster's resources to ``app`` (``app.extensions["connect_state"]``); the other clusters'
    are added by :func:`add_cluster`."""
    app.extensions[EXTENSION] = resources
    app.extensions[CLUSTERS_EXTENSION] = {}
    app.teardown_appcontext(_release)


def whole_path(*, query: bool = False) -> str:
    """The current request's path as the client sent it, ``/clusters/<id>`` prefix included (what the audit, a 403's
    message and the ETags name; the routing sees it without), with its query string when ``query``."""
    return request.script_root + (request.full_path if query else request.path)


def add_cluster(app: Flask, cluster_id: str, resources: AppResources, owned: bool = True) -> None:
    """Serve the cluster ``cluster_id``'s requests with ``resources`` (``owned``: the app's to close, else the
    caller's)."""
    app.extensions[CLUSTERS_EXTENSION][cluster_id] = resources
    if owned:
        app.extensions.setdefault(OWNED_EXTENSION, []).append(resources)


def owned_resources(app: Flask) -> list[AppResources]:
    """The resources ``app`` closes (:func:`connect_state.api.close_app`): the default cluster's (which close only
    what they created themselves) and the further clusters' it created."""
    return [default_resources(app), *app.extensions.get(OWNED_EXTENSION, [])]


def default_resources(app: Flask | None = None) -> AppResources:
    """The default cluster's resources of ``app`` (default: the current app): what is the deployment's rather than a
    cluster's (the audit topic's writer) uses them."""
    target = app if app is not None else current_app
    return target.extensions[EXTENSION]


def every_resources(app: Flask | None = None) -> dict[str, AppResources]:
    """Every cluster's resources of ``app`` by id, in the order the clusters were added (the default first)."""
    target = app if app is not None else current_app
    return dict(target.extensions[CLUSTERS_EXTENSION])


def request_cluster_id() -> str:
    """The id of the cluster the current request is for: the one its ``/clusters/<id>`` prefix names (an unknown one
    is refused by :mod:`connect_state.api.clusters`), else the default cluster's (the first added)."""
    named = request.environ.get(CLUSTER_ENVIRON_KEY)
    return named if isinstance(named, str) else next(iter(current_app.extensions[CLUSTERS_EXTENSION]))


#: At most this many clusters are asked at once by :func:`each_at_once`.
MAX_AT_ONCE = 8


def each_at_once(work: Callable[[AppResources], T], resources: Sequence[AppResources]) -> list[T]:
    """``work`` on each of ``resources`` (clusters), in threads, at most :data:`MAX_AT_ONCE` at a time, the results in
    order: a Kafka that cannot be reached costs the answer one timeout, not one per cluster. Each thread runs in the
    app's context, not the request's (``work`` is given its cluster's resources and asks nothing of ``request`` or
    ``g``); an exception of ``work`` is raised here."""
    if len(resources) <= 1:
        return [work(one) for one in resources]
    app = current_app._get_current_object()  # type: ignore[attr-defined]

    def in_app(one: AppResources) -> T:
        with app.app_context():
            return work(one)

    with ThreadPoolExecutor(max_workers=min(len(resources), MAX_AT_ONCE), thread_name_prefix="clusters") as pool:
        return list(pool.map(in_app, resources))


def app_resources(app: Flask | None = None) -> AppResources:
    """The resources of the current request's cluster (default: the default cluster's; outside a request, or for an
    id that names no cluster, which the request is refused for, the default cluster's too). With ``app``, the default
    cluster's resources of that app."""
    if app is None and has_request_context():
        named = request.environ.get(CLUSTER_ENVIRON_KEY)
        if named is not None:
            found = current_app.extensions[CLUSTERS_EXTENSION].get(named)
            if found is not None:
                return found
    return default_resources(app)


#: What a request keeps of its cluster's resources on ``g`` (:func:`serving_cluster` drops them).
_CLUSTER_SCOPED = ("settings", "tables", "herder", "followed")


@contextmanager
def serving_cluster(cluster_id: str) -> Iterator[None]:
    """For the block, the current request is served as one for the cluster ``cluster_id`` (a known id): the
    resources, the settings and the herder it gets are that cluster's; the request's own come back after. A write
    request's audited writer and admin (:mod:`connect_state.api.audit`) reach the cluster's Kafka clients at each call,
    so what the block writes is audited with the request. For an operation over two clusters (moving a connector)."""
    environ = request.environ
    before = environ.get(CLUSTER_ENVIRON_KEY)
    kept = {name: g.pop(name) for name in _CLUSTER_SCOPED if name in g}
    plain = {name: g.pop(name) for name in ("writer", "admin") if name in g and not _follows(g.get(name))}
    environ[CLUSTER_ENVIRON_KEY] = cluster_id
    try:
        yield
    finally:
        for name in (*_CLUSTER_SCOPED, *plain):
            g.pop(name, None)
        if before is None:
            environ.pop(CLUSTER_ENVIRON_KEY, None)
        else:
            environ[CLUSTER_ENVIRON_KEY] = before
        for name, value in {**kept, **plain}.items():
            setattr(g, name, value)


def _follows(resource: object) -> bool:
    """Whether ``resource`` reaches the request's cluster's client at each call (``follows_cluster``: the audit's
    proxies) rather than being one cluster's client."""
    return bool(getattr(resource, "follows_cluster", False))


def get_settings() -> Settings:
    """The app's settings."""
    if "settings" not in g:
        g.settings = app_resources().settings
    return g.settings


class _ServedTables:
    """The app's table reader, noting the name of every table a request read successfully (for the lag header)."""

    def __init__(self, tables: TableSource) -> None:
        self.tables = tables
        self.served: list[str] = []

    def rows(
        self, spec: Any, filters: Sequence[tuple[str, str, Any]] | None = None, columns: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        rows = self.tables.rows(spec, filters, columns)
        self._served(spec.name)
        return rows

    def derived(self, spec: Any, build: Callable[[list[dict[str, Any]]], T]) -> T:
        value = self.tables.derived(spec, build)
        self._served(spec.name)
        return value

    def scan(self, spec: Any) -> TableScan:
        scan = self.tables.scan(spec)
        self._served(spec.name)
        return scan

    def loaded_at(self, spec: Any) -> float | None:
        return self.tables.loaded_at(spec)

    def rows_as_of(self, spec: Any) -> float | None:
        return self.tables.rows_as_of(spec)

    def _served(self, name: str) -> None:
        if name not in self.served:
            self.served.append(name)


def get_tables() -> TableSource:
    """The app's Delta table reader (noting the tables the request reads: :func:`tables_served`)."""
    if "tables" not in g:
        g.tables = _ServedTables(app_resources().tables)
    return g.tables


def tables_served() -> list[str]:
    """The names of the tables the current request read through :func:`get_tables`, in the order first read."""
    tables = g.get("tables")
    return list(tables.served) if isinstance(tables, _ServedTables) else []


def note_served(names: Sequence[str]) -> None:
    """Count ``names`` among the tables the current request read (an answer served from what an earlier request
    read: :mod:`connect_state.api.etags`)."""
    tables = get_tables()
    if isinstance(tables, _ServedTables):
        for name in names:
            tables._served(name)


def get_writer() -> RecordWriter:
    """The app's Kafka writer (shared by all requests of the process; created on first use)."""
    if "writer" not in g:
        g.writer = app_resources().writer()
    return g.writer


def get_admin() -> GroupAdmin:
    """The app's consumer-group admin (shared by all requests of the process; created on first use)."""
    if "admin" not in g:
        g.admin = app_resources().admin()
    return g.admin


def _release(_exc: BaseException | None = None) -> None:
    """Drop the request's references; the shared writer and admin stay open for the next request."""
    for name in ("settings", "tables", "writer", "admin"):
        g.pop(name, None)
