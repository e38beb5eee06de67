"""Writing an instant's bucket-tagged rows into file groups, and the index entries of new keys.

The one file-group writer: the in-process writer calls it with all rows of an instant, each
Spark writer task with the rows of its file groups (a task holds every row of each of its
groups). Names are deterministic (existing groups keep their file id, a new bucket gets the
id of (table, instant, partition, bucket)), so a retried or speculative task writes the same
files with the same rows (I4).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.pipeline.format.columns import BUCKET, INSTANT, IS_NEW, OP, PARTITION, UPSERT
from dynbucket.pipeline.format.layout import (
    base_name,
    bucket_of,
    data_files,
    delta_name,
    file_id_for,
    file_slices,
)
from dynbucket.pipeline.format.records import dedupe
from dynbucket.pipeline.format.rli import RecordLevelIndex, entries_for
from dynbucket.pipeline.format.storage import TableStore
from dynbucket.pipeline.format.table_spec import TableSpec
from dynbucket.pipeline.format.transaction import WrittenFile


@dataclass
class GroupWrites:
    """What writing file groups did: the files, and what happened to the keys."""

    files: list[WrittenFile] = field(default_factory=list)
    keys_inserted: int = 0
    keys_updated: int = 0
    keys_deleted: int = 0
    keys_not_found: int = 0

    def add(self, other: GroupWrites) -> None:
        """Adds another task's writes of the same instant."""
        self.files += other.files
        self.keys_inserted += other.keys_inserted
        self.keys_updated += other.keys_updated
        self.keys_deleted += other.keys_deleted
        self.keys_not_found += other.keys_not_found

    def counts(self) -> dict[str, int]:
        return {
            "keys_inserted": self.keys_inserted,
            "keys_updated": self.keys_updated,
            "keys_deleted": self.keys_deleted,
            "keys_not_found": self.keys_not_found,
        }


def write_file_groups(
    store: TableStore,
    spec: TableSpec,
    instant: str,
    rows: pa.Table,
    visible: Collection[str],
    deletes: bool,
    part: str | None = None,
) -> GroupWrites:
    """Writes tagged rows (``_partition``, ``_bucket``, ``_is_new``, ``_op``, ``_hash``).

    1. Rows without a bucket (deletes of keys the table never had) are counted, not written.
    2. The rows are split into file groups (partition, bucket).
    3. Per group: one record per key; the group's file id (the committed listing's, or the
       new bucket's deterministic id); one data file (base or delta).
    4. Per partition: one index file with the entries of the new keys (``part`` tells apart
       the files several writer tasks of one instant write into one partition).
    """
    out = GroupWrites()
    # 1.
    unknown = pc.less(rows.column(BUCKET), 0)
    out.keys_not_found = int(pc.sum(unknown).as_py() or 0)
    if out.keys_not_found:
        rows = rows.filter(pc.invert(unknown))
    known_ids: dict[str, dict[int, str]] = {}
    entries: dict[str, list[pa.Table]] = defaultdict(list)
    # 2.
    for partition, bucket, group in split_groups(rows):
        # 3.
        if partition not in known_ids:
            slices = file_slices(data_files(store, partition), visible)
            known_ids[partition] = {s.bucket: s.file_id for s in slices}
        group = dedupe(spec, group, deletes=deletes)
        known = known_ids[partition].get(bucket)
        file_id = known or file_id_for(spec.table_id, instant, partition, bucket)
        # A new group's first write is a base file (when it holds only upserts); any later
        # write is one delta file, and the base is never rewritten (until compaction).
        as_base = known is None and bool(pc.all(pc.equal(group.column(OP), UPSERT)).as_py())
        stamped = group.append_column(INSTANT, pa.repeat(pa.scalar(instant), group.num_rows))
        out.files.append(write_file(store, spec, instant, partition, file_id, stamped, as_base))
        is_new = group.column(IS_NEW)
        inserted = int(pc.sum(is_new).as_py() or 0)
        out.keys_inserted += inserted
        if deletes:
            out.keys_deleted += group.num_rows
        else:
            out.keys_updated += group.num_rows - inserted
        if inserted:
            entries[partition].append(
                entries_for(group.filter(is_new), spec, bucket, file_id, instant)
            )
    # 4.
    index = RecordLevelIndex(store, spec)
    for partition, parts in entries.items():
        table = pa.concat_tables(parts)
        written = index.write(partition, instant, table, part=part)
        out.files.append(
            WrittenFile(partition, written.path, "index-delta", table.num_rows, written.size)
        )
    return out


def split_groups(rows: pa.Table) -> list[tuple[str, int, pa.Table]]:
    """(partition, bucket, rows) of each file group the rows go to."""
    if rows.num_rows == 0:
        return []
    rows = rows.take(pc.sort_indices(rows, [(PARTITION, "ascending"), (BUCKET, "ascending")]))
    parts = pc.dictionary_encode(rows.column(PARTITION)).combine_chunks().indices.to_numpy()
    buckets = rows.column(BUCKET).to_numpy()
    starts = np.flatnonzero(np.r_[True, (parts[1:] != parts[:-1]) | (buckets[1:] != buckets[:-1])])
    ends = np.r_[starts[1:], rows.num_rows]
    names = rows.column(PARTITION)
    return [
        (names[int(a)].as_py(), int(buckets[a]), rows.slice(int(a), int(b - a)))
        for a, b in zip(starts, ends, strict=True)
    ]


def write_file(
    store: TableStore,
    spec: TableSpec,
    instant: str,
    partition: str,
    file_id: str,
    rows: pa.Table,
    base: bool,
) -> WrittenFile:
    """Writes a base or delta file of ``instant`` holding ``rows`` (which carry
    ``_instant``: the commit that last wrote each row), sorted by key."""
    rows = rows.take(pc.sort_indices(rows, [(k, "ascending") for k in spec.record_key]))
    schema = spec.file_schema(delta=not base)
    rows = rows.select(schema.names).cast(schema)
    name = base_name(file_id, instant) if base else delta_name(file_id, instant)
    path = store.path(partition, name)
    size = store.write_parquet(path, rows)
    kind = "base" if base else "delta"
    return WrittenFile(partition, path, kind, rows.num_rows, size, file_id, bucket_of(file_id))
