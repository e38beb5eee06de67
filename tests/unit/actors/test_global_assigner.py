"""The global index's slot core: a key is found in any partition, moves, deletes by key,
exact counts per partition (scenarios with exact bucket ids)."""

from __future__ import annotations

import numpy as np
import pytest

from dynbucket.actors.assigner import EmptySource
from dynbucket.actors.cache import to_cache_keys
from dynbucket.actors.global_assigner import GlobalBucketAssigner
from dynbucket.actors.partition_index import PartitionLoad
from dynbucket.base.columns import DELETE, UPSERT
from dynbucket.base.errors import AssignerError, ConfigError
from dynbucket.base.options import DynamicBucketIndex

OPTS = DynamicBucketIndex(max_keys_per_bucket=2, global_index=True)


def h(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def assign(core, ckpt, partition, hashes, ops=None):
    answer = core.place(ckpt, [partition], np.zeros(len(hashes), np.int64), hashes, ops)
    buckets, is_new = answer.buckets, answer.is_new
    names, where, from_part, from_bucket = answer.moves
    return (
        buckets.tolist(),
        is_new.tolist(),
        [names[w] for w in where],
        [
            (names[p], int(b)) if p >= 0 else None
            for p, b in zip(from_part, from_bucket, strict=True)
        ],
    )


def commit(core, ckpt, new_keys):
    core.snapshot(ckpt, ckpt, new_keys)


def counts(core):
    return {n: i.committed_keys.tolist() for n, i in sorted(core.partitions.items())}


def test_a_key_moves_to_a_bucket_with_room_in_its_new_partition_and_leaves_its_old_one():
    core = GlobalBucketAssigner(0, 1, OPTS, EmptySource())
    core.begin(1, -1)
    assert assign(core, 1, "p=a", h(10, 11, 12))[0] == [0, 0, 1]
    commit(core, 1, {"p=a": {0: 2, 1: 1}})
    core.begin(2, 1)
    buckets, is_new, where, came = assign(core, 2, "p=b", h(10, 13))
    assert (buckets, is_new, where) == ([0, 0], [True, True], ["p=b", "p=b"])
    assert came == [("p=a", 0), None]
    # A retried call of the same rows answers alike, the move included.
    assert assign(core, 2, "p=b", h(10))[3] == [("p=a", 0)]
    core.leave(2, ["p=a"], np.zeros(1, np.int64), h(10))  # the move-out delete was written
    commit(core, 2, {"p=a": {0: -1}, "p=b": {0: 2}})
    assert counts(core) == {"p=a": [1, 1], "p=b": [2]}
    core.begin(3, 2)
    # The key is found in its new partition; the room it left in p=a is taken again.
    assert assign(core, 3, "p=b", h(10))[:3] == ([0], [False], ["p=b"])
    assert assign(core, 3, "p=a", h(14))[0] == [0]


def test_a_move_that_lost_is_taken_back_and_the_key_stays():
    core = GlobalBucketAssigner(0, 1, OPTS, EmptySource())
    core.begin(1, -1)
    assign(core, 1, "p=a", h(10))
    commit(core, 1, {"p=a": {0: 1}})
    core.begin(2, 1)
    assert assign(core, 2, "p=b", h(10))[3] == [("p=a", 0)]
    core.leave(2, ["p=b"], np.zeros(1, np.int64), h(10))  # its ordering value lost
    assert core.partitions["p=b"].bucket_keys.tolist() == [0]
    commit(core, 2, {})
    core.begin(3, 2)
    assert assign(core, 3, "p=a", h(10))[:3] == ([0], [False], ["p=a"])
    assert counts(core) == {"p=a": [1], "p=b": [0]}


def test_a_delete_goes_where_its_key_is_whatever_partition_it_names():
    core = GlobalBucketAssigner(0, 1, OPTS, EmptySource())
    core.begin(1, -1)
    assign(core, 1, "p=a", h(10, 11, 12))
    commit(core, 1, {"p=a": {0: 2, 1: 1}})
    core.begin(2, 1)
    found = core.find(2, [""], np.zeros(2, np.int64), h(12, 99))
    assert found.buckets.tolist() == [1, -1]
    names, where, _, _ = found.moves
    assert [names[w] if w >= 0 else None for w in where] == ["p=a", None]
    # An upsert's record marked as a delete goes there too (its partition value ignored).
    ops = np.array([DELETE, UPSERT], np.int8)
    assert assign(core, 2, "p=z", h(11, 20), ops)[:3] == ([0, 0], [False, True], ["p=a", "p=z"])
    core.leave(2, ["p=a"], np.zeros(1, np.int64), h(11))
    commit(core, 2, {"p=a": {0: -1, 1: -1}, "p=z": {0: 1}})
    assert counts(core) == {"p=a": [1, 0], "p=z": [1]}


def test_an_abort_keeps_every_key_where_it_was():
    core = GlobalBucketAssigner(0, 1, OPTS, EmptySource())
    core.begin(1, -1)
    assign(core, 1, "p=a", h(10))
    commit(core, 1, {"p=a": {0: 1}})
    core.begin(2, 1)
    assign(core, 2, "p=b", h(10, 11))
    core.leave(2, ["p=a"], np.zeros(1, np.int64), h(10))
    assert core.abort(2) == 2
    assert core.partitions["p=b"].bucket_keys.tolist() == [0]
    core.begin(3, 1)
    assert assign(core, 3, "p=a", h(10))[:3] == ([0], [False], ["p=a"])


def test_one_key_in_two_partitions_of_one_instant_is_refused():
    core = GlobalBucketAssigner(0, 1, OPTS, EmptySource())
    core.begin(1, -1)
    assign(core, 1, "p=a", h(10))
    with pytest.raises(AssignerError, match="one record per key"):
        assign(core, 1, "p=b", h(10))


class _TwoPartitions:
    """An index with keys 10, 12 in p=a (bucket 0) and 11 in p=b (bucket 3)."""

    def partitions(self):
        return ["p=a", "p=b"]

    def loads(self, partitions, slot, num_slots):
        return {p: self.load(p, slot, num_slots) for p in partitions}

    def load(self, partition, slot, num_slots):
        keys = {"p=a": [10, 12], "p=b": [11]}[partition]
        bucket = {"p=a": 0, "p=b": 3}[partition]
        mine = sorted(k for k in keys if k % num_slots == slot)
        counts = np.zeros(bucket + 1, np.int64)
        counts[bucket] = len(keys)
        return PartitionLoad(to_cache_keys(h(*mine)), np.full(len(mine), bucket, np.uint16), counts)

    def bucket_bytes(self, partition):
        return np.zeros(0, np.int64)


def test_a_slot_bootstraps_every_partition_and_counts_every_slots_keys():
    core = GlobalBucketAssigner(0, 2, OPTS, _TwoPartitions())
    core.begin(1, -1)
    assert assign(core, 1, "p=b", h(10, 12))[3] == [("p=a", 0), ("p=a", 0)]
    assert counts(core) == {"p=a": [2], "p=b": [0, 0, 0, 1]}
    assert core.stats().cached_keys == 4  # 10 and 12 in p=a, placed again in p=b
    other = GlobalBucketAssigner(1, 2, OPTS, _TwoPartitions())
    other.begin(1, -1)
    assert assign(other, 1, "p=a", h(11))[3] == [("p=b", 3)]


def test_a_global_index_evicts_nothing_and_refuses_a_cache_budget():
    core = GlobalBucketAssigner(0, 1, OPTS, EmptySource())
    core.begin(1, -1)
    assign(core, 1, "p=a", h(10))
    assert core.snapshot(1, 1, {"p=a": {0: 1}}) == []
    core.begin(2, 1)
    core.snapshot(2, 2, {})
    assert core.stats().cached_keys == 1
    with pytest.raises(ConfigError, match="cache.max-bytes"):
        DynamicBucketIndex(global_index=True, cache_max_bytes=1 << 20)
