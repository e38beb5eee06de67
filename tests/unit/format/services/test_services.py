"""Cleaning: what it removes and what it must leave; index compaction by size."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket.format.file_group.slices import data_files
from dynbucket.format.hudi import files as names
from dynbucket.format.index import file_names as index_names
from dynbucket.format.index.file_names import index_files
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.services import clean, index_compaction
from dynbucket.format.table.options import TableOptions
from dynbucket.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
MANUAL = TableOptions(
    compaction_async=False,
    clean_automatic=False,
    archive_automatic=False,
    index_compaction_automatic=False,
    lock_lease_seconds=30.0,
)


def test_a_clean_leaves_a_temporary_file_younger_than_a_lease(tmp_path: Path) -> None:
    """A temporary file named for a completed instant may be a copy on its way (a
    compaction carrying that instant's log onto its slice, under the lease): a clean
    removes it only once it is older than any lease could be."""
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=MANUAL)
    t.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [1]}, schema=SCHEMA))
    t.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [2]}, schema=SCHEMA))
    log = next(f for f in data_files(t._store, "day=d1") if f.kind == "log")
    carried = names.log_name(log.file_id, "20991231000000000", 1, log.instant)
    copy = Path(t._store.path("day=d1", f".{carried}.tmp-0123abcd"))
    copy.write_bytes(b"on its way")
    assert clean.clean(t._store, t._spec, retain=1).instant is not None
    assert copy.exists()  # young: it may be a live copy
    old = time.time() - 31
    os.utime(copy, (old, old))
    t.upsert(pa.table({"id": ["b"], "day": ["d1"], "v": [3]}, schema=SCHEMA))
    assert clean.clean(t._store, t._spec, retain=1).instant is not None
    assert not copy.exists()  # left by a writer that died: gone


def test_an_index_compaction_merges_the_newest_deltas_of_a_large_partition(
    tmp_path: Path,
) -> None:
    """Deltas far under ``index.compaction.delta-size-ratio`` of the partition's index base
    are merged into one delta (the base is not rewritten); readers see every key once, a
    clean removes the merged deltas, and deltas as large as a fifth of the base make the
    next one rewrite the base."""
    options = dataclasses.replace(
        MANUAL, cleaner_commits_retained=2, keep_min_commits=4, keep_max_commits=6
    )
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=options)

    def write(ids: list[str]) -> None:
        t.upsert(pa.table({"id": ids, "day": ["d1"] * len(ids), "v": [1] * len(ids)}))

    write([f"b{i}" for i in range(2500)])
    write([f"b{i}" for i in range(2500, 5000)])
    assert (
        index_compaction.compact_index(t._store, t._spec, 1).instant is not None
    )  # the index base
    for w in range(6):
        write([f"n{w}-0", f"n{w}-1"])  # a small delta each
    index = RecordLevelIndex(t._store, t._spec)
    base, deltas = index.files("day=d1", t._timeline.visible())
    assert base is not None and len(deltas) == 6
    scheduled = index_compaction.schedule_index_compaction(t._store, t._spec, 4, by_size=True)
    assert scheduled is not None
    plan = t._timeline.plan(next(i for i in t._timeline.pending() if i.id == scheduled))
    assert plan["partitions"] == [] and plan["merges"] == {"day=d1": [f.name for f in deltas]}
    index_compaction.execute_index_compaction(t._store, t._spec, scheduled)
    base2, deltas2 = index.files("day=d1", t._timeline.visible())
    assert base2 == base and [f.name for f in deltas2] == [
        index_names.merged_delta_name(scheduled, deltas[0].instant)
    ]
    keys = index.record_index_locations("day=d1", t._timeline.visible(), ["id"]).column("id")
    assert len(keys) == len(set(keys.to_pylist())) == 5012
    for w in range(3):
        write([f"m{w}"])
    assert clean.clean(t._store, t._spec).instant is not None
    left = {f.name for f in index_files(t._store, "day=d1")}
    assert not left & {f.name for f in deltas}  # the merged deltas are gone
    keys = index.record_index_locations("day=d1", t._timeline.visible(), ["id"]).column("id")
    assert len(keys) == len(set(keys.to_pylist())) == 5015
    assert t.lookup(pa.table({"id": ["n0-1", "m2"], "day": ["d1", "d1"]})).num_rows == 2
    assert t.check().healthy
    write([f"big{i}" for i in range(2000)])  # deltas over a fifth of the base
    scheduled = index_compaction.schedule_index_compaction(t._store, t._spec, 2, by_size=True)
    assert scheduled is not None
    plan = t._timeline.plan(next(i for i in t._timeline.pending() if i.id == scheduled))
    assert plan["partitions"] == ["day=d1"] and plan["merges"] == {}


def _index_chain(t: Table, writes: int) -> None:
    """New keys per write, each write's index delta merged with the ones before it: a
    chain of merged deltas, each restating the last one (a stream's index)."""
    for w in range(writes):
        ids = [f"k{w}-{i}" for i in range(3)]
        t.upsert(pa.table({"id": ids, "day": ["d"] * 3, "v": [w] * 3}, schema=SCHEMA))
        if w:
            planned = index_compaction.schedule_index_compaction(t._store, t._spec, 2, by_size=True)
            assert planned is not None
            index_compaction.execute_index_compaction(t._store, t._spec, planned)


def test_a_clean_removes_a_restated_file_before_the_one_restating_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing between two removals of one clean saw old deltas with the merged delta
    restating them already gone: an index compaction planned then merged files the clean
    removed next, failed, and stayed pending for good (archival stopped at it). Removed
    oldest first, no listing sees a restated file without its restater."""
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=MANUAL)
    _index_chain(t, 6)
    removed: list[str] = []
    real = t._store.delete

    def delete(path: str) -> None:
        removed.append(os.path.basename(path))
        real(path)

    monkeypatch.setattr(type(t._store), "delete", lambda self, path: delete(path))
    assert clean.clean(t._store, t._spec, retain=1).files_removed >= 3
    index = [n for n in removed if index_names.index_instant(n)]
    assert len(index) >= 3
    assert index == sorted(index, key=lambda n: index_names.index_instant(n) or "")


def test_an_index_compaction_whose_files_a_clean_removed_completes(tmp_path: Path) -> None:
    """Its plan is moot (what restates its files is retained): the partition is not merged,
    and the instant completes instead of failing at every later run."""
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=MANUAL)
    big = [f"b{i}" for i in range(2000)]  # a base the deltas are small against: merges
    t.upsert(pa.table({"id": big, "day": ["d"] * 2000, "v": [0] * 2000}, schema=SCHEMA))
    assert index_compaction.compact_index(t._store, t._spec, 1).instant is not None
    _index_chain(t, 3)
    t.upsert(pa.table({"id": ["x"], "day": ["d"], "v": [9]}, schema=SCHEMA))
    planned = index_compaction.schedule_index_compaction(t._store, t._spec, 2, by_size=True)
    assert planned is not None
    plan = t._timeline.plan(next(i for i in t._timeline.pending() if i.id == planned))
    (gone, *_) = plan["merges"]["day=d"]
    os.remove(t._store.path(".hoodie/.dynbucket/rli/day=d", gone))  # as a clean would
    done = index_compaction.execute_index_compaction(t._store, t._spec, planned)
    assert done.instant == planned and done.files_written == 0
    assert t._timeline.pending() == []


def test_a_clean_keeps_what_a_pending_write_of_another_writer_reads(tmp_path: Path) -> None:
    """Several writers: a write that began before others rewrote its file group reads the
    slice it saw (a copy-on-write rewrite merges it) until it commits or is refused; a
    clean keeps that slice, below its instant and below the oldest instant pending when it
    began, and cleans it once the write is gone."""
    from dynbucket.format.timeline.timeline import Timeline
    from dynbucket.format.timeline.transaction import Transaction

    options = dataclasses.replace(
        MANUAL, table_type="COPY_ON_WRITE", write_concurrency_mode="OPTIMISTIC_CONCURRENCY_CONTROL"
    )
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=options)
    first = t.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [1]}, schema=SCHEMA)).instant
    seen = {f.path for f in data_files(t._store, "day=d1")}  # the base the writes below read
    older = Transaction.begin(t._store, t._spec, "commit", "upsert", hold=False)
    pending = Transaction.begin(t._store, t._spec, "commit", "upsert", hold=False)
    try:
        later = [
            t.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [v]}, schema=SCHEMA)).instant
            for v in (2, 3, 4)
        ]
        assert clean.clean(t._store, t._spec, retain=1).instant is not None
        assert seen <= {f.path for f in data_files(t._store, "day=d1")}
        # The bound is the oldest unseen instant: had `older` completed with a base of the
        # group after `first`, a horizon at it would remove `first`'s base from under
        # `pending`, which never saw it.
        timeline = Timeline(t._store, t._spec.options.merge_on_read)
        completed = [first, older.id, *later]
        own = [i for i in timeline.pending() if i.id == pending.id]
        horizon = clean._horizon(timeline, completed, later[-1], own)
        assert horizon == first
    finally:
        pending.abort()
        older.abort()
    t.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [5]}, schema=SCHEMA))
    assert clean.clean(t._store, t._spec, retain=1).instant is not None
    assert not seen & {f.path for f in data_files(t._store, "day=d1")}  # gone: nobody reads it


def test_a_cleans_horizon_never_goes_back(tmp_path: Path) -> None:
    """Several writers: a write that began while a compaction planned long ago was pending
    bounds a clean's horizon below that compaction; a clean since may already have cleaned
    past it (the compaction's group kept the newest slice the write reads). Such a clean
    is not planned: a horizon below the last one would make readers and ``check`` count
    files as missing that the earlier clean removed (horizons only grow)."""
    from dynbucket.format.read.snapshot import cleaning_horizon
    from dynbucket.format.services import compaction
    from dynbucket.format.timeline.timeline import Timeline
    from dynbucket.format.timeline.transaction import Transaction

    options = dataclasses.replace(MANUAL, write_concurrency_mode="OPTIMISTIC_CONCURRENCY_CONTROL")
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=options)

    def write(v: int) -> str:
        rows = pa.table({"id": ["a", "b"], "day": ["d1", "d2"], "v": [v, v]}, schema=SCHEMA)
        return t.upsert(rows).instant

    write(1)
    write(2)
    planned = compaction.schedule(t._store, t._spec, 1, ["day=d1"])
    assert planned is not None
    for v in (3, 4, 5):
        write(v)
    first = clean.clean(t._store, t._spec, retain=1)
    assert first.instant is not None
    timeline = Timeline(t._store, t._spec.options.merge_on_read)
    before = cleaning_horizon(timeline)
    assert before is not None and before.earliest > planned
    pending = Transaction.begin(t._store, t._spec, "commit", "upsert", hold=False)
    try:
        for v in (6, 7):
            write(v)
        assert clean.schedule_clean(t._store, t._spec, retain=1) is None
    finally:
        pending.abort()
    write(8)
    assert clean.clean(t._store, t._spec, retain=1).instant is not None
    after = cleaning_horizon(Timeline(t._store, t._spec.options.merge_on_read))
    assert after is not None and after.earliest > before.earliest
    assert t.check().healthy
    assert sorted(t.to_arrow().column("v").to_pylist()) == [8, 8]


def test_a_clean_that_would_plan_nothing_takes_no_lease_and_begins_no_instant(
    tmp_path: Path,
) -> None:
    """A clean is due after every ``hoodie.clean.max.commits`` data commits until one
    completes: with fewer commits than retained, or beside another writer whose pending
    write holds the horizon at the last clean's, it plans nothing. Looked at without the
    lease, it then takes no lease and writes no timeline file (each write beside another
    writer did both, and removed the instant again)."""
    from dynbucket.format.table.paths import META_DIR
    from dynbucket.format.timeline.lock import LEASE_PREFIX
    from dynbucket.format.timeline.timeline import Timeline
    from dynbucket.format.timeline.transaction import Transaction

    options = dataclasses.replace(MANUAL, write_concurrency_mode="OPTIMISTIC_CONCURRENCY_CONTROL")
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=options)

    def write(v: int) -> None:
        t.upsert(pa.table({"id": ["a", "b"], "day": ["d1", "d2"], "v": [v, v]}, schema=SCHEMA))

    def leases() -> list[str]:
        listed = t._store.list_files(t._store.path(META_DIR))
        return sorted(i.base_name for i in listed if LEASE_PREFIX in i.base_name)

    def timeline_files() -> int:
        return len(Timeline(t._store).instants())

    write(1)
    write(2)
    before, instants = leases(), timeline_files()
    assert before  # the writes took the lease
    assert clean.schedule_clean(t._store, t._spec, retain=5) is None  # fewer than retained
    assert leases() == before and timeline_files() == instants
    write(3)
    assert clean.clean(t._store, t._spec, retain=1).instant is not None
    pending = Transaction.begin(t._store, t._spec, "commit", "upsert", hold=False)
    try:
        write(4)
        write(5)
        before, instants = leases(), timeline_files()
        assert clean.schedule_clean(t._store, t._spec, retain=1) is None  # held back
        assert leases() == before and timeline_files() == instants
    finally:
        pending.abort()
    write(6)
    assert clean.clean(t._store, t._spec, retain=1).instant is not None
    assert t.check().healthy
