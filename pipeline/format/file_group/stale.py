"""Stale records: upserts and deletes of known keys that lose to the record the table holds.

A stale update is written all the same (readers merge it away, as Hudi's do), but a write
reports it apart from the updates that took effect (``keys_stale``); a stale delete is not
written (a delete record carries no ordering value a reader could compare). Knowing which are stale
needs the slice's records only for the updates whose ordering value is below the largest the
slice's files hold, which their Parquet statistics say without reading a row; and then only
the records of those updates' keys take part in the merge.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dynbucket.base.columns import OP, UPSERT
from dynbucket.format.file_group.merge import KEY, merge, read_base, read_deltas
from dynbucket.format.file_group.slices import DataFile, FileSlice
from dynbucket.format.hudi import log_file
from dynbucket.format.hudi.meta_fields import COMMIT_TIME, record_keys
from dynbucket.format.storage import caches
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec


def stale_updates(
    store: TableStore, spec: TableSpec, fslice: FileSlice, updates: pa.Table, instant: str
) -> int:
    """How many of ``updates`` (upserts of keys the group has) lose to the record the group
    holds, as a reader merges them (by the ordering value; see ``merge``). They are written
    all the same (readers merge them away), but do not count as updated."""
    return int(np.count_nonzero(stale_mask(store, spec, fslice, updates, instant)))


def stale_mask(
    store: TableStore, spec: TableSpec, fslice: FileSlice, records: pa.Table, instant: str
) -> npt.NDArray[np.bool_]:
    """Which of ``records`` (of keys the group has, one per key) lose to the record the
    group holds, as a reader merges an upsert with it: by the ordering value, a tie to the
    newer. An update that loses is merged away by readers; a delete that loses (its
    ordering value below the stored record's: Hudi's event-time ordering) is not written.

    1. Without an ordering field the latest commit wins: none is stale.
    2. A record whose ordering value is not below the largest the slice's files hold (their
       Parquet statistics) wins whatever its key holds: only the others are suspects, and
       without suspects nothing is read.
    3. The slice's keys, ordering values and commit times are read, only the records of the
       suspects' keys kept (one hash probe per file), and merged with the suspects as a
       reader would merge them; the suspects that did not win are stale.
    """
    stale = np.zeros(records.num_rows, np.bool_)
    ordering = spec.ordering_field
    if ordering is None or records.num_rows == 0:  # 1.
        return stale
    suspects = np.arange(records.num_rows)
    newest = _largest_ordering(store, spec, fslice)  # 2.
    if newest is not None:
        kind = records.schema.field(ordering).type
        # Floats: a tie may be -0.0 against 0.0 (statistics do not tell), which Hudi orders.
        below = (pc.less_equal if pa.types.is_floating(kind) else pc.less)(
            records.column(ordering), pa.scalar(newest).cast(kind)
        )
        suspects = np.flatnonzero(below.to_numpy(zero_copy_only=False))
        if len(suspects) == 0:
            return stale
    updates = records.take(pa.array(suspects))
    keys = record_keys(updates, spec.record_key)  # 3.
    base, logs = _records_of(store, spec, fslice, keys)
    delta = updates.select(list(dict.fromkeys([*spec.record_key, ordering])))
    delta = delta.append_column(COMMIT_TIME, pa.repeat(pa.scalar(instant), delta.num_rows))
    delta = delta.append_column(KEY, keys)
    delta = delta.append_column(OP, pa.repeat(pa.scalar(UPSERT, pa.int8()), delta.num_rows))
    if logs:
        delta = delta.select(logs[0].column_names).cast(logs[0].schema)
    live = merge(spec, base, [*logs, delta])
    won = live.filter(pc.equal(live.column(COMMIT_TIME), instant)).column(KEY)
    stale[suspects] = pc.invert(pc.is_in(keys, value_set=won)).to_numpy(zero_copy_only=False)
    return stale


def live_among(store: TableStore, spec: TableSpec, fslice: FileSlice, keys: pa.Array) -> pa.Array:
    """Which of ``keys`` (record keys, as Hudi spells them) are live in the slice: its files'
    keys, ordering values and commit times are read, only the records of ``keys`` kept, and
    merged as a reader merges them (the merge costs what the keys asked about cost, not
    what the group holds)."""
    base, logs = _records_of(store, spec, fslice, keys)
    if not logs:  # a base file alone: its keys are live
        return pc.is_in(
            keys, value_set=base.column(KEY) if base is not None else pa.array([], pa.string())
        )
    if base is not None:
        base = base.select([c for c in logs[0].column_names if c != OP]).cast(
            pa.schema([f for f in logs[0].schema if f.name != OP])
        )
    live = merge(spec, base, logs)
    return pc.is_in(keys, value_set=live.column(KEY))


def _records_of(
    store: TableStore, spec: TableSpec, fslice: FileSlice, keys: pa.Array
) -> tuple[pa.Table | None, list[pa.Table]]:
    """The slice's records of ``keys`` (base, logs): key fields, ordering field, commit
    time and ``_key``, read from every file of the slice (each file once per process while
    it fits ``_RECORDS``: beside another writer, a writer's updates lag the other's and
    the same slices are read at every write)."""
    ordering = [spec.ordering_field] if spec.ordering_field else []
    columns = list(dict.fromkeys([*spec.record_key, *ordering, COMMIT_TIME]))
    types = {f.name: str(f.type) for f in spec.file_schema()}
    shape = "\0" + ",".join(f"{c}:{types.get(c)}" for c in columns)
    base = None
    if fslice.base is not None:
        f = fslice.base
        base = _kept(f, shape, lambda: [_keyed(read_base(store, spec, f, columns), spec)])[0]
    logs = []
    for log in fslice.logs:

        def read(f: DataFile = log) -> list[pa.Table]:
            return read_deltas(store, spec, [f], columns)

        logs += _kept(log, shape, read)
    return _only_keys(base, logs, keys)


def _keyed(base: pa.Table, spec: TableSpec) -> pa.Table:
    return base.append_column(KEY, record_keys(base, spec.record_key))


def _kept(f: DataFile, shape: str, read: Callable[[], list[pa.Table]]) -> list[pa.Table]:
    """What ``read`` returns of the data file ``f``, kept by its path and size (a file
    never changes once written; Hudi appends to a log only as a larger file) and the
    columns' names and types (``shape``), in ``_RECORDS``."""
    return _RECORDS.read(f"{f.path}\0{f.size}{shape}", read)


#: Data files' records as the stale check reads them (``_kept``), 64 MiB.
_RECORDS: caches.Kept[str, list[pa.Table]] = caches.per_table(
    caches.Kept(64 * 1024 * 1024, size=lambda tables: sum(t.nbytes for t in tables))
)


def _only_keys(
    base: pa.Table | None, logs: list[pa.Table], keys: pa.Array
) -> tuple[pa.Table | None, list[pa.Table]]:
    """The records of ``keys`` alone, in the base and each log (one hash table of the keys,
    probed with every file's keys at once)."""
    tables = ([base] if base is not None else []) + logs
    chunks = [chunk for table in tables for chunk in table.column(KEY).chunks]
    found = pc.is_in(pa.chunked_array(chunks, pa.string()), value_set=keys)
    found = found.combine_chunks()  # a mask per file is then a slice (no copy)
    kept, at = [], 0
    for table in tables:
        kept.append(table.filter(found.slice(at, table.num_rows)))
        at += table.num_rows
    return (kept[0], kept[1:]) if base is not None else (None, kept)


#: The largest ordering value of each data file read or written (files never change once
#: written): a write reads the statistics of the slice's files it has not seen, so its cost
#: does not grow with the logs a slice collects between compactions. Bounded: the oldest
#: entries go first.
_LARGEST: dict[str, object] = caches.per_table({})
_LARGEST_MAX = 200_000
#: A file without statistics of the ordering field: the slice's largest cannot be told.
_NO_STATS = object()


def remember_largest(path: str, spec: TableSpec, metadata: pq.FileMetaData) -> None:
    """Notes the largest ordering value of a data block just written at ``path`` (the
    writer knows its footer; the next write of the slice need not read it back)."""
    if spec.ordering_field is not None and _comparable(spec):
        _remember(path, _footer_max(metadata, spec.ordering_field))


def copied_largest(source: str, target: str) -> None:
    """Notes that ``target`` holds the same records as ``source`` (a copied log)."""
    if source in _LARGEST:
        _remember(target, _LARGEST[source])


def _remember(path: str, value: object) -> None:
    if len(_LARGEST) >= _LARGEST_MAX:
        for old in list(_LARGEST)[: _LARGEST_MAX // 4]:
            del _LARGEST[old]
    _LARGEST[path] = value


def _comparable(spec: TableSpec) -> bool:
    assert spec.ordering_field is not None
    t = spec.schema.field(spec.ordering_field).type
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_string(t)


def _largest_ordering(store: TableStore, spec: TableSpec, fslice: FileSlice) -> object | None:
    """The largest ordering value in the slice's data files, from their Parquet statistics
    (None when a file has none, or the type's values do not compare as Python values); a
    file's value is read once per process (``_LARGEST``)."""
    ordering = spec.ordering_field
    assert ordering is not None
    if not _comparable(spec):
        return None
    largest = None
    for f in fslice.files:
        value = _LARGEST.get(f.path, _LARGEST)
        if value is _LARGEST:
            value = _file_max(store, f, ordering)
            _remember(f.path, value)
        if value is _NO_STATS:
            return None
        if value is not None and (largest is None or value > largest):  # type: ignore[operator]
            largest = value
    return largest


def _file_max(store: TableStore, f: DataFile, ordering: str) -> object:
    """A data file's largest ordering value (None: it holds no records; ``_NO_STATS``)."""
    if f.kind == "base":  # its footer alone (a ranged read on object stores)
        return _footer_max(pq.read_metadata(f.path, filesystem=store.fs), ordering)
    largest = None
    for block in log_file.read_blocks(store.read_buffer(f.path), skip_corrupt=True):
        if block.type == log_file.PARQUET_DATA:
            meta = pq.ParquetFile(pa.BufferReader(block.content)).metadata
            value = _footer_max(meta, ordering)
            if value is _NO_STATS:
                return _NO_STATS
            if value is not None and (largest is None or value > largest):  # type: ignore[operator]
                largest = value
        elif block.type == log_file.AVRO_DATA:  # Hudi's: no statistics to read
            return _NO_STATS
    return largest


def _footer_max(meta: pq.FileMetaData, ordering: str) -> object:
    """The largest ordering value a Parquet footer's statistics hold (None: no rows;
    ``_NO_STATS``: a row group without them)."""
    at = meta.schema.to_arrow_schema().get_field_index(ordering)
    largest = None
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(at).statistics
        if stats is None or not stats.has_min_max:
            return _NO_STATS
        if largest is None or stats.max > largest:
            largest = stats.max
    return largest
