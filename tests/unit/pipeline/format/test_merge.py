"""The merge rule on hand-made slices, including two different keys that share a hash."""

from __future__ import annotations

import pyarrow as pa

from dynbucket.pipeline.format.columns import DELETE, UPSERT
from dynbucket.pipeline.format.merge import merge
from dynbucket.pipeline.format.table_spec import TableSpec

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64()), ("ts", pa.int64())])
SPEC = TableSpec(SCHEMA, ("id",), ordering_field="ts")
NO_ORDER = TableSpec(SCHEMA, ("id",))


def _base(rows: list[tuple[str, int | None, int | None, int]]) -> pa.Table:
    ids, v, ts, h = zip(*rows, strict=True) if rows else ((), (), (), ())
    return pa.table({"id": list(ids), "v": pa.array(v, pa.int64()), "ts": pa.array(ts, pa.int64()),
                     "_hash": pa.array(h, pa.int64()), "_instant": ["1"] * len(ids)})  # fmt: skip


def _delta(rows: list[tuple[str, int | None, int | None, int, int]], instant: str) -> pa.Table:
    t = _base([r[:4] for r in rows]).set_column(4, "_instant", pa.array([instant] * len(rows)))
    return t.append_column("_op", pa.array([r[4] for r in rows], pa.int8()))


def _live(table: pa.Table) -> dict[str, tuple[int, int]]:
    return {r["id"]: (r["v"], r["ts"]) for r in table.to_pylist()}


def test_larger_ordering_wins_and_ties_go_to_the_later_commit() -> None:
    base = _base([("a", 1, 5, 11), ("b", 2, 5, 12), ("c", 3, 5, 13)])
    d1 = _delta([("a", 10, 4, 11, UPSERT), ("b", 20, 5, 12, UPSERT), ("d", 40, 0, 14, UPSERT)], "2")
    assert _live(merge(SPEC, base, [d1])) == {"a": (1, 5), "b": (20, 5), "c": (3, 5), "d": (40, 0)}


def test_a_delete_clears_the_key_and_a_later_smaller_upsert_brings_it_back() -> None:
    base = _base([("a", 1, 9, 11)])
    d1 = _delta([("a", None, None, 11, DELETE)], "2")  # markers carry no values
    d2 = _delta([("a", 5, 1, 11, UPSERT)], "3")
    assert _live(merge(SPEC, base, [d1])) == {}
    assert _live(merge(SPEC, base, [d1, d2])) == {"a": (5, 1)}


def test_without_ordering_field_the_latest_commit_wins() -> None:
    base = _base([("a", 1, 9, 11)])
    d1 = _delta([("a", 2, 0, 11, UPSERT)], "2")
    assert _live(merge(NO_ORDER, base, [d1])) == {"a": (2, 0)}


def test_two_keys_sharing_a_hash_are_kept_apart() -> None:
    # "a" and "z" collide on purpose: the hash join must not treat "z" as an update of "a".
    base = _base([("a", 1, 5, 77), ("b", 2, 5, 12)])
    d1 = _delta([("z", 9, 0, 77, UPSERT), ("b", 3, 6, 12, UPSERT)], "2")
    d2 = _delta([("a", 4, 6, 77, UPSERT)], "3")
    assert _live(merge(SPEC, base, [d1])) == {"a": (1, 5), "z": (9, 0), "b": (3, 6)}
    assert _live(merge(SPEC, base, [d1, d2])) == {"a": (4, 6), "z": (9, 0), "b": (3, 6)}
    d3 = _delta([("z", None, None, 77, DELETE)], "4")
    assert _live(merge(SPEC, base, [d1, d2, d3])) == {"a": (4, 6), "b": (3, 6)}


def test_deltas_without_a_base() -> None:
    d1 = _delta([("a", 1, 1, 11, UPSERT), ("b", 2, 1, 12, UPSERT)], "2")
    d2 = _delta([("b", None, None, 12, DELETE), ("a", 7, 0, 11, UPSERT)], "3")
    assert _live(merge(SPEC, None, [d1, d2])) == {"a": (1, 1)}
