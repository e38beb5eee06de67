"""Writing an instant's bucket-tagged rows into file groups, and the index entries of new keys.

The one file-group writer: the in-process writer calls it with all rows of an instant, each
Spark writer task with the rows of its file groups (a task holds every row of each of its
groups). Per group and instant it writes one file, as Hudi would:

* a new group: a base file;
* merge-on-read, an existing group: one log file for its current slice, holding a Parquet
  data block (upserts) and a delete block (deletes; with an ordering field that is not an
  integer, a group with deletes is rewritten as copy-on-write does, see ``delete_ordering``);
* copy-on-write, an existing group: a new base file, the slice's rows merged with the
  instant's (rows not touched keep their meta fields, so their commit time).

Names are deterministic (existing groups keep their file id, a new bucket gets the id of
(table, instant, partition, bucket); the write token names the instant), so a retried or
speculative task writes the same files with the same rows (I4).
"""

from __future__ import annotations

import dataclasses
import io
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dynbucket.pipeline.format.columns import BUCKET, DELETE, IS_NEW, OP, PARTITION, UPSERT
from dynbucket.pipeline.format.hudi import files as names
from dynbucket.pipeline.format.hudi import log_file, properties
from dynbucket.pipeline.format.hudi.meta_fields import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    META_FIELDS,
    RECORD_KEY,
    meta_columns,
    record_keys,
)
from dynbucket.pipeline.format.layout import (
    FileSlice,
    bucket_of,
    data_files,
    file_id_for,
    file_slices,
)
from dynbucket.pipeline.format.merge import KEY, merge, read_base, read_log, read_slice
from dynbucket.pipeline.format.records import dedupe
from dynbucket.pipeline.format.rli import RecordLevelIndex, entries_for
from dynbucket.pipeline.format.storage import TableStore
from dynbucket.pipeline.format.table_spec import TableSpec
from dynbucket.pipeline.format.transaction import WrittenFile


@dataclass
class GroupWrites:
    """What writing file groups did: the files, and what happened to the keys (stale: an
    update of a known key that loses to the record the table has, by its ordering value)."""

    files: list[WrittenFile] = field(default_factory=list)
    keys_inserted: int = 0
    keys_updated: int = 0
    keys_stale: int = 0
    keys_deleted: int = 0
    keys_not_found: int = 0


def write_file_groups(
    store: TableStore,
    spec: TableSpec,
    instant: str,
    rows: pa.Table,
    visible: Collection[str],
    deletes: bool,
    part: str | None = None,
) -> GroupWrites:
    """Writes tagged rows (``_partition``, ``_bucket``, ``_is_new``, ``_op``).

    1. Rows without a bucket (deletes of keys the table never had) are counted, not written.
    2. The rows are split into file groups (partition, bucket); a partition written for the
       first time gets its ``.hoodie_partition_metadata``.
    3. Per group: one record per key; the group's current slice (from the committed
       listing); one file (module doc).
    4. Per partition: one index file with the entries of the new keys (``part`` tells apart
       the files several writer tasks of one instant write into one partition).
    """
    out = GroupWrites()
    # 1.
    unknown = pc.less(rows.column(BUCKET), 0)
    out.keys_not_found = int(pc.sum(unknown).as_py() or 0)
    if out.keys_not_found:
        rows = rows.filter(pc.invert(unknown))
    current: dict[str, dict[int, FileSlice]] = {}
    entries: dict[str, list[pa.Table]] = defaultdict(list)
    # 2.
    for partition, bucket, group in split_groups(rows):
        if partition not in current:
            slices = file_slices(data_files(store, partition), visible)
            current[partition] = {s.bucket: s for s in slices}
            _partition_metadata(store, partition, instant)
        # 3.
        group = dedupe(spec, group, deletes=deletes)
        fslice = current[partition].get(bucket)
        file_id = fslice.file_id if fslice else file_id_for(spec.table_id, instant, partition,
                                                             bucket)  # fmt: skip
        written = _write_group(store, spec, instant, partition, file_id, fslice, group)
        out.files.append(written)
        out.keys_inserted += written.inserts
        out.keys_updated += written.updates - written.stale
        out.keys_stale += written.stale
        out.keys_deleted += written.deletes
        if written.inserts:
            entries[partition].append(
                entries_for(group.filter(group.column(IS_NEW)), spec, bucket, file_id, instant)
            )
    # 4.
    index = RecordLevelIndex(store, spec)
    for partition, parts in entries.items():
        table = pa.concat_tables(parts)
        f = index.write(partition, instant, table, part=part)
        out.files.append(WrittenFile(partition, f.path, "index", table.num_rows, f.size))
    return out


def _write_group(
    store: TableStore,
    spec: TableSpec,
    instant: str,
    partition: str,
    file_id: str,
    fslice: FileSlice | None,
    group: pa.Table,
) -> WrittenFile:
    is_delete = pc.equal(group.column(OP), DELETE)
    deleted = int(pc.sum(is_delete).as_py() or 0)
    inserted = int(pc.sum(group.column(IS_NEW)).as_py() or 0)
    upserts = group.filter(pc.invert(is_delete)) if deleted else group
    stale = 0
    if fslice is None:
        name = names.base_name(file_id, instant)
        rows = _with_meta(spec, upserts, instant, partition, name, bucket_of(file_id))
        size = write_base(store, spec, store.path(partition, name), rows)
        written = WrittenFile(partition, store.path(partition, name), "base", rows.num_rows,
                              size, file_id, bucket_of(file_id))  # fmt: skip
    elif spec.options.merge_on_read and (not deleted or delete_ordering(spec, instant)):
        written = _write_log(store, spec, instant, partition, fslice, upserts,
                             group.filter(is_delete))  # fmt: skip
        updates = upserts.filter(pc.invert(upserts.column(IS_NEW))) if inserted else upserts
        stale = stale_updates(store, spec, fslice, updates, instant)
    else:
        written, applied = _rewrite_base(store, spec, instant, partition, fslice, group)
        stale = upserts.num_rows - inserted - applied
    return dataclasses.replace(written, inserts=inserted, deletes=deleted, stale=stale,
                               updates=group.num_rows - deleted - inserted)  # fmt: skip


def _with_meta(
    spec: TableSpec, rows: pa.Table, instant: str, partition: str, file_name: str, writer: int
) -> pa.Table:
    """The records of the table's fields, with the meta fields of ``instant`` first."""
    data = rows.select(spec.schema.names)
    if not spec.meta_fields:
        return data
    keys = record_keys(rows, spec.record_key)
    meta = meta_columns(rows.num_rows, instant, str(writer), keys, partition, file_name)
    for i, name in enumerate(META_FIELDS):
        data = data.add_column(i, name, meta[i])
    return data


def moved_to(spec: TableSpec, rows: pa.Table, name: str) -> pa.Table:
    """Rows carried into base file ``name``: their ``_hoodie_file_name`` says so (their
    other meta fields, the commit time among them, stay)."""
    if FILE_NAME not in spec.meta_fields:
        return rows
    at = rows.schema.get_field_index(FILE_NAME)
    return rows.set_column(at, FILE_NAME, pa.repeat(pa.scalar(name), rows.num_rows))


def write_base(store: TableStore, spec: TableSpec, path: str, rows: pa.Table) -> int:
    """Writes a base file of ``rows`` (the file schema's columns), sorted by key (a base
    file stays for many reads: sorted keys give tight statistics per row group)."""
    rows = rows.take(pc.sort_indices(rows, [(k, "ascending") for k in spec.record_key]))
    table = rows.select(spec.file_schema().names).cast(spec.file_schema())
    return store.write_parquet(path, table, **parquet_options(spec))


def parquet_options(spec: TableSpec) -> dict[str, object]:
    """Parquet settings of data files: dictionary encoding only where values repeat (meta
    fields that are one value per file, partition fields, other fields), not for keys and
    sequence numbers, which are unique (building a dictionary of them is wasted work)."""
    unique = {*spec.record_key, COMMIT_SEQNO, RECORD_KEY}
    return {"use_dictionary": [n for n in spec.file_schema().names if n not in unique]}


def _write_log(
    store: TableStore, spec: TableSpec, instant: str, partition: str, fslice: FileSlice,
    upserts: pa.Table, deletes: pa.Table,
) -> WrittenFile:  # fmt: skip
    version = fslice.next_log_version()
    name = names.log_name(fslice.file_id, fslice.base_instant, version, instant)
    blocks = []
    if upserts.num_rows:
        rows = _with_meta(spec, upserts, instant, partition, fslice.file_id,
                          bucket_of(fslice.file_id))  # fmt: skip
        buffer = io.BytesIO()
        pq.write_table(rows.cast(spec.file_schema()), buffer, **parquet_options(spec))
        blocks.append(log_file.data_block(buffer.getvalue(), instant,
                                          spec.avro_schema(meta_fields=True)))  # fmt: skip
    ordering = delete_ordering(spec, instant)
    if deletes.num_rows and ordering is not None:
        keys = record_keys(deletes, spec.record_key).to_pylist()
        blocks.append(log_file.delete_block(keys, [partition] * len(keys), ordering, instant))
    path = store.path(partition, name)
    size = store.write_file(path, b"".join(blocks))
    base_name = fslice.base.name if fslice.base is not None else ""
    return WrittenFile(partition, path, "log", upserts.num_rows + deletes.num_rows, size,
                       fslice.file_id, fslice.bucket, prev_commit=fslice.base_instant,
                       base_file=base_name, log_version=version)  # fmt: skip


def delete_ordering(spec: TableSpec, instant: str) -> tuple[str, object] | None:
    """The ordering value of a delete record, so that Hudi's readers apply a delete by commit
    order: the integer 0 (Hudi's "no ordering value", honoured for integer ordering fields);
    the instant itself when the commit time is the ordering (tables without an ordering
    field). None for other ordering types: no delete record can say that, and the file
    group's base file is rewritten without the deleted keys instead."""
    if spec.ordering_field is None:
        return "string", instant
    t = spec.schema.field(spec.ordering_field).type
    if pa.types.is_integer(t):
        return ("long" if t.bit_width == 64 or t == pa.uint32() else "int"), 0
    return None


def _rewrite_base(
    store: TableStore, spec: TableSpec, instant: str, partition: str, fslice: FileSlice,
    group: pa.Table,
) -> tuple[WrittenFile, int]:  # fmt: skip
    """Copy-on-write: the slice's rows merged with the instant's, as a new base file; also
    how many of the instant's upserts of known keys won (the others were stale)."""
    name = names.base_name(fslice.file_id, instant)
    meta = list(spec.meta_fields) or [COMMIT_TIME]
    old = read_slice(store, spec, fslice, spec.schema.names, meta)
    old = old.append_column(KEY, old.column(RECORD_KEY) if RECORD_KEY in old.column_names
                            else record_keys(old, spec.record_key))  # fmt: skip
    new = _with_meta(spec, group, instant, partition, name, fslice.bucket)
    if not spec.meta_fields:
        new = new.append_column(COMMIT_TIME, pa.repeat(pa.scalar(instant), new.num_rows))
    new = new.append_column(KEY, record_keys(group, spec.record_key))
    new = new.append_column(OP, group.column(OP)).select([*old.column_names, OP])
    live = merge(spec, old, [new.cast(pa.schema([*old.schema, pa.field(OP, pa.int8())]))])
    size = write_base(store, spec, store.path(partition, name), moved_to(spec, live, name))
    won = int(pc.sum(pc.equal(live.column(COMMIT_TIME), instant)).as_py() or 0)
    inserted = int(pc.sum(group.column(IS_NEW)).as_py() or 0)
    return WrittenFile(partition, store.path(partition, name), "base", live.num_rows, size,
                       fslice.file_id, fslice.bucket, prev_commit=fslice.base_instant,
                       ), won - inserted  # fmt: skip


def stale_updates(
    store: TableStore, spec: TableSpec, fslice: FileSlice, updates: pa.Table, instant: str
) -> int:
    """How many of ``updates`` (upserts of keys the group has) lose to the record the group
    holds, as a reader merges them (by the ordering value; see ``merge``). They are written
    all the same (readers merge them away), but do not count as updated.

    1. Without an ordering field the latest commit wins: none is stale.
    2. When no update's ordering value is below the largest the slice's files hold (their
       Parquet statistics), every update wins: nothing is read.
    3. Otherwise the slice's keys and ordering values are merged with the updates, as a
       reader would, and the updates that did not win are counted.
    """
    ordering = spec.ordering_field
    if ordering is None or updates.num_rows == 0:  # 1.
        return 0
    newest = _largest_ordering(store, spec, fslice)  # 2.
    lowest = pc.min(updates.column(ordering)).as_py()
    if newest is not None and lowest is not None and lowest >= newest:
        return 0
    columns = list(dict.fromkeys([*spec.record_key, ordering, COMMIT_TIME]))  # 3.
    base = read_base(store, spec, fslice.base, columns) if fslice.base is not None else None
    logs = [read_log(store, spec, f, columns) for f in fslice.logs]
    delta = updates.select(list(dict.fromkeys([*spec.record_key, ordering])))
    delta = delta.append_column(COMMIT_TIME, pa.repeat(pa.scalar(instant), delta.num_rows))
    delta = delta.append_column(KEY, record_keys(updates, spec.record_key))
    delta = delta.append_column(OP, pa.repeat(pa.scalar(UPSERT, pa.int8()), delta.num_rows))
    if logs:
        delta = delta.select(logs[0].column_names).cast(logs[0].schema)
    keyed = base.append_column(KEY, record_keys(base, spec.record_key)) if base else None
    live = merge(spec, keyed, [*logs, delta])
    won = int(pc.sum(pc.equal(live.column(COMMIT_TIME), instant)).as_py() or 0)
    return updates.num_rows - won


def _largest_ordering(store: TableStore, spec: TableSpec, fslice: FileSlice) -> object | None:
    """The largest ordering value in the slice's data files, from their Parquet statistics
    (None when a file has none, or the type's values do not compare as Python values)."""
    ordering = spec.ordering_field
    assert ordering is not None
    t = spec.schema.field(ordering).type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_string(t)):
        return None
    footers = []
    if fslice.base is not None:  # its footer alone (a ranged read on object stores)
        footers.append(pq.read_metadata(fslice.base.path, filesystem=store.fs))
    for f in fslice.logs:
        for block in log_file.read_blocks(store.read_buffer(f.path)):
            if block.type == log_file.PARQUET_DATA:
                footers.append(pq.ParquetFile(pa.BufferReader(block.content)).metadata)
    largest = None
    for meta in footers:
        at = meta.schema.to_arrow_schema().get_field_index(ordering)
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(at).statistics
            if stats is None or not stats.has_min_max:
                return None
            if largest is None or stats.max > largest:
                largest = stats.max
    return largest


def _partition_metadata(store: TableStore, partition: str, instant: str) -> None:
    """``<partition>/.hoodie_partition_metadata``, which Hudi's Java readers find partitions
    by (written once, by whichever writer gets there first)."""
    path = store.path(partition, names.PARTITION_METADATA)
    if store.exists(path):
        return
    depth = len([p for p in partition.split("/") if p])
    body = properties.dumps({"commitTime": instant, "partitionDepth": str(depth)},
                            "partition metadata")  # fmt: skip
    store.create_exclusive(path, body)


def split_groups(rows: pa.Table) -> list[tuple[str, int, pa.Table]]:
    """(partition, bucket, rows) of each file group the rows go to."""
    if rows.num_rows == 0:
        return []
    codes = pc.dictionary_encode(rows.column(PARTITION)).combine_chunks()
    partitions = codes.dictionary.to_pylist()
    # One sort on an integer per (partition, bucket): partition code, then bucket.
    group = codes.indices.to_numpy().astype(np.int64) << 32 | rows.column(BUCKET).to_numpy()
    order = np.argsort(group, kind="stable")
    rows, group = rows.take(pa.array(order)), group[order]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    ends = np.r_[starts[1:], rows.num_rows]
    return [
        (
            partitions[int(group[a] >> 32)],
            int(group[a] & 0xFFFFFFFF),
            rows.slice(int(a), int(b - a)),
        )
        for a, b in zip(starts, ends, strict=True)
    ]
