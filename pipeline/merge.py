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

from dynbucket.pipeline.layout import FileSlice
from dynbucket.pipeline.spec import DELETE, HASH, INSTANT, OP, UPSERT, TableSpec
from dynbucket.pipeline.storage import TableStore

_SEQ = "_seq"


def read_slice(
    store: TableStore, spec: TableSpec, fslice: FileSlice, columns: Sequence[str] | None = None
) -> pa.Table:
    """The live rows of a file group, with ``columns`` (data fields; default all) plus
    ``_hash`` and ``_instant``."""
    wanted = list(columns) if columns is not None else spec.data_fields
    needed = _unique([*wanted, *spec.record_key, *_ordering(spec), HASH, INSTANT])
    out_cols = _unique([*wanted, HASH, INSTANT])
    base = (
        pq.read_table(fslice.base.path, columns=needed, filesystem=store.fs)
        if fslice.base is not None
        else None
    )
    if not fslice.deltas:
        return base.select(out_cols) if base is not None else _empty(spec, out_cols)
    deltas = [
        pq.read_table(d.path, columns=[*needed, OP], filesystem=store.fs) for d in fslice.deltas
    ]
    return merge(spec, base, deltas).select(out_cols)


def merge(spec: TableSpec, base: pa.Table | None, deltas: Sequence[pa.Table]) -> pa.Table:
    """Live rows of ``base`` (no ``_op`` column) after ``deltas`` (with ``_op``), oldest first."""
    delta = pa.concat_tables(
        [d.append_column(_SEQ, pa.repeat(pa.scalar(i + 1, pa.int32()), d.num_rows))
         for i, d in enumerate(deltas)]
    )  # fmt: skip
    if base is None or base.num_rows == 0:
        keep = None
        candidates = delta
    else:
        touched = pc.is_in(base.column(HASH), value_set=pc.unique(delta.column(HASH)))
        keep = base.filter(pc.invert(touched))
        old = base.filter(touched)
        old = old.append_column(OP, pa.repeat(pa.scalar(UPSERT, pa.int8()), old.num_rows))
        old = old.append_column(_SEQ, pa.repeat(pa.scalar(0, pa.int32()), old.num_rows))
        candidates = pa.concat_tables([old.select(delta.column_names).cast(delta.schema), delta])
    winners = candidates.take(pa.array(_winners(spec, candidates, spec.record_key)))
    winners = winners.drop_columns([OP, _SEQ])
    if keep is None:
        return winners
    return pa.concat_tables([keep, winners.select(keep.column_names).cast(keep.schema)])


def _winners(spec: TableSpec, rows: pa.Table, key_fields: Sequence[str]) -> npt.NDArray[np.int64]:
    """Positions (in ``rows``) of each key's live record, if it has one."""
    n = rows.num_rows
    if n == 0:
        return np.empty(0, np.int64)
    key = _key_codes(rows, key_fields)
    seq = rows.column(_SEQ).to_numpy()
    op = rows.column(OP).to_numpy()
    rank = (
        pc.rank(rows.column(spec.ordering_field), sort_keys="ascending",
                tiebreaker="dense").to_numpy().astype(np.int64)
        if spec.ordering_field is not None
        else np.zeros(n, np.int64)
    )  # fmt: skip
    # 1. Records of a key together, in commit order.
    order = np.lexsort((seq, key))
    key_s = key[order]
    starts = np.flatnonzero(np.r_[True, key_s[1:] != key_s[:-1]])
    run = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    # 2. Position of each key's last delete (-1 when none); what precedes it is gone.
    pos = np.arange(n)
    last_delete = np.maximum.reduceat(np.where(op[order] == DELETE, pos, -1), starts)
    alive = np.flatnonzero((op[order] == UPSERT) & (pos > last_delete[run]))
    # 3. Of the live upserts of a key: largest ordering value, then latest commit.
    best = alive[np.lexsort((seq[order][alive], rank[order][alive], run[alive]))]
    last_of_run = np.r_[run[best][1:] != run[best][:-1], True] if len(best) else best.astype(bool)
    return np.sort(order[best[last_of_run]])


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
    rows = rows.append_column(_SEQ, pa.array(np.arange(rows.num_rows, dtype=np.int32)))
    return rows.take(pa.array(_winners(spec, rows, key_fields))).drop_columns([*added, _SEQ])


def _ordering(spec: TableSpec) -> list[str]:
    return [spec.ordering_field] if spec.ordering_field else []


def _unique(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _empty(spec: TableSpec, columns: Sequence[str]) -> pa.Table:
    return spec.file_schema(delta=False).empty_table().select(list(columns))
