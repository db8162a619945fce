"""KIP-875 ``alterOffsets`` rules: the plug-in point (connect_state.connect.alter_offsets), the MirrorMaker 2 rules
(connect_state.connect.mirror_maker), the connector type from the class, and the API's use of them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from connect_state.connect.alter_offsets import (
    AlterOffsetsRules,
    ModifyOffsetsRefused,
    as_rule,
    java_map_order,
)
from connect_state.connect.connector_types import TypeBasis, connector_type_basis
from connect_state.connect.mirror_maker import (
    MIRROR_CHECKPOINT_CLASS,
    MIRROR_HEARTBEAT_CLASS,
    MIRROR_SOURCE_CLASS,
)
from connect_state.connect.plugins import PluginError, load_alter_offsets_rules
from connect_state.connect.rest import modify_offsets_failed_message, modify_offsets_unsupported_message
from connect_state.core.errors import AlterOffsetsBadRequest, AlterOffsetsRejected, AlterOffsetsUnsupported
from connect_state.core.vocabulary import ConnectorType
from connect_state.formats.javalang import java_hash_code

SOURCE = ConnectorType.SOURCE
SINK = ConnectorType.SINK
OK_SOURCE = {"cluster": "east", "topic": "orders", "partition": 0}


def refusal(connector_class: str, pairs: list[Any], kind: ConnectorType = SOURCE) -> tuple[int, str]:
    with pytest.raises(ModifyOffsetsRefused) as caught:
        AlterOffsetsRules().alter_offsets("mm", connector_class, kind, {}, pairs)
    return caught.value.status, caught.value.message


# --- Java hash codes and the HashMap order Connect hands offsets over in -------------------------------------------


def test_java_hash_codes() -> None:
    assert java_hash_code(None) == 0
    assert java_hash_code("a") == 97
    assert java_hash_code(True) == 1231 and java_hash_code(False) == 1237
    assert java_hash_code(5) == 5
    assert java_hash_code(-1) == 0  # Long.hashCode(-1) = (int)(-1 ^ (-1 >>> 32)) = 0
    assert java_hash_code(2**32) == 1
    assert java_hash_code(1.0) == 1072693248  # Double.hashCode(1.0)
    assert java_hash_code({"a": 1}) == 97 ^ 1
    assert java_hash_code([1, 2]) == 31 * (31 * 1 + 1) + 2


def test_java_map_order_buckets_by_partition_hash() -> None:
    # {"p": n}.hashCode() = 112 ^ n: bucket (spread & 15); request order within a bucket.
    pairs = [({"p": n}, {"o": n}) for n in (3, 1, 2)]
    order = [p[0]["p"] for p in java_map_order(pairs)]
    assert order == sorted((3, 1, 2), key=lambda n: (112 ^ n) & 15)
    assert java_map_order([(None, None)]) == [(None, None)]


def test_java_map_order_goes_through_jacksons_integers_then_connects_longs() -> None:
    # What the real worker refused first for this request (tests/integration/test_mirror_offsets_connect.py): t5.
    # Integer.hashCode(-i) = -i puts t5 and t6 before t1 and t2 in ConnectorOffsets.toMap's map; Long.hashCode(-i)
    # = i - 1 then puts all four in one bucket of the normalised map, in that insertion order.
    pairs = [({"cluster": "east", "topic": f"t{i}", "partition": -i}, {"offset": i}) for i in range(1, 7)]
    assert [p[0]["topic"] for p in java_map_order(pairs) if p[0]] == ["t5", "t6", "t1", "t2", "t3", "t4"]
    assert java_hash_code(-1) == 0 and java_hash_code(-1, ints_as_integer=True) == -1


# --- MirrorMaker 2 ---------------------------------------------------------------------------------------------------


def test_mirror_source_accepts_valid_offsets_and_tombstones() -> None:
    rules = AlterOffsetsRules()
    assert rules.alter_offsets("mm", MIRROR_SOURCE_CLASS, SOURCE, {}, [(OK_SOURCE, {"offset": 12})]) is True
    assert rules.alter_offsets("mm", "MirrorSource", SOURCE, {}, [({"junk": 1}, None), (None, None)]) is True
    # a long below Integer.MIN_VALUE whose intValue() is positive passes, as in Java
    assert rules.alter_offsets(
        "mm", MIRROR_SOURCE_CLASS, SOURCE, {}, [({**OK_SOURCE, "partition": -3000000000}, {"offset": 0})]
    )


@pytest.mark.parametrize(
    ("partition", "offset", "message"),
    [
        (None, {"offset": 1}, "Source partitions may not be null"),
        (
            {"topic": "orders", "partition": 0},
            {"offset": 1},
            "Source partition {partition=0, topic=orders} is missing the 'cluster' key, which is required",
        ),
        (
            {**OK_SOURCE, "cluster": 7},
            {"offset": 1},
            "Source partition {cluster=7, partition=0, topic=orders} has an invalid value 7 for the 'cluster' key, "
            "which must be a string",
        ),
        (
            {**OK_SOURCE, "partition": "0"},
            {"offset": 1},
            "Source partition {cluster=east, partition=0, topic=orders} has an invalid value 0 for the 'partition' "
            "key, which must be an integer",
        ),
        (
            {**OK_SOURCE, "partition": 2**31},
            {"offset": 1},
            "has an invalid value 2147483648 for the 'partition' key, which must be an integer",
        ),
        ({**OK_SOURCE, "partition": 1.5}, {"offset": 1}, "invalid value 1.5 for the 'partition' key, which must be"),
        ({**OK_SOURCE, "partition": True}, {"offset": 1}, "invalid value true for the 'partition' key, which must be"),
        ({**OK_SOURCE, "partition": -1}, {"offset": 1}, "invalid value -1 for the 'partition' key, which cannot be"),
        (
            OK_SOURCE,
            {"position": 1},
            "Source offset {position=1} for source partition {cluster=east, partition=0, topic=orders} is missing "
            "the 'offset' key, which is required",
        ),
        (OK_SOURCE, {"offset": "1"}, "has an invalid value 1 for the 'offset' key, which must be an integer"),
        (OK_SOURCE, {"offset": -1}, "has an invalid value -1 for the 'offset' key, which cannot be negative"),
    ],
)
def test_mirror_source_refusals(partition: Any, offset: Any, message: str) -> None:
    status, text = refusal(MIRROR_SOURCE_CLASS, [(partition, offset)])
    assert status == 500
    assert message in text


def test_mirror_checkpoint_and_heartbeat_only_accept_offset_zero() -> None:
    checkpoint = {"group": "g", "topic": "t", "partition": 1}
    heartbeat = {"sourceClusterAlias": "a", "targetClusterAlias": "b"}
    rules = AlterOffsetsRules()
    assert rules.alter_offsets("mm", MIRROR_CHECKPOINT_CLASS, SOURCE, {}, [(checkpoint, {"offset": 0})]) is True
    assert rules.alter_offsets("mm", MIRROR_HEARTBEAT_CLASS, SOURCE, {}, [(heartbeat, {"offset": 0})]) is True
    status, text = refusal(MIRROR_CHECKPOINT_CLASS, [(checkpoint, {"offset": 3})])
    assert (status, text.endswith("for the 'offset' key; the only accepted value is 0")) == (500, True)
    assert "missing the 'group' key" in refusal(MIRROR_CHECKPOINT_CLASS, [({"topic": "t"}, {"offset": 0})])[1]
    assert (
        "missing the 'targetClusterAlias' key"
        in refusal(MIRROR_HEARTBEAT_CLASS, [({"sourceClusterAlias": "a"}, {"offset": 0})])[1]
    )
    # heartbeats have no partition key to check
    assert rules.alter_offsets(
        "mm", MIRROR_HEARTBEAT_CLASS, SOURCE, {}, [({**heartbeat, "partition": -1}, {"offset": 0})]
    )


def test_first_bad_entry_in_java_hashmap_order() -> None:
    pairs = [({"cluster": "c", "topic": f"t{i}", "partition": -i}, {"offset": 0}) for i in range(1, 7)]
    first = java_map_order(pairs)[0][0]
    assert first is not None
    assert (
        f"has an invalid value {first['partition']} for the 'partition' key" in refusal(MIRROR_SOURCE_CLASS, pairs)[1]
    )


# --- the plug-in point -----------------------------------------------------------------------------------------------


class _Refusing:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def alter_offsets(self, config: Mapping[str, Any], offsets: Any) -> bool:
        raise self.error


@pytest.mark.parametrize(
    ("error", "status", "message"),
    [
        (AlterOffsetsUnsupported(), 500, modify_offsets_unsupported_message("c")),
        (AlterOffsetsRejected("no such partition"), 500, "no such partition"),
        (AlterOffsetsBadRequest("offset out of range"), 400, "offset out of range"),
        (RuntimeError("bug"), 500, modify_offsets_failed_message("c", SINK)),
    ],
)
def test_configured_rule_answers_like_connect(error: Exception, status: int, message: str) -> None:
    rules = AlterOffsetsRules({"org.example.MySink": as_rule(_Refusing(error))})
    with pytest.raises(ModifyOffsetsRefused) as caught:
        rules.alter_offsets("c", "MySink", SINK, {}, {("t", 0): 1})
    assert (caught.value.status, caught.value.message) == (status, message)
    assert modify_offsets_failed_message("c", SINK) == "Failed to modify offsets for sink connector c"
    assert modify_offsets_unsupported_message("c") == (
        "Failed to modify offsets for connector c because it doesn't support external modification of offsets"
    )


def test_rules_receive_config_and_offsets_and_configured_rules_win() -> None:
    seen: list[Any] = []

    def rule(config: Mapping[str, Any], offsets: Any) -> bool:
        seen.append((dict(config), offsets))
        return False

    rules = AlterOffsetsRules({MIRROR_SOURCE_CLASS: rule})
    assert rules.alter_offsets("c", MIRROR_SOURCE_CLASS, SOURCE, {"k": "v"}, [({"a": 1}, None)]) is False
    assert seen == [({"k": "v"}, [({"a": 1}, None)])]
    assert rules.alter_offsets("c", "org.example.Unknown", SOURCE, {}, [({"a": 1}, {"b": 2})]) is False


def test_plugins_load_rules_by_class() -> None:
    rules = load_alter_offsets_rules({"org.example.X": "tests.unit.test_alter_offsets:_always_true"})
    assert rules.alter_offsets("c", "org.example.X", SOURCE, {}, []) is True
    with pytest.raises(PluginError):
        load_alter_offsets_rules({"org.example.X": "tests.unit.test_alter_offsets:OK_SOURCE"})


def _always_true(config: Mapping[str, Any], offsets: Any) -> bool:
    return True


# --- connector type from the class -----------------------------------------------------------------------------------


def test_connector_type_comes_from_the_class_and_is_guessed_only_for_unknown_classes() -> None:
    mm2 = {"connector.class": MIRROR_SOURCE_CLASS, "topics": "orders.*"}
    assert connector_type_basis(mm2) == (SOURCE, TypeBasis.BUILT_IN)
    assert connector_type_basis({"connector.class": "MirrorCheckpoint"}) == (SOURCE, TypeBasis.BUILT_IN)
    custom = {"connector.class": "org.example.Source", "topics": "x"}
    assert connector_type_basis(custom) == (SINK, TypeBasis.GUESSED)
    assert connector_type_basis(custom, {"org.example.Source": "source"}) == (SOURCE, TypeBasis.CONFIGURED)
    assert connector_type_basis({"connector.class": "Source"}, {"org.example.Source": "sink"}) == (
        SINK,
        TypeBasis.CONFIGURED,
    )
    assert connector_type_basis({}) == (ConnectorType.UNKNOWN, TypeBasis.NO_CLASS)
    with pytest.raises(ValueError):
        connector_type_basis(custom, {"org.example.Source": "both"})
