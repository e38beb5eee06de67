"""Archival keeps the active timeline short: the oldest instants move to Hudi's archived
timeline, their files stay the table's (dynbucket and hudi-rs read them), time travel to an
archived instant is a clear error, a stream's last batch and a rolled-back instant's
leftovers stay known, and a crash between the record and the removal changes nothing."""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket.actors.checkpoints import NoAssigners
from dynbucket.base.errors import InstantNotFoundError
from dynbucket.format.file_group.writer import GroupWrites
from dynbucket.format.hudi import archived as hudi_archived
from dynbucket.format.services import compaction
from dynbucket.format.table.options import TableOptions
from dynbucket.format.timeline import archive
from dynbucket.format.timeline.settle import settle
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.format.timeline.transaction import Transaction
from dynbucket.table import Table
from dynbucket.write.instant import InstantWrite, StreamBatch, committed
from tests.dead_writer import die_mid_instant
from tests.hudi_readers import check_hudi_reads

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
OPTIONS = TableOptions(
    compaction_async=False,
    clean_automatic=False,
    archive_automatic=False,
    index_compaction_automatic=False,
    cleaner_commits_retained=2,
    keep_min_commits=4,
    keep_max_commits=6,
    lock_lease_seconds=0.5,
)


def _rows(ids: list[str], v: int, day: str = "d1") -> pa.Table:
    return pa.table({"id": ids, "day": [day] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def _live(t: Table) -> dict[str, int]:
    rows = t.to_arrow(meta_columns=False)
    return dict(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist(), strict=True))


def _archive(t: Table) -> archive.ArchiveResult:
    o = t._spec.options
    return archive.archive(t._store, True, o.keep_min_commits, o.keep_max_commits, 0.5)


def test_archived_instants_stay_readable_as_the_table(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=OPTIONS)
    dead = die_mid_instant(t, [{"id": "ghost", "day": "d9", "v": 0}])  # files left behind
    ids = []
    for i in range(8):
        ids.append(t.upsert(_rows([f"k{i}", "a"], i, f"d{i % 2}")).instant)
    assert dead not in [i.id for i in t._timeline.instants()]  # rolled back by the next write
    assert os.path.exists(Path(t.uri) / ".hoodie/.dynbucket/outcomes" / dead)  # its fence
    # The rolled-back instant's files come back, as a writer stalled past its lease writes.
    t.upsert(_rows(["x"], 9))
    expected = _live(t)
    done = _archive(t)
    assert done.archived == 9 - 4 + 0 and done.floor == ids[4]
    active = [i.id for i in Timeline(t._store, True).instants()]
    assert len(active) == 4 and min(active) > done.floor
    record = Timeline(t._store).archived()
    assert record.floor == done.floor and record.instants == 5
    assert dead in record.rolled_back
    # Both readers read the archived instants' files: the first writes live in them only.
    assert _live(t) == expected
    check_hudi_reads(t)
    assert t.check().healthy
    # Time travel before the active timeline is a clear error.
    with pytest.raises(InstantNotFoundError, match="archived"):
        t.to_arrow(as_of=ids[0])
    # Hudi's archived timeline names them (requested, inflight and completed).
    folder = Path(t.uri) / ".hoodie/archived"
    (name,) = os.listdir(folder)
    entries = hudi_archived.read_entries((folder / name).read_bytes())
    assert {e[0] for e in entries} == set(ids[:5])
    assert {(e[1], e[2]) for e in entries if e[0] == ids[0]} == {
        ("deltacommit", "REQUESTED"),
        ("deltacommit", "INFLIGHT"),
        ("deltacommit", "COMPLETED"),
    }
    # Writes go on; a second archival moves the floor up and keeps one record.
    for i in range(3):
        t.upsert(_rows([f"m{i}"], i))
    assert _archive(t).floor > done.floor
    assert len(os.listdir(Path(t.uri) / ".hoodie/.dynbucket/archive")) == 1
    assert len(os.listdir(folder)) == 2
    assert _live(t) == {**expected, "m0": 0, "m1": 1, "m2": 2}
    check_hudi_reads(t)
    assert t.check().healthy


def test_no_pending_instant_is_older_than_the_active_timelines_first_commit(
    tmp_path: Path,
) -> None:
    # hudi-rs takes a file older than the active timeline's first completed commit for an
    # archived instant's, committed: the base files of a compaction whose executor died read
    # as the table (stale rows) once archival moved every commit before it.
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=OPTIONS)
    for i in range(3):
        t.upsert(_rows(["a", "b"], i))
    scheduled = compaction.schedule(t._store, t._spec, min_logs=1)
    assert scheduled is not None
    compaction.execute(t._store, t._spec, scheduled)  # its base file; the executor dies
    writes = [t.upsert(_rows(["a"], i)).instant for i in range(3, 10)]
    assert _archive(t).archived == 2  # not 3: the newest commit before it stays
    active = Timeline(t._store, True).instants()
    assert [i.id for i in active if not i.completed] == [scheduled]
    assert min(i.id for i in active if i.completed) < scheduled < writes[0]
    assert _live(t) == {"a": 9, "b": 2}
    check_hudi_reads(t, time_travel=False)
    # The left compaction holds archival back: `check` says so once it is older than a
    # lease (0.5 s here, which the writes above pass on a loaded machine), and nothing else.
    assert all(scheduled in f.problem for f in t.check().findings)
    compaction.run(t._store, t._spec, scheduled)  # as the next write's services would
    assert _live(t) == {"a": 9, "b": 2}
    check_hudi_reads(t, time_travel=False)
    assert t.check().healthy


def test_a_streams_last_batch_survives_archival(tmp_path: Path) -> None:
    # The stream's instant below writes nothing: kept as Hudi's allow.empty.commit keeps one.
    options = dataclasses.replace(OPTIONS, allow_empty_commit=True)
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=options)
    t.upsert(_rows(["a"], 1))
    assert not committed(Timeline(t._store, True), StreamBatch("s", 0))
    _stream_write(t, StreamBatch("s", 0))
    for i in range(7):  # other writes, until the stream's commit is archived
        t.upsert(_rows([f"k{i}"], i))
    _archive(t)
    timeline = Timeline(t._store, True)
    assert all(timeline.metadata(i).get("stream") is None for i in timeline.completed("commit"))
    assert committed(timeline, StreamBatch("s", 0))  # replayed after a crash: skipped
    assert not committed(timeline, StreamBatch("s", 1))


def _stream_write(t: Table, batch: StreamBatch) -> None:
    """A micro-batch's instant as ``Table.stream`` commits one (recording the batch)."""
    begin = functools.partial(Transaction.begin, t._store, t._spec, "commit", "upsert")
    with InstantWrite(begin, "upsert", batch) as w:
        w.open(NoAssigners())
        w.commit(GroupWrites())


def test_a_crash_between_the_record_and_the_removal_changes_nothing(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=OPTIONS)
    for i in range(8):
        t.upsert(_rows([f"k{i}"], i))
    expected = _live(t)
    timeline = Timeline(t._store, True)
    oldest = timeline.instants()[0]
    forget = Timeline.forget_archived
    calls = []

    def crash(self: Timeline, instant: object) -> None:
        calls.append(instant)
        if len(calls) == 2:
            raise OSError("killed")
        forget(self, instant)  # type: ignore[arg-type]

    Timeline.forget_archived = crash  # type: ignore[method-assign]
    try:
        with pytest.raises(OSError):
            _archive(t)
    finally:
        Timeline.forget_archived = forget  # type: ignore[method-assign]
    # The record says archived; some instants are still active too: both say completed.
    assert Timeline(t._store).archived().floor > oldest.id
    assert _live(t) == expected
    # An archived instant's stray state file is never rolled back by a settling writer.
    floor = Timeline(t._store).archived().floor
    left = next(i for i in Timeline(t._store, True).instants() if i.id <= floor)
    assert settle(t._store, Timeline(t._store, True), left, "w") == "nothing"
    t.upsert(_rows(["z"], 0))  # the lease of the crashed archival ran out
    assert _live(t) == {**expected, "z": 0}
    check_hudi_reads(t)
    assert t.check().healthy
    # The next archival removes what the crashed one left active.
    for i in range(6):
        t.upsert(_rows([f"n{i}"], i))
    _archive(t)
    assert all(
        i.id > Timeline(t._store).archived().floor for i in Timeline(t._store, True).instants()
    )
    assert t.check().healthy


def test_a_temporary_file_a_killed_outcome_create_left_stops_nothing(tmp_path: Path) -> None:
    """A writer killed inside an outcome's exclusive create leaves an empty temporary file
    in the outcomes folder; archival read it as an outcome (it sorts below any floor) and
    failed at every write from then on, the timeline growing for good (the crash model: 1,411
    entries after 40 rounds). Archival skips it, and a clean removes it once it is older
    than a lease."""
    from dynbucket.format.services import clean
    from dynbucket.format.table.paths import OUTCOME_DIR

    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=OPTIONS)
    for v in range(12):
        t.upsert(_rows(["a", f"k{v}"], v))
    folder = Path(t._store.path(OUTCOME_DIR))
    folder.mkdir(parents=True, exist_ok=True)
    left = folder / f".{t._timeline.completed()[3].id}.tmp-0123456789ab"
    left.write_bytes(b"")
    done = archive.archive(t._store, True, 4, 6, 1.0)
    assert done.archived > 0
    old = os.path.getmtime(left) - 120
    os.utime(left, (old, old))
    assert clean.clean(t._store, t._spec, retain=2).instant is not None
    assert not left.exists()
    check_hudi_reads(t)
