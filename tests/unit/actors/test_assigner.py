"""Scenario tests of the assigner core with exact bucket ids (invariants I1, I3, I4, I7, I8).

Key hashes are small integers, so slot = hash mod N can be read off the test.
"""

from __future__ import annotations

import numpy as np
import pytest

from dynbucket.actors import BucketAssigner, DynamicBucketIndex
from dynbucket.base.errors import (
    AssignerError,
    AssignerRestartedError,
    BucketSpaceExhaustedError,
)
from tests.unit.actors.memory_source import Driver, MemoryRLI

CAP3 = DynamicBucketIndex(max_keys_per_bucket=3)


def test_fill_first_then_new_bucket_only_when_all_full() -> None:
    d = Driver(MemoryRLI(), 1, CAP3)
    assert d.write("p", [10, 11, 12, 13]) == [0, 0, 0, 1]
    # Bucket 1 has room for two more: it takes them before any bucket opens.
    assert d.write("p", [14, 15]) == [1, 1]
    # Every bucket is full now: only then is bucket 2 created.
    assert d.write("p", [16]) == [2]


def test_known_keys_keep_their_bucket_across_batches() -> None:
    d = Driver(MemoryRLI(), 1, CAP3)
    first = d.write("p", [1, 2, 3, 4, 5])
    assert first == [0, 0, 0, 1, 1]
    # Updates of old keys mixed with new ones: old keys keep their bucket (I1).
    assert d.write("p", [5, 1, 6, 7, 3]) == [1, 0, 1, 2, 0]


def test_partitions_are_independent() -> None:
    d = Driver(MemoryRLI(), 1, CAP3)
    assert d.write("a", [1, 2, 3, 4]) == [0, 0, 0, 1]
    assert d.write("b", [1, 2]) == [0, 0]


@pytest.mark.parametrize(
    ("num_slots", "expected"),
    [
        # Capacity 2: every slot may fill every bucket, its share of each being
        # 2 // N, plus one for the slots i with (i - b) mod N < 2 mod N.
        (1, {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3}),
        # N=2: one key of each bucket per slot; slot 0 holds the even keys, slot 1 the odd.
        (2, {0: 0, 2: 1, 4: 2, 6: 3, 1: 0, 3: 1, 5: 2, 7: 3}),
        # N=4: bucket b has room for slots b and b + 1 (mod 4): slot 0 fills 0, 3, 4;
        # slot 1 fills 0, 1, 4; slot 2 fills 1, 2; slot 3 fills 2, 3. Ten keys, five buckets.
        (4, {0: 0, 4: 3, 8: 4, 1: 0, 5: 1, 9: 4, 2: 1, 6: 2, 3: 2, 7: 3}),
    ],
)
def test_slots_share_buckets_filled_in_id_order(num_slots: int, expected: dict[int, int]) -> None:
    d = Driver(MemoryRLI(), num_slots, DynamicBucketIndex(max_keys_per_bucket=2))
    hashes = sorted(expected)
    assert dict(zip(hashes, d.write("p", hashes), strict=True)) == expected


@pytest.mark.parametrize("num_slots", [1, 2, 3, 8])
def test_a_small_partition_fills_one_bucket_whatever_the_slot_count(num_slots: int) -> None:
    d = Driver(MemoryRLI(), num_slots, DynamicBucketIndex(max_keys_per_bucket=100))
    for start in (0, 20, 40):
        assert set(d.write("p", list(range(start, start + 20)))) == {0}
    # 100 keys fill bucket 0 exactly (each slot its share), the 101st opens bucket 1.
    buckets = d.write("p", list(range(60, 101)))
    assert buckets.count(0) == 40 and buckets.count(1) == 1


def test_a_slot_with_more_keys_than_its_share_goes_on_and_the_next_instant_evens_out() -> None:
    d = Driver(MemoryRLI(), 2, DynamicBucketIndex(max_keys_per_bucket=4))
    # Slot 0 (even keys) brings 4 new keys, slot 1 one: each may add 2 to bucket 0, so slot
    # 0 goes on to bucket 1; bucket 0 keeps room for one key, which nobody took.
    assert d.write("p", [0, 2, 4, 6, 1]) == [0, 0, 1, 1, 0]
    # The next instant splits what the commit left: bucket 0's room of 1 goes to slot 0 (the
    # remainder rotates with the id: (0 - 0) mod 2 < 1), bucket 1's room of 2 to both.
    assert d.write("p", [8, 10, 3, 5]) == [0, 1, 1, 2]
    counts: dict[int, int] = {}
    for b in d.rli.entries["p"].values():
        counts[b] = counts.get(b, 0) + 1
    assert counts == {0: 4, 1: 4, 2: 1}


@pytest.mark.parametrize("totals", [True, False])
def test_a_snapshot_without_every_slots_keys_makes_the_next_begin_bootstrap(totals: bool) -> None:
    rli = MemoryRLI()
    d = Driver(rli, 2, DynamicBucketIndex(max_keys_per_bucket=4))
    # Instant 1 commits 0, 2 (slot 0) and 1 (slot 1) into bucket 0, but its snapshot comes
    # without (or with) the slots' new keys: slot 0 knows its two keys, not slot 1's.
    buckets, _ = d.assign_open(1, "p", [0, 2, 1])
    assert buckets == [0, 0, 0]
    rli.entries["p"] = {0: 0, 2: 0, 1: 0}
    for a in d.slots:
        a.snapshot(1, 1, {"p": {0: 3}} if totals else None)
    d.latest = d.checkpoint = 1
    loads = rli.loaded
    # Instant 2: bucket 0's room of one goes to slot 0 ((0 - 0) mod 2 < 1), so slot 1's key
    # opens bucket 1. Had slot 1 kept counting bucket 0 as holding its one key, it would
    # have put 3 there too: five keys in a bucket of four.
    assert d.write("p", [4, 3]) == [0, 1]
    assert rli.loaded == loads + (0 if totals else 2)  # without them, both slots bootstrap
    assert max(list(rli.entries["p"].values()).count(b) for b in (0, 1)) <= 4


def test_slot_count_change_2_3_2_keeps_buckets_and_capacity() -> None:
    rli = MemoryRLI()
    cap = DynamicBucketIndex(max_keys_per_bucket=2)
    two = Driver(rli, 2, cap)
    b1 = dict(zip(range(8), two.write("p", list(range(8))), strict=True))
    # N=2, capacity 2: one key of each slot per bucket.
    assert b1 == {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3}

    three = Driver(rli, 3, cap)  # fresh actors: they bootstrap from the RLI
    three.latest = three.checkpoint = two.checkpoint
    keys2 = list(range(8)) + [8, 9, 10, 11, 12, 13]
    b2 = dict(zip(keys2, three.write("p", keys2), strict=True))
    assert {k: b2[k] for k in range(8)} == b1  # I1 across the change
    # Buckets 0-3 are full (counts of every slot, from the index). New ids 4, 5, 6: bucket b
    # has room for slots b + 1 and b + 2 (mod 3), one key each. Slot 0 (9, 12) fills 5, 6;
    # slot 1 (10, 13) fills 4, 6; slot 2 (8, 11) fills 4, 5.
    assert {k: b2[k] for k in (8, 9, 10, 11, 12, 13)} == {
        9: 5,
        12: 6,
        10: 4,
        13: 6,
        8: 4,
        11: 5,
    }
    buckets_per_id: dict[int, int] = {}
    for b in rli.entries["p"].values():
        buckets_per_id[b] = buckets_per_id.get(b, 0) + 1
    assert max(buckets_per_id.values()) <= 2  # capacity held with counts of every slot

    back = Driver(rli, 2, cap)
    back.latest = back.checkpoint = three.checkpoint
    keys3 = keys2 + [14, 15]
    b3 = dict(zip(keys3, back.write("p", keys3), strict=True))
    assert {k: b3[k] for k in keys2} == b2
    # Ids 0-6 are full: 14 (slot 0) and 15 (slot 1) share bucket 7.
    assert (b3[14], b3[15]) == (7, 7)


def test_a_delete_gives_its_room_back_and_a_returning_key_is_new() -> None:
    d = Driver(MemoryRLI(), 1, CAP3)
    assert d.write("p", [1, 2, 3, 4]) == [0, 0, 0, 1]
    # 2 and 4 leave; 9 is not in the table.
    assert d.delete("p", [2, 4, 9]) == [0, 1, -1]
    # Bucket 0 has room for one key again: 5 takes it before bucket 1 (now empty) fills;
    # 2 comes back as a new key, after 5, into bucket 1; 1 keeps bucket 0 (I1).
    buckets, is_new = d.assign_open(3, "p", [5, 2, 1, 6])
    assert buckets == [0, 1, 0, 1] and is_new == [True, True, False, True]
    d.commit(3, "p", [5, 2, 1, 6], buckets)
    # Deleted again: not found twice; a second delete of it finds nothing.
    assert d.delete("p", [6, 6]) == [1, 1]
    assert d.delete("p", [6]) == [-1]


@pytest.mark.parametrize("num_slots", [1, 2, 3])
def test_deletes_free_room_in_every_slot_and_no_bucket_opens(num_slots: int) -> None:
    d = Driver(MemoryRLI(), num_slots, DynamicBucketIndex(max_keys_per_bucket=10))
    assert set(d.write("p", list(range(30)))) == {0, 1, 2}
    d.delete("p", list(range(0, 30, 3)))  # ten keys, a third of each bucket
    # Ten new keys fill the freed room: with one slot exactly, with more each slot its
    # share of it (a slot given more new keys than its shares opens one bucket more).
    new = d.write("p", list(range(100, 110)))
    assert set(new) == {0, 1, 2} if num_slots == 1 else max(new) <= 2 + num_slots - 1
    counts = np.bincount(list(d.rli.entries["p"].values()))
    assert counts.max() <= 10 and counts.sum() == 30


@pytest.mark.parametrize("budget", [None, 1 << 30])
def test_a_committed_delete_leaves_the_cache_it_is_kept_in(budget: int | None) -> None:
    """Without a cache budget the proposal's flags evict a partition a delete alone
    touched (it bootstraps again); with one, the keys leave the cache and the counts."""
    options = DynamicBucketIndex(max_keys_per_bucket=3, cache_max_bytes=budget)
    d = Driver(MemoryRLI(), 1, options)
    d.write("p", [1, 2, 3, 4])
    d.delete("p", [2, 4])
    index = d.slots[0].partitions.get("p")
    if budget is None:
        assert index is None
    else:
        assert index is not None and len(index) == 2 and not index.uncommitted
        assert index.committed_keys[:2].tolist() == [2, 0]
        assert index.bucket_keys[:2].tolist() == [2, 0]


def test_an_aborted_delete_keeps_its_keys() -> None:
    d = Driver(MemoryRLI(), 1, CAP3)
    assert d.write("p", [1, 2, 3]) == [0, 0, 0]
    assert d.delete("p", [2], commit=False) == [0]
    buckets, is_new = d.assign_open(3, "p", [2, 4])
    assert buckets == [0, 1] and is_new == [False, True]


def test_a_fresh_slot_counts_live_keys_from_the_index() -> None:
    rli = MemoryRLI()
    d = Driver(rli, 2, CAP3)
    d.write("p", [0, 1, 2, 3, 4, 5])
    d.delete("p", [0, 1])
    fresh = Driver(rli, 3, CAP3)  # bootstraps: bucket 0 holds one key of three
    fresh.latest = fresh.checkpoint = d.checkpoint
    assert fresh.write("p", [6, 7]) == [0, 0]


def test_locate_without_begin_means_the_actor_restarted() -> None:
    a = BucketAssigner(0, 1, CAP3, MemoryRLI())
    with pytest.raises(AssignerRestartedError, match="checkpoint 5"):
        a.locate(5, ["p"], np.zeros(1, np.int32), np.array([1], np.int64))


def test_abort_drops_exactly_the_aborted_mappings() -> None:
    rli = MemoryRLI()
    d = Driver(rli, 1, CAP3)
    assert d.write("p", [1, 2]) == [0, 0]
    # Instant 2 assigns 3 (room in bucket 0) and 4, 5, 6 (open bucket 1), then aborts.
    assert d.write("p", [3, 4, 5, 6], commit=False) == [0, 1, 1, 1]
    a = d.slots[0]
    index = a.partitions["p"]
    assert len(index) == 2 and list(index.bucket_keys[:2]) == [2, 0]
    # Bucket 1 is gone with the instant that made it; 1 and 2 are still known.
    buckets, is_new = d.assign_open(3, "p", [1, 4, 2])
    assert buckets == [0, 0, 0] and is_new == [False, True, False]


def test_reset_after_another_writer_sees_its_keys_and_buckets() -> None:
    rli = MemoryRLI()
    d = Driver(rli, 1, CAP3)
    assert d.write("p", [1, 2]) == [0, 0]
    # Another writer commits 3 into bucket 0 and 4, 5, 6 into bucket 1: the cache misses them.
    rli.entries["p"].update({3: 0, 4: 1, 5: 1, 6: 1})
    loads = rli.loaded
    assert d.slots[0].reset() == 1
    assert d.slots[0].partitions == {}
    # Bootstrapped again at the next touch: 4 keeps bucket 1, and 7 opens bucket 2 (0 and 1
    # are full), where the stale cache would have moved 4 into bucket 0 (I1).
    assert d.write("p", [4, 7]) == [1, 2]
    assert rli.loaded == loads + 1


def test_reset_refuses_while_mappings_are_uncommitted() -> None:
    d = Driver(MemoryRLI(), 1, CAP3)
    d.assign_open(1, "p", [1])
    with pytest.raises(AssignerError, match="uncommitted mappings"):
        d.slots[0].reset()


def test_a_key_seen_again_in_the_same_checkpoint_is_still_new() -> None:
    # A retried or speculative Spark task sends its rows twice: same bucket, still new,
    # so that the RLI entry is written by whichever attempt's output commits.
    d = Driver(MemoryRLI(), 1, CAP3)
    first = d.assign_open(1, "p", [1, 2, 3, 4])
    again = d.slots[0].assign(1, ["p"], np.zeros(4, np.int32), np.array([4, 3, 2, 1]))
    assert first == ([0, 0, 0, 1], [True] * 4)
    assert again[0].tolist() == [1, 0, 0, 0] and again[1].all()


def test_duplicate_keys_in_one_batch_get_one_bucket() -> None:
    d = Driver(MemoryRLI(), 1, CAP3)
    assert d.write("p", [7, 7, 8, 7, 9, 10]) == [0, 0, 0, 0, 0, 1]


def test_eviction_flow_step_by_step() -> None:
    rli = MemoryRLI()
    a = BucketAssigner(0, 1, CAP3, rli)
    hashes = np.array([1, 2], np.int64)
    zeros = np.zeros(2, np.int32)

    # Checkpoint 1: new keys -> updated; snapshot once 1 committed: kept, last = 1.
    a.begin(1, -1)
    a.assign(1, ["p"], zeros, hashes)
    assert a.partitions["p"].updated
    rli.entries["p"] = {1: 0, 2: 0}
    assert a.snapshot(1, 1) == []
    assert a.partitions["p"].last_updated_checkpoint == 1
    assert not a.partitions["p"].updated

    # Checkpoint 2: new key 3, but the snapshot comes before 2 committed (latest = 1):
    # updated -> last = 2, kept.
    a.begin(2, 1)
    a.assign(2, ["p"], np.zeros(1, np.int32), np.array([3], np.int64))
    assert a.snapshot(2, 1) == []
    assert a.partitions["p"].last_updated_checkpoint == 2

    # Checkpoint 3 only updates old keys: not updated, but last (2) > latest (1): kept,
    # since mapping 3 -> 0 is not in the RLI yet.
    a.begin(3, 1)
    a.assign(3, ["p"], zeros, hashes)
    assert not a.partitions["p"].updated
    assert a.snapshot(3, 1) == []
    assert "p" in a.partitions

    # Checkpoint 2 committed (the commit of 2 landed): last (2) <= latest (3): evicted.
    rli.entries["p"][3] = 0
    assert a.snapshot(3, 3) == ["p"]
    assert a.stats().evictions == 1 and "p" not in a.partitions

    # The next touch bootstraps again from the RLI, and finds every mapping.
    loads = rli.loaded
    a.begin(4, 3)
    buckets, is_new = a.assign(4, ["p"], np.zeros(3, np.int32), np.array([3, 2, 1], np.int64))
    assert rli.loaded == loads + 1
    assert buckets.tolist() == [0, 0, 0] and not is_new.any()


def test_begin_commits_what_the_table_committed_when_no_snapshot_came() -> None:
    rli = MemoryRLI()
    a = BucketAssigner(0, 1, CAP3, rli)
    a.begin(1, -1)
    a.assign(1, ["p"], np.zeros(2, np.int32), np.array([1, 2], np.int64))
    rli.entries["p"] = {1: 0, 2: 0}  # instant 1 committed; its snapshot call was lost
    a.begin(2, 1)
    index = a.partitions["p"]
    assert not index.pending and len(index.run) == 2
    a.assign(2, ["p"], np.zeros(1, np.int32), np.array([3], np.int64))
    assert a.abort(2) == 1  # instant 2 failed: the driver aborts it explicitly (I8)
    a.begin(3, 1)
    buckets, is_new = a.assign(3, ["p"], np.zeros(3, np.int32), np.array([1, 2, 3], np.int64))
    assert buckets.tolist() == [0, 0, 0] and is_new.tolist() == [False, False, True]


def test_assign_without_begin_means_the_actor_restarted() -> None:
    a = BucketAssigner(0, 1, CAP3, MemoryRLI())
    with pytest.raises(AssignerRestartedError, match="checkpoint 5"):
        a.assign(5, ["p"], np.zeros(1, np.int32), np.array([1], np.int64))


def test_misrouted_keys_are_refused() -> None:
    a = BucketAssigner(1, 2, CAP3, MemoryRLI())
    a.begin(1, -1)
    with pytest.raises(AssignerError, match="routes to slot 0 of 2, not to slot 1"):
        a.assign(1, ["p"], np.zeros(2, np.int32), np.array([3, 4], np.int64))


def test_max_buckets_reached_overflows_to_least_filled_bucket() -> None:
    opts = DynamicBucketIndex(max_keys_per_bucket=2, max_buckets=2)
    d = Driver(MemoryRLI(), 1, opts)
    assert d.write("p", [1, 2, 3]) == [0, 0, 1]
    # Ids 0 and 1 are all a partition may have: 4 fills bucket 1, then 5 and 6 go over
    # capacity into the least-filled bucket.
    assert d.write("p", [4]) == [1]
    assert d.write("p", [5, 6]) == [0, 0]
    assert d.slots[0].stats().overflow_keys == 2


def test_more_slots_than_max_buckets_share_them() -> None:
    d = Driver(MemoryRLI(), 3, DynamicBucketIndex(max_keys_per_bucket=3, max_buckets=2))
    assert d.write("p", [0, 1, 2, 3, 4, 5]) == [0, 0, 0, 1, 1, 1]
    # Both ids are full: each slot's key goes over capacity into the least-filled bucket.
    assert set(d.write("p", [6, 7, 8])) <= {0, 1}
    assert sum(a.stats().overflow_keys for a in d.slots) == 3


def test_bucket_id_space_exhausted_names_the_option() -> None:
    d = Driver(MemoryRLI(), 1, DynamicBucketIndex(max_keys_per_bucket=1))
    with pytest.raises(BucketSpaceExhaustedError, match="max-keys-per-bucket"):
        d.write("p", list(range(70_000)))


def test_fullness_in_bytes_uses_the_file_listing() -> None:
    rli = MemoryRLI()
    opts = DynamicBucketIndex(max_bytes_per_bucket=1000)
    d = Driver(rli, 1, opts)
    # No files yet: 128 bytes per key estimated -> 7 keys fill a bucket.
    assert d.write("p", list(range(1, 9))) == [0] * 7 + [1]
    # The listing says bucket 0 holds 700 bytes and bucket 1 holds 100 bytes: 8 keys, so
    # 100 bytes per key. Bucket 0 has room for 3 more keys, bucket 1 for 9.
    rli.file_bytes["p"] = {0: 700, 1: 100}
    assert d.write("p", list(range(9, 22))) == [0] * 3 + [1] * 9 + [2]


def _update_only(a: BucketAssigner, checkpoint: int, partition: str, keys: range) -> None:
    """One committed checkpoint that updates known keys of ``partition`` (no new key)."""
    a.begin(checkpoint, checkpoint - 1)
    hashes = np.array(keys, np.int64)
    _, is_new = a.assign(checkpoint, [partition], np.zeros(len(hashes), np.int32), hashes)
    assert not is_new.any()
    a.snapshot(checkpoint, checkpoint)


def _three_partitions(keys: int) -> MemoryRLI:
    return MemoryRLI({p: dict.fromkeys(range(keys), 0) for p in ("p", "q", "r")})


@pytest.mark.parametrize(("budget", "loads"), [(None, 10), (1 << 30, 1)])
def test_an_update_only_partition_stays_cached_within_the_budget(
    budget: int | None, loads: int
) -> None:
    """A CDC stream of updates: by the proposal's flags alone every batch bootstraps the
    partition again; with a cache budget it is loaded once."""
    rli = _three_partitions(100)
    options = DynamicBucketIndex(max_keys_per_bucket=1000, cache_max_bytes=budget)
    a = BucketAssigner(0, 1, options, rli)
    for checkpoint in range(1, 11):
        _update_only(a, checkpoint, "p", range(10 * checkpoint - 10, 10 * checkpoint))
    assert rli.loaded == loads
    assert a.stats().bootstraps == loads and a.stats().evictions == (10 if budget is None else 0)


def test_over_budget_the_least_recently_used_goes_and_flagged_partitions_stay() -> None:
    rli = _three_partitions(100)
    sizer = BucketAssigner(0, 1, DynamicBucketIndex(max_keys_per_bucket=1000), rli)
    sizer.begin(1, 0)
    sizer.locate(1, ["p"], np.zeros(1, np.int32), np.array([1], np.int64))
    one = sizer.partitions["p"].nbytes  # every partition holds 100 keys: the same size
    a = BucketAssigner(
        0, 1, DynamicBucketIndex(max_keys_per_bucket=1000, cache_max_bytes=2 * one), rli
    )
    # 1: q and r read at checkpoint 1, p at 2; three do not fit: q, the older of the two
    #    least recently used (ties broken by name), goes.
    a.begin(1, 0)
    for partition in ("r", "q"):
        a.assign(1, [partition], np.zeros(3, np.int32), np.array([1, 2, 3], np.int64))
    assert a.snapshot(1, 1) == []
    a.begin(2, 1)
    a.assign(2, ["p"], np.zeros(3, np.int32), np.array([1, 2, 3], np.int64))
    assert a.snapshot(2, 2) == ["q"]
    assert sorted(a.partitions) == ["p", "r"]
    # 2: p gets 500 new keys (its flags keep it) and grows past the budget alone: r, the only
    #    evictable partition, goes; p stays over budget rather than lose uncommitted work.
    a.begin(3, 2)
    buckets, is_new = a.assign(
        3, ["p"], np.zeros(500, np.int32), np.arange(1000, 1500, dtype=np.int64)
    )
    assert is_new.all() and set(buckets.tolist()) == {0}
    assert a.snapshot(3, 2) == ["r"]
    assert list(a.partitions) == ["p"] and a.partitions["p"].nbytes > 2 * one
    # 3: q comes back from the index with its buckets (I1).
    loads = rli.loaded
    a.begin(4, 3)
    buckets, is_new = a.assign(4, ["q"], np.zeros(2, np.int32), np.array([7, 8], np.int64))
    assert rli.loaded == loads + 1 and buckets.tolist() == [0, 0] and not is_new.any()


def test_writers_in_two_lanes_fill_their_own_buckets_and_one_alone_fills_any() -> None:
    """Two writers beside each other (several writers), lanes 0 and 1 of 2: each puts new
    keys only into buckets of its lane (ids L mod 2), so neither fills the other's room;
    a writer alone again (lane 0 of 1) fills every bucket's room in id order first."""
    rli = MemoryRLI()
    a, b = Driver(rli, 1, CAP3), Driver(rli, 1, CAP3)
    a.lanes, b.lanes = (0, 2), (1, 2)
    assert a.write("p", [10, 11, 12, 13]) == [0, 0, 0, 2]
    assert b.write("p", [20, 21, 22, 23]) == [1, 1, 1, 3]
    assert a.write("p", [14, 15]) == [2, 2]
    assert b.write("p", [24]) == [3]
    alone = Driver(rli, 1, CAP3)
    # Bucket 3 (b's lane) has room for one: taken first; then bucket 4 opens.
    assert alone.write("p", [30, 31, 32, 33]) == [3, 4, 4, 4]


def test_a_lane_with_no_bucket_left_spills_into_any() -> None:
    """``max-buckets`` 2 leaves lane 1 of 2 one id: the keys beyond its room go where a
    writer alone would put them (capacity still checked at the commit)."""
    d = Driver(MemoryRLI(), 1, DynamicBucketIndex(max_keys_per_bucket=3, max_buckets=2))
    d.lanes = (1, 2)
    assert d.write("p", [1, 2]) == [1, 1]
    assert d.write("p", [3, 4]) == [1, 0]


def test_every_slot_has_room_in_its_lane_when_capacity_is_below_slots_times_lanes() -> None:
    """Capacity 1, two slots, lane 0 of 2: the room's remainder rotates with a bucket's
    place in the lane (0 for bucket 0, 1 for bucket 2), so slot 1 fills bucket 2 and no
    key leaves the lane."""
    d = Driver(MemoryRLI(), 2, DynamicBucketIndex(max_keys_per_bucket=1))
    d.lanes = (0, 2)
    assert d.write("p", [0, 1]) == [0, 2]
    assert d.write("p", [2, 3]) == [4, 6]
