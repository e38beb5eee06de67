"""Stage A of the stateless bucket schemes: a row's bucket computed where the row is.

A simple-bucket or consistent-hashing table needs no assigner: a key's bucket is a
function of the key and its partition's layout as of the instant the write builds on
(``format/buckets/layouts.py``). The layouts travel to the Spark tasks with the function
(a few numbers per partition); no actor is called, no state is kept. Whether a key is new
is told later by its file group's slice (``format/file_group/writer.write_file_groups``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from dynbucket.base.columns import BUCKET, IS_NEW, PARTITION, partition_codes
from dynbucket.format.buckets.layouts import BucketLayouts
from dynbucket.write.batches import ROWS_PER_CALL, joined


def locate_fn(
    layouts: BucketLayouts, prepare: Callable[[pa.RecordBatch], pa.RecordBatch]
) -> Callable[..., Iterator[pa.RecordBatch]]:
    """A ``mapInArrow`` function tagging each row with ``_bucket`` (and ``_is_new`` false,
    for the writer to settle).

    1. Join Spark's batches into batches of about ``ROWS_PER_CALL`` rows.
    2. Check each (``prepare``: records, partition paths, ``_op``).
    3. Per partition of the batch, the buckets of its rows from the partition's layout.
    """

    def tag(
        batches: Iterable[pa.RecordBatch], seconds: dict[str, float] | None = None
    ) -> Iterator[pa.RecordBatch]:
        times = seconds if seconds is not None else {}
        for batch in joined(batches, ROWS_PER_CALL):  # 1.
            start = time.perf_counter()
            batch = prepare(batch)  # 2.
            checked = time.perf_counter()
            times["check"] = times.get("check", 0.0) + checked - start
            yield with_buckets(layouts, batch)  # 3.
            times["tag"] = times.get("tag", 0.0) + time.perf_counter() - checked

    return tag


def with_buckets(layouts: BucketLayouts, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` (checked: ``_partition``, key fields, ``_hash``) with ``_bucket`` and
    ``_is_new``."""
    names, codes = partition_codes(batch.column(PARTITION))
    buckets = np.empty(batch.num_rows, np.int32)
    for code, name in enumerate(names):
        at = np.flatnonzero(codes == code) if len(names) > 1 else None
        rows = batch if at is None else batch.take(pa.array(at))
        found = layouts.locate(name, rows)
        if at is None:
            buckets = found
        else:
            buckets[at] = found
    return batch.append_column(BUCKET, pa.array(buckets, pa.int32())).append_column(
        IS_NEW, pa.array(np.zeros(batch.num_rows, np.bool_))
    )
