"""Where new keys go: buckets shared by every slot, each slot filling its share (I3).

Every slot may fill every bucket of a partition, so a partition gets the buckets its keys
need, whatever the slot count: a small one fills one bucket before a second opens. Slots
still assign in parallel with no lock and no message per record, because at the start of an
instant every slot knows the same committed count ``T_b`` of each bucket (bootstrapped from
the index footers, then kept exact by the totals the driver hands every slot after each
commit, ``BucketAssigner.snapshot``), and splits the room of each bucket the same way:

    slot i of N may add to bucket b at most share(C - T_b) keys in the instant, where
    share(R) = R // N + (1 if (i - b) mod N < R mod N else 0)

The shares of the N slots sum to ``C - T_b``, so no bucket ever holds more than its
capacity ``C`` after a commit, for any history of slot counts. Buckets with committed keys
fill first, in id order; then new buckets open at the smallest ids with no committed key,
the same sequence in every slot (the remainder rotates with the id, so that every slot has
room in some bucket even when ``C < N``). A slot that received more new keys than its share
of a bucket goes on to the next bucket; at the next instant the room its neighbours left is
split again. Fullness in bytes (``max-bytes-per-bucket``) splits the room the same way, in
keys at the partition's mean bytes per key (each slot lists files at its own moment: approximate).

Writers beside each other (several writers) split the buckets, not their room: a write in
lane ``L`` of ``W`` (``format/timeline/lanes.py``) puts new keys only into buckets whose id
is ``L`` modulo ``W``, those with committed keys first, then the lane's new ids (the room's
remainder rotating with ``b // W``, a bucket's place in the lane), so two writers do not
fill one bucket (each would fill the room it counted, and the second commit
would conflict). One writer alone is lane 0 of 1: every bucket.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dynbucket.actors import kernels
from dynbucket.actors.partition_index import PartitionIndex
from dynbucket.base.columns import MAX_BUCKET_ID
from dynbucket.base.errors import BucketSpaceExhaustedError, ConfigError
from dynbucket.base.options import DynamicBucketIndex

I64 = npt.NDArray[np.int64]

Lane = tuple[int, int]
"""A write's lane ``L`` of ``W``: it fills the buckets whose id is ``L`` modulo ``W``."""
ALONE: Lane = (0, 1)


def shares(room: I64, ids: I64, slot: int, num_slots: int) -> I64:
    """Slot ``slot``'s share of each bucket's ``room`` (the module doc's rule)."""
    extra = (slot - ids) % num_slots < room % num_slots
    return room // num_slots + extra.astype(np.int64)


class BucketAllocator:
    """Chooses buckets for new keys of one slot."""

    #: New bucket ids looked at per round when a slot opens buckets.
    _NEW_IDS_PER_ROUND = 64

    def __init__(self, slot: int, num_slots: int, options: DynamicBucketIndex) -> None:
        if not 0 <= slot < num_slots:
            raise ConfigError(f"slot={slot}: must be in 0..{num_slots - 1} for {num_slots} slots")
        self.slot = slot
        self.num_slots = num_slots
        self.options = options
        # Ids no slot may create: beyond the uint16 cache or the configured limit.
        self._id_limit = min(MAX_BUCKET_ID + 1, options.max_buckets or MAX_BUCKET_ID + 1)
        self.buckets_created = 0
        self.overflow_keys = 0
        self.lanes: Lane = ALONE
        """The open checkpoint's lane (``BucketAssigner.begin``)."""

    def allocate(self, index: PartitionIndex, demand: int) -> npt.NDArray[np.uint16]:
        """Buckets for ``demand`` new keys of ``index``'s partition, in assignment order.

        1. The buckets with committed keys of the write's lane, ascending, and this slot's
           room in each: its share of what the committed count leaves, less what it added
           in this instant.
        2. Fill first: each bucket in order takes keys up to the slot's room.
        3. Demand left: the lane's ids with no committed key, ascending (the same in every
           slot), each with the slot's share of a whole bucket, less what it added already.
        4. Demand left once no id may be opened (``max-buckets``): the least-filled bucket
           takes the rest, over capacity.

        A write's lane whose buckets and ids cannot take the demand (``max-buckets``)
        spills into every bucket, as a writer alone.
        """
        if demand == 0:
            return np.empty(0, np.uint16)
        committed, added = index.committed_keys, index.bucket_keys - index.committed_keys
        ids, takes, left = self._fill(index, demand, *self.lanes)
        if left > 0 and self.lanes != ALONE:  # the lane's ids ran out: any bucket's room
            ids, takes, left = self._fill(index, demand, *ALONE)
        if left > 0 and self.options.max_buckets is None:
            raise BucketSpaceExhaustedError(
                f"slot {self.slot} of {self.num_slots} found every bucket id up to "
                f"{MAX_BUCKET_ID} full; raise dynamic-bucket.max-keys-per-bucket (or "
                "max-bytes-per-bucket) so that buckets hold more keys"
            )
        # 4.
        if left > 0:
            load = _at(index.bucket_keys, ids) + takes
            takes[int(np.argmin(load))] += left
            self.overflow_keys += left
        opened = (takes > 0) & (_at(committed, ids) == 0) & (_at(added, ids) == 0)
        self.buckets_created += int(opened.sum())
        return np.repeat(ids, takes).astype(np.uint16)

    def _fill(
        self, index: PartitionIndex, demand: int, lane: int, lanes: int
    ) -> tuple[I64, I64, int]:
        """Steps 1-3 of :meth:`allocate` in lane ``lane`` of ``lanes``: the buckets looked
        at, the keys each takes, and the demand left."""
        committed, added = index.committed_keys, index.bucket_keys - index.committed_keys
        # 1.
        existing = np.flatnonzero(committed > 0)
        existing = existing[existing % lanes == lane]
        room, per_bucket = self._room(index, existing)
        # The remainder rotates with a bucket's place in the lane (its id with one lane), so
        # that each slot has room in some bucket of the lane even when C < N.
        mine = shares(room, existing // lanes, self.slot, self.num_slots)
        room = np.maximum(mine - added[existing], 0)
        # 2.
        take = kernels.fill_first(room, demand)
        ids, takes = [existing], [take]
        left = demand - int(take.sum())
        # 3.
        start = 0
        while left > 0 and start < self._id_limit:
            fresh = self._new_ids(committed, start)
            if len(fresh) == 0:
                break
            start = int(fresh[-1]) + 1
            fresh = fresh[fresh % lanes == lane]
            whole = np.full(len(fresh), per_bucket, np.int64)
            already = _at(added, fresh)
            placed = shares(whole, fresh // lanes, self.slot, self.num_slots)
            mine = np.maximum(placed - already, 0)
            take = kernels.fill_first(mine, left)
            ids.append(fresh)
            takes.append(take)
            left -= int(take.sum())
        return np.concatenate(ids), np.concatenate(takes).astype(np.int64), left

    def _room(self, index: PartitionIndex, ids: I64) -> tuple[I64, int]:
        """Room the committed keys leave in each of ``ids``, and the room of an empty
        bucket, in keys."""
        opts = self.options
        if not opts.by_bytes:
            assert opts.max_keys_per_bucket is not None
            cap = opts.max_keys_per_bucket
            return np.maximum(cap - index.committed_keys[ids], 0), cap
        assert opts.max_bytes_per_bucket is not None
        est = index.estimated_bytes(opts.bytes_per_key_estimate, committed_only=True)
        per_key = max(1.0, index.bytes_per_key(opts.bytes_per_key_estimate))
        room = np.maximum(opts.max_bytes_per_bucket - est[ids], 0) // per_key
        return room.astype(np.int64), max(1, int(opts.max_bytes_per_bucket // per_key))

    def _new_ids(self, committed: I64, start: int) -> I64:
        """Up to ``_NEW_IDS_PER_ROUND`` ids from ``start`` on with no committed key."""
        stop = min(self._id_limit, start + len(committed) + self._NEW_IDS_PER_ROUND)
        candidates = np.arange(start, stop, dtype=np.int64)
        free = candidates[_at(committed, candidates) == 0]
        return free[: self._NEW_IDS_PER_ROUND]


def _at(counts: I64, ids: I64) -> I64:
    """``counts[ids]``, 0 for ids beyond the array."""
    out = np.zeros(len(ids), np.int64)
    inside = ids < len(counts)
    out[inside] = counts[ids[inside]]
    return out
