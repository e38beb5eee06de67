"""JIT-compiled loops behind the key-hash -> bucket cache.

Plain NumPy reached ~3M lookups/s on a 10M-key map here (docs/assigner-cache.md); these
loops reach the issue's >= 10M/s. They work on *cache keys*: 64-bit key hashes as uint64
with the sign bit flipped (see ``keys.to_cache_keys``), so that a column sorted as signed
int64 (Spark's LongType order) is already sorted as uint64.

Dependent cache misses cost ~400 ns on these VMs while independent ones overlap (~40M/s),
so lookups run in passes over the whole batch, each pass issuing independent loads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Bucket value marking an empty slot of a pending table; bucket ids stay below it.
EMPTY = np.uint16(0xFFFF)


@njit(cache=True, nogil=True)
def build_directory(keys, shift, segments):
    """Offsets of the first key of each top-bits segment of sorted ``keys`` (+ end)."""
    directory = np.zeros(segments + 1, dtype=np.int32)
    for k in keys:
        directory[(k >> shift) + 1] += 1
    for i in range(segments):
        directory[i + 1] += directory[i]
    return directory


@njit(cache=True, nogil=True)
def sorted_lookup(keys, buckets, directory, shift, queries, out):
    """Writes the bucket of each query found in the sorted run into ``out``; returns hits.

    Entries of ``out`` for queries not found are left as they were.
    """
    m = queries.shape[0]
    pos = np.empty(m, dtype=np.int64)
    end = np.empty(m, dtype=np.int64)
    # Pass 1: the segment of each query (independent loads from the directory).
    for i in range(m):
        s = queries[i] >> shift
        pos[i] = directory[s]
        end[i] = directory[s + 1]
    # Pass 2: scan the segment (about four keys, one or two cache lines).
    for i in range(m):
        q = queries[i]
        p = -1
        for j in range(pos[i], end[i]):
            if keys[j] >= q:
                if keys[j] == q:
                    p = j
                break
        pos[i] = p
    # Pass 3: gather the buckets.
    hits = 0
    for i in range(m):
        p = pos[i]
        if p >= 0:
            out[i] = buckets[p]
            hits += 1
    return hits


@njit(cache=True, nogil=True)
def merge_sorted(ak, ab, bk, bb, ok, ob):
    """Merges two sorted runs (keys, buckets) into preallocated ``ok``/``ob``."""
    i = 0
    j = 0
    o = 0
    na = ak.shape[0]
    nb = bk.shape[0]
    while i < na and j < nb:
        if ak[i] <= bk[j]:
            ok[o] = ak[i]
            ob[o] = ab[i]
            i += 1
        else:
            ok[o] = bk[j]
            ob[o] = bb[j]
            j += 1
        o += 1
    while i < na:
        ok[o] = ak[i]
        ob[o] = ab[i]
        i += 1
        o += 1
    while j < nb:
        ok[o] = bk[j]
        ob[o] = bb[j]
        j += 1
        o += 1


@njit(cache=True, nogil=True)
def table_insert(tkeys, tbuckets, shift, keys, buckets):
    """Inserts (key, bucket) pairs into an open-addressing table; returns new entries.

    Linear probing from the key's top bits (low bits are not uniform: every key a slot holds
    has the same hash residue mod the slot count). An existing key keeps its bucket.
    """
    mask = tkeys.shape[0] - 1
    added = 0
    for i in range(keys.shape[0]):
        k = keys[i]
        p = np.int64(k >> shift)
        while True:
            if tbuckets[p] == EMPTY:
                tkeys[p] = k
                tbuckets[p] = buckets[i]
                added += 1
                break
            if tkeys[p] == k:
                break
            p = (p + 1) & mask
    return added


@njit(cache=True, nogil=True)
def table_lookup(tkeys, tbuckets, shift, queries, out):
    """Writes the bucket of each query found in the table into ``out``; returns hits."""
    mask = tkeys.shape[0] - 1
    hits = 0
    for i in range(queries.shape[0]):
        q = queries[i]
        p = np.int64(q >> shift)
        while tbuckets[p] != EMPTY:
            if tkeys[p] == q:
                out[i] = tbuckets[p]
                hits += 1
                break
            p = (p + 1) & mask
    return hits


@njit(cache=True, nogil=True)
def fill_first(capacity, demand):
    """How many of ``demand`` new keys each bucket takes, in order, up to its capacity."""
    take = np.zeros(capacity.shape[0], dtype=np.int64)
    left = demand
    for i in range(capacity.shape[0]):
        if left <= 0:
            break
        t = min(capacity[i], left)
        if t > 0:
            take[i] = t
            left -= t
    return take
