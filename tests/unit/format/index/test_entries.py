"""A partition's index state from its entries: each key's newest entry, when an insert."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from dynbucket.base.columns import BUCKET, DELETE, HASH, INSTANT, OP, UPSERT
from dynbucket.format.index.entries import keys_and_live, live


def _entries(rows: list[tuple[int, int, str, int]]) -> pa.Table:
    hashes, buckets, instants, ops = zip(*rows, strict=True)
    return pa.table(
        {
            HASH: pa.array(hashes, pa.int64()),
            BUCKET: pa.array(buckets, pa.int32()),
            INSTANT: pa.array(instants),
            OP: pa.array(ops, pa.int8()),
        }
    )


def test_every_key_named_once_and_the_newest_insert_of_each_from_one_sort() -> None:
    entries = _entries(
        [
            (7, 0, "20260101000002", DELETE),  # deleted after its insert: named, not live
            (-3, 1, "20260101000001", UPSERT),
            (7, 0, "20260101000001", UPSERT),
            (5, 2, "20260101000001", DELETE),  # deleted, then inserted again elsewhere
            (5, 3, "20260101000003", UPSERT),
            (-3, 1, "20260101000001", UPSERT),  # the same entry twice (two files)
        ]
    )
    keys, alive = keys_and_live(entries)
    assert keys.tolist() == [-3, 5, 7]
    assert alive.column(HASH).to_pylist() == [-3, 5]
    assert alive.column(BUCKET).to_pylist() == [1, 3]
    assert live(entries).equals(alive)


def test_keys_are_those_a_sort_and_unique_give() -> None:
    rng = np.random.default_rng(3)
    hashes = rng.integers(-(2**63), 2**63 - 1, 500, dtype=np.int64)
    picked = rng.choice(hashes, 2_000)
    rows = [
        (int(h), 0, f"2026010100000{rng.integers(1, 9)}", int(rng.choice([UPSERT, DELETE])))
        for h in picked
    ]
    keys, _ = keys_and_live(_entries(rows))
    assert keys.tolist() == np.unique(picked).tolist()
