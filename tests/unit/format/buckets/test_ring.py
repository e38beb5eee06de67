"""The consistent-hashing ring: exact ranges and buckets after splits and merges."""

from __future__ import annotations

import numpy as np

from dynbucket.format.buckets.ring import SPAN, Ring, changed, plan_rebalance

Q = SPAN // 4


def test_initial_ring_and_lookup_by_the_low_32_bits() -> None:
    ring = Ring.initial(4)
    assert ring.ends == (Q, 2 * Q, 3 * Q, SPAN) and ring.buckets == (0, 1, 2, 3)
    hashes = np.array([0, Q - 1, Q, 3 * Q + 5, -1, (7 << 32) + Q], np.int64)
    assert ring.locate(hashes).tolist() == [0, 0, 1, 3, 3, 1]


def test_a_split_and_a_merge_give_exact_ranges() -> None:
    ring = Ring.initial(2).split(0)  # [0, Q) -> 0, [Q, 2Q) -> 2 (new), [2Q, 4Q) -> 1
    assert (ring.ends, ring.buckets, ring.next_bucket) == ((Q, 2 * Q, SPAN), (0, 2, 1), 3)
    merged = ring.merge(2)  # 2 takes 1's range; 1 is retired, its id never reused
    assert (merged.ends, merged.buckets, merged.next_bucket) == ((Q, SPAN), (0, 2), 3)
    assert merged.split(2).buckets == (0, 2, 3)
    assert changed(ring, merged) == [1, 2]


def test_plan_splits_until_under_max_and_merges_small_neighbours() -> None:
    ring = Ring.initial(4)
    e = Q // 8
    hashes = {
        0: np.array(
            [1, 2, 3, e + 1, e + 2, e + 3, e + e // 2 + 1, e + e // 2 + 2, e + e // 2 + 3], np.int64
        ),  # 9 keys in [0, Q/4)
        1: np.array([Q + 5], np.int64),
        2: np.array([2 * Q + 5], np.int64),
        3: np.array([3 * Q + 1, 3 * Q + 2, 3 * Q + 3, 3 * Q + 4], np.int64),
    }
    new = plan_rebalance(ring, hashes, max_keys=5, min_keys=2)
    # 0 splits at Q/2, Q/4, Q/8 and 3Q/16 (3 keys a range); the two empty ranges [Q/4, Q/2)
    # and [Q/2, Q) merge, then 1 and 2 (one key each); 3 (4 keys) stays.
    assert new.ends == (e, e + e // 2, 2 * e, Q, 3 * Q, SPAN)
    assert new.buckets[0] == 0 and new.buckets[-2:] == (1, 3)
    located = new.locate(np.concatenate(list(hashes.values())))
    assert sorted(np.bincount(located)[list(new.buckets)].tolist()) == [0, 2, 3, 3, 3, 4]
