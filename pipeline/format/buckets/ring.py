"""A partition's consistent-hashing ring: ranges of a 32-bit hash, each one bucket.

The ring position of a key is the low 32 bits of its ``xxhash64`` (the ``_hash`` every
write computes). Ranges are ``[start, end)``; the last ends at ``2**32``. A split halves a
range at its midpoint: the left half keeps the bucket (and its file group), the right half
is a new bucket. A merge joins a range with the next one: the left bucket takes both, the
right bucket is retired. Bucket ids are never reused (``next_bucket`` only grows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

SPAN = 1 << 32


def positions(hashes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Ring positions of keys from their ``xxhash64``."""
    return hashes.astype(np.int64) & np.int64(SPAN - 1)


@dataclass(frozen=True)
class Ring:
    """Ranges ``[ends[i-1], ends[i])`` (the first from 0) and their buckets."""

    ends: tuple[int, ...]
    buckets: tuple[int, ...]
    next_bucket: int

    @classmethod
    def initial(cls, n: int) -> Ring:
        """``n`` ranges of equal width, buckets 0..n-1."""
        return cls(tuple((i + 1) * SPAN // n for i in range(n)), tuple(range(n)), n)

    def __post_init__(self) -> None:
        assert len(self.ends) == len(self.buckets) and self.ends[-1] == SPAN
        assert all(a < b for a, b in zip(self.ends, self.ends[1:], strict=False))

    def locate(self, hashes: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
        """The bucket of each key hash (``xxhash64``)."""
        at = np.searchsorted(np.asarray(self.ends, np.int64), positions(hashes), side="right")
        return np.asarray(self.buckets, np.int32)[at]

    def range_of(self, bucket: int) -> tuple[int, int]:
        i = self.buckets.index(bucket)
        return (self.ends[i - 1] if i else 0), self.ends[i]

    def split(self, bucket: int) -> Ring:
        """The ring with ``bucket``'s range halved: the upper half a new bucket."""
        i = self.buckets.index(bucket)
        start, end = self.range_of(bucket)
        if end - start < 2:
            return self
        mid = (start + end) // 2
        return Ring(
            self.ends[:i] + (mid,) + self.ends[i:],
            self.buckets[: i + 1] + (self.next_bucket,) + self.buckets[i + 1 :],
            self.next_bucket + 1,
        )

    def merge(self, bucket: int) -> Ring:
        """The ring with ``bucket``'s range joined with the next range (whose bucket is
        retired)."""
        i = self.buckets.index(bucket)
        assert i + 1 < len(self.buckets), "the last range has no next range"
        return Ring(
            self.ends[:i] + self.ends[i + 1 :],
            self.buckets[: i + 1] + self.buckets[i + 2 :],
            self.next_bucket,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ends": list(self.ends),
            "buckets": list(self.buckets),
            "next-bucket": self.next_bucket,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Ring:
        return cls(tuple(doc["ends"]), tuple(doc["buckets"]), int(doc["next-bucket"]))


def plan_rebalance(
    ring: Ring, hashes: dict[int, npt.NDArray[np.int64]], max_keys: int, min_keys: int
) -> Ring:
    """The ring after one rebalance, from each bucket's key hashes.

    1. Split every bucket over ``max_keys`` at its range's midpoint, and each half again
       while it is over (a range of width 1 cannot split).
    2. Walk the ranges in order: a range and the next, both under ``min_keys`` and together
       at most ``max_keys``, merge; the walk goes on after the merged range.
    """
    counts = {b: len(h) for b, h in hashes.items()}
    pos = {b: positions(h) for b, h in hashes.items()}
    # 1.
    todo = [b for b in ring.buckets if counts.get(b, 0) > max_keys]
    while todo:
        bucket = todo.pop()
        split = ring.split(bucket)
        if split is ring:
            continue
        ring, new = split, split.next_bucket - 1
        _, mid = ring.range_of(bucket)
        keys = pos[bucket]
        pos[bucket], pos[new] = keys[keys < mid], keys[keys >= mid]
        counts[bucket], counts[new] = len(pos[bucket]), len(pos[new])
        todo += [b for b in (bucket, new) if counts[b] > max_keys]
    # 2.
    i = 0
    while i + 1 < len(ring.buckets):
        left, right = ring.buckets[i], ring.buckets[i + 1]
        a, b = counts.get(left, 0), counts.get(right, 0)
        if a < min_keys and b < min_keys and a + b <= max_keys:
            ring = ring.merge(left)
            counts[left] = a + b
        i += 1
    return ring


def changed(before: Ring, after: Ring) -> Sequence[int]:
    """Buckets whose range differs between two rings (of either)."""
    old = {b: before.range_of(b) for b in before.buckets}
    new = {b: after.range_of(b) for b in after.buckets}
    return sorted(b for b in old.keys() | new.keys() if old.get(b) != new.get(b))
