"""Snapshot reads: the table as of a completed instant, to Arrow or to a Spark DataFrame.

A snapshot is fixed at creation: the set of completed instants it sees. It lists the
partitions' data files once, keeps each group's latest visible slice, merges slices (in
threads locally, in tasks on Spark) and adds the partition fields and the meta columns
``_partition``, ``_bucket``, ``_file_id`` and ``_instant``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from dynbucket.pipeline.errors import InstantNotFoundError
from dynbucket.pipeline.layout import DataFile, FileSlice, file_slices, parse_data_file
from dynbucket.pipeline.merge import read_slice
from dynbucket.pipeline.partitioning import partition_columns
from dynbucket.pipeline.spec import BUCKET, FILE_ID, INSTANT, PARTITION, TableSpec
from dynbucket.pipeline.storage import TableStore
from dynbucket.pipeline.timeline import META_DIR, Timeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class SliceRef:
    """One file group's slice in a partition (picklable: Spark tasks receive these)."""

    partition: str
    slice: FileSlice


class Snapshot:
    """The table as of one completed instant."""

    def __init__(self, store: TableStore, spec: TableSpec, as_of: str | None = None) -> None:
        self.store = store
        self.spec = spec
        timeline = Timeline(store)
        completed = timeline.completed()
        if as_of is not None and as_of not in {i.id for i in completed}:
            raise InstantNotFoundError(
                f"no completed instant {as_of} in {store.uri}; completed: "
                f"{[i.id for i in completed][-5:]} (last five)"
            )
        self.instant = as_of or (completed[-1].id if completed else None)
        cleaned = [timeline.metadata(i).get("earliest-retained") for i in completed
                   if i.action == "clean"]  # fmt: skip
        earliest = max((c for c in cleaned if c), default=None)
        if as_of is not None and earliest is not None and as_of < earliest:
            raise InstantNotFoundError(
                f"instant {as_of} was cleaned: the table keeps file slices from {earliest} on "
                "(cleaner.commits-retained)"
            )
        self.visible = frozenset(i.id for i in completed if self.instant and i.id <= self.instant)
        self._slices: list[SliceRef] | None = None

    # --- file slices ---------------------------------------------------------------------

    def slices(self, partitions: Sequence[str] | None = None) -> list[SliceRef]:
        """Latest visible slice of every file group (of ``partitions`` when given)."""
        if self._slices is None:
            by_partition: dict[str, list[DataFile]] = {}
            meta = self.store.path(META_DIR)
            for info in self.store.walk(self.store.root):
                if info.path.startswith(meta + "/"):
                    continue
                parsed = parse_data_file(info.base_name)
                if parsed is None:
                    continue
                file_id, instant, kind = parsed
                partition = os.path.dirname(info.path)[len(self.store.root) :].strip("/")
                by_partition.setdefault(partition, []).append(
                    DataFile(instant, info.path, kind, int(info.size or 0), file_id)
                )
            self._slices = [
                SliceRef(p, s)
                for p in sorted(by_partition)
                for s in file_slices(by_partition[p], self.visible)
            ]
        wanted = None if partitions is None else set(partitions)
        return [r for r in self._slices if wanted is None or r.partition in wanted]

    def partitions(self) -> list[str]:
        return sorted({r.partition for r in self.slices()})

    def bucket_files(self, partition: str) -> dict[int, FileSlice]:
        """bucket id -> its file group's slice, in one partition."""
        return {r.slice.bucket: r.slice for r in self.slices([partition])}

    # --- reading -------------------------------------------------------------------------

    def to_arrow(
        self,
        columns: Sequence[str] | None = None,
        meta_columns: bool = True,
        partitions: Sequence[str] | None = None,
    ) -> pa.Table:
        """The snapshot's live rows (all partitions, or ``partitions``).

        Slices that are a base file alone are one multi-threaded dataset scan; slices with
        deltas are merged in a thread pool.
        """
        refs = self.slices(partitions)
        schema = self.output_schema(columns, meta_columns)
        if not refs:
            return schema.empty_table()
        plain = [r for r in refs if r.slice.base is not None and not r.slice.deltas]
        merged = [r for r in refs if r.slice.deltas]
        workers = os.cpu_count() or 2
        with ThreadPoolExecutor(max_workers=workers + 1) as pool:
            # The base scan (multi-threaded inside pyarrow) runs beside the slice merges.
            scan = pool.submit(scan_bases, self.store, self.spec, plain, columns, meta_columns)
            parts = list(
                pool.map(
                    lambda r: read_ref(self.store, self.spec, r, columns, meta_columns), merged
                )
            )
            if plain:
                parts.append(scan.result())
        return pa.concat_tables([p.cast(schema) for p in parts])

    def to_spark(
        self, spark: SparkSession, columns: Sequence[str] | None = None, meta_columns: bool = True
    ) -> DataFrame:
        """The snapshot as a Spark DataFrame: one task per group of file slices."""
        from pyspark.sql.pandas.types import from_arrow_schema

        refs = self.slices()
        store, spec = self.store, self.spec
        schema = self.output_schema(columns, meta_columns)
        slots = max(1, min(len(refs), spark.sparkContext.defaultParallelism * 4))

        def read(batches: Any) -> Any:
            for batch in batches:
                for ref in batch.column(0).to_pylist():
                    table = read_ref(store, spec, refs[ref], columns, meta_columns)
                    yield from table.to_batches(max_chunksize=100_000)

        index = spark.range(len(refs), numPartitions=slots).selectExpr("cast(id as int) as ref")
        return index.mapInArrow(read, from_arrow_schema(schema))

    def output_schema(self, columns: Sequence[str] | None, meta_columns: bool) -> pa.Schema:
        names = list(columns) if columns is not None else self.spec.schema.names
        fields = [self.spec.schema.field(n) for n in names]
        if meta_columns:
            fields += [
                pa.field(PARTITION, pa.string()),
                pa.field(BUCKET, pa.int32()),
                pa.field(FILE_ID, pa.string()),
                pa.field(INSTANT, pa.string()),
            ]
        return pa.schema(fields)


def scan_bases(
    store: TableStore,
    spec: TableSpec,
    refs: Sequence[SliceRef],
    columns: Sequence[str] | None,
    meta_columns: bool,
) -> pa.Table:
    """Rows of slices that are a base file alone, in one dataset scan (no merge needed)."""
    names = list(columns) if columns is not None else spec.schema.names
    paths = [r.slice.base.path for r in refs if r.slice.base is not None]
    partitioning = (
        pads.partitioning(
            pa.schema([spec.schema.field(n) for n in spec.partition_by]), flavor="hive"
        )
        if spec.partition_by
        else None
    )
    dataset = pads.dataset(
        paths, format="parquet", filesystem=store.fs, partitioning=partitioning,
        partition_base_dir=store.root,
    )  # fmt: skip
    # Special fields such as __filename work in a list of columns, not in a projection dict.
    table = dataset.to_table(columns=[*names, INSTANT, "__filename"] if meta_columns else names)
    if not meta_columns:
        return table
    which = pc.index_in(table.column("__filename"), value_set=pa.array(paths))
    meta = {
        PARTITION: pa.array([r.partition for r in refs]).take(which),
        BUCKET: pa.array([r.slice.bucket for r in refs], pa.int32()).take(which),
        FILE_ID: pa.array([r.slice.file_id for r in refs]).take(which),
        INSTANT: table.column(INSTANT),
    }
    return pa.table({**{n: table.column(n) for n in names}, **meta})


def read_ref(
    store: TableStore,
    spec: TableSpec,
    ref: SliceRef,
    columns: Sequence[str] | None,
    meta_columns: bool,
) -> pa.Table:
    """One slice's live rows with partition fields and (optionally) meta columns."""
    names = list(columns) if columns is not None else spec.schema.names
    data_cols = [n for n in names if n not in spec.partition_by]
    rows = read_slice(store, spec, ref.slice, data_cols, with_instant=meta_columns)
    return decorate(spec, ref, rows, names, meta_columns)


def decorate(
    spec: TableSpec, ref: SliceRef, rows: pa.Table, names: Sequence[str], meta_columns: bool
) -> pa.Table:
    """Rows of a slice (data fields, ``_instant``) as the reader returns them: ``names`` in
    order, partition fields from the path, then the meta columns."""
    n = rows.num_rows
    values = dict(zip(spec.partition_by,
                      partition_columns(ref.partition, spec.schema, spec.partition_by, n),
                      strict=True))  # fmt: skip
    out = {name: values[name] if name in values else rows.column(name) for name in names}
    if meta_columns:
        out[PARTITION] = pa.repeat(pa.scalar(ref.partition), n)
        out[BUCKET] = pa.repeat(pa.scalar(ref.slice.bucket, pa.int32()), n)
        out[FILE_ID] = pa.repeat(pa.scalar(ref.slice.file_id), n)
        out[INSTANT] = rows.column(INSTANT)
    return pa.table(out)
