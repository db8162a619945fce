"""JSON exactly as Kafka Connect's internal converter reads and writes it.

Connect reads and writes its internal topics with ``org.apache.kafka.connect.json.JsonConverter`` configured with
``schemas.enable=false`` (spec §1). The bytes come from a plain Jackson ``ObjectMapper`` (``JsonSerializer``) and are
read back by another (``JsonDeserializer``, with ``ALLOW_LEADING_ZEROS_FOR_NUMBERS`` and
``USE_BIG_DECIMAL_FOR_FLOATS``). This module mirrors both directions, checked against Kafka 4.3.1 (Jackson 2.21):

* :func:`dumps` writes what ``JsonConverter.fromConnectData`` writes for a schemaless value.
* :func:`loads` returns what ``JsonConverter.toConnectData`` returns: ``dict``/``list``/``str``/``int``/``float``/
  ``bool``/``None``, with Jackson's acceptance rules (what it rejects raises :class:`JsonFormatError`).

It also holds the Java behaviours the formats depend on: ``new String(bytes, UTF_8)`` (:func:`decode_java_utf8`),
``Double.toString`` (:func:`java_double_to_string`),
``String.hashCode`` (:func:`java_string_hashcode`), ``Objects.hashCode`` of parsed values (:func:`java_hash_code`),
``java.util.HashMap`` iteration order (:func:`java_hashmap_order`, :func:`java_hashmap_order_by_hash`,
:func:`java_hashmap_ordered`), ``Object.toString`` of parsed values
(:func:`java_to_string`). The int32/int64 narrowing casts (:func:`java_int`, :func:`java_long`) live in
:mod:`connect_state.formats.javalang` and are re-exported here.

Pure standard library.
"""

from __future__ import annotations

import codecs
import functools
import json
import math
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

from connect_state.formats.javalang import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from connect_state.formats.javalang import java_int as java_int  # re-export
from connect_state.formats.javalang import java_long as java_long  # re-export

__all__ = [
    "JsonFormatError",
    "decode_java_utf8",
    "dumps",
    "java_double_to_string",
    "java_hash_code",
    "java_hashmap_order",
    "java_hashmap_order_by_hash",
    "java_hashmap_ordered",
    "java_int",
    "java_long",
    "java_string_hashcode",
    "java_to_string",
    "loads",
]


class JsonFormatError(ValueError):
    """Bytes that Connect's ``JsonConverter`` cannot read (Jackson throws, Connect raises ``DataException``)."""


# ---------------------------------------------------------------------------------------------------------------------
# Writing (JsonSerializer / Jackson UTF8JsonGenerator defaults)
# ---------------------------------------------------------------------------------------------------------------------

_SHORT_ESCAPES = {
    ord('"'): '\\"',
    ord("\\"): "\\\\",
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
}

# Characters Jackson's UTF8JsonGenerator escapes: '"', '\', controls, and every UTF-16 surrogate. Jackson 2.21 does not
# combine surrogate pairs (COMBINE_UNICODE_SURROGATES_IN_UTF8 is off), so a character outside the BMP such as U+1F600
# is written as the two escapes "\uD83D\uDE00"; a lone surrogate is escaped the same way.
_NEEDS_ESCAPE = re.compile('["\\\\\x00-\x1f\U00010000-\U0010ffff\ud800-\udfff]')


def _escape_match(match: re.Match[str]) -> str:
    code = ord(match.group())
    short = _SHORT_ESCAPES.get(code)
    if short is not None:
        return short
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 | (code >> 10):04X}\\u{0xDC00 | (code & 0x3FF):04X}"
    return f"\\u{code:04X}"


def _quote(text: str) -> str:
    return '"' + _NEEDS_ESCAPE.sub(_escape_match, text) + '"'


def _literal_text(value: object) -> str | None:
    """``null``, ``true`` or ``false`` for ``None``, ``True`` or ``False`` (JSON and ``String.valueOf`` agree); else
    ``None``.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return None


def _scalar_json(value: object) -> str:
    literal = _literal_text(value)
    if literal is not None:
        return literal
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"integer {value} does not fit a Java long")
        return str(value)
    if isinstance(value, float):
        text = java_double_to_string(value)
        # Jackson's QUOTE_NON_NUMERIC_NUMBERS (on by default) writes NaN and the infinities as strings.
        return text if math.isfinite(value) else '"' + text + '"'
    if isinstance(value, str):
        return _quote(value)
    raise TypeError(f"cannot write {type(value).__name__} as Connect JSON")


def _json_object_entries(mapping: Mapping[object, object]) -> list[tuple[str, object]]:
    entries: list[tuple[str, object]] = []
    for index, (key, item) in enumerate(mapping.items()):
        if not isinstance(key, str):
            raise TypeError(f"JSON object keys must be str, not {type(key).__name__}")
        entries.append((("," if index else "") + _quote(key) + ":", item))
    return entries


def _json_array_entries(items: Sequence[object]) -> list[tuple[str, object]]:
    return [("," if index else "", item) for index, item in enumerate(items)]


def _render_tree(
    value: object,
    object_entries: Callable[[Mapping[Any, object]], list[tuple[str, object]]],
    array_entries: Callable[[Sequence[object]], list[tuple[str, object]]],
    scalar: Callable[[object], str],
) -> str:
    """The text of a tree of mappings, lists/tuples and scalars: ``{...}`` and ``[...]`` around the entries a container
    gives (each a text written before a child, then the child), ``scalar(item)`` for every other item.

    An explicit stack instead of recursion, so that 1000 levels of nesting (what Jackson accepts) are fine.
    """
    out: list[str] = []
    stack: list[Iterator[tuple[str, object]]] = [iter([("", value)])]
    closers: list[str] = [""]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            out.append(closers.pop())
            continue
        prefix, item = entry
        out.append(prefix)
        if isinstance(item, Mapping):
            out.append("{")
            stack.append(iter(object_entries(item)))
            closers.append("}")
        elif isinstance(item, (list, tuple)):
            out.append("[")
            stack.append(iter(array_entries(item)))
            closers.append("]")
        else:
            out.append(scalar(item))
    return "".join(out)


def dumps(value: object) -> bytes:
    """Serialize ``value`` the way ``JsonConverter.fromConnectData`` (schemas disabled) does.

    Compact (no spaces), UTF-8, characters of the BMP other than controls written as-is, controls escaped with the
    short escapes or ``\\u00XX`` in uppercase hex, ``/`` not escaped, characters outside the BMP escaped as a surrogate
    pair, floats in ``Double.toString`` form. Dict keys are written in the dict's order: to mimic a ``HashMap`` that
    Connect parsed and re-serialised, order them with :func:`java_hashmap_ordered` first.
    Raises ``TypeError`` for values JSON cannot hold and ``ValueError`` for ints outside the Java long range.

    A value of only dicts with string keys, lists, tuples, strings, booleans, ``None`` and ints in the long range is
    written by the standard library's C encoder when its text is Jackson's (no ``\\u`` escape, no character outside the
    BMP); everything else, and any doubt, by the writer above (:func:`_dumps_exact`).
    """
    if _plain(value):
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except RecursionError:  # deep nesting: the writer above has no recursion
            return _dumps_exact(value)
        if "\\u" not in text and not _ASTRAL.search(text):
            return text.encode("utf-8")
    return _dumps_exact(value)


def _dumps_exact(value: object) -> bytes:
    """:func:`dumps` by Jackson's rules alone (the reference the plain path must equal)."""
    return _render_tree(value, _json_object_entries, _json_array_entries, _scalar_json).encode("utf-8", "surrogatepass")


_ASTRAL = re.compile("[\U00010000-\U0010ffff\ud800-\udfff]")
"""Characters Jackson escapes (as surrogate pairs) where the standard library's encoder writes them as is."""


def _plain(value: object) -> bool:
    """True when ``value`` holds only what the standard library's JSON writes as Jackson does: dicts with string keys,
    lists, tuples, strings, booleans, ``None`` and ints in the Java long range. Not floats (``Double.toString``), not
    subclasses (enums), not other mappings, not more than :data:`PLAIN_MAX_NODES` values (a value that contains itself
    goes to the exact writer, as before)."""
    pending = [value]
    budget = PLAIN_MAX_NODES
    while pending:
        budget -= 1
        if budget < 0:
            return False
        item = pending.pop()
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is int:
            if INT64_MIN <= item <= INT64_MAX:  # type: ignore[operator]
                continue
            return False
        if kind is dict:
            if not all(type(key) is str for key in item):  # type: ignore[attr-defined]
                return False
            pending.extend(item.values())  # type: ignore[attr-defined]
        elif kind is list or kind is tuple:
            pending.extend(item)  # type: ignore[arg-type]
        else:
            return False
    return True


# ---------------------------------------------------------------------------------------------------------------------
# Double.toString
# ---------------------------------------------------------------------------------------------------------------------


def _decimal_parts(value: float) -> tuple[str, int]:
    """Shortest round-tripping digits of a positive finite ``value`` and the exponent E of ``d.ddd x 10^E``."""
    mantissa, _, exponent = repr(value).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)  # the value is 0.<digits> x 10^point
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    stripped = stripped.rstrip("0")
    return stripped, point - 1


def _two_digit_candidate(value: float, digits: str, exp: int) -> tuple[str, int]:
    """When one digit suffices, Java (JDK 19+) takes the closest decimal of one or two digits that rounds to value.

    Example: Double.MIN_VALUE is "4.9E-324" in Java where Python's repr gives "5e-324".
    """
    exact = Decimal(value)
    step = Decimal(1).scaleb(exact.adjusted() - 1)  # two significant digits in the decade of the exact value
    candidates = [Decimal(int(digits) * 10).scaleb(exp - 1)]
    candidates += [exact.quantize(step, rounding=rounding) for rounding in (ROUND_FLOOR, ROUND_CEILING)]
    # Closest first; on a tie the one whose last digit is even.
    rounds_to_value = [c for c in candidates if float(c) == value]
    best = min(rounds_to_value, key=lambda c: (abs(c - exact), c.as_tuple().digits[-1] % 2))
    _, best_digits, best_exp = best.normalize().as_tuple()
    assert isinstance(best_exp, int)
    text = "".join(str(d) for d in best_digits)
    return text, best_exp + len(text) - 1


def java_double_to_string(value: float) -> str:
    """``Double.toString(value)`` as specified since JDK 19: the shortest decimal that rounds to the value.

    Plain notation for 1e-3 <= |value| < 1e7 (``0.001``, ``1.5``, ``1234567.0``), otherwise computerized scientific
    notation with at least one digit after the point (``1.0E7``, ``1.0E-4``, ``4.9E-324``).

    Checked equal to a JDK 25 on 50,000 random doubles. JDK 17 and older use the previous algorithm, which for about
    0.2% of random doubles prints a longer digit string that reads back as the same double (mostly integral values
    at or above 1e16, e.g. ``1.08508744060478368E17``; also ``8.0E23`` printed as ``7.999999999999999E23``). A
    Connect worker on such a JVM writes those forms; this function does not reproduce them.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    digits, exp = _decimal_parts(magnitude)
    if len(digits) == 1:
        digits, exp = _two_digit_candidate(magnitude, digits, exp)
    if -3 <= exp < 7:
        if exp >= 0:
            whole = digits[: exp + 1].ljust(exp + 1, "0")
            fraction = digits[exp + 1 :] or "0"
        else:
            whole = "0"
            fraction = "0" * (-exp - 1) + digits
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp}"


# ---------------------------------------------------------------------------------------------------------------------
# Reading (JsonDeserializer: Jackson UTF8StreamJsonParser + JsonConverter.convertToConnect)
# ---------------------------------------------------------------------------------------------------------------------

# Jackson 2.21 StreamReadConstraints defaults, as observed from Connect 4.3.1.
MAX_NESTING_DEPTH = 1000
MAX_NUMBER_DIGITS = 1000
MAX_NAME_LENGTH = 50_000
MAX_STRING_LENGTH = 20_000_000

_WHITESPACE = b" \t\n\r"
_UTF8_BOM = b"\xef\xbb\xbf"
_NUMBER = re.compile(rb"-?([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?)([0-9]+))?")
_PLAIN_STRING = re.compile(rb'[^"\\\x00-\x1f]*')
_SIMPLE_ESCAPES = {ord('"'): '"', ord("\\"): "\\", ord("/"): "/", ord("b"): "\b", ord("f"): "\f", ord("n"): "\n"}
_SIMPLE_ESCAPES.update({ord("r"): "\r", ord("t"): "\t"})
_HEX4 = re.compile(rb"[0-9A-Fa-f]{4}")
_LITERALS = ((b"true", True), (b"false", False), (b"null", None))
_IDENTIFIER_PART_ASCII = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz\x7f")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _fail(message: str, pos: int) -> JsonFormatError:
    return JsonFormatError(f"{message} at byte {pos}")


def _skip_whitespace(data: bytes, pos: int) -> int:
    while pos < len(data) and data[pos] in _WHITESPACE:
        pos += 1
    return pos


def _units_to_str(units: list[int]) -> str:
    return struct.pack(f"<{len(units)}H", *units).decode("utf-16-le", "surrogatepass")


def _decode_like_jackson(chunk: bytes, start: int) -> str:
    """Jackson's lenient UTF-8 decoding of string contents, used only when strict decoding fails.

    Jackson checks that lead and continuation bytes are well-formed and rejects encoded surrogates, but does not reject
    overlong forms (``C0 A2`` reads as ``"``) nor values above U+10FFFF (they turn into two odd UTF-16 units).
    """
    units: list[int] = []
    i = 0
    while i < len(chunk):
        lead = chunk[i]
        if lead < 0x80:
            units.append(lead)
            i += 1
            continue
        if lead & 0xE0 == 0xC0:
            needed, code = 1, lead & 0x1F
        elif lead & 0xF0 == 0xE0:
            needed, code = 2, lead & 0x0F
        elif lead & 0xF8 == 0xF0:
            needed, code = 3, lead & 0x07
        else:
            raise _fail(f"Invalid UTF-8 start byte 0x{lead:02x}", start + i)
        for k in range(1, needed + 1):
            if i + k >= len(chunk) or chunk[i + k] & 0xC0 != 0x80:
                raise _fail("Invalid UTF-8 middle byte", start + i + k)
            code = (code << 6) | (chunk[i + k] & 0x3F)
        if needed == 2 and 0xD800 <= code <= 0xDFFF:
            raise _fail("Invalid UTF-8: encoded surrogate", start + i)
        if needed == 3:
            code -= 0x10000
            units.append((0xD800 | (code >> 10)) & 0xFFFF)
            units.append(0xDC00 | (code & 0x3FF))
        else:
            units.append(code)
        i += needed + 1
    return _units_to_str(units)


def _exceeds_utf16_length(text: str, limit: int) -> bool:
    """Whether ``text`` is longer than ``limit`` Java chars (a character outside the BMP counts twice)."""
    if 2 * len(text) <= limit:
        return False
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF) > limit


def _parse_string(data: bytes, pos: int, limit: int) -> tuple[str, int]:
    """Parse the string whose opening quote is at ``pos - 1``; return it and the position after the closing quote."""
    pieces: list[str] = []
    while True:
        match = _PLAIN_STRING.match(data, pos)
        assert match is not None
        chunk = match.group()
        try:
            pieces.append(chunk.decode("utf-8"))
        except UnicodeDecodeError:
            pieces.append(_decode_like_jackson(chunk, pos))
        pos = match.end()
        if pos >= len(data):
            raise _fail("Unexpected end-of-input in a string", pos)
        byte = data[pos]
        if byte == 0x22:  # closing quote
            pos += 1
            break
        if byte != 0x5C:
            raise _fail(f"Illegal unquoted character 0x{byte:02x} in a string", pos)
        if pos + 1 >= len(data):
            raise _fail("Unexpected end-of-input in an escape", pos)
        escape = data[pos + 1]
        if escape == 0x75:  # \uXXXX
            hex_match = _HEX4.match(data, pos + 2)
            if hex_match is None:
                raise _fail("Invalid \\u escape", pos)
            pieces.append(chr(int(hex_match.group(), 16)))
            pos = hex_match.end()
        elif escape in _SIMPLE_ESCAPES:
            pieces.append(_SIMPLE_ESCAPES[escape])
            pos += 2
        else:
            raise _fail(f"Unrecognized character escape 0x{escape:02x}", pos)
    text = "".join(pieces)
    if _SURROGATES.search(text):
        # Java strings are UTF-16: an escaped or decoded high+low pair is one character. Lone surrogates stay.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if _exceeds_utf16_length(text, limit):
        raise _fail(f"String length exceeds the maximum of {limit}", pos)
    return text, pos


def _parse_number(data: bytes, pos: int) -> tuple[int | float, int]:
    """Parse a number at ``pos``; return it (``int`` if integral, else ``float``) and the end position."""
    match = _NUMBER.match(data, pos)
    if match is None:
        raise _fail("Invalid number", pos)
    end = match.end()
    if end < len(data) and data[end] in b".eE":
        raise _fail("Invalid number: '.' or exponent not followed by a digit", end)
    whole, fraction, exp_sign, exponent = match.groups()
    if fraction is None and exponent is None:
        if len(whole) > MAX_NUMBER_DIGITS:
            raise _fail(f"Number length exceeds the maximum of {MAX_NUMBER_DIGITS}", pos)
        # JsonConverter reads every integral number as a Long: BigInteger.longValue() keeps the low 64 bits.
        return java_long(int(match.group())), end
    digit_count = len(whole) + len(fraction or b"") + len(exponent or b"")
    if digit_count > MAX_NUMBER_DIGITS:
        raise _fail(f"Number length exceeds the maximum of {MAX_NUMBER_DIGITS}", pos)
    exp_value = int(exponent or b"0") * (-1 if exp_sign == b"-" else 1)
    scale = len(fraction or b"") - exp_value
    if not (INT32_MIN <= exp_value <= INT32_MAX and INT32_MIN <= scale <= INT32_MAX):
        raise _fail("Number exponent out of range for BigDecimal", pos)
    token = match.group().decode("ascii")
    if not any(c in "123456789" for c in (whole + (fraction or b"")).decode("ascii")):
        # The BigDecimal that Jackson builds has no negative zero: "-0.0" reads as 0.0.
        return 0.0, end
    return float(token), end


_TOKEN = re.compile(rb"[A-Za-z0-9_$]{1,100}")


def _unrecognized_token(data: bytes, pos: int) -> JsonFormatError:
    """Jackson's "Unrecognized token 'invalid'" for a word where a value should start."""
    match = _TOKEN.match(data, pos)
    token = match.group().decode("ascii") if match else ""
    return _fail(f"Unrecognized token '{token}'", pos)


def _parse_literal(data: bytes, pos: int) -> tuple[object, int]:
    for text, value in _LITERALS:
        if data.startswith(text, pos):
            return value, pos + len(text)
    raise _unrecognized_token(data, pos)


def _check_after_root_scalar(data: bytes, end: int, was_number: bool) -> None:
    """Jackson's checks on what follows a root number or true/false/null (what follows other values is ignored).

    A root number must be followed by whitespace or the end of input (``_verifyRootSpace``). A root literal must not
    run into a Java identifier character (``_checkMatchEnd``); Jackson fails on any non-ASCII byte there.
    """
    if end >= len(data):
        return
    following = data[end]
    if was_number:
        if following not in _WHITESPACE:
            raise _fail("Expected space separating root-level values", end)
    elif following >= 0x80 or following in _IDENTIFIER_PART_ASCII:
        raise _fail("Unrecognized token: a literal runs into another character", end)


def _parse_key(data: bytes, pos: int) -> tuple[str, int]:
    pos = _skip_whitespace(data, pos)
    if pos >= len(data) or data[pos] != 0x22:
        raise _fail("Expected a double-quoted field name", pos)
    key, pos = _parse_string(data, pos + 1, MAX_NAME_LENGTH)
    pos = _skip_whitespace(data, pos)
    if pos >= len(data) or data[pos] != 0x3A:
        raise _fail("Expected ':' after a field name", pos)
    return key, pos + 1


def _parse_document(data: bytes, pos: int) -> object:
    """An iterative parser (no recursion, so 1000 levels of nesting are fine)."""
    stack: list[list[object] | dict[str, object]] = []
    keys: list[str] = []
    while True:
        # Parse one value starting at pos (after whitespace).
        pos = _skip_whitespace(data, pos)
        if pos >= len(data):
            raise _fail("Unexpected end-of-input", pos)
        byte = data[pos]
        value: object
        if byte in b"[{":
            if len(stack) + 1 > MAX_NESTING_DEPTH:
                raise _fail(f"Nesting depth exceeds the maximum of {MAX_NESTING_DEPTH}", pos)
            pos = _skip_whitespace(data, pos + 1)
            closing = 0x5D if byte == 0x5B else 0x7D
            if pos < len(data) and data[pos] == closing:
                value, pos = ([] if byte == 0x5B else {}), pos + 1
            elif byte == 0x5B:
                stack.append([])
                continue
            else:
                stack.append({})
                key, pos = _parse_key(data, pos)
                keys.append(key)
                continue
        elif byte == 0x22:
            value, pos = _parse_string(data, pos + 1, MAX_STRING_LENGTH)
        elif byte == 0x2D or 0x30 <= byte <= 0x39:
            value, pos = _parse_number(data, pos)
            if not stack:
                _check_after_root_scalar(data, pos, was_number=True)
        elif byte in b"tfn":
            value, pos = _parse_literal(data, pos)
            if not stack:
                _check_after_root_scalar(data, pos, was_number=False)
        elif _TOKEN.match(data, pos):
            raise _unrecognized_token(data, pos)
        else:
            raise _fail(f"Unexpected character 0x{byte:02x}", pos)

        # Attach the value to its container; close containers; stop at the end of the root value.
        while True:
            if not stack:
                return value
            container = stack[-1]
            if isinstance(container, list):
                container.append(value)
            else:
                container[keys[-1]] = value  # a duplicate key: the last value wins, as in Jackson's ObjectNode
            pos = _skip_whitespace(data, pos)
            if pos >= len(data):
                raise _fail("Unexpected end-of-input in a container", pos)
            byte = data[pos]
            if byte == 0x2C:
                pos += 1
                if isinstance(container, dict):
                    keys[-1], pos = _parse_key(data, pos)
                break
            if byte == (0x5D if isinstance(container, list) else 0x7D):
                pos += 1
                value = stack.pop()
                if isinstance(value, dict):
                    keys.pop()
                continue
            raise _fail(f"Unexpected character 0x{byte:02x} in a container", pos)


def loads(data: bytes | bytearray | memoryview) -> object:
    """Read ``data`` the way ``JsonConverter.toConnectData`` (schemas disabled) reads it; return the Connect value.

    * Objects become ``dict`` (document order; duplicate keys: the last value wins), arrays ``list``.
    * Integral numbers become ``int`` truncated to a Java long (Connect's ``Long``); numbers with a fraction or an
      exponent become ``float`` (Connect's ``Double``, via ``BigDecimal``: ``-0.0`` reads as ``0.0``, ``1e400`` as
      ``inf``). Leading zeros are accepted (``007`` is 7). ``NaN``/``Infinity`` are rejected.
    * Empty or whitespace-only input is ``None``, like a JSON ``null`` (Jackson returns a missing node).
    * Only the first value is read: anything after a root object, array or string is ignored, as Jackson does
      without ``FAIL_ON_TRAILING_TOKENS``. A root number must be followed by whitespace or the end.
    * A leading UTF-8 byte order mark is skipped. Jackson's detection of UTF-16/UTF-32 input is not mirrored: such
      input is rejected here although Connect would read it.

    Raises :class:`JsonFormatError` for anything Jackson rejects.

    What Connect writes (a compact object or array, no escapes, no floats, at most :data:`PLAIN_MAX_BYTES`) is read by
    the standard library's C parser (:func:`_loads_plain`); everything else, and any doubt, by the reader below
    (:func:`_loads_exact`), as the issue 11 parse lever asks.
    """
    raw = bytes(data)
    value = _loads_plain(raw)
    return _loads_exact(raw) if value is _NOT_PLAIN else value


PLAIN_MAX_NODES = 100_000
"""Values with more nodes than this are written by :func:`_dumps_exact`."""

PLAIN_MAX_BYTES = 16_384
"""Documents longer than this always go through :func:`_loads_exact`: well under Jackson's limits on a field name's
length (50,000) and a string's, so the two readers cannot differ on those."""
PLAIN_MAX_CONTAINERS = 256
"""Documents with more ``{`` and ``[`` bytes than this go through :func:`_loads_exact` (Jackson's nesting limit)."""
_NOT_PLAIN = object()


def _loads_plain(raw: bytes) -> object:
    """The value of ``raw`` read by the standard library, or ``_NOT_PLAIN`` when the two readers might differ: a root
    that is not an object or array, a backslash (escapes: lone surrogates, Jackson's rules on escaped characters), bytes
    that are not strict UTF-8, leading zeros, trailing content or anything else ``json`` refuses, floats, ``NaN`` and
    the infinities, ints outside the long range (anywhere in the document, a value a repeated key replaces included),
    deep or long documents."""
    if (
        len(raw) > PLAIN_MAX_BYTES
        or raw[:1] not in (b"{", b"[")
        or b"\\" in raw
        or raw.count(b"{") + raw.count(b"[") > PLAIN_MAX_CONTAINERS
    ):
        return _NOT_PLAIN
    try:
        return _PLAIN_DECODER.decode(raw.decode("utf-8"))
    except (ValueError, RecursionError, _NotPlainError):  # UnicodeDecodeError is a ValueError
        return _NOT_PLAIN


class _NotPlainError(Exception):
    """A number the plain path leaves to the exact reader (raised from the decoder's hooks, so that a value a repeated
    key replaces is checked too)."""


def _plain_long(text: str) -> int:
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise _NotPlainError(text)
    return value


def _not_plain(text: str) -> object:
    raise _NotPlainError(text)


_PLAIN_DECODER = json.JSONDecoder(parse_int=_plain_long, parse_float=_not_plain, parse_constant=_not_plain)


def _loads_exact(raw: bytes) -> object:
    """:func:`loads` by Jackson's rules alone (the reference the plain path must equal)."""
    pos = 0
    if raw.startswith(_UTF8_BOM):
        if len(raw) == len(_UTF8_BOM):
            raise _fail("Unexpected end-of-input after a byte order mark", len(raw))
        pos = len(_UTF8_BOM)
    pos = _skip_whitespace(raw, pos)
    if pos >= len(raw):
        return None
    return _parse_document(raw, pos)


# ---------------------------------------------------------------------------------------------------------------------
# new String(bytes, UTF_8)
# ---------------------------------------------------------------------------------------------------------------------


def _java_utf8_replace(error: UnicodeError) -> tuple[str, int]:
    """Replace a malformed UTF-8 sequence by one U+FFFD, covering as many bytes as Java's decoder does.

    Python and Java agree (one U+FFFD per maximal invalid subpart) except for an encoded surrogate, ``ED A0..BF``:
    Java takes ``ED`` as an ordinary 3-byte lead and replaces the two or three bytes with a single U+FFFD.
    """
    assert isinstance(error, UnicodeDecodeError)
    data, start = error.object, error.start
    if data[start] == 0xED and start + 1 < len(data) and 0xA0 <= data[start + 1] <= 0xBF:
        if start + 2 < len(data) and data[start + 2] & 0xC0 == 0x80:
            return "\ufffd", start + 3
        return "\ufffd", start + 2
    return "\ufffd", error.end


_JAVA_UTF8_ERRORS = "connect_state.java_utf8_replace"
codecs.register_error(_JAVA_UTF8_ERRORS, _java_utf8_replace)


def decode_java_utf8(data: bytes) -> str:
    """``new String(data, UTF_8)``, as Kafka's ``StringDeserializer`` does: malformed input becomes U+FFFD.

    Used for the keys of the status and config topics.
    """
    return bytes(data).decode("utf-8", _JAVA_UTF8_ERRORS)


# ---------------------------------------------------------------------------------------------------------------------
# java.lang.String.hashCode, java.util.HashMap iteration order, Object.toString
# ---------------------------------------------------------------------------------------------------------------------


def java_string_hashcode(text: str) -> int:
    """``String.hashCode()``: ``h = 31*h + c`` over the UTF-16 code units, wrapped to a signed int32 (kept per
    string up to :data:`HASHCODE_CACHE_MAX_CHARS` characters: a map's few key names repeat in every record)."""
    if len(text) <= HASHCODE_CACHE_MAX_CHARS:
        return _kept_string_hashcode(text)
    return _string_hashcode(text)


HASHCODE_CACHE_MAX_CHARS = 256


@functools.lru_cache(maxsize=65_536)
def _kept_string_hashcode(text: str) -> int:
    return _string_hashcode(text)


def _string_hashcode(text: str) -> int:
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return java_int(h)


_HASHMAP_INITIAL_CAPACITY = 16
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64


def _spread_hash(hash_code: int) -> int:
    h = hash_code & 0xFFFFFFFF
    return h ^ (h >> 16)


def java_hash_code(value: object, *, ints_as_integer: bool = False) -> int:
    """``Objects.hashCode`` of a value :func:`loads` returns (``JsonConverter``'s ``HashMap``, ``ArrayList``, ``Long``,
    ``Double``, ``String``, ``Boolean``, null): what a ``HashMap`` keyed by such values buckets on.

    ``ints_as_integer``: the value as Jackson binds it to ``Object`` instead (an integer in int range is an
    ``Integer``, whose hash is itself; ``Long.hashCode`` of a negative int differs)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return java_string_hashcode(value)
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if ints_as_integer and INT32_MIN <= value <= INT32_MAX:
            return value
        bits = java_long(value) & 0xFFFFFFFFFFFFFFFF
        return java_int(bits ^ (bits >> 32))
    if isinstance(value, float):
        bits = 0x7FF8000000000000 if math.isnan(value) else struct.unpack(">Q", struct.pack(">d", value))[0]
        return java_int(bits ^ (bits >> 32))
    if isinstance(value, Mapping):
        total = 0
        for key, item in value.items():
            total += java_hash_code(key) ^ java_hash_code(item, ints_as_integer=ints_as_integer)
        return java_int(total)
    if isinstance(value, (list, tuple)):
        h = 1
        for item in value:
            h = 31 * h + java_hash_code(item, ints_as_integer=ints_as_integer)
        return java_int(h)
    raise TypeError(f"not a value JsonConverter reads: {type(value).__name__}")


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of ``new HashMap<>()`` after ``put`` of each key in turn (spec §4.3).

    Buckets are ``spread(hashCode) & (capacity - 1)``; capacity starts at 16 and doubles when the size exceeds 0.75 x
    capacity, and also when a bucket reaches 9 entries while the capacity is below 64 (``treeifyBin`` resizes instead
    of building a tree). Iteration goes through the buckets in ascending order and, within a bucket, in insertion
    order (resizing splits buckets preserving relative order). A repeated key keeps its first position.
    A bucket that Java would turn into a red-black tree (9+ keys in one bucket at capacity >= 64) has an order this
    function does not model: it raises ``ValueError`` rather than guess.
    """
    return list(_java_hashmap_order(tuple(keys)))


@functools.lru_cache(maxsize=4096)
def _java_hashmap_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """:func:`java_hashmap_order`, once per sequence of keys (the maps of one kind, a connector's source partitions,
    share theirs)."""
    distinct = list(dict.fromkeys(keys))
    if len(distinct) < 2:
        return tuple(distinct)
    return tuple(distinct[i] for i in java_hashmap_order_by_hash([java_string_hashcode(key) for key in distinct]))


def java_hashmap_order_by_hash(hash_codes: Sequence[int]) -> list[int]:
    """The indices of distinct keys with these ``hashCode`` values, put in turn into a ``new HashMap<>()``, in the
    map's iteration order (see :func:`java_hashmap_order`; raises ``ValueError`` for a tree bin)."""
    spreads = [_spread_hash(code) for code in hash_codes]
    bucket_sizes: dict[int, int] = {}
    capacity = _HASHMAP_INITIAL_CAPACITY
    for count, spread in enumerate(spreads, start=1):
        bucket = spread & (capacity - 1)
        bucket_sizes[bucket] = bucket_sizes.get(bucket, 0) + 1
        resized = False
        if bucket_sizes[bucket] > _TREEIFY_THRESHOLD:
            if capacity >= _MIN_TREEIFY_CAPACITY:
                raise ValueError("HashMap order with a tree bin (9+ colliding keys) is not modelled")
            capacity *= 2
            resized = True
        if count > capacity * 3 // 4:
            capacity *= 2
            resized = True
        if resized:
            bucket_sizes = {}
            for spread_value in spreads[:count]:
                b = spread_value & (capacity - 1)
                bucket_sizes[b] = bucket_sizes.get(b, 0) + 1
    final_capacity = capacity
    return sorted(range(len(spreads)), key=lambda i: spreads[i] & (final_capacity - 1))


def _shallow_copy(value: object) -> object:
    if isinstance(value, Mapping):
        return {key: value[key] for key in java_hashmap_order(list(value))}
    if isinstance(value, list):
        return list(value)
    return value


def java_hashmap_ordered(value: object) -> object:
    """A copy of a parsed value whose dicts (at every depth) iterate in Java ``HashMap`` order.

    ``JsonConverter`` turns every JSON object into a ``HashMap``, so this is the order Connect uses when it
    re-serialises what it has read (e.g. source partitions in the offsets topic, spec §4.3).
    """
    root = _shallow_copy(value)
    pending = [root]
    while pending:
        container = pending.pop()
        if isinstance(container, dict):
            slots: Iterable[tuple[object, object]] = list(container.items())
        elif isinstance(container, list):
            slots = list(enumerate(container))
        else:
            continue
        for slot, child in slots:
            if isinstance(child, (Mapping, list)):
                copied = _shallow_copy(child)
                container[slot] = copied  # type: ignore[call-overload]
                pending.append(copied)
    return root


def _scalar_to_string(value: object) -> str:
    if isinstance(value, float):
        return java_double_to_string(value)
    return _literal_text(value) or str(value)


def _map_to_string_entries(mapping: Mapping[str, object]) -> list[tuple[str, object]]:
    """``AbstractMap.toString`` entries ``k=v`` separated by ``", "``, in ``HashMap`` order."""
    keys = java_hashmap_order(list(mapping))
    return [((", " if i else "") + f"{key}=", mapping[key]) for i, key in enumerate(keys)]


def _list_to_string_entries(items: Sequence[object]) -> list[tuple[str, object]]:
    return [(", " if i else "", child) for i, child in enumerate(items)]


def java_to_string(value: object) -> str:
    """``String.valueOf`` of a value read by :func:`loads`, as Connect's log messages print it.

    ``null``, ``true``, ``12``, ``1.0E7``, ``[a, b]`` (``ArrayList``), ``{k=v, k2=v2}`` (``HashMap``, HashMap order).
    """
    return _render_tree(value, _map_to_string_entries, _list_to_string_entries, _scalar_to_string)
