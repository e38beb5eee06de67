"""Where a Spark write's stages run: the engine, chosen per write by the DataFrame's size.

* :class:`DriverEngine`: a DataFrame Spark sizes at most ``driver_max_bytes`` is read by the
  driver (the files of a bare Parquet scan with pyarrow, the rows of a ``createDataFrame``
  of local rows from their collection (``write/local_rows.py``), else collected by Spark
  with its own key hash), tagged by the same stage A and written in this process's
  threads: no Spark job's second of scheduling, shuffle and Python workers
  (``write/driver.py``).
* :class:`SparkTasksEngine`: the write's Spark job (:func:`tag_and_write`), collected.

Both read what they need before the scheme's assigners open (``prepare``: a new fleet's
actors start meanwhile) and return what was written with the number of shuffles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dynbucket.base.columns import BUCKET, HASH, IS_DELETE, OP, PARTITION
from dynbucket.format.file_group.writer import GroupWrites
from dynbucket.format.table.context import Operation, WriteContext
from dynbucket.format.table.spec import TableSpec
from dynbucket.write.assign_stage import ArrowFn, tagged_schema
from dynbucket.write.driver import collect_hashed, write_in_driver
from dynbucket.write.file_scan import read_scanned
from dynbucket.write.results import Laps
from dynbucket.write.write_stage import (
    InputErrors,
    carry_errors,
    from_rows,
    write_fn,
    written_schema,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class DriverEngine:
    """Small DataFrames in the driver (the module doc)."""

    def __init__(
        self,
        given: DataFrame,
        df: DataFrame,
        spec: TableSpec,
        file_stream: bool,
        required: Sequence[str] | None,
        local: list[pa.RecordBatch] | None = None,
    ) -> None:
        self.given, self.df, self.spec, self.file_stream = given, df, spec, file_stream
        self.required = required
        self._local = local
        self._batches: list[pa.RecordBatch] = []

    def prepare(self, op: Operation, laps: Laps) -> None:
        if self._local is not None:  # taken from the local rows it was created from
            self._batches = self._local
            return
        batches = read_scanned(self.given, self.spec, self.required, self.file_stream)
        if batches is not None:
            laps.lap("read")
        else:
            batches = collect_hashed(self.df, self.spec.record_key)
            laps.lap("collect")
        self._batches = batches

    def run(
        self,
        stage_a: ArrowFn,
        ctx: WriteContext,
        laps: Laps,
    ) -> tuple[GroupWrites, int]:
        written = write_in_driver(self._batches, stage_a, ctx)
        laps.lap("driver")
        return written, 0


class SparkTasksEngine:
    """The write's Spark job (the module doc)."""

    def __init__(self, df: DataFrame) -> None:
        self.df = df

    def prepare(self, op: Operation, laps: Laps) -> None:
        """Spark reads the DataFrame in its tasks."""

    def run(
        self,
        stage_a: ArrowFn,
        ctx: WriteContext,
        laps: Laps,
    ) -> tuple[GroupWrites, int]:
        job, shuffles, inputs = tag_and_write(self.df, stage_a, ctx)
        written = from_rows(job.collect())
        inputs.raise_any()  # a bad record fails the write once, whatever was written
        laps.lap("spark")
        return written, shuffles


def tag_and_write(
    df: DataFrame, stage_a: ArrowFn, ctx: WriteContext
) -> tuple[DataFrame, int, InputErrors]:
    """The Spark job of a write: keys hashed (``xxhash64``), stage A where the rows are, one
    shuffle by (partition, bucket), stage B; with its number of shuffles and the input
    errors its tasks find (raise them after the job: ``InputErrors.raise_any``)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    hashed = df.withColumn(HASH, F.xxhash64(*ctx.spec.record_key))
    moves = ctx.spec.scheme.keys_move
    if moves:  # every record of a key in one task: stage A keeps the newest (one per key)
        hashed = hashed.repartition(HASH)
    # Stage A turns the records' delete flag into ``_op``.
    kept = StructType([f for f in hashed.schema.fields if f.name != IS_DELETE])
    tagged_struct = with_fields(kept, [(PARTITION, "string"), (OP, "tinyint")])
    inputs = InputErrors(df.sparkSession)
    tagged = hashed.mapInArrow(carry_errors(stage_a, inputs), tagged_schema(tagged_struct, moves))
    stage_b = write_fn(ctx)
    job = tagged.repartition(PARTITION, BUCKET).mapInArrow(carry_errors(stage_b), written_schema())
    return job, 2 if moves else 1, inputs


def with_fields(schema: Any, extra: list[tuple[str, str]]) -> Any:
    """A Spark schema plus the non-null fields ``extra`` (name, DDL type)."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    out = StructType(list(schema.fields))
    for name, ddl in extra:
        out = out.add(name, _parse_datatype_string(ddl), nullable=False)
    return out
