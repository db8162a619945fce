"""A MERGE of a batch's rows into a table, described once and run by Spark (:func:`connect_state.spark.delta_io.
merge_once`) or by ``deltalake`` (:func:`connect_state.tables.small_writes.merge_once`), whichever the batch's size
and the table's location call for (:meth:`connect_state.spark.foldjob.FoldWriter.merge_current`).

Conditions and values are SQL over the aliases ``t`` (the table) and ``s`` (the batch's rows) that both engines
parse alike: comparisons, ``AND``, ``NOT``, a boolean column (``s.removed``), string literals, backquoted names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class ClauseKind(StrEnum):
    MATCHED_DELETE = "matched_delete"
    MATCHED_UPDATE = "matched_update"
    NOT_MATCHED_INSERT = "not_matched_insert"


@dataclass(frozen=True)
class Clause:
    """One ``WHEN`` clause: ``values`` (column -> SQL) for an update or an insert; ``predicate`` narrows it."""

    kind: ClauseKind
    predicate: str | None = None
    values: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MergeSpec:
    """``MERGE INTO t USING s ON condition`` with its clauses, in order (the first that applies wins)."""

    condition: str
    clauses: tuple[Clause, ...]


def matched_delete(predicate: str | None = None) -> Clause:
    return Clause(ClauseKind.MATCHED_DELETE, predicate)


def matched_update(values: Mapping[str, str], predicate: str | None = None) -> Clause:
    return Clause(ClauseKind.MATCHED_UPDATE, predicate, dict(values))


def not_matched_insert(values: Mapping[str, str], predicate: str | None = None) -> Clause:
    return Clause(ClauseKind.NOT_MATCHED_INSERT, predicate, dict(values))


def source_values(columns: tuple[str, ...] | list[str]) -> dict[str, str]:
    """Every column set from the batch's row of the same name."""
    return {name: f"s.`{name}`" for name in columns}
