"""The merge rule on hand-made slices, including two different keys that share a hash."""

from __future__ import annotations

import pyarrow as pa

from dynbucket.base.columns import DELETE, UPSERT
from dynbucket.format.file_group.merge import KEY, merge, ordering_keys
from dynbucket.format.table.spec import TableSpec

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64()), ("ts", pa.int64())])
SPEC = TableSpec(SCHEMA, ("id",), ordering_field="ts")
NO_ORDER = TableSpec(SCHEMA, ("id",))


def _base(rows: list[tuple[str, int | None, int | None]], instant: str = "1") -> pa.Table:
    ids, v, ts = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {
            "id": list(ids),
            "v": pa.array(v, pa.int64()),
            "ts": pa.array(ts, pa.int64()),
            "_hoodie_commit_time": [instant] * len(ids),
            KEY: list(ids),
        }
    )


def _delta(rows: list[tuple[str, int | None, int | None, int]], instant: str) -> pa.Table:
    t = _base([r[:3] for r in rows], instant)
    return t.append_column("_op", pa.array([r[3] for r in rows], pa.int8()))


def _live(table: pa.Table) -> dict[str, tuple[int, int]]:
    return {r["id"]: (r["v"], r["ts"]) for r in table.to_pylist()}


def test_larger_ordering_wins_and_ties_go_to_the_later_commit() -> None:
    base = _base([("a", 1, 5), ("b", 2, 5), ("c", 3, 5)])
    d1 = _delta([("a", 10, 4, UPSERT), ("b", 20, 5, UPSERT), ("d", 40, 0, UPSERT)], "2")
    assert _live(merge(SPEC, base, [d1])) == {"a": (1, 5), "b": (20, 5), "c": (3, 5), "d": (40, 0)}


def test_a_delete_clears_the_key_and_a_later_upsert_brings_it_back_as_hudi_merges() -> None:
    d1 = _delta([("a", None, None, DELETE)], "2")  # delete records carry no values
    d2 = _delta([("a", 5, 1, UPSERT)], "3")
    assert _live(merge(SPEC, _base([("a", 1, 9)]), [d1])) == {}
    # In the logs, an upsert after a delete wins whatever its ordering value ...
    assert _live(merge(SPEC, None, [_delta([("a", 1, 9, UPSERT)], "1"), d1, d2])) == {"a": (5, 1)}
    # ... but it then meets the base row by ordering value, so the larger base row is back
    # (as Hudi's readers merge a slice).
    assert _live(merge(SPEC, _base([("a", 1, 9)]), [d1, d2])) == {"a": (1, 9)}
    d3 = _delta([("a", 7, 10, UPSERT)], "4")
    assert _live(merge(SPEC, _base([("a", 1, 9)]), [d1, d2, d3])) == {"a": (7, 10)}


def test_a_delete_after_upserts_in_the_logs_removes_the_base_row_too() -> None:
    base = _base([("a", 1, 9), ("b", 2, 9)])
    d1 = _delta([("a", 5, 20, UPSERT)], "2")
    d2 = _delta([("a", None, None, DELETE), ("b", None, None, DELETE)], "3")
    assert _live(merge(SPEC, base, [d1, d2])) == {}


def test_without_ordering_field_the_latest_commit_wins() -> None:
    base = _base([("a", 1, 9)])
    d1 = _delta([("a", 2, 0, UPSERT)], "2")
    assert _live(merge(NO_ORDER, base, [d1])) == {"a": (2, 0)}


def test_logs_without_a_base() -> None:
    d1 = _delta([("a", 1, 1, UPSERT), ("b", 2, 1, UPSERT)], "2")
    d2 = _delta([("b", None, None, DELETE), ("a", 7, 0, UPSERT)], "3")
    assert _live(merge(SPEC, None, [d1, d2])) == {"a": (1, 1)}


def test_keys_are_compared_whole() -> None:
    base = _base([("a", 1, 5), ("ab", 2, 5)])
    d1 = _delta([("abc", 9, 0, UPSERT), ("a", None, None, DELETE)], "2")
    assert _live(merge(SPEC, base, [d1])) == {"ab": (2, 5), "abc": (9, 0)}


def test_ordering_keys_order_floats_as_java_compares_them() -> None:
    values = [float("-inf"), -1.5, -0.0, 0.0, 1e-300, 2.0, float("inf"), float("nan")]
    for type_ in (pa.float64(), pa.float32()):
        keys = ordering_keys(pa.array(values, type_)).to_pylist()
        assert keys == sorted(keys) and len(set(keys)) == len(keys) - (type_ == pa.float32())
    with_null = ordering_keys(pa.chunked_array([[1.0, None], [-0.0]]))
    assert with_null.null_count == 1 and with_null[2].as_py() < 0
    ints = pa.array([3, 1])
    assert ordering_keys(ints) is ints
