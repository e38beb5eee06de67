"""Where new keys go: fill-first over the buckets a slot may fill (I3), then new buckets.

Slot ``i`` of ``N`` may fill the buckets whose id is ``i (mod N)`` and creates new ones only
in that residue class, skipping ids that exist. Bucket ids therefore never collide between
slots within an instant, and never collide with existing buckets when ``N`` changes between
writes. The initial layout follows: slot ``i`` starts with bucket ``i``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dynbucket.actors import kernels
from dynbucket.actors.partition_index import PartitionIndex
from dynbucket.base.columns import MAX_BUCKET_ID
from dynbucket.base.errors import BucketSpaceExhaustedError, ConfigError
from dynbucket.base.options import DynamicBucketOptions


class BucketAllocator:
    """Chooses buckets for new keys of one slot."""

    def __init__(self, slot: int, num_slots: int, options: DynamicBucketOptions) -> None:
        if not 0 <= slot < num_slots:
            raise ConfigError(f"slot={slot}: must be in 0..{num_slots - 1} for {num_slots} slots")
        if options.max_buckets is not None and num_slots > options.max_buckets:
            raise ConfigError(
                f"assigner slots={num_slots} exceeds dynamic-bucket.max-buckets="
                f"{options.max_buckets}: every slot needs a bucket of its own; use at most "
                f"{options.max_buckets} slots or raise dynamic-bucket.max-buckets"
            )
        self.slot = slot
        self.num_slots = num_slots
        self.options = options
        # Ids this slot may never create: beyond the uint16 cache or the configured limit.
        self._id_limit = min(MAX_BUCKET_ID + 1, options.max_buckets or MAX_BUCKET_ID + 1)
        self.buckets_created = 0
        self.overflow_keys = 0

    def allocate(self, index: PartitionIndex, demand: int) -> npt.NDArray[np.uint16]:
        """Buckets for ``demand`` new keys of ``index``'s partition, in assignment order.

        1. The buckets this slot may fill: existing ids in its residue class, ascending.
        2. Their room, in keys (converted from bytes when fullness is in bytes).
        3. Fill first: each bucket in order takes keys up to its room.
        4. Demand left: open new buckets (smallest free ids of the class), each empty.
        5. Demand left once no id may be opened (``max-buckets``): the slot's least-filled
           bucket takes the rest, over capacity.
        """
        if demand == 0:
            return np.empty(0, np.uint16)
        # 1.
        existing = index.existing_buckets()
        own = existing[existing % self.num_slots == self.slot]
        # 2.
        room, per_bucket = self._room(index, own)
        # 3.
        take = kernels.fill_first(room, demand)
        ids = [own]
        takes = [take]
        left = demand - int(take.sum())
        # 4.
        if left > 0:
            fresh = self._new_ids(existing, -(-left // per_bucket))
            ids.append(fresh)
            takes.append(kernels.fill_first(np.full(len(fresh), per_bucket, np.int64), left))
            self.buckets_created += len(fresh)
            left -= int(takes[-1].sum())
        # 5.
        if left > 0:
            pool = np.concatenate(ids)
            if len(pool) == 0:
                raise BucketSpaceExhaustedError(
                    f"slot {self.slot} of {self.num_slots} has no bucket and may open none "
                    f"(dynamic-bucket.max-buckets={self.options.max_buckets}); raise "
                    "dynamic-bucket.max-buckets or use fewer assigner slots"
                )
            load = index.bucket_keys[pool] + np.concatenate(takes)
            overflow = np.zeros(len(pool), np.int64)
            overflow[int(np.argmin(load))] = left
            ids, takes = [pool], [np.concatenate(takes) + overflow]
            self.overflow_keys += left
        return np.repeat(np.concatenate(ids), np.concatenate(takes)).astype(np.uint16)

    def _room(
        self, index: PartitionIndex, own: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], int]:
        """Room left in each of ``own`` buckets, and the room of an empty bucket, in keys."""
        opts = self.options
        if not opts.by_bytes:
            assert opts.max_keys_per_bucket is not None
            cap = opts.max_keys_per_bucket
            return np.maximum(cap - index.bucket_keys[own], 0), cap
        assert opts.max_bytes_per_bucket is not None
        est = index.estimated_bytes(opts.bytes_per_key_estimate)
        per_key = max(1.0, index.bytes_per_key(opts.bytes_per_key_estimate))
        room = np.maximum(opts.max_bytes_per_bucket - est[own], 0) // per_key
        return room.astype(np.int64), max(1, int(opts.max_bytes_per_bucket // per_key))

    def _new_ids(self, existing: npt.NDArray[np.int64], count: int) -> npt.NDArray[np.int64]:
        """Up to ``count`` smallest ids of this slot's class that do not exist yet."""
        taken = set(existing.tolist())
        free: list[int] = []
        bucket = self.slot
        while len(free) < count and bucket < self._id_limit:
            if bucket not in taken:
                free.append(bucket)
            bucket += self.num_slots
        if len(free) < count and self.options.max_buckets is None:
            raise BucketSpaceExhaustedError(
                f"slot {self.slot} of {self.num_slots} used every bucket id up to "
                f"{MAX_BUCKET_ID}; raise dynamic-bucket.max-keys-per-bucket (or "
                "max-bytes-per-bucket) so that buckets hold more keys"
            )
        return np.array(free, dtype=np.int64)
