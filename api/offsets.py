"""KIP-875 connector offsets, with Connect's checks, order and messages (spec §4.2-4.4, §5.3, §5.4).

* ``GET /connectors/<name>/offsets`` -> 200 ``{"offsets":[{"partition":{...},"offset":{...}|null}, ...]}``; 404
  ``"Connector <name> not found"`` unless the config snapshot (``connectors`` table) has the connector
  (``AbstractHerder.connectorOffsets``). No stopped-state requirement.

  - Source connectors (``Worker.sourceConnectorOffsets``), from the ``source_offsets`` table: the union (Java
    ``Map.equals``) of the connector's *listed* partitions (Connect's ``connectorPartitions``) in the worker's
    offsets topic (``offset.storage.topic``) and in the connector's own ``offsets.storage.topic`` when it names
    another topic. Each is looked up by the key bytes Connect re-serialises, ``[name, partition]`` in Java
    ``HashMap`` order (:func:`~connect_state.formats.offsets.offset_key_bytes`); a partition written in another key
    order is therefore answered ``"offset":null``, as Connect does (spec §4.3). With a connector-specific topic the
    value comes from that topic only: Kafka 4.3.1's ``ConnectorOffsetBackingStore.get`` overlays the connector store's
    answer, which holds ``null`` for a key it lacks, on the worker store's (checked in the 4.3.1 bytecode). Which
    topics those are is :func:`~connect_state.connect.offset_stores.connector_offset_stores`' answer (an own topic
    equal to the worker's is the worker's topic alone). A value Connect cannot read (``"CRITICAL: Failed to
    deserialize offset data"``) leaves the partition out.
  - Sink connectors (``Worker.sinkConnectorOffsets``, ``SinkUtils.consumerGroupOffsetsToConnectorOffsets``), from the
    ``sink_offsets`` table: the committed offsets of the group ``consumer.override.group.id`` or ``connect-<name>``,
    as ``{"partition":{"kafka_partition":p,"kafka_topic":t},"offset":{"kafka_offset":o}}``.

  Connect's list order is unspecified (hash sets); ours is sorted (source: by key bytes; sink: by topic, partition).
  Bodies are written with Jackson's number and string formatting (:func:`connect_state.formats.jsonconv.dumps`).

* ``PATCH /connectors/<name>/offsets`` (alter) and ``DELETE /connectors/<name>/offsets`` (reset) -> 200
  ``{"message": ...}``, checks in Connect's order (spec §5.4):

  1. the body (PATCH): what Jackson cannot bind to ``ConnectorOffsets`` (and a ``null`` entry) is a **400** here
     with Jackson's message, where Connect answers 500 (a deliberate, documented difference); invalid JSON likewise;
     then a missing, null or empty ``offsets`` is 400 ``"Partitions / offsets need to be provided for an alter
     offsets request"`` (before the connector's existence, as in ``ConnectorsResource``);
  2. 404 ``"Connector <name> not found"``;
  3. 400 :func:`~connect_state.connect.rest.not_stopped_message` unless the target state is STOPPED and the
     committed task count is 0 (``DistributedHerder.modifyConnectorOffsetsChecks``; PAUSED is refused too);
  4. sink: ``SinkUtils.parseSinkConnectorOffsets`` (400s); source: ``OffsetUtils.validateFormat`` (500s, Connect's
     ``DataException``); then the connector class's ``alterOffsets`` rule (:mod:`connect_state.connect.alter_offsets`:
     built in for the FileStream and MirrorMaker 2 connectors, configurable per class): its ``ConnectException`` is a
     500 with its message, a ``BadRequestException`` a 400, ``UnsupportedOperationException`` Connect's 500;
  5. the writes: sink offsets through the consumer-group admin (:func:`~.resources.get_admin`: non-null offsets
     altered, null offsets deleted; reset deletes the group, a missing group counting as success); source offsets as
     records of the offsets topic (:func:`~.resources.get_writer`: Connect's key bytes, Java partitioning,
     ``acks=all``, flushed before answering; a null offset is a tombstone; reset tombstones every listed partition
     and succeeds with none). With a connector-specific offsets topic, as ``ConnectorOffsetBackingStore.set``
     (:meth:`~connect_state.connect.offset_stores.ConnectorOffsetStores.writes`): tombstones to the worker's topic
     first, then everything to the connector's topic, then the non-null offsets to the worker's topic (a failure of
     that last write is only logged);
     With ``exactly.once.source.support=enabled`` (the workers' setting, KIP-618;
     :mod:`connect_state.connect.exactly_once`), a source connector's offsets change is first preceded by a round of
     zombie fencing and the checks of 2. and 3. again (a failed fencing is Connect's 500 ``"Failed to perform zombie
     fencing for source connector prior to modifying offsets"``, plus why and what to do; nothing is written), and
     the write to the connector's primary store is one transaction of task 0's transactional id
     (``<connect.group.id>-<name>-0``);
  6. :func:`~connect_state.connect.rest.offsets_success_message`: the short form when the connector's
     ``alterOffsets`` returns true, the long "framework-managed" form otherwise (a class without a rule).

  Whether the connector is a source or a sink comes from its class (``connector.class.types``, then Kafka's own
  classes); only for an unknown class is it guessed from the config, and the answer then carries
  ``X-Connect-State-Connector-Type: <type>; basis=guessed-from-config``.

  Failures answer Connect's 500 messages (:mod:`connect_state.connect.rest`: ``sink_alter_zombie_message`` when sink
  tasks are still in the group, ``source_modify_timeout_message`` when the write is not acknowledged within
  ``api.kafka.write.timeout.ms``...).
  Connect runs these on its leader after reading the config topic to its end, and so do we (issue 10): the checks of
  2. and 3. and the connector's config come from the config topic read to its end offset at the request
  (:func:`connect_state.api.fresh.fresh_connector`), not from the ``connectors`` table, so a PATCH sent just after
  a resume through Connect is refused like Connect refuses it. A source reset tombstones the partitions listed as of
  the offsets topics' end offsets at the request (:func:`connect_state.api.fresh.fresh_source_rows`: the
  ``source_offsets`` rows plus the records past the table's watermark), so partitions recorded since the offsets
  job's last batch are reset too. When that cannot be established within ``api.fresh.read.timeout.ms`` the request
  answers 409 (503 when Kafka cannot be reached) and writes nothing. A source write whose acknowledgement times out
  answers Connect's 500 message followed by ours: the outcome is unknown, retrying is safe.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from flask import Blueprint, Response, jsonify, request

from connect_state.api import live
from connect_state.api.connectors import connector_row, is_configured
from connect_state.api.errors import ConnectRestException
from connect_state.api.fresh import fresh_connector, fresh_source_rows
from connect_state.api.guards import checked_group
from connect_state.api.resources import OpenTransaction, TableSource, get_admin, get_settings, get_tables, get_writer
from connect_state.connect.alter_offsets import AlterOffsetsRules, ModifyOffsetsRefused, SinkOffsets
from connect_state.connect.connector_types import TypeBasis, connector_type_basis
from connect_state.connect.exactly_once import offsets_transactional_id, zombie_fencing_ids
from connect_state.connect.offset_stores import (
    ConnectorOffsetStores,
    UnreadableOffset,
    connector_consumer_group,
    connector_offset_stores,
    listed_partitions,
    log_unreadable_offsets,
    source_connector_offsets_checked,
)
from connect_state.connect.rest import (
    ZOMBIE_FENCING_FAILED,
    connector_not_found_message,
    connector_offsets,
    not_stopped_message,
    offsets_success_message,
    sink_alter_failed_message,
    sink_alter_zombie_message,
    sink_list_failed_message,
    sink_reset_failed_message,
    sink_reset_zombie_message,
    source_modify_failed_message,
    source_modify_timeout_message,
    zombie_fencing_failed_message,
)
from connect_state.connect.vocabulary import ConnectorType, TargetState
from connect_state.errors import KafkaUnavailableError, KafkaWriteError, KafkaWriteTimeout
from connect_state.folds.config_snapshot import ConnectorConfigView
from connect_state.formats import jsonconv
from connect_state.formats.offsets import (
    BadOffsetsRequest,
    OffsetPair,
    SinkOffset,
    normalize_source_offsets,
    offset_key_bytes,
    parse_offsets_request,
    parse_sink_offsets,
    serialize_offset_value,
    sink_offset,
    sink_partition,
)
from connect_state.guards import checked_stores
from connect_state.kafka import ConsumerGroupAdminError, GroupNotEmptyError
from connect_state.plugins import load_alter_offsets_rules
from connect_state.tables import SINK_OFFSETS, SOURCE_OFFSETS

log = logging.getLogger(__name__)

bp = Blueprint("offsets", __name__, url_prefix="/connectors")

# --- our messages ---------------------------------------------------------------------------------------------------


def unknown_type_message(name: str, connector_class: str | None) -> str:
    """Ours: 500 when the connector's type is unknown (Connect fails to load the plugin class and answers 500)."""
    return f"Cannot tell whether connector {name} is a source or a sink connector (class {connector_class})"


# --- reading --------------------------------------------------------------------------------------------------------


def _configured_row(name: str) -> dict[str, Any]:
    row = connector_row(name)
    if row is None or not is_configured(row):
        raise ConnectRestException(404, connector_not_found_message(name))
    return row


def _config(row: Mapping[str, Any]) -> dict[str, Any]:
    try:
        config = json.loads(row["config"])
    except (TypeError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


#: Ours: on an offsets answer whose connector type was not taken from the class, ``<type>; basis=<how>``.
CONNECTOR_TYPE_HEADER = "X-Connect-State-Connector-Type"


def _connector_type(name: str, row: Mapping[str, Any]) -> tuple[ConnectorType, TypeBasis]:
    """The connector's type from its class (``connector.class.types``, then Kafka's own classes), guessed from its
    config only for an unknown class (logged, and said in :data:`CONNECTOR_TYPE_HEADER`)."""
    try:
        kind, basis = connector_type_basis(_config(row), get_settings().connector_class_types)
    except ValueError as err:
        raise ConnectRestException(500, f"{unknown_type_message(name, row.get('connector_class'))}: {err}") from None
    if kind not in (ConnectorType.SOURCE, ConnectorType.SINK):
        raise ConnectRestException(500, unknown_type_message(name, row.get("connector_class")))
    if basis == TypeBasis.GUESSED:
        log.warning(
            "Connector %s: class %s is neither one of Kafka's nor in connector.class.types; taken for a %s connector "
            "from its config",
            name,
            row.get("connector_class"),
            kind.value,
        )
    return kind, basis


def _with_type(response: Response, kind: ConnectorType, basis: TypeBasis) -> Response:
    if basis == TypeBasis.GUESSED:
        response.headers[CONNECTOR_TYPE_HEADER] = f"{kind.value}; basis={basis.value}"
    return response


@functools.lru_cache(maxsize=8)
def _rules_for(paths: tuple[tuple[str, str], ...]) -> AlterOffsetsRules:
    return load_alter_offsets_rules(dict(paths))


def alter_offsets_rules() -> AlterOffsetsRules:
    """The ``alterOffsets`` rules of this app's settings (loaded once per distinct ``offsets.alter.rules``)."""
    return _rules_for(tuple(sorted(get_settings().offsets_alter_rules.items())))


def _alter_offsets(
    name: str, row: Mapping[str, Any], kind: ConnectorType, offsets: Sequence[OffsetPair] | SinkOffsets
) -> bool:
    """The connector class's ``alterOffsets`` (:mod:`connect_state.connect.alter_offsets`): true or false, or
    Connect's refusal as a :class:`ConnectRestException`."""
    try:
        return alter_offsets_rules().alter_offsets(name, row.get("connector_class"), kind, _config(row), offsets)
    except ModifyOffsetsRefused as err:
        log.error("Failed to modify offsets for %s connector %s", kind.value, name, exc_info=err.cause)
        raise ConnectRestException(err.status, err.message) from None


def sink_connector_offsets(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, object]]:
    """``SinkUtils.consumerGroupOffsetsToConnectorOffsets`` over the group's ``sink_offsets`` rows."""
    committed = sorted(
        (row["topic"], row["partition"], row["offset"])
        for row in rows
        if row.get("topic") is not None and row.get("partition") is not None and row.get("offset") is not None
    )
    return [{"partition": sink_partition(t, p), "offset": sink_offset(o)} for t, p, o in committed]


def _json(body: object, status: int = 200) -> Response:
    return Response(jsonconv.dumps(body), status=status, mimetype="application/json")


OFFSETS_ANSWER_COLUMNS = ("offsets_topic", "key", "value", "listed")
"""The ``source_offsets`` columns a ``GET /offsets`` answer is made of (not ``SOURCE_ROW_COLUMNS`` of
:mod:`connect_state.api.fresh`: the rows a reset folds)."""


def _sink_rows(tables: TableSource, group: str) -> list[dict[str, Any]]:
    return tables.rows(SINK_OFFSETS, filters=[("group_id", "=", group)], columns=["topic", "partition", "offset"])


def _source_rows(tables: TableSource, name: str) -> list[dict[str, Any]]:
    return tables.rows(SOURCE_OFFSETS, filters=[("connector", "=", name)], columns=list(OFFSETS_ANSWER_COLUMNS))


SOURCE_BODIES_MAX = 4096
"""At most this many connectors keep their last ``GET /offsets`` body (see :func:`_source_offsets_body`)."""
_source_bodies: dict[tuple[str, ConnectorOffsetStores], tuple[tuple[Any, ...], bytes, list[UnreadableOffset]]] = {}


def _source_offsets_body(
    name: str, stores: ConnectorOffsetStores, rows: tuple[tuple[Any, ...], ...]
) -> tuple[bytes, list[UnreadableOffset]]:
    """The JSON body of a source connector's ``GET /offsets`` from its rows (tuples of
    :data:`OFFSETS_ANSWER_COLUMNS`), and the offsets left out as unreadable. The last body of each connector is kept
    with the rows it came from and served again while they are the same: parsing every key and value of a connector
    with many partitions is most of the answer's cost, and its rows change only when the offsets job commits (issue 11
    §5). One body per connector (replaced when its rows change), at most :data:`SOURCE_BODIES_MAX` connectors.
    """
    kept = _source_bodies.get((name, stores))
    if kept is not None and kept[0] == rows:
        return kept[1], kept[2]
    row_dicts = [dict(zip(OFFSETS_ANSWER_COLUMNS, row, strict=True)) for row in rows]
    entries, unreadable = source_connector_offsets_checked(name, row_dicts, stores)
    body = jsonconv.dumps(connector_offsets(entries))
    if kept is not None or len(_source_bodies) < SOURCE_BODIES_MAX:
        _source_bodies[(name, stores)] = (rows, body, unreadable)
    return body, unreadable


@bp.get("/<connector>/offsets")
def get_connector_offsets(connector: str) -> Response:
    """``GET /connectors/<name>/offsets`` (``ConnectorsResource.getOffsets``)."""
    row = _configured_row(connector)
    config = _config(row)
    tables = get_tables()
    kind, basis = _connector_type(connector, row)
    if kind == ConnectorType.SINK:
        group = connector_consumer_group(connector, config)
        rows = live.sink_rows(group, lambda: _sink_rows(tables, group))
        return _with_type(_json(connector_offsets(sink_connector_offsets(rows))), kind, basis)
    stores = connector_offset_stores(get_settings().offset_storage_topic, config)
    rows = live.source_rows(connector, stores.topics, lambda: _source_rows(tables, connector))
    rows_key = tuple(tuple(row[column] for column in OFFSETS_ANSWER_COLUMNS) for row in rows)
    body, unreadable = _source_offsets_body(connector, stores, rows_key)
    log_unreadable_offsets(connector, unreadable)
    return _with_type(Response(body, status=200, mimetype="application/json"), kind, basis)


# --- modifying ------------------------------------------------------------------------------------------------------


def _request_body() -> object:
    """The PATCH body as Python's ``json.loads`` reads it (what ``formats.offsets`` expects); an empty body is None.

    Ours: invalid JSON is a 400 (Connect: Jackson's 500). NaN and the infinities are refused, as Jackson does.
    """
    data = request.get_data(cache=False)
    if not data.strip():
        return None

    def refuse_constant(name: str) -> object:
        raise ValueError(f"non-standard token '{name}'")

    try:
        return json.loads(data, parse_constant=refuse_constant)
    except (ValueError, UnicodeDecodeError) as err:
        raise ConnectRestException(400, f"Request body is not valid JSON: {err}") from None


def _stopped_connector(name: str) -> ConnectorConfigView:
    """``modifyConnectorOffsetsChecks`` on the config topic read to its end now: 404 unless the connector has a config;
    400 unless STOPPED with no committed tasks. The connector's view (``row``: its ``connectors``-shaped row)."""
    view = fresh_connector(name)
    if not view.exists:
        raise ConnectRestException(404, connector_not_found_message(name))
    if view.target_state != TargetState.STOPPED or view.task_count != 0:
        raise ConnectRestException(400, not_stopped_message(name))
    return view


def _fence_zombie_source_tasks(name: str, view: ConnectorConfigView) -> Mapping[str, Any]:
    """With exactly-once source support enabled (``exactly.once.source.support``), before a source connector's offsets
    change: a round of zombie fencing (:func:`~connect_state.connect.exactly_once.zombie_fencing_ids`), then the
    checks again (``DistributedHerder.modifyConnectorOffsets``). A failed fencing is Connect's 500, plus why and what
    to do; nothing is written. Returns the connector's row as of the last check."""
    settings = get_settings()
    if not settings.exactly_once_source_support.enabled:
        return view.row
    ids = zombie_fencing_ids(settings.connect_group_id, view)
    if not ids:
        log.debug("No zombie fencing needed for source connector %s", name)
        return view.row
    try:
        get_writer().fence_producers(ids, settings.api_kafka_write_timeout_ms)
    except KafkaWriteError as err:
        log.error("%s (connector %s)", ZOMBIE_FENCING_FAILED, name, exc_info=err)
        raise ConnectRestException(500, zombie_fencing_failed_message(name, str(err))) from err
    return _stopped_connector(name).row


def source_timeout_message(name: str, verb: str) -> str:
    """Connect's 500 for a source write not acknowledged in time, then ours: the outcome is unknown, how to find out."""
    return (
        f"{source_modify_timeout_message(name)}. The outcome is unknown: the offsets may still be written. "
        f"GET /connectors/{name}/offsets shows them once the offsets job has caught up; retrying the {verb} is safe "
        "(it writes the same records again)."
    )


def _write_source_offsets(name: str, config: Mapping[str, Any], pairs: list[OffsetPair], verb: str) -> None:
    """``OffsetStorageWriter`` + ``ConnectorOffsetBackingStore.set`` for normalised pairs (spec §4.4); with
    exactly-once source support, the primary store's write is one transaction of task 0's transactional id, begun
    (``initTransactions``) before anything is written."""
    settings = get_settings()
    writer = get_writer()
    timeout_ms = settings.api_kafka_write_timeout_ms
    records = [(offset_key_bytes(name, partition), serialize_offset_value(offset)) for partition, offset in pairs]
    stores = checked_stores(connector_offset_stores(settings.offset_storage_topic, config), settings)
    transaction: OpenTransaction | None = None
    try:
        if settings.exactly_once_source_support.enabled:
            transaction = writer.begin_transaction(
                offsets_transactional_id(settings.connect_group_id, name), timeout_ms
            )
        for write in stores.writes(records):
            try:
                if transaction is not None and write.topic == stores.primary_topic:
                    transaction.commit(write.topic, write.records, timeout_ms)
                else:
                    writer.send(write.topic, write.records, timeout_ms)
            except KafkaWriteError as err:
                if write.best_effort:
                    log.warning("Failed to write offsets of connector %s to secondary backing store: %s", name, err)
                    continue
                raise
    except KafkaWriteError as err:
        log.error("Failed to modify offsets for source connector %s: %s", name, err)
        if isinstance(err, KafkaWriteTimeout) and not isinstance(err, KafkaUnavailableError):
            raise ConnectRestException(500, source_timeout_message(name, verb)) from err
        timed_out = isinstance(err, KafkaWriteTimeout)
        message = source_modify_timeout_message if timed_out else source_modify_failed_message
        raise ConnectRestException(500, message(name)) from err
    finally:
        if transaction is not None:
            transaction.close()


def _modify_source_offsets(name: str, row: Mapping[str, Any], pairs: list[OffsetPair], verb: str) -> bool:
    """Normalise, ``alterOffsets``, write; returns what ``alterOffsets`` returned."""
    config = _config(row)
    try:
        normalized = normalize_source_offsets(pairs)
    except BadOffsetsRequest as err:
        raise ConnectRestException(err.status, err.message) from None
    managed = _alter_offsets(name, row, ConnectorType.SOURCE, normalized)
    if normalized:
        _write_source_offsets(name, config, normalized, verb)
    else:
        log.info("No offsets found for source connector %s", name)
    return managed


def _alter_sink_offsets(name: str, row: Mapping[str, Any], offsets: list[SinkOffset]) -> bool:
    """``Worker.alterSinkConnectorOffsets``: alter the non-null offsets, delete the null ones."""
    group = checked_group(name, connector_consumer_group(name, _config(row)))
    managed = _alter_offsets(name, row, ConnectorType.SINK, {(o.topic, o.partition): o.offset for o in offsets})
    to_alter = {(o.topic, o.partition): o.offset for o in offsets if o.offset is not None}
    to_delete = [(o.topic, o.partition) for o in offsets if o.offset is None]
    admin = get_admin()
    try:
        admin.alter_group_offsets(group, to_alter)
        admin.delete_group_offsets(group, to_delete)
    except GroupNotEmptyError as err:
        log.error("%s", sink_alter_zombie_message(name), exc_info=err)
        raise ConnectRestException(500, sink_alter_zombie_message(name)) from err
    except ConsumerGroupAdminError as err:
        log.error("Failed to alter consumer group offsets for connector %s: %s", name, err)
        raise ConnectRestException(500, sink_alter_failed_message(name)) from err
    return managed


def _reset_sink_offsets(name: str, row: Mapping[str, Any]) -> bool:
    """``Worker.modifySinkConnectorOffsets`` (reset) and ``resetSinkConnectorOffsets``: delete the group."""
    group = checked_group(name, connector_consumer_group(name, _config(row)))
    admin = get_admin()
    try:
        listed = admin.list_group_offsets(group)
    except ConsumerGroupAdminError as err:
        log.error("Failed to list offsets prior to resetting offsets for sink connector %s: %s", name, err)
        raise ConnectRestException(500, sink_list_failed_message(name)) from err
    managed = _alter_offsets(name, row, ConnectorType.SINK, dict.fromkeys(listed))
    try:
        if not admin.delete_group(group):
            log.debug("Consumer group %s of connector %s did not exist: nothing to reset", group, name)
    except GroupNotEmptyError as err:
        log.error("%s", sink_reset_zombie_message(name), exc_info=err)
        raise ConnectRestException(500, sink_reset_zombie_message(name)) from err
    except ConsumerGroupAdminError as err:
        log.error("Failed to reset consumer group offsets for sink connector %s: %s", name, err)
        raise ConnectRestException(500, sink_reset_failed_message(name)) from err
    return managed


@bp.patch("/<connector>/offsets")
def alter_connector_offsets(connector: str) -> Response:
    """``PATCH /connectors/<name>/offsets`` (``ConnectorsResource.alterConnectorOffsets``)."""
    try:
        pairs = parse_offsets_request(_request_body())
    except BadOffsetsRequest as err:
        raise ConnectRestException(400, err.message) from None  # Connect: 500 for Jackson's errors
    view = _stopped_connector(connector)
    row = view.row
    kind, basis = _connector_type(connector, row)
    if kind == ConnectorType.SINK:
        try:
            offsets = parse_sink_offsets(pairs)
        except BadOffsetsRequest as err:
            raise ConnectRestException(err.status, err.message) from None
        managed = _alter_sink_offsets(connector, row, offsets)
    else:
        row = _fence_zombie_source_tasks(connector, view)
        managed = _modify_source_offsets(connector, row, pairs, f"PATCH /connectors/{connector}/offsets")
    return _with_type(jsonify({"message": offsets_success_message("altered", managed)}), kind, basis)


@bp.delete("/<connector>/offsets")
def reset_connector_offsets(connector: str) -> Response:
    """``DELETE /connectors/<name>/offsets`` (``ConnectorsResource.resetConnectorOffsets``)."""
    view = _stopped_connector(connector)
    row = view.row
    kind, basis = _connector_type(connector, row)
    if kind == ConnectorType.SINK:
        managed = _reset_sink_offsets(connector, row)
    else:
        row = _fence_zombie_source_tasks(connector, view)
        settings = get_settings()
        stores = checked_stores(connector_offset_stores(settings.offset_storage_topic, _config(row)), settings)
        rows = fresh_source_rows(connector, stores)
        pairs: list[OffsetPair] = [(partition, None) for partition in listed_partitions(connector, rows)]
        managed = _modify_source_offsets(connector, row, pairs, f"DELETE /connectors/{connector}/offsets")
    return _with_type(jsonify({"message": offsets_success_message("reset", managed)}), kind, basis)
