"""Where a Spark write's stages run: the engine, chosen per write by the DataFrame's size.

* :class:`DriverEngine`: a DataFrame Spark sizes at most ``driver_max_bytes`` is read by the
  driver (the files of a bare Parquet scan with pyarrow, the rows of a ``createDataFrame``
  of local rows from their collection (``write/local_rows.py``), else collected by Spark
  with its own key hash), tagged by the same stage A and written in this process's
  threads: no Spark job's second of scheduling, shuffle and Python workers
  (``write/driver.py``).
* :class:`SparkTasksEngine`: the write's Spark job (:func:`tag_and_write`), collected: one
  Python stage after a shuffle by partition (:func:`one_stage_fits`: a partitioned table
  whose keys stay in their partition, a DataFrame Spark estimates at most
  ``one_stage_max_bytes``), else two (tag where the rows are, shuffle by file group, write).

Both read what they need before the scheme's assigners open (``prepare``: a new fleet's
actors start meanwhile) and return what was written with the number of shuffles.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
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

    #: What the commit records of the job: no Spark stage ran Python.
    metadata: dict[str, Any] = {"python_stages": 0}

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
    """The write's Spark job (the module doc); ``one_stage``: its rows shuffled by
    partition, then tagged and written by one Python stage."""

    def __init__(self, df: DataFrame, one_stage: bool = False) -> None:
        self.df = df
        self.one_stage = one_stage

    @property
    def metadata(self) -> dict[str, Any]:
        """What the commit records of the job: its Python stages."""
        return {"python_stages": 1 if self.one_stage else 2}

    def prepare(self, op: Operation, laps: Laps) -> None:
        """Spark reads the DataFrame in its tasks."""

    def run(
        self,
        stage_a: ArrowFn,
        ctx: WriteContext,
        laps: Laps,
    ) -> tuple[GroupWrites, int]:
        job, shuffles, inputs = tag_and_write(self.df, stage_a, ctx, self.one_stage)
        written = from_rows(job.collect())
        inputs.raise_any()  # a bad record fails the write once, whatever was written
        laps.lap("spark")
        return written, shuffles


def one_stage_fits(spec: TableSpec) -> bool:
    """Whether a write's rows can be shuffled by partition before they are tagged: the
    partition fields' values alone name a row's partition (no time formatting: two values
    of one day would land in two tasks), and a key's records never leave it (a global
    index's moving key needs its old partition's group in the same task)."""
    return (
        bool(spec.partition_by)
        and spec.timestamp_partitioning is None
        and not spec.scheme.keys_move
    )


def tag_and_write(
    df: DataFrame, stage_a: ArrowFn, ctx: WriteContext, one_stage: bool = False
) -> tuple[DataFrame, int, InputErrors]:
    """The Spark job of a write, with its number of shuffles and the input errors its tasks
    find (raise them after the job: ``InputErrors.raise_any``). Keys are hashed by Spark
    (``xxhash64``); then

    * ``one_stage`` (:func:`one_stage_fits`): one shuffle by the partition fields, so that a
      task holds every row of its partitions, and one Python stage tags them (stage A) and
      writes their file groups (stage B): the rows cross into Python once. A partition's
      file groups are written by one task: for DataFrames of a bounded size.
    * else stage A where the rows are, one shuffle by (partition, bucket), stage B: a
      partition's groups written in parallel, the rows crossing into Python twice."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    hashed = df.withColumn(HASH, F.xxhash64(*ctx.spec.record_key))
    inputs = InputErrors(df.sparkSession)
    if one_stage:
        stage_b = write_fn(ctx)

        def tag_then_write(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            seconds: dict[str, float] = {}  # stage A's, filled as stage B reads its rows
            return stage_b(stage_a(batches, seconds), seconds)

        by_partition = hashed.repartition(*ctx.spec.partition_by)
        job = by_partition.mapInArrow(carry_errors(tag_then_write, inputs), written_schema())
        return job, 1, inputs
    moves = ctx.spec.scheme.keys_move
    if moves:  # every record of a key in one task: stage A keeps the newest (one per key)
        hashed = hashed.repartition(HASH)
    # Stage A turns the records' delete flag into ``_op``.
    kept = StructType([f for f in hashed.schema.fields if f.name != IS_DELETE])
    tagged_struct = with_fields(kept, [(PARTITION, "string"), (OP, "tinyint")])
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
