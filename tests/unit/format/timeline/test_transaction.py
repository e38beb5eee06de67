"""A writer killed with SIGKILL after writing data and index files: before its commit point
nothing of it shows and the next writer rolls it back; after it (its outcome decided,
its completed file not yet published) the next writer publishes it and nothing is lost
(I5). A write on top of a commit that does not read is refused."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket.base.errors import (
    CommitFailedError,
    ConcurrentWriteError,
    PublishPendingError,
    StorageError,
    TableCorruptedError,
)
from dynbucket.format.table.options import TableOptions
from dynbucket.format.timeline import outcome
from dynbucket.format.timeline.timeline import _METADATA, Timeline
from dynbucket.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])

CHILD = r"""
import sys, time
import pyarrow as pa
from dynbucket.table import Table
from dynbucket.format.timeline import outcome
from dynbucket.format.timeline.timeline import Timeline

def stall(*args, **kwargs):
    print("WRITTEN", flush=True)  # data and index files are on disk now
    time.sleep(3600)

if sys.argv[2] == "before":
    outcome.decide_commit = stall  # before the commit point
else:
    Timeline.complete = stall  # decided, not yet published
t = Table.open(sys.argv[1])
t.upsert(pa.table({"id": [f"n{i}" for i in range(50)] + ["a"], "day": ["d2"] * 50 + ["d1"],
                   "v": list(range(50)) + [99]}))
"""


@pytest.mark.sample(1)
@pytest.mark.parametrize("point", ["before", "after"])
def test_sigkill_around_the_commit_point(tmp_path: Path, point: str) -> None:
    t = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "day", options=TableOptions(lock_lease_seconds=1.0)
    )
    t.upsert(pa.table({"id": ["a", "b"], "day": ["d1", "d1"], "v": [1, 2]}))
    before = t.to_arrow().sort_by("id")

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, t.uri, point], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().split() == ["WRITTEN"]
    reader = Table.open(t.uri)
    (dead,) = [i.id for i in reader._timeline.pending()]
    written = [p for p in Path(t.uri).rglob("*") if dead in p.name]
    assert any(".log." in p.name or p.parent.name == "day=d2" for p in written)
    assert any(".dynbucket/rli" in str(p) for p in written)  # index files too
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()

    # Readers see the previous snapshot exactly, and the dead instant as pending.
    assert reader.to_arrow().sort_by("id").equals(before)
    time.sleep(1.2)  # the dead writer's lease runs out
    # `dynbucket rollback` settles it: rolled back before the commit point, published after.
    assert reader.rollback() == ([dead] if point == "before" else [])
    (record,) = [h for h in reader.history() if h.get("operation") == "rollback"]
    recorded = reader._timeline.metadata(
        next(i for i in reader._timeline.completed() if i.id == record["instant"])
    )
    assert (recorded["rolled-back"], recorded["published"]) == (
        ([dead], []) if point == "before" else ([], [dead])
    )
    result = reader.upsert(pa.table({"id": ["c"], "day": ["d1"], "v": [3]}))
    assert result.instant > dead
    assert reader._timeline.pending() == []
    live = {r["id"]: r["v"] for r in reader.to_arrow(meta_columns=False).to_pylist()}
    if point == "before":
        left = [p for p in Path(t.uri).rglob("*") if dead in p.name]
        assert [p.parent.name for p in left] == ["outcomes"]  # the fence for its writer
        assert outcome.read(reader._store, dead).state == outcome.ROLLED_BACK
        assert live == {"a": 1, "b": 2, "c": 3}
        # The dead instant's keys are unknown again (their index entries went with it).
        assert reader.insert(pa.table({"id": ["n1"], "day": ["d2"], "v": [0]})).keys_inserted == 1
    else:  # committed at its commit point: published by the next writer, nothing lost
        assert dead in [i.id for i in reader._timeline.completed()]
        assert live == {"a": 99, "b": 2, "c": 3, **{f"n{i}": i for i in range(50)}}
        assert reader.check().healthy
        assert not list(Path(t.uri).rglob(".hoodie/.dynbucket/outcomes/*"))


def test_a_commit_whose_publishing_fails_says_it_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit point passed, then publishing failed (the store kept failing): the error
    says the write committed (not ``CommitFailedError``: writing it again is needless), and
    the next writer publishes it."""
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day")
    t.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [1]}))

    def failing(*args: object, **kwargs: object) -> None:
        raise StorageError("writing the completed file failed 6 times")

    with monkeypatch.context() as m:
        m.setattr(Timeline, "complete", failing)
        with pytest.raises(PublishPendingError, match="is committed") as raised:
            t.upsert(pa.table({"id": ["b"], "day": ["d1"], "v": [2]}))
    assert not isinstance(raised.value, CommitFailedError)
    (pending,) = [i.id for i in t._timeline.pending()]
    assert outcome.read(t._store, pending).state == outcome.COMMITTED
    t.upsert(pa.table({"id": ["c"], "day": ["d1"], "v": [3]}))
    assert pending in [i.id for i in t._timeline.completed()]
    assert {r["id"]: r["v"] for r in t.to_arrow().to_pylist()} == {"a": 1, "b": 2, "c": 3}


def test_a_write_on_an_unreadable_latest_commit_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day")
    t.upsert(pa.table({"id": ["a", "b"], "day": ["d1", "d1"], "v": [1, 2]}))
    latest = t.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [3]})).instant
    commit = Path(t.uri) / ".hoodie" / f"{latest}.deltacommit"
    commit.write_bytes(commit.read_bytes()[:100])  # cut short
    _METADATA.clear()  # this process parsed it before the damage

    def files() -> list[Path]:  # the lease is taken and given back: not a write
        return sorted(p for p in Path(t.uri).rglob("*") if "writer.lease" not in p.name)

    before = files()
    with pytest.raises(
        TableCorruptedError,
        match=rf"completed instant {latest} is not a "
        r"complete JSON document.*delete it and run `dynbucket rollback`",
    ):
        Table.open(t.uri).upsert(pa.table({"id": ["c"], "day": ["d2"], "v": [1]}))
    assert files() == before


def test_a_plan_written_onto_a_service_instant_rolled_back_meanwhile_is_settled(
    tmp_path: Path,
) -> None:
    """A scheduler paused past its lease after its last lease check wrote its plan onto the
    instant the next writer had rolled back meanwhile (seen in the crash model): no executor
    can commit it (its outcome says rolled back), so it held archival back for good. It is
    not executed, and the next writer settles it."""
    from dynbucket.format.services import clean
    from dynbucket.format.timeline.plans import SCHEDULED, left_pending
    from dynbucket.format.timeline.timeline import Timeline
    from dynbucket.format.timeline.transaction import Transaction

    options = TableOptions(clean_automatic=False, lock_lease_seconds=0.2)
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=options)
    for v in range(4):
        t.upsert(pa.table({"id": ["a"], "day": ["d"], "v": [v]}, schema=SCHEMA))
    txn = Transaction.begin(t._store, t._spec, "clean", "clean")  # the scheduler
    txn.lock._stop.set()  # paused: its heartbeat stops, its lease runs out
    time.sleep(0.3)
    t.upsert(pa.table({"id": ["b"], "day": ["d"], "v": [9]}, schema=SCHEMA))  # settles it
    assert outcome.read(t._store, txn.id).state == outcome.ROLLED_BACK
    # It wakes up past its lease check and writes its plan.
    plan = {**txn.plan, "earliest-retained": txn.based_on, "pending": [], SCHEDULED: True}
    txn.timeline.start(txn.instant, plan)
    timeline = Timeline(t._store, True)
    assert [i.id for i in timeline.pending()] == [txn.id]
    assert left_pending(timeline) == []  # no executor takes it
    assert clean.clean(t._store, t._spec).instant != txn.id
    t.upsert(pa.table({"id": ["c"], "day": ["d"], "v": [9]}, schema=SCHEMA))
    t.wait_for_services()
    assert Timeline(t._store, True).pending() == []
    assert t.check().healthy


def test_files_a_stalled_process_wrote_after_its_instant_was_rolled_back_are_cleaned(
    tmp_path: Path,
) -> None:
    """A service's executor, stalled past its scheduler's lease, wrote its files after the
    next writer had rolled its instant back (the crash model: `check` then said their
    metadata was lost). Nothing reads them; `check` says so, a clean removes them, and an
    executor asked to run such an instant writes nothing."""
    import shutil

    from dynbucket.base.errors import ConcurrentWriteError
    from dynbucket.format.services import clean
    from dynbucket.format.timeline.transaction import Transaction

    options = TableOptions(clean_automatic=False, lock_lease_seconds=0.2)
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=options)
    for v in range(4):
        t.upsert(pa.table({"id": ["a", f"k{v}"], "day": ["d", "d"], "v": [v, v]}, schema=SCHEMA))
    txn = Transaction.begin(t._store, t._spec, "index-compaction", "compact-index")
    txn.lock._stop.set()  # stalled: its lease runs out
    time.sleep(0.3)
    t.upsert(pa.table({"id": ["b"], "day": ["d"], "v": [9]}, schema=SCHEMA))  # rolls it back
    index = Path(t._store.path(".hoodie/.dynbucket/rli/day=d"))
    some = sorted(index.glob("*.parquet"))[0]
    late = index / f"{txn.id}.base.parquet"
    shutil.copy(some, late)  # what it writes when it wakes up
    report = t.check()
    assert report.healthy and any("written after its rollback" in n for n in report.notes)
    with pytest.raises(ConcurrentWriteError, match="was rolled back"):
        Transaction.resume(t._store, t._spec, txn.instant, "late")
    assert clean.clean(t._store, t._spec, retain=2).files_removed >= 1
    assert not late.exists()
    assert t.check().healthy and t.to_arrow().num_rows == 6


def test_a_rollback_removes_only_the_files_its_instant_wrote(tmp_path: Path) -> None:
    """A rolled-back instant's files go; a log another writer put on a slice whose base
    instant is that instant's, or a merged log whose run starts at it, is not its file."""
    from dynbucket.format.file_group.slices import data_files
    from dynbucket.format.hudi import files as names
    from dynbucket.format.timeline.transaction import Transaction

    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day")
    t.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [1]}, schema=SCHEMA))
    (group,) = {f.file_id for f in data_files(t._store, "day=d1")}
    txn = Transaction.begin(t._store, t._spec, "commit", "upsert")
    other = "20991231000000001"
    folder = Path(t._store.path("day=d1"))
    own = folder / names.log_name(group, "20000101000000000", 7, txn.id)
    theirs = folder / names.log_name(group, txn.id, 1, other)
    merged = folder / f".{group}_20000101000000000.log.8_0-{other}-{txn.id}"
    for f in (own, theirs, merged):
        f.write_bytes(b"log")
    assert names.parse(merged.name).merges_from == txn.id  # a run that starts at txn
    txn.abort()
    assert not own.exists() and theirs.exists() and merged.exists()


#: One writer's table whose services run only when a test runs them.
_BY_HAND = TableOptions(
    lock_lease_seconds=0.2,
    compaction_async=False,
    clean_automatic=False,
    archive_automatic=False,
    index_compaction_automatic=False,
)


def _rows(v: int) -> pa.Table:
    return pa.table({"id": ["a", "b"], "day": ["d", "d"], "v": [v, v]}, schema=SCHEMA)


def _archive_all_but_one(t: Table) -> str:
    """Archives every completed instant but the newest; returns the archive's floor."""
    from dynbucket.format.timeline import archive

    done = archive.archive(t._store, True, keep_min=1, keep_max=2, lease_seconds=5.0)
    assert done.archived
    return done.floor


def test_a_begin_paused_before_its_instant_exists_makes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer paused past its lease between its look at the timeline and the create of
    its instant (the writers' model: a compaction completed below an archival's floor, and
    hudi-rs read the archived instants above it as uncommitted). Meanwhile others wrote and
    archived past the id it had chosen. Its begin fails as a lost lease does and leaves no
    instant: none is ever pending at or below the floor."""
    from dynbucket.base.errors import ConcurrentWriteError
    from dynbucket.format.timeline import timeline as timeline_module
    from dynbucket.format.timeline.lock import WriterLock
    from dynbucket.format.timeline.timeline import Timeline
    from dynbucket.format.timeline.transaction import Transaction

    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=_BY_HAND)
    for v in range(2):
        t.upsert(_rows(v))
    lock = WriterLock(t._store, 0.2)
    chosen: list[str] = []
    real = timeline_module.next_instant_id

    def paused_after_choosing(after: str | None, now: object = None) -> str:
        instant = real(after)
        if not chosen:  # the paused writer's; the others' go on as usual
            chosen.append(instant)
            lock._stop.set()  # paused: its heartbeat stops, its lease runs out
            time.sleep(0.3)
            for v in range(3):
                t.upsert(_rows(v + 10))
            chosen.append(_archive_all_but_one(t))
        return instant

    monkeypatch.setattr(timeline_module, "next_instant_id", paused_after_choosing)
    with pytest.raises(ConcurrentWriteError, match="lease"):
        Transaction.begin(t._store, t._spec, "clean", "clean", lock=lock)
    monkeypatch.undo()
    paused, floor = chosen
    assert paused < floor  # archival passed the id it had chosen
    timeline = Timeline(t._store, True)
    assert timeline.pending() == []
    assert min(i.id for i in timeline.instants()) > floor
    t.upsert(_rows(20))
    assert t.check().healthy and t.to_arrow(meta_columns=False)["v"].to_pylist() == [20, 20]


def _scheduled_compaction(tmp_path: Path, options: TableOptions) -> tuple[Table, str, Any]:
    """A table of three writes and a compaction of them scheduled: (table, its id, its
    pending instant)."""
    from dynbucket.format.services import compaction

    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=options)
    for v in range(3):
        t.upsert(_rows(v))
    planned = compaction.schedule(t._store, t._spec)
    assert planned is not None
    (pending,) = Timeline(t._store, True).pending()
    return t, planned, pending


def _paused_finish(t: Table, pending: Any) -> Any:
    """A compaction's last step under a 0.2 s lease, past its checks, paused until the
    lease ran out."""
    from dynbucket.format.timeline.transaction import Transaction

    late = Transaction.take_over(t._store, t._spec, pending, lease_seconds=0.2)
    late._check_alone = lambda: None  # past its checks
    assert late.lock is not None
    late.lock._stop.set()
    time.sleep(0.3)
    return late


@pytest.mark.parametrize(
    ("executor", "then", "version"),
    [("detached", "archived", 6), ("under-lease", "archived", 6), ("detached", "published", 9)],
)
def test_a_second_executor_paused_before_its_commit_point_completes_nothing(
    tmp_path: Path, executor: str, then: str, version: int
) -> None:
    """Two executors of one compaction (a writer runs one left pending past a lease: its
    first executor seemed dead). The second was paused just before its commit point while
    the first completed it (its commit outcome is then forgotten) and, in one case, archival
    took it. Waking up, the second decides it again; it must not publish it again: a
    second completed file (layout 2), or one below the archive's floor (the writers'
    model, where hudi-rs then read 19 keys of 33)."""
    from dynbucket.format.services import compaction
    from dynbucket.format.timeline.timeline import Timeline
    from dynbucket.format.timeline.transaction import Transaction

    options = dataclasses.replace(_BY_HAND, table_version=version)
    t, planned, pending = _scheduled_compaction(tmp_path, options)
    if executor == "detached":
        late = Transaction.resume(t._store, t._spec, pending, "late")
    else:  # its last step under the lease, paused past its checks
        late = _paused_finish(t, pending)
    for f in compaction.execute(t._store, t._spec, planned):
        late.add(f)
    assert compaction.run(t._store, t._spec, planned).instant == planned  # the first
    floor = ""
    if then == "archived":
        for v in range(3):
            t.upsert(_rows(v + 10))
        floor = _archive_all_but_one(t)
        assert planned < floor
    late.commit({})

    timeline = Timeline(t._store, True)
    assert outcome.read(t._store, planned) is None
    assert timeline.pending() == []
    if then == "archived":
        assert min(i.id for i in timeline.instants()) > floor
    else:
        done = [p.name for p in Path(t._store.path(timeline.hudi_dir)).iterdir()]
        assert len([n for n in done if n.startswith(planned) and n.endswith(".commit")]) == 1
    assert t.check().healthy and t.to_arrow(meta_columns=False).num_rows == 2


def test_a_compaction_finish_paused_past_its_lease_never_drops_a_write_beside_it(
    tmp_path: Path,
) -> None:
    """A compaction's last step (under the commit lease: carry the logs written on its
    groups' old slices since its plan, then its commit point) paused past the lease after
    its carry, while a write took the lease over and committed a log on a planned group's
    old slice. The compaction must not complete as carried: the write's log would be on a
    slice no reader reads (the flaky S3 writers model lost an acknowledged row so). The
    lease names the compaction, so the writer that took it over settles it first."""
    from dynbucket.format.services import compaction

    options = dataclasses.replace(_BY_HAND, commit_lease_seconds=0.2)
    t, planned, pending = _scheduled_compaction(tmp_path, options)
    written = compaction.execute(t._store, t._spec, planned)
    late = _paused_finish(t, pending)  # after its carry, which found nothing to carry
    assert compaction._carry_late_logs(t._store, late, [("day=d", written[0].file_id, "")]) == []
    t.upsert(_rows(7))  # a log on the planned group's old slice
    for f in written:
        late.add(f)
    with pytest.raises((ConcurrentWriteError, CommitFailedError)):
        late.commit({"carried-logs": []})
    assert {r["v"] for r in t.to_arrow().to_pylist()} == {7}
    assert t.check().healthy


def test_a_publish_paused_until_archival_took_its_instant_brings_nothing_back(
    tmp_path: Path,
) -> None:
    """A committed instant's publisher (its writer, or one that found it committed) paused
    while another published it and archival took it: waking up, it publishes nothing."""
    from dynbucket.format.timeline.outcome import publish
    from dynbucket.format.timeline.timeline import Instant, State, Timeline

    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=_BY_HAND)
    for v in range(4):
        t.upsert(_rows(v))
    timeline = Timeline(t._store, True)
    first = timeline.completed()[0]
    document = timeline.raw(first)
    floor = _archive_all_but_one(t)
    publish(t._store, timeline, Instant(first.id, first.action, State.INFLIGHT), document)
    assert min(i.id for i in Timeline(t._store, True).instants()) > floor


def test_a_rolled_back_compaction_takes_its_carried_copies_and_leaves_a_writers_log(
    tmp_path: Path,
) -> None:
    """A compaction's finish carried a log written since its plan onto its new slice (a
    copy), then failed (the flaky network) and left it pending. A write then put its own
    log on that slice, next to the copy (``FileSlice.next_log``), and committed. When the
    compaction is rolled back, the copy goes and the write's log stays: it reads on the
    slice before (the flaky S3 writers model lost a committed log so, 1 run in 40)."""
    from dynbucket.format.file_group.slices import data_files
    from dynbucket.format.services import compaction
    from dynbucket.format.timeline.settle import rollback_instant
    from dynbucket.format.timeline.transaction import Transaction

    t, planned, pending = _scheduled_compaction(tmp_path, _BY_HAND)
    t.upsert(_rows(5))  # a log on the planned group's old slice, after the plan
    written = compaction.execute(t._store, t._spec, planned)
    finish = Transaction.take_over(t._store, t._spec, pending)
    groups = [("day=d", written[0].file_id, "")]
    assert len(compaction._carry_late_logs(t._store, finish, groups)) == 1
    finish.abort()  # the commit failed: the compaction stays pending, its copy on disk
    t.upsert(_rows(7))
    on_new = [
        f for f in data_files(t._store, "day=d") if f.kind == "log" and f.base_instant == planned
    ]
    assert sorted(f.version for f in on_new) == [1, 2]  # the copy, and the write's own
    rollback_instant(t._store, Timeline(t._store, True), pending)

    left = [f for f in data_files(t._store, "day=d") if f.base_instant == planned]
    assert [(f.kind, f.version) for f in left] == [("log", 2)]  # the base went too
    assert {r["v"] for r in t.to_arrow().to_pylist()} == {7}
    assert t.check().healthy


def test_rolling_back_a_write_leaves_a_merged_index_delta_that_names_it(tmp_path: Path) -> None:
    """An index compaction planned while a write was pending merges deltas until that
    write (``<instant>.delta.m<first>-<until>.parquet``). The write, rolled back later
    (paused past its heartbeat), took that merged delta with its own files: its instant
    is in the name (the crash model found the merged delta of a completed instant gone)."""
    import shutil

    from dynbucket.format.index.file_names import index_files, merged_delta_name
    from dynbucket.format.timeline.settle import rollback_instant
    from dynbucket.format.timeline.transaction import Transaction

    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day")
    t.upsert(_rows(1))
    pending = Transaction.begin(t._store, t._spec, "commit", "upsert")
    (delta,) = index_files(t._store, "day=d")
    merged = f"{delta.path.rsplit('/', 1)[0]}/" + merged_delta_name(
        "29991231235959999", delta.instant, pending.id
    )
    shutil.copyfile(delta.path, merged)  # as an index compaction of a later instant wrote it
    own = delta.path.replace(delta.instant, pending.id)
    shutil.copyfile(delta.path, own)  # the pending write's own delta
    rollback_instant(t._store, Timeline(t._store, True), pending.instant)
    left = {f.name for f in index_files(t._store, "day=d")}
    assert merged.rsplit("/", 1)[1] in left and own.rsplit("/", 1)[1] not in left
