"""Compact maps from cache key (uint64) to bucket id (uint16).

Two shapes, one job each:

* :class:`SortedRun`: immutable, sorted keys + buckets + a top-bits directory; a large run
  keeps of each key only the bits below the directory's (6-7 bytes with the bucket, plus
  1-2 of directory: about 8.3 at 100M keys; a run under ~130k keys: 10 plus the
  directory); this holds the committed mappings.
* :class:`PendingTable`: an open-addressing hash table for the mappings one checkpoint
  creates. O(1) inserts however many batches a checkpoint brings; merged into the run when
  the checkpoint commits, dropped whole when it aborts.

Beside them, the two helpers a cache's owners share: :func:`to_cache_keys` (a key's
signed 64-bit hash as its cache key) and :func:`release_unused_memory`, which hands back
what a bootstrap freed. A bootstrap reads index files (Arrow buffers) and merges sorted
parts (numpy arrays of a few megabytes each, which glibc serves from its heap once its
mmap threshold has grown past them); freed, both stay resident unless handed back, and a
slot's resident size per key is what a cluster pays for.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections import deque
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from dynbucket.actors import kernels

U64 = npt.NDArray[np.uint64]
U16 = npt.NDArray[np.uint16]
I32 = npt.NDArray[np.int32]

#: ``out`` value of a lookup that found nothing.
MISSING = -1
#: Keys per directory segment, at least: a segment is one cache line to scan, and the
#: directory costs 1-2 bytes per key (6-10 for the key and bucket: <= 12 in all).
_KEYS_PER_SEGMENT = 2


_SIGN = np.uint64(1 << 63)


def to_cache_keys(hashes: npt.NDArray[np.int64]) -> U64:
    """Maps signed hashes to uint64 preserving order (flip the sign bit).

    An RLI column sorted by signed hash is then a sorted cache run with no re-sort.
    """
    return np.ascontiguousarray(hashes).view(np.uint64) ^ _SIGN


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def release_unused_memory() -> None:
    """Hands free memory back to the system: Arrow's pool, and the C heap's free pages
    (glibc's ``malloc_trim``; elsewhere a no-op)."""
    pa.default_memory_pool().release_unused()
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None) if libc is not None else None
    if trim is not None:
        trim(0)


def _directory_bits(n: int) -> int:
    # The largest power of two strictly below n / 2 segments (with the end entry, the
    # directory stays <= 2 bytes per key); at least 1 bit: a shift by 64 is undefined.
    return max(1, int(np.ceil(np.log2(max(n, 4) / _KEYS_PER_SEGMENT))) - 1)


#: Directory bits from which a run keeps only the bits below them of each key (the
#: directory holds the top ones): about 130k keys on.
_COMPACT_BITS = 16


class SortedRun:
    """An immutable sorted map cache key -> bucket with a directory on the key's top bits.

    A large run keeps of each key only the bits below the directory's (the directory says
    the top ones): the low 32 bits (uint32) and those between (uint8 when the directory
    has 24 bits or more, about 33M keys on, else uint16), 5-6 bytes a key instead of 8,
    so that a slot of 100M keys stays within 12 bytes a key for its whole process."""

    __slots__ = ("_keys", "_lo", "_mid", "buckets", "_directory", "_shift", "_n")

    def __init__(self, keys: U64, buckets: U16) -> None:
        """Wraps sorted, unique ``keys`` (not kept when compacted) and their ``buckets``."""
        if keys.dtype != np.uint64 or buckets.dtype != np.uint16 or keys.shape != buckets.shape:
            raise TypeError("SortedRun needs uint64 keys and uint16 buckets of equal length")
        self.buckets = buckets
        self._n = len(keys)
        bits = _directory_bits(len(keys))
        self._shift = np.uint64(64 - bits)
        self._directory = kernels.build_directory(keys, self._shift, 1 << bits)
        self._keys: U64 | None = keys
        self._lo: npt.NDArray[np.uint32] | None = None
        self._mid: npt.NDArray[np.unsignedinteger] | None = None
        if bits >= _COMPACT_BITS:
            self._lo = (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32)
            mid = np.uint8 if 64 - bits <= 40 else np.uint16
            below = np.uint64((1 << (32 - bits)) - 1)
            self._mid = ((keys >> np.uint64(32)) & below).astype(mid)
            self._keys = None

    @property
    def keys(self) -> U64:
        """The sorted keys (rebuilt from their parts when the run is compacted)."""
        if self._keys is not None:
            return self._keys
        assert self._lo is not None and self._mid is not None
        segments = np.arange(len(self._directory) - 1, dtype=np.uint64)
        top = np.repeat(segments << self._shift, np.diff(self._directory))
        mid = self._mid.astype(np.uint64)
        return top | (mid << np.uint64(32)) | self._lo.astype(np.uint64)

    @classmethod
    def empty(cls) -> SortedRun:
        return cls(np.empty(0, np.uint64), np.empty(0, np.uint16))

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        parts = [self._keys, self._lo, self._mid, self.buckets, self._directory]
        return int(sum(p.nbytes for p in parts if p is not None))

    def lookup(self, queries: U64, out: I32) -> int:
        """Sets ``out[i]`` to the bucket of ``queries[i]`` where present; returns hits."""
        if self._n == 0:
            return 0
        if self._keys is None:
            return int(
                kernels.compact_lookup(
                    self._lo, self._mid, self.buckets, self._directory, self._shift, queries, out
                )
            )
        return int(
            kernels.sorted_lookup(
                self._keys, self.buckets, self._directory, self._shift, queries, out
            )
        )

    @classmethod
    def union(cls, parts: list[tuple[U64, U16]]) -> SortedRun:
        """One run of disjoint sorted parts (keys, buckets), merged in pairs, round by round:
        ``n log k`` for ``k`` parts of ``n`` keys in all, where merging each part into the
        growing run would cost ``n k``."""
        return cls(*union_arrays(parts))

    def merged(self, keys: U64, buckets: U16) -> SortedRun:
        """A new run holding this run's entries and the sorted ``keys`` (not in this run)."""
        if len(keys) == 0:
            return self
        mine = self.keys
        out_keys = np.empty(len(mine) + len(keys), np.uint64)
        out_buckets = np.empty(len(out_keys), np.uint16)
        kernels.merge_sorted(mine, self.buckets, keys, buckets, out_keys, out_buckets)
        del mine
        return SortedRun(out_keys, out_buckets)

    def without(self, keys: U64) -> tuple[SortedRun, U16]:
        """A new run without the sorted, unique ``keys`` (those absent are ignored), and the
        buckets of the entries it dropped."""
        if len(keys) == 0 or self._n == 0:
            return self, np.empty(0, np.uint16)
        found = np.full(len(keys), MISSING, np.int32)
        if self.lookup(keys, found) == 0:  # most calls: none held, nothing rebuilt
            return self, np.empty(0, np.uint16)
        mine = self.keys
        at = np.searchsorted(mine, keys[found >= 0])
        dropped = self.buckets[at]
        return SortedRun(np.delete(mine, at), np.delete(self.buckets, at)), dropped


def union_arrays(parts: list[tuple[U64, U16]]) -> tuple[U64, U16]:
    """The keys and buckets of disjoint sorted parts as one sorted pair (``SortedRun.union``
    without building a run): the two oldest parts merged at a time, the result queued last
    (``n log k``), each pair given up as soon as it is merged (the peak is the parts and
    one merge's output, not twice the parts). Empties ``parts``: the caller's list must
    not hold them either."""
    queue = deque(p for p in parts if len(p[0]))
    parts.clear()
    while len(queue) > 1:
        ka, ba = queue.popleft()
        kb, bb = queue.popleft()
        keys = np.empty(len(ka) + len(kb), np.uint64)
        buckets = np.empty(len(keys), np.uint16)
        kernels.merge_sorted(ka, ba, kb, bb, keys, buckets)
        del ka, ba, kb, bb
        queue.append((keys, buckets))
    return queue.pop() if queue else (np.empty(0, np.uint64), np.empty(0, np.uint16))


def settled(run: SortedRun, recent: SortedRun, share: float) -> tuple[SortedRun, SortedRun]:
    """LSM step of two committed runs: ``recent`` merges into ``run`` once it outgrows
    ``share`` of it (so a commit costs O(recent), not O(run))."""
    if len(recent) <= share * len(run):
        return run, recent
    merged = run.merged(recent.keys, recent.buckets) if len(run) else recent
    return merged, SortedRun.empty()


class PendingTable:
    """A growable open-addressing hash table cache key -> bucket (load factor <= 1/2)."""

    __slots__ = ("_keys", "_buckets", "_shift", "_size")

    _MIN_BITS = 10

    def __init__(self, expected: int = 0) -> None:
        bits = max(self._MIN_BITS, int(np.ceil(np.log2(max(2 * expected, 2)))))
        self._alloc(bits)
        self._size = 0

    def _alloc(self, bits: int) -> None:
        self._keys = np.zeros(1 << bits, np.uint64)
        self._buckets = np.full(1 << bits, kernels.EMPTY, np.uint16)
        self._shift = np.uint64(64 - bits)

    def __len__(self) -> int:
        return self._size

    @property
    def nbytes(self) -> int:
        return int(self._keys.nbytes + self._buckets.nbytes)

    def insert(self, keys: U64, buckets: U16) -> int:
        """Adds the pairs; a key already present keeps its bucket. Returns entries added."""
        need = self._size + len(keys)
        if 2 * need > len(self._keys):
            self._grow(need)
        added = int(kernels.table_insert(self._keys, self._buckets, self._shift, keys, buckets))
        self._size += added
        return added

    def lookup(self, queries: U64, out: I32) -> int:
        """Sets ``out[i]`` to the bucket of ``queries[i]`` where present; returns hits."""
        if self._size == 0:
            return 0
        return int(kernels.table_lookup(self._keys, self._buckets, self._shift, queries, out))

    def assign(self, keys: U64, choose: Callable[[int], U16]) -> tuple[I32, int]:
        """Buckets for ``keys``: a key already here keeps its bucket; the distinct new ones
        get ``choose(count)``, in the order they first appear. One pass over the keys.

        Returns (bucket per key, number of distinct new keys).
        """
        return self.assign_by_row(keys, lambda first: choose(len(first)))

    def assign_by_row(
        self, keys: U64, choose: Callable[[npt.NDArray[np.int64]], U16]
    ) -> tuple[I32, int]:
        """:meth:`assign`, ``choose`` given the position in ``keys`` of each distinct new
        key's first row, in the order they first appear."""
        if 2 * (self._size + len(keys)) > len(self._keys):
            self._grow(self._size + len(keys))
        found = np.empty(len(keys), np.int32)
        ordinal = np.empty(len(keys), np.int64)
        slots = np.empty(len(keys), np.int64)
        fresh = int(
            kernels.table_reserve(
                self._keys, self._buckets, self._shift, keys, found, ordinal, slots
            )
        )
        new = ordinal >= 0
        rows = np.flatnonzero(new)
        first = np.empty(fresh, np.int64)
        first[ordinal[rows][::-1]] = rows[::-1]  # the last write of each is its first row
        chosen = choose(first)
        kernels.table_fill(self._buckets, slots[:fresh], chosen)
        self._size += fresh
        found[new] = chosen[ordinal[new]]
        return found, fresh

    def sorted_items(self) -> tuple[U64, U16]:
        """All entries, sorted by key (in O(n): slot order is nearly key order)."""
        keys = np.empty(self._size, np.uint64)
        buckets = np.empty(self._size, np.uint16)
        if kernels.table_sorted(
            self._keys, self._buckets, self._shift, keys, buckets, 8 * self._size + 64
        ):
            return keys, buckets
        order = np.argsort(keys)  # far from sorted (not expected of hashed keys)
        return keys[order], buckets[order]

    def _grow(self, need: int) -> None:
        used = self._buckets != kernels.EMPTY
        keys, buckets = self._keys[used], self._buckets[used]
        self._alloc(int(np.ceil(np.log2(2 * need))) + 1)
        kernels.table_insert(self._keys, self._buckets, self._shift, keys, buckets)
