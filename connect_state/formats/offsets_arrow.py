"""Offsets-topic keys read a column at a time: the connector a key names, from the prefix Connect writes, matched
with pyarrow's regex kernels; every key that does not match goes to :func:`connect_state.formats.offsets.
offset_key_connector`.

Connect writes a source partition's key as compact JSON, ``["<connector>",{...}]``. :func:`match_key_connectors`
recognises only the prefix ``["<connector>",{`` with a connector name of printable ASCII without ``"`` or ``\\`` (no
escapes), a narrower form than :func:`~connect_state.formats.offsets.offset_key_connector`'s own plain prefix, so that
for every key it accepts that function names the same connector (a property the unit tests check with Hypothesis). As
there, a key with this prefix may still be one Connect ignores: whoever folds the record parses it in full.

pyarrow only.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

KEY_PREFIX_PATTERN = r'^\["(?P<connector>[\x20\x21\x23-\x5b\x5d-\x7e]*)",\{'


@dataclass(frozen=True)
class KeyConnectors:
    """The keys :func:`match_key_connectors` accepted (``matched``, false for a null key) and, for those only, in the
    order of the input, the connector each names."""

    matched: pa.BooleanArray
    connector: pa.Array


def match_key_connectors(keys: pa.Array) -> KeyConnectors:
    """The connectors that offsets-topic ``keys`` (binary, nulls allowed) name, for the keys in Connect's plain form."""
    parts = pc.extract_regex(keys.cast(pa.binary()), KEY_PREFIX_PATTERN)
    matched = pc.fill_null(parts.is_valid(), False)
    connector = pc.struct_field(parts.filter(matched), "connector").cast(pa.string())
    return KeyConnectors(matched, connector)
