"""connect_state.connect: Connect's concepts, one home each (vocabularies, connector types, offset stores, FileStream
connectors, REST messages)."""

from __future__ import annotations

import json

import pytest

from connect_state.cleanup.reconciler import source_offsets_topics as cleanup_offsets_topics
from connect_state.connect.alter_offsets import AlterOffsetsRules, ModifyOffsetsRefused
from connect_state.connect.connector_types import (
    config_connector_type,
    is_alias_of,
    names_any,
    plugin_aliases,
    registered_for,
)
from connect_state.connect.filestream import FILE_SINK_CLASS, FILE_SOURCE_CLASS
from connect_state.connect.offset_stores import (
    ConnectorOffsetStores,
    OffsetWrite,
    connector_consumer_group,
    connector_offset_stores,
    connector_offsets_topic,
    offsets_topics,
    source_connector_offsets,
)
from connect_state.connect.rest import (
    active_topics_info,
    connector_state_info,
    error_message,
    http_error_message,
    offsets_success_message,
)
from connect_state.core.vocabulary import ConnectorType, State, TargetState
from connect_state.folds.connector_states import ConnectorState
from connect_state.formats.offsets import offset_key_bytes
from connect_state.formats.status import Status
from connect_state.heartbeats.fold import HeartbeatDefaults, heartbeat_policy

WORKER = "connect-offsets"

# ---------------------------------------------------------------------------------------------------------------------
# Vocabularies
# ---------------------------------------------------------------------------------------------------------------------


def test_vocabularies_are_connects_enums_in_declaration_order() -> None:
    assert tuple(TargetState) == ("STARTED", "PAUSED", "STOPPED")
    assert tuple(State) == ("UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "DESTROYED", "RESTARTING", "STOPPED")
    assert tuple(ConnectorType) == ("source", "sink", "unknown")


def test_members_are_written_as_the_plain_strings() -> None:
    assert json.dumps({"state": State.RUNNING, "type": ConnectorType.SINK}) == '{"state": "RUNNING", "type": "sink"}'
    assert f"target state {TargetState.PAUSED}" == "target state PAUSED"
    assert type(str(ConnectorType.SOURCE)) is str and str(ConnectorType.SOURCE) == "source"


# ---------------------------------------------------------------------------------------------------------------------
# Connector types and aliases
# ---------------------------------------------------------------------------------------------------------------------


def test_plugin_aliases() -> None:
    assert plugin_aliases(FILE_SOURCE_CLASS) == (FILE_SOURCE_CLASS, "FileStreamSourceConnector", "FileStreamSource")
    assert plugin_aliases("Connector") == ("Connector", "Connector", "Connector")
    assert plugin_aliases("a.b.Plain") == ("a.b.Plain", "Plain", "Plain")
    assert is_alias_of("FileStreamSink", FILE_SINK_CLASS)
    assert not is_alias_of("FileStreamSink", FILE_SOURCE_CLASS)
    assert not is_alias_of(None, FILE_SOURCE_CLASS)


def test_config_connector_type_is_an_enum_member() -> None:
    assert config_connector_type({"connector.class": "FileStreamSource"}) is ConnectorType.SOURCE
    assert config_connector_type({"connector.class": "x.Y"}, {"x.Y": "sink"}) is ConnectorType.SINK
    assert config_connector_type(None) is ConnectorType.UNKNOWN
    with pytest.raises(ValueError, match="must be 'source' or 'sink', not 'SINK'"):
        config_connector_type({"connector.class": "a.B"}, {"a.B": "SINK"})


# ---------------------------------------------------------------------------------------------------------------------
# Offset stores (ConnectorOffsetBackingStore)
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, ConnectorOffsetStores(WORKER)),  # withOnlyWorkerStore
        ({"offsets.storage.topic": "  "}, ConnectorOffsetStores(WORKER)),  # blank: none
        ({"offsets.storage.topic": WORKER}, ConnectorOffsetStores(WORKER)),  # withOnlyConnectorStore, same topic
        ({"offsets.storage.topic": f" {WORKER} "}, ConnectorOffsetStores(WORKER)),  # trimmed as ConfigDef does
        ({"offsets.storage.topic": "own"}, ConnectorOffsetStores("own", WORKER)),  # withConnectorAndWorkerStores
    ],
)
def test_connector_offset_stores(config: dict[str, object], expected: ConnectorOffsetStores) -> None:
    assert connector_offset_stores(WORKER, config) == expected


def test_stores_topics_and_value_topic() -> None:
    alone, both = ConnectorOffsetStores(WORKER), ConnectorOffsetStores("own", WORKER)
    assert (alone.topics, alone.value_topic) == ((WORKER,), WORKER)
    assert (both.topics, both.value_topic) == ((WORKER, "own"), "own")
    assert connector_offsets_topic({"offsets.storage.topic": WORKER}) == WORKER  # named, but not another topic


def test_writes_follow_connector_offset_backing_store_set() -> None:
    a, b = (b"a", b'{"position":1}'), (b"b", None)
    assert ConnectorOffsetStores(WORKER).writes([a, b]) == [OffsetWrite(WORKER, [a, b])]
    assert ConnectorOffsetStores("own", WORKER).writes([a, b]) == [
        OffsetWrite(WORKER, [b]),  # tombstones to the worker's topic first
        OffsetWrite("own", [a, b]),  # then everything to the connector's
        OffsetWrite(WORKER, [a], best_effort=True),  # then the regular offsets, a failure only logged
    ]
    assert ConnectorOffsetStores("own", WORKER).writes([a]) == [
        OffsetWrite("own", [a]),
        OffsetWrite(WORKER, [a], best_effort=True),
    ]
    assert ConnectorOffsetStores("own", WORKER).writes([b]) == [OffsetWrite(WORKER, [b]), OffsetWrite("own", [b])]
    assert ConnectorOffsetStores("own", WORKER).writes([]) == []


def test_offsets_topics_of_a_worker() -> None:
    configs = [{}, None, {"offsets.storage.topic": "own"}, {"offsets.storage.topic": WORKER}]
    assert offsets_topics(WORKER, configs) == {WORKER, "own"}


def test_sink_consumer_group() -> None:
    assert connector_consumer_group("s", {}) == "connect-s"
    assert connector_consumer_group("s", {"consumer.override.group.id": "g"}) == "g"


def _running_source(config: dict[str, object]) -> ConnectorState:
    return ConnectorState(
        "src",
        config={"connector.class": FILE_SOURCE_CLASS, "file": "/in", **config},
        connector_status=Status(State.RUNNING, None, "w:8083", 1),
    )


def _source_offsets(config: dict[str, object]) -> list[dict[str, object]]:
    key = offset_key_bytes("src", {"filename": "/in"})
    rows = [
        {"offsets_topic": topic, "key": key, "value": f'{{"position":{n}}}'.encode(), "listed": True}
        for n, topic in enumerate((WORKER, "own"))
    ]
    return source_connector_offsets("src", rows, connector_offset_stores(WORKER, config))


@pytest.mark.parametrize(
    ("config", "topics", "position", "eligible"),
    [
        ({}, [WORKER], 0, True),
        ({"offsets.storage.topic": WORKER}, [WORKER], 0, True),  # the one answer: the worker's store alone
        ({"offsets.storage.topic": "own"}, [WORKER, "own"], 1, True),  # KIP-910: committed to both, Connect's order
    ],
)
def test_own_topic_equal_to_the_workers_has_one_answer_everywhere(
    config: dict[str, object], topics: list[str], position: int, eligible: bool
) -> None:
    """Connect (``Worker.offsetStoreForRegularSourceConnector``, ``sameOffsetTopicAsWorker``) treats a
    connector-specific topic equal to the worker's as one store on that topic: the API reads its values from it, the
    cleanup tombstones it once, and heartbeats treat the connector as one without an own topic."""
    assert cleanup_offsets_topics(WORKER, config) == topics
    assert _source_offsets(config) == [{"partition": {"filename": "/in"}, "offset": {"position": position}}]
    policy = heartbeat_policy(_running_source(config), HeartbeatDefaults(1000, "hb", WORKER))
    assert policy.eligible is eligible
    if not eligible:
        assert policy.reason == "connector-specific offsets.storage.topic is not supported"


def test_heartbeats_without_the_workers_topic_refuse_any_own_topic() -> None:
    policy = heartbeat_policy(_running_source({"offsets.storage.topic": WORKER}), HeartbeatDefaults(1000, "hb"))
    assert policy.reason == "connector-specific offsets.storage.topic is not supported"


# ---------------------------------------------------------------------------------------------------------------------
# FileStream connectors' alterOffsets
# ---------------------------------------------------------------------------------------------------------------------

_FILE = {"file": "/in"}


@pytest.mark.parametrize(
    ("config", "pairs", "message"),
    [
        ({}, [], "Offsets cannot be modified if the 'file' configuration is unspecified."),
        ({"file": " \t"}, [], "Offsets cannot be modified if the 'file' configuration is unspecified."),
        (
            _FILE,
            [({"filename": "/in"}, {"x": 1})],
            "Offset objects should either be null or contain the key 'position'",
        ),
        (_FILE, [({"filename": "/in"}, {"position": "1"})], "key in the offset is expected to be a Long value"),
        (_FILE, [({"filename": "/in"}, {"position": True})], "key in the offset is expected to be a Long value"),
        (_FILE, [({"filename": "/in"}, {"position": -1})], "key in the offset should be a non-negative value"),
        (_FILE, [(None, {"position": 1})], "Partition objects cannot be null"),
        (_FILE, [({"file": "/in"}, {"position": 1})], "Partition objects should contain the key 'filename'"),
    ],
)
def test_file_stream_source_alter_offsets_refuses(config: dict[str, object], pairs: list, message: str) -> None:
    with pytest.raises(ModifyOffsetsRefused) as caught:
        AlterOffsetsRules().alter_offsets("c", "FileStreamSource", ConnectorType.SOURCE, config, pairs)
    assert caught.value.status == 500
    assert message in caught.value.message


def test_alter_offsets_of_known_and_other_connectors() -> None:
    rules = AlterOffsetsRules()
    pairs = [({"filename": "/in"}, {"position": 3}), ({"anything": 1}, None)]
    assert rules.alter_offsets("c", FILE_SOURCE_CLASS, ConnectorType.SOURCE, _FILE, pairs) is True
    assert rules.alter_offsets("c", "org.example.Other", ConnectorType.SOURCE, {}, [(None, {"x": 1})]) is False
    assert rules.alter_offsets("c", "FileStreamSinkConnector", ConnectorType.SINK, {}, {("t", 0): 1}) is True
    assert rules.alter_offsets("c", "org.example.OtherSink", ConnectorType.SINK, {}, {}) is False
    assert rules.alter_offsets("c", None, ConnectorType.SINK, {}, {}) is False


# ---------------------------------------------------------------------------------------------------------------------
# REST messages and bodies
# ---------------------------------------------------------------------------------------------------------------------


def test_rest_bodies() -> None:
    assert list(error_message(404, "x")) == ["error_code", "message"]
    assert http_error_message(405, "Method Not Allowed") == "HTTP 405 Method Not Allowed"
    assert active_topics_info("c", ["a", "b"]) == {"c": {"topics": ["a", "b"]}}
    assert offsets_success_message("reset", True) == "The offsets for this connector have been reset successfully"
    row = {
        "name": "c",
        "type": ConnectorType.SOURCE,
        "connector_state": State.RUNNING,
        "connector_worker_id": "w",
        "connector_trace": None,
        "connector_version": None,
        "tasks": [],
    }
    assert json.dumps(connector_state_info(row), separators=(",", ":")) == (
        '{"name":"c","connector":{"state":"RUNNING","worker_id":"w","version":null},"tasks":[],"type":"source"}'
    )


@pytest.mark.parametrize(
    ("connector_class", "expected"),
    [
        ("org.apache.kafka.connect.file.FileStreamSourceConnector", "exact"),
        ("FileStreamSourceConnector", "by-alias"),
        ("FileStreamSource", "by-alias"),
        ("FileStreamSink", None),
        (None, None),
    ],
)
def test_registered_for_finds_an_entry_by_class_or_alias_of_either_side(connector_class, expected) -> None:
    registry = {"org.apache.kafka.connect.file.FileStreamSourceConnector": "exact"}
    found = registered_for(registry, connector_class)
    assert (found is not None) == (expected is not None)
    assert names_any(connector_class, registry) == (expected is not None)
    # registered under an alias, looked up by the full name
    assert registered_for({"FileStreamSource": 1}, "org.apache.kafka.connect.file.FileStreamSourceConnector") == 1
