"""Java semantics shared by the formats (``connect_state.formats.javalang``) and their re-exports."""

from __future__ import annotations

import pytest

from connect_state.formats.javalang import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    java_class_name,
    java_int,
    java_long,
    java_parse_int,
    java_parse_long,
)


def test_ranges() -> None:
    assert (INT32_MIN, INT32_MAX) == (-(2**31), 2**31 - 1)
    assert (INT64_MIN, INT64_MAX) == (-(2**63), 2**63 - 1)


@pytest.mark.parametrize(
    ("n", "as_int", "as_long"),
    [
        (0, 0, 0),
        (INT32_MAX, INT32_MAX, INT32_MAX),
        (INT32_MAX + 1, INT32_MIN, INT32_MAX + 1),
        (INT32_MIN - 1, INT32_MAX, INT32_MIN - 1),
        (INT64_MAX, -1, INT64_MAX),
        (INT64_MAX + 1, 0, INT64_MIN),
        (-1, -1, -1),
    ],
)
def test_narrowing(n: int, as_int: int, as_long: int) -> None:
    assert java_int(n) == as_int
    assert java_long(n) == as_long


@pytest.mark.parametrize(
    ("text", "as_int", "as_long"),
    [
        ("0", 0, 0),
        ("+7", 7, 7),
        ("-7", -7, -7),
        ("\u0661\u0662", 12, 12),  # Arabic-Indic digits count, as in Character.digit
        ("2147483647", INT32_MAX, INT32_MAX),
        ("-2147483648", INT32_MIN, INT32_MIN),
        ("2147483648", None, INT32_MAX + 1),
        ("-2147483649", None, INT32_MIN - 1),
        ("9223372036854775807", None, INT64_MAX),
        ("-9223372036854775808", None, INT64_MIN),
        ("9223372036854775808", None, None),
        ("-9223372036854775809", None, None),
        ("99999999999999999999999", None, None),
        ("", None, None),
        ("-", None, None),
        ("+", None, None),
        ("+-1", None, None),
        (" 1", None, None),
        ("1.0", None, None),
        ("\U0001d7cf", None, None),  # MATHEMATICAL BOLD DIGIT ONE: two UTF-16 units, neither a digit
    ],
)
def test_parse(text: str, as_int: int | None, as_long: int | None) -> None:
    for parse, expected in ((java_parse_int, as_int), (java_parse_long, as_long)):
        if expected is None:
            with pytest.raises(ValueError):
                parse(text)
        else:
            assert parse(text) == expected


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (None, "null"),
        (True, "java.lang.Boolean"),
        (False, "java.lang.Boolean"),
        (0, "java.lang.Long"),
        (5, "java.lang.Long"),
        (2**70, "java.lang.Long"),
        (1.5, "java.lang.Double"),
        ("", "java.lang.String"),
        ("s", "java.lang.String"),
        ({}, "java.util.HashMap"),
        ({"a": 1}, "java.util.HashMap"),
        ([], "java.util.ArrayList"),
        ([1], "java.util.ArrayList"),
    ],
)
def test_java_class_name(value: object, name: str) -> None:
    assert java_class_name(value) == name


def test_java_class_name_rejects_values_json_converter_never_reads() -> None:
    with pytest.raises(TypeError):
        java_class_name((1, 2))
