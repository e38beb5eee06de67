"""Small Spark writes in the driver: collected, tagged by the slot actors, written here.

A Spark job with Python stages costs about a second whatever its size: scheduling, a
shuffle, Arrow to and from Python workers; and Spark stops Python workers idle for a
minute, so the next write waits ~3 s for new ones to import dynbucket and join Ray. A write
of a few thousand rows needs none of that. When the DataFrame's plan says it is small
(``RuntimeConfig.driver_write_max_bytes``), the write:

1. collects it as Arrow, with the key hash computed by Spark's own ``xxhash64`` as on the
   Spark path (a JVM-only job: no Python worker takes part; rows the driver's JVM holds,
   such as a ``createDataFrame`` of pandas, converted there without a job:
   ``local_rows.relation_batches``), or, for a bare scan of Parquet files, reads the files
   here without any job (``write/file_scan.py``);
2. tags the rows through the same slot actors as the Spark path (stage A's function, run
   here), so every key gets the bucket it would get there;
3. writes the file groups and index entries with the one file-group writer, in this
   process's threads (every row of a group is here: no layout check, no shuffle).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pyarrow as pa

from dynbucket.base.columns import HASH
from dynbucket.format.file_group.writer import GroupWrites, write_file_groups
from dynbucket.format.table.context import WriteContext
from dynbucket.write.assign_stage import ArrowFn
from dynbucket.write.local_rows import relation_batches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Index files of a driver write are named as those of one Spark task would be.
DRIVER_PART = "p0"


def estimated_bytes(df: DataFrame) -> int | None:
    """Spark's estimate of the DataFrame's size (its optimized plan's statistics: the input
    files' sizes for a file scan), or None when Spark has none (it then says Long.MaxValue,
    e.g. for a rate source, and that is returned as it is)."""
    try:
        size = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
        return int(size if isinstance(size, int) else size.toString())  # py4j: int or BigInt
    except Exception:  # a plan Spark cannot size: treat as large
        return None


def collect_hashed(df: DataFrame, key_fields: tuple[str, ...]) -> list[pa.RecordBatch]:
    """1. The rows as Arrow batches in this process, with ``_hash`` from Spark's
    ``xxhash64`` of the key fields (the Spark path's hash, bit for bit)."""
    from pyspark.sql import functions as F

    hashed = df.withColumn(HASH, F.xxhash64(*key_fields))
    held = relation_batches(hashed)  # rows the driver's JVM holds: converted there, no job
    if held is not None:
        return held
    return [b for b in hashed._collect_as_arrow() if b.num_rows]


def write_in_driver(
    batches: list[pa.RecordBatch], stage_a: ArrowFn, ctx: WriteContext
) -> GroupWrites:
    """2-3. Tags ``batches`` with ``stage_a`` (the Spark path's assign stage) and writes
    them; the seconds of both stages are in the result."""
    if not batches:
        return GroupWrites()
    seconds: dict[str, float] = {}
    tagged = list(stage_a(iter(batches), seconds))
    rows = pa.Table.from_batches(tagged)
    written = write_file_groups(ctx, rows, DRIVER_PART, threads=os.cpu_count() or 1)
    written.add_seconds(seconds)
    return written
