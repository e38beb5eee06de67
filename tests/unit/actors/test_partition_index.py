"""One partition's cache: pending -> recent -> run, lookups across all three, aborts."""

from __future__ import annotations

import numpy as np

from dynbucket.actors.keys import to_cache_keys
from dynbucket.actors.partition_index import PartitionIndex, PartitionLoad


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
