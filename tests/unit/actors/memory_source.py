"""An in-memory record-level index for unit tests of the assigner core, and a tiny driver
that plays the checkpoint flow the write pipeline plays for real."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dynbucket.actors import BucketAssigner, DynamicBucketIndex, PartitionLoad
from dynbucket.actors.cache import to_cache_keys
from dynbucket.base.keyhash import slot_of


@dataclass
class MemoryRLI:
    """partition -> committed (hash, bucket) entries; bytes per bucket for size tests."""

    entries: dict[str, dict[int, int]] = field(default_factory=dict)
    file_bytes: dict[str, dict[int, int]] = field(default_factory=dict)
    loaded: int = 0
    """Partitions loaded so far."""

    def loads(
        self, partitions: Sequence[str], slot: int, num_slots: int
    ) -> dict[str, PartitionLoad]:
        return {p: self.load(p, slot, num_slots) for p in partitions}

    def load(self, partition: str, slot: int, num_slots: int) -> PartitionLoad:
        self.loaded += 1
        part = self.entries.get(partition, {})
        hashes = np.array(sorted(part), dtype=np.int64)
        buckets = np.array([part[h] for h in hashes.tolist()], dtype=np.int64)
        counts = np.bincount(buckets, minlength=0) if len(buckets) else np.zeros(0, np.int64)
        mine = slot_of(hashes, num_slots) == slot
        return PartitionLoad(
            keys=to_cache_keys(hashes[mine]),
            buckets=buckets[mine].astype(np.uint16),
            bucket_keys=counts,
            bucket_bytes=self.bucket_bytes(partition),
            entries_scanned=len(hashes),
        )

    def bucket_bytes(self, partition: str) -> npt.NDArray[np.int64]:
        sizes = self.file_bytes.get(partition, {})
        out = np.zeros(max(sizes, default=-1) + 1, np.int64)
        for b, n in sizes.items():
            out[b] = n
        return out


class Driver:
    """Routes keys to N assigners and walks begin -> assign -> commit/abort -> snapshot."""

    def __init__(self, rli: MemoryRLI, num_slots: int, options: DynamicBucketIndex) -> None:
        self.rli = rli
        self.slots = [BucketAssigner(i, num_slots, options, rli) for i in range(num_slots)]
        self.latest = -1
        self.checkpoint = 0
        self.lanes = (0, 1)
        """The writer's lane L of W (several writers: ``format/timeline/lanes.py``)."""

    def write(self, partition: str, hashes: list[int], commit: bool = True) -> list[int]:
        """One instant writing ``hashes`` into ``partition``; returns their buckets."""
        self.checkpoint += 1
        c = self.checkpoint
        buckets, _ = self.assign_open(c, partition, hashes)
        if commit:
            self.commit(c, partition, hashes, buckets)
        else:
            for a in self.slots:
                a.abort(c)
        return buckets

    def assign_open(
        self, c: int, partition: str, hashes: list[int]
    ) -> tuple[list[int], list[bool]]:
        for a in self.slots:
            a.begin(c, self.latest, self.lanes)
        h = np.array(hashes, dtype=np.int64)
        out = np.empty(len(h), np.int64)
        new = np.empty(len(h), np.bool_)
        route = slot_of(h, len(self.slots))
        for i, a in enumerate(self.slots):
            rows = np.flatnonzero(route == i)
            b, n = a.assign(c, [partition], np.zeros(len(rows), np.int32), h[rows])
            out[rows], new[rows] = b, n
        return out.tolist(), new.tolist()

    def commit(self, c: int, partition: str, hashes: list[int], buckets: list[int]) -> None:
        """Commits the instant's new entries, then every slot's snapshot with the new keys
        per bucket (as ``write/instant.py`` hands them from the files written)."""
        part = self.rli.entries.setdefault(partition, {})
        new: dict[int, int] = {}
        for h, b in zip(hashes, buckets, strict=True):
            if h not in part:
                part[h] = b
                new[b] = new.get(b, 0) + 1
        self.latest = c
        for a in self.slots:
            a.snapshot(c, c, {partition: new})

    def delete(self, partition: str, hashes: list[int], commit: bool = True) -> list[int]:
        """One instant deleting ``hashes`` from ``partition``; returns the buckets each was
        found in (-1: not known). Committed, the keys leave the index and every slot's
        snapshot gets the room back (negative new keys, as ``write/instant.py`` hands)."""
        self.checkpoint += 1
        c = self.checkpoint
        for a in self.slots:
            a.begin(c, self.latest)
        h = np.array(hashes, dtype=np.int64)
        found = np.full(len(h), -1, np.int64)
        route = slot_of(h, len(self.slots))
        for i, a in enumerate(self.slots):
            rows = np.flatnonzero(route == i)
            found[rows] = a.locate(c, [partition], np.zeros(len(rows), np.int32), h[rows])
        if not commit:
            for a in self.slots:
                a.abort(c)
            return found.tolist()
        part = self.rli.entries.setdefault(partition, {})
        gone: dict[int, int] = {}
        for key, b in zip(h.tolist(), found.tolist(), strict=True):
            if b >= 0 and part.pop(key, None) is not None:
                gone[b] = gone.get(b, 0) - 1
        self.latest = c
        for a in self.slots:
            a.snapshot(c, c, {partition: gone})
        return found.tolist()
