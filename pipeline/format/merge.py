"""Merge-on-read of one file slice: base file + delta files -> the group's live rows.

Rule, per key, over its records in commit order (base first): a delete removes what came
before; of the upserts after the last delete, the one with the largest ordering value wins,
and a tie goes to the later commit. Without an ordering field the latest commit wins. Only
rows whose key appears in a delta take part; other base rows pass through untouched.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dynbucket.pipeline.format.columns import DELETE, HASH, INSTANT, OP, SEQ, UPSERT
from dynbucket.pipeline.format.layout import FileSlice
from dynbucket.pipeline.format.storage import TableStore
from dynbucket.pipeline.format.table_spec import TableSpec


def read_slice(
    store: TableStore,
    spec: TableSpec,
    fslice: FileSlice,
    columns: Sequence[str] | None = None,
    with_instant: bool = True,
) -> pa.Table:
    """The live rows of a file group, with ``columns`` (data fields; default all) plus
    ``_hash`` (and ``_instant`` unless ``with_instant`` is false)."""
    wanted = list(columns) if columns is not None else spec.data_fields
    meta = [HASH, INSTANT] if with_instant else [HASH]
    needed = _unique([*wanted, *spec.record_key, *_ordering(spec), *meta])
    out_cols = _unique([*wanted, *meta])
    base = _read(store, fslice.base.path, needed) if fslice.base is not None else None
    if not fslice.deltas:
        return base.select(out_cols) if base is not None else _empty(spec, out_cols)
    deltas = [_read(store, d.path, [*needed, OP]) for d in fslice.deltas]
    return merge(spec, base, deltas).select(out_cols)


def merge(spec: TableSpec, base: pa.Table | None, deltas: Sequence[pa.Table]) -> pa.Table:
    """Live rows of ``base`` (no ``_op`` column) after ``deltas`` (with ``_op``), oldest first.

    Each delta folds into the rows so far with a hash join on ``_hash`` (each side holds one
    record per key); a hash shared by two different keys falls back to the exact merge.
    """
    columns = [c for c in deltas[0].column_names if c != OP]
    schema = deltas[0].select(columns).schema
    state = base.select(columns).cast(schema) if base is not None else schema.empty_table()
    for delta in deltas:
        folded = _fold(spec, state, delta, columns)
        if folded is None:
            return _merge_exact(spec, base, deltas)
        state = folded
    return state


def _fold(spec: TableSpec, state: pa.Table, delta: pa.Table, columns: list[str]) -> pa.Table | None:
    """``state`` (one row per key) after one commit's ``delta``; None on a hash collision."""
    pos = pc.index_in(delta.column(HASH), value_set=state.column(HASH))
    matched = pc.is_valid(pos)
    at = pos.fill_null(0)
    if state.num_rows and pc.any(matched).as_py():
        for name in spec.record_key:  # equal hashes must mean equal keys
            same = pc.equal(delta.column(name), state.column(name).take(at))
            if not pc.all(pc.or_(pc.invert(matched), same)).as_py():
                return None
    deleted = pc.equal(delta.column(OP), DELETE)
    if spec.ordering_field is not None and state.num_rows:
        older = state.column(spec.ordering_field).take(at)
        # Delete markers carry no ordering value (null): for them ``wins`` does not matter.
        newer_or_tie = pc.greater_equal(delta.column(spec.ordering_field), older).fill_null(True)
        wins = pc.or_(pc.invert(matched), newer_or_tie)
    else:
        wins = pa.repeat(pa.scalar(True), delta.num_rows)
    added = pc.and_(pc.invert(deleted), wins)
    replaced = pc.and_(matched, pc.or_(deleted, wins)).to_numpy(zero_copy_only=False)
    keep = np.ones(state.num_rows, np.bool_)
    keep[at.to_numpy(zero_copy_only=False)[replaced]] = False
    # Most commits replace some rows and add all of theirs: filter only what changes.
    kept = state if keep.all() else state.filter(pa.array(keep))
    new = delta if pc.all(added).as_py() else delta.filter(added)
    return pa.concat_tables([kept, new.select(columns)])


def _merge_exact(spec: TableSpec, base: pa.Table | None, deltas: Sequence[pa.Table]) -> pa.Table:
    """The merge on exact key values (used when two different keys share a hash)."""
    tables = [] if base is None else [_with_op_seq(base, UPSERT, 0, deltas[0])]
    tables += [d.append_column(SEQ, pa.repeat(pa.scalar(i + 1, pa.int32()), d.num_rows))
               for i, d in enumerate(deltas)]  # fmt: skip
    rows = pa.concat_tables([t.cast(tables[-1].schema) for t in tables])
    return rows.take(pa.array(_winners(spec, rows, spec.record_key))).drop_columns([OP, SEQ])


def _with_op_seq(base: pa.Table, op: int, seq: int, like: pa.Table) -> pa.Table:
    rows = base.append_column(OP, pa.repeat(pa.scalar(op, pa.int8()), base.num_rows))
    rows = rows.select(like.column_names)
    return rows.append_column(SEQ, pa.repeat(pa.scalar(seq, pa.int32()), base.num_rows))


def _ordering_rank(
    spec: TableSpec, rows: pa.Table, positions: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Dense rank of the ordering value at ``positions`` (zeros without an ordering field)."""
    if spec.ordering_field is None:
        return np.zeros(len(positions), np.int64)
    values = rows.column(spec.ordering_field).take(pa.array(positions))
    return pc.rank(values, sort_keys="ascending", tiebreaker="dense").to_numpy().astype(np.int64)


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
    """One record per key within a batch: the largest ordering value, ties to the last row."""
    if rows.num_rows <= 1:
        return rows
    added = [] if OP in rows.column_names else [OP]
    if added:
        rows = rows.append_column(OP, pa.repeat(pa.scalar(UPSERT, pa.int8()), rows.num_rows))
    rows = rows.append_column(SEQ, pa.array(np.arange(rows.num_rows, dtype=np.int32)))
    return rows.take(pa.array(_winners(spec, rows, key_fields))).drop_columns([*added, SEQ])


def _read(store: TableStore, path: str, columns: list[str]) -> pa.Table:
    # Local files are memory-mapped: decoding reads the page cache without a copy.
    if store.is_local:
        return pq.read_table(path, columns=columns, memory_map=True)
    return pq.read_table(path, columns=columns, filesystem=store.fs)


def _ordering(spec: TableSpec) -> list[str]:
    return [spec.ordering_field] if spec.ordering_field else []


def _unique(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _empty(spec: TableSpec, columns: Sequence[str]) -> pa.Table:
    return spec.file_schema(delta=False).empty_table().select(list(columns))
