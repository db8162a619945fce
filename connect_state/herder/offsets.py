"""KIP-875 offsets alter (``PATCH``) and reset (``DELETE``) as Connect's herder decides them (spec §4.4, §5.4).

``DistributedHerder.modifyConnectorOffsets`` and ``Worker.modifySourceConnectorOffsets`` /
``modifySinkConnectorOffsets``, in Connect's order:

1. 404 ``"Connector <name> not found"`` unless the config topic read to its end has the connector; 400
   :func:`~connect_state.connect.rest.not_stopped_message` unless its target state is STOPPED with no committed tasks
   (``modifyConnectorOffsetsChecks``; PAUSED is refused too);
2. its type from its class (``connector.class.types``, then Kafka's own classes), guessed from the config only for an
   unknown class (:class:`OffsetsChange` says so); a type that cannot be told is a 500;
3. sink: ``SinkUtils.parseSinkConnectorOffsets`` (400s); source: with ``exactly.once.source.support=enabled``
   (KIP-618, :mod:`connect_state.connect.exactly_once`) a round of zombie fencing and the checks of 1. again (a
   failed fencing is Connect's 500, nothing written), then ``OffsetUtils.validateFormat`` (500s);
4. the connector class's ``alterOffsets`` rule (:mod:`connect_state.connect.alter_offsets`): a
   ``BadRequestException`` is a 400, anything else it raises a 500 with Connect's message;
5. the writes: sink offsets through the consumer-group admin (non-null offsets altered, null ones deleted; a reset
   deletes the group, a missing group counting as success), in a group :func:`~connect_state.security.guards.
   check_consumer_group` lets through; source offsets as offsets-topic records (``ConnectorOffsetBackingStore.set``:
   :meth:`~connect_state.connect.offset_stores.ConnectorOffsetStores.writes`, in topics
   :func:`~connect_state.security.guards.
   checked_stores` lets through), the primary store's write one transaction of task 0's transactional id with
   exactly-once support. A reset tombstones every partition listed as of the offsets topics' end offsets now;
6. :func:`~connect_state.connect.rest.offsets_success_message`: the short form when ``alterOffsets`` returned true.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from connect_state.connect.alter_offsets import AlterOffsetsRules, ModifyOffsetsRefused, SinkOffsets
from connect_state.connect.connector_types import TypeBasis, connector_type_basis
from connect_state.connect.exactly_once import offsets_transactional_id, zombie_fencing_ids
from connect_state.connect.offset_stores import connector_consumer_group, connector_offset_stores, listed_partitions
from connect_state.connect.plugins import load_alter_offsets_rules
from connect_state.connect.rest import (
    ZOMBIE_FENCING_FAILED,
    connector_not_found_message,
    modify_offsets_failed_message,
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
from connect_state.core.deadlines import DeadlineRunner, PluginTimeout
from connect_state.core.errors import (
    ConsumerGroupAdminError,
    GroupNotEmptyError,
    KafkaUnavailableError,
    KafkaWriteError,
    KafkaWriteTimeout,
)
from connect_state.core.vocabulary import ConnectorType, TargetState
from connect_state.folds.config_snapshot import ConnectorConfigView
from connect_state.formats.offsets import (
    BadOffsetsRequest,
    OffsetPair,
    SinkOffset,
    normalize_source_offsets,
    offset_key_bytes,
    parse_sink_offsets,
    serialize_offset_value,
)
from connect_state.herder.base import HerderBase
from connect_state.herder.errors import BadRequestError, ConnectError, PluginDeadlineError, for_status
from connect_state.herder.io import OpenTransaction
from connect_state.security.guards import (
    GroupEvidence,
    GuardRefusal,
    check_consumer_group,
    checked_stores,
    reserved_groups,
)

log = logging.getLogger("connect_state.herder")

Row = Mapping[str, Any]
Verb = Literal["altered", "reset"]


def unknown_type_message(name: str, connector_class: object) -> str:
    """Ours: 500 when the connector's type is unknown (Connect fails to load the plugin class and answers 500)."""
    return f"Cannot tell whether connector {name} is a source or a sink connector (class {connector_class})"


def source_timeout_message(name: str, verb: str) -> str:
    """Connect's 500 for a source write not acknowledged in time, then ours: the outcome is unknown, how to find out."""
    return (
        f"{source_modify_timeout_message(name)}. The outcome is unknown: the offsets may still be written. "
        f"GET /connectors/{name}/offsets shows them once the offsets job has caught up; retrying the {verb} is safe "
        "(it writes the same records again)."
    )


def row_config(row: Row) -> dict[str, Any]:
    """The config of a ``connectors``-shaped row (``{}`` when it has none, or not a JSON object)."""
    try:
        config = json.loads(row["config"])
    except (TypeError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


@functools.lru_cache(maxsize=8)
def _rules_for(paths: tuple[tuple[str, str], ...]) -> AlterOffsetsRules:
    return load_alter_offsets_rules(dict(paths))


@functools.lru_cache(maxsize=4)
def _deadlines(timeout_ms: int) -> DeadlineRunner:
    """The process's runner of ``alterOffsets`` rules (``offsets.alter.timeout.ms``): shared by the request threads,
    so a rule that hung holds one thread, not one per request."""
    return DeadlineRunner(timeout_ms, "offsets.alter.timeout.ms")


@dataclass(frozen=True)
class OffsetsChange:
    """What an alter or reset did: the connector's type and how it was told, and what ``alterOffsets`` returned."""

    verb: Verb
    kind: ConnectorType
    basis: TypeBasis
    managed: bool

    @property
    def message(self) -> str:
        return offsets_success_message(self.verb, self.managed)


class OffsetsHerder(HerderBase):
    """The offsets writes (``PATCH`` and ``DELETE /connectors/<name>/offsets``)."""

    def connector_type(self, name: str, row: Row) -> tuple[ConnectorType, TypeBasis]:
        """The connector's type from its class, guessed from its config only for an unknown class (logged);
        :class:`ConnectError` when it is neither a source nor a sink."""
        connector_class = row.get("connector_class")
        try:
            kind, basis = connector_type_basis(row_config(row), self.settings.connector_class_types)
        except ValueError as err:
            raise ConnectError(f"{unknown_type_message(name, connector_class)}: {err}") from None
        if kind not in (ConnectorType.SOURCE, ConnectorType.SINK):
            raise ConnectError(unknown_type_message(name, connector_class))
        if basis == TypeBasis.GUESSED:
            log.warning(
                "Connector %s: class %s is neither one of Kafka's nor in connector.class.types; taken for a %s "
                "connector from its config",
                name,
                connector_class,
                kind.value,
            )
        return kind, basis

    def alter_connector_offsets(self, name: str, pairs: list[OffsetPair]) -> OffsetsChange:
        """``herder.alterConnectorOffsets`` for the request's pairs (parsed, not empty)."""
        view = self._stopped(name)
        kind, basis = self.connector_type(name, view.row)
        if kind == ConnectorType.SINK:
            managed = self._alter_sink_offsets(name, view.row, pairs)
        else:
            row = self._fenced(name, view)
            managed = self._modify_source_offsets(name, row, pairs, f"PATCH /connectors/{name}/offsets")
        return OffsetsChange("altered", kind, basis, managed)

    def reset_connector_offsets(self, name: str) -> OffsetsChange:
        """``herder.resetConnectorOffsets``."""
        view = self._stopped(name)
        kind, basis = self.connector_type(name, view.row)
        if kind == ConnectorType.SINK:
            managed = self._reset_sink_offsets(name, view.row)
        else:
            row = self._fenced(name, view)
            stores = checked_stores(
                connector_offset_stores(self.settings.offset_storage_topic, row_config(row)), self.settings
            )
            listed = listed_partitions(name, self.io.source_rows(name, stores))
            pairs: list[OffsetPair] = [(partition, None) for partition in listed]
            managed = self._modify_source_offsets(name, row, pairs, f"DELETE /connectors/{name}/offsets")
        return OffsetsChange("reset", kind, basis, managed)

    # --- checks ------------------------------------------------------------------------------------------------------

    def _stopped(self, name: str) -> ConnectorConfigView:
        """``modifyConnectorOffsetsChecks`` on the config topic read to its end now."""
        view = self._configured(name, connector_not_found_message)
        if view.target_state != TargetState.STOPPED or view.task_count != 0:
            raise BadRequestError(not_stopped_message(name))
        return view

    def _fenced(self, name: str, view: ConnectorConfigView) -> Row:
        """With exactly-once source support, a round of zombie fencing (:func:`~connect_state.connect.exactly_once.
        zombie_fencing_ids`), then the checks again; a failed fencing is Connect's 500 plus why, nothing written.
        Returns the connector's row as of the last check."""
        settings = self.settings
        if not settings.exactly_once_source_support.enabled:
            return view.row
        ids = zombie_fencing_ids(settings.connect_group_id, view)
        if not ids:
            log.debug("No zombie fencing needed for source connector %s", name)
            return view.row
        try:
            self.io.writer().fence_producers(ids, settings.api_kafka_write_timeout_ms)
        except KafkaWriteError as err:
            log.error("%s (connector %s)", ZOMBIE_FENCING_FAILED, name, exc_info=err)
            raise ConnectError(zombie_fencing_failed_message(name, str(err))) from err
        return self._stopped(name).row

    def _alter_offsets(
        self, name: str, row: Row, kind: ConnectorType, offsets: Sequence[OffsetPair] | SinkOffsets
    ) -> bool:
        """The connector class's ``alterOffsets`` rule: true or false, or Connect's refusal."""
        rules = _rules_for(tuple(sorted(self.settings.offsets_alter_rules.items())))
        deadlines = _deadlines(self.settings.offsets_alter_timeout_ms)
        try:
            return rules.alter_offsets(name, row.get("connector_class"), kind, row_config(row), offsets, deadlines)
        except ModifyOffsetsRefused as err:
            log.error("Failed to modify offsets for %s connector %s", kind.value, name, exc_info=err.cause)
            raise for_status(err.status, err.message) from None
        except PluginTimeout as err:
            log.error("Failed to modify offsets for %s connector %s: %s", kind.value, name, err)
            raise PluginDeadlineError(f"{modify_offsets_failed_message(name, kind)}: the {err}") from err

    def _checked_group(self, name: str, row: Row) -> str:
        """The connector's consumer group when its offsets may be altered or deleted there
        (:func:`~connect_state.security.guards.check_consumer_group`): the tables are asked only for a group that is
        neither the default one nor allow-listed."""
        group = connector_consumer_group(name, row_config(row))
        allowed, reserved = self.settings.api_allowed_groups, reserved_groups(self.settings)
        try:
            return check_consumer_group(name, group, allowed, reserved=reserved)
        except GuardRefusal:
            committed = self.io.committed_topics(group)
            topics = set(self.io.active_topics(name)) if committed else set()
            others = self.io.connector_names() - {name}
            evidence = GroupEvidence(frozenset(committed), frozenset(topics), frozenset(others))
            return check_consumer_group(name, group, allowed, evidence, reserved=reserved)

    # --- sink connectors ---------------------------------------------------------------------------------------------

    def _alter_sink_offsets(self, name: str, row: Row, pairs: list[OffsetPair]) -> bool:
        """``Worker.alterSinkConnectorOffsets``: alter the non-null offsets, delete the null ones."""
        try:
            offsets = parse_sink_offsets(pairs)
        except BadOffsetsRequest as err:
            raise for_status(err.status, err.message) from None
        group = self._checked_group(name, row)
        managed = self._alter_offsets(
            name, row, ConnectorType.SINK, {(o.topic, o.partition): o.offset for o in offsets}
        )
        self._write_sink_offsets(name, group, offsets)
        return managed

    def _write_sink_offsets(self, name: str, group: str, offsets: Sequence[SinkOffset]) -> None:
        """The group's non-null offsets altered, its null ones deleted (the group must have no members)."""
        admin = self.io.admin()
        try:
            admin.alter_group_offsets(
                group, {(o.topic, o.partition): o.offset for o in offsets if o.offset is not None}
            )
            admin.delete_group_offsets(group, [(o.topic, o.partition) for o in offsets if o.offset is None])
        except GroupNotEmptyError as err:
            log.error("%s", sink_alter_zombie_message(name), exc_info=err)
            raise ConnectError(sink_alter_zombie_message(name)) from err
        except ConsumerGroupAdminError as err:
            log.error("Failed to alter consumer group offsets for connector %s: %s", name, err)
            raise ConnectError(sink_alter_failed_message(name)) from err

    def _reset_sink_offsets(self, name: str, row: Row) -> bool:
        """``Worker.modifySinkConnectorOffsets`` (reset) and ``resetSinkConnectorOffsets``: delete the group."""
        group = self._checked_group(name, row)
        admin = self.io.admin()
        try:
            listed = admin.list_group_offsets(group)
        except ConsumerGroupAdminError as err:
            log.error("Failed to list offsets prior to resetting offsets for sink connector %s: %s", name, err)
            raise ConnectError(sink_list_failed_message(name)) from err
        managed = self._alter_offsets(name, row, ConnectorType.SINK, dict.fromkeys(listed))
        try:
            if not admin.delete_group(group):
                log.debug("Consumer group %s of connector %s did not exist: nothing to reset", group, name)
        except GroupNotEmptyError as err:
            log.error("%s", sink_reset_zombie_message(name), exc_info=err)
            raise ConnectError(sink_reset_zombie_message(name)) from err
        except ConsumerGroupAdminError as err:
            log.error("Failed to reset consumer group offsets for sink connector %s: %s", name, err)
            raise ConnectError(sink_reset_failed_message(name)) from err
        return managed

    # --- source connectors -------------------------------------------------------------------------------------------

    def _modify_source_offsets(self, name: str, row: Row, pairs: list[OffsetPair], verb: str) -> bool:
        """Normalise, ``alterOffsets``, write; returns what ``alterOffsets`` returned."""
        try:
            normalized = normalize_source_offsets(pairs)
        except BadOffsetsRequest as err:
            raise for_status(err.status, err.message) from None
        managed = self._alter_offsets(name, row, ConnectorType.SOURCE, normalized)
        if normalized:
            self._write_source_offsets(name, row_config(row), normalized, verb)
        else:
            log.info("No offsets found for source connector %s", name)
        return managed

    def _write_source_offsets(self, name: str, config: Row, pairs: list[OffsetPair], verb: str) -> None:
        """``OffsetStorageWriter`` + ``ConnectorOffsetBackingStore.set`` for normalised pairs (spec §4.4); with
        exactly-once source support, the primary store's write is one transaction of task 0's transactional id, begun
        (``initTransactions``) before anything is written."""
        settings = self.settings
        records = [(offset_key_bytes(name, partition), serialize_offset_value(offset)) for partition, offset in pairs]
        stores = checked_stores(connector_offset_stores(settings.offset_storage_topic, config), settings)
        transaction: OpenTransaction | None = None
        try:
            if settings.exactly_once_source_support.enabled:
                transactional_id = offsets_transactional_id(settings.connect_group_id, name)
                transaction = self.io.writer().begin_transaction(transactional_id, settings.api_kafka_write_timeout_ms)
            for write in stores.writes(records):
                try:
                    self._write(
                        write.topic, write.records, transaction if write.topic == stores.primary_topic else None
                    )
                except KafkaWriteError as err:
                    if not write.best_effort:
                        raise
                    log.warning("Failed to write offsets of connector %s to secondary backing store: %s", name, err)
        except KafkaWriteError as err:
            log.error("Failed to modify offsets for source connector %s: %s", name, err)
            raise ConnectError(_source_failure_message(name, verb, err)) from err
        finally:
            if transaction is not None:
                transaction.close()

    def _write(
        self, topic: str, records: Sequence[tuple[bytes, bytes | None]], transaction: OpenTransaction | None
    ) -> None:
        timeout_ms = self.settings.api_kafka_write_timeout_ms
        if transaction is not None:
            transaction.commit(topic, records, timeout_ms)
        else:
            self.io.writer().send(topic, records, timeout_ms)


def _source_failure_message(name: str, verb: str, err: KafkaWriteError) -> str:
    """Connect's 500 for a failed source write; a timeout (Kafka reached) says the outcome is unknown."""
    if isinstance(err, KafkaUnavailableError):
        return source_modify_timeout_message(name)
    if isinstance(err, KafkaWriteTimeout):
        return source_timeout_message(name, verb)
    return source_modify_failed_message(name)
