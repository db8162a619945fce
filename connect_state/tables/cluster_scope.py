"""One Connect cluster's rows of a table the fleet shares (issue 37, the shared layout): the ``cluster`` partition
column, and every write and read of a table narrowed to one cluster's partition. Pure: SQL text and Arrow tables in and
out; both engines run the result (:mod:`connect_state.tables.merge_spec`).

Today each cluster's tables are its own (``<delta.root>/clusters/<id>``, :mod:`connect_state.core.clusters`). In the
shared layout every cluster writes one table of each name, partitioned by :data:`CLUSTER_COLUMN`. Two rules keep the
clusters apart there, and keep their writers from conflicting:

- **Every statement names its partition as a literal.** A MERGE's condition starts with ``t.`cluster` = '<id>'``
  (:meth:`ClusterScope.merge`), a DELETE's or an UPDATE's predicate with ``cluster = '<id>'``
  (:meth:`ClusterScope.narrow`). Without it a MERGE keyed by connector name matches another cluster's connector of
  the same name and updates it. With it, delta-spark and delta-rs both see that a commit by another cluster's writer
  meanwhile added or removed only files of another partition, and commit instead of failing with a concurrent-append
  conflict (delta-spark's documented remedy: "make the partition separation explicit in the merge condition").
  delta-spark needs the literal: it reads a MERGE's partitions from its condition's literal predicates only.
  delta-rs also narrows by ``t.cluster = s.cluster`` when the batch is in memory (it derives a predicate from the
  batch's values), but not by a key alone. ``tests/spark/test_delta_conflicts.py`` and
  ``tests/unit/test_cluster_scope.py`` hold both engines to this, each with the control that conflicts.
- **Every row written carries its cluster.** An insert sets the column to the literal, an append adds it
  (:meth:`ClusterScope.rows`); an update never changes it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

import pyarrow as pa

from connect_state.core.clusters import CLUSTER_ID, CLUSTER_ID_RULE
from connect_state.core.errors import ConfigError
from connect_state.tables.merge_spec import Clause, ClauseKind, MergeSpec
from connect_state.tables.schemas import TableSpec

__all__ = ["CLUSTER_COLUMN", "ClusterScope", "check_shared_partitioning", "shared_schema"]

#: The partition column of a shared table: the id of the Connect cluster a row belongs to.
CLUSTER_COLUMN = "cluster"


def shared_schema(spec: TableSpec) -> pa.Schema:
    """``spec``'s schema with :data:`CLUSTER_COLUMN` first (a non-null string): the schema of its shared table."""
    if CLUSTER_COLUMN in spec.schema.names:
        raise ValueError(f"the {spec.name} table already has a {CLUSTER_COLUMN!r} column")
    return spec.schema.insert(0, pa.field(CLUSTER_COLUMN, pa.string(), nullable=False))


class _Partitioned(Protocol):
    def metadata(self) -> Any: ...


def check_shared_partitioning(table: _Partitioned, scope: ClusterScope) -> None:
    """ConfigError for a table with a :data:`CLUSTER_COLUMN` partition and others besides: one cluster's rows of it
    are not one partition's files, so ``scope``'s reads would serve other clusters' rows."""
    columns = list(table.metadata().partition_columns)
    if CLUSTER_COLUMN in columns and columns != [CLUSTER_COLUMN]:
        raise ConfigError(
            f"cluster {scope.cluster_id}: the table is partitioned by {', '.join(columns)}; a table the clusters share "
            f"is partitioned by {CLUSTER_COLUMN} alone"
        )


@dataclass(frozen=True)
class ClusterScope:
    """The rows of one cluster (``cluster_id``) in a shared table; see the module's rules."""

    cluster_id: str

    def __post_init__(self) -> None:
        if not CLUSTER_ID.fullmatch(self.cluster_id):
            # The id goes into SQL as a literal: the rule (no quote, no space) is what keeps that text plain.
            raise ConfigError(f"{CLUSTER_ID_RULE}, got {self.cluster_id!r}")

    @property
    def literal(self) -> str:
        """The id as a SQL string literal."""
        return f"'{self.cluster_id}'"

    def predicate(self, alias: str | None = None) -> str:
        """``[alias.]`cluster` = '<id>'``: the partition's rows."""
        column = f"`{CLUSTER_COLUMN}`" if alias is None else f"{alias}.`{CLUSTER_COLUMN}`"
        return f"{column} = {self.literal}"

    def narrow(self, predicate: str | None = None, alias: str | None = None) -> str:
        """``predicate`` (a DELETE's, an UPDATE's, a read's filter; None: every row) within the partition."""
        return self.predicate(alias) if predicate is None else f"{self.predicate(alias)} AND ({predicate})"

    def merge(self, spec: MergeSpec) -> MergeSpec:
        """``spec`` within the partition: its condition narrowed on the table's side (alias ``t``), its inserts
        setting the cluster. Its updates and deletes only reach matched rows, so they stay in the partition."""
        return MergeSpec(self.narrow(spec.condition, "t"), tuple(self._clause(clause) for clause in spec.clauses))

    def _clause(self, clause: Clause) -> Clause:
        if CLUSTER_COLUMN in clause.values:
            raise ValueError(f"a MERGE clause sets {CLUSTER_COLUMN!r} itself: {clause}")
        if clause.kind is ClauseKind.NOT_MATCHED_INSERT:
            return replace(clause, values={CLUSTER_COLUMN: self.literal, **clause.values})
        return clause

    def rows(self, rows: pa.Table) -> pa.Table:
        """``rows`` with :data:`CLUSTER_COLUMN` first, set to the id: an append's rows for the shared table."""
        if CLUSTER_COLUMN in rows.column_names:
            raise ValueError(f"rows to append already have a {CLUSTER_COLUMN!r} column")
        column = pa.array([self.cluster_id] * rows.num_rows, pa.string())
        return rows.add_column(0, pa.field(CLUSTER_COLUMN, pa.string(), nullable=False), column)
