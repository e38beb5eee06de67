"""When a writer's assigner caches match the table (one rule for both writers), and a
scenario with exact bucket ids: the in-process writer empties its slot's caches after
another handle committed (the same slot object, reset, not replaced)."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dynbucket.actors import DynamicBucketOptions
from dynbucket.options import TableOptions
from dynbucket.table import Table
from dynbucket.write.caches import CacheMatch


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


SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])


def _rows(ids: list[str], v: int) -> pa.Table:
    return pa.table({"id": ids, "day": ["d"] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def _buckets(t: Table) -> dict[str, int]:
    rows = t.to_arrow()
    assert pc.count_distinct(rows.column("id")).as_py() == rows.num_rows  # one row per key
    return dict(zip(rows.column("id").to_pylist(), rows.column("_bucket").to_pylist(), strict=True))


def test_the_in_process_writer_resets_its_slot_after_another_commit(tmp_path: Path) -> None:
    mine = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day",
                        index=DynamicBucketOptions(max_keys_per_bucket=2))  # fmt: skip
    mine.upsert(_rows(["k1"], 1))  # bucket 0 holds 1 of 2
    [slot] = mine._writer().scheme.slots
    other = Table.open(mine.uri)
    other.upsert(_rows(["k2", "k3"], 2))  # k2 fills bucket 0, k3 opens bucket 1
    assert _buckets(mine) == {"k1": 0, "k2": 0, "k3": 1}
    # A stale cache would take k3 for new and put it in bucket 0's last place.
    r = mine.upsert(_rows(["k3", "k4"], 3))
    assert (r.keys_updated, r.keys_inserted) == (1, 1)
    assert _buckets(mine) == {"k1": 0, "k2": 0, "k3": 1, "k4": 1}
    assert mine._writer().scheme.slots == [slot]  # emptied, not replaced


def test_services_of_another_handle_keep_the_caches(tmp_path: Path) -> None:
    """A compaction, a clean and an index compaction move no key: a writer's caches stay
    as they are across them, whoever ran them (a compaction beside the writes is another
    process's instant too)."""
    mine = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day",
                        index=DynamicBucketOptions(max_keys_per_bucket=2))  # fmt: skip
    mine.upsert(_rows(["k1", "k2"], 1))
    mine.upsert(_rows(["k1", "k3"], 2))  # k3 opens bucket 1; k1 updated in a log
    [slot] = mine._writer().scheme.slots
    resets = []
    reset = slot.reset
    slot.reset = lambda: resets.append(1) or reset()  # type: ignore[method-assign]
    other = Table.open(mine.uri)
    assert other.compact().instant is not None
    assert other.compact_index(min_files=1).instant is not None
    r = mine.upsert(_rows(["k3", "k4"], 3))
    assert (r.keys_updated, r.keys_inserted) == (1, 1)
    assert resets == []
    assert _buckets(mine) == {"k1": 0, "k2": 0, "k3": 1, "k4": 1}
    other.upsert(_rows(["k5"], 4))  # a data write: now the caches must go
    mine.upsert(_rows(["k6"], 5))
    assert resets == [1]


def test_archival_keeps_the_caches(tmp_path: Path) -> None:
    """Archival takes the oldest data writes off the active timeline, which is what the
    caches of several writers match: they stay (a version 9 slot would read its
    partition's record index again)."""
    mine = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "day",
        index=DynamicBucketOptions(max_keys_per_bucket=100),
        options=TableOptions(keep_min_commits=2, keep_max_commits=3, cleaner_commits_retained=1),
    )  # fmt: skip
    mine.upsert(_rows(["k0"], 0))
    [slot] = mine._writer().scheme.slots
    resets = []
    reset = slot.reset
    slot.reset = lambda: resets.append(1) or reset()  # type: ignore[method-assign]
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
    """A write retried after a conflict with a compaction another handle ran beside it
    (an update's log against a rewritten base) keeps its slot's caches: the aborted
    attempt left them as committed, and a compaction moves no key (the Spark writer's rule
    too). Each emptying costs a version 9 slot a read of its partitions' record index."""
    from tests.unit.format.timeline.test_conflicts import _beside, _retries, _rows, _table

    caplog.set_level(logging.INFO, "dynbucket.write.retry")
    t = _table(tmp_path)
    t.upsert(_rows(["k1", "k2"], 1))
    t.upsert(_rows(["k1"], 2))  # a log: the compaction has a slice to rewrite
    [slot] = t._writer().scheme.slots
    resets = []
    reset = slot.reset
    slot.reset = lambda: resets.append(1) or reset()  # type: ignore[method-assign]
    other = Table.open(t.uri)
    _beside(monkeypatch, lambda: other.compact())
    t.upsert(_rows(["k1", "k3"], 3))
    assert _retries(caplog) == 1
    assert resets == []
    rows = {r["id"]: (r["v"], r["_bucket"]) for r in t.to_arrow().to_pylist()}
    assert rows == {"k1": (3, 0), "k2": (1, 0), "k3": (3, 0)}
    assert t.check().healthy
