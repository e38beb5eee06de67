"""One data partition's ``key hash -> bucket`` cache in one assigner slot.

Holds the proposal's two eviction flags (``updated``, ``last_updated_checkpoint``), the
mappings each not-yet-committed checkpoint created and the keys it deletes (so an abort can
take them out, I8), and the per-bucket live key counts of *every* slot: the committed ones,
which every slot knows alike at the start of an instant (the allocator splits each bucket's
room by them), and this slot's own additions since. A delete takes its keys out of the
cache, and their room back, when its checkpoint commits: a deleted key that comes back is
a new key.

Each cache knows which writes' index entries it holds (``seen``: the instants of the index
files it loaded, its own commits since, and what it caught up with), so that when another
writer commits, it reads only the index deltas it misses instead of loading again
(:class:`PartitionCatchUp`, ``BucketAssigner.catch_up``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dynbucket.actors.cache import MISSING, PendingTable, SortedRun, settled
from dynbucket.base.errors import AssignerError

I64 = npt.NDArray[np.int64]

#: Instants a cache's ``seen`` holds at most (``PartitionIndex.seen``).
SEEN_MAX = 1024

#: ``last_updated_checkpoint`` of a partition never updated since it was loaded.
NEVER = -1


@dataclass
class PartitionLoad:
    """What a bootstrap reads from the record-level index for one partition and slot."""

    keys: npt.NDArray[np.uint64]
    """Cache keys of this slot's entries, sorted."""
    buckets: npt.NDArray[np.uint16]
    """Bucket of each entry in ``keys``."""
    bucket_keys: I64
    """Entries per bucket id, counting every slot's keys."""
    bucket_bytes: I64 | None = None
    """Bytes of each bucket's file group (latest base + deltas), when fullness is in bytes."""
    entries_scanned: int = 0
    """Index entries read from storage to produce this load."""
    seen: frozenset[str] | None = frozenset()
    """The instants whose index files the load holds (None: unknown, so the cache cannot
    catch up with others' writes; it loads again instead)."""

    @classmethod
    def empty(cls) -> PartitionLoad:
        """The load of a partition with no committed keys."""
        return cls(np.empty(0, np.uint64), np.empty(0, np.uint16), np.zeros(0, np.int64))

    def with_counts(self, bucket_keys: I64, bucket_bytes: I64 | None) -> PartitionLoad:
        """This load's keys with other counts (a global index keeps keys elsewhere)."""
        return PartitionLoad(self.keys, self.buckets, bucket_keys, bucket_bytes, 0, None)


@dataclass
class PartitionCatchUp:
    """What the index files a cache misses (other writers' commits since it loaded) say
    about one partition, for one slot (``IndexSource.catch_up``)."""

    touched: npt.NDArray[np.uint64]
    """Cache keys of this slot that those files name (inserted or deleted), sorted, unique."""
    keys: npt.NDArray[np.uint64]
    """Of ``touched``, those whose newest entry is an insert, sorted."""
    buckets: npt.NDArray[np.uint16]
    """Bucket of each of ``keys``."""
    bucket_gain: I64
    """Live keys each bucket id gained in those files, every slot's (inserts less deletes)."""
    seen: frozenset[str]
    """The instants whose index files the cache holds once it took this."""
    bucket_bytes: I64 | None = None
    """A fresh listing (bytes per bucket id), when fullness is in bytes."""


class PartitionIndex:
    """The cache of one partition: committed sorted runs plus one pending table per checkpoint.

    Committed mappings live in two sorted runs, LSM style: ``run`` (large) and ``recent``
    (what recent checkpoints committed). A commit merges into ``recent``; ``recent`` merges
    into ``run`` once it outgrows a quarter of it, so a commit costs O(recent), not O(run).
    """

    #: ``recent`` merges into ``run`` beyond this share of it.
    RECENT_SHARE = 0.25

    def __init__(self, load: PartitionLoad) -> None:
        self.run = SortedRun(load.keys, load.buckets)
        self.recent = SortedRun.empty()
        self.pending: dict[int, PendingTable] = {}
        self.deleting: dict[int, list[npt.NDArray[np.uint64]]] = {}
        """Per uncommitted checkpoint, the keys it deletes (found here when it located them)."""
        self.bucket_keys = np.array(load.bucket_keys, dtype=np.int64)
        """Keys per bucket id: every slot's committed keys plus this slot's pending ones."""
        self.committed_keys = self.bucket_keys.copy()
        """Every slot's committed keys per bucket id."""
        self.updated = False
        self.last_updated_checkpoint = NEVER
        self.last_used_checkpoint = NEVER
        """The last checkpoint that looked a key up here (for the keep-within-budget step)."""
        self.listed_keys = np.zeros_like(self.bucket_keys)
        self.listed_bytes = np.zeros_like(self.bucket_keys)
        self.set_listing(load.bucket_bytes)
        self.seen: set[str] | None = None if load.seen is None else set(load.seen)
        """The instants whose index entries this cache holds (None: unknown). A writer
        alone never catches up, which is when ``seen`` is pruned to the visible files: past
        ``SEEN_MAX`` instants it becomes unknown, so that a long stream's caches stay the
        size they were (such a cache loads again at its first catch-up)."""

    # --- lookups and inserts -------------------------------------------------------------

    def lookup(
        self, keys: npt.NDArray[np.uint64], skip: int | None = None
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
        """Bucket of each key (``MISSING`` when unknown), and whether it is still uncommitted.

        ``skip``: a checkpoint whose pending mappings to leave out (``assign_new`` covers them).
        """
        out = np.full(len(keys), MISSING, dtype=np.int32)
        self.run.lookup(keys, out)
        uncommitted = np.zeros(len(keys), dtype=np.bool_)
        pending = [t for c, t in self.pending.items() if c != skip]
        # The other structures are disjoint from ``run``: ask them only about its misses.
        structures: list[SortedRun | PendingTable] = [self.recent, *pending]
        for structure in structures:
            if len(structure) == 0:
                continue
            missing = np.flatnonzero(out < 0)
            if len(missing) == 0:
                break
            found = np.full(len(missing), MISSING, dtype=np.int32)
            structure.lookup(keys[missing], found)
            out[missing] = found
            if structure is not self.recent:
                uncommitted[missing] |= found >= 0
        return out, uncommitted

    def assign_new(
        self,
        checkpoint: int,
        keys: npt.NDArray[np.uint64],
        choose: Callable[[int], npt.NDArray[np.uint16]],
    ) -> tuple[npt.NDArray[np.int32], int]:
        """Buckets for keys no committed run (nor older checkpoint) holds: those the
        checkpoint already mapped keep their bucket, the distinct others get ``choose(n)``.

        Returns (bucket per key, number of new mappings).
        """
        table = self.pending.get(checkpoint)
        if table is None:
            table = self.pending[checkpoint] = PendingTable(len(keys))

        def counted(n: int) -> npt.NDArray[np.uint16]:
            chosen = choose(n)
            self._count(chosen, +1)
            return chosen

        buckets, fresh = table.assign(keys, counted)
        if fresh:
            self.updated = True
        return buckets, fresh

    def delete_at_commit(self, checkpoint: int, keys: npt.NDArray[np.uint64]) -> None:
        """Notes keys ``checkpoint`` deletes (keys this cache holds): they leave it, and
        their buckets' counts, when the checkpoint commits (``commit_through``)."""
        if len(keys):
            self.deleting.setdefault(checkpoint, []).append(keys)

    @property
    def uncommitted(self) -> list[int]:
        """Checkpoints with mappings or deletes not committed yet, ascending."""
        return sorted({*self.pending, *self.deleting})

    def count_new(self, buckets: npt.NDArray[np.integer], sign: int = 1) -> None:
        """Counts keys placed in ``buckets`` and not committed yet (``sign`` -1: taken
        back), for a global index, whose keys live outside this partition's cache."""
        self._count(np.asarray(buckets, np.int64), sign)

    def commit_counts(self, placed: I64, left: I64) -> I64:
        """Commits keys counted by :meth:`count_new` (``placed`` per bucket) and takes
        committed keys out (``left`` per bucket); returns the live keys gained per bucket."""
        gained = _add(placed, -left)
        self._grow(len(gained))
        self.committed_keys[: len(gained)] += gained
        self.bucket_keys[: len(left)] -= left
        return gained

    # --- lifecycle -----------------------------------------------------------------------

    def commit_through(self, latest_successful: int) -> dict[int, I64]:
        """Moves the mappings of checkpoints <= ``latest_successful`` into the sorted runs
        and takes their deleted keys out, keeping the committed counts. Returns each moved
        checkpoint's live keys gained per bucket, deletes less (this slot's only:
        ``add_others`` adds the other slots')."""
        moved: dict[int, I64] = {}
        for ckpt in [c for c in self.uncommitted if c <= latest_successful]:
            gained = np.zeros(len(self.bucket_keys), np.int64)
            table = self.pending.pop(ckpt, None)
            if table is not None:
                keys, buckets = table.sorted_items()
                gained = _add(gained, np.bincount(buckets))
                self.recent = (
                    self.recent.merged(keys, buckets)
                    if len(self.recent)
                    else SortedRun(keys, buckets)
                )
            gone = self.deleting.pop(ckpt, None)
            if gone is not None:
                removed = np.bincount(self._remove(np.unique(np.concatenate(gone))))
                gained = _add(gained, -removed)
                self._grow(len(removed))
                self.bucket_keys[: len(removed)] -= removed
            self._grow(len(gained))
            self.committed_keys[: len(gained)] += gained
            moved[ckpt] = gained
        self.run, self.recent = settled(self.run, self.recent, self.RECENT_SHARE)
        return moved

    def catch_up(self, found: PartitionCatchUp) -> None:
        """Takes what other writers committed since this cache loaded (nothing pending):

        1. every key the missed files name leaves the runs (a delete, or a key deleted and
           inserted again elsewhere);
        2. the keys whose newest entry is an insert join ``recent`` with their buckets;
        3. every slot's live keys per bucket gain what the files' footers count;
        4. the cache now holds those instants' entries (``seen``), and a fresh listing.
        """
        if self.uncommitted:
            raise AssignerError(f"catch_up with checkpoints {self.uncommitted} pending")
        self._remove(found.touched)  # 1.
        if len(found.keys):  # 2.
            self.recent = (
                self.recent.merged(found.keys, found.buckets)
                if len(self.recent)
                else SortedRun(found.keys, found.buckets)
            )
        gain = found.bucket_gain  # 3.
        self._grow(len(gain))
        self.committed_keys[: len(gain)] += gain
        self.bucket_keys[: len(gain)] += gain
        self.run, self.recent = settled(self.run, self.recent, self.RECENT_SHARE)
        self.seen = set(found.seen)  # 4.
        if found.bucket_bytes is not None:
            self.set_listing(found.bucket_bytes)

    def saw(self, checkpoint: int, whole: bool) -> None:
        """``checkpoint`` committed and this cache holds its entries: this slot's (its
        pending mappings moved at the commit) and, ``whole``, every other slot's counts
        too; else the cache cannot tell what it misses any more."""
        if self.seen is None:
            return
        self.seen.add(instant_id(checkpoint))
        if not whole or len(self.seen) > SEEN_MAX:
            self.seen = None

    def add_others(self, totals: Mapping[int, int], own: I64 | None) -> None:
        """Counts the keys other slots committed: ``totals`` are every slot's new keys per
        bucket of one committed checkpoint, ``own`` this slot's share of them (from
        ``commit_through``; None: none)."""
        if not totals:
            return
        ids = np.fromiter(totals.keys(), np.int64, len(totals))
        counts = np.fromiter(totals.values(), np.int64, len(totals))
        self._grow(int(ids.max()) + 1)
        others = np.zeros(len(self.bucket_keys), np.int64)
        np.add.at(others, ids, counts)
        if own is not None:
            others[: len(own)] -= own
        self.committed_keys += others
        self.bucket_keys += others

    def abort(self, checkpoint: int) -> int:
        """Drops the mappings ``checkpoint`` created, and its deletes; returns how many
        mappings."""
        self.deleting.pop(checkpoint, None)
        table = self.pending.pop(checkpoint, None)
        if table is None:
            return 0
        _, buckets = table.sorted_items()
        self._count(buckets, -1)
        if not self.pending:
            self.updated = False
        return len(table)

    def snapshot(
        self, checkpoint: int, latest_successful: int, totals: Mapping[int, int] | None = None
    ) -> bool:
        """The proposal's snapshot step for this partition; returns True to evict it.

        1. Mappings of checkpoints <= ``latest_successful`` are in the RLI: commit them;
           ``totals`` (every slot's new keys per bucket of the committed ``checkpoint``)
           bring the other slots' keys into the committed counts.
        2. Updated in this interval: ``last_updated_checkpoint = checkpoint``, keep.
        3. Not updated: evict when ``last_updated_checkpoint <= latest_successful`` (all its
           mappings are committed to the RLI), else keep.
        4. Reset ``updated``.
        """
        moved = self.commit_through(latest_successful)
        if totals is not None and checkpoint <= latest_successful:
            self.add_others(totals, moved.get(checkpoint))
        evict = False
        if self.updated:
            self.last_updated_checkpoint = checkpoint
        elif self.last_updated_checkpoint <= latest_successful and not self.uncommitted:
            evict = True
        self.updated = False
        return evict

    # --- capacity ------------------------------------------------------------------------

    def set_listing(self, bucket_bytes: I64 | None) -> None:
        """Takes a fresh file listing (bytes per bucket id); the key counts of this moment
        become its base, so later estimates add only keys assigned since."""
        n = max(len(self.bucket_keys), 0 if bucket_bytes is None else len(bucket_bytes))
        self._grow(n)
        self.listed_bytes = np.zeros(n, np.int64)
        if bucket_bytes is not None:
            self.listed_bytes[: len(bucket_bytes)] = bucket_bytes
        self.listed_keys = self.bucket_keys.copy()

    def bytes_per_key(self, default: int) -> float:
        """Mean file bytes per key in the listing, or ``default`` while there is none."""
        listed, keys = int(self.listed_bytes.sum()), int(self.listed_keys.sum())
        return listed / keys if listed and keys else float(default)

    def estimated_bytes(self, bytes_per_key_default: int, committed_only: bool = False) -> I64:
        """Bytes per bucket id: listed bytes plus keys added since the listing (committed
        ones only, with ``committed_only``), at the partition's mean bytes per key."""
        per_key = self.bytes_per_key(bytes_per_key_default)
        counts = self.committed_keys if committed_only else self.bucket_keys
        added = np.maximum(counts - self.listed_keys, 0)
        return self.listed_bytes + (added * per_key).astype(np.int64)

    # --- introspection -------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.run) + len(self.recent) + sum(len(t) for t in self.pending.values())

    @property
    def nbytes(self) -> int:
        return self.run.nbytes + self.recent.nbytes + sum(t.nbytes for t in self.pending.values())

    def _remove(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint16]:
        """Takes the sorted ``keys`` out of the committed runs; returns the buckets they had
        (keys not held are ignored)."""
        self.recent, from_recent = self.recent.without(keys)
        self.run, from_run = self.run.without(keys)
        return np.concatenate([from_recent, from_run])

    def _count(self, buckets: npt.NDArray[np.uint16], sign: int) -> None:
        if len(buckets) == 0:
            return
        counts = np.bincount(buckets, minlength=len(self.bucket_keys))
        self._grow(len(counts))
        self.bucket_keys += sign * counts

    def _grow(self, n: int) -> None:
        """Extends the per-bucket arrays to ``n`` bucket ids."""
        extra = n - len(self.bucket_keys)
        if extra <= 0:
            return
        self.bucket_keys = np.pad(self.bucket_keys, (0, extra))
        self.committed_keys = np.pad(self.committed_keys, (0, extra))
        self.listed_keys = np.pad(self.listed_keys, (0, extra))
        self.listed_bytes = np.pad(self.listed_bytes, (0, extra))


def instant_id(checkpoint: int) -> str:
    """The instant id of a checkpoint (instant ids are 17-digit times, checkpoints their
    integers)."""
    return f"{checkpoint:017d}"


def _add(a: I64, b: npt.NDArray[np.integer]) -> I64:
    """``a + b`` for per-bucket counts of different lengths."""
    n = max(len(a), len(b))
    return np.pad(a, (0, n - len(a))) + np.pad(b.astype(np.int64), (0, n - len(b)))
