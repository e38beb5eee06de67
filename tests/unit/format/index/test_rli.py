"""The record-level index's files grouped by slot: a slot reads its own section of each file,
whatever slot count wrote it, and counts every slot's keys per bucket from the footers."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket.actors import DynamicBucketIndex
from dynbucket.base.columns import BUCKET, DELETE, FILE_ID, HASH, INSTANT, OP, UPSERT
from dynbucket.base.keyhash import slot_of
from dynbucket.format.index import entries, rli
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.timeline.timeline import Visible
from dynbucket.table import Table

ROW_GROUP = 100
INSTANTS = ("20261123000000001", "20261123000000002", "20261123000000003")


@pytest.fixture(autouse=True)
def small_row_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rli, "ROW_GROUP", ROW_GROUP)  # several row groups per slot


def _index(tmp_path: Path) -> RecordLevelIndex:
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.int64())])
    t = Table.create(
        str(tmp_path / "t"),
        schema,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=100),
    )
    return RecordLevelIndex(t._store, t._spec)


def _entries(rng: np.random.Generator, n: int, instant: str) -> pa.Table:
    hashes = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    return pa.table(
        {
            "id": [f"k{h}" for h in hashes],
            HASH: hashes,
            BUCKET: rng.integers(0, 7, n).astype(np.int32),
            FILE_ID: ["f"] * n,
            INSTANT: [instant] * n,
        }
    )


def _written(index: RecordLevelIndex, slots: list[int], seed: int = 5) -> pa.Table:
    """Three index files of one partition, the i-th written with ``slots[i]`` slots."""
    rng = np.random.default_rng(seed)
    tables = []
    for instant, s, n in zip(INSTANTS, slots, (2000, 700, 1300), strict=False):
        entries = _entries(rng, n, instant)
        index.write("day=1", instant, entries, slots=s)
        tables.append(entries)
    return pa.concat_tables(tables)


@pytest.mark.parametrize("num_slots", [4, 2, 8, 3, 1])
def test_each_slot_gets_exactly_its_keys_and_every_slots_bucket_counts(
    tmp_path: Path, num_slots: int
) -> None:
    index = _index(tmp_path)
    everything = _written(index, [4, 4, 4])
    hashes = everything.column(HASH).to_numpy()
    all_counts = np.bincount(everything.column(BUCKET).to_numpy())
    seen = []
    for slot in range(num_slots):
        part = index.slot_slice("day=1", INSTANTS, [HASH, BUCKET], slot, num_slots)
        got = np.concatenate([r.column(HASH).to_numpy() for r in part.runs])
        assert sorted(got) == sorted(hashes[slot_of(hashes, num_slots) == slot])
        for run in part.runs:  # each run sorted by hash: a merge builds the cache
            h = run.column(HASH).to_numpy()
            assert (np.diff(h) > 0).all()
        assert part.bucket_keys.tolist() == all_counts.tolist()
        assert part.entries_total == len(everything)
        seen.append(part.entries_read)
    share = 1 / np.gcd(4, num_slots)  # of each file, a slot reads about this much
    slack = 2 * ROW_GROUP * len(INSTANTS)  # row groups shared with the neighbouring sections
    assert all(read <= share * len(everything) * 1.2 + slack for read in seen), seen
    if num_slots == 4:
        assert max(seen) < len(everything) / 2


def test_files_of_different_slot_counts_and_an_older_file_mix(tmp_path: Path) -> None:
    index = _index(tmp_path)
    everything = _written(index, [3, 4])
    rng = np.random.default_rng(9)
    older = _entries(rng, 500, INSTANTS[2])  # sorted by hash alone, no footer
    older = older.take(pa.array(np.argsort(older.column(HASH).to_numpy())))
    before_tombstones = pa.schema([f for f in index.schema if f.name != OP])
    path = f"{index.dir('day=1')}/{INSTANTS[2]}.delta.parquet"
    pq.write_table(older.cast(before_tombstones), path)
    everything = pa.concat_tables([everything, older.cast(everything.schema)])
    hashes = everything.column(HASH).to_numpy()
    for slot in range(6):
        part = index.slot_slice("day=1", INSTANTS, [HASH, BUCKET], slot, 6)
        got = np.concatenate([r.column(HASH).to_numpy() for r in part.runs])
        assert sorted(got) == sorted(hashes[slot_of(hashes, 6) == slot])
        assert part.bucket_keys.tolist() == np.bincount(everything.column(BUCKET)).tolist()
    # Tombstones of some of the older file's keys, then a compaction of all four files.
    gone = entries.conform(older.slice(0, 100), index.schema)
    gone = gone.set_column(gone.schema.get_field_index(OP), OP, pa.array([DELETE] * 100, pa.int8()))
    later = "20261123000000004"
    gone = gone.set_column(gone.schema.get_field_index(INSTANT), INSTANT, pa.array([later] * 100))
    index.write("day=1", later, gone, slots=2)
    base = index.compact("day=1", "20261123000000005", [*INSTANTS, later])
    assert base is not None
    left = set(hashes.tolist()) - set(gone.column(HASH).to_pylist())
    assert set(pq.read_table(base.path).column(HASH).to_pylist()) == left


def test_compaction_keeps_the_slot_count_of_the_newest_file(tmp_path: Path) -> None:
    index = _index(tmp_path)
    everything = _written(index, [2, 5])
    base = index.compact("day=1", "20261123000000009", INSTANTS[:2])
    assert base is not None
    metadata = pq.read_schema(base.path).metadata
    assert metadata[rli.SLOTS_KEY] == b"5"
    visible = [*INSTANTS[:2], "20261123000000009"]
    part = index.slot_slice("day=1", visible, [HASH, BUCKET], 2, 5)
    hashes = everything.column(HASH).to_numpy()
    assert len(part.runs) == 1  # one section of one file
    assert part.runs[0].column(HASH).to_numpy().tolist() == sorted(
        hashes[slot_of(hashes, 5) == 2].tolist()
    )


def test_a_lookup_reads_only_the_row_groups_of_each_hashs_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _index(tmp_path)
    everything = _written(index, [3, 4, 1])
    hashes = everything.column(HASH).to_numpy()
    rng = np.random.default_rng(3)
    present = rng.choice(hashes, 3, replace=False)
    absent = rng.integers(-(2**63), 2**63 - 1, 2, dtype=np.int64)
    read: list[list[int]] = []
    real = pq.ParquetFile.read_row_groups

    def counting(self, groups, *args, **kwargs):  # type: ignore[no-untyped-def]
        read.append(list(groups))
        return real(self, groups, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", counting)
    found = index.lookup("day=1", np.concatenate([present, absent]), INSTANTS, [BUCKET])
    assert found.column_names == [HASH, BUCKET]
    expected = everything.filter(pa.array(np.isin(hashes, present)))

    def pairs(t: pa.Table) -> list[tuple[int, int]]:
        return sorted(zip(t.column(HASH).to_pylist(), t.column(BUCKET).to_pylist(), strict=True))

    assert pairs(found) == pairs(expected)
    # Of the files' 40 row groups, one per hash and file (the one whose hash range holds it
    # in its section; two where a section ends inside it): a lookup does not read the index.
    assert sum(len(g) for g in read) <= 5 * len(INSTANTS) + 2
    assert index.lookup("day=1", absent, INSTANTS).num_rows == 0
    # Asked again, the row groups come from the process's cache; with no room for them,
    # from the files again.
    first = sum(len(g) for g in read)
    again = index.lookup("day=1", present, INSTANTS, [BUCKET])
    assert pairs(again) == pairs(expected) and sum(len(g) for g in read) == first
    monkeypatch.setattr(rli._GROUPS, "limit", 0)
    rli.clear_lookup_cache()
    assert pairs(index.lookup("day=1", present, INSTANTS, [BUCKET])) == pairs(expected)
    assert sum(len(g) for g in read) > first and not len(rli._GROUPS)


def _churned(index: RecordLevelIndex) -> tuple[dict[int, int], pa.Table]:
    """Three instants of one partition: 1000 keys inserted; 300 of them deleted
    (tombstones naming their buckets); 100 of those back in bucket 9, with 50 new keys.
    Returns the live keys (hash -> bucket) and every entry written."""
    rng = np.random.default_rng(11)
    first = _entries(rng, 1000, INSTANTS[0])
    index.write("day=1", INSTANTS[0], first, slots=4)
    gone = first.take(pa.array(rng.choice(1000, 300, replace=False)))
    gone = gone.set_column(
        gone.schema.get_field_index(INSTANT), INSTANT, pa.array([INSTANTS[1]] * 300)
    )
    gone = gone.append_column(OP, pa.array([DELETE] * 300, pa.int8()))
    index.write("day=1", INSTANTS[1], gone, slots=2)
    back = gone.slice(0, 100).drop_columns([OP])
    third = pa.concat_tables([back, _entries(rng, 50, INSTANTS[2]).select(back.column_names)])
    third = third.set_column(
        third.schema.get_field_index(BUCKET), BUCKET, pa.array([9] * 150, pa.int32())
    )
    third = third.set_column(
        third.schema.get_field_index(INSTANT), INSTANT, pa.array([INSTANTS[2]] * 150)
    )
    index.write("day=1", INSTANTS[2], third, slots=3)
    model = dict(zip(first.column(HASH).to_pylist(), first.column(BUCKET).to_pylist(), strict=True))
    for h in gone.column(HASH).to_pylist():
        del model[h]
    model.update(dict.fromkeys(third.column(HASH).to_pylist(), 9))
    everything = pa.concat_tables(
        [index.schema.empty_table()]
        + [entries.conform(t, index.schema) for t in (first, gone, third)]
    )
    return model, everything


def _as_dict(t: pa.Table) -> dict[int, int]:
    return dict(zip(t.column(HASH).to_pylist(), t.column(BUCKET).to_pylist(), strict=True))


@pytest.mark.parametrize("num_slots", [1, 3, 4])
def test_tombstones_retire_entries_and_give_their_room_back(tmp_path: Path, num_slots: int) -> None:
    index = _index(tmp_path)
    model, _ = _churned(index)
    counts = np.bincount(list(model.values()))
    got: dict[int, int] = {}
    for slot in range(num_slots):
        part = index.slot_slice("day=1", INSTANTS, [HASH, BUCKET], slot, num_slots)
        assert part.bucket_keys.tolist() == counts.tolist()  # live keys, from the footers
        for run in part.runs:
            assert (np.diff(run.column(HASH).to_numpy()) > 0).all()
            got.update(_as_dict(run))
    assert got == model
    assert _as_dict(index.record_index_locations("day=1", INSTANTS, [HASH, BUCKET])) == model


def test_a_lookup_finds_a_keys_newest_entry_and_none_for_a_deleted_key(tmp_path: Path) -> None:
    index = _index(tmp_path)
    model, everything = _churned(index)
    ops = everything.column(OP).to_numpy()
    hashes = everything.column(HASH).to_numpy()
    deleted = np.setdiff1d(hashes[ops == DELETE], list(model))[:5]
    returned = np.intersect1d(hashes[ops == DELETE], list(model))[:5]
    found = index.lookup("day=1", np.concatenate([deleted, returned]), INSTANTS, [BUCKET])
    assert _as_dict(found) == dict.fromkeys(returned.tolist(), 9)


def test_merging_deltas_keeps_tombstones_and_compaction_drops_them(tmp_path: Path) -> None:
    index = _index(tmp_path)
    model, everything = _churned(index)
    files = index.files("day=1", INSTANTS)[1]
    merged = index.merge_deltas("day=1", "20261123000000004", files[1:])
    visible = [*INSTANTS, "20261123000000004"]
    assert int(pq.read_schema(merged.path).metadata[rli.TOMBSTONES_KEY]) == 300
    assert _as_dict(index.record_index_locations("day=1", visible, [HASH, BUCKET])) == model
    raw = index.record_index_locations("day=1", visible, [HASH, BUCKET], raw=True)
    assert raw.num_rows == everything.num_rows and OP in raw.column_names
    base = index.compact("day=1", "20261123000000005", visible)
    assert base is not None
    visible.append("20261123000000005")
    table = pq.read_table(base.path)
    assert table.num_rows == len(model) and set(table.column(OP).to_pylist()) == {UPSERT}
    assert pq.read_schema(base.path).metadata[rli.TOMBSTONES_KEY] == b"0"
    assert _as_dict(index.record_index_locations("day=1", visible, [HASH, BUCKET])) == model


@pytest.mark.parametrize("merge", ["base", "merged delta"])
def test_an_index_compaction_until_a_pending_write_leaves_that_writes_delta_after_it(
    tmp_path: Path, merge: str
) -> None:
    """A compaction planned while the write of instant 3 was pending merges instants 1 and
    2 only (``until`` 3); instant 3's delta, completed after the plan, and 4's are read
    after the merged file, and a file that restates up to its own instant would hide 3."""
    index = _index(tmp_path)
    rng = np.random.default_rng(7)
    ids = [f"2026112300000000{i}" for i in range(1, 6)]
    written = [_entries(rng, 300, i) for i in ids[:4]]
    for instant, table in zip(ids[:4], written, strict=True):
        index.write("day=1", instant, table, slots=3)
    # Instant 3 pending when it was planned; 1 and 2 archived (visible by the floor).
    planned = Visible([ids[3]], floor=ids[1])
    if merge == "base":
        merged = index.compact("day=1", ids[4], planned, until=ids[2])
    else:
        merged = index.merge_deltas("day=1", ids[4], index.files("day=1", ids[:2])[1], ids[2])
    assert merged is not None and merged.until == ids[2]
    assert merged.name.endswith(
        ("base.u20261123000000003.parquet", "m20261123000000001-20261123000000003.parquet")
    )
    model = _as_dict(pa.concat_tables(written).select([HASH, BUCKET]))
    assert _as_dict(index.record_index_locations("day=1", ids, [HASH, BUCKET])) == model
    base, deltas = index.files("day=1", ids)
    assert [f.instant for f in deltas] == (
        [ids[2], ids[3]] if merge == "base" else [ids[2], ids[3], ids[4]]
    )


def test_a_delta_kept_by_the_process_is_not_taken_for_one_of_a_table_made_again_there(
    tmp_path: Path,
) -> None:
    """The process keeps completed deltas it read whole; a table deleted and created again
    at the same path, whose write makes a delta of the same name, is read anew."""
    rng = np.random.default_rng(3)
    first = _index(tmp_path)
    f = first.write("day=1", INSTANTS[0], _entries(rng, 50, INSTANTS[0]), slots=2)
    kept = rli.delta_entries(first.store, first.spec, f.path, [HASH, BUCKET])
    assert kept.num_rows == 50
    shutil.rmtree(tmp_path / "t")
    again = _index(tmp_path)
    g = again.write("day=1", INSTANTS[0], _entries(rng, 20, INSTANTS[0]), slots=2)
    assert g.path == f.path
    read = rli.delta_entries(again.store, again.spec, g.path, [HASH, BUCKET])
    assert read.num_rows == 20
    assert sorted(read.column(HASH).to_pylist()) == sorted(
        pq.read_table(g.path).column(HASH).to_pylist()
    )


@pytest.mark.parametrize("merge", ["base", "merged delta"])
def test_a_cache_holding_what_an_index_compaction_restates_catches_up_past_it(
    tmp_path: Path, merge: str
) -> None:
    """Another writer's index compaction of the deltas a slot's cache holds adds nothing
    to it: the catch-up reads only the deltas after it (before, every such compaction made
    every other writer's caches load the partition again: 24 loads in four writers' 52
    writes). One restating a delta the cache lacks, or a base that does not say what it
    restates (a rescale's), makes it load again."""
    index = _index(tmp_path)
    rng = np.random.default_rng(11)
    ids = [f"2026112300000000{i}" for i in range(1, 6)]
    for instant in ids[:3]:
        index.write("day=1", instant, _entries(rng, 300, instant), slots=2)
    if merge == "base":
        merged = index.compact("day=1", ids[3], ids[:3])
    else:
        merged = index.merge_deltas("day=1", ids[3], index.files("day=1", ids[:3])[1])
    assert merged is not None
    fifth = _entries(rng, 300, ids[4])
    index.write("day=1", ids[4], fifth, slots=2)
    found = index.slot_catch_up("day=1", ids, frozenset(ids[:3]), [HASH, BUCKET], 0, 2)
    assert found is not None
    hashes = fifth.column(HASH).to_numpy()
    caught = pa.concat_tables(found.runs).column(HASH).to_numpy()
    assert sorted(caught) == sorted(hashes[slot_of(hashes, 2) == 0])
    assert found.instants == {ids[3], ids[4]}
    lacking = frozenset({ids[0], ids[2]})
    assert index.slot_catch_up("day=1", ids, lacking, [HASH, BUCKET], 0, 2) is None
    # A base that says nothing of what it restates (a rescale writes such a base).
    index.write("day=1", "20261123000000006", fifth, "base", slots=2)
    later = [*ids, "20261123000000006"]
    assert index.slot_catch_up("day=1", later, frozenset(ids), [HASH, BUCKET], 0, 2) is None
