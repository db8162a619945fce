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
  ``{"message": ...}``: the body (PATCH) is parsed here: what Jackson cannot bind to ``ConnectorOffsets`` (and a
  ``null`` entry) is a **400** here with Jackson's message, where Connect answers 500 (a deliberate, documented
  difference); invalid JSON likewise; then a missing, null or empty ``offsets`` is 400 ``"Partitions / offsets need
  to be provided for an alter offsets request"`` (before the connector's existence, as in ``ConnectorsResource``).
  Everything else, in Connect's order, is the herder's (:mod:`connect_state.herder.offsets`: the STOPPED check on the
  config topic read to its end, the connector type, the sink and source checks, the ``alterOffsets`` rules, zombie
  fencing and the transaction with exactly-once source support, the writes and their failures).

  Whether the connector is a source or a sink comes from its class (``connector.class.types``, then Kafka's own
  classes); only for an unknown class is it guessed from the config, and the answer then carries
  ``X-Connect-State-Connector-Type: <type>; basis=guessed-from-config``.

* ``POST /connectors/<name>/offsets/restore?at=<t>[&apply=true]`` (ours, issue 36) -> 200
  ``{"connector", "at", "applied", "message", "offsets": [{"partition", "current", "restored", "change"}]}``: the
  difference between the offsets now and as of ``at`` (epoch ms or ISO-8601, required), per partition; a dry run
  unless ``apply=true``, which writes it as a PATCH would, with PATCH's checks (the herder's:
  :mod:`connect_state.herder.restore`). A missing or bad ``at`` or ``apply`` is a 400 before anything else; ``at``
  before the history kept for the connector a 400 saying from when it is kept. The audit row's ``message`` names the
  time restored to.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from flask import Blueprint, Response, g, jsonify, request

from connect_state.api import live
from connect_state.api.args import time_arg
from connect_state.api.errors import ConnectRestException
from connect_state.api.herder_io import get_herder
from connect_state.api.offsets_history import TablesOffsetsHistory
from connect_state.api.openapi import (
    ANY,
    BOOLEAN,
    INT,
    STRING,
    TIME,
    array_of,
    documented,
    json_answer,
    obj,
    query,
    ref,
)
from connect_state.api.resources import TableSource, get_settings, get_tables
from connect_state.api.rows import configured_row
from connect_state.connect.connector_types import TypeBasis
from connect_state.connect.offset_stores import (
    ConnectorOffsetStores,
    UnreadableOffset,
    connector_consumer_group,
    connector_offset_stores,
    log_unreadable_offsets,
    source_connector_offsets_checked,
)
from connect_state.connect.rest import connector_offsets
from connect_state.core.vocabulary import ConnectorType
from connect_state.formats import jsonconv
from connect_state.formats.offsets import BadOffsetsRequest, parse_offsets_request, sink_offset, sink_partition
from connect_state.herder import OffsetsChange, OffsetsRestore, row_config
from connect_state.tables.schemas import SINK_OFFSETS, SOURCE_OFFSETS, iso_utc

bp = Blueprint("offsets", __name__, url_prefix="/connectors")


#: Ours: on an offsets answer whose connector type was not taken from the class, ``<type>; basis=<how>``.
CONNECTOR_TYPE_HEADER = "X-Connect-State-Connector-Type"


def _with_type(response: Response, kind: ConnectorType, basis: TypeBasis) -> Response:
    if basis == TypeBasis.GUESSED:
        response.headers[CONNECTOR_TYPE_HEADER] = f"{kind.value}; basis={basis.value}"
    return response


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
@documented("KIP-875 offsets", {"200": json_answer(ref("ConnectorOffsets"), "ConnectorOffsets")}, 400, 404)
def get_connector_offsets(connector: str) -> Response:
    """``GET /connectors/<name>/offsets`` (``ConnectorsResource.getOffsets``)."""
    row = configured_row(connector)
    config = row_config(row)
    tables = get_tables()
    kind, basis = get_herder().connector_type(connector, row)
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


# --- modifying: parse -> herder -> render ----------------------------------------------------------------------


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


def _answer(change: OffsetsChange) -> Response:
    return _with_type(jsonify({"message": change.message}), change.kind, change.basis)


@bp.patch("/<connector>/offsets")
@documented(
    "KIP-875 alter offsets",
    {"200": json_answer(ref("Message"), "Altered")},
    400,
    404,
    409,
    500,  # Connect's, when the connector's alterOffsets refuses them (a ConnectException)
    body={"type": "object"},
)
def alter_connector_offsets(connector: str) -> Response:
    """``PATCH /connectors/<name>/offsets`` (``ConnectorsResource.alterConnectorOffsets``)."""
    try:
        pairs = parse_offsets_request(_request_body())
    except BadOffsetsRequest as err:
        raise ConnectRestException(400, err.message) from None  # Connect: 500 for Jackson's errors
    return _answer(get_herder().alter_connector_offsets(connector, pairs))


@bp.delete("/<connector>/offsets")
@documented("KIP-875 reset offsets", {"200": json_answer(ref("Message"), "Reset")}, 400, 404, 409, 500)
def reset_connector_offsets(connector: str) -> Response:
    """``DELETE /connectors/<name>/offsets`` (``ConnectorsResource.resetConnectorOffsets``)."""
    return _answer(get_herder().reset_connector_offsets(connector))


# --- restore as of a time (ours) ------------------------------------------------------------------------------------


def _apply_arg() -> bool:
    """``apply``: ``true`` or ``false`` (any case; absent: false); anything else a 400 (a write is never guessed)."""
    text = request.args.get("apply")
    if text is None or text.lower() == "false":
        return False
    if text.lower() == "true":
        return True
    raise ConnectRestException(400, f"Invalid apply {text!r}: expected true or false")


def _restore_answer(connector: str, restore: OffsetsRestore) -> Response:
    body = {
        "connector": connector,
        "at": restore.at,
        "applied": restore.applied,
        "message": restore.message,
        "offsets": [partition.as_json() for partition in restore.partitions],
    }
    return _with_type(_json(body), restore.kind, restore.basis)


RESTORE_ANSWER = obj(
    connector=STRING,
    at=INT,
    applied=BOOLEAN,
    message=STRING,
    offsets=array_of(obj(partition={"type": "object"}, current=ANY, restored=ANY, change=STRING)),
)


@bp.post("/<connector>/offsets/restore")
@documented(
    "Restore the offsets as of a time (dry run unless apply=true)",
    {"200": json_answer(RESTORE_ANSWER, "The difference per partition, and whether it was written")},
    400,
    404,
    409,
    500,  # as PATCH's: the connector's alterOffsets refused them
    params=[
        query("at", TIME, required=True),
        query("apply", {"type": "boolean", "default": False}, description="write the difference (STOPPED only)"),
    ],
)
def restore_connector_offsets(connector: str) -> Response:
    """The offsets as of ``at`` against those now; written with ``apply=true`` (see the module)."""
    at = time_arg("at")
    if at is None:
        raise ConnectRestException(400, "The at parameter is required: epoch milliseconds or an ISO-8601 time")
    apply = _apply_arg()
    g.audit_note = f"offsets restore to {iso_utc(at)} ({at}){'' if apply else ', dry run'}"
    return _restore_answer(
        connector, get_herder().restore_connector_offsets(connector, at, TablesOffsetsHistory(), apply)
    )
