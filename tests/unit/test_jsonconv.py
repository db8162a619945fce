"""connect_state.formats.jsonconv: Connect's internal JsonConverter and the Java behaviours around it.

Expected values were produced with Kafka 4.3.1's JsonConverter (Jackson 2.21) and a JDK 25 (Double.toString).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connect_state.formats import jsonconv
from connect_state.formats.javalang import (
    decode_java_utf8,
    java_double_to_string,
    java_hashmap_order,
    java_hashmap_ordered,
    java_int,
    java_long,
    java_string_hashcode,
)
from connect_state.formats.jsonconv import JsonFormatError, dumps, java_to_string, loads

# --------------------------------------------------------------------------------------------------------------------
# dumps
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": 1, "b": [True, False, None]}, b'{"a":1,"b":[true,false,null]}'),
        ({}, b"{}"),
        ([], b"[]"),
        ((1, 2), b"[1,2]"),
        ({"n": -9223372036854775808}, b'{"n":-9223372036854775808}'),
        ("caf\u00e9 \u9023", '"caf\u00e9 \u9023"'.encode()),  # non-ASCII of the BMP: raw UTF-8
        ("a/b", b'"a/b"'),  # '/' is not escaped
        ('q"b\\', b'"q\\"b\\\\"'),
        ("\b\t\n\f\r", b'"\\b\\t\\n\\f\\r"'),
        ("\x00\x0b\x1f", b'"\\u0000\\u000B\\u001F"'),  # other controls: \u00XX, uppercase hex
        ("\x7f\u2028", '"\x7f\u2028"'.encode()),  # DEL and U+2028 are written as-is
        ("\U0001f600", b'"\\uD83D\\uDE00"'),  # outside the BMP: an escaped surrogate pair (Jackson 2.21)
        ("x\ud83dy", b'"x\\uD83Dy"'),  # a lone surrogate is escaped too
        ({"\u00e9": "v"}, '{"\u00e9":"v"}'.encode()),
    ],
)
def test_dumps_matches_jackson(value: object, expected: bytes) -> None:
    assert dumps(value) == expected


def test_dumps_keeps_dict_order() -> None:
    assert dumps({"z": 1, "a": 2}) == b'{"z":1,"a":2}'


@pytest.mark.parametrize(
    ("value", "expected"),
    [(float("nan"), b'"NaN"'), (float("inf"), b'"Infinity"'), (float("-inf"), b'"-Infinity"'), (1e7, b"1.0E7")],
)
def test_dumps_floats(value: float, expected: bytes) -> None:
    assert dumps(value) == expected


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({1: "a"}, TypeError),
        ({"a": {1, 2}}, TypeError),
        (b"bytes", TypeError),
        (2**63, ValueError),
        (-(2**63) - 1, ValueError),
    ],
)
def test_dumps_rejects_what_connect_cannot_write(value: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        dumps(value)


def test_dumps_handles_deep_nesting() -> None:
    value: object = []
    for _ in range(1500):
        value = [value]
    assert dumps(value) == b"[" * 1501 + b"]" * 1501


# --------------------------------------------------------------------------------------------------------------------
# Double.toString
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1.0"),
        (1.5, "1.5"),
        (0.1, "0.1"),
        (0.3, "0.3"),
        (100.0, "100.0"),
        (123456.789, "123456.789"),
        (1234567.0, "1234567.0"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (0.001, "0.001"),
        (9.99e-4, "9.99E-4"),
        (1e-4, "1.0E-4"),
        (-2.5e-7, "-2.5E-7"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (5e-324, "4.9E-324"),  # Double.MIN_VALUE: Java picks the closest two-digit form
        (1e-323, "9.9E-324"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (1e21, "1.0E21"),
        (1e23, "1.0E23"),
        (2.0**63, "9.223372036854776E18"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_java_double_to_string(value: float, expected: str) -> None:
    assert java_double_to_string(value) == expected


# --------------------------------------------------------------------------------------------------------------------
# loads: what JsonConverter.toConnectData accepts, and what it returns
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"a":[1,{"b":null}]}', {"a": [1, {"b": None}]}),
        (b' \t\r\n{"a" : 1 , "b":"x"}\n', {"a": 1, "b": "x"}),
        (b"", None),  # Jackson returns a missing node; Connect reads it as null
        (b"   ", None),
        (b"null", None),
        (b"true", True),
        (b"-12", -12),
        (b'"abc"', "abc"),
        (b"\xef\xbb\xbf{}", {}),  # a UTF-8 byte order mark is skipped
        (b'{"a":1}garbage', {"a": 1}),  # only the first value is read
        (b'{"a":1}\xff', {"a": 1}),
        (b"[1]]", [1]),
        (b'"s"x', "s"),
        (b"123 456", 123),
        (b"true}", True),
        (b"false-", False),
        (b"true$", True),
        (b"007", 7),  # ALLOW_LEADING_ZEROS_FOR_NUMBERS
        (b"[-00.10]", [-0.1]),
        (b"[1e5, 1E2, 1.0, 1.5E+3]", [100000.0, 100.0, 1.0, 1500.0]),  # any fraction or exponent: a Double
        (b"[9223372036854775807]", [9223372036854775807]),
        (b"[9223372036854775808]", [-9223372036854775808]),  # BigInteger.longValue(): low 64 bits
        (b"[18446744073709551619]", [3]),
        (b"[-9223372036854775809]", [9223372036854775807]),
        (b'{"a":1,"a":2}', {"a": 2}),  # duplicate keys: the last one wins
        (b'["\\u00e9\\/\\n"]', ["\u00e9/\n"]),
        (b'"\\ud83d\\ude00"', "\U0001f600"),  # an escaped surrogate pair is one character
        (b'"\xf0\x9f\x98\x80"', "\U0001f600"),
        (b'"\\ud800"', "\ud800"),  # a lone surrogate escape is kept
        (b'"\\ud83d\\u0041"', "\ud83dA"),
        (b'"\xc0\xa2"', '"'),  # Jackson does not reject overlong UTF-8 forms
        (b'"\xe0\x80\x80"', "\x00"),
        (b'"\x7f"', "\x7f"),
    ],
)
def test_loads_like_jsonconverter(data: bytes, expected: object) -> None:
    assert loads(data) == expected


def test_loads_integral_and_floating_numbers_keep_their_kind() -> None:
    value = loads(b"[1, 1.0, 1e0]")
    assert isinstance(value, list)
    assert [type(v) for v in value] == [int, float, float]


@pytest.mark.parametrize(
    ("data", "expected"),
    [(b"-0.0", 0.0), (b"-0.0e0", 0.0), (b"-1e-400", -0.0), (b"1e400", math.inf), (b"-1E400", -math.inf)],
)
def test_loads_floats_go_through_bigdecimal(data: bytes, expected: float) -> None:
    value = loads(data)
    assert isinstance(value, float)
    assert value == expected
    assert math.copysign(1.0, value) == math.copysign(1.0, expected)  # BigDecimal has no negative zero


@pytest.mark.parametrize(
    "data",
    [
        b"invalid",
        b"NaN",
        b"[NaN]",
        b"Infinity",
        b"[1.]",
        b"[.5]",
        b"[+1]",
        b"[1e]",
        b"[1e+]",
        b"-",
        b"[-]",
        b"0x10",
        b"1x",  # a root number must be followed by whitespace
        b"1]",
        b"1.5e3x",
        b"truex",  # a root literal must not run into an identifier character
        b"null_",
        b"false1",
        b"true\x7f",
        b"true\xc3\xa9",
        b"nul",
        b'{"a":1,}',
        b"[1,]",
        b"{'a':1}",
        b'{"a" 1}',
        b"{a:1}",
        b'{"a":1',
        b"[1 2]",
        b'{"a":"\x01"}',  # raw control character in a string
        b'{"a":"\\x"}',
        b'{"a":"\\u00e"}',
        b'{"a":"\xff"}',
        b'{"a":"\x80"}',
        b'{"a":"\xc3"}',
        b'{"a":"\xed\xa0\x80"}',  # an encoded surrogate
        b"\x0c{}",  # form feed is not JSON whitespace
        b"\xef\xbb\xbf",  # a byte order mark alone
        b" \xef\xbb\xbf{}",
        b"[1e2147483648]",  # BigDecimal: exponent overflow
        b"[1.5e-2147483648]",
    ],
)
def test_loads_rejects_what_jackson_rejects(data: bytes) -> None:
    with pytest.raises(JsonFormatError):
        loads(data)


def test_loads_nesting_limit_is_1000() -> None:
    assert loads(b"[" * 1000 + b"]" * 1000) is not None
    with pytest.raises(JsonFormatError, match="Nesting depth"):
        loads(b"[" * 1001 + b"]" * 1001)
    with pytest.raises(JsonFormatError, match="Nesting depth"):
        loads(b'{"a":' * 1001 + b"{}" + b"}" * 1001)


@pytest.mark.parametrize(
    ("data", "accepted"),
    [
        (b"1" * 1000, True),
        (b"1" * 1001, False),
        (b"-" + b"1" * 1000, True),  # the sign does not count
        (b"1." + b"1" * 999, True),  # integer, fraction and exponent digits together
        (b"1." + b"1" * 1000, False),
        (b"1." + b"1" * 998 + b"e5", True),
        (b"1." + b"1" * 999 + b"e5", False),
    ],
)
def test_loads_number_length_limit_is_1000_digits(data: bytes, accepted: bool) -> None:
    if accepted:
        loads(data)
    else:
        with pytest.raises(JsonFormatError, match="Number length"):
            loads(data)


@pytest.mark.parametrize(("length", "accepted"), [(50_000, True), (50_001, False)])
def test_loads_field_name_limit(length: int, accepted: bool) -> None:
    data = b'{"' + b"a" * length + b'":1}'
    if accepted:
        assert loads(data) == {"a" * length: 1}
    else:
        with pytest.raises(JsonFormatError, match="String length"):
            loads(data)


def test_dumps_then_loads_round_trips() -> None:
    value = {"s": "caf\u00e9\n\U0001f600\x1f", "i": -5, "f": 2.5e-7, "l": [None, True, {"k": []}]}
    assert loads(dumps(value)) == value


# --------------------------------------------------------------------------------------------------------------------
# new String(bytes, UTF_8)
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"status-connector-caf\xc3\xa9", "status-connector-caf\u00e9"),
        (b"a\xffb", "a\ufffdb"),
        (b"a\xed\xa0\x80b", "a\ufffdb"),  # Java: one U+FFFD for an encoded surrogate (Python's "replace" gives 3)
        (b"a\xed\xa0b", "a\ufffdb"),
        (b"a\xed\xa0", "a\ufffd"),
        (b"a\xe2\x82", "a\ufffd"),
        (b"a\xc0\xafb", "a\ufffd\ufffdb"),
        (b"a\xf0\x9f\x98", "a\ufffd"),
    ],
)
def test_decode_java_utf8(data: bytes, expected: str) -> None:
    assert decode_java_utf8(data) == expected


# --------------------------------------------------------------------------------------------------------------------
# String.hashCode and HashMap order
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hello", 99162322),
        ("", 0),
        ("polygenelubricants", -2147483648),  # Integer.MIN_VALUE
        ("Aa", 2112),
        ("BB", 2112),
        ("\u00e9", 233),
        ("\U0001f600", 1772899),  # over the UTF-16 surrogate pair D83D DE00
        ("kafka_topic", -37997866),
        ("kafka_partition", 164973841),
    ],
)
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (["kafka_topic", "kafka_partition"], ["kafka_partition", "kafka_topic"]),
        (["kafka_partition", "kafka_topic"], ["kafka_partition", "kafka_topic"]),
        (["Aa", "BB"], ["Aa", "BB"]),  # same bucket: insertion order
        (["BB", "Aa"], ["BB", "Aa"]),
        (["a", "a", "b"], ["a", "b"]),
        ([], []),
        # 13 keys: the table grows from 16 to 32 buckets.
        (
            [
                "filename",
                "position",
                "offset",
                "table",
                "db",
                "schema",
                "partition",
                "topic",
                "kafka_topic",
                "kafka_partition",
                "key1",
                "key2",
                "key3",
            ],
            [
                "schema",
                "key1",
                "key2",
                "offset",
                "kafka_partition",
                "key3",
                "kafka_topic",
                "filename",
                "partition",
                "topic",
                "position",
                "table",
                "db",
            ],
        ),
        # 9 keys in one bucket: HashMap resizes (treeifyBin below 64 buckets) instead of building a tree.
        (
            ["AaAaAa", "AaAaBB", "AaBBAa", "AaBBBB", "BBAaAa", "BBAaBB", "BBBBAa", "BBBBBB", "AaAaAaAa"],
            ["AaAaAa", "AaAaBB", "AaBBAa", "AaBBBB", "BBAaAa", "BBAaBB", "BBBBAa", "BBBBBB", "AaAaAaAa"],
        ),
    ],
)
def test_java_hashmap_order(keys: list[str], expected: list[str]) -> None:
    assert java_hashmap_order(keys) == expected


def test_java_hashmap_order_refuses_tree_bins() -> None:
    # 16 keys with one hash code: the 9th and 10th grow the table to 64 buckets, the 11th makes a red-black tree bin.
    blocks = ("Aa", "BB")
    same_hash = [a + b + c + d for a in blocks for b in blocks for c in blocks for d in blocks]
    assert len({java_string_hashcode(k) for k in same_hash}) == 1
    assert java_hashmap_order(same_hash[:10]) == same_hash[:10]
    with pytest.raises(ValueError, match="tree bin"):
        java_hashmap_order(same_hash[:11])


def test_java_hashmap_ordered_reorders_every_level() -> None:
    value = {"kafka_topic": "t", "kafka_partition": 0, "nested": [{"kafka_topic": 1, "kafka_partition": 2}]}
    ordered = java_hashmap_ordered(value)
    assert ordered == value
    assert isinstance(ordered, dict)
    assert list(ordered["nested"][0]) == ["kafka_partition", "kafka_topic"]
    assert dumps(java_hashmap_ordered({"kafka_topic": "t", "kafka_partition": 0})) == (
        b'{"kafka_partition":0,"kafka_topic":"t"}'
    )
    assert list(value) == ["kafka_topic", "kafka_partition", "nested"]  # the input is not modified


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (True, "true"),
        (12, "12"),
        (1e7, "1.0E7"),
        ("text", "text"),
        ([1, "a", None], "[1, a, null]"),
        ({"kafka_topic": "t", "kafka_partition": [0]}, "{kafka_partition=[0], kafka_topic=t}"),
        ({}, "{}"),
    ],
)
def test_java_to_string(value: object, expected: str) -> None:
    assert java_to_string(value) == expected


@pytest.mark.parametrize(
    ("n", "as_int", "as_long"),
    [
        (0, 0, 0),
        (2**31, -(2**31), 2**31),
        (2**32 + 3, 3, 2**32 + 3),
        (-1, -1, -1),
        (2**63, 0, -(2**63)),
        (2**64 + 3, 3, 3),
    ],
)
def test_java_narrowing(n: int, as_int: int, as_long: int) -> None:
    assert java_int(n) == as_int
    assert java_long(n) == as_long


# --- the standard library's path (issue 11): it must give exactly what Jackson's rules give ---------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=6)
    | st.sampled_from(["\U0001f600", "\ud83d", "\x00\x1f\x7f", "a\\u", "é/ü", "\u2028"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
)


def _outcome(function: Callable[[Any], object], argument: object) -> tuple[str, str]:
    """What ``function(argument)`` gives, with dict order and int/float kinds (``repr``), or which error."""
    try:
        return ("value", repr(function(argument)))
    except (ValueError, TypeError) as err:
        return ("error", type(err).__name__)


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_dumps_equals_the_exact_writer(value: object) -> None:
    assert _outcome(jsonconv.dumps, value) == _outcome(jsonconv._dumps_exact, value)


def _text_of(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


_SCALAR_TEXTS = _SCALARS.filter(lambda v: not isinstance(v, str) or "\ud83d" not in v).map(_text_of) | st.sampled_from(
    ["007", "-0", "1e400", "1.0", "-0.0", "NaN", "Infinity", "9223372036854775808", '"\\ud83d"', '"\\u00e9"', "tru"]
)
_DOCUMENTS = st.recursive(
    _SCALAR_TEXTS,
    lambda children: (
        st.lists(children, max_size=4).map(lambda items: "[" + ",".join(items) + "]")
        | st.lists(st.tuples(st.sampled_from(["a", "b", "é", ""]), children), max_size=4).map(  # repeated keys too
            lambda pairs: "{" + ",".join(f"{_text_of(k)}:{v}" for k, v in pairs) + "}"
        )
    ),
    max_leaves=12,
)


@settings(max_examples=600, deadline=None)
@given(_DOCUMENTS, st.sampled_from(["", " ", "\n", "x", "}", "\x00"]), st.sampled_from(["", " ", "\ufeff"]))
def test_loads_equals_the_exact_reader(document: str, after: str, before: str) -> None:
    """Documents as Connect writes them and others around them: repeated keys, escapes, floats, big and zero-led
    numbers, whitespace or garbage after the root, a byte order mark."""
    raw = (before + document + after).encode("utf-8", "surrogatepass")
    assert _outcome(jsonconv.loads, raw) == _outcome(jsonconv._loads_exact, raw)


@pytest.mark.parametrize(
    "raw",
    [b'["c",{"filename":"/data/a.txt"}]', b'{"position":1234}', b'{"kafka_offset":5,"a":[true,null,"\xc3\xa9"]}'],
)
def test_what_connect_writes_takes_the_standard_library_path(raw: bytes) -> None:
    """The plain path is taken for Connect's own documents (else the equality tests above would test nothing)."""
    assert jsonconv._loads_plain(raw) is not jsonconv._NOT_PLAIN
    assert jsonconv._loads_plain(raw) == jsonconv._loads_exact(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1.0}',  # a float: BigDecimal and Double rules
        b'{"a":9223372036854775808}',  # past a long: Connect truncates
        b'{"a":"\\u00e9"}',  # an escape
        b'{"a":007}',  # leading zeros: Jackson's option
        b'{"a":1} trailing',  # Jackson ignores what follows the root
        b'\xef\xbb\xbf{"a":1}',  # a byte order mark
        b'{"a":"\xed\xa0\xbd"}',  # an encoded surrogate: not strict UTF-8
        b"[" * 300 + b"]" * 300,  # deep: Jackson's nesting limit
    ],
)
def test_documents_the_standard_library_path_leaves_to_the_exact_reader(raw: bytes) -> None:
    assert jsonconv._loads_plain(raw) is jsonconv._NOT_PLAIN


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":NaN,"a":null}',  # found by Hypothesis: json accepts NaN, and the repeated key hid it from a check after
        b'{"a":' + b"1" * 1001 + b',"a":null}',  # Jackson's number length limit, hidden the same way
        b'{"a":1.5,"a":null}',
    ],
)
def test_a_value_a_repeated_key_replaces_is_checked_too(raw: bytes) -> None:
    assert jsonconv._loads_plain(raw) is jsonconv._NOT_PLAIN
    assert _outcome(jsonconv.loads, raw) == _outcome(jsonconv._loads_exact, raw)
