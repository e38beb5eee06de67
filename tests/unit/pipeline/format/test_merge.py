"""The merge rule on hand-made slices, including two different keys that share a hash."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pytest

from dynbucket.pipeline.format import merge as merge_module
from dynbucket.pipeline.format.columns import DELETE, UPSERT
from dynbucket.pipeline.format.merge import KEY, merge
from dynbucket.pipeline.format.table_spec import TableSpec

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64()), ("ts", pa.int64())])
SPEC = TableSpec(SCHEMA, ("id",), ordering_field="ts")
NO_ORDER = TableSpec(SCHEMA, ("id",))


def _base(rows: list[tuple[str, int | None, int | None]], instant: str = "1") -> pa.Table:
    ids, v, ts = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table({"id": list(ids), "v": pa.array(v, pa.int64()), "ts": pa.array(ts, pa.int64()),
                     "_hoodie_commit_time": [instant] * len(ids), KEY: list(ids)})  # fmt: skip


def _delta(rows: list[tuple[str, int | None, int | None, int]], instant: str) -> pa.Table:
    t = _base([r[:3] for r in rows], instant)
    return t.append_column("_op", pa.array([r[3] for r in rows], pa.int8()))


def _live(table: pa.Table) -> dict[str, tuple[int, int]]:
    return {r["id"]: (r["v"], r["ts"]) for r in table.to_pylist()}


def test_larger_ordering_wins_and_ties_go_to_the_later_commit() -> None:
    base = _base([("a", 1, 5), ("b", 2, 5), ("c", 3, 5)])
    d1 = _delta([("a", 10, 4, UPSERT), ("b", 20, 5, UPSERT), ("d", 40, 0, UPSERT)], "2")
    assert _live(merge(SPEC, base, [d1])) == {"a": (1, 5), "b": (20, 5), "c": (3, 5), "d": (40, 0)}


def test_a_delete_clears_the_key_and_a_later_smaller_upsert_brings_it_back() -> None:
    base = _base([("a", 1, 9)])
    d1 = _delta([("a", None, None, DELETE)], "2")  # delete records carry no values
    d2 = _delta([("a", 5, 1, UPSERT)], "3")
    assert _live(merge(SPEC, base, [d1])) == {}
    assert _live(merge(SPEC, base, [d1, d2])) == {"a": (5, 1)}


def test_without_ordering_field_the_latest_commit_wins() -> None:
    base = _base([("a", 1, 9)])
    d1 = _delta([("a", 2, 0, UPSERT)], "2")
    assert _live(merge(NO_ORDER, base, [d1])) == {"a": (2, 0)}


def test_two_keys_sharing_a_hash_are_kept_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    # "a" and "z" collide on purpose: the hash join must not treat "z" as an update of "a".
    fixed = {"a": 77, "z": 77, "b": 12}

    def colliding(columns: Sequence[pa.Array], names: Sequence[str] = ()) -> np.ndarray:
        return np.array([fixed[k] for k in columns[0].to_pylist()], np.int64)

    monkeypatch.setattr(merge_module, "hash_columns", colliding)
    base = _base([("a", 1, 5), ("b", 2, 5)])
    d1 = _delta([("z", 9, 0, UPSERT), ("b", 3, 6, UPSERT)], "2")
    d2 = _delta([("a", 4, 6, UPSERT)], "3")
    assert _live(merge(SPEC, base, [d1])) == {"a": (1, 5), "z": (9, 0), "b": (3, 6)}
    assert _live(merge(SPEC, base, [d1, d2])) == {"a": (4, 6), "z": (9, 0), "b": (3, 6)}
    d3 = _delta([("z", None, None, DELETE)], "4")
    assert _live(merge(SPEC, base, [d1, d2, d3])) == {"a": (4, 6), "b": (3, 6)}


def test_logs_without_a_base() -> None:
    d1 = _delta([("a", 1, 1, UPSERT), ("b", 2, 1, UPSERT)], "2")
    d2 = _delta([("b", None, None, DELETE), ("a", 7, 0, UPSERT)], "3")
    assert _live(merge(SPEC, None, [d1, d2])) == {"a": (1, 1)}
