"""Columns stamped with the time of the write that commits them (``recorded_at``, ``updated_at``, ``seen_at``...).

A writer's Spark plan should not carry the time itself: ``current_timestamp()`` becomes a literal of the batch's time,
Spark inlines timestamp literals into the Java code it generates, so every micro-batch's plan is new code, compiled by
Janino, loaded as new classes and compiled again by the JVM's JIT. So the plan carries a typed null marked by
:func:`write_time` (the same code every batch), and the write fills it: :func:`collect_stamped` where the rows are
collected for ``deltalake`` (a running job's small batches: the plan is the same code every batch), :func:`stamped`
in a Spark write (large batches, Databricks volumes: the time is planned as ``current_timestamp()`` there, a cost
spread over many rows).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

#: The column metadata key that marks a column :func:`write_time` made.
WRITE_TIME = "connect_state.write_time"


def write_time(name: str) -> Column:
    """Column ``name``: the time of the write that commits the row (a placeholder until :func:`stamped` or
    :func:`collect_stamped`)."""
    return F.lit(None).cast("timestamp").alias(name, metadata={WRITE_TIME: True})


def write_time_columns(frame: DataFrame) -> list[str]:
    """The columns of ``frame`` that :func:`write_time` made (from the analysed schema: no Spark job)."""
    return [field.name for field in frame.schema.fields if field.metadata.get(WRITE_TIME)]


def stamped(frame: DataFrame) -> DataFrame:
    """``frame`` with its :func:`write_time` columns set to ``current_timestamp()``, for a Spark write."""
    for name in write_time_columns(frame):
        frame = frame.withColumn(name, F.current_timestamp())
    return frame


def collect_stamped(frame: DataFrame) -> pa.Table:
    """``frame``'s rows (``toArrow()``) with its :func:`write_time` columns set to the current time."""
    names = write_time_columns(frame)
    table = frame.toArrow()
    return stamp_table(table, names, datetime.now(UTC))


def stamp_table(table: pa.Table, names: list[str], at: datetime) -> pa.Table:
    """``table`` with the columns ``names`` set to ``at`` in every row (each column keeps its Arrow type)."""
    for name in names:
        index = table.schema.get_field_index(name)
        if index < 0:  # absent, or more than one column of that name
            raise KeyError(f"no single column {name!r} to stamp in {table.schema.names}")
        field = table.schema.field(index).remove_metadata()  # the marker stays in the plan, not in the table
        table = table.set_column(index, field, pa.repeat(pa.scalar(at, type=field.type), table.num_rows))
    return table
