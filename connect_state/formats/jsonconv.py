"""JSON exactly as Kafka Connect's internal converter reads and writes it.

Connect reads and writes its internal topics with ``org.apache.kafka.connect.json.JsonConverter`` configured with
``schemas.enable=false`` (``connect/json/src/main/java/org/apache/kafka/connect/json/JsonConverter.java``, created by
``Worker``). The bytes come from a plain Jackson ``ObjectMapper`` (``JsonSerializer``) and are read back by another
(``JsonDeserializer``, with ``ALLOW_LEADING_ZEROS_FOR_NUMBERS`` and ``USE_BIG_DECIMAL_FOR_FLOATS``). This module
mirrors both directions, checked against Kafka 4.3.1 (Jackson 2.21):

* :func:`dumps` writes what ``JsonConverter.fromConnectData`` writes for a schemaless value.
* :func:`loads` returns what ``JsonConverter.toConnectData`` returns: ``dict``/``list``/``str``/``int``/``float``/
  ``bool``/``None``, with Jackson's acceptance rules (what it rejects raises :class:`JsonFormatError`).
* :func:`java_to_string` prints a value it read as Connect's log messages do (``Object.toString``).

The other Java behaviours the formats depend on (``Double.toString``, ``String.hashCode``, ``HashMap`` order,
``new String(bytes, UTF_8)``, narrowing casts) live in :mod:`connect_state.formats.javalang`.

Pure standard library.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from connect_state.formats.javalang import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    java_double_to_string,
    java_hashmap_order,
    java_long,
)

__all__ = [
    "JsonFormatError",
    "dumps",
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
# Object.toString
# ---------------------------------------------------------------------------------------------------------------------


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
