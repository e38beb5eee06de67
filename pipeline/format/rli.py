"""The partitioned record-level index (RLI): per data partition, key -> bucket, insert-only.

Under ``.hoodie/.dynbucket/rli/<partition path>/``: one ``<instant>.delta.parquet`` per commit that
inserted new keys into the partition, and ``<instant>.base.parquet`` when index compaction
merged them. Entries (record key fields, ``_hash``, ``_bucket``, ``_file_id``, ``_instant``)
are written in the same instant as the data they index (I6) and never change afterwards; each
file is sorted by ``_hash``, so a slot's cache bootstraps from it without sorting.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from dynbucket.pipeline.format.columns import BUCKET, FILE_ID, HASH, INSTANT
from dynbucket.pipeline.format.layout import (
    DataFile,
    index_files,
    index_name,
    latest_slice,
)
from dynbucket.pipeline.format.paths import RLI_DIR
from dynbucket.pipeline.format.storage import FileWriter, TableStore
from dynbucket.pipeline.format.table_spec import TableSpec

#: Rows per Parquet row group: small enough that hash-range statistics prune point lookups.
ROW_GROUP = 64 * 1024


class RecordLevelIndex:
    """Reads and writes one table's partitioned record-level index."""

    def __init__(self, store: TableStore, spec: TableSpec) -> None:
        self.store = store
        self.spec = spec
        self.schema = spec.index_schema()

    def dir(self, partition: str) -> str:
        return self.store.path(RLI_DIR, partition)

    # --- writing -------------------------------------------------------------------------

    def write(
        self,
        partition: str,
        instant: str,
        entries: pa.Table,
        kind: str = "delta",
        part: str | None = None,
        files: FileWriter | None = None,
    ) -> DataFile:
        """Writes a partition's new entries of ``instant``, sorted by hash (``part``: which
        writer task, when several write the same partition in one instant; ``files``: a
        batch to write it with, else it is published at once)."""
        entries = entries.select(self.schema.names).cast(self.schema)
        order = np.argsort(entries.column(HASH).to_numpy(), kind="stable")
        entries = entries.take(pa.array(order))
        path = f"{self.dir(partition)}/{index_name(instant, kind, part)}"
        # Keys and hashes are unique: a dictionary of them is work for nothing.
        repeating = [BUCKET, FILE_ID, INSTANT]
        size = (files or self.store).write_parquet(
            path, entries, row_group_size=ROW_GROUP, write_statistics=[HASH],
            use_dictionary=repeating,
        )  # fmt: skip
        return DataFile(instant, path, kind, size)

    def compact(self, partition: str, instant: str, visible: Collection[str]) -> DataFile | None:
        """Merges the partition's visible index files into one base file of ``instant``.

        Returns None when there is nothing to merge (at most one file).
        """
        base, deltas = self.files(partition, visible)
        files = ([base] if base else []) + deltas
        if len(files) < 2:
            return None
        merged = pads.dataset(
            [f.path for f in files], format="parquet", filesystem=self.store.fs, schema=self.schema
        ).to_table()
        return self.write(partition, instant, merged, kind="base")

    # --- reading -------------------------------------------------------------------------

    def files(
        self, partition: str, visible: Collection[str]
    ) -> tuple[DataFile | None, list[DataFile]]:
        """The partition's visible index slice: newest base, then deltas after it."""
        return latest_slice(index_files(self.store, partition), visible)

    def record_index_locations(
        self, partition: str, visible: Collection[str], columns: Sequence[str] | None = None
    ) -> pa.Table:
        """Every entry of ``partition`` as Arrow, reading only ``columns`` (all by default).

        The proposal's lookup path: what a slot's cache bootstraps from.
        """
        cols = list(columns) if columns is not None else self.schema.names
        base, deltas = self.files(partition, visible)
        files = ([base] if base else []) + deltas
        if not files:
            return self.schema.empty_table().select(cols)
        tables = [pq.read_table(f.path, columns=cols, filesystem=self.store.fs) for f in files]
        return pa.concat_tables(tables) if len(tables) > 1 else tables[0]

    def sorted_runs(
        self, partition: str, visible: Collection[str], columns: Sequence[str]
    ) -> tuple[list[pa.Table], int]:
        """The partition's index files, each sorted by hash, and the entries they hold."""
        base, deltas = self.files(partition, visible)
        files = ([base] if base else []) + deltas
        runs = [
            pq.read_table(f.path, columns=list(columns), filesystem=self.store.fs) for f in files
        ]
        return runs, sum(r.num_rows for r in runs)

    def lookup(self, partition: str, hashes: np.ndarray, visible: Collection[str]) -> pa.Table:
        """The entries of ``partition`` whose hash is in ``hashes`` (row groups that cannot
        hold one are skipped by their hash statistics)."""
        base, deltas = self.files(partition, visible)
        files = ([base] if base else []) + deltas
        if not files or len(hashes) == 0:
            return self.schema.empty_table()
        wanted = pa.array(np.unique(hashes), pa.int64())
        dataset = pads.dataset(
            [f.path for f in files], format="parquet", filesystem=self.store.fs, schema=self.schema
        )
        lo, hi = wanted[0], wanted[len(wanted) - 1]
        expr = (pc.field(HASH) >= lo) & (pc.field(HASH) <= hi) & pc.field(HASH).isin(wanted)
        return dataset.to_table(filter=expr)

    def partitions(self) -> list[str]:
        """Partition paths that have index files."""
        root = self.store.path(RLI_DIR)
        found = set()
        for info in self.store.list_files(root, recursive=True):
            rel = info.path[len(root) :].strip("/")
            found.add(rel.rsplit("/", 1)[0] if "/" in rel else "")
        return sorted(found)


def entries_for(
    new_rows: pa.Table, spec: TableSpec, bucket: int, file_id: str, instant: str
) -> pa.Table:
    """Index entries for the new keys of one file group (rows carry key fields and ``_hash``)."""
    n = new_rows.num_rows
    columns = [new_rows.column(k) for k in spec.record_key] + [
        new_rows.column(HASH),
        pa.repeat(pa.scalar(bucket, pa.int32()), n),
        pa.repeat(pa.scalar(file_id), n),
        pa.repeat(pa.scalar(instant), n),
    ]
    return pa.Table.from_arrays(columns, names=[*spec.record_key, HASH, BUCKET, FILE_ID, INSTANT])
