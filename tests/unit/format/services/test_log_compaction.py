"""Log compaction: a slice's logs merged into one log, without its base. The merged log
comes after the logs it merges and before the logs written while it ran; once it
completes, readers skip what it restates, a clean removes that, and every reader (dynbucket
and hudi-rs, which reads every log) reads what the logs one by one give."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dynbucket.format.file_group.slices import DataFile, data_files
from dynbucket.format.hudi import files as names
from dynbucket.format.services import clean, compaction, log_compaction
from dynbucket.format.table.options import TableOptions
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
# Services off: the test drives them by hand.
MANUAL = TableOptions(
    compaction_async=False,
    clean_automatic=False,
    archive_automatic=False,
    index_compaction_automatic=False,
    cleaner_commits_retained=2,
    keep_min_commits=4,
    keep_max_commits=6,
)


def _rows(ids: list[str], v: int | list[int]) -> pa.Table:
    values = v if isinstance(v, list) else [v] * len(ids)
    return pa.table({"id": ids, "day": ["d1"] * len(ids), "v": values}, schema=SCHEMA)


def _live(t: Table, as_of: str | None = None) -> dict[str, int]:
    rows = t.to_arrow(as_of=as_of, meta_columns=False)
    return dict(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist(), strict=True))


def _slice_logs(t: Table) -> list[str]:
    (ref,) = t.snapshot().slices()
    return [f.name for f in ref.slice.logs]


def _log(name: str, size: int) -> DataFile:
    parsed = names.parse(name)
    assert parsed is not None
    return DataFile(parsed.instant, name, "log", size, parsed.file_id, parsed.base_instant)


def test_logs_merged_beside_a_write_read_the_same_everywhere(tmp_path: Path) -> None:
    # An integer ordering field: hudi-rs 0.5 reads no delete of a table without one.
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", "v", options=MANUAL)
    base_keys = [f"k{i}" for i in range(20_000)]  # logs far under 0.2 of the base: merged
    t.upsert(_rows(base_keys, 0))
    model = dict.fromkeys(base_keys, 0)
    logs = []
    for w, ids in enumerate((["k1", "n1"], ["k2"], ["k1", "k3"]), start=1):
        logs.append(t.upsert(_rows(ids, w)).instant)
        model.update(dict.fromkeys(ids, w))
    logs.append(t.delete(pa.table({"id": ["k2", "k4"], "day": ["d1", "d1"]})).instant)
    for k in ("k2", "k4"):
        del model[k]
    before = _slice_logs(t)
    assert len(before) == 4
    # 1. Scheduled: the plan names the four logs (the delete's log is the smallest: no tier
    # of two, so the newest four) and the merged log, the slice's next (version 5), of its
    # instant, saying the first merged instant.
    scheduled = log_compaction.schedule_log(t._store, t._spec, min_logs=4)
    assert scheduled is not None
    timeline = Timeline(t._store, True)
    (pending,) = timeline.pending()
    assert (pending.id, pending.action) == (scheduled, "logcompaction")
    ((partition, file_id, base, merged_logs, merged),) = timeline.plan(pending)["groups"]
    assert merged_logs == before
    assert merged == names.log_name(file_id, base, 5, scheduled, logs[0])
    assert (t._store.root + "/.hoodie/" + f"{scheduled}.logcompaction.inflight") in [
        i.path for i in t._store.list_files(t._store.path(".hoodie"))
    ]
    # 2. A write while it is pending: its log is the slice's version 5 too (the merged log
    # is not visible), ordered after the merged one by its writer's instant.
    late = t.upsert(_rows(["k3", "n2"], 9)).instant
    model.update(k3=9, n2=9)
    late_log = names.log_name(file_id, base, 5, late)
    assert _slice_logs(t) == [*before, late_log]
    # 3. Executed and completed, without the lease, as a delta commit.
    done = log_compaction.run_log(t._store, t._spec, scheduled)
    assert (done.instant, done.files_written, done.rows) == (scheduled, 1, 5)  # 3 up, 2 del
    assert t._store.exists(t._store.path(".hoodie", f"{scheduled}.deltacommit"))
    assert [i.action for i in Timeline(t._store, True).completed()][-2:] == [
        "logcompaction",
        "commit",
    ]
    # Readers read the merged log and the late one, not the four it restates.
    assert _slice_logs(t) == [merged, late_log]
    assert _live(t) == model
    check_hudi_reads(t)  # snapshot, and as of each instant (the merged logs are there)
    assert t.check().healthy
    # The next write goes after both.
    newest = t.upsert(_rows(["k5"], 10)).instant
    model["k5"] = 10
    assert _slice_logs(t)[-1] == names.log_name(file_id, base, 6, newest)
    # 4. A clean, once the merged log is retained, removes the four logs it restates.
    for w in range(11, 14):
        t.upsert(_rows(["k6"], w))
    model["k6"] = 13
    cleaned = clean.clean(t._store, t._spec)
    assert cleaned.files_removed >= 4
    left = {f.name for f in data_files(t._store, partition)}
    assert not left & set(before)
    assert merged in left and late_log in left
    assert _live(t) == model
    check_hudi_reads(t)
    assert t.check().healthy
    # A second run of the completed plan changes nothing.
    assert log_compaction.run_log(t._store, t._spec, scheduled).instant is None


def test_a_merge_run_takes_tiers_of_growing_sizes() -> None:
    """From the newest log, older ones while at most twice those taken together; fewer
    than two taken: the newest ``min_logs``."""
    fid, base = "00000000-aaaa", "20260101000000000"
    logs = [
        _log(names.log_name(fid, base, v, f"2026010100000{v:04d}"), size)
        for v, size in enumerate([100, 10, 1, 1, 1, 1], start=1)
    ]
    assert [f.size for f in compaction.merge_run(logs, 5)] == [1, 1, 1, 1]
    assert [f.size for f in compaction.merge_run(logs[:3], 2)] == [10, 1]
    assert [f.size for f in compaction.merge_run([*logs[:2], _log(logs[2].name, 20)], 2)] == [
        10,
        20,
    ]
    grown = [*logs[:2], _log(logs[2].name, 4), *logs[3:]]  # 100, 10, 4, 1, 1, 1
    assert [f.size for f in compaction.merge_run(grown, 5)] == [10, 4, 1, 1, 1]
    assert [f.size for f in compaction.merge_run([*logs[:2], _log(logs[2].name, 3)], 2)] == [
        10,
        3,
    ]  # 10 is more than twice 3: the newest two


def test_a_slice_is_merged_until_its_logs_reach_the_ratio_of_its_base(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=MANUAL)
    t.upsert(_rows([f"k{i}" for i in range(20_000)], 0))
    for w in range(1, 4):
        t.upsert(_rows([f"k{w}"], w))
    (ref,) = t.snapshot().slices()
    assert not compaction.full_due(t._spec, ref.slice)  # small logs: merged
    assert compaction.schedule(t._store, t._spec, 2, by_size=True) is None
    assert log_compaction.schedule_log(t._store, t._spec, 2) is not None
    t.upsert(_rows([f"k{i}" for i in range(0, 20_000, 2)], 7))  # half the base again
    (ref,) = t.snapshot().slices()
    assert compaction.full_due(t._spec, ref.slice)  # logs over 0.2 of the base: compacted
    assert log_compaction.schedule_log(t._store, t._spec, 2) is None  # the pending one plans it
    off = dataclasses.replace(t._spec, options=TableOptions(log_compaction_enable=False))
    assert compaction.full_due(off, ref.slice)


@pytest.mark.sample(1)
@pytest.mark.parametrize("version", [6, 9])
def test_merged_logs_read_as_the_logs_one_by_one(tmp_path: Path, version: int) -> None:
    """Random upserts and deletes (an ordering field: a delete, then an upsert of a smaller
    ordering value, brings the base row back), merged at random points: the table reads as
    a twin written the same way without log compaction, in dynbucket and hudi-rs. A clean
    then removes every log a retained merged log restates, in both versions' log names
    (version 9 names a log by its own instant, not its slice's base: a clean that matched
    slices by name kept them all, and a soak's groups grew to 99 files against 22)."""
    rng = np.random.default_rng(11)
    options = dataclasses.replace(MANUAL, table_version=version)
    merged_table = Table.create(str(tmp_path / "m"), SCHEMA, "id", "day", "v", options=options)
    twin = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", "v", options=options)
    keys = [f"k{i}" for i in range(30)]
    cold = [f"c{i}" for i in range(20_000)]  # a base large enough that logs are merged
    for t in (merged_table, twin):
        t.upsert(_rows(keys + cold, 50))
    ran = 0
    for _ in range(14):
        ids = list(dict.fromkeys(rng.choice(keys, 6).tolist()))
        if rng.random() < 0.3:
            batch = pa.table({"id": ids, "day": ["d1"] * len(ids)})
            for t in (merged_table, twin):
                t.delete(batch)
        else:
            values = rng.integers(0, 100, len(ids)).tolist()
            for t in (merged_table, twin):
                t.upsert(_rows(ids, values))
        if rng.random() < 0.4:
            scheduled = log_compaction.schedule_log(merged_table._store, merged_table._spec, 2)
            if scheduled is not None:
                log_compaction.run_log(merged_table._store, merged_table._spec, scheduled)
                ran += 1
        assert _live(merged_table) == _live(twin)
    assert ran >= 3
    assert len(_slice_logs(merged_table)) < len(_slice_logs(twin))
    check_hudi_reads(merged_table)  # hudi-rs reads the merged logs and the logs they restate
    # Cleaned: hudi-rs reads the merged logs alone, each a delete block then a data block.
    for w in range(3):
        for t in (merged_table, twin):
            t.upsert(_rows([f"c{w}"], 60))
    assert clean.clean(merged_table._store, merged_table._spec).files_removed > 0
    (ref,) = merged_table.snapshot().slices()
    on_storage = [f.name for f in data_files(merged_table._store, ref.partition)]
    assert sorted(on_storage) == sorted(f.name for f in ref.slice.files)  # nothing restated
    assert _live(merged_table) == _live(twin)
    check_hudi_reads(merged_table)
    assert merged_table.check().healthy


def test_a_merged_slice_is_due_again_only_after_as_many_new_logs(tmp_path: Path) -> None:
    """A slice's logs after its newest merged log make it due (``slices.unmerged``): a
    slice holding merged logs of growing sizes is not merged again after every write."""
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=MANUAL)
    t.upsert(_rows([f"k{i}" for i in range(20_000)], 0))
    for w in range(1, 5):
        t.upsert(_rows([f"k{w}"], w))
    first = log_compaction.schedule_log(t._store, t._spec, 4)
    assert first is not None
    log_compaction.run_log(t._store, t._spec, first)
    for w in range(5, 8):
        t.upsert(_rows([f"k{w}"], w))
    assert len(_slice_logs(t)) == 4  # the merged log and three new ones: not due at 4
    assert log_compaction.schedule_log(t._store, t._spec, 4) is None
    assert compaction.schedule(t._store, t._spec, 4, by_size=True) is None
    last = t.upsert(_rows(["k8"], 8)).instant
    second = log_compaction.schedule_log(t._store, t._spec, 4)
    assert second is not None
    ((_, _, _, logs, merged),) = Timeline(t._store, True).plan(
        next(i for i in Timeline(t._store, True).pending() if i.id == second)
    )["groups"]
    # The four new logs, and the merged one too: at most twice their size together.
    assert len(logs) == 5 and names.parse(merged).merges_from == names.parse(logs[0]).instant
    assert names.parse(logs[-1]).instant == last
