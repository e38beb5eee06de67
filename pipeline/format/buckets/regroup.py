"""Growing the stateless schemes: ``rescale`` (simple bucket) and ``rebalance`` (consistent
hashing), each one instant that rewrites only the file groups whose buckets change.

A job reads a few file groups (its sources) and writes the buckets their rows go to under
the new layout (its targets), so no rows travel between jobs:

* rescale by a whole multiple ``k`` (``N -> kN``): bucket ``b``'s keys go to
  ``b, b+N, ..., b+(k-1)N`` (a key's ``hash mod kN`` is one of them), one job per group;
* rescale by anything else (with ``allow_shuffle``): one job per partition, every group;
* rebalance: a job per set of buckets whose ranges overlap between the old ring and the new
  (a split: one source, two targets; a merge: two sources, one target).

A target that keeps its bucket id keeps its file group (a new base file; older slices stay
for time travel until cleaned); a new bucket gets a new file group; a retired bucket (merged
away, or beyond a smaller count) gets an empty base file, so readers of the new layout see
none of its rows. Rows keep their meta fields (commit time, sequence number). The new
layouts are written in the same instant (``layouts.write_layouts``): readers see the old
files and layout or the new, never a mix.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pyarrow as pa

from dynbucket.base.beside import in_threads
from dynbucket.base.columns import HASH, MAX_BUCKET_ID
from dynbucket.base.errors import CommitFailedError, ConfigError
from dynbucket.base.keyhash import key_hashes
from dynbucket.base.options import ConsistentHashingIndex, SimpleBucketIndex
from dynbucket.format.buckets.layouts import (
    BucketLayouts,
    ring_layout,
    simple_layout,
    write_layouts,
)
from dynbucket.format.buckets.ring import Ring, changed, plan_rebalance
from dynbucket.format.file_group.merge import read_slice
from dynbucket.format.file_group.slices import FileSlice
from dynbucket.format.file_group.writer import moved_to, write_base
from dynbucket.format.hudi.files import base_name, file_id_for
from dynbucket.format.read.snapshot import Snapshot
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.transaction import Transaction, WrittenFile


@dataclass(frozen=True)
class RegroupResult:
    """What a rescale or rebalance did (``instant`` None: nothing to change)."""

    action: str
    instant: str | None
    partitions: dict[str, tuple[int, int]]
    """partition -> (buckets before, buckets after), of the partitions it changed."""
    groups_read: int = 0
    files_written: int = 0
    rows: int = 0
    bytes_read: int = 0
    """Bytes of the file slices rewritten (what growth cost in reading)."""
    bytes_written: int = 0
    table_bytes: int = 0
    """Bytes of every latest file slice of the table before (for the share rewritten)."""


@dataclass(frozen=True)
class _Job:
    partition: str
    sources: tuple[FileSlice, ...]
    targets: tuple[int, ...]


def rescale(
    store: TableStore,
    spec: TableSpec,
    multiple: float,
    partitions: Sequence[str] | None = None,
    allow_shuffle: bool = False,
    threads: int | None = None,
) -> RegroupResult:
    """Multiplies the bucket count of ``partitions`` (default: all) of a simple-bucket table
    by ``multiple`` (module doc).

    Raises:
        ConfigError: not a simple-bucket table; a multiple that does not give a whole
            count; a multiple that is not a whole number, without ``allow_shuffle``.
    """
    index = spec.bucket_options
    if not isinstance(index, SimpleBucketIndex):
        raise ConfigError(
            f"rescale is for simple-bucket tables; this table's index is {spec.scheme.name}"
            + (
                " (use rebalance())"
                if isinstance(index, ConsistentHashingIndex)
                else " (it opens buckets by itself)"
            )
        )
    factor = Fraction(multiple).limit_denominator(1000)
    if isinstance(multiple, bool) or factor <= 0:
        raise ConfigError(f"rescale multiple={multiple!r}: must be a number > 0")
    with Transaction.begin(store, spec, Action.COMMIT, "rescale") as txn:
        snapshot = Snapshot(store, spec, txn.based_on) if txn.based_on else None
        visible = snapshot.visible if snapshot else frozenset()
        layouts = BucketLayouts.load(store, index, spec.record_key, visible)
        names = _partitions_of(snapshot, partitions)
        changes, jobs, counts = {}, [], {}
        for p in names:
            n = layouts.num_buckets(p)
            new = n * factor
            if new.denominator != 1 or not 1 <= new <= MAX_BUCKET_ID + 1:
                raise ConfigError(
                    f"rescale multiple={multiple!r}: partition {p!r} has {n} buckets and "
                    f"{n} x {multiple} is not a whole bucket count in 1..{MAX_BUCKET_ID + 1}; "
                    "give a multiple that is"
                )
            whole = factor.denominator == 1
            if not whole and not allow_shuffle:
                raise ConfigError(
                    f"rescale multiple={multiple!r}: not a whole number, so keys of partition "
                    f"{p!r} would move between every pair of buckets ({n} -> {int(new)}); "
                    "give a whole multiple (2 splits each bucket in two, no shuffle) or "
                    "allow_shuffle=True to rewrite the whole partition"
                )
            if new == n:
                continue
            changes[p] = simple_layout(int(new))
            counts[p] = (n, int(new))
            # Only the buckets of the layout in force hold rows: a group a shrink retired
            # holds an empty base file and is no job's source (its bucket id may come back
            # as one of the targets, and two jobs must never write one group).
            slices = _live_groups(snapshot, p, n)
            if whole:
                k = int(factor)
                jobs += [
                    _Job(p, (s,), tuple(b + j * n for j in range(k))) for b, s in slices.items()
                ]
            elif slices:
                jobs.append(_Job(p, tuple(slices.values()), tuple(range(int(new)))))
        return _run(store, spec, txn, snapshot, layouts, changes, jobs, counts, "rescale", threads)


def _partitions_of(snapshot: Snapshot | None, asked: Sequence[str] | None) -> list[str]:
    """The partitions a rescale changes: ``asked`` (each once), every one of them the
    table's; default all the table's.

    Raises:
        ConfigError: a partition the table does not have (nothing is written).
    """
    have = snapshot.partitions() if snapshot else []
    if asked is None:
        return have
    if isinstance(asked, str):
        asked = [asked]
    names = list(dict.fromkeys(asked))
    unknown = [p for p in names if p not in set(have)]
    if unknown:
        raise ConfigError(
            f"rescale partitions={unknown!r}: the table has no such partition (it has "
            f"{have[:10]!r}{' ...' if len(have) > 10 else ''}); give partition paths as "
            "stats() names them, e.g. 'region=eu'"
        )
    return names


def _live_groups(snapshot: Snapshot | None, partition: str, buckets: int) -> dict[int, FileSlice]:
    """bucket -> slice of the groups of a simple-bucket partition's ``buckets`` in force."""
    if snapshot is None:
        return {}
    return {b: s for b, s in snapshot.bucket_files(partition).items() if b < buckets}


def rebalance(store: TableStore, spec: TableSpec, threads: int | None = None) -> RegroupResult:
    """Splits and merges the buckets of a consistent-hashing table (``ring.plan_rebalance``
    from each bucket's live keys), rewriting only the groups whose ranges change.

    Raises:
        ConfigError: not a consistent-hashing table.
    """
    index = spec.bucket_options
    if not isinstance(index, ConsistentHashingIndex):
        raise ConfigError(
            f"rebalance is for consistent-hashing tables; this table's index is "
            f"{spec.scheme.name}"
            + (
                " (use rescale())"
                if isinstance(index, SimpleBucketIndex)
                else " (it opens buckets by itself)"
            )
        )
    with Transaction.begin(store, spec, Action.COMMIT, "rebalance") as txn:
        snapshot = Snapshot(store, spec, txn.based_on) if txn.based_on else None
        visible = snapshot.visible if snapshot else frozenset()
        layouts = BucketLayouts.load(store, index, spec.record_key, visible)
        changes, jobs, counts = {}, [], {}
        for p in snapshot.partitions() if snapshot is not None else []:
            assert snapshot is not None
            ring = layouts.ring(p)
            slices = snapshot.bucket_files(p)
            hashes = {
                b: _live_hashes(store, spec, s) for b, s in slices.items() if b in ring.buckets
            }
            new = plan_rebalance(ring, hashes, index.max_keys_per_bucket, index.min_keys_per_bucket)
            if new == ring:
                continue
            changes[p] = ring_layout(new)
            counts[p] = (len(ring.buckets), len(new.buckets))
            for sources, targets in _overlapping(ring, new, changed(ring, new)):
                jobs.append(
                    _Job(p, tuple(slices[b] for b in sources if b in slices), tuple(targets))
                )
        return _run(
            store, spec, txn, snapshot, layouts, changes, jobs, counts, "rebalance", threads
        )


def _live_hashes(store: TableStore, spec: TableSpec, fslice: FileSlice) -> np.ndarray:
    """The ``xxhash64`` of every live key of a file group."""
    return key_hashes(read_slice(store, spec, fslice, list(spec.record_key)), spec.record_key)


def _overlapping(old: Ring, new: Ring, buckets: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """The changed buckets in sets whose old and new ranges overlap: (old buckets, new
    buckets) per set. Both rings cover the whole hash space and unchanged ranges are the
    same in both, so every changed old range is covered by changed new ranges: a merged-away
    bucket is in the set of the range that took it."""

    def ranges(ring: Ring) -> dict[int, tuple[int, int]]:
        return {b: ring.range_of(b) for b in ring.buckets if b in buckets}

    before, after = ranges(old), ranges(new)
    sets: list[tuple[set[int], set[int]]] = []
    for b, (lo, hi) in after.items():
        olds = {a for a, (s, e) in before.items() if s < hi and lo < e}
        merged = [i for i, (o, _) in enumerate(sets) if o & olds]
        group = (set(olds), {b})
        for i in sorted(merged, reverse=True):
            o, n = sets.pop(i)
            group[0].update(o)
            group[1].update(n)
        sets.append(group)
    return [(sorted(o), sorted(n)) for o, n in sets]


def _run(
    store: TableStore,
    spec: TableSpec,
    txn: Transaction,
    snapshot: Snapshot | None,
    layouts: BucketLayouts,
    changes: dict,
    jobs: list[_Job],
    counts: dict[str, tuple[int, int]],
    action: str,
    threads: int | None,
) -> RegroupResult:
    """Runs the jobs (each reads its sources and writes its targets), writes the layouts and
    commits; nothing to change aborts the instant."""
    if not changes:
        txn.abort()
        return RegroupResult(action, None, {})
    new_layouts = layouts.with_changes(changes)
    existing = (
        {(r.partition, r.slice.bucket): r.slice for r in snapshot.slices()} if snapshot else {}
    )

    def run(job: _Job) -> tuple[list[WrittenFile], int]:
        return _rewrite(store, spec, txn.id, job, new_layouts, existing)

    done = in_threads(run, [(j,) for j in jobs], threads or os.cpu_count() or 1)
    written = [f for files, _ in done for f in files]
    rows_in = sum(n for _, n in done)
    rows_out = sum(f.rows for f in written)
    twice = [p for p, n in Counter(f.path for f in written).items() if n > 1]
    if twice or rows_in != rows_out:
        # Two jobs writing one group, or rows lost on the way, would commit a loss.
        raise CommitFailedError(
            f"{action} of {store.uri} wrote {rows_out} rows of the {rows_in} it read"
            + (f" and wrote {twice[:2]} twice" if twice else "")
            + "; nothing was committed: report this as a dynbucket bug"
        )
    for f in written:
        txn.add(f)
    write_layouts(store, txn.id, changes)
    read = sum(s.size for job in jobs for s in job.sources)
    total = sum(r.slice.size for r in snapshot.slices()) if snapshot else 0
    txn.commit(
        {action: {p: list(c) for p, c in counts.items()}, "bytes-read": read, "rows-read": rows_in}
    )
    return RegroupResult(
        action,
        txn.id,
        counts,
        sum(len(j.sources) for j in jobs),
        len(written),
        rows_out,
        read,
        sum(f.size for f in written),
        total,
    )


def _rewrite(
    store: TableStore,
    spec: TableSpec,
    instant: str,
    job: _Job,
    layouts: BucketLayouts,
    existing: dict[tuple[str, int], FileSlice],
) -> tuple[list[WrittenFile], int]:
    """Returns the files written and the live rows read.

    1. Reads the live rows of the job's sources (meta fields kept).
    2. Each row's bucket under the new layout (one of the job's targets, by construction).
    3. One base file per target that gets rows or already has a group; an empty base file
       for each source whose bucket the new layout retired."""
    p = job.partition
    meta = list(spec.meta_fields)
    parts = [read_slice(store, spec, s, spec.schema.names, meta) for s in job.sources]  # 1.
    rows = pa.concat_tables(parts) if parts else None
    targets = np.zeros(0, np.int32)
    if rows is not None and rows.num_rows:  # 2.
        keyed = rows.append_column(HASH, pa.array(key_hashes(rows, spec.record_key)))
        targets = layouts.locate(p, keyed)
        stray = set(np.unique(targets).tolist()) - set(job.targets)
        assert not stray, f"rows of {p} left their job's buckets: {sorted(stray)}"
    kept = set(layouts.buckets(p))
    out = []
    source_buckets = {s.bucket for s in job.sources}
    for bucket in sorted(set(job.targets) | (source_buckets - kept)):  # 3.
        at = np.flatnonzero(targets == bucket)
        old = existing.get((p, bucket))
        if not len(at) and old is None:
            continue
        mine = rows.take(pa.array(at)) if rows is not None and len(at) else None
        if mine is None:
            mine = spec.file_schema().empty_table()
        file_id = old.file_id if old else file_id_for(spec.table_id, instant, p, bucket)
        name = base_name(file_id, instant)
        path = store.path(p, name)
        size = write_base(store, spec, path, moved_to(spec, mine, name))
        out.append(
            WrittenFile(
                p,
                path,
                "base",
                mine.num_rows,
                size,
                file_id,
                bucket,
                inserts=mine.num_rows if old is None else 0,
                prev_commit=old.base_instant if old else None,
            )
        )
    return out, rows.num_rows if rows is not None else 0
