"""The assigner core of one slot of a global index: a key is one row in the table.

``BucketAssigner`` with one change of scope: a slot's cache maps each key hash of its
range to a (partition, bucket) location over *every* partition (``global_keys.py``), so a
record whose partition value differs from its key's finds where the key lives. What each
record gets from :meth:`GlobalBucketAssigner.assign`:

* a key the table does not hold: a bucket with room in the record's partition (the
  partition-scoped rule: ``allocator.py``, the same counts per partition);
* a key held in the record's partition: its bucket;
* a key held in another partition (a **move**): a bucket with room in the record's
  partition, as a new key, and the location it leaves (``moved_from``); the writer writes a
  delete there in the same instant when the record wins by its ordering value, and
  :meth:`leave` notes it (a move that loses is taken back the same way);
* a record marked as a delete: the key's location, wherever it is (its partition value is
  ignored).

The cache is whole: every partition is bootstrapped at the first call of a fleet (a key
may live in any of them), and no partition is evicted on its own. Batches must hold one
record per key: a writer dedupes by key across partitions first.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dynbucket.actors.assigner import (
    Answer,
    BucketAssigner,
    IndexSource,
    Moves,
    NewKeys,
    rows_by_partition,
)
from dynbucket.actors.cache import (
    MISSING,
    SortedRun,
    release_unused_memory,
    to_cache_keys,
    union_arrays,
)
from dynbucket.actors.global_keys import COMMITTED, THIS, GlobalKeys, Locations
from dynbucket.actors.partition_index import PartitionIndex, PartitionLoad
from dynbucket.base.columns import DELETE
from dynbucket.base.errors import AssignerError
from dynbucket.base.options import DynamicBucketIndex

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
_NONE = np.zeros(0, np.int64)


class GlobalBucketAssigner(BucketAssigner):
    """Assigns buckets to the keys routed to one slot, each key unique in the table.

    ``self.partitions`` hold the per-bucket counts of each partition only (their key runs
    stay empty); the keys are in ``self.keys``.
    """

    global_index = True

    def __init__(
        self, slot: int, num_slots: int, options: DynamicBucketIndex, source: IndexSource
    ) -> None:
        super().__init__(slot, num_slots, options, source)
        self.locations = Locations()
        self.keys = GlobalKeys()
        self.loaded = False

    # --- checkpoint flow -----------------------------------------------------------------

    def assign(
        self,
        checkpoint: int,
        partitions: Sequence[str],
        partition_codes: npt.NDArray[np.integer],
        hashes: npt.NDArray[np.int64],
        ops: npt.NDArray[np.int8] | None = None,
    ) -> tuple[I32, npt.NDArray[np.bool_]]:
        """Buckets, as ``BucketAssigner.assign`` (where each row goes and what it moves
        from: :meth:`place`)."""
        return self.place(checkpoint, partitions, partition_codes, hashes, ops)[:2]

    def place(
        self,
        checkpoint: int,
        partitions: Sequence[str],
        partition_codes: npt.NDArray[np.integer],
        hashes: npt.NDArray[np.int64],
        ops: npt.NDArray[np.int8] | None = None,
    ) -> Answer:
        """Buckets, whether each key is new, and where each row goes and what it moves
        from (``Answer.moves``); ``ops``: a row marked as a delete goes where its key is."""
        self._check_open(checkpoint)
        hashes = self._routed(hashes)
        self._ensure_loaded()
        keys = to_cache_keys(hashes)
        names = list(partitions)
        codes = np.asarray(partition_codes, np.int64)
        # 1. Where each key is: this checkpoint's placements first, then the committed.
        loc, state = self.keys.lookup(keys, checkpoint)
        found = loc >= 0
        at_part = np.full(len(keys), -1, np.int64)
        at_part[found] = self.locations.partition_of[loc[found]]
        wanted = np.array([self.locations.partition_id(n) for n in names], np.int64)[codes]
        deleting = np.zeros(len(keys), np.bool_) if ops is None else ops == DELETE
        # 2. Found where the record says, or a delete (wherever the key is): its location.
        stays = found & ((at_part == wanted) | deleting)
        moving = found & ~stays
        if (moving & (state == THIS)).any():
            raise AssignerError(
                f"slot {self.slot}: a key placed in checkpoint {checkpoint} came again with "
                "another partition value; a global index's writer keeps one record per key "
                "(dedupe by key across partitions before assigning)"
            )
        # 3. The rest (new keys, moves): a bucket with room in the record's partition,
        #    each distinct key once, in the order the keys first come (per partition).
        new_loc = loc.copy()
        rows = np.flatnonzero(~stays)
        if len(rows):
            row_codes = codes[rows]

            def choose(first: npt.NDArray[np.int64]) -> npt.NDArray[np.uint16]:
                placed = np.empty(len(first), np.uint16)
                for name, at in rows_by_partition(names, row_codes[first]):
                    index = self._index(name)
                    index.last_used_checkpoint = checkpoint
                    chosen = self.allocator.allocate(index, len(at))
                    index.count_new(chosen)
                    placed[at] = self.locations.of(name, chosen)
                self._stats.new_keys += len(first)
                return placed

            came = np.where(moving[rows], loc[rows], MISSING).astype(np.int32)
            new_loc[rows] = self.keys.place(checkpoint, keys[rows], choose, came)
        # What a call of this checkpoint placed answers again as it did (a retried task).
        placed_here = stays & (state == THIS)
        came_from = np.full(len(keys), MISSING, np.int32)
        came_from[moving] = loc[moving]
        if placed_here.any():
            came_from[placed_here] = self.keys.moved_from(checkpoint, keys[placed_here])
        self._stats.keys_assigned += len(keys)
        buckets = self.locations.bucket_of[new_loc].astype(np.int32)
        is_new = (~stays) | (state != COMMITTED)
        return Answer(buckets, is_new, self._moves(new_loc, came_from))

    def _moves(self, loc: npt.NDArray[np.integer], came_from: I32) -> Moves:
        """Rows at locations ``loc`` (-1: none), moving out of ``came_from``: as
        ``Answer.moves`` says them."""
        names = self.locations.names
        where = np.full(len(loc), -1, np.int32)
        where[loc >= 0] = self.locations.partition_of[loc[loc >= 0]]
        moved = came_from >= 0
        from_part = np.full(len(loc), -1, np.int32)
        from_bucket = np.full(len(loc), -1, np.int32)
        from_part[moved] = self.locations.partition_of[came_from[moved]]
        from_bucket[moved] = self.locations.bucket_of[came_from[moved]]
        return Moves(list(names), where, from_part, from_bucket)

    def locate(
        self,
        checkpoint: int,
        partitions: Sequence[str],
        partition_codes: npt.NDArray[np.integer],
        hashes: npt.NDArray[np.int64],
    ) -> I32:
        """Bucket of each key to delete, wherever it is (its partition value is ignored;
        :meth:`find` says where), or ``MISSING``; the keys found leave at the commit."""
        return self.find(checkpoint, partitions, partition_codes, hashes).buckets

    def find(
        self,
        checkpoint: int,
        partitions: Sequence[str],
        partition_codes: npt.NDArray[np.integer],
        hashes: npt.NDArray[np.int64],
    ) -> Answer:
        """:meth:`locate`, and the partition each key was found in (``Answer.moves``)."""
        self._check_open(checkpoint)
        hashes = self._routed(hashes)
        self._ensure_loaded()
        keys = to_cache_keys(hashes)
        loc, state = self.keys.lookup(keys, checkpoint)
        found = loc >= 0
        committed = found & (state != THIS)  # committed, or placed by an older checkpoint
        self.keys.leave_at_commit(checkpoint, keys[committed])
        if (found & (state == THIS)).any():
            self._uncount(self.keys.unplace(checkpoint, keys[found & (state == THIS)]))
        buckets = np.full(len(keys), MISSING, np.int32)
        buckets[found] = self.locations.bucket_of[loc[found]]
        no_moves = np.full(len(keys), MISSING, np.int32)
        return Answer(buckets, np.zeros(len(keys), np.bool_), self._moves(loc, no_moves))

    def leave(
        self,
        checkpoint: int,
        partitions: Sequence[str],
        partition_codes: npt.NDArray[np.integer],
        hashes: npt.NDArray[np.int64],
    ) -> None:
        """Notes that each key's entry in the given partition ends with ``checkpoint``: a
        placement of this checkpoint there is taken back at once (a delete that found
        nothing, a move that lost), a committed entry there leaves at the commit (deleted,
        or moved out). An entry elsewhere is left alone."""
        self._check_open(checkpoint)
        hashes = self._routed(hashes)
        self._ensure_loaded()
        keys = to_cache_keys(hashes)
        wanted = np.array([self.locations.partition_id(n) for n in partitions], np.int64)[
            np.asarray(partition_codes, np.int64)
        ]
        placed, state = self.keys.lookup(keys, checkpoint)
        here = (placed >= 0) & (state == THIS)
        here[here] = self.locations.partition_of[placed[here]] == wanted[here]
        if here.any():
            self._uncount(self.keys.unplace(checkpoint, keys[here]))
        committed = self.keys.committed(keys)
        there = committed >= 0
        there[there] = self.locations.partition_of[committed[there]] == wanted[there]
        self.keys.leave_at_commit(checkpoint, keys[there & ~here])

    def snapshot(
        self, checkpoint: int, latest_successful: int, new_keys: NewKeys | None = None
    ) -> list[str]:
        """Commits (as ``BucketAssigner.snapshot``); never evicts: the cache is whole."""
        counted = new_keys is not None and checkpoint <= latest_successful
        own = self._commit_through(latest_successful)
        if counted:
            assert new_keys is not None
            mine = own.get(checkpoint, {})
            for name, totals in new_keys.items():
                index = self._index(name)
                index.add_others(totals, mine.get(name))
            self.counted = checkpoint
        return []

    def abort(self, checkpoint: int) -> int:
        placed = self.keys.abort(checkpoint)
        self._uncount(placed)
        self._stats.aborted_keys += len(placed)
        return len(placed)

    def reset(self) -> int:
        if self._uncommitted():
            raise AssignerError(
                f"cannot empty slot {self.slot}: it holds uncommitted mappings or deletes of "
                f"checkpoints {self._uncommitted()}"
            )
        dropped = len(self.partitions)
        self.partitions = {}
        self.keys = GlobalKeys()
        self.locations = Locations()
        self.loaded = False
        return dropped

    def catch_up(self, latest_successful: int) -> int:
        """A global index's cache is whole: it empties (``reset``) and loads again."""
        return self.reset()

    def evict(self, partition: str) -> None:
        raise AssignerError(
            "a global index's cache is whole (a key may live in any partition): no "
            "partition is evicted on its own; reset() empties it"
        )

    def stats(self):  # type: ignore[no-untyped-def]
        s = super().stats()
        s.cached_keys = len(self.keys)
        s.cached_bytes = self.keys.nbytes
        return s

    # --- internals -----------------------------------------------------------------------

    def _settle(self, latest_successful: int) -> None:
        self._commit_through(latest_successful)

    def _drop_uncounted(self) -> None:
        """The whole cache goes (it bootstraps again at the next call) unless something is
        pending."""
        if not self._uncommitted():
            self.reset()

    def _uncommitted(self) -> list[int]:
        return sorted(
            {*self.keys.uncommitted, *(c for i in self.partitions.values() for c in i.uncommitted)}
        )

    def _commit_through(self, latest_successful: int) -> dict[int, dict[str, I64]]:
        """Commits the keys' checkpoints <= ``latest_successful`` and each partition's counts;
        returns per checkpoint and partition this slot's live keys gained per bucket (keys
        placed less keys that left)."""
        out: dict[int, dict[str, I64]] = {}
        for ckpt, (gained, left) in self.keys.commit_through(latest_successful).items():
            plus, minus = self._per_partition(gained), self._per_partition(left)
            net: dict[str, I64] = {}
            for name in {*plus, *minus}:
                net[name] = self._index(name).commit_counts(
                    plus.get(name, _NONE), minus.get(name, _NONE)
                )
            out[ckpt] = net
        return out

    def _per_partition(self, locs: npt.NDArray[np.uint16]) -> dict[str, I64]:
        """Keys per bucket of each partition, of entries at ``locs``."""
        if len(locs) == 0:
            return {}
        # Keys per location id in one pass, then each location's count to its partition.
        per_loc = np.bincount(locs, minlength=len(self.locations))
        ids = np.flatnonzero(per_loc)
        out: dict[str, I64] = {}
        for p, bucket, n in zip(
            self.locations.partition_of[ids].tolist(),
            self.locations.bucket_of[ids].tolist(),
            per_loc[ids].tolist(),
            strict=True,
        ):
            name = self.locations.names[p]
            counts = out.get(name)
            if counts is None or len(counts) <= bucket:
                grown = np.zeros(bucket + 1, np.int64)
                if counts is not None:
                    grown[: len(counts)] = counts
                counts = out[name] = grown
            counts[bucket] += n
        return out

    def _uncount(self, locs: npt.NDArray[np.uint16]) -> None:
        parts = self.locations.partition_of[locs]
        for p in np.unique(parts):
            index = self._index(self.locations.names[int(p)])
            index.count_new(self.locations.bucket_of[locs[parts == p]], sign=-1)

    def _ensure_loaded(self) -> None:
        """1. Every partition the index holds, this slot's section: its keys into one run
        (location ids), its counts into a partition count; 2. union of the parts."""
        if self.loaded:
            return
        start = time.perf_counter()
        parts = []
        for name in self.source.partitions():  # 1.
            # A partition at a time: its arrays go into ``parts`` before the next is read.
            load = self.source.loads([name], self.slot, self.num_slots)[name]
            parts.append((load.keys, self.locations.of(name, load.buckets)))
            self.partitions[name] = PartitionIndex(
                PartitionLoad.empty().with_counts(load.bucket_keys, load.bucket_bytes)
            )
            self._stats.bootstrap_entries_scanned += load.entries_scanned
            self._stats.bootstraps += 1
        keys, locations = union_arrays(parts)  # 2.
        self.keys = GlobalKeys(SortedRun(keys, locations))
        del keys, locations
        release_unused_memory()
        self.loaded = True
        self._stats.bootstrap_seconds += time.perf_counter() - start

    def _index(self, name: str) -> PartitionIndex:
        """A partition's counts (a partition with no committed key: empty counts)."""
        index = self.partitions.get(name)
        if index is None:
            load = PartitionLoad.empty()
            if self.options.by_bytes:
                load = load.with_counts(load.bucket_keys, self.source.bucket_bytes(name))
            index = self.partitions[name] = PartitionIndex(load)
        return index
