"""The compact maps against a dict reference (fixed seeds), and their size per key (I7)."""

from __future__ import annotations

import numpy as np
import pytest

from dynbucket.actors import cache
from dynbucket.actors.cache import MISSING, PendingTable, SortedRun, to_cache_keys
from dynbucket.base.keyhash import slot_of
from tests.seeds import sample


def _random_map(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    keys = np.unique(rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True))
    return keys, rng.integers(0, 5000, len(keys), dtype=np.uint16)


@pytest.mark.parametrize("n", [0, 1, 7, 1000, 200_000])
def test_sorted_run_lookup_matches_dict(n: int) -> None:
    rng = np.random.default_rng(n)
    keys, buckets = _random_map(rng, n)
    run = SortedRun(keys, buckets)
    ref = dict(zip(keys.tolist(), buckets.tolist(), strict=True))
    absent = rng.integers(0, 2**64 - 1, 500, dtype=np.uint64, endpoint=True)
    queries = np.concatenate([keys[rng.integers(0, max(n, 1), min(n, 500))], absent])
    out = np.full(len(queries), MISSING, np.int32)
    hits = run.lookup(queries, out)
    expected = [ref.get(q, MISSING) for q in queries.tolist()]
    assert out.tolist() == expected
    assert hits == sum(e != MISSING for e in expected)


def test_sorted_run_extreme_keys() -> None:
    keys = np.array([0, 1, 2**63, 2**64 - 2, 2**64 - 1], np.uint64)
    run = SortedRun(keys, np.arange(5, dtype=np.uint16))
    out = np.full(6, MISSING, np.int32)
    run.lookup(np.array([2**64 - 1, 0, 2**63, 3, 1, 2**64 - 2], np.uint64), out)
    assert out.tolist() == [4, 0, 2, MISSING, 1, 3]


def test_merged_run_holds_both_sides() -> None:
    rng = np.random.default_rng(7)
    keys, buckets = _random_map(rng, 50_000)
    left = SortedRun(keys[::2], buckets[::2])
    both = left.merged(keys[1::2], buckets[1::2])
    assert np.array_equal(both.keys, keys) and np.array_equal(both.buckets, buckets)
    assert len(left) == len(keys[::2])  # the old run is unchanged


def test_pending_table_grows_and_matches_dict() -> None:
    rng = np.random.default_rng(3)
    table = PendingTable()
    ref: dict[int, int] = {}
    for _ in range(20):  # many small batches: the table grows several times
        keys, buckets = _random_map(rng, 3000)
        added = table.insert(keys, buckets)
        fresh = sum(k not in ref for k in keys.tolist())
        for k, b in zip(keys.tolist(), buckets.tolist(), strict=True):
            ref.setdefault(k, b)
        assert added == fresh and len(table) == len(ref)
    all_keys = np.array(list(ref), np.uint64)
    out = np.full(len(all_keys), MISSING, np.int32)
    assert table.lookup(all_keys, out) == len(ref)
    assert out.tolist() == list(ref.values())
    sk, sb = table.sorted_items()
    assert sk.tolist() == sorted(ref) and sb.tolist() == [ref[k] for k in sorted(ref)]


def test_pending_table_keeps_first_bucket_of_a_key() -> None:
    table = PendingTable()
    k = np.array([42], np.uint64)
    table.insert(k, np.array([3], np.uint16))
    assert table.insert(k, np.array([9], np.uint16)) == 0
    out = np.full(1, MISSING, np.int32)
    table.lookup(k, out)
    assert out.tolist() == [3]


def test_pending_table_with_keys_of_one_residue_class() -> None:
    # Every key of a slot shares hash mod N; the table must not cluster on low bits.
    h = np.arange(0, 64 * 20_000, 64, dtype=np.int64)
    keys = to_cache_keys(h)
    table = PendingTable()
    table.insert(keys, np.ones(len(keys), np.uint16))
    out = np.full(len(keys), MISSING, np.int32)
    assert table.lookup(keys, out) == len(keys)


#: Around the directory's steps (2**22 keys: 4,194,304) the large runs cost 8-12 s each on
#: 2 cores: the suite takes one of them a run (``tests/seeds.py``), ``make test-long`` all.
SIZES = [100_000, 1_000_000, *sample("large runs", [3_000_000, 3_145_728, 4_194_304], 1)]


@pytest.mark.parametrize("n", SIZES)
def test_committed_run_stays_under_12_bytes_per_key(n: int) -> None:
    rng = np.random.default_rng(n)
    keys, buckets = _random_map(rng, n)
    run = SortedRun(keys, buckets)
    # 6 or 7 for the key's bits below the directory's and the bucket, 1-2 for the directory
    # (a run under ~130k keys keeps whole keys: 10, and 1-2)
    assert 7.5 <= run.nbytes / len(run) <= (12.0 if n < 130_000 else 9.5)


@pytest.mark.parametrize(("n", "bits"), [(5_000, None), (300_000, None), (300_000, 24)])
def test_a_compacted_run_finds_what_a_whole_one_finds(
    n: int, bits: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs of whole keys (5k), of keys kept below a 17-bit directory (two bytes between
    the low 32 bits and it) and below a 24-bit one (one byte, as from ~33M keys on) answer
    lookups, give their keys back, merge and drop keys."""
    if bits is not None:
        monkeypatch.setattr(cache, "_directory_bits", lambda n: bits)
    rng = np.random.default_rng(n)
    keys = np.unique(rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True))
    buckets = (keys % np.uint64(65_000)).astype(np.uint16)
    run = SortedRun(keys, buckets)
    probe = np.concatenate([keys[rng.integers(0, len(keys), 50_000)], keys[:3] + np.uint64(1)])
    probe = np.concatenate([probe, np.array([0, 2**64 - 1, keys[-1]], np.uint64)])
    out = np.full(len(probe), MISSING, np.int32)
    hits = run.lookup(probe, out)
    at = np.searchsorted(keys, probe).clip(0, len(keys) - 1)
    present = keys[at] == probe
    assert hits == int(present.sum())
    assert np.array_equal(out, np.where(present, buckets[at].astype(np.int32), MISSING))
    assert np.array_equal(run.keys, keys)
    gone = np.unique(keys[rng.integers(0, len(keys), 100)])
    fewer, dropped = run.without(gone)
    assert len(fewer) == len(keys) - len(gone) and np.array_equal(
        dropped, buckets[np.isin(keys, gone)]
    )
    back = fewer.merged(gone, (gone % np.uint64(65_000)).astype(np.uint16))
    assert np.array_equal(back.keys, keys) and np.array_equal(back.buckets, buckets)


def test_cache_keys_preserve_signed_order_and_routing() -> None:
    rng = np.random.default_rng(11)
    h = np.sort(rng.integers(-(2**63), 2**63 - 1, 10_000, dtype=np.int64, endpoint=True))
    k = to_cache_keys(h)
    assert np.all(k[1:] >= k[:-1])
    # The mapping is one to one: flipping the sign bit back gives the hashes.
    assert np.array_equal((k ^ np.uint64(1 << 63)).view(np.int64), h)
    # pmod semantics (Spark's): never negative.
    assert slot_of(np.array([-7, -1, 0, 5], np.int64), 3).tolist() == [2, 2, 0, 2]


def test_pending_assign_keeps_known_keys_and_numbers_new_ones_in_order() -> None:
    table = PendingTable()
    table.insert(np.array([100], np.uint64), np.array([7], np.uint16))
    asked: list[int] = []

    def choose(n: int) -> np.ndarray:
        asked.append(n)
        return np.arange(10, 10 + n, dtype=np.uint16)

    keys = np.array([5, 100, 6, 5, 9, 6, 6], np.uint64)  # repeats within one call
    buckets, fresh = table.assign(keys, choose)
    assert (fresh, asked) == (3, [3])
    assert buckets.tolist() == [10, 7, 11, 10, 12, 11, 11]
    assert len(table) == 4
    out = np.full(4, MISSING, np.int32)
    table.lookup(np.array([5, 6, 9, 100], np.uint64), out)
    assert out.tolist() == [10, 11, 12, 7]


def test_pending_assign_matches_a_dict_on_many_batches() -> None:
    rng = np.random.default_rng(9)
    table, ref, next_bucket = PendingTable(), {}, [0]

    def choose(n: int) -> np.ndarray:
        out = np.arange(next_bucket[0], next_bucket[0] + n) % 1000
        next_bucket[0] += n
        return out.astype(np.uint16)

    for _ in range(30):
        keys = rng.integers(0, 5000, 700).astype(np.uint64)
        buckets, _ = table.assign(keys, choose)
        for k, b in zip(keys.tolist(), buckets.tolist(), strict=True):
            assert ref.setdefault(k, b) == b
    assert len(table) == len(ref)


@pytest.mark.parametrize("parts", [0, 1, 2, 5, 8])
def test_union_of_disjoint_sorted_parts_is_one_sorted_run(parts: int) -> None:
    rng = np.random.default_rng(parts)
    keys = rng.choice(2**40, 5000, replace=False).astype(np.uint64)
    buckets = (keys % 977).astype(np.uint16)
    which = rng.integers(0, max(parts, 1), len(keys))
    pieces = []
    for p in range(parts):
        mine = np.sort(keys[which == p])
        pieces.append((mine, (mine % 977).astype(np.uint16)))
    run = SortedRun.union(pieces)
    expected = np.sort(keys) if parts else np.empty(0, np.uint64)
    assert run.keys.tolist() == expected.tolist()
    assert run.buckets.tolist() == (expected % 977).astype(np.uint16).tolist()
    out = np.full(len(keys), -1, np.int32)
    assert run.lookup(keys, out) == (len(keys) if parts else 0)
    if parts:
        assert (out == buckets).all()
