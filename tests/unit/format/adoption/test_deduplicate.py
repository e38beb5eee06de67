"""The deduplication rule (``adoption/deduplicate.py``, step 1) on rows of one scope: exact
rows lose."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa

from dynbucket.format.adoption.deduplicate import _losing


def _rows(keys: list[str], ordering: list[int | None], commits: list[str]) -> pa.Table:
    n = len(keys)
    return pa.table(
        {
            "key": keys,
            "commit": commits,
            "slice": list(range(n)),
            "position": [0] * n,
            "ordering": pa.array(ordering, pa.int64()),
        }
    )


def test_the_largest_ordering_value_stays_then_the_latest_commit_then_a_value_over_none() -> None:
    rows = _rows(
        ["a", "a", "b", "b", "c", "c", "d", "e", "e", "e"],
        [1, 2, 5, 5, None, 0, 9, 3, 7, 7],
        ["c2", "c1", "c1", "c2", "c2", "c1", "c1", "c3", "c1", "c2"],
    )
    lose, keys = _losing(SimpleNamespace(ordering_field="ts"), rows)
    # a: 2 beats the later 1; b: a tie goes to c2; c: 0 beats none; e: 7 of c2.
    assert sorted(lose.to_pylist()) == [0, 2, 4, 7, 8]
    assert keys == 4


def test_without_an_ordering_field_the_latest_commit_stays() -> None:
    rows = _rows(["a", "a", "a"], [None, None, None], ["c2", "c3", "c1"]).drop_columns(["ordering"])
    lose, keys = _losing(SimpleNamespace(ordering_field=None), rows)
    assert sorted(lose.to_pylist()) == [0, 2] and keys == 1


def test_unique_keys_lose_nothing() -> None:
    lose, keys = _losing(
        SimpleNamespace(ordering_field="ts"), _rows(["a", "b"], [1, 1], ["c", "c"])
    )
    assert len(lose) == 0 and keys == 0
