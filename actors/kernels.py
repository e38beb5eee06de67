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

from dynbucket.base.columns import MAX_BUCKET_ID

#: Bucket value marking an empty slot of a pending table; bucket ids stay below it.
EMPTY = np.uint16(0xFFFF)
#: Bucket value of a slot claimed by ``table_reserve`` and not yet filled; bucket ids stay
#: below it (``MAX_BUCKET_ID``: the cache keeps them in 16 bits).
RESERVED = np.uint16(MAX_BUCKET_ID + 1)


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
def compact_lookup(lo, mid, buckets, directory, shift, queries, out):
    """``sorted_lookup`` over keys stored without their top bits (the directory's): the
    low 32 bits in ``lo`` and the bits between in ``mid``; returns hits."""
    m = queries.shape[0]
    mask = (np.uint64(1) << shift) - np.uint64(1)
    pos = np.empty(m, dtype=np.int64)
    end = np.empty(m, dtype=np.int64)
    for i in range(m):
        s = queries[i] >> shift
        pos[i] = directory[s]
        end[i] = directory[s + 1]
    for i in range(m):
        q = queries[i] & mask
        p = -1
        for j in range(pos[i], end[i]):
            k = (np.uint64(mid[j]) << np.uint64(32)) | np.uint64(lo[j])
            if k >= q:
                if k == q:
                    p = j
                break
        pos[i] = p
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
def table_reserve(tkeys, tbuckets, shift, keys, found, ordinal, slots):
    """One pass over keys unknown elsewhere: a key in the table sets ``found[i]`` to its
    bucket; an absent key claims a slot (``RESERVED``) and gets ``ordinal[i]``, the index of
    its distinct new key (a repeated key gets the same one), whose slot goes to ``slots``.
    Returns the number of distinct new keys."""
    mask = tkeys.shape[0] - 1
    fresh = 0
    # slot -> ordinal, built only when a key repeats within the call (rare: batches are
    # deduplicated upstream).
    ordinal_of = np.empty(0, np.int64)
    for i in range(keys.shape[0]):
        k = keys[i]
        p = np.int64(k >> shift)
        found[i] = -1
        ordinal[i] = -1
        while True:
            b = tbuckets[p]
            if b == EMPTY:
                tkeys[p] = k
                tbuckets[p] = RESERVED
                slots[fresh] = p
                if ordinal_of.shape[0]:
                    ordinal_of[p] = fresh
                ordinal[i] = fresh
                fresh += 1
                break
            if tkeys[p] == k:
                if b == RESERVED:
                    if ordinal_of.shape[0] == 0:
                        ordinal_of = np.full(tkeys.shape[0], -1, np.int64)
                        for j in range(fresh):
                            ordinal_of[slots[j]] = j
                    ordinal[i] = ordinal_of[p]
                else:
                    found[i] = b
                break
            p = (p + 1) & mask
    return fresh


@njit(cache=True, nogil=True)
def table_fill(tbuckets, slots, buckets):
    """Gives the slots claimed by ``table_reserve`` their buckets."""
    for j in range(slots.shape[0]):
        tbuckets[slots[j]] = buckets[j]


@njit(cache=True, nogil=True)
def table_sorted(tkeys, tbuckets, shift, out_keys, out_buckets, max_moves):
    """Writes a table's entries into ``out_*`` sorted by key; returns False (and leaves the
    output unsorted) when that took more than ``max_moves`` element moves.

    Slots follow the keys' top bits, so slot order is nearly key order: entries that wrapped
    past the table's end go last, then an insertion sort fixes the order within clusters.
    """
    size = tkeys.shape[0]
    n = 0
    for p in range(size):  # entries at or after their home slot, in slot order
        if tbuckets[p] != EMPTY and np.int64(tkeys[p] >> shift) <= p:
            out_keys[n] = tkeys[p]
            out_buckets[n] = tbuckets[p]
            n += 1
    for p in range(size):  # wrapped entries: their home is past their slot
        if tbuckets[p] != EMPTY and np.int64(tkeys[p] >> shift) > p:
            out_keys[n] = tkeys[p]
            out_buckets[n] = tbuckets[p]
            n += 1
    moves = 0
    for i in range(1, n):
        k = out_keys[i]
        b = out_buckets[i]
        j = i - 1
        while j >= 0 and out_keys[j] > k:
            out_keys[j + 1] = out_keys[j]
            out_buckets[j + 1] = out_buckets[j]
            j -= 1
            moves += 1
        out_keys[j + 1] = k
        out_buckets[j + 1] = b
        if moves > max_moves:
            return False
    return True


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


def warm_up() -> None:
    """Compiles (or loads from the on-disk cache) every kernel, so that a new process's first
    real batch does not pay for it."""
    keys = np.array([1, 5, 9], np.uint64)
    buckets = np.array([0, 1, 2], np.uint16)
    directory = build_directory(keys, np.uint64(63), 2)
    out = np.full(3, -1, np.int32)
    sorted_lookup(keys, buckets, directory, np.uint64(63), keys, out)
    for mid in (np.zeros(3, np.uint8), np.zeros(3, np.uint16)):
        lo = keys.astype(np.uint32)
        compact_lookup(lo, mid, buckets, directory, np.uint64(63), keys, out)
    merge_sorted(keys, buckets, keys, buckets, np.empty(6, np.uint64), np.empty(6, np.uint16))
    table_keys = np.zeros(8, np.uint64)
    table_buckets = np.full(8, EMPTY, np.uint16)
    table_insert(table_keys, table_buckets, np.uint64(61), keys, buckets)
    table_lookup(table_keys, table_buckets, np.uint64(61), keys, out)
    table_sorted(
        table_keys,
        table_buckets,
        np.uint64(61),
        np.empty(3, np.uint64),
        np.empty(3, np.uint16),
        100,
    )
    fill_first(np.array([1, 2], np.int64), 2)
    found = np.empty(3, np.int32)
    ordinal = np.empty(3, np.int64)
    slots = np.empty(3, np.int64)
    table_keys[:] = 0
    table_buckets[:] = EMPTY
    n = table_reserve(table_keys, table_buckets, np.uint64(61), keys, found, ordinal, slots)
    table_fill(table_buckets, slots[:n], buckets[:n])
