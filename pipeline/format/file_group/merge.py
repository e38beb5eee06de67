"""Merge-on-read of one file slice: base file + log files -> the group's live rows.

Rule, per key, over its records in commit order (base first): a delete removes what came
before; of the upserts after the last delete, the one with the largest ordering value wins,
and a tie goes to the later commit. Without an ordering field the latest commit wins. Only
rows whose key appears in a later commit take part; other base rows pass through untouched.
Keys are the records' Hudi record keys (``_hoodie_record_key``, or the same string built from
the key fields when meta fields are not written): delete blocks name keys that way.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dynbucket.base.columns import DELETE, OP, SEQ, UPSERT
from dynbucket.base.errors import DataFileMissingError, FormatError, TableCorruptedError
from dynbucket.format.file_group.slices import DataFile, FileSlice
from dynbucket.format.hudi import avro_read, log_file
from dynbucket.format.hudi import files as names
from dynbucket.format.hudi.meta_fields import COMMIT_TIME, RECORD_KEY, record_keys
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec

log = logging.getLogger(__name__)

#: The record key string of each row while merging: not an Avro name, so no field of a
#: table's (whose names are Avro names) can be named so.
KEY = "#key"


def read_slice(
    store: TableStore,
    spec: TableSpec,
    fslice: FileSlice,
    columns: Sequence[str] | None = None,
    meta: Sequence[str] = (COMMIT_TIME,),
) -> pa.Table:
    """The live rows of a file group: ``columns`` (table fields; default all) and the
    ``meta`` fields asked for (``_hoodie_commit_time`` by default: the commit that last wrote
    each row; without meta fields in the files, the instant of the file a row was read
    from)."""
    wanted = list(columns) if columns is not None else spec.schema.names
    out_cols = _unique([*wanted, *meta])
    if fslice.base is not None and not fslice.logs:
        return spec.as_table_types(read_base(store, spec, fslice.base, out_cols))
    needed = merge_columns(spec, out_cols)
    base = read_base(store, spec, fslice.base, needed) if fslice.base is not None else None
    logs = read_deltas(store, spec, fslice.logs, needed)
    return merge_slice(spec, base, logs, out_cols)


def read_slice_of_keys(
    store: TableStore,
    spec: TableSpec,
    fslice: FileSlice,
    keys: pa.Table,
    columns: Sequence[str] | None = None,
    meta: Sequence[str] = (COMMIT_TIME,),
) -> pa.Table:
    """The live rows of ``keys`` (rows of the key fields) in a file group: what
    :func:`read_slice` returns of them (a key's merge depends on its own records alone),
    reading of the base file only the row groups whose key statistics can hold one (base
    files are sorted by key) and merging only the log records of those keys."""
    wanted = list(columns) if columns is not None else spec.schema.names
    out_cols = _unique([*wanted, *meta])
    needed = merge_columns(spec, out_cols)
    texts = record_keys(keys, spec.record_key)
    base = None
    if fslice.base is not None:
        base = _base_rows_of(store, spec, fslice.base, needed, keys)
        base = base.filter(pc.is_in(record_keys(base, spec.record_key), value_set=texts))
    logs = [
        d.filter(pc.is_in(d.column(KEY), value_set=texts))
        for d in read_deltas(store, spec, fslice.logs, needed)
    ]
    if base is not None and not logs:
        return spec.as_table_types(base.select(out_cols))
    return merge_slice(spec, base, logs, out_cols)


def _base_rows_of(
    store: TableStore, spec: TableSpec, f: DataFile, columns: Sequence[str], keys: pa.Table
) -> pa.Table:
    """``columns`` of the row groups of base file ``f`` that can hold one of ``keys`` (by
    the statistics of a single key field; every row group when there are several)."""

    def groups(metadata: pq.FileMetaData) -> list[int]:
        every = list(range(metadata.num_row_groups))
        if len(spec.record_key) != 1 or len(every) < 2:
            return every
        return holding_row_groups(metadata, spec.record_key[0], keys.column(0))

    table = _read_parquet(store, f.path, in_files(spec, columns), groups)
    return fill_meta(spec, table, columns, f.instant, f.name)


def holding_row_groups(
    metadata: pq.FileMetaData, field: str, values: pa.Array | pa.ChunkedArray
) -> list[int]:
    """The row groups whose statistics of ``field`` (a string or integer column) can hold
    one of ``values``; a row group without statistics can, and so can every row group when
    the field is of another type."""
    every = list(range(metadata.num_row_groups))
    at = next(
        (j for j in range(metadata.num_columns) if metadata.schema.column(j).path == field), None
    )
    kind = values.type
    if at is None or not (pa.types.is_string(kind) or pa.types.is_integer(kind)):
        return every
    wanted = sorted(v for v in values.to_pylist() if v is not None)
    out = []
    for i in every:
        stats = metadata.row_group(i).column(at).statistics
        if stats is None or not stats.has_min_max:
            out.append(i)
            continue
        first = bisect.bisect_left(wanted, stats.min)
        if first < len(wanted) and wanted[first] <= stats.max:
            out.append(i)
    return out


def merge_columns(spec: TableSpec, columns: Sequence[str]) -> list[str]:
    """What merging a slice reads to return ``columns``: also the key and ordering fields."""
    return _unique([*columns, *spec.record_key, *_ordering(spec)])


def merge_slice(
    spec: TableSpec, base: pa.Table | None, logs: Sequence[pa.Table], columns: Sequence[str]
) -> pa.Table:
    """The live ``columns`` of a slice from its base rows and its logs' records (as
    :func:`read_base` and :func:`read_log` return them)."""
    rows = merge(spec, _keyed(spec, base) if base is not None else None, logs)
    return spec.as_table_types(rows.select(list(columns)))


def in_files(spec: TableSpec, columns: Sequence[str]) -> list[str]:
    """Which of ``columns`` data files hold (meta fields only when populated)."""
    return [c for c in columns if c in spec.schema.names or c in spec.meta_fields]


def read_base(store: TableStore, spec: TableSpec, f: DataFile, columns: Sequence[str]) -> pa.Table:
    """``columns`` of a base file (meta fields the file does not hold are filled in)."""
    table = _read_parquet(store, f.path, in_files(spec, columns))
    return fill_meta(spec, table, columns, f.instant, f.name)


def read_log(store: TableStore, spec: TableSpec, f: DataFile, columns: Sequence[str]) -> pa.Table:
    """One log file's records as one commit's delta: upserts (``_op`` 0) from its data
    blocks, deletes (``_op`` 1, other fields null) from its delete blocks, with ``_key``."""
    hudis = names.parse(f.name)
    foreign = hudis is not None and not hudis.instant  # a log Hudi wrote (adoption)
    try:
        blocks = log_file.read_blocks(store.read_buffer(f.path), skip_corrupt=foreign)
    except ValueError as e:
        raise FormatError(
            f"{f.path}: damaged log file ({e}); restore it from a backup, or roll back the "
            f"instant {f.instant} that wrote it"
        ) from e
    except FileNotFoundError as e:
        raise DataFileMissingError(
            f"{f.path}: a log file of completed instant {f.instant} is missing; restore it "
            "from a backup"
        ) from e
    in_file = in_files(spec, columns)
    parts = []
    # Blocks a rollback command rolled back (and corrupt ones) are skipped, as Hudi does.
    gone = log_file.rolled_back(blocks) if foreign else set()
    corrupt = sum(1 for b in blocks if b.type == log_file.CORRUPT)
    if corrupt:
        log.warning("%s: %d corrupt log block(s) skipped, as Hudi skips them", f.path, corrupt)
    for block in blocks:
        if block.instant in gone:
            continue
        if block.type in (log_file.PARQUET_DATA, log_file.AVRO_DATA):
            data = _data_block(block, in_file)
            data = fill_meta(spec, data, columns, block.instant, f.file_id)
            data = _keyed(spec, data)
            parts.append(
                data.append_column(OP, pa.repeat(pa.scalar(UPSERT, pa.int8()), data.num_rows))
            )
        elif block.type == log_file.DELETE:
            parts.append(_delete_rows(spec, block, columns))
    if not parts:
        return _delete_rows(spec, None, columns)
    schema = parts[0].schema
    return pa.concat_tables([p.cast(schema) for p in parts])


def _data_block(block: log_file.Block, columns: Sequence[str]) -> pa.Table:
    """``columns`` of a data block's records: a Parquet block's (what dynbucket writes), or
    an Avro block's (what Hudi's Spark writer writes to logs), decoded by its schema."""
    if block.type == log_file.PARQUET_DATA:
        parquet = pq.ParquetFile(pa.BufferReader(block.content))
        present = set(parquet.schema_arrow.names)
        return parquet.read([c for c in columns if c in present], use_threads=False)
    rows = avro_read.read_records(block.header[log_file.SCHEMA], log_file.avro_records(block))
    return rows.select([c for c in columns if c in rows.column_names])


def read_deltas(
    store: TableStore, spec: TableSpec, logs: Sequence[DataFile], columns: Sequence[str]
) -> list[pa.Table]:
    """The deltas of a slice's ``logs``, oldest first, as :func:`merge` takes them: one per
    log, but two for a merged log (``merged_log.py``): its deletes, then its upserts (a
    key it deletes and upserts was deleted, then written again, in the logs it restates)."""
    out = []
    for f in logs:
        delta = read_log(store, spec, f, columns)
        if not f.merges_from:
            out.append(delta)
            continue
        deleted = pc.equal(delta.column(OP), DELETE)
        out.append(delta.filter(deleted))
        out.append(delta.filter(pc.invert(deleted)))
    return out


def _delete_rows(spec: TableSpec, block: log_file.Block | None, columns: Sequence[str]) -> pa.Table:
    keys = log_file.delete_keys(block) if block is not None else pa.array([], pa.string())
    n = len(keys)
    types = {f.name: f.type for f in spec.file_schema()}
    out = {c: pa.nulls(n, types.get(c, pa.string())) for c in columns}
    if COMMIT_TIME in out:  # asked for: a delete's is its commit's (never a new column)
        out[COMMIT_TIME] = pa.repeat(pa.scalar(block.instant if block else ""), n)
    out[KEY] = keys
    out[OP] = pa.repeat(pa.scalar(DELETE, pa.int8()), n)
    return pa.table(out)


def fill_meta(
    spec: TableSpec, table: pa.Table, columns: Sequence[str], instant: str, file_name: str
) -> pa.Table:
    """``columns`` of rows read from one data file: the meta fields asked for that it lacks
    added (files without meta fields); a table field the file predates as nulls, and one
    whose type the schema promoted since in the file schema's type (``schemas.py``: files
    are never rewritten for a schema change)."""
    n = table.num_rows
    types = spec.field_types()
    for name in columns:
        want = types.get(name)
        if name in table.column_names:
            if want is not None and table.schema.field(name).type != want:
                at = table.schema.get_field_index(name)
                table = table.set_column(at, name, table.column(at).cast(want))
            continue
        if want is not None:
            table = table.append_column(pa.field(name, want), pa.nulls(n, want))
        elif name == COMMIT_TIME:
            table = table.append_column(name, pa.repeat(pa.scalar(instant), n))
        elif name == RECORD_KEY:
            table = table.append_column(name, record_keys(table, spec.record_key))
        elif name.startswith("_hoodie_"):
            table = table.append_column(name, pa.repeat(pa.scalar(file_name), n))
    return table.select(list(columns))


def _keyed(spec: TableSpec, rows: pa.Table) -> pa.Table:
    """``rows`` with ``_key``, the record key string (the key field itself when it is one
    string field: no second column to read)."""
    return rows.append_column(KEY, record_keys(rows, spec.record_key))


def merge(spec: TableSpec, base: pa.Table | None, logs: Sequence[pa.Table]) -> pa.Table:
    """Live rows of a slice: ``base`` (with ``_key``, no ``_op``) and its log records
    ``logs`` (one table per commit, with ``_key`` and ``_op``, oldest first).

    As Hudi merges a slice (``DefaultHoodieRecordPayload``; deletes carry no ordering value):

    1. The log records fold, commit by commit, into one record per key: a delete replaces
       what came before it; an upsert replaces a delete, or an upsert whose ordering value is
       not larger.
    2. The base rows meet that: a key whose log record is a delete is gone; a key whose log
       record is an upsert takes it, unless the base row's ordering value is larger.

    So a delete followed by an upsert of a smaller ordering value brings back the base
    row, not the upsert (Hudi's readers do the same; the same writes compacted in between, or
    on a copy-on-write table, give the upsert). Keys are matched exactly, as strings.
    """
    columns = [c for c in logs[0].column_names if c != OP]
    schema = logs[0].select(columns).schema
    state = base.select(columns).cast(schema) if base is not None else schema.empty_table()
    state = state.append_column(OP, pa.repeat(pa.scalar(UPSERT, pa.int8()), state.num_rows))
    folded = fold_logs(spec, logs)  # 1.
    return _fold(spec, state, folded).drop_columns([OP])  # 2.


def fold_logs(spec: TableSpec, logs: Sequence[pa.Table]) -> pa.Table:
    """Step 1 of :func:`merge`: the net effect of a slice's log records ``logs`` (one table
    per commit, oldest first, one record per key each), one record per key, upserts and
    deletes (``_op``), in the order the commits added them. Met with a base as one more
    commit, it gives what the logs give one by one (a log compaction writes it:
    ``file_group/merged_log.py``).

    All commits at once, not one fold per commit (a fold is some 15 Arrow calls; a lagging
    writer's stale check merges slices of dozens of logs at every write):

    1. The commits' records in one table, in commit order; each key's records together.
    2. A *reset* is a delete (it replaces whatever came before) or an upsert without an
       ordering value (Hudi's comparison with a null lets the newer record win, on either
       side: it replaces what came before, and the record after it replaces it). A key
       whose last record is a reset keeps that record.
    3. Else of the records after the key's last reset (all of them without one), the
       largest ordering value wins, a tie to the later commit; without an ordering field
       the later commit.
    """
    names = logs[0].column_names
    parts = [delta.select(names) for delta in logs if delta.num_rows]
    if len(parts) <= 1:
        return parts[0] if parts else logs[0].slice(0, 0)
    rows = pa.concat_tables(parts).combine_chunks()  # 1.
    n = rows.num_rows
    codes = _key_codes(rows, [KEY])
    order = np.argsort(codes, kind="stable")
    codes = codes[order]
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    run = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    pos = np.arange(n)
    reset = rows.column(OP).to_numpy()[order] == DELETE  # 2.
    rank = np.zeros(n, np.int64)
    if spec.ordering_field is not None:
        values = ordering_keys(rows.column(spec.ordering_field))
        reset |= values.is_null().to_numpy(zero_copy_only=False)[order]
        ranked = pc.rank(values, sort_keys="ascending", tiebreaker="dense")
        rank = ranked.to_numpy().astype(np.int64)[order]
    last_reset = np.maximum.reduceat(np.where(reset, pos, -1), starts)
    winner = last_reset.copy()  # a reset that ends its key's records
    after = np.flatnonzero(pos > last_reset[run])  # 3.
    best = after[np.lexsort((after, rank[after], run[after]))]
    last_of_run = np.r_[run[best][1:] != run[best][:-1], True] if len(best) else []
    winner[run[best[last_of_run]]] = best[last_of_run]
    return rows.take(pa.array(np.sort(order[winner])))


def _positions(state: pa.Table, delta: pa.Table) -> pa.Array:
    """For each delta row, the position of its key in ``state`` (null when absent).

    Keys are compared as strings, exactly, in one pass: a hash table over the delta's keys
    (the commit's records), probed with every state row's key.
    """
    in_delta = pc.index_in(state.column(KEY), value_set=delta.column(KEY))
    hit = pc.is_valid(in_delta).to_numpy(zero_copy_only=False)
    found = np.zeros(delta.num_rows, np.int64)
    present = np.zeros(delta.num_rows, np.bool_)
    rows = in_delta.filter(pa.array(hit)).to_numpy(zero_copy_only=False)
    found[rows] = np.flatnonzero(hit)
    present[rows] = True
    return pa.array(found, pa.int64(), mask=~present)


def _fold(spec: TableSpec, state: pa.Table, delta: pa.Table) -> pa.Table:
    """``state`` (a slice's base rows, one per key) after ``delta`` (the logs folded, one
    record per key): a delete in ``delta`` removes the key's record; an upsert replaces a
    missing record, a delete, or an upsert whose ordering value is not larger."""
    if state.num_rows == 0:  # no base rows: nothing to meet
        return delta.filter(pc.not_equal(delta.column(OP), DELETE))
    pos = _positions(state, delta)
    matched = pc.is_valid(pos)
    at = pos.fill_null(0)
    deleted = pc.equal(delta.column(OP), DELETE)
    if spec.ordering_field is not None and state.num_rows:
        older = state.column(spec.ordering_field).take(at)
        was_deleted = pc.equal(state.column(OP).take(at), DELETE)
        # Delete records carry no ordering value (null): for them ``wins`` does not matter.
        newer_or_tie = pc.greater_equal(
            ordering_keys(delta.column(spec.ordering_field)), ordering_keys(older)
        ).fill_null(True)
        wins = pc.or_(pc.or_(pc.invert(matched), was_deleted), newer_or_tie)
    else:
        wins = pa.repeat(pa.scalar(True), delta.num_rows)
    added = pc.and_(pc.invert(deleted), wins)
    replaced = pc.and_(matched, pc.or_(deleted, wins)).to_numpy(zero_copy_only=False)
    keep = np.ones(state.num_rows, np.bool_)
    keep[at.to_numpy(zero_copy_only=False)[replaced]] = False
    # Most commits replace some rows and add all of theirs: filter only what changes.
    kept = state if keep.all() else state.filter(pa.array(keep))
    new = delta if pc.all(added).as_py() else delta.filter(added)
    return pa.concat_tables([kept, new.select(state.column_names)])


def _ordering_rank(
    spec: TableSpec, rows: pa.Table, positions: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Dense rank of the ordering value at ``positions`` (zeros without an ordering field)."""
    if spec.ordering_field is None:
        return np.zeros(len(positions), np.int64)
    values = ordering_keys(rows.column(spec.ordering_field).take(pa.array(positions)))
    return pc.rank(values, sort_keys="ascending", tiebreaker="dense").to_numpy().astype(np.int64)


def ordering_keys(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Ordering values as Hudi compares them (Java's ``compareTo``): floating values in
    Java's total order, where -0.0 is below 0.0 (IEEE comparison calls them equal), as
    int64 keys of their bits; nulls stay null; other types as they are."""
    if not pa.types.is_floating(values.type):
        return values
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    x = array.cast(pa.float64()).to_numpy(zero_copy_only=False)
    x = np.where(np.isnan(x), np.nan, x)  # one NaN, as Java's doubleToLongBits makes it
    bits = x.view(np.int64)
    keys = np.where(bits < 0, bits ^ np.int64(0x7FFF_FFFF_FFFF_FFFF), bits)
    return pa.array(keys, pa.int64(), mask=array.is_null().to_numpy(zero_copy_only=False))


def _select(
    group: npt.NDArray[np.int64],
    seq: npt.NDArray[np.int64],
    op: npt.NDArray[np.int8],
    rank: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """Positions of each group's live record, if it has one (the rule in the module doc)."""
    n = len(group)
    if n == 0:
        return np.empty(0, np.int64)
    # 1. Records of a key together, in commit order.
    order = np.lexsort((seq, group))
    group_s = group[order]
    starts = np.flatnonzero(np.r_[True, group_s[1:] != group_s[:-1]])
    run = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    # 2. Position of each key's last delete (-1 when none); what precedes it is gone.
    pos = np.arange(n)
    op_s = op[order]
    last_delete = np.maximum.reduceat(np.where(op_s == DELETE, pos, -1), starts)
    alive = np.flatnonzero((op_s == UPSERT) & (pos > last_delete[run]))
    # 3. Of the live upserts of a key: largest ordering value, then latest commit.
    best = alive[np.lexsort((seq[order][alive], rank[order][alive], run[alive]))]
    last_of_run = np.r_[run[best][1:] != run[best][:-1], True] if len(best) else best.astype(bool)
    return np.sort(order[best[last_of_run]])


def _winners(spec: TableSpec, rows: pa.Table, key_fields: Sequence[str]) -> npt.NDArray[np.int64]:
    """Positions (in ``rows``, with ``_op`` and ``_seq``) of each key's live record."""
    if rows.num_rows == 0:
        return np.empty(0, np.int64)
    positions = np.arange(rows.num_rows)
    return _select(
        _key_codes(rows, key_fields),
        rows.column(SEQ).to_numpy().astype(np.int64),
        rows.column(OP).to_numpy(),
        _ordering_rank(spec, rows, positions),
    )


def _key_codes(rows: pa.Table, key_fields: Sequence[str]) -> npt.NDArray[np.int64]:
    """Equal keys -> equal integers (any key types, several fields)."""
    codes = np.zeros(rows.num_rows, np.int64)
    for name in key_fields:
        column = rows.column(name)
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        c = pc.dictionary_encode(column).indices.to_numpy(zero_copy_only=False).astype(np.int64)
        codes = codes * (int(c.max()) + 1) + c if len(c) else codes
        if len(key_fields) > 1:
            codes = np.unique(codes, return_inverse=True)[1].astype(np.int64)
    return codes


def dedupe_batch(rows: pa.Table, spec: TableSpec, key_fields: Sequence[str]) -> pa.Table:
    """One record per key within a batch: the largest ordering value, ties to the last row,
    a delete (``_op``) as any record (Hudi's pre-combine: a delete marked in the records
    carries its ordering value, so an older delete loses to a newer upsert and the other
    way round)."""
    if rows.num_rows <= 1:
        return rows
    n = rows.num_rows
    winners = _select(
        _key_codes(rows, key_fields),
        np.arange(n, dtype=np.int64),
        np.full(n, UPSERT, np.int8),
        _ordering_rank(spec, rows, np.arange(n)),
    )
    return rows if len(winners) == n else rows.take(pa.array(winners))


def _read_parquet(
    store: TableStore,
    path: str,
    columns: list[str],
    row_groups: Callable[[pq.FileMetaData], list[int]] | None = None,
) -> pa.Table:
    """``columns`` of a data file (of the row groups ``row_groups`` picks from its footer;
    default all), those it has (a file written before a field was added lacks it)."""
    try:
        if row_groups is not None or store.is_local:
            # Local files are memory-mapped: decoding reads the page cache without a copy.
            source = path if store.is_local else store.fs.open_input_file(path)
            parquet = pq.ParquetFile(source, memory_map=store.is_local)
            present = set(parquet.schema_arrow.names)
            columns = [c for c in columns if c in present]
            if row_groups is not None:
                return parquet.read_row_groups(row_groups(parquet.metadata), columns=columns)
            return parquet.read(columns=columns)
        try:
            return pq.read_table(path, columns=columns, filesystem=store.fs, partitioning=None)
        except pa.ArrowInvalid as e:  # a field the file predates: read the others
            if "No match for FieldRef" not in str(e):
                raise
            parquet = pq.ParquetFile(store.fs.open_input_file(path))
            present = set(parquet.schema_arrow.names)
            return parquet.read(columns=[c for c in columns if c in present])
    except FileNotFoundError as e:
        raise DataFileMissingError(
            f"{path}: a data file of a completed instant is missing; restore it from a backup"
        ) from e
    except (pa.ArrowInvalid, OSError) as e:
        raise TableCorruptedError(
            f"{path}: unreadable data file ({e}); restore it from a backup"
        ) from e


def _ordering(spec: TableSpec) -> list[str]:
    return [spec.ordering_field] if spec.ordering_field else []


def _unique(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(names))
