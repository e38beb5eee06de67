"""Compaction scheduled, executed and finished apart (beside the writes): while it is
pending, writes put their logs on the slices they know and every reader (dynbucket and
hudi-rs) reads them; when it finishes, the logs written meanwhile are carried onto its
slice, so that readers read them after it too. Writers never roll a pending compaction
back; the next run executes it again, and a second finisher of one plan finds it done."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from dynbucket.format.file_group.slices import data_files
from dynbucket.format.hudi import files as names
from dynbucket.format.services import compaction
from dynbucket.format.services.service import AUTOMATIC
from dynbucket.format.table.options import TableOptions
from dynbucket.format.timeline.lock import WriterLock
from dynbucket.format.timeline.plans import compaction_groups
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
# Services off: the test drives compaction by hand.
MANUAL = TableOptions(
    compaction_async=False,
    clean_automatic=False,
    archive_automatic=False,
    index_compaction_automatic=False,
)


def _rows(ids: list[str], v: int) -> pa.Table:
    return pa.table({"id": ids, "day": ["d1"] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def _live(t: Table) -> dict[str, int]:
    rows = t.to_arrow(meta_columns=False)
    return dict(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist(), strict=True))


def _logs(t: Table) -> list[tuple[str, str, int]]:
    """(writer instant, base instant, version) of every log file, in write order."""
    logs = [f for f in data_files(t._store, "day=d1") if f.kind == "log"]
    return sorted((f.instant, f.base_instant, f.version) for f in logs)


def test_writes_during_a_compaction_are_carried_onto_its_slice(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=MANUAL)
    base = t.upsert(_rows(["a", "b", "c"], 1)).instant
    t.upsert(_rows(["a"], 2))  # log 1 on the base
    t.upsert(_rows(["b"], 3))  # log 2
    scheduled = compaction.schedule(t._store, t._spec, min_logs=2)
    assert scheduled is not None
    written = compaction.execute(t._store, t._spec, scheduled)  # base file of `scheduled`
    # 1. Pending: a write puts its log on the slice it knows; both readers read it.
    late = t.upsert(_rows(["a", "d"], 4)).instant
    assert _logs(t)[-1] == (late, base, 3)
    expected = {"a": 4, "b": 3, "c": 1, "d": 4}
    assert _live(t) == expected
    check_hudi_reads(t)
    # 2. A writer's begin leaves the compaction pending (it is nobody's dead instant).
    late2 = t.upsert(_rows(["c"], 5)).instant
    expected["c"] = 5
    assert [i.id for i in Timeline(t._store, True).pending()] == [scheduled]
    # 3. Finished: the two late logs carried onto its slice, in order, same writers.
    done = compaction.finish(t._store, t._spec, scheduled, written)
    assert (done.instant, done.files_written) == (scheduled, 1)
    assert _logs(t)[-4:] == sorted(
        [(late, base, 3), (late, scheduled, 1), (late2, base, 4), (late2, scheduled, 2)]
    )
    assert _live(t) == expected
    check_hudi_reads(t)  # and as of each instant: the late logs keep their writer's instant
    # 4. The next log goes onto the compacted slice, after the carried ones.
    newest = t.upsert(_rows(["b"], 6)).instant
    expected["b"] = 6
    assert _logs(t)[-1] == (newest, scheduled, 3)
    assert _live(t) == expected
    check_hudi_reads(t)
    assert t.check().healthy
    # A second finisher of the same plan finds it done and changes nothing.
    assert compaction.finish(t._store, t._spec, scheduled, written).instant is None
    assert _live(t) == expected


def test_a_compaction_left_pending_is_executed_by_the_next_run(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=MANUAL)
    t.upsert(_rows(["a", "b"], 1))
    t.upsert(_rows(["a"], 2))
    scheduled = compaction.schedule(t._store, t._spec, min_logs=1)
    assert scheduled is not None
    # An executor wrote the base files and died before finishing.
    assert [f.kind for f in compaction.execute(t._store, t._spec, scheduled)] == ["base"]
    assert _live(t) == {"a": 2, "b": 1}  # its base file is not visible: not completed
    t.upsert(_rows(["b"], 3))
    told: list[tuple[int, int]] = []
    result = t.compact(progress=lambda done, total: told.append((done, total)))
    # It ran the pending one first (one group), then compacted what was left (one group).
    assert told == [(0, 1), (1, 1), (0, 1), (1, 1)]
    assert Timeline(t._store, True).pending() == []
    assert scheduled in [i.id for i in Timeline(t._store, True).completed("compaction")]
    assert result.instant is not None and result.instant > scheduled
    assert _live(t) == {"a": 2, "b": 3}
    check_hudi_reads(t)
    assert t.check().healthy


def test_a_new_buckets_file_id_names_its_bucket() -> None:
    """The bucket of a file id is its first eight digits (Hudi's bucket-index naming)."""
    assert names.bucket_of(names.file_id_for("t", "20260101000000000", "p", 42)) == 42


def test_an_automatic_compaction_takes_the_slices_with_most_logs_up_to_its_io(
    tmp_path: Path,
) -> None:
    """``hoodie.compaction.target.io``: one compaction reads at most that many bytes of
    slices, those with most logs first, and always at least one slice."""
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=MANUAL)

    def write(day: str, v: int) -> None:
        t.upsert(pa.table({"id": ["a", "b"], "day": [day] * 2, "v": [v] * 2}, schema=SCHEMA))

    for day, logs in (("d1", 1), ("d2", 3), ("d3", 2)):
        for v in range(logs + 1):  # a base, then the logs
            write(day, v)
    slices = {r.partition: r.slice for r in t.snapshot().slices()}
    assert {p: len(s.logs) for p, s in slices.items()} == {"day=d1": 1, "day=d2": 3, "day=d3": 2}

    def planned(max_bytes: int | None) -> list[str]:
        instant = compaction.schedule(t._store, t._spec, 1, max_bytes=max_bytes)
        assert instant is not None
        timeline = Timeline(t._store, True)
        found = next(i for i in timeline.pending() if i.id == instant)
        groups = [g[0] for g in compaction_groups(timeline, found)]
        compaction.run(t._store, t._spec, instant)
        return groups

    assert planned(1) == ["day=d2"]  # the most logs; over the budget alone, still taken
    write("d1", 9)
    write("d1", 10)  # d1: 3 logs, d3: 2 logs
    d1 = next(r.slice for r in t.snapshot().slices() if r.partition == "day=d1")
    assert planned(d1.size + 1) == ["day=d1", "day=d3"]
    rows = t.to_arrow(meta_columns=False)
    assert sorted(zip(rows["day"].to_pylist(), rows["v"].to_pylist(), strict=True)) == [
        ("d1", 10),
        ("d1", 10),
        ("d2", 3),
        ("d2", 3),
        ("d3", 2),
        ("d3", 2),
    ]
    check_hudi_reads(t)


def test_a_write_whose_due_slices_a_pending_compaction_plans_makes_no_plan(
    tmp_path: Path,
) -> None:
    """Writers beside each other find the same slices due after their own writes: one
    whose due groups a pending compaction plans already makes no plan, and does not wait
    for the lease to find that out; a due group no plan names is planned."""
    options = replace(
        MANUAL, log_compaction_enable=False, compaction_delta_commits=2, lock_wait_seconds=1.0
    )
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=options)
    for v in (1, 2, 3):  # a base and two logs in each of two groups
        t.upsert(pa.table({"id": ["a", "b"], "day": ["d1", "d2"], "v": [v, v]}, schema=SCHEMA))
    (g1,), (g2,) = ({f.file_id for f in data_files(t._store, p)} for p in ("day=d1", "day=d2"))
    first = compaction.schedule(t._store, t._spec, 2, ["day=d1"])
    assert first is not None
    service, timeline = compaction.Compaction(), Timeline(t._store, True)
    before = [i.id for i in timeline.instants()]
    with WriterLock(t._store, lease_seconds=30):  # another writer commits meanwhile
        assert service.plan(t._store, t._spec, replace(AUTOMATIC, groups=frozenset({g1}))) is None
    assert [i.id for i in timeline.instants()] == before
    second = service.plan(t._store, t._spec, replace(AUTOMATIC, groups=frozenset({g1, g2})))
    assert second is not None
    planned = next(i for i in timeline.pending() if i.id == second)
    assert [g for _, g, _ in compaction_groups(timeline, planned)] == [g2]
