"""``bench schemes``: the workload has the shape the benchmark promises, and its figures
are computed as documented (no Spark here: the generator and the metrics)."""

from __future__ import annotations

import numpy as np

from dynbucket.bench.schemes import (
    UPSERTS,
    WEIGHTS,
    batches,
    beyond_need,
    churn,
    opened_beyond_need,
    partition_of,
    skew,
    small_files,
)


def test_the_table_grows_tenfold_with_30_percent_updates() -> None:
    ids = batches(10_000)
    assert len(ids) == UPSERTS
    seen: set[int] = set(ids[0].tolist())
    assert len(seen) == 10_000
    for batch in ids[1:]:
        assert len(np.unique(batch)) == len(batch)
        old = np.isin(batch, np.fromiter(seen, np.int64))
        assert abs(old.mean() - 0.3) < 0.002  # updates: distinct keys, skewed to the oldest
        seen.update(batch.tolist())
    assert 10 * 10_000 <= len(seen) <= 10 * 10_000 + UPSERTS


def test_partitions_are_skewed_100_to_1() -> None:
    counts = np.bincount(partition_of(np.arange(200_000)), minlength=len(WEIGHTS))
    shares = counts / counts.sum()
    assert np.allclose(shares, np.array(WEIGHTS) / sum(WEIGHTS), atol=0.004)
    assert counts.max() / counts.min() > 80


def test_skew_and_small_files() -> None:
    assert skew([10, 10, 10, 40]) == (4.0, np.std([10, 10, 10, 40]) / 17.5)
    assert skew([5, 0, 5]) == (1.0, 0.0)  # empty (retired) buckets are left out
    assert small_files([1, 9, 10, 500], capacity=100) == 2


def test_churn_deletes_30_percent_and_brings_back_a_third_of_them_with_new_keys() -> None:
    known = np.arange(0, 20_000, 2, dtype=np.int64)  # 10,000 keys, not contiguous
    deleted, upserted = churn(known)
    assert len(deleted) == 3_000 and np.isin(deleted, known).all()
    back, fresh = upserted[np.isin(upserted, deleted)], upserted[~np.isin(upserted, deleted)]
    assert (len(back), len(fresh)) == (900, 600)
    assert fresh.min() > known.max() and len(np.unique(upserted)) == len(upserted)
    # Every partition loses about its share.
    lost = np.bincount(partition_of(deleted), minlength=len(WEIGHTS))
    had = np.bincount(partition_of(known), minlength=len(WEIGHTS))
    assert np.allclose(lost[had > 500] / had[had > 500], 0.3, atol=0.05)


def test_buckets_beyond_need() -> None:
    # p0: 3 buckets for 150 live keys of capacity 100 (needs 2); p1: 1 for none (needs 1).
    assert beyond_need({"p0": 3, "p1": 1, "p2": 2}, {"p0": 150, "p2": 200}, 100) == 1


def test_buckets_opened_beyond_need() -> None:
    # p0 had 3, now 5 for 450 live keys (needs 5): none beyond; p1 had 2, now 3 for 120
    # (needs 2): one; p2 is new with 1 for 50 keys: none; p3 kept 4 for 10 keys: none.
    before = {"p0": 3, "p1": 2, "p3": 4}
    after = {"p0": 5, "p1": 3, "p2": 1, "p3": 4}
    live = {"p0": 450, "p1": 120, "p2": 50, "p3": 10}
    assert opened_beyond_need(before, after, live, 100) == 1
