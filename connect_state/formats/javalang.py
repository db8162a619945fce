"""Java language semantics the formats mirror: int/long ranges and narrowing, Integer.parseInt/Long.parseLong, the
class names JsonConverter's values have, and the checks of a value written to a ``Struct`` field of a Java type.

Pure standard library.
"""

from __future__ import annotations

import math
import struct
import unicodedata
from collections.abc import Mapping

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "java_class_name",
    "java_int",
    "java_long",
    "java_parse_int",
    "java_parse_long",
    "java_trim",
    "require_int",
    "require_str",
]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

_JAVA_TRIMMED = "".join(chr(code) for code in range(0x21))


def java_trim(text: str) -> str:
    """``String.trim()``: removes the characters up to U+0020 at either end (not Unicode spaces)."""
    return text.strip(_JAVA_TRIMMED)


# ---------------------------------------------------------------------------------------------------------------------
# Narrowing casts
# ---------------------------------------------------------------------------------------------------------------------


def java_int(n: int) -> int:
    """The low 32 bits of ``n`` as a signed int, like Java's ``Long.intValue()`` / ``(int)`` cast."""
    n &= 0xFFFFFFFF
    return n - 0x1_0000_0000 if n > INT32_MAX else n


def java_long(n: int) -> int:
    """The low 64 bits of ``n`` as a signed long, like Java's ``BigInteger.longValue()``."""
    n &= 0xFFFFFFFFFFFFFFFF
    return n - 0x1_0000_0000_0000_0000 if n > INT64_MAX else n


# ---------------------------------------------------------------------------------------------------------------------
# Integer.parseInt / Long.parseLong
# ---------------------------------------------------------------------------------------------------------------------


def _java_decimal_digit(ch: str) -> int:
    """``Character.digit(ch, 10)`` for one UTF-16 unit: the value of a Unicode decimal digit, else -1."""
    if ord(ch) > 0xFFFF:
        return -1  # Java sees two surrogate units, neither of which is a digit
    return unicodedata.decimal(ch, -1)


_PARSE_RANGES = {32: (INT32_MIN, INT32_MAX, "int"), 64: (INT64_MIN, INT64_MAX, "long")}


def _parse_java_integer(text: str, bits: int) -> int:
    """``Integer.parseInt`` (``bits=32``) / ``Long.parseLong`` (``bits=64``): optional ``+``/``-``, then Unicode
    decimal digits, in the signed range of that width. Raises ``ValueError`` where Java throws
    ``NumberFormatException``.
    """
    low, high, width = _PARSE_RANGES[bits]
    if not text:
        raise ValueError("empty string")
    negative = text[0] == "-"
    digits = text[1:] if text[0] in "+-" else text
    if not digits:
        raise ValueError(f"sign without digits: {text!r}")
    value = 0
    for ch in digits:
        digit = _java_decimal_digit(ch)
        if digit < 0:
            raise ValueError(f"not a decimal digit: {ch!r}")
        value = value * 10 + digit
        if value > high + 1:
            raise ValueError(f"out of {width} range: {text!r}")
    value = -value if negative else value
    if not low <= value <= high:
        raise ValueError(f"out of {width} range: {text!r}")
    return value


def java_parse_int(text: str) -> int:
    """``Integer.parseInt(text)``: optional ``+``/``-``, then Unicode decimal digits, in the int32 range.

    Like Java, digits from any script count (``"١٢"`` is 12). Raises ``ValueError`` where Java throws
    ``NumberFormatException``.
    """
    return _parse_java_integer(text, 32)


def java_parse_long(text: str) -> int:
    """``Long.parseLong(text)``: optional ``+``/``-``, then Unicode decimal digits, in the int64 range.

    Raises ``ValueError`` where Java throws ``NumberFormatException``.
    """
    return _parse_java_integer(text, 64)


# ---------------------------------------------------------------------------------------------------------------------
# Class names
# ---------------------------------------------------------------------------------------------------------------------

_JAVA_CLASSES: tuple[tuple[type, str], ...] = (
    (bool, "java.lang.Boolean"),
    (int, "java.lang.Long"),
    (float, "java.lang.Double"),
    (str, "java.lang.String"),
    (dict, "java.util.HashMap"),
    (list, "java.util.ArrayList"),
)


def java_class_name(value: object) -> str:
    """``ConnectUtils.className(value)`` for a value ``JsonConverter`` read: ``"null"``, ``"java.lang.Long"``, ...

    ``JsonConverter`` reads every JSON integer as a ``Long``, every other number as a ``Double``, objects as
    ``HashMap`` and arrays as ``ArrayList``. Raises ``TypeError`` for anything else (not a value it reads).
    """
    if value is None:
        return "null"
    for python_type, java_name in _JAVA_CLASSES:
        if isinstance(value, python_type):
            return java_name
    raise TypeError(f"not a value JsonConverter reads: {type(value).__name__}")


def java_split_dash(text: str) -> list[str]:
    """``text.split("-")``: Java keeps leading empty strings and drops trailing ones (``"a-b--"`` gives a, b)."""
    parts = text.split("-")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def java_equality_key(value: object) -> object:
    """A hashable stand-in for ``equals``/``hashCode`` of a value ``JsonConverter`` read: maps compare unordered,
    lists in order; ``1`` (Long), ``1.0`` (Double) and ``true`` differ; doubles compare by bits (``0.0 != -0.0``).
    """
    if value is None or isinstance(value, str):
        return ("v", value)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("double", b"nan" if math.isnan(value) else struct.pack(">d", value))
    if isinstance(value, Mapping):
        return ("map", frozenset((name, java_equality_key(item)) for name, item in value.items()))
    if isinstance(value, (list, tuple)):
        return ("list", tuple(java_equality_key(item) for item in value))
    raise TypeError(f"not a value JsonConverter reads: {type(value).__name__}")


# ---------------------------------------------------------------------------------------------------------------------
# Values written to a Struct field
# ---------------------------------------------------------------------------------------------------------------------


def require_int(name: str, value: object, bits: int) -> int:
    """``value`` for a ``Struct`` field of type ``INT32`` or ``INT64`` (``bits``), else ValueError."""
    low, high, _ = _PARSE_RANGES[bits]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an int in [{low}, {high}], got {value!r}")
    return value


def require_str(name: str, value: object) -> str:
    """``value`` for a ``Struct`` field of type ``STRING``, else ValueError."""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, got {type(value).__name__}")
    return value
