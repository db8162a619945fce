"""Topic-status records read a column at a time: the canonical form Connect writes, matched with pyarrow's regex
kernels; every record that does not match exactly goes to the exact parser (:mod:`connect_state.formats.status`).

``KafkaStatusBackingStore`` writes a topic status as compact JSON, fields in schema order::

    key   status-topic-<topic>:connector-<connector>
    value {"topic":{"name":"<topic>","connector":"<connector>","task":<int>,"discoverTimestamp":<long>}}

(``null`` for a tombstone). :func:`match_topic_statuses` recognises only that form, with printable ASCII names
without ``"`` or ``\\`` and numbers in plain decimal that fit their Java type, so that for every record it accepts the
exact parser gives the same key, task and timestamp (a property the unit tests check with Hypothesis). Anything else
(other record kinds, escapes, non-ASCII, whitespace, other field orders, numbers Connect would truncate) is left to
:func:`connect_state.formats.status.parse_status_record`.

pyarrow only.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

# Printable ASCII; in a JSON string also without the quote and the backslash (no escapes).
_KEY_TOPIC = r"[\x20-\x39\x3b-\x7e]+"  # up to the first ':'
_KEY_CONNECTOR = r"[\x20-\x7e]+"
_JSON_TEXT = r"[\x20\x21\x23-\x5b\x5d-\x7e]*"
_INT32 = r"0|-?[1-9][0-9]{0,8}"  # |n| < 10^9: an int, never truncated by Long.intValue()
_INT64 = r"0|-?[1-9][0-9]{0,17}"  # |n| < 10^18: a long

KEY_PATTERN = rf"^status-topic-(?P<topic>{_KEY_TOPIC}):connector-(?P<connector>{_KEY_CONNECTOR})$"
VALUE_PATTERN = (
    rf'^\{{"topic":\{{"name":"(?P<name>{_JSON_TEXT})","connector":"(?P<connector>{_JSON_TEXT})",'
    rf'"task":(?P<task>{_INT32}),"discoverTimestamp":(?P<ts>{_INT64})\}}\}}$'
)
# Longest value taken here; Jackson's string-length limits are far above it.
MAX_VALUE_BYTES = 65536


@dataclass(frozen=True)
class TopicStatusColumns:
    """The records :func:`match_topic_statuses` accepted (``matched``) and their fields, in the order of the input,
    only the accepted rows: ``task``/``discover_timestamp`` null for a tombstone."""

    matched: pa.BooleanArray
    connector: pa.Array
    topic: pa.Array
    task: pa.Array
    discover_timestamp: pa.Array


def match_topic_statuses(keys: pa.Array, values: pa.Array) -> TopicStatusColumns:
    """Recognise canonical topic-status records (binary ``keys`` and ``values``, nulls allowed) in bulk."""
    keys = keys.cast(pa.binary())
    values = values.cast(pa.binary())
    key_parts = pc.extract_regex(keys, KEY_PATTERN)
    value_parts = pc.extract_regex(values, VALUE_PATTERN)
    short = pc.less_equal(pc.binary_length(values), MAX_VALUE_BYTES)
    good_value = pc.or_kleene(pc.is_null(values), pc.and_kleene(value_parts.is_valid(), short))
    matched = pc.fill_null(pc.and_kleene(key_parts.is_valid(), good_value), False)
    key_parts = key_parts.filter(matched)
    value_parts = value_parts.filter(matched)
    return TopicStatusColumns(
        matched=matched,
        connector=pc.struct_field(key_parts, "connector").cast(pa.string()),
        topic=pc.struct_field(key_parts, "topic").cast(pa.string()),
        task=pc.struct_field(value_parts, "task").cast(pa.string()).cast(pa.int32()),
        discover_timestamp=pc.struct_field(value_parts, "ts").cast(pa.string()).cast(pa.int64()),
    )
