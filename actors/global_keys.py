"""One slot's ``key hash -> location`` map over every partition of a table (global index).

With a global index a key is one row in the table, wherever its partition value moves, so
a slot must find a key's partition from its hash alone. Per key it keeps one entry: the
cache key (uint64) and a *location id* (uint16), an index into :class:`Locations`, the
slot's list of (partition, bucket) pairs. That is the partition-scoped cache's bytes per
key (``cache.SortedRun``: about 8.3 at 100M keys), not a second map beside it.

The checkpoint flow is the partition cache's (``partition_index.py``), with one change:
a move puts a key in a new location while its committed entry still holds the old one, so
the structures are not disjoint. Lookups therefore read the newest first (this
checkpoint's placements, older uncommitted ones, then the committed runs), and a commit
takes the entries that leave out of the committed runs *before* it merges the placements
in.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from dynbucket.actors.cache import MISSING, PendingTable, SortedRun, settled
from dynbucket.base.errors import BucketSpaceExhaustedError

U64 = npt.NDArray[np.uint64]
U16 = npt.NDArray[np.uint16]
I32 = npt.NDArray[np.int32]

#: Location ids are uint16 (the cache's bucket column): this many (partition, bucket) pairs.
MAX_LOCATIONS = 1 << 16

#: ``state`` of a lookup: where the entry found was.
COMMITTED, OLDER, THIS = 0, 1, 2


class Locations:
    """The (partition, bucket) pairs a slot's keys live in, each with a small id."""

    __slots__ = ("names", "_name_ids", "_ids", "partition_of", "bucket_of")

    def __init__(self) -> None:
        self.names: list[str] = []
        self._name_ids: dict[str, int] = {}
        self._ids: dict[tuple[int, int], int] = {}
        self.partition_of = np.empty(0, np.int32)
        """Per location id, its partition's position in ``names``."""
        self.bucket_of = np.empty(0, np.int32)
        """Per location id, its bucket."""

    def __len__(self) -> int:
        return len(self._ids)

    def of(self, partition: str, buckets: npt.NDArray[np.integer]) -> U16:
        """The location ids of ``buckets`` of ``partition`` (new pairs get new ids).

        Raises:
            BucketSpaceExhaustedError: more than 65,536 (partition, bucket) pairs.
        """
        p = self._name_ids.get(partition)
        if p is None:
            p = self._name_ids[partition] = len(self.names)
            self.names.append(partition)
        buckets = np.asarray(buckets)
        if len(buckets) == 0:
            return np.empty(0, np.uint16)
        # A table from bucket id to location id: one pass, no sort (a bootstrap maps a
        # partition's million keys here).
        present = np.flatnonzero(np.bincount(buckets.astype(np.intp)))
        table = np.zeros(int(present[-1]) + 1, np.uint16)
        for bucket in present.tolist():
            table[bucket] = self._id(p, bucket)
        return table[buckets]

    def _id(self, p: int, bucket: int) -> int:
        known = self._ids.get((p, bucket))
        if known is not None:
            return known
        new = len(self._ids)
        if new >= MAX_LOCATIONS:
            raise BucketSpaceExhaustedError(
                f"a global index slot holds keys in {MAX_LOCATIONS} (partition, bucket) "
                "pairs, the most it can address; raise dynamic-bucket.max-keys-per-bucket "
                "(fewer, larger buckets), or run more assigner_slots"
            )
        self._ids[(p, bucket)] = new
        if new >= len(self.bucket_of):
            grow = max(64, len(self.bucket_of))
            self.partition_of = np.concatenate([self.partition_of, np.zeros(grow, np.int32)])
            self.bucket_of = np.concatenate([self.bucket_of, np.zeros(grow, np.int32)])
        self.partition_of[new] = p
        self.bucket_of[new] = bucket
        return new

    def partition_id(self, partition: str) -> int:
        """The position of ``partition`` in ``names``, or -1 if no key lives there."""
        return self._name_ids.get(partition, -1)


class GlobalKeys:
    """Cache key -> location id of one slot, committed runs plus placements per checkpoint.

    ``placed[c]``: the keys checkpoint ``c`` puts somewhere (new keys, and keys moving in);
    ``moved[c]``: of those, the location each moved from (so a retried call answers alike);
    ``leaving[c]``: keys whose committed entry ends when ``c`` commits (deleted, moved out).
    """

    RECENT_SHARE = 0.25

    def __init__(self, run: SortedRun | None = None) -> None:
        self.run = run if run is not None else SortedRun.empty()
        self.recent = SortedRun.empty()
        self.placed: dict[int, PendingTable] = {}
        self.moved: dict[int, PendingTable] = {}
        self.leaving: dict[int, list[U64]] = {}

    def __len__(self) -> int:
        return len(self.run) + len(self.recent) + sum(len(t) for t in self.placed.values())

    @property
    def nbytes(self) -> int:
        tables = [*self.placed.values(), *self.moved.values()]
        return self.run.nbytes + self.recent.nbytes + sum(t.nbytes for t in tables)

    @property
    def uncommitted(self) -> list[int]:
        return sorted({*self.placed, *self.leaving})

    def lookup(self, keys: U64, checkpoint: int) -> tuple[I32, npt.NDArray[np.int8]]:
        """Location id of each key (``MISSING`` when unknown) and where it was found
        (``THIS`` checkpoint's placements, an ``OLDER`` uncommitted one, ``COMMITTED``),
        newest first."""
        out = np.full(len(keys), MISSING, np.int32)
        state = np.full(len(keys), COMMITTED, np.int8)
        order = sorted(self.placed, key=lambda c: (c != checkpoint, -c))
        structures: list[tuple[SortedRun | PendingTable, int]] = [
            *((self.placed[c], THIS if c == checkpoint else OLDER) for c in order),
            (self.recent, COMMITTED),
            (self.run, COMMITTED),
        ]
        missing = np.arange(len(keys))
        for structure, where in structures:
            if len(structure) == 0 or len(missing) == 0:
                continue
            found = np.full(len(missing), MISSING, np.int32)
            structure.lookup(keys[missing], found)
            hit = found >= 0
            out[missing[hit]] = found[hit]
            state[missing[hit]] = where
            missing = missing[~hit]
        return out, state

    def committed(self, keys: U64) -> I32:
        """Location id of each key in the committed runs (``MISSING`` when none)."""
        out = np.full(len(keys), MISSING, np.int32)
        self.run.lookup(keys, out)
        rest = np.flatnonzero(out < 0)
        if len(rest) and len(self.recent):
            found = np.full(len(rest), MISSING, np.int32)
            self.recent.lookup(keys[rest], found)
            out[rest] = found
        return out

    def place(
        self,
        checkpoint: int,
        keys: U64,
        choose: Callable[[npt.NDArray[np.int64]], U16],
        moved_from: I32,
    ) -> I32:
        """Puts ``keys`` (none placed by ``checkpoint`` yet) where ``choose`` says: given the
        row of each distinct key's first appearance, their locations; ``moved_from``: per
        row, the location its key leaves (``MISSING``: a new key). Returns each row's
        location."""
        table = self.placed.get(checkpoint)
        if table is None:
            table = self.placed[checkpoint] = PendingTable(len(keys))
        firsts: list[npt.NDArray[np.int64]] = []

        def chosen(first: npt.NDArray[np.int64]) -> U16:
            firsts.append(first)
            return choose(first)

        out, _ = table.assign_by_row(keys, chosen)
        first = firsts[0] if firsts else np.empty(0, np.int64)
        keys, moved_from = keys[first], moved_from[first]
        moving = moved_from >= 0
        if moving.any():
            moves = self.moved.get(checkpoint)
            if moves is None:
                moves = self.moved[checkpoint] = PendingTable(int(moving.sum()))
            moves.insert(keys[moving], moved_from[moving].astype(np.uint16))
        return out

    def moved_from(self, checkpoint: int, keys: U64) -> I32:
        """The location each key placed by ``checkpoint`` moved from (``MISSING``: none)."""
        out = np.full(len(keys), MISSING, np.int32)
        moves = self.moved.get(checkpoint)
        if moves is not None:
            moves.lookup(keys, out)
        return out

    def unplace(self, checkpoint: int, keys: U64) -> U16:
        """Takes ``keys`` out of ``checkpoint``'s placements (a delete that found nothing, a
        move that lost); returns the locations they had."""
        table = self.placed.get(checkpoint)
        if table is None or len(keys) == 0:
            return np.empty(0, np.uint16)
        held, locs = table.sorted_items()
        drop = np.isin(held, keys)
        if not drop.any():
            return np.empty(0, np.uint16)
        rest = PendingTable(int((~drop).sum()))
        rest.insert(held[~drop], locs[~drop])
        self.placed[checkpoint] = rest
        moves = self.moved.get(checkpoint)
        if moves is not None:
            mk, ml = moves.sorted_items()
            keep = ~np.isin(mk, keys)
            self.moved[checkpoint] = PendingTable(int(keep.sum()))
            self.moved[checkpoint].insert(mk[keep], ml[keep])
        return locs[drop]

    def leave_at_commit(self, checkpoint: int, keys: U64) -> None:
        """Notes keys whose committed entry ends when ``checkpoint`` commits."""
        if len(keys):
            self.leaving.setdefault(checkpoint, []).append(keys)

    def commit_through(self, latest_successful: int) -> dict[int, tuple[U16, U16]]:
        """Commits the checkpoints <= ``latest_successful``: 1. the entries leaving come
        out of the committed runs; 2. the placements merge in. Returns, per checkpoint, the
        locations gained and the locations left (this slot's keys only)."""
        moved: dict[int, tuple[U16, U16]] = {}
        for ckpt in [c for c in self.uncommitted if c <= latest_successful]:
            left = np.empty(0, np.uint16)
            gone = self.leaving.pop(ckpt, None)
            if gone is not None:  # 1.
                left = self._remove(np.unique(np.concatenate(gone)))
            gained = np.empty(0, np.uint16)
            table = self.placed.pop(ckpt, None)
            self.moved.pop(ckpt, None)
            if table is not None and len(table):  # 2.
                keys, gained = table.sorted_items()
                # A key may still hold a committed entry (moved in, its move-out not
                # noted): it leaves, so that each key keeps one entry.
                left = np.concatenate([left, self._remove(keys)])
                self.recent = (
                    self.recent.merged(keys, gained)
                    if len(self.recent)
                    else SortedRun(keys, gained)
                )
            moved[ckpt] = (gained, left)
        self.run, self.recent = settled(self.run, self.recent, self.RECENT_SHARE)
        return moved

    def abort(self, checkpoint: int) -> U16:
        """Drops ``checkpoint``'s placements and leavings; returns the placed locations."""
        self.leaving.pop(checkpoint, None)
        self.moved.pop(checkpoint, None)
        table = self.placed.pop(checkpoint, None)
        if table is None:
            return np.empty(0, np.uint16)
        return table.sorted_items()[1]

    def _remove(self, keys: U64) -> U16:
        if len(keys) == 0:
            return np.empty(0, np.uint16)
        self.recent, from_recent = self.recent.without(keys)
        self.run, from_run = self.run.without(keys)
        return np.concatenate([from_recent, from_run])
