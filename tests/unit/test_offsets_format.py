"""connect_state.formats.offsets: the offsets topic and the offsets REST bodies (Connect's OffsetUtilsTest,
SinkUtilsTest, OffsetsApiIntegrationTest).

Every expected value below was produced by Kafka 4.3.1's own classes: ``OffsetUtils.processPartitionKey`` and
``validateFormat``, ``JsonConverter`` keys written through ``OffsetStorageWriter``, ``PATCH`` bodies read by
``JacksonJsonProvider`` into ``ConnectorOffsets`` then ``toMap()`` and ``SinkUtils.parseSinkConnectorOffsets``, and
``Worker.completeModifyOffsetsCallback``.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from connect_state.connect.offset_stores import sink_consumer_group
from connect_state.connect.rest import offsets_success_message
from connect_state.core.errors import RecordFormatError
from connect_state.formats import jsonconv
from connect_state.formats.offsets import (
    BadOffsetsRequest,
    OffsetKey,
    SinkOffset,
    _round_trip,
    java_parse_long,
    normalize_source_offsets,
    offset_key_bytes,
    parse_offset_key,
    parse_offset_value,
    parse_offsets_request,
    parse_sink_offsets,
    parse_sink_offsets_request,
    parse_source_offsets_request,
    serialize_offset_value,
    sink_offset,
    sink_partition,
    validate_offset_map,
)

# --------------------------------------------------------------------------------------------------------------------
# Keys of the topic: OffsetUtils.processPartitionKey (OffsetUtilsTest)
# --------------------------------------------------------------------------------------------------------------------

_FORMAT = "Ignoring offset partition key with an unexpected format"
_FIRST = f"{_FORMAT} for the first element in the partition key list. Expected type: java.lang.String, actual type: "
_SECOND = f"{_FORMAT} for the second element in the partition key list. Expected type: java.util.Map, actual type: "


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (None, "Ignoring offset partition key with an unexpected null value"),
        (b"", f"{_FORMAT}. Expected type: java.util.List, actual type: null"),
        (b"  ", f"{_FORMAT}. Expected type: java.util.List, actual type: null"),
        (b"null", f"{_FORMAT}. Expected type: java.util.List, actual type: null"),
        (b"{}", f"{_FORMAT}. Expected type: java.util.List, actual type: java.util.HashMap"),
        (b'"x"', f"{_FORMAT}. Expected type: java.util.List, actual type: java.lang.String"),
        (b"5", f"{_FORMAT}. Expected type: java.util.List, actual type: java.lang.Long"),
        (b"[]", "Ignoring offset partition key with an unexpected number of elements. Expected: 2, actual: 0"),
        (b'["a"]', "Ignoring offset partition key with an unexpected number of elements. Expected: 2, actual: 1"),
        (b'["a",{},3]', "Ignoring offset partition key with an unexpected number of elements. Expected: 2, actual: 3"),
        (b"[5,{}]", _FIRST + "java.lang.Long"),
        (b"[null,{}]", _FIRST + "null"),
        (b"[1.5,{}]", _FIRST + "java.lang.Double"),
        (b"[true,{}]", _FIRST + "java.lang.Boolean"),
        (b'[["a"],{}]', _FIRST + "java.util.ArrayList"),
        (b"[{},{}]", _FIRST + "java.util.HashMap"),
        (b'["a",5]', _SECOND + "java.lang.Long"),
        (b'["a",[]]', _SECOND + "java.util.ArrayList"),
        (b'["a","s"]', _SECOND + "java.lang.String"),
        (b'["a",1.5]', _SECOND + "java.lang.Double"),
        (b'["a",true]', _SECOND + "java.lang.Boolean"),
    ],
)
def test_malformed_keys_are_ignored_with_connects_warning(data: bytes | None, reason: str) -> None:
    with pytest.raises(RecordFormatError) as raised:
        parse_offset_key(data)
    assert raised.value.reason == reason


@pytest.mark.parametrize("data", [b"invalid", b"\xff\xfe", b"["])
def test_keys_that_are_not_json(data: bytes) -> None:
    with pytest.raises(RecordFormatError) as raised:
        parse_offset_key(data)
    assert raised.value.reason.startswith(
        "Ignoring offset partition key with unknown serialization. Expected json.: invalid JSON ("
    )


def test_null_partition_is_skipped_silently() -> None:
    # OffsetUtilsTest: a null second element is ignored without any log; the caller skips the key
    assert parse_offset_key(b'["a",null]') == OffsetKey("a", None)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'["a",{"k":"v"}]', OffsetKey("a", {"k": "v"})),
        (b'["a",{"k":{"n":1}}]', OffsetKey("a", {"k": {"n": 1}})),
        (b'["a",{}]junk', OffsetKey("a", {})),  # Jackson stops after the root array
        (b'["file-source",{"filename":"/tmp/in.txt"}]', OffsetKey("file-source", {"filename": "/tmp/in.txt"})),
    ],
)
def test_valid_keys(data: bytes, expected: OffsetKey) -> None:
    assert parse_offset_key(data) == expected


@pytest.mark.parametrize(
    ("connector", "partition", "expected"),
    [
        # HashMap order: kafka_topic lands in bucket 10, kafka_partition in bucket 4
        (
            "sink-conn",
            {"kafka_topic": "t", "kafka_partition": 0},
            b'["sink-conn",{"kafka_partition":0,"kafka_topic":"t"}]',
        ),
        (
            "jdbc",
            {"table": "orders", "schema": "public", "db": "shop"},
            b'["jdbc",{"schema":"public","table":"orders","db":"shop"}]',
        ),
        (
            "cdc",
            {"server": "db1", "database": "inventory", "table": "customers", "shard": 3},
            b'["cdc",{"server":"db1","database":"inventory","shard":3,"table":"customers"}]',
        ),
        (
            "multi",
            {"zeta": 1, "alpha": "a", "Aa": True, "BB": None, "mid": 2.5},
            b'["multi",{"zeta":1,"Aa":true,"BB":null,"alpha":"a","mid":2.5}]',
        ),
        ("file-source", {"filename": "/tmp/in.txt"}, b'["file-source",{"filename":"/tmp/in.txt"}]'),
        (
            "big",  # 13 keys: the HashMap has resized to 32 buckets
            {f"k{i}": i for i in range(13)},
            b'["big",{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k11":11,"k6":6,"k10":10,"k7":7,"k8":8,"k12":12,"k9":9}]',
        ),
        ("conn", None, b'["conn",null]'),
    ],
)
def test_offset_key_bytes_in_hashmap_order(
    connector: str, partition: dict[str, object] | None, expected: bytes
) -> None:
    assert offset_key_bytes(connector, partition) == expected


def test_offset_key_bytes_round_trip() -> None:
    key = offset_key_bytes("c", {"b": 1, "a": "x"})
    assert parse_offset_key(key) == OffsetKey("c", {"a": "x", "b": 1})


# --------------------------------------------------------------------------------------------------------------------
# Values of the topic
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        ({"position": 1234}, b'{"position":1234}'),
        ({"kafka_offset": 5}, b'{"kafka_offset":5}'),
        (
            {"zeta": 1, "alpha": "a", "mid": 2.5, "ts": float("inf")},
            b'{"zeta":1,"alpha":"a","mid":2.5,"ts":"Infinity"}',
        ),
        (None, None),
    ],
)
def test_serialize_offset_value(offset: dict[str, object] | None, expected: bytes | None) -> None:
    assert serialize_offset_value(offset) == expected


def test_parse_offset_value() -> None:
    assert parse_offset_value(b'{"saved":10}') == {"saved": 10}
    assert parse_offset_value(None) is None
    assert parse_offset_value(b"null") is None


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"5", "Offsets must be specified as a Map"),
        (b'{"a":{"b":1}}', "Offsets may only contain primitive types as values, but field a contains MAP"),
        (b'{"a":[1]}', "Offsets may only contain primitive types as values, but field a contains ARRAY"),
    ],
)
def test_parse_offset_value_rejects_what_the_reader_rejects(data: bytes, reason: str) -> None:
    with pytest.raises(RecordFormatError) as raised:
        parse_offset_value(data)
    assert raised.value.reason == reason


def test_parse_offset_value_rejects_invalid_json() -> None:
    with pytest.raises(RecordFormatError, match=r"^invalid JSON \("):
        parse_offset_value(b"{")


# --------------------------------------------------------------------------------------------------------------------
# OffsetUtils.validateFormat
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [None, {}, {"a": 1, "b": 2.5, "c": "s", "d": True, "e": None}, {"a": 3000000000}, {"a": float("inf")}]
)
def test_validate_offset_map_accepts(value: object) -> None:
    validate_offset_map(value)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ([1], "Offsets must be specified as a Map"),
        ("x", "Offsets must be specified as a Map"),
        ({1: "a"}, "Offsets may only use String keys"),
        ({"a": {"b": 1}}, "Offsets may only contain primitive types as values, but field a contains MAP"),
        ({"a": [1]}, "Offsets may only contain primitive types as values, but field a contains ARRAY"),
        (
            {"a": 99999999999999999999},  # a BigInteger for Jackson's REST binding
            "Offsets may only contain primitive types as values, but field a contains class java.math.BigInteger",
        ),
    ],
)
def test_validate_offset_map_rejects(value: object, reason: str) -> None:
    with pytest.raises(RecordFormatError) as raised:
        validate_offset_map(value)
    assert raised.value.reason == reason


def test_validate_offset_map_noun() -> None:
    with pytest.raises(RecordFormatError, match=r"^Partitions must be specified as a Map$"):
        validate_offset_map(5, what="Partitions")


# --------------------------------------------------------------------------------------------------------------------
# Sink shapes
# --------------------------------------------------------------------------------------------------------------------


def test_sink_shapes_like_get_offsets() -> None:
    # SinkUtils.consumerGroupOffsetsToConnectorOffsets serialised by Jackson
    body = {
        "offsets": [{"partition": sink_partition("topic-1", 271041745), "offset": sink_offset(2175216119781798972)}]
    }
    assert json.dumps(body, separators=(",", ":")).encode() == (
        b'{"offsets":[{"partition":{"kafka_partition":271041745,"kafka_topic":"topic-1"},'
        b'"offset":{"kafka_offset":2175216119781798972}}]}'
    )
    assert sink_consumer_group("my-sink") == "connect-my-sink"


# --------------------------------------------------------------------------------------------------------------------
# PATCH bodies (OffsetsApiIntegrationTest.test*InvalidRequestBody)
# --------------------------------------------------------------------------------------------------------------------

_EMPTY = "Partitions / offsets need to be provided for an alter offsets request"
_ENTITIES = "org.apache.kafka.connect.runtime.rest.entities"


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (
            "[]",
            500,
            f"Cannot deserialize value of type `{_ENTITIES}.ConnectorOffsets` from Array value "
            "(token `JsonToken.START_ARRAY`)",
        ),
        ("{}", 400, _EMPTY),
        (
            '{"key": []}',
            500,
            f'Unrecognized field "key" (class {_ENTITIES}.ConnectorOffsets), not marked as ignorable '
            '(one known property: "offsets")',
        ),
        ('{"offsets": []}', 400, _EMPTY),
        ('{"offsets": null}', 400, _EMPTY),
        ("null", 400, _EMPTY),
        (
            '{"offsets": {}}',
            500,
            f"Cannot deserialize value of type `java.util.ArrayList<{_ENTITIES}.ConnectorOffset>` from Object value "
            "(token `JsonToken.START_OBJECT`)",
        ),
        (
            '{"offsets": [123]}',
            500,
            f"Cannot construct instance of `{_ENTITIES}.ConnectorOffset` (although at least one Creator exists): "
            "no int/Int-argument constructor/factory method to deserialize from Number value (123)",
        ),
        (
            '{"offsets": [{"key": "val"}]}',
            500,
            f'Unrecognized field "key" (class {_ENTITIES}.ConnectorOffset), not marked as ignorable '
            '(2 known properties: "partition", "offset")',
        ),
        (
            '{"offsets": [{"partition": []}]}',
            500,
            "Cannot deserialize value of type `java.util.LinkedHashMap<java.lang.String,java.lang.Object>` from Array "
            "value (token `JsonToken.START_ARRAY`)",
        ),
        (
            '{"offsets": [{"partition": " x "}]}',  # Jackson trims the string it quotes
            500,
            "Cannot construct instance of `java.util.LinkedHashMap` (although at least one Creator exists): "
            "no String-argument constructor/factory method to deserialize from String value ('x')",
        ),
        (
            '{"offsets": [{"partition": "\\t"}]}',
            500,
            'Cannot coerce empty String ("") to element of `java.util.LinkedHashMap` '
            "(but could if coercion was enabled using `CoercionConfig`)",
        ),
        (
            '{"offsets": [" "]}',
            500,
            f'Cannot coerce empty String ("") to `{_ENTITIES}.ConnectorOffset` value '
            "(but could if coercion was enabled using `CoercionConfig`)",
        ),
        (
            '{"offsets": [1e2]}',
            500,
            f"Cannot construct instance of `{_ENTITIES}.ConnectorOffset` (although at least one Creator exists): "
            "no double/Double-argument constructor/factory method to deserialize from Number value (100.0)",
        ),
        (
            '{"offsets": [100000000000]}',
            500,
            f"Cannot construct instance of `{_ENTITIES}.ConnectorOffset` (although at least one Creator exists): "
            "no long/Long-argument constructor/factory method to deserialize from Number value (100000000000)",
        ),
        (
            "true",
            500,
            f"Cannot construct instance of `{_ENTITIES}.ConnectorOffsets` (although at least one Creator exists): "
            "no boolean/Boolean-argument constructor/factory method to deserialize from boolean value (true)",
        ),
        (
            '{"offsets": false}',
            500,
            f"Cannot deserialize value of type `java.util.ArrayList<{_ENTITIES}.ConnectorOffset>` from Boolean value "
            "(token `JsonToken.VALUE_FALSE`)",
        ),
        (
            '{"offsets": [{"partition": 1.5}]}',
            500,
            "Cannot deserialize value of type `java.util.LinkedHashMap<java.lang.String,java.lang.Object>` from "
            "Floating-point value (token `JsonToken.VALUE_NUMBER_FLOAT`)",
        ),
        # Jackson reports an unknown property once the creator's properties are read: the inner error comes first
        (
            '{"y": 1, "offsets": [{"partition": {}, "x": 1}]}',
            500,
            f'Unrecognized field "x" (class {_ENTITIES}.ConnectorOffset), not marked as ignorable '
            '(2 known properties: "partition", "offset")',
        ),
        # ... and a Jackson error beats the empty-offsets 400
        (
            '{"offsets": [], "y": 1}',
            500,
            f'Unrecognized field "y" (class {_ENTITIES}.ConnectorOffsets), not marked as ignorable '
            '(one known property: "offsets")',
        ),
        (
            '{"offsets": [null]}',
            500,
            f'Cannot invoke "{_ENTITIES}.ConnectorOffset.partition()" because "offset" is null',
        ),
    ],
)
def test_invalid_request_bodies(body: str, status: int, message: str) -> None:
    with pytest.raises(BadOffsetsRequest) as raised:
        parse_offsets_request(json.loads(body))
    assert (raised.value.status, raised.value.message) == (status, message)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"offsets": [{}]}', "The partition for a sink connector offset cannot be null or missing"),
        (
            '{"offsets": [{"partition": null, "offset": null}]}',
            "The partition for a sink connector offset cannot be null or missing",
        ),
        (
            '{"offsets": [{"partition": {}, "offset": null}]}',
            "The partition for a sink connector offset must contain the keys 'kafka_topic' and 'kafka_partition'",
        ),
        (
            '{"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": "not a number"}, "offset": null}]}',
            "Failed to parse the following Kafka partition value in the provided offsets: 'not a number'. "
            "Partition values for sink connectors need to be integers.",
        ),
        (
            '{"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 1.5}, "offset": null}]}',
            "Failed to parse the following Kafka partition value in the provided offsets: '1.5'. "
            "Partition values for sink connectors need to be integers.",
        ),
        (
            '{"offsets": [{"partition": {"kafka_topic": 1.5, "kafka_partition": 1.0}, "offset": null}]}',
            "Failed to parse the following Kafka partition value in the provided offsets: '1.0'. "
            "Partition values for sink connectors need to be integers.",
        ),
        (
            '{"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 99999999999}, "offset": null}]}',
            "Failed to parse the following Kafka partition value in the provided offsets: '99999999999'. "
            "Partition values for sink connectors need to be integers.",
        ),
        (
            '{"offsets": [{"partition": {"kafka_topic": true, "kafka_partition": " 1"}, "offset": null}]}',
            "Failed to parse the following Kafka partition value in the provided offsets: ' 1'. "
            "Partition values for sink connectors need to be integers.",
        ),
        (
            '{"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": "10"}, "offset": {}}]}',
            "The offset for a sink connector should either be null or contain the key 'kafka_offset'",
        ),
        (
            '{"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 10}, '
            '"offset": {"kafka_offset": "not a number"}}]}',
            "Failed to parse the following Kafka offset value in the provided offsets: 'not a number'. "
            "Offset values for sink connectors need to be integers.",
        ),
        (
            '{"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 10}, '
            '"offset": {"kafka_offset": null}}]}',
            "Failed to parse the following Kafka offset value in the provided offsets: 'null'. "
            "Offset values for sink connectors need to be integers.",
        ),
        (
            '{"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 1}, '
            '"offset": {"kafka_offset": 1.0E10}}]}',
            "Failed to parse the following Kafka offset value in the provided offsets: '1.0E10'. "
            "Offset values for sink connectors need to be integers.",
        ),
        (
            '{"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 1}, '
            '"offset": {"kafka_offset": 9223372036854775808}}]}',
            "Failed to parse the following Kafka offset value in the provided offsets: '9223372036854775808'. "
            "Offset values for sink connectors need to be integers.",
        ),
        (
            '{"offsets": [{"partition": {"kafka_topic": null, "kafka_partition": 10}, "offset": null}]}',
            "Kafka topic names must be valid strings and may not be null",
        ),
        (
            '{"offsets": [{"partition": {"kafka_topic": 5, "kafka_partition": null}, "offset": null}]}',
            "Kafka partitions must be valid numbers and may not be null",
        ),
    ],
)
def test_invalid_sink_offsets(body: str, message: str) -> None:
    with pytest.raises(BadOffsetsRequest) as raised:
        parse_sink_offsets_request(json.loads(body))
    assert (raised.value.status, raised.value.message) == (400, message)


def test_sink_offsets() -> None:
    body = {
        "offsets": [
            {"partition": {"kafka_topic": 5, "kafka_partition": "10"}, "offset": {"kafka_offset": "+5"}},
            {"partition": {"kafka_topic": True, "kafka_partition": 2}, "offset": None},
            {"partition": {"kafka_topic": 1.5, "kafka_partition": 3}, "offset": {"kafka_offset": -1}},
            {
                "partition": {"kafka_topic": {"b": [1, "x"], "a": None}, "kafka_partition": 4},
                "offset": {"kafka_offset": 9223372036854775807},
            },
            {"partition": {"kafka_topic": "t", "kafka_partition": "\u0661"}},  # no offset: delete
        ]
    }
    assert parse_sink_offsets_request(body) == [
        SinkOffset("5", 10, 5),
        SinkOffset("true", 2, None),
        SinkOffset("1.5", 3, -1),
        SinkOffset("{b=[1, x], a=null}", 4, 9223372036854775807),  # LinkedHashMap.toString: document order
        SinkOffset("t", 1, None),
    ]


def test_duplicate_partitions_overwrite_earlier_ones() -> None:
    body = {
        "offsets": [
            {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 5}},
            {"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": None},
            {"partition": {"kafka_partition": 0, "kafka_topic": "t"}, "offset": {"kafka_offset": 7}},
        ]
    }
    pairs = parse_offsets_request(body)
    assert pairs == [
        ({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 7}),
        ({"kafka_topic": "t", "kafka_partition": 1}, None),
    ]
    assert parse_sink_offsets(pairs) == [SinkOffset("t", 0, 7), SinkOffset("t", 1, None)]


def test_partitions_equal_only_under_java_equality_are_merged() -> None:
    # {"a":2} and {"a":2.0} differ for Java (Integer vs Double): two records are written
    body = {
        "offsets": [
            {"partition": {"b": 1, "a": 2}, "offset": None},
            {"partition": {"a": 2.0, "b": 1}, "offset": {"position": 6}},
        ]
    }
    writes = {offset_key_bytes("conn", p): serialize_offset_value(o) for p, o in parse_source_offsets_request(body)}
    assert writes == {b'["conn",{"a":2,"b":1}]': None, b'["conn",{"a":2.0,"b":1}]': b'{"position":6}'}


@pytest.mark.parametrize(
    ("body", "writes"),
    [
        (
            {"offsets": [{"partition": {"filename": "/tmp/a"}, "offset": {"position": 5}}]},
            {b'["conn",{"filename":"/tmp/a"}]': b'{"position":5}'},
        ),
        (
            {
                "offsets": [
                    {"partition": {"b": 1, "a": 2}, "offset": {"position": 5}},
                    {"partition": {"a": 2, "b": 1}, "offset": {"position": 6}},
                ]
            },
            {b'["conn",{"a":2,"b":1}]': b'{"position":6}'},
        ),
        (
            {
                "offsets": [
                    {
                        "partition": {"table": "orders", "schema": "public", "db": "shop"},
                        "offset": {"zeta": 1, "alpha": "a", "mid": 2.5, "ts": float("inf")},
                    }
                ]
            },
            {
                b'["conn",{"schema":"public","table":"orders","db":"shop"}]': (
                    b'{"zeta":1,"alpha":"a","mid":2.5,"ts":"Infinity"}'
                )
            },
        ),
        # a null or missing partition is written as [name, null] (the framework's default alterOffsets accepts it)
        ({"offsets": [{"partition": None, "offset": {"x": 1}}]}, {b'["conn",null]': b'{"x":1}'}),
        ({"offsets": [{}]}, {b'["conn",null]': None}),
        ({"offsets": [{"offset": {}}]}, {b'["conn",null]': b"{}"}),
    ],
)
def test_source_offsets_written_like_offset_storage_writer(body: object, writes: dict[bytes, bytes | None]) -> None:
    pairs = parse_source_offsets_request(body)
    assert {offset_key_bytes("conn", p): serialize_offset_value(o) for p, o in pairs} == writes


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"offsets": [{"partition": {"b": 1, "a": 2, "c": {"x": 1}}, "offset": {"position": 5}}]},
            "Offsets may only contain primitive types as values, but field c contains MAP",
        ),
        (
            {"offsets": [{"partition": {"x": 1}, "offset": {"kafka_offset": [5]}}]},
            "Offsets may only contain primitive types as values, but field kafka_offset contains ARRAY",
        ),
        (
            {"offsets": [{"partition": {"kafka_topic": "t"}, "offset": {"kafka_offset": 99999999999999999999}}]},
            "Offsets may only contain primitive types as values, but field kafka_offset contains class "
            "java.math.BigInteger",
        ),
    ],
)
def test_source_offsets_validate_format_is_a_500(body: object, message: str) -> None:
    with pytest.raises(BadOffsetsRequest) as raised:
        parse_source_offsets_request(body)
    assert (raised.value.status, raised.value.message) == (500, message)


def test_normalize_source_offsets_orders_like_a_hashmap() -> None:
    assert normalize_source_offsets([({"kafka_topic": "t", "kafka_partition": 0}, None)]) == [
        ({"kafka_partition": 0, "kafka_topic": "t"}, None)
    ]


# --------------------------------------------------------------------------------------------------------------------
# Success messages (Worker.completeModifyOffsetsCallback) and Long.parseLong
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verb", "connector_managed", "message"),
    [
        ("altered", True, "The offsets for this connector have been altered successfully"),
        ("reset", True, "The offsets for this connector have been reset successfully"),
        (
            "altered",
            False,
            "The Connect framework-managed offsets for this connector have been altered successfully. However, if "
            "this connector manages offsets externally, they will need to be manually altered in the system that the "
            "connector uses.",
        ),
        (
            "reset",
            False,
            "The Connect framework-managed offsets for this connector have been reset successfully. However, if this "
            "connector manages offsets externally, they will need to be manually reset in the system that the "
            "connector uses.",
        ),
    ],
)
def test_offsets_success_message(verb: str, connector_managed: bool, message: str) -> None:
    assert offsets_success_message(verb, connector_managed) == message  # type: ignore[arg-type]


def test_offsets_success_message_rejects_other_verbs() -> None:
    with pytest.raises(ValueError):
        offsets_success_message("deleted", True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5", 5),
        ("+5", 5),
        ("-1", -1),
        ("\u0661\u0662", 12),
        ("9223372036854775807", 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
    ],
)
def test_java_parse_long(text: str, expected: int) -> None:
    assert java_parse_long(text) == expected


@pytest.mark.parametrize("text", ["", "+", "-", " 1", "1.0", "1.0E10", "null", "9223372036854775808", "\U0001d7cf"])
def test_java_parse_long_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        java_parse_long(text)


_FLAT_VALUES = st.one_of(
    st.text(), st.booleans(), st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False)
)


@hypothesis_settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), st.one_of(_FLAT_VALUES, st.lists(st.integers(0, 9), max_size=2))))
def test_a_flat_map_of_plain_values_skips_the_round_trip_and_comes_back_as_the_round_trip_gives_it(partition):
    """``_round_trip`` hands a flat map of strings, booleans, nulls and longs back as it is: the same map (values and
    key order) as the JsonConverter round trip it skips; floats and nested values still take it."""
    expected = jsonconv.loads(jsonconv.dumps(partition))
    got = _round_trip(dict(partition))
    assert got == expected
    assert list(got) == list(expected)
    assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]


def _exact_round_trip(value: object) -> object:
    """The JsonConverter round trip itself, or the error its reader raises."""
    try:
        return jsonconv.loads(jsonconv.dumps(value))
    except jsonconv.JsonFormatError as err:
        return type(err)


@pytest.mark.parametrize(
    "partition",
    [
        {"k" * jsonconv.MAX_NAME_LENGTH: "x"},
        {"k" * (jsonconv.MAX_NAME_LENGTH + 1): "x"},  # Jackson refuses the name: so must we
        {"é" * (jsonconv.MAX_NAME_LENGTH + 1): "x"},
        {"a": "\ud83d\ude00"},  # a split surrogate pair (Python's json reads CESU-8 so): Java reads one character
        {"\ud83d\ude00": 1},
        {"a": "\ud83d"},  # a lone surrogate stays
    ],
    ids=["longest-name", "name-too-long", "non-ascii-name-too-long", "split-pair", "split-pair-name", "lone"],
)
def test_the_flat_map_shortcut_gives_what_the_round_trip_gives_or_its_error(partition: dict) -> None:
    expected = _exact_round_trip(partition)
    try:
        got: object = _round_trip(dict(partition))
    except jsonconv.JsonFormatError as err:
        got = type(err)
    assert got == expected
    if isinstance(expected, dict):
        assert list(got) == list(expected)  # type: ignore[call-overload]
