"""When a writer's assigner caches match the table (one rule for both writers), and
scenarios with exact bucket ids: the in-process writer catches its slot's caches up with
what another handle committed (the same slot object, reading only the index deltas it
missed: no load again), or loads a partition again when an index compaction restated
them."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dynbucket.actors import DynamicBucketIndex
from dynbucket.options import TableOptions
from dynbucket.table import Table
from dynbucket.write.writer import CacheMatch


def test_a_match_holds_for_the_last_data_write() -> None:
    match = CacheMatch()
    assert match.holds(None) and not match.holds("1")
    match.committed("1")
    assert match.holds("1") and not match.holds("2")
    match.emptied("7")
    assert match.holds("7") and not match.holds("1")


def test_with_several_writers_a_match_holds_for_the_set_of_data_writes_less_its_archived() -> None:
    match = CacheMatch()
    match.committed("writes:1,2,3")
    assert match.holds("writes:1,2,3")
    assert match.holds("writes:2,3") and match.holds("writes:3")  # the oldest archived
    assert not match.holds("writes:1,2,3,4")  # another writer's data write
    assert not match.holds("writes:2,3,4")  # archived, and another's write
    assert not match.holds("writes:1,3")  # not the oldest gone: not archival
    assert not match.holds("3")


def test_a_match_holds_while_the_writes_pending_at_its_begin_are_pending() -> None:
    match = CacheMatch()
    match.committed("writes:1,3;pending:2")  # write 2 began before 3, was pending at 3's
    assert match.holds("writes:1,3;pending:2") and match.holds("writes:3;pending:2")
    assert not match.holds("writes:1,2,3;pending:")  # 2 completed
    assert not match.holds("writes:3;pending:")  # 2 completed and archived, with 1
    assert not match.holds("writes:3")


SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])


def _rows(ids: list[str], v: int) -> pa.Table:
    return pa.table({"id": ids, "day": ["d"] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def _table(path: Path, keys_per_bucket: int = 2, options: TableOptions | None = None) -> Table:
    """A table of ``SCHEMA`` keyed by ``id``, partitioned by ``day``."""
    index = DynamicBucketIndex(max_keys_per_bucket=keys_per_bucket)
    return Table.create(str(path), SCHEMA, "id", "day", index=index, options=options)


def _buckets(t: Table) -> dict[str, int]:
    rows = t.to_arrow()
    assert pc.count_distinct(rows.column("id")).as_py() == rows.num_rows  # one row per key
    return dict(zip(rows.column("id").to_pylist(), rows.column("_bucket").to_pylist(), strict=True))


def _spy(slot: object) -> list[int]:
    """Counts the slot's catch-ups (each after another writer's commit)."""
    calls: list[int] = []
    catch_up = slot.catch_up  # type: ignore[attr-defined]
    slot.catch_up = lambda latest: calls.append(1) or catch_up(latest)  # type: ignore[attr-defined]
    return calls


def test_the_in_process_writer_catches_its_slot_up_after_another_commit(tmp_path: Path) -> None:
    mine = _table(tmp_path / "t")
    mine.upsert(_rows(["k1"], 1))  # bucket 0 holds 1 of 2
    [slot] = mine._writer().scheme.slots
    other = Table.open(mine.uri)
    # Lanes: the other learns this writer's lane from its commit and takes lane 1 of 2.
    other.upsert(_rows(["k2", "k3"], 2))
    assert _buckets(mine) == {"k1": 0, "k2": 1, "k3": 1}
    # A stale cache would take k3 for new and put it in bucket 0's last place (two rows).
    r = mine.upsert(_rows(["k3", "k4"], 3))
    assert (r.keys_updated, r.keys_inserted) == (1, 1)
    assert _buckets(mine) == {"k1": 0, "k2": 1, "k3": 1, "k4": 0}
    assert mine._writer().scheme.slots == [slot]  # caught up, not replaced
    stats = slot.core.stats()
    assert (stats.bootstraps, stats.catch_ups) == (1, 1)  # the partition was not loaded again


def test_another_writers_delete_gives_its_room_back_to_a_caught_up_cache(tmp_path: Path) -> None:
    mine = _table(tmp_path / "t")
    mine.upsert(_rows(["k1", "k2"], 1))  # bucket 0 full
    [slot] = mine._writer().scheme.slots
    other = Table.open(mine.uri)
    other.upsert(_rows(["k3"], 2))  # bucket 1: its lane, 1 of 2
    other.delete(pa.table({"id": ["k1"], "day": ["d"]}))  # bucket 0: room for one
    mine.upsert(_rows(["k2", "k9", "k1"], 3))  # k2 known; k9 and k1 (back) new
    # k9 takes the room the delete gave back; k1 opens bucket 2, lane 0's next.
    assert _buckets(mine) == {"k2": 0, "k9": 0, "k3": 1, "k1": 2}
    stats = slot.core.stats()
    assert (stats.bootstraps, stats.catch_ups) == (1, 1)
    assert mine.check().healthy


def test_a_cache_loads_again_after_an_index_compaction_restated_what_it_missed(
    tmp_path: Path,
) -> None:
    mine = _table(tmp_path / "t")
    mine.upsert(_rows(["k1"], 1))
    [slot] = mine._writer().scheme.slots
    other = Table.open(mine.uri)
    other.upsert(_rows(["k2", "k3"], 2))
    assert other.compact_index(min_files=1).instant is not None  # a new base: k2, k3 in it
    mine.upsert(_rows(["k3", "k4"], 3))
    assert _buckets(mine) == {"k1": 0, "k2": 1, "k3": 1, "k4": 0}  # lanes 0 and 1 of 2
    stats = slot.core.stats()
    assert (stats.bootstraps, stats.catch_ups) == (2, 1)


def test_slots_catch_up_to_what_a_fresh_writer_computes(tmp_path: Path) -> None:
    """Three slots, another writer's inserts and deletes between each write: every bucket
    id equal to the one a new handle (loading the index) would give."""
    mine, fresh = _table(tmp_path / "a", 3), _table(tmp_path / "b", 3)
    others = [Table.open(mine.uri), Table.open(fresh.uri)]
    for step in range(5):
        ids = [f"m{step}-{i}" for i in range(4)] + [f"o{step - 1}-{i}" for i in range(2)]
        for t in (mine, fresh):
            t.upsert(_rows(ids, step), assigner_slots=3)
        for o in others:
            o.upsert(_rows([f"o{step}-{i}" for i in range(5)], step), assigner_slots=3)
            o.delete(pa.table({"id": [f"m{step}-0", f"o{step}-4"], "day": ["d", "d"]}))
        fresh._writer().scheme.close()  # the next write loads every slot again
    assert _buckets(mine) == _buckets(fresh)
    assert sum(s.core.stats().catch_ups for s in mine._writer().scheme.slots) > 0
    assert mine.check().healthy


def test_services_of_another_handle_keep_the_caches(tmp_path: Path) -> None:
    """A compaction, a clean and an index compaction move no key: a writer's caches stay
    as they are across them, whoever ran them (a compaction beside the writes is another
    process's instant too)."""
    mine = _table(tmp_path / "t")
    mine.upsert(_rows(["k1", "k2"], 1))
    mine.upsert(_rows(["k1", "k3"], 2))  # k3 opens bucket 1; k1 updated in a log
    [slot] = mine._writer().scheme.slots
    calls = _spy(slot)
    other = Table.open(mine.uri)
    assert other.compact().instant is not None
    assert other.compact_index(min_files=1).instant is not None
    r = mine.upsert(_rows(["k3", "k4"], 3))
    assert (r.keys_updated, r.keys_inserted) == (1, 1)
    assert calls == []
    assert _buckets(mine) == {"k1": 0, "k2": 0, "k3": 1, "k4": 1}
    other.upsert(_rows(["k5"], 4))  # a data write: now the caches must follow
    mine.upsert(_rows(["k6"], 5))
    assert calls == [1]


def test_archival_keeps_the_caches(tmp_path: Path) -> None:
    """Archival takes the oldest data writes off the active timeline, which is what the
    caches of several writers match: they stay (a version 9 slot would read its
    partition's record index again)."""
    mine = _table(
        tmp_path / "t",
        100,
        TableOptions(keep_min_commits=2, keep_max_commits=3, cleaner_commits_retained=1),
    )
    mine.upsert(_rows(["k0"], 0))
    [slot] = mine._writer().scheme.slots
    resets = _spy(slot)
    for i in range(1, 8):
        mine.upsert(_rows([f"k{i}"], i))
    mine.wait_for_services()
    assert mine.snapshot().timeline.archived().floor  # archival ran
    mine.upsert(_rows(["k8"], 8))
    assert resets == []
    assert len(_buckets(mine)) == 9


def test_a_retry_after_a_compaction_beside_keeps_the_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A write retried after a conflict with a log compaction another handle planned
    beside it (an update's log that the merged log would hide) keeps its slot's caches:
    the aborted attempt left them as committed, and a log compaction moves no key (the
    Spark writer's rule too). Each emptying costs a version 9 slot a read of its
    partitions' record index."""
    from dynbucket.format.file_group.slices import data_files
    from dynbucket.format.timeline.transaction import schedule
    from tests.unit.format.timeline.test_conflicts import _beside, _retries, _rows, _table

    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path)
    t.upsert(_rows(["k1", "k2"], 1))
    t.upsert(_rows(["k1"], 2))  # a log: the log compaction has a slice to merge
    [slot] = t._writer().scheme.slots
    resets = _spy(slot)
    file_id = data_files(t._store, "day=d1")[0].file_id
    plan = {"groups": [["day=d1", file_id, "", [], ""]]}
    _beside(
        monkeypatch,
        lambda: schedule(t._store, t._spec, "logcompaction", "logcompact", lambda _: plan),
    )
    t.upsert(_rows(["k1", "k3"], 3))
    assert _retries(caplog) == 1
    assert resets == []
    rows = {r["id"]: (r["v"], r["_bucket"]) for r in t.to_arrow().to_pylist()}
    assert rows == {"k1": (3, 0), "k2": (1, 0), "k3": (3, 0)}
    assert t.check().healthy


def test_a_write_pending_beside_a_cached_one_then_archived_empties_the_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer's write began before this writer's (an older id), completed after
    its commit and was archived at once, with the oldest: on no listing this writer makes,
    it still placed keys its caches miss. The caches hold only while every write pending
    at their write's begin is pending still (the writers model, seed 945312: a key placed
    a second time, in another bucket)."""
    from dynbucket.format.timeline.archive import archive
    from tests.unit.format.timeline.test_conflicts import _beside, _rows, _table

    mine = _table(tmp_path)
    mine.upsert(_rows(["k1"], 1))
    [slot] = mine._writer().scheme.slots
    other = Table.open(mine.uri)
    # The other write begins first; this writer's whole write runs before its commit.
    _beside(monkeypatch, lambda: mine.upsert(_rows(["k3"], 2)))
    late = other.upsert(_rows(["k2"], 3))
    ours = mine.snapshot().timeline.instants()[-1].id
    assert late.instant < ours  # completed after this writer's write, older
    assert archive(mine._store, True, keep_min=1, keep_max=1, lease_seconds=5).floor >= late.instant
    r = mine.upsert(_rows(["k2", "k4"], 4))
    assert (r.keys_updated, r.keys_inserted) == (1, 1)  # k2 is the other writer's
    # Lanes: the other write began after this writer's first commit, which names lane 0: it
    # takes lane 1 of 2 (bucket 1); this writer keeps lane 0 (bucket 0's room).
    assert _buckets(mine) == {"k1": 0, "k2": 1, "k3": 0, "k4": 0}
    stats = slot.core.stats()
    assert (stats.bootstraps, stats.catch_ups) == (1, 1)  # it read what it missed
    assert mine.check().healthy


def test_a_service_completed_between_two_writes_keeps_every_slots_caches(tmp_path: Path) -> None:
    """A compaction (or a clean) completes after a write of two slots: the next write's
    slots keep their caches. Their latest successful checkpoint is the latest data write,
    not the service's instant; taken as the service's, it differed from the one the
    counts took every slot's keys of, and every slot dropped every partition at every
    write once the services ran between writes (a Spark stream's slots bootstrapped each
    partition again per micro-batch from its 6th on)."""
    mine = _table(tmp_path / "t", 100, TableOptions(compaction_async=False, clean_automatic=False))
    mine.upsert(_rows([f"k{i}" for i in range(40)], 1), assigner_slots=2)
    slots = mine._writer().scheme.slots
    mine.upsert(_rows([f"k{i}" for i in range(20, 60)], 2), assigner_slots=2)
    assert mine.compact().instant is not None
    r = mine.upsert(_rows([f"k{i}" for i in range(50, 90)], 3), assigner_slots=2)
    assert (r.keys_updated, r.keys_inserted) == (10, 30)
    assert mine._writer().scheme.slots == slots
    stats = [s.core.stats() for s in slots]
    assert [(s.bootstraps, s.evictions) for s in stats] == [(1, 0), (1, 0)]
    assert mine.check().healthy
