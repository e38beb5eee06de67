"""Adoption with ``deduplicate=True`` (``adopt.py``, step 5a): a table Hudi wrote where a key
has more than one live row (Hudi's ``insert`` and ``bulk_insert`` allow it; Spark SQL's
``INSERT INTO`` is an insert in Hudi 1.x) keeps one row per key, in one instant Hudi's
readers honour, before its index is built.

1. **Find** (beside, a share of slices a task, a partition at a time): every live row's
   key, ordering value and commit time (``_hoodie_commit_time``; without meta fields, the
   instant of the file it was read from), each key's spelling and place checked as the
   index build checks them (``build_index.py``), so nothing the build would refuse is
   found after this step wrote. Per scope (a partition; the table for a global index) the
   keys with more than one live row, and of each the row that stays: the largest ordering
   value (Hudi's comparison), ties to the latest commit, then to the last file group.
2. **Rewrite**: each file group holding a losing row gets a new file slice without it, a
   base file of the instant holding its slice's other rows as they were (meta fields,
   commit times and all): a delete by key would take the winner too. One ``commit``
   instant (a delta commit on a merge-on-read table, operation ``deduplicate``) under
   the adoption's lease: the rewritten groups' older slices stay for time travel until
   the cleaner removes them, as after any update.
3. The adoption goes on from that instant (its index is built from the new slices); a
   crash after the commit leaves a Hudi table whose keys are unique (adopt it again).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.beside import Beside
from dynbucket.format.adoption.build_index import SHARE, check_placed, check_spelling
from dynbucket.format.file_group.merge import ordering_keys, read_slice
from dynbucket.format.file_group.writer import moved_to, write_base
from dynbucket.format.hudi.files import base_name
from dynbucket.format.hudi.meta_fields import COMMIT_TIME, PARTITION_PATH, RECORD_KEY, record_keys
from dynbucket.format.read.snapshot import SliceRef, Snapshot
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.lock import WriterLock
from dynbucket.format.timeline.transaction import Transaction, WrittenFile

OPERATION = "deduplicate"


@dataclass(frozen=True)
class Deduplicated:
    """What step 2 did: its instant, the keys that had more than one live row, the rows
    it removed, the file groups it rewrote."""

    instant: str
    keys: int
    rows: int
    groups: int

    def to_json(self) -> dict[str, object]:
        return {
            "instant": self.instant,
            "keys": self.keys,
            "rows": self.rows,
            "groups": self.groups,
        }


#: A slice holding losing rows -> their positions among its live rows, and their keys.
_Losers = dict[tuple[str, str], tuple[npt.NDArray[np.int64], list[str]]]


def slice_rows(store: TableStore, spec: TableSpec, refs: list[SliceRef]) -> pa.Table:
    """Step 1's task: of each live row of ``refs``, its record key, ordering value, commit
    time, slice (its index in ``refs``) and position in it; spelling and place checked."""
    checked = [RECORD_KEY, PARTITION_PATH] if spec.meta_fields else []
    columns = list(dict.fromkeys([*spec.record_key, *spec.partition_by]))
    if spec.ordering_field is not None and spec.ordering_field not in columns:
        columns.append(spec.ordering_field)
    layouts = spec.scheme.initial_layouts(spec.record_key)
    out = []
    for i, ref in enumerate(refs):
        rows = read_slice(store, spec, ref.slice, columns, [COMMIT_TIME, *checked])
        check_spelling(store, spec, ref.partition, rows)
        if layouts is not None:
            check_placed(store, spec, layouts, ref, rows.select(list(spec.record_key)))
        found = {
            "key": record_keys(rows, spec.record_key),
            "commit": rows.column(COMMIT_TIME).cast(pa.string()),
            "slice": pa.repeat(pa.scalar(i, pa.int64()), rows.num_rows),
            "position": pa.array(np.arange(rows.num_rows, dtype=np.int64)),
        }
        if spec.ordering_field is not None:
            found["ordering"] = ordering_keys(rows.column(spec.ordering_field))
        out.append(pa.table(found))
    return pa.concat_tables(out) if out else pa.table({"key": pa.array([], pa.string())})


@dataclass(frozen=True)
class Duplicates:
    """Step 1's finding: the losing rows of each slice holding any, and how many keys had
    more than one live row."""

    losers: _Losers
    keys: int

    def __bool__(self) -> bool:
        return bool(self.losers)


def find_duplicates(store: TableStore, spec: TableSpec, beside: Beside) -> Duplicates:
    """Step 1 (module doc); writes nothing."""
    by_partition: dict[str, list[SliceRef]] = defaultdict(list)
    for ref in Snapshot(store, spec).slices():
        by_partition[ref.partition].append(ref)
    scopes = spec.scheme.scopes(by_partition)
    losers: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
    keys = 0
    for scope in scopes:
        refs: list[SliceRef] = []
        parts: list[pa.Table] = []
        for partition in scope:
            slices = by_partition[partition]
            shares = [slices[i : i + SHARE] for i in range(0, len(slices), SHARE)]
            for share, rows in zip(
                shares, beside.map(slice_rows, [(store, spec, s) for s in shares]), strict=True
            ):
                if rows.num_rows:  # slices renumbered in the scope's list
                    at = pc.add(rows.column("slice"), pa.scalar(len(refs), pa.int64()))
                    parts.append(rows.set_column(rows.column_names.index("slice"), "slice", at))
                refs.extend(share)
        if not parts:
            continue
        rows = pa.concat_tables(parts)
        lose, twice = _losing(spec, rows)
        keys += twice
        for s, p, key in zip(
            rows.column("slice").take(lose).to_pylist(),
            rows.column("position").take(lose).to_pylist(),
            rows.column("key").take(lose).to_pylist(),
            strict=True,
        ):
            losers[(refs[s].partition, refs[s].slice.file_id)].append((p, key))
    out = {}
    for group, found in losers.items():
        found.sort()
        out[group] = (np.array([p for p, _ in found], np.int64), [k for _, k in found])
    return Duplicates(out, keys)


def _losing(spec: TableSpec, rows: pa.Table) -> tuple[pa.Array, int]:
    """Rows of a scope (``slice_rows``'s columns) -> (positions of the rows that lose, keys
    with more than one row). Of a key's rows the last in (ordering value, commit time,
    slice, position) order stays."""
    keys = pc.dictionary_encode(rows.column("key").combine_chunks()).indices.to_numpy()
    counts = np.bincount(keys)
    if not (counts > 1).any():
        return pa.array([], pa.int64()), 0
    # Nulls first: a row without an ordering value loses to one with it.
    sort_keys = [("key_code", "ascending", "at_start")]
    if spec.ordering_field is not None:
        sort_keys.append(("ordering", "ascending", "at_start"))
    sort_keys += [(c, "ascending", "at_start") for c in ("commit", "slice", "position")]
    ranked = rows.append_column("key_code", pa.array(keys))
    order = pc.sort_indices(ranked, sort_keys=sort_keys).to_numpy()
    sorted_keys = keys[order]
    last = np.r_[sorted_keys[1:] != sorted_keys[:-1], True]
    return pa.array(order[~last]), int((counts > 1).sum())


def rewrite_duplicates(
    store: TableStore, spec: TableSpec, lock: WriterLock, found: Duplicates
) -> Deduplicated:
    """Step 2 (module doc), under ``lock`` (the adoption's lease, held after)."""
    losers, keys = found.losers, found.keys
    with Transaction.begin(store, spec, Action.COMMIT, OPERATION, lock=lock) as txn:
        slices = {(r.partition, r.slice.file_id): r for r in Snapshot(store, spec).slices()}
        removed = 0
        for (partition, file_id), (positions, expected) in sorted(losers.items()):
            fslice = slices[(partition, file_id)].slice
            live = read_slice(store, spec, fslice, spec.schema.names, list(spec.meta_fields))
            got = record_keys(live.take(pa.array(positions)), spec.record_key).to_pylist()
            if got != expected:  # a slice merges the same whatever columns are read
                raise AssertionError(f"{partition}/{file_id}: rows moved between reads")
            keep = np.ones(live.num_rows, np.bool_)
            keep[positions] = False
            kept = live.filter(pa.array(keep))
            name = base_name(file_id, txn.id)
            path = store.path(partition, name)
            size = write_base(store, spec, path, moved_to(spec, kept, name))
            removed += len(positions)
            txn.add(
                WrittenFile(
                    partition,
                    path,
                    "base",
                    kept.num_rows,
                    size,
                    file_id,
                    fslice.bucket,
                    updates=kept.num_rows,
                    deletes=len(positions),
                    prev_commit=fslice.base_instant,
                )
            )
        txn.commit({"deduplicated-keys": keys, "deduplicated-rows": removed})
    return Deduplicated(txn.id, keys, removed, len(losers))
