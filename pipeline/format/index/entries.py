"""Index entries: what one write adds for a key (an insert, or a tombstone), and a
partition's state from its entries (each key's newest one, when an insert)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.columns import BUCKET, DELETE, FILE_ID, HASH, INSTANT, OP, UPSERT
from dynbucket.format.table.spec import TableSpec


def entries_for(
    rows: pa.Table, spec: TableSpec, bucket: int, file_id: str, instant: str, op: int = UPSERT
) -> pa.Table:
    """Index entries of one file group's keys (rows carry key fields and ``_hash``): insert
    entries of its new keys, or (``op`` delete) tombstones of the keys it deleted."""
    n = rows.num_rows
    columns = [rows.column(k) for k in spec.record_key] + [
        rows.column(HASH),
        pa.repeat(pa.scalar(bucket, pa.int32()), n),
        pa.repeat(pa.scalar(file_id), n),
        pa.repeat(pa.scalar(instant), n),
        pa.repeat(pa.scalar(op, pa.int8()), n),
    ]
    names = [*spec.record_key, HASH, BUCKET, FILE_ID, INSTANT, OP]
    return pa.Table.from_arrays(columns, names=names)


def live(entries: pa.Table) -> pa.Table:
    """Each key's newest entry (by ``_instant``), when it is an insert, sorted by hash: the
    index's state of the keys in ``entries`` (which carry ``_hash``, ``_instant``, ``_op``).

    A key is its hash here, as in the assigner's cache (keys whose hashes collide are
    refused at write)."""
    return keys_and_live(entries)[1]


def keys_and_live(entries: pa.Table) -> tuple[np.ndarray, pa.Table]:
    """Every key ``entries`` name (their hashes, sorted, once each) and :func:`live` of
    them, from one sort (a cache catching up with another writer's deltas needs both: the
    keys leave it, the live ones come back)."""
    hashes = entries.column(HASH).to_numpy()
    instants = pc.dictionary_encode(entries.column(INSTANT).combine_chunks())
    # Instant ids order as strings; a table holds few distinct ones: rank those.
    rank = np.argsort(np.argsort(np.asarray(instants.dictionary.to_pylist(), dtype=object)))
    order = np.lexsort((rank[instants.indices.to_numpy(zero_copy_only=False)], hashes))
    newest = np.ones(len(order), np.bool_)
    sorted_hashes = hashes[order]
    newest[:-1] = sorted_hashes[1:] != sorted_hashes[:-1]
    kept = order[newest & (entries.column(OP).to_numpy()[order] != DELETE)]
    return sorted_hashes[newest], entries.take(pa.array(kept))


def conform(entries: pa.Table, schema: pa.Schema) -> pa.Table:
    """``entries`` as ``schema``'s columns: a file written before tombstones (no ``_op``,
    or ``_op`` null where a dataset filled it) holds inserts only."""
    if OP not in entries.column_names:
        entries = entries.append_column(OP, pa.repeat(pa.scalar(UPSERT, pa.int8()), len(entries)))
    elif entries.column(OP).null_count:
        at = entries.schema.get_field_index(OP)
        entries = entries.set_column(at, OP, pc.fill_null(entries.column(OP), UPSERT))
    return entries.select(schema.names).cast(schema)


def with_op(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """``table`` with ``_op`` where ``columns`` ask for it and it has none (an older file)."""
    if OP in columns and OP not in table.column_names:
        table = table.append_column(OP, pa.repeat(pa.scalar(UPSERT, pa.int8()), len(table)))
    return table.select(list(columns))
