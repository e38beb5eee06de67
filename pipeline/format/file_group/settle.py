"""What a file group's incoming records become before they are written.

The file-group writer (``writer.py``) takes each group's records, one per key, through
these steps: which keys the group holds (:func:`mark_known`, for the schemes no assigner
serves), what the deletes marked in the records do against what the group holds
(:func:`settle_deletes`), and the values a partial upsert's records leave out
(:func:`fill_kept`). Each reads only the touched keys' records of the group's slice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.columns import (
    DELETE,
    FROM_BUCKET,
    FROM_PARTITION,
    HASH,
    IS_NEW,
    MOVE_OUT,
    OP,
)
from dynbucket.base.errors import InvalidInputError
from dynbucket.format.file_group.merge import read_slice_of_keys
from dynbucket.format.file_group.slices import FileSlice
from dynbucket.format.file_group.stale import live_among, stale_mask
from dynbucket.format.hudi.meta_fields import record_keys
from dynbucket.format.records.incoming import refuse_known as refuse_known_keys
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec


def mark_known(
    store: TableStore,
    spec: TableSpec,
    fslice: FileSlice | None,
    group: pa.Table,
    refuse_known: bool,
) -> tuple[pa.Table, int]:
    """A group's rows with ``_is_new`` from the keys its slice holds (stateless schemes,
    where no assigner knows them); deletes of keys it does not hold are left out. Returns
    the rows and how many deletes were left out (not found).

    Raises:
        InvalidInputError: ``refuse_known`` (an insert) and a key the slice holds.
    """
    if fslice is None:
        known = pa.array(np.zeros(group.num_rows, np.bool_))
    else:
        known = live_among(store, spec, fslice, record_keys(group, spec.record_key))
    if refuse_known:
        refuse_known_keys(group, spec.record_key, known)
    group = group.set_column(group.schema.get_field_index(IS_NEW), IS_NEW, pc.invert(known))
    unknown_deletes = pc.and_(pc.equal(group.column(OP), DELETE), pc.invert(known))
    missing = int(pc.sum(unknown_deletes).as_py() or 0)
    if missing:
        group = group.filter(pc.invert(unknown_deletes))
    return group, missing


def fill_kept(
    store: TableStore,
    spec: TableSpec,
    fslice: FileSlice | None,
    group: pa.Table,
    kept: tuple[str, ...],
) -> pa.Table:
    """A partial upsert's group with the fields its records lack (``kept``) taken from the
    rows the group holds of their keys, so that every file holds whole rows (what every
    Hudi reader reads): one read of those keys' rows (the base's row groups that can hold
    them, their log records). New keys get nulls there.

    Raises:
        InvalidInputError: a kept field the schema says may not be null, and new keys.
    """
    upsert = pc.not_equal(group.column(OP), DELETE)
    new = pc.and_(upsert, group.column(IS_NEW))
    for name in kept:
        if not spec.schema.field(name).nullable and pc.any(new).as_py():
            sample = group.filter(new).select(list(spec.record_key)).slice(0, 3).to_pylist()
            raise InvalidInputError(
                f"field {name!r}, which the table's schema says may not be null, is not in "
                f"the records of a partial upsert, and new keys are among them (e.g. "
                f"{sample}): a new key has no value to keep; give the field (or write those "
                "keys' whole rows). Nothing was written."
            )
    known = pc.and_(upsert, pc.invert(group.column(IS_NEW)))
    if fslice is None or not pc.any(known).as_py():
        return group
    keys = group.filter(known).select(list(spec.record_key))
    stored = read_slice_of_keys(store, spec, fslice, keys, [*spec.record_key, *kept], meta=())
    at = pc.index_in(
        record_keys(group, spec.record_key), value_set=record_keys(stored, spec.record_key)
    )
    for name in kept:
        column = stored.column(name).take(at).cast(spec.schema.field(name).type)
        group = group.set_column(group.schema.get_field_index(name), name, column)
    return group


@dataclass(frozen=True)
class Settled:
    """A group's records after :func:`settle_deletes`, and what became of its deletes."""

    rows: pa.Table
    not_found: int = 0
    stale: int = 0
    gone: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))
    """Hashes of the keys leaving the assigners' caches at the commit (step 3)."""


def settle_deletes(
    store: TableStore,
    spec: TableSpec,
    fslice: FileSlice | None,
    group: pa.Table,
    instant: str,
) -> Settled:
    """A group's records marked as deletes among upserts, settled against what it holds:

    1. A delete of a key the assigner took as new (the table does not hold it; the record
       won over the batch's upserts of it) deletes nothing: counted as not found.
    2. A delete of a key the group holds whose ordering value is below the stored record's
       loses, as an update would (Hudi's event-time ordering): counted as stale.
    3. The others are written. Both the deleted keys and those of step 1 leave the
       assigners' caches at the commit (``gone``): step 1's took a bucket in this
       checkpoint.
    """
    is_delete = pc.equal(group.column(OP), DELETE).to_numpy(zero_copy_only=False)
    if not is_delete.any():
        return Settled(group)
    new = group.column(IS_NEW).to_numpy(zero_copy_only=False)
    phantom = is_delete & new  # 1.
    drop = phantom.copy()
    known = np.flatnonzero(is_delete & ~new)  # 2.
    stale = 0
    if fslice is not None and len(known):
        losing = stale_mask(store, spec, fslice, group.take(pa.array(known)), instant)
        drop[known[losing]] = True
        stale = int(losing.sum())
    gone = group.column(HASH).to_numpy()[is_delete & (phantom | ~drop)]  # 3.
    rows = group.filter(pa.array(~drop)) if drop.any() else group
    return Settled(rows, int(phantom.sum()), stale, gone)


@dataclass(frozen=True)
class Moves:
    """A group's records after :func:`settle_moves` (a global index's table)."""

    rows: pa.Table
    moved_in: int = 0
    lost: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, np.int64))
    """Hashes of keys whose move into this group lost: they leave it (their placement) at
    once, and stay where they are."""


def settle_moves(
    store: TableStore,
    spec: TableSpec,
    slices: Mapping[str, Mapping[int, FileSlice]],
    group: pa.Table,
    instant: str,
) -> Moves:
    """A global index's moves into and out of a group, decided as both groups decide them:

    1. A record whose key moves in from another partition's group wins when its ordering
       value is not below the record that group holds of the key (``stale.stale_mask``,
       the reader's merge: ties to the incoming); one that loses is not written, and the
       key stays where it is (``lost``).
    2. The delete a move writes in the group the key leaves (``MOVE_OUT``) is left to
       ``settle_deletes``, which settles it as any delete: it loses by the same
       comparison, so it is written exactly when step 1 writes the record.

    ``slices``: each partition's current slices (the groups keys move from among them).
    """
    if FROM_BUCKET not in group.column_names:
        return Moves(group)
    source = group.column(FROM_BUCKET).to_numpy(zero_copy_only=False)
    is_delete = pc.equal(group.column(OP), DELETE).to_numpy(zero_copy_only=False)
    incoming = np.flatnonzero((source >= 0) & ~is_delete)  # 1.
    drop = np.zeros(group.num_rows, np.bool_)
    origins = group.column(FROM_PARTITION).to_numpy(zero_copy_only=False)
    for origin, bucket in {(origins[i], int(source[i])) for i in incoming}:
        rows = incoming[(origins[incoming] == origin) & (source[incoming] == bucket)]
        fslice = slices.get(origin, {}).get(bucket)
        if fslice is not None:
            drop[rows[stale_mask(store, spec, fslice, group.take(pa.array(rows)), instant)]] = True
    lost = group.column(HASH).to_numpy()[drop]
    rows = group.filter(pa.array(~drop)) if drop.any() else group
    return Moves(rows, moved_in=len(incoming) - int(drop.sum()), lost=lost)


def moves_out(group: pa.Table) -> int:
    """How many of a group's records are the deletes of keys moving out (``MOVE_OUT``)."""
    if FROM_BUCKET not in group.column_names:
        return 0
    return int(pc.sum(pc.equal(group.column(FROM_BUCKET), MOVE_OUT)).as_py() or 0)
