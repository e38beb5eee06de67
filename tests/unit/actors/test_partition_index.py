"""One partition's cache: pending -> recent -> run, lookups across all three, aborts, and
catching up with index deltas another writer committed."""

from __future__ import annotations

import numpy as np

from dynbucket.actors.cache import to_cache_keys
from dynbucket.actors.partition_index import (
    SEEN_MAX,
    PartitionCatchUp,
    PartitionIndex,
    PartitionLoad,
)


def _keys(values: range) -> np.ndarray:
    return to_cache_keys(np.array(list(values), np.int64))


def _add(index: PartitionIndex, checkpoint: int, keys: np.ndarray, bucket: int) -> None:
    """Maps new ``keys`` of ``checkpoint`` to ``bucket``, as the allocator would."""
    index.assign_new(checkpoint, keys, lambda n: np.full(n, bucket, np.uint16))


def _index(committed: int) -> PartitionIndex:
    keys = _keys(range(committed))
    return PartitionIndex(
        PartitionLoad(keys, np.zeros(committed, np.uint16), np.array([committed]))
    )


def test_commits_go_to_recent_then_merge_into_the_run_beyond_a_quarter() -> None:
    index = _index(100)
    _add(index, 1, _keys(range(1000, 1010)), 1)
    buckets, uncommitted = index.lookup(_keys(range(1005, 1007)))
    assert buckets.tolist() == [1, 1] and uncommitted.all()
    index.commit_through(1)
    assert (len(index.run), len(index.recent), len(index.pending)) == (100, 10, 0)
    buckets, uncommitted = index.lookup(_keys([5, 1005, 5000]))
    assert buckets.tolist() == [0, 1, -1] and not uncommitted.any()

    _add(index, 2, _keys(range(2000, 2020)), 2)
    index.commit_through(2)  # recent would hold 30 > 25: merged
    assert (len(index.run), len(index.recent)) == (130, 0)
    assert index.lookup(_keys([2019, 1000, 99]))[0].tolist() == [2, 1, 0]


def test_abort_leaves_committed_runs_alone() -> None:
    index = _index(10)
    _add(index, 1, _keys(range(50, 52)), 1)
    index.commit_through(1)
    _add(index, 2, _keys(range(60, 63)), 1)
    assert index.abort(2) == 3
    assert index.lookup(_keys([50, 61]))[0].tolist() == [1, -1]
    assert index.bucket_keys.tolist() == [10, 2]


def test_a_catch_up_takes_others_inserts_and_deletes_and_their_counts() -> None:
    index = _index(10)  # keys 0-9 in bucket 0, seen: the load's (none here)
    _add(index, 5, _keys(range(20, 22)), 1)
    index.commit_through(5)
    index.saw(5, whole=True)
    assert index.seen == {"00000000000000005"}
    # Another writer: key 3 deleted; 7 deleted and inserted again into bucket 2; 30 new in
    # bucket 2; every slot's counts: bucket 0 -2, bucket 2 +2 (and one key of another slot).
    touched = np.sort(_keys([3, 7, 30]))
    keys = np.sort(_keys([7, 30]))
    index.catch_up(
        PartitionCatchUp(
            touched, keys, np.array([2, 2], np.uint16), np.array([-2, 0, 3]), frozenset({"6"})
        )
    )
    assert index.lookup(_keys([3, 7, 30, 21, 0]))[0].tolist() == [-1, 2, 2, 1, 0]
    assert index.committed_keys.tolist() == index.bucket_keys.tolist() == [8, 2, 3]
    assert index.seen == {"6"}
    index.saw(8, whole=False)  # another slot's keys of 8 not counted: it cannot tell now
    assert index.seen is None


def test_a_writer_alone_does_not_grow_what_its_cache_has_seen_without_bound() -> None:
    index = _index(3)
    for checkpoint in range(1, SEEN_MAX):
        index.saw(checkpoint, whole=True)
    assert index.seen is not None and len(index.seen) == SEEN_MAX - 1
    index.saw(SEEN_MAX, whole=True)
    index.saw(SEEN_MAX + 1, whole=True)
    assert index.seen is None  # unknown: its first catch-up loads it again
