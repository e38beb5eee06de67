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
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dynbucket.base.columns import (
    BUCKET,
    DELETE,
    FROM_BUCKET,
    FROM_PARTITION,
    IS_NEW,
    OP,
    PARTITION,
    partition_codes,
)
from dynbucket.base.threads import shared_pool
from dynbucket.format.file_group import settle
from dynbucket.format.file_group.merge import KEY, merge, read_slice
from dynbucket.format.file_group.slices import FileSlice, data_files, file_slices, unmerged
from dynbucket.format.file_group.stale import remember_largest, stale_updates
from dynbucket.format.hudi import files as names
from dynbucket.format.hudi import log_file, properties
from dynbucket.format.hudi.meta_fields import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    META_FIELDS,
    PARTITION_PATH,
    RECORD_KEY,
    meta_columns,
    record_keys,
)
from dynbucket.format.index.entries import entries_for
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.records.incoming import dedupe
from dynbucket.format.storage.store import FileWriter, TableStore, WriteBatch
from dynbucket.format.table.context import WriteContext
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.transaction import WrittenFile


@dataclass
class GroupWrites:
    """What writing file groups did: the files, what happened to the keys (stale: an update
    of a known key that loses to the record the table has, by its ordering value), and the
    seconds spent per stage (summed over the threads that wrote)."""

    files: list[WrittenFile] = field(default_factory=list)
    keys_inserted: int = 0
    keys_updated: int = 0
    keys_stale: int = 0
    keys_deleted: int = 0
    keys_not_found: int = 0
    keys_moved: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    gone: dict[str, list[npt.NDArray[np.int64]]] = field(default_factory=dict)
    """Per partition, the key hashes of a write's records marked as deletes that leave the
    table (deleted) or never entered it (a key the assigner took as new): they leave the
    assigners' caches when the instant commits (a delete write's keys do so already)."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add_seconds({stage: time.perf_counter() - start})

    def add_seconds(self, seconds: Mapping[str, float]) -> None:
        """Adds seconds spent per stage (by another thread, task or stage)."""
        with self._lock:
            for stage, spent in seconds.items():
                self.seconds[stage] = self.seconds.get(stage, 0.0) + spent

    def add_not_found(self, keys: int) -> None:
        with self._lock:
            self.keys_not_found += keys

    def add_stale(self, keys: int) -> None:
        with self._lock:
            self.keys_stale += keys

    def add_gone(self, partition: str, hashes: npt.NDArray[np.int64]) -> None:
        if len(hashes):
            with self._lock:
                self.gone.setdefault(partition, []).append(hashes)

    def gone_keys(self) -> dict[str, npt.NDArray[np.int64]]:
        """:attr:`gone`, one array of hashes per partition."""
        return {p: np.concatenate(parts) for p, parts in self.gone.items()}

    def add_moves(self, partition: str, moves: settle.Moves, out: int, lost_out: int) -> None:
        """A global index's moves into one group (``moves``) and out of it (``out``
        written, ``lost_out`` that lost): a key moved is updated, not inserted and deleted
        (its lost move counted stale once, in the group it moved to); a move that lost
        leaves this partition's placement."""
        with self._lock:
            self.keys_updated += moves.moved_in
            self.keys_inserted -= moves.moved_in
            self.keys_deleted -= out
            self.keys_moved += moves.moved_in
            self.keys_stale += len(moves.lost) - lost_out
        self.add_gone(partition, moves.lost)

    def add(self, written: WrittenFile) -> None:
        with self._lock:
            self.files.append(written)
            self.keys_inserted += written.inserts
            self.keys_updated += written.updates - written.stale
            self.keys_stale += written.stale
            self.keys_deleted += written.deletes


def write_file_groups(
    ctx: WriteContext, rows: pa.Table, task: str | None = None, threads: int = 1
) -> GroupWrites:
    """Writes tagged rows (``_partition``, ``_bucket``, ``_is_new``, ``_op``) of the write
    ``ctx``.

    In a table of a stateless scheme (simple bucket, consistent hashing) no assigner knows
    which keys are new: each group's slice tells (its live keys are read), deletes of keys
    it does not hold are counted as not found, an insert of a key it holds is refused
    (``ctx.files_refuse_known``), and no index entries are written.

    Records marked as deletes among upserts (``_op``, from ``_hoodie_is_deleted``) are
    settled per group (``settle.settle_deletes``): a delete of a key the group does not
    hold, or one that loses to the record the group holds (its ordering value below), is
    not written. A partial upsert's group gets the fields its records lack from the rows
    the group holds (``settle.fill_kept``).

    1. Rows without a bucket (deletes of keys the table never had) are counted, not written.
    2. The rows are split into file groups (partition, bucket); each partition's current
       slices are listed once.
    3. Per group, as one job (``threads`` jobs at a time; pyarrow releases the GIL): its
       rows, one record per key (the largest ordering value, deletes alike), one file
       (module doc), the index entries of its new keys and the tombstones of the keys it
       deleted.
    4. Per partition, as one job: one index file with those entries (``task`` tells apart
       the files several writer tasks of one instant write into one partition).
    5. A partition that got a data file for the first time gets its
       ``.hoodie_partition_metadata``; every file written is flushed to disk and put in
       place at once (``WriteBatch``).
    """
    store, spec, instant, visible = ctx.store, ctx.spec, ctx.instant, ctx.visible
    deletes, refuse_known, index_slots = ctx.deletes, ctx.files_refuse_known, ctx.index_slots
    out = GroupWrites()
    # 1.
    unknown = pc.less(rows.column(BUCKET), 0)
    out.keys_not_found = int(pc.sum(unknown).as_py() or 0)
    if out.keys_not_found:
        rows = rows.filter(pc.invert(unknown))
    # 2.
    with out.timed("group"):
        groups = split_groups(rows)
    current: dict[str, dict[int, FileSlice]] = {}
    with out.timed("list"):
        for partition in dict.fromkeys([*(g[0] for g in groups), *_origins(rows)]):
            slices = file_slices(data_files(store, partition), visible)
            current[partition] = {s.bucket: s for s in slices}

    # 3.
    # What a group's writing reads (not the partition path and bucket: one value a group).
    needed = rows.select([c for c in rows.column_names if c not in (PARTITION, BUCKET)])
    files = WriteBatch(store)
    slices_tell_known = not spec.scheme.assigner_tells_new_keys
    keeps_entries = spec.scheme.index_entries

    def one_group(partition: str, bucket: int, at: pa.Array) -> tuple[str, pa.Table | None]:
        with out.timed("take"):
            group = needed.take(at)
        with out.timed("dedupe"):
            group = dedupe(spec, group, deletes=deletes)
        fslice = current[partition].get(bucket)
        if slices_tell_known:  # no assigner knew which keys are new: the slice tells
            with out.timed("known"):
                group, missing = settle.mark_known(store, spec, fslice, group, refuse_known)
            out.add_not_found(missing)
        moves = None
        if FROM_BUCKET in group.column_names:  # a global index's moves
            with out.timed("stale"):
                moves = settle.settle_moves(store, spec, current, group, instant)
            group = moves.rows
            leaving = settle.moves_out(group)
        if not deletes:
            with out.timed("stale"):
                settled = settle.settle_deletes(store, spec, fslice, group, instant)
            group = settled.rows
            out.add_not_found(settled.not_found)
            out.add_stale(settled.stale)
            out.add_gone(partition, settled.gone)
        if moves is not None:
            left = settle.moves_out(group)
            out.add_moves(partition, moves, left, leaving - left)
            group = group.drop_columns([FROM_PARTITION, FROM_BUCKET])
        if group.num_rows == 0:
            return partition, None
        if ctx.kept:
            with out.timed("fill"):
                group = settle.fill_kept(store, spec, fslice, group, ctx.kept)
        if fslice is not None:
            file_id = fslice.file_id
        else:
            file_id = names.file_id_for(spec.table_id, instant, partition, bucket)
        written = _write_group(store, files, spec, instant, partition, file_id, fslice, group, out)
        out.add(written)
        if not keeps_entries or not (written.inserts or written.deletes):
            return partition, None
        # Tombstones of the keys deleted (the room they free counted, I3), entries of the new.
        parts = []
        is_delete = pc.equal(group.column(OP), DELETE)
        if written.deletes:
            gone = group.filter(is_delete)
            parts.append(entries_for(gone, spec, bucket, file_id, instant, DELETE))
        if written.inserts:
            new = group.filter(pc.and_(group.column(IS_NEW), pc.invert(is_delete)))
            parts.append(entries_for(new, spec, bucket, file_id, instant))
        return partition, pa.concat_tables(parts)

    # 4.
    index = RecordLevelIndex(store, spec)

    def one_index(partition: str, parts: list[pa.Table]) -> None:
        with out.timed("index"):
            table = pa.concat_tables(parts)
            f = index.write(partition, instant, table, task=task, files=files, slots=index_slots)
        out.add(WrittenFile(partition, f.path, "index", table.num_rows, f.size, entries=table))

    # A partition's index file is written as soon as its last group is.
    left = Counter(g[0] for g in groups)
    entries: dict[str, list[pa.Table]] = defaultdict(list)
    try:
        # Its tasks wait for no other task of it (their files' flushes have a pool of their
        # own), so the process's pool serves: no threads started per write.
        pool = shared_pool("file-groups", threads)
        jobs: list[Future[Any]] = [pool.submit(one_group, *g) for g in groups]
        indexes: list[Future[Any]] = []
        try:
            for job in as_completed(jobs):
                partition, new = job.result()
                if new is not None:
                    entries[partition].append(new)
                left[partition] -= 1
                if left[partition] == 0 and entries[partition]:
                    indexes.append(pool.submit(one_index, partition, entries[partition]))
            for index_job in indexes:
                index_job.result()
        finally:  # a failure waits for the rest, as the pool's ``with`` did
            for pending in [*jobs, *indexes]:
                if not pending.cancel():
                    pending.exception()
        # 5.
        # Only a partition that got a file is one (deletes of keys a new partition never
        # had write nothing there: no folder holding only its metadata).
        for partition in sorted({f.partition for f in out.files if f.kind != "index"}):
            _partition_metadata(store, partition, instant)
        with out.timed("flush"):
            files.publish()
    except BaseException:
        files.discard()
        raise
    out.files.sort(key=lambda f: f.path)
    return out


def _origins(rows: pa.Table) -> list[str]:
    """The partitions a global index's keys move out of (their groups settle the moves)."""
    if FROM_PARTITION not in rows.column_names:
        return []
    return [p for p in pc.unique(rows.column(FROM_PARTITION)).to_pylist() if p is not None]


def _write_group(
    store: TableStore,
    files: FileWriter,
    spec: TableSpec,
    instant: str,
    partition: str,
    file_id: str,
    fslice: FileSlice | None,
    group: pa.Table,
    out: GroupWrites,
) -> WrittenFile:
    is_delete = pc.equal(group.column(OP), DELETE)
    deleted = int(pc.sum(is_delete).as_py() or 0)
    inserted = int(pc.sum(group.column(IS_NEW)).as_py() or 0)
    upserts = group.filter(pc.invert(is_delete)) if deleted else group
    stale = 0
    if fslice is None:
        with out.timed("encode"):
            name = names.base_name(file_id, instant)
            rows = _with_meta(spec, upserts, instant, partition, name, names.bucket_of(file_id))
            size = write_base(files, spec, store.path(partition, name), rows)
        written = WrittenFile(
            partition,
            store.path(partition, name),
            "base",
            rows.num_rows,
            size,
            file_id,
            names.bucket_of(file_id),
        )
    elif (
        spec.options.merge_on_read
        and (not deleted or delete_ordering(spec))
        and not _returns_below_base(store, spec, fslice, upserts, inserted, instant, out)
    ):
        with out.timed("encode"):
            written = _write_log(
                store,
                files,
                spec,
                instant,
                partition,
                fslice,
                upserts,
                group.filter(is_delete),
            )
        with out.timed("stale"):
            updates = upserts.filter(pc.invert(upserts.column(IS_NEW))) if inserted else upserts
            stale = stale_updates(store, spec, fslice, updates, instant)
    else:
        with out.timed("merge"):
            written, won = _rewrite_base(store, files, spec, instant, partition, fslice, group)
        stale = upserts.num_rows - won
    return dataclasses.replace(
        written,
        inserts=inserted,
        deletes=deleted,
        stale=stale,
        updates=group.num_rows - deleted - inserted,
    )


def _returns_below_base(
    store: TableStore,
    spec: TableSpec,
    fslice: FileSlice,
    upserts: pa.Table,
    inserted: int,
    instant: str,
    out: GroupWrites,
) -> bool:
    """Whether a key this group deleted comes back into it (a new key) with an ordering
    value below the record the group's files still hold of it. Hudi's readers merge a log
    record with that record and keep the larger: the deleted row would show again, where
    the same key coming back into another group shows its new row. Such a group's base is
    rewritten instead (copy-on-write for this instant: the delete applied, the new row
    in), so that a key that comes back shows its new row wherever it lands."""
    if not inserted:
        return False
    with out.timed("stale"):
        news = upserts.filter(upserts.column(IS_NEW))
        return stale_updates(store, spec, fslice, news, instant) > 0


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


def write_base(files: FileWriter, spec: TableSpec, path: str, rows: pa.Table) -> int:
    """Writes a base file of ``rows`` (the file schema's columns), sorted by key (a base
    file stays for many reads: sorted keys give tight statistics per row group)."""
    rows = rows.take(pc.sort_indices(rows, [(k, "ascending") for k in spec.record_key]))
    table = rows.select(spec.file_schema().names).cast(spec.file_schema())
    return files.write_parquet(path, table, **parquet_options(spec))


def parquet_options(spec: TableSpec) -> dict[str, object]:
    """Parquet settings of base files: dictionary encoding only where values repeat (meta
    fields that are one value per file, partition fields, other fields), not for keys and
    sequence numbers, which are unique (building a dictionary of them is wasted work); row
    groups of ``BASE_ROW_GROUP_ROWS``."""
    unique = {*spec.record_key, COMMIT_SEQNO, RECORD_KEY}
    return {
        "use_dictionary": [n for n in spec.file_schema().names if n not in unique],
        "row_group_size": BASE_ROW_GROUP_ROWS,
    }


#: Rows per row group of a base file: a lookup reads the row groups whose key range holds
#: its keys (base files are sorted by key), so a 2M-row group is read in 128K-row pieces
#: (10 random keys of one: 272 ms -> 93 ms, measured; a full read and a compaction's write
#: take as long as with pyarrow's default of 1M rows).
BASE_ROW_GROUP_ROWS = 131_072


def log_block_options(spec: TableSpec) -> dict[str, object]:
    """Parquet settings of log data blocks, which live until the next compaction:
    dictionaries only of the columns that hold one value per block (the meta fields of the
    commit, the partition fields; building dictionaries of the others took a quarter of the
    encoding time, measured, for 8% fewer bytes), statistics only of the ordering field
    (``stale.py`` reads them)."""
    constant = [COMMIT_TIME, PARTITION_PATH, FILE_NAME, *spec.partition_by]
    ordering = [spec.ordering_field] if spec.ordering_field else False
    return {
        "use_dictionary": [c for c in constant if c in spec.file_schema().names],
        "write_statistics": ordering,
    }


def _write_log(
    store: TableStore,
    files: FileWriter,
    spec: TableSpec,
    instant: str,
    partition: str,
    fslice: FileSlice,
    upserts: pa.Table,
    deletes: pa.Table,
) -> WrittenFile:
    base_instant, version = fslice.next_log(instant, spec.table_version)
    name = names.log_name(fslice.file_id, base_instant, version, instant)
    path = store.path(partition, name)
    blocks = []
    if upserts.num_rows:
        rows = _with_meta(spec, upserts, instant, partition, fslice.file_id, fslice.bucket)
        buffer = io.BytesIO()
        pq.write_table(rows.cast(spec.file_schema()), buffer, **log_block_options(spec))
        remember_largest(path, spec, pq.ParquetFile(pa.BufferReader(buffer.getbuffer())).metadata)
        blocks.append(
            log_file.data_block(buffer.getbuffer(), instant, spec.avro_schema(meta_fields=True))
        )
    ordering = delete_ordering(spec)
    if deletes.num_rows and ordering is not None:
        keys = record_keys(deletes, spec.record_key).to_pylist()
        blocks.append(log_file.delete_block(keys, [partition] * len(keys), ordering, instant))
    size = files.write_file(path, blocks)
    base_name = fslice.base.name if fslice.base is not None else ""
    return WrittenFile(
        partition,
        path,
        "log",
        upserts.num_rows + deletes.num_rows,
        size,
        fslice.file_id,
        fslice.bucket,
        prev_commit=base_instant,
        base_file=base_name,
        log_version=version,
        slice_logs=len(unmerged(fslice.logs)) + 1,
        base_bytes=fslice.base.size if fslice.base is not None else 0,
        log_bytes=sum(f.size for f in fslice.logs) + size,
    )


def delete_ordering(spec: TableSpec) -> tuple[str, object] | None:
    """The ordering value of a delete record, so that Hudi's readers apply a delete by commit
    order: the long 0, Hudi's "no ordering value", for integer ordering fields of any width
    and for tables without an ordering field. In Avro's ``long`` branch whatever the field's
    width: hudi-rs ignores a delete whose value is in the ``int`` branch, and cannot compare
    a string (a commit time) at all; Hudi's Java readers let a delete whose value's class
    differs from the record's win by commit order. None for other ordering types: no delete
    record can say that, and the file group's base file is rewritten without the deleted
    keys instead."""
    if spec.ordering_field is None:
        return ("long", 0)
    t = spec.schema.field(spec.ordering_field).type
    return ("long", 0) if pa.types.is_integer(t) else None


def _rewrite_base(
    store: TableStore,
    files: FileWriter,
    spec: TableSpec,
    instant: str,
    partition: str,
    fslice: FileSlice,
    group: pa.Table,
) -> tuple[WrittenFile, int]:
    """Copy-on-write: the slice's rows merged with the instant's, as a new base file; also
    how many of the instant's upserts won (the others were stale)."""
    name = names.base_name(fslice.file_id, instant)
    meta = list(spec.meta_fields) or [COMMIT_TIME]
    old = read_slice(store, spec, fslice, spec.schema.names, meta)
    old = old.append_column(
        KEY,
        old.column(RECORD_KEY)
        if RECORD_KEY in old.column_names
        else record_keys(old, spec.record_key),
    )
    new = _with_meta(spec, group, instant, partition, name, fslice.bucket)
    if not spec.meta_fields:
        new = new.append_column(COMMIT_TIME, pa.repeat(pa.scalar(instant), new.num_rows))
    new = new.append_column(KEY, record_keys(group, spec.record_key))
    new = new.append_column(OP, group.column(OP)).select([*old.column_names, OP])
    live = merge(spec, old, [new.cast(pa.schema([*old.schema, pa.field(OP, pa.int8())]))])
    size = write_base(files, spec, store.path(partition, name), moved_to(spec, live, name))
    won = int(pc.sum(pc.equal(live.column(COMMIT_TIME), instant)).as_py() or 0)
    return WrittenFile(
        partition,
        store.path(partition, name),
        "base",
        live.num_rows,
        size,
        fslice.file_id,
        fslice.bucket,
        prev_commit=fslice.base_instant,
    ), won


def _partition_metadata(store: TableStore, partition: str, instant: str) -> None:
    """``<partition>/.hoodie_partition_metadata``, which Hudi's Java readers find partitions
    by (written once, by whichever writer gets there first)."""
    path = store.path(partition, names.PARTITION_METADATA)
    if store.exists(path):
        return
    depth = len([p for p in partition.split("/") if p])
    body = properties.dumps(
        {"commitTime": instant, "partitionDepth": str(depth)}, "partition metadata"
    )
    store.create_exclusive(path, body)


def split_groups(rows: pa.Table) -> list[tuple[str, int, pa.Array]]:
    """(partition, bucket, row positions) of each file group the rows go to."""
    if rows.num_rows == 0:
        return []
    partitions, codes = partition_codes(rows.column(PARTITION))
    buckets = rows.column(BUCKET).to_numpy()
    width = int(buckets.max()) + 1
    key = codes.astype(np.int64) * width + buckets
    # A write touches few groups: as small integers, one radix sort orders the rows.
    small = np.uint16 if len(partitions) * width <= 1 << 16 else np.int64
    order = np.argsort(key.astype(small), kind="stable")
    ordered = key[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], len(order)]
    return [
        (partitions[int(ordered[a] // width)], int(ordered[a] % width), pa.array(order[a:b]))
        for a, b in zip(starts, ends, strict=True)
    ]
