"""The merge rule on hand-made slices, including two different keys that share a hash; the
rows of some keys read alone (a lookup) equal to the whole slice merged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dynbucket.base.columns import DELETE, UPSERT
from dynbucket.format.file_group.merge import (
    KEY,
    fold_logs,
    holding_row_groups,
    merge,
    ordering_keys,
    read_slice,
    read_slice_of_keys,
)
from dynbucket.format.services import log_compaction
from dynbucket.format.table.options import TableOptions
from dynbucket.format.table.spec import TableSpec
from dynbucket.table import Table
from tests.seeds import seeds

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


def test_row_groups_that_can_hold_keys_by_their_statistics(tmp_path: Path) -> None:
    """Base files are sorted by key: a lookup reads the row groups whose key range holds
    one of its keys (k00-k09 in group 0, k10-k19 in 1, ...)."""
    ids = [f"k{i:02d}" for i in range(50)]
    pq.write_table(
        pa.table({"id": ids, "n": list(range(50))}), tmp_path / "b.parquet", row_group_size=10
    )
    meta = pq.ParquetFile(tmp_path / "b.parquet").metadata
    assert holding_row_groups(meta, "id", pa.array(["k03", "k35", "k36", "zz"])) == [0, 3]
    # "a" is before k00, "k095" after k09 and before k10: no group holds them.
    assert holding_row_groups(meta, "id", pa.array(["a", "k095"])) == []
    assert holding_row_groups(meta, "id", pa.array([], pa.string())) == []
    assert holding_row_groups(meta, "n", pa.array([0, 49])) == [0, 4]
    assert holding_row_groups(meta, "n", pa.array([1.5])) == [0, 1, 2, 3, 4]  # not str/int


def test_the_rows_of_some_keys_are_the_slice_merged_then_filtered(tmp_path: Path) -> None:
    """Upserts, stale updates, deletes, a merged log and a base of several row groups: the
    rows of any set of keys are those of the whole slice merged."""
    rng = np.random.default_rng(5)
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
    options = TableOptions(
        compaction_async=False,
        clean_automatic=False,
        archive_automatic=False,
        index_compaction_automatic=False,
    )
    t = Table.create(str(tmp_path / "t"), schema, "id", "day", "v", options=options)
    keys = [f"k{i:03d}" for i in range(300)] + [f"c{i}" for i in range(20_000)]

    def rows(ids: list[str], vs: list[int]) -> pa.Table:
        return pa.table({"id": ids, "day": ["d"] * len(ids), "v": vs}, schema=schema)

    t.upsert(rows(keys, [50] * len(keys)))
    for w in range(8):
        # Deleted keys do not come back here (one coming back below its base row has its
        # group's base rewritten: no log to merge).
        ids = sorted(set(rng.choice(keys[200:300] if w % 3 == 2 else keys[:200], 40).tolist()))
        if w % 3 == 2:
            t.delete(pa.table({"id": ids, "day": ["d"] * len(ids)}))
        else:
            t.upsert(rows(ids, rng.integers(0, 100, len(ids)).tolist()))
        if w == 4:
            merged = log_compaction.schedule_log(t._store, t._spec, 2)
            assert merged is not None
            log_compaction.run_log(t._store, t._spec, merged)
    (ref,) = t.snapshot().slices()
    assert ref.slice.logs and any(f.merges_from for f in ref.slice.logs)
    whole = read_slice(t._store, t._spec, ref.slice)
    for _ in range(5):
        wanted = pa.table({"id": rng.choice(keys[:320] + ["nope"], 30).tolist()})
        some = read_slice_of_keys(t._store, t._spec, ref.slice, wanted)
        expected = whole.filter(pc.is_in(whole.column("id"), value_set=wanted.column("id")))
        assert some.sort_by("id").equals(expected.sort_by("id"))


def test_fields_named_like_internal_columns_read_and_compact(tmp_path: Path) -> None:
    # `_key` and `_row` were the merge's and the delete dedupe's own column names: a field so
    # named (added on write) made reads and compaction fail with a raw KeyError.
    uri = str(tmp_path / "t")
    with Table.create(uri, SCHEMA, "id", ordering_field="ts") as t:
        t.upsert(pa.table({"id": ["a", "b"], "v": [1, 2], "ts": [1, 1]}))
        more = pa.table(
            {"id": ["a", "c"], "v": [3, 4], "ts": [2, 2], "_key": ["x", "y"], "_row": [7, 8]}
        )
        t.upsert(more)
        t.delete(pa.table({"id": ["b", "b"]}))
        want = {"a": (3, "x", 7), "c": (4, "y", 8)}
        for _ in range(2):
            got = t.to_arrow(meta_columns=False).sort_by("id").to_pylist()
            assert {r["id"]: (r["v"], r["_key"], r["_row"]) for r in got} == want
            t.compact()
        assert t.check().healthy


def _fold_model(logs: list[list[tuple[str, object, int]]], ordered: bool) -> list[tuple[int, int]]:
    """The logs folded one commit at a time, as Hudi's merge compares two records (a null
    on either side: the newer wins; floats in Java's total order); the (commit, row) of
    each key's record, in the order the commits added them."""

    def java(x: object) -> object:
        return ordering_keys(pa.array([x], pa.float64()))[0].as_py() if isinstance(x, float) else x

    state: dict[str, tuple[int, int, object, int]] = {}
    for c, delta in enumerate(logs):
        for r, (key, ts, op) in enumerate(delta):
            held = state.get(key)
            wins = (
                held is None
                or op == DELETE
                or held[3] == DELETE
                or not ordered
                or ts is None
                or held[2] is None
                or java(ts) >= java(held[2])  # type: ignore[operator]
            )
            if wins:
                state[key] = (c, r, ts, op)
    return sorted((c, r) for c, r, _, _ in state.values())


@pytest.mark.parametrize("seed", seeds(40))
def test_the_logs_fold_at_once_as_one_commit_at_a_time(seed: int) -> None:
    """fold_logs against the sequential fold (a delete resets; an upsert replaces a missing
    record, a delete, or an upsert whose ordering value is not larger; nulls let the newer
    win), with ties, nulls, -0.0 and NaN, and commits without rows."""
    rng = np.random.default_rng(seed)
    kind = [pa.int64(), pa.float64(), None][seed % 3]
    keys = [f"k{i}" for i in range(int(rng.integers(1, 12)))]
    floats = [0.0, -0.0, 1.5, float("nan"), -2.0]
    logs = []
    for _ in range(int(rng.integers(1, 9))):
        chosen = rng.permutation(keys)[: int(rng.integers(0, len(keys) + 1))]
        delta = []
        for key in chosen:
            op = DELETE if rng.random() < 0.25 else UPSERT
            ts: object = None
            if op == UPSERT and rng.random() > 0.2:
                ts = floats[int(rng.integers(5))] if kind == pa.float64() else int(rng.integers(3))
            delta.append((str(key), ts, op))
        logs.append(delta)
    tables = [
        pa.table(
            {
                "id": [d[0] for d in delta],
                "ts": pa.array([d[1] for d in delta], kind or pa.int64()),
                "_hoodie_commit_time": [str(c)] * len(delta),
                KEY: [d[0] for d in delta],
                "_op": pa.array([d[2] for d in delta], pa.int8()),
            }
        )
        for c, delta in enumerate(logs)
    ]
    spec = TableSpec(
        pa.schema([("id", pa.string()), ("ts", kind or pa.int64())]),
        ("id",),
        ordering_field="ts" if kind is not None else None,
    )
    folded = fold_logs(spec, tables)
    expected = _fold_model(logs, kind is not None)
    got = list(
        zip(
            folded.column("_hoodie_commit_time").to_pylist(),
            folded.column(KEY).to_pylist(),
            strict=True,
        )
    )
    assert got == [(str(c), logs[c][r][0]) for c, r in expected]
    assert folded.column("_op").to_pylist() == [logs[c][r][2] for c, r in expected]
