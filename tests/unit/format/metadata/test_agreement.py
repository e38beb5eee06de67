"""The record index against the live keys (``metadata/agreement.py``), by layout."""

from __future__ import annotations

import pyarrow as pa

from dynbucket.format.metadata.agreement import disagreement


def _t(rows: list[tuple[str, str, str]]) -> pa.Table:
    key, partition, file_id = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {
            "key": pa.array(key, pa.string()),
            "partition": pa.array(partition, pa.string()),
            "file_id": pa.array(file_id, pa.string()),
        }
    )


LIVE = [("a", "p1", "f1"), ("b", "p1", "f1"), ("a", "p2", "f2"), ("c", "p2", "f3")]


def test_the_partitioned_layout_compares_each_partition_and_key() -> None:
    assert not disagreement(_t(LIVE), _t(LIVE[::-1]), partitioned=True)
    indexed = [("a", "p1", "f1"), ("b", "p1", "f9"), ("c", "p2", "f3"), ("d", "p1", "f1")]
    found = disagreement(_t(LIVE), _t(indexed), partitioned=True)
    assert found.missing == [("p2", "a")]  # the key's second partition
    assert found.extra == [("p1", "d")]
    assert found.moved == [("p1", "b")]
    assert found.said() == (
        "1 key(s) missing, e.g. ('p2', 'a'); 1 key(s) without a live row, e.g. ('p1', 'd'); "
        "1 key(s) placed elsewhere, e.g. ('p1', 'b')"
    )


def test_the_global_layout_compares_keys_and_their_partition() -> None:
    live = [("a", "p1", "f1"), ("b", "p1", "f1"), ("c", "p2", "f3")]
    assert not disagreement(_t(live), _t(live), partitioned=False)
    # The same file id in another partition is another place.
    indexed = [("a", "p2", "f1"), ("b", "p1", "f1"), ("e", "p2", "f3")]
    found = disagreement(_t(live), _t(indexed), partitioned=False)
    assert (found.missing, found.extra, found.moved) == (["c"], ["e"], ["a"])
    assert found.said().startswith("1 key(s) missing, e.g. 'c'")


def test_nothing_on_either_side() -> None:
    empty = _t([])
    assert not disagreement(empty, empty, partitioned=True)
    assert disagreement(_t(LIVE), empty, partitioned=True).missing == sorted(
        (p, k) for k, p, _ in LIVE
    )


def test_rows_whose_columns_hold_the_same_values_in_other_pairs_disagree() -> None:
    """Agreement is told first by hashes of whole rows: two keys' file groups swapped (each
    column the same values) and a null in place of a value (which Spark's hash skips) are
    still found, by the join."""
    live = [("a", "p1", "f1"), ("b", "p1", "f2")]
    swapped = disagreement(_t(live), _t([("a", "p1", "f2"), ("b", "p1", "f1")]), True)
    assert swapped.moved == [("p1", "a"), ("p1", "b")]
    nulls = pa.table({"key": ["a", "b"], "partition": ["p1", "p1"], "file_id": ["f1", None]})
    assert disagreement(_t(live), nulls, partitioned=True).moved == [("p1", "b")]
