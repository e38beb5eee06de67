"""A file group's slice as readers hand it around (:class:`SliceRef`), and its rows as
a read returns them (:func:`decorate`): shared by the snapshot, the lookups through
Hudi's metadata table, incremental reads and adoption."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from dynbucket.base.columns import BUCKET, FILE_ID, INSTANT, PARTITION
from dynbucket.format.file_group.slices import FileSlice
from dynbucket.format.hudi.meta_fields import COMMIT_TIME
from dynbucket.format.records.partitioning import partition_columns
from dynbucket.format.table.spec import TableSpec


@dataclass(frozen=True)
class SliceRef:
    """One file group's slice in a partition (picklable: Spark tasks receive these)."""

    partition: str
    slice: FileSlice


def decorate(
    spec: TableSpec, ref: SliceRef, rows: pa.Table, wanted: Sequence[str], meta_columns: bool
) -> pa.Table:
    """Rows of a slice as the reader returns them: ``wanted`` in order (partition fields
    from the slice's partition path: one value, no column to decode), then the meta columns
    (``_instant`` from the rows' commit time)."""
    n = rows.num_rows
    parts = dict(
        zip(
            spec.path_fields,
            partition_columns(
                ref.partition, spec.schema, spec.path_fields, n, spec.hive_style_partitioning
            ),
            strict=True,
        )
    )
    out = {name: parts[name] if name in parts else rows.column(name) for name in wanted}
    if meta_columns:
        out[PARTITION] = pa.repeat(pa.scalar(ref.partition), n)
        out[BUCKET] = pa.repeat(pa.scalar(ref.slice.bucket, pa.int32()), n)
        out[FILE_ID] = pa.repeat(pa.scalar(ref.slice.file_id), n)
        out[INSTANT] = rows.column(COMMIT_TIME)
    return pa.table(out)
