"""Adoption's index step (``adopt.py``, step 5): the record-level index built from the
live keys of every slice of a table Hudi wrote, each key checked on the way (its record
key and partition path spelled as dynbucket spells them, one live row per key, and for a
bucket index its place), a partition at a time, in shares of slices run beside it
(``base/beside.py``): threads of this process, or Ray tasks on a cluster
(``write/ray_tasks.py``).
"""

from __future__ import annotations

import os
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.beside import Beside, Threads
from dynbucket.base.columns import HASH
from dynbucket.base.errors import AdoptionRefusedError
from dynbucket.base.keyhash import key_hashes
from dynbucket.format.buckets.layouts import BucketLayouts
from dynbucket.format.file_group.merge import read_slice
from dynbucket.format.hudi.meta_fields import PARTITION_PATH, RECORD_KEY, record_keys
from dynbucket.format.index.entries import entries_for
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.read.snapshot import SliceRef, Snapshot
from dynbucket.format.records.partitioning import partition_paths
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec


def refused(store: TableStore, why: str, fix: str) -> AdoptionRefusedError:
    return AdoptionRefusedError(
        f"{store.uri}: dynbucket cannot adopt this Hudi table yet: {why}. Nothing was "
        f"written. {fix}"
    )


#: What a table with a key in more than one live row is adopted with.
DEDUPLICATE_FIX = (
    "Adopt it with deduplicate=True (dynbucket adopt --deduplicate): each key keeps its row "
    "with the largest ordering value (ties: the latest commit), the others are removed in "
    "one commit"
)
#: Slices one task of the index build reads.
SHARE = 8


def in_threads() -> Threads:
    """Where the index build runs by default: threads of this process (Parquet decoding
    runs without the interpreter lock)."""
    return Threads(min(8, os.cpu_count() or 1), "adoption")


def slice_entries(
    store: TableStore, spec: TableSpec, instant: str, refs: list[SliceRef]
) -> pa.Table:
    """The index entries of the live keys of ``refs`` (slices of one partition), each
    key's spelling (and, for a bucket index, its place) checked: step 5's task."""
    checked = [RECORD_KEY, PARTITION_PATH] if spec.meta_fields else []
    columns = list(dict.fromkeys([*spec.record_key, *spec.partition_by]))
    layouts = spec.scheme.initial_layouts(spec.record_key)
    out = []
    for ref in refs:
        rows = read_slice(store, spec, ref.slice, columns, checked)
        check_spelling(store, spec, ref.partition, rows)
        rows = rows.select(list(spec.record_key))
        if layouts is not None:
            check_placed(store, spec, layouts, ref, rows)
        rows = rows.append_column(HASH, pa.array(key_hashes(rows, spec.record_key), pa.int64()))
        out.append(entries_for(rows, spec, ref.slice.bucket, ref.slice.file_id, instant))
    return pa.concat_tables(out) if out else spec.index_schema().empty_table()


def build_index(
    store: TableStore, spec: TableSpec, instant: str, slots: int, beside: Beside
) -> None:
    """Step 5 (module doc): a partition at a time (its entries in memory, not the
    table's), its slices read in shares ``beside`` it."""
    rli = RecordLevelIndex(store, spec)
    by_partition: dict[str, list[SliceRef]] = defaultdict(list)
    for ref in Snapshot(store, spec).slices():
        by_partition[ref.partition].append(ref)
    scopes = [scope for scope in spec.scheme.scopes(by_partition) if len(scope) > 1]
    wide = {partition for scope in scopes for partition in scope}
    hashes: dict[str, np.ndarray] = {}
    for partition, refs in sorted(by_partition.items()):
        shares = [refs[i : i + SHARE] for i in range(0, len(refs), SHARE)]
        found = pa.concat_tables(
            beside.map(slice_entries, [(store, spec, instant, s) for s in shares])
        )
        _check_unique(store, spec, partition, found)
        if partition in wide:
            hashes[partition] = found.column(HASH).to_numpy()
        if spec.scheme.index_entries:
            rli.write(partition, instant, found, kind="base", slots=slots)
    for scope in scopes:
        _check_unique_in_table(store, spec, instant, {p: hashes[p] for p in scope}, by_partition)


def _check_unique_in_table(
    store: TableStore,
    spec: TableSpec,
    instant: str,
    hashes: dict[str, np.ndarray],
    refs: dict[str, list[SliceRef]],
) -> None:
    """A global index's table holds each key in one partition (Hudi's global indexes keep
    it so; a table written without one may not)."""
    if not hashes:
        return
    every = np.concatenate(list(hashes.values()))
    values, counts = np.unique(every, return_counts=True)
    twice = values[counts > 1]
    if not len(twice):
        return
    where = [p for p, h in hashes.items() if np.isin(twice[0], h)]
    entries = slice_entries(store, spec, instant, refs[where[0]])
    first = entries.filter(pc.equal(entries.column(HASH), int(twice[0])))
    key = record_keys(first, spec.record_key)[0].as_py()
    raise refused(
        store,
        f"{len(twice)} key(s) have live rows in more than one partition (e.g. {key!r}, in "
        f"{where}), and a global index keeps one row per key in the table",
        "Adopt it with the partition-scoped index (DynamicBucketIndex(), a key unique "
        f"within its partition), or {DEDUPLICATE_FIX[0].lower()}{DEDUPLICATE_FIX[1:]}",
    )


def check_placed(
    store: TableStore, spec: TableSpec, layouts: BucketLayouts, ref: SliceRef, rows: pa.Table
) -> None:
    """Every key of a bucket-index table is in the file group its bucket hash names (else
    the table's bucket count is another)."""
    want = layouts.locate(ref.partition, rows)
    wrong = np.flatnonzero(want != ref.slice.bucket)
    if len(wrong):
        key = record_keys(rows.take(pa.array(wrong[:1])), spec.record_key)[0].as_py()
        options = spec.bucket_options
        raise refused(
            store,
            f"key {key!r} is in bucket {ref.slice.bucket} of partition {ref.partition!r}, where "
            f"Hudi's bucket hash over {layouts.num_buckets(ref.partition)} buckets puts it in "
            f"bucket {int(want[wrong[0]])}",
            f"Give the table's own bucket count (index={type(options).__name__}(num_buckets="
            "...)), or adopt it with the dynamic bucket index",
        )


def _check_unique(store: TableStore, spec: TableSpec, partition: str, entries: pa.Table) -> None:
    """One live row per key (I2): Hudi's ``insert`` and ``bulk_insert`` operations let a
    key into a table twice, which dynbucket's index cannot say."""
    hashes = np.sort(entries.column(HASH).to_numpy())
    if not (hashes[1:] == hashes[:-1]).any():
        return  # distinct hashes are distinct keys (counting the keys' texts: 3x slower)
    keys = record_keys(entries, spec.record_key)
    counts = pc.value_counts(keys)
    twice = counts.filter(pc.greater(counts.field("counts"), 1))
    if len(twice):
        key = twice.field("values")[0].as_py()
        raise refused(
            store,
            f"{len(twice)} key(s) of partition {partition!r} have more than one live row "
            f"(e.g. {key!r}, in {twice.field('counts')[0].as_py()} rows: written by Hudi's "
            "insert or bulk_insert), and dynbucket keeps one row per key",
            DEDUPLICATE_FIX,
        )


def check_spelling(store: TableStore, spec: TableSpec, partition: str, rows: pa.Table) -> None:
    """Every live row's record key and partition path are what dynbucket would write (a
    key generator spelling them otherwise would make updates new rows)."""
    if not rows.num_rows:
        return
    where = [partition] * rows.num_rows
    want_paths = pa.array(where, pa.string())
    got_paths = (
        partition_paths(
            rows, spec.partition_by, spec.hive_style_partitioning, spec.timestamp_partitioning
        )
        if spec.partition_by
        else None
    )
    checks = [("partition path", got_paths, want_paths)]
    if RECORD_KEY in rows.column_names:
        keys = record_keys(rows, spec.record_key)
        checks.append(("record key", keys, rows.column(RECORD_KEY)))
        if PARTITION_PATH in rows.column_names:
            checks.append(("partition path", want_paths, rows.column(PARTITION_PATH)))
    for what, ours, theirs in checks:
        if ours is None:
            continue
        differ = pc.invert(pc.equal(ours, theirs).fill_null(False))
        if pc.any(differ).as_py():
            at = int(np.flatnonzero(differ.to_numpy(zero_copy_only=False))[0])
            raise refused(
                store,
                f"a row of partition {partition!r} has the {what} {theirs[at].as_py()!r} "
                f"where dynbucket would write {ours[at].as_py()!r}",
                "Write its rows into a new dynbucket table",
            )
