"""Several writers (``OPTIMISTIC_CONCURRENCY_CONTROL``): what a commit checks against the
instants other writers completed while it was written, in one process, another handle's
write run just before a write's commit (``_beside``): new keys assigned once, updates that
do not conflict on merge-on-read, copy-on-write and deletes that do, the retry budget, a
writer dead with the commit lease and one paused past its heartbeat."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket import DynamicBucketIndex, Table, TableOptions
from dynbucket.base.errors import ConcurrentWriteError, WriteConflictError
from dynbucket.format.file_group.slices import data_files
from dynbucket.format.index.file_names import index_files
from dynbucket.format.services import compaction, log_compaction
from dynbucket.format.timeline import heartbeat
from dynbucket.format.timeline.lanes import ALONE, Lanes
from dynbucket.format.timeline.lock import WriterLock
from dynbucket.format.timeline.transaction import Transaction, schedule
from tests.hudi_readers import hudi_read

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
OCC = "OPTIMISTIC_CONCURRENCY_CONTROL"


def _table(tmp_path: Path, table_type: str = "MERGE_ON_READ", **options: Any) -> Table:
    opts = TableOptions(
        table_type=table_type,
        write_concurrency_mode=OCC,
        compaction_async=False,
        clean_automatic=False,
        **options,
    )
    index = DynamicBucketIndex(max_keys_per_bucket=4)
    return Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", "v", index, opts)


def _rows(ids: list[str], v: int, day: str = "d1") -> pa.Table:
    return pa.table({"id": ids, "day": [day] * len(ids), "v": [v] * len(ids)})


def _run_before(
    monkeypatch: pytest.MonkeyPatch,
    owner: type,
    name: str,
    other: Callable[[], Any],
    times: int = 1,
    wants: Callable[..., bool] = lambda *_, **__: True,
) -> None:
    """Runs ``other`` (another writer's whole write) just before the next ``times`` calls of
    ``owner.name`` that ``wants`` (not those ``other`` makes itself)."""
    real = getattr(owner, name)
    left, busy = [times], [False]

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        if left[0] > 0 and not busy[0] and wants(*args, **kwargs):
            left[0] -= 1
            busy[0] = True
            try:
                other()
            finally:
                busy[0] = False
        return real(self, *args, **kwargs)

    monkeypatch.setattr(owner, name, wrapped)


def _beside(monkeypatch: pytest.MonkeyPatch, other: Callable[[], Any], times: int = 1) -> None:
    """Runs ``other`` just before the next ``times`` commits of this process's writers
    check for conflicts."""
    _run_before(monkeypatch, Transaction, "_check_beside_writers", other, times)


def _under_the_lease(monkeypatch: pytest.MonkeyPatch, other: Callable[[], Any]) -> None:
    """Runs ``other`` once, after the next commit checked without the lease and before it
    takes the lease: what completes there is checked under the lease only."""
    _run_before(
        monkeypatch, WriterLock, "acquire", other, wants=lambda instant=None: instant is not None
    )


def _retries(caplog: pytest.LogCaptureFixture) -> int:
    return sum("after a conflict" in r.getMessage() for r in caplog.records)


def test_a_new_key_both_writers_insert_gets_one_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path)
    other = Table.open(t.uri)
    _beside(monkeypatch, lambda: other.upsert(_rows(["k1", "k2"], 1)))
    done = t.upsert(_rows(["k2", "k3"], 2))
    assert _retries(caplog) == 1
    # Written again on the table as the other writer left it: k2 is known there. The other
    # writer began beside this one's instant (lane 0), so it took lane 1 of 2 (bucket 1);
    # this one's commit check saw that lane, so written again it is lane 0 of 2: bucket 0.
    assert (done.keys_inserted, done.keys_updated) == (1, 1)
    assert done.written_again == 1 and 0 < done.seconds["again"] < done.seconds["total"]
    assert "written again 1 time(s) after a conflict" in str(done)
    rows = {r["id"]: (r["v"], r["_bucket"]) for r in t.to_arrow().to_pylist()}
    assert rows == {"k1": (1, 1), "k2": (2, 1), "k3": (2, 0)}
    assert t.check().healthy


def test_a_write_completed_between_the_check_and_the_lease_is_checked_under_the_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The commit checks most instants before it takes the lease; one that completes after
    that check is checked under the lease: both inserted k2, so this write runs again."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path)
    other = Table.open(t.uri)
    _under_the_lease(monkeypatch, lambda: other.upsert(_rows(["k1", "k2"], 1)))
    done = t.upsert(_rows(["k2", "k3"], 2))
    assert _retries(caplog) == 1 and done.written_again == 1
    assert (done.keys_inserted, done.keys_updated) == (1, 1)
    rows = {r["id"]: (r["v"], r["_bucket"]) for r in t.to_arrow().to_pylist()}
    assert rows == {"k1": (1, 1), "k2": (2, 1), "k3": (2, 0)}
    assert t.check().healthy


def test_writers_beside_each_other_fill_their_own_buckets_and_none_writes_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The other writer begins beside this one's pending instant (lane 0 of 1) and takes
    lane 1 of 2: its new keys go to bucket 1, so the two commits share no bucket."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path)
    other = Table.open(t.uri)
    _beside(monkeypatch, lambda: other.upsert(_rows(["a1", "a2", "a3"], 1)))
    t.upsert(_rows(["b1", "b2", "b3"], 1))
    assert _retries(caplog) == 0
    buckets = {r["id"]: r["_bucket"] for r in t.to_arrow().to_pylist()}
    assert buckets == {"a1": 1, "a2": 1, "a3": 1, "b1": 0, "b2": 0, "b3": 0}
    # Seen once, the other lane counts for heartbeat.expiry-seconds: lane 0 of 2 still.
    t.upsert(_rows(["b4", "b5"], 2))
    assert {r["id"]: r["_bucket"] for r in t.to_arrow().to_pylist()}["b5"] == 2
    assert t.check().healthy


def test_capacity_holds_when_both_fill_one_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Writers whose lanes disagree (one began before the other took its lane) may fill
    one bucket: the commit check holds its capacity."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    monkeypatch.setattr(Lanes, "choose", lambda self, live, now=None: ALONE)
    t = _table(tmp_path)
    other = Table.open(t.uri)
    _beside(monkeypatch, lambda: other.upsert(_rows(["a1", "a2", "a3"], 1)))
    t.upsert(_rows(["b1", "b2", "b3"], 1))
    assert _retries(caplog) == 1
    buckets = sorted((r["_bucket"], r["id"]) for r in t.to_arrow().to_pylist())
    # Bucket 0 holds 4 keys at most: the second writer's keys spill into bucket 1.
    assert [b for b, _ in buckets].count(0) == 4 and [b for b, _ in buckets].count(1) == 2
    assert max(r["keys"] for r in t.stats().to_pylist()) == 4


@pytest.mark.parametrize(("table_type", "retried"), [("MERGE_ON_READ", 0), ("COPY_ON_WRITE", 1)])
def test_updates_of_known_keys_conflict_only_when_a_base_is_rewritten(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    table_type: str,
    retried: int,
) -> None:
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path, table_type)
    t.upsert(_rows(["k1", "k2"], 1))
    other = Table.open(t.uri)
    _beside(monkeypatch, lambda: other.upsert(_rows(["k1"], 5)))
    t.upsert(_rows(["k1", "k2"], 3))  # k1 loses to the other's larger v, k2 wins
    assert _retries(caplog) == retried
    assert {r["id"]: r["v"] for r in t.to_arrow().to_pylist()} == {"k1": 5, "k2": 3}
    assert t.check().healthy


def test_a_delete_beside_an_update_of_its_key_conflicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path)
    t.upsert(_rows(["k1", "k2"], 1))
    other = Table.open(t.uri)
    _beside(monkeypatch, lambda: other.upsert(_rows(["k1"], 7)))
    done = t.delete(pa.table({"id": ["k1"], "day": ["d1"]}))
    assert _retries(caplog) == 1 and done.keys_deleted == 1
    assert [r["id"] for r in t.to_arrow().to_pylist()] == ["k2"]
    assert t.check().healthy  # the index's tombstone matches: k1 is in no bucket


def test_a_partial_upsert_beside_a_write_of_its_key_keeps_that_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The partial upsert fills ``b`` from the row it read; the other writer's newer ``b``
    would be undone by it had the commit not been written again."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    schema = SCHEMA.append(pa.field("a", pa.string())).append(pa.field("b", pa.string()))
    opts = TableOptions(write_concurrency_mode=OCC, compaction_async=False)
    t = Table.create(str(tmp_path / "t"), schema, "id", "day", "v", options=opts)
    t.upsert(
        pa.table(
            {
                "id": ["k1", "k2"],
                "day": ["d1"] * 2,
                "v": [1, 1],
                "a": ["a0", "a0"],
                "b": ["b0", "b0"],
            }
        )
    )
    other = Table.open(t.uri)
    _beside(
        monkeypatch,
        lambda: other.upsert(
            pa.table({"id": ["k1"], "day": ["d1"], "v": [5], "a": ["a0"], "b": ["b5"]})
        ),
    )
    t.upsert(
        pa.table({"id": ["k1", "k2"], "day": ["d1"] * 2, "v": [9, 9], "a": ["a9"] * 2}),
        partial=True,
    )
    assert _retries(caplog) == 1
    rows = {r["id"]: (r["a"], r["b"]) for r in t.to_arrow().to_pylist()}
    assert rows == {"k1": ("a9", "b5"), "k2": ("a9", "b0")}


def test_a_write_that_keeps_conflicting_fails_typed_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _table(tmp_path, "COPY_ON_WRITE", conflict_retries=2)
    other = Table.open(t.uri)
    count = iter(range(100))
    _beside(monkeypatch, lambda: other.upsert(_rows(["k1"], next(count))), times=3)
    with pytest.raises(WriteConflictError, match="one a base file"):
        t.upsert(_rows(["k1"], 50))
    assert [r["v"] for r in t.to_arrow().to_pylist()] == [2]  # the other's third write
    assert not t.snapshot().timeline.pending()
    assert len(t.snapshot().timeline.completed()) == 3


def test_a_writer_killed_holding_the_commit_lease_delays_others_a_lease(tmp_path: Path) -> None:
    t = _table(tmp_path, commit_lease_seconds=1.0)
    t.upsert(_rows(["k1"], 1))
    dead = Transaction.begin(t._store, t._spec, "commit", "upsert", hold=False)
    assert dead.heartbeat is not None and dead.lock is not None
    dead.heartbeat._stop.set()  # it dies: no beat, no renewal
    dead.lock.acquire(instant=dead.id)
    dead.lock._stop.set()
    start = time.monotonic()
    t.upsert(_rows(["k2"], 2))  # waits for the dead lease, then settles its instant
    assert time.monotonic() - start < 1.0 + 2.0
    assert dead.id not in {i.id for i in t.snapshot().timeline.instants()}
    with pytest.raises(ConcurrentWriteError):
        dead.commit()  # its outcome was decided: rolled back
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == ["k1", "k2"]


def test_a_writer_paused_past_its_heartbeat_is_rolled_back_and_cannot_commit(
    tmp_path: Path,
) -> None:
    t = _table(tmp_path, heartbeat_expiry_seconds=0.5)
    paused = Transaction.begin(t._store, t._spec, "commit", "upsert", hold=False)
    assert paused.heartbeat is not None
    live = Transaction.begin(t._store, t._spec, "commit", "upsert", hold=False)
    assert paused.id in {i.id for i in t.snapshot().timeline.pending()}  # alive: kept
    live.abort()
    report = t.check()  # a live writer's instant is no finding
    assert report.healthy and any("being written" in n for n in report.notes)
    paused.heartbeat._stop.set()  # SIGSTOP: no beat
    time.sleep(0.6)
    assert not heartbeat.is_alive(t._store, paused.id)
    assert any("left pending" in str(f) for f in t.check().findings)
    t.upsert(_rows(["k1"], 1))  # begins: settles the dead instant
    assert paused.id not in {i.id for i in t.snapshot().timeline.instants()}
    with pytest.raises(ConcurrentWriteError, match="heartbeat"):
        paused.commit()
    assert [r["id"] for r in t.to_arrow().to_pylist()] == ["k1"]


def test_a_writer_waits_for_another_writers_commit_lease_instead_of_failing(
    tmp_path: Path,
) -> None:
    t = _table(tmp_path)
    holder = WriterLock.for_table(t._store, t._spec.options.lease())
    holder.acquire()
    threading.Timer(0.5, holder.release).start()
    start = time.monotonic()
    done = t.upsert(_rows(["k1"], 1))
    assert time.monotonic() - start >= 0.4
    assert [r["id"] for r in t.to_arrow().to_pylist()] == ["k1"]
    # The wait shows in the result: its seconds and its one line.
    assert 0.3 <= done.seconds["lease"] <= done.seconds["total"]
    assert "waiting for the commit lease" in str(done)
    assert "lease" not in t.upsert(_rows(["k2"], 1)).seconds  # nobody held it


@pytest.mark.parametrize("action", ["logcompaction", "index-compaction"])
def test_a_service_planned_after_a_write_began_makes_its_commit_write_again(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    action: str,
) -> None:
    """A log compaction (index compaction) planned while a write is written, without the
    write's log (index delta), would hide it once it completes: readers skip what a merged
    log restates by instant range. The write's commit conflicts, and it is written again
    under a younger instant than the service's."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path)
    t.upsert(_rows(["k1", "k2"], 1))
    partition = "day=d1"
    file_id = data_files(t._store, partition)[0].file_id
    plans = {
        "logcompaction": {"groups": [[partition, file_id, "", [], ""]]},
        "index-compaction": {"partitions": [partition], "merges": {}},
    }
    planned: list[str] = []

    def plan_service() -> None:
        operation = "logcompact" if action == "logcompaction" else "index-compaction"
        found = schedule(t._store, t._spec, action, operation, lambda txn: plans[action])
        assert found is not None
        planned.append(found)

    _beside(monkeypatch, plan_service)
    done = t.upsert(_rows(["k1", "k3"], 2))  # a log in k1's group, a new key's index entry
    assert _retries(caplog) == 1
    assert done.instant > planned[0]  # written again, younger than the service
    assert {r["id"]: r["v"] for r in t.to_arrow().to_pylist()} == {"k1": 2, "k2": 1, "k3": 2}


def test_a_log_on_a_slice_an_older_compaction_completed_meanwhile_is_carried_not_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A compaction planned before a write began completes while the write is written: the
    write's log sits on the slice the compaction restated. The commit carries it onto the
    new slice (the next version there, the write's token) instead of writing again."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path)
    t.upsert(_rows(["k1", "k2"], 1))
    t.upsert(_rows(["k1"], 2))  # a log on the group's slice
    planned = compaction.schedule(t._store, t._spec)
    assert planned is not None
    _beside(monkeypatch, lambda: compaction.run(t._store, t._spec, planned))
    done = t.upsert(_rows(["k2", "k3"], 3))  # begins after the plan: a younger instant
    assert done.instant > planned and _retries(caplog) == 0
    files = data_files(t._store, "day=d1")
    mine = [f for f in files if f.instant == done.instant and f.kind == "log"]
    # The original on the old slice is gone; the copy is log 1 on the compaction's base.
    assert [(f.base_instant, f.version) for f in mine] == [(planned, 1)]
    assert {r["id"]: r["v"] for r in t.to_arrow().to_pylist()} == {"k1": 2, "k2": 3, "k3": 3}
    assert {r["id"]: r["v"] for r in hudi_read(t.uri).to_pylist()} == {"k1": 2, "k2": 3, "k3": 3}
    assert t.check().healthy


def _values(rows: pa.Table) -> dict[str, int]:
    return {r["id"]: r["v"] for r in rows.to_pylist()}


def _logs_of(t: Table, instant: str) -> list[tuple[str, int]]:
    """(base instant, version) of each log ``instant`` has in partition d1."""
    files = data_files(t._store, "day=d1")
    return sorted(
        (f.base_instant, f.version) for f in files if f.instant == instant and f.kind == "log"
    )


def _reads_the_same(t: Table, expected: dict[str, int], **as_of: str) -> None:
    """Ours and hudi-rs read ``expected`` (latest, or as of ``as_of["as_of"]``)."""
    assert _values(t.to_arrow(as_of.get("as_of"))) == expected
    assert _values(hudi_read(t.uri, **as_of)) == expected


def test_a_compaction_planned_while_a_write_is_written_takes_its_log_at_a_kept_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A compaction planned and completed while a write is written (younger than it) left
    the write's log out and kept log version 1 of its new slice for it (its base file's
    token says so). The write commits without writing again: its log is copied onto the
    new slice at that version, and the original stays on the old slice, which a view
    between the two instants reads. A write after both logs at version 2."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path)
    first = t.upsert(_rows(["k1", "k2"], 1)).instant
    t.upsert(_rows(["k1"], 2))  # log 1 on the group's slice
    planned: list[str] = []

    def plan_and_run() -> None:
        found = compaction.schedule(t._store, t._spec)
        assert found is not None
        planned.append(found)
        compaction.run(t._store, t._spec, found)

    _beside(monkeypatch, plan_and_run)
    done = t.upsert(_rows(["k2", "k3"], 3))  # an update and a new key, in the one group
    monkeypatch.undo()
    assert done.instant < planned[0] and _retries(caplog) == 0
    bases = [f for f in data_files(t._store, "day=d1") if f.kind == "base"]
    assert sorted((f.instant, f.version) for f in bases) == [(first, 0), (planned[0], 1)]
    # The original stays on the old slice, log 2 there.
    assert _logs_of(t, done.instant) == sorted([(first, 2), (planned[0], 1)])
    _reads_the_same(t, {"k1": 2, "k2": 3, "k3": 3})
    _reads_the_same(t, {"k1": 2, "k2": 3, "k3": 3}, as_of=done.instant)
    after = t.upsert(_rows(["k1"], 4))
    assert _logs_of(t, after.instant) == [(planned[0], 2)]
    _reads_the_same(t, {"k1": 4, "k2": 3, "k3": 3})
    assert t.check().healthy
    t.clean(retain=1)  # the old slice goes; the copy older than its base stays
    assert _logs_of(t, done.instant) == [(planned[0], 1)]
    _reads_the_same(t, {"k1": 4, "k2": 3, "k3": 3})
    assert t.check().healthy


def test_a_compaction_completed_after_a_write_it_left_out_carries_that_writes_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A compaction planned while a write is written, completed after the write committed
    (no conflict: it left the write's log out) and after a younger write: its finish copies
    both logs onto its new slice, the older write's at the version kept for it, before the
    younger one's, as readers must order them."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path)
    first = t.upsert(_rows(["k1", "k2"], 1)).instant
    t.upsert(_rows(["k1"], 2))
    planned: list[str] = []
    _beside(monkeypatch, lambda: planned.append(compaction.schedule(t._store, t._spec)))
    done = t.upsert(_rows(["k2", "k3"], 3))
    monkeypatch.undo()
    younger = t.upsert(_rows(["k2"], 3))  # the same ordering value: the later write wins
    assert done.instant < planned[0] < younger.instant and _retries(caplog) == 0
    _reads_the_same(t, {"k1": 2, "k2": 3, "k3": 3})
    compaction.run(t._store, t._spec, planned[0])
    # The original stays on the old slice, log 2 there.
    assert _logs_of(t, done.instant) == sorted([(first, 2), (planned[0], 1)])
    assert _logs_of(t, younger.instant) == sorted([(first, 3), (planned[0], 2)])
    _reads_the_same(t, {"k1": 2, "k2": 3, "k3": 3})
    report = t.check()
    assert report.healthy, str(report)


@pytest.mark.parametrize(("theirs", "again"), [("k1", 0), ("k2", 1)])
def test_a_log_carried_after_a_younger_writes_log_conflicts_only_on_a_key_both_wrote(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    theirs: str,
    again: int,
) -> None:
    """A write begun while a compaction was pending carries its log onto the compaction's
    slice after a younger write's log there: Hudi's readers order the two by version, ours
    by instant, which differ only on a key both wrote with one ordering value. Another key
    (k1): carried after it, no conflict; the same key and value (k2): written again."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path)
    t.upsert(_rows(["k1", "k2"], 1))
    t.upsert(_rows(["k1"], 2))
    planned = compaction.schedule(t._store, t._spec)
    assert planned is not None
    other = Table.open(t.uri)
    younger: list[str] = []

    def complete_then_write() -> None:
        compaction.run(t._store, t._spec, planned)
        younger.append(other.upsert(_rows([theirs], 3)).instant)  # on the new slice

    _beside(monkeypatch, complete_then_write)
    done = t.upsert(_rows(["k2"], 3))
    monkeypatch.undo()
    assert _retries(caplog) == again
    if not again:
        assert planned < done.instant < younger[0]
        assert _logs_of(t, done.instant) == [(planned, 2)]  # after the younger one's
    expected = {"k1": 3 if theirs == "k1" else 2, "k2": 3}
    _reads_the_same(t, expected)
    assert t.check().healthy
    other.close()


@pytest.mark.parametrize("version", [6, 9])
@pytest.mark.parametrize("write", ["upsert", "delete"])
def test_a_log_compaction_planned_before_a_write_and_completed_meanwhile_keeps_its_log(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    version: int,
    write: str,
) -> None:
    """A log compaction planned before a write began completes while the write is written,
    over the group the write logs to. The write's log sorts after the merged log (version
    9: named on its own, younger instant; version 6: the same version, the merged log not
    visible at the write, and its token's younger writer instant) and outside the range
    the merged log restates: the write commits as it is, not written again (four writers
    wrote about one write in twenty again for this). A delete carries no ordering value,
    so only that order keeps the merged log's record of its key from coming back."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    opts = TableOptions(
        write_concurrency_mode=OCC,
        compaction_async=False,
        clean_automatic=False,
        table_version=version,
    )
    index = DynamicBucketIndex(max_keys_per_bucket=100_000)
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", "v", index, opts)
    live = {f"b{i}": 0 for i in range(5_000)}
    t.upsert(_rows(list(live), 0))  # logs far under the base: merged, not compacted
    t.upsert(_rows(["k1", "k2"], 1))
    t.upsert(_rows(["k1"], 2))  # two logs on the group's slice
    planned = log_compaction.schedule_log(t._store, t._spec, 2)
    assert planned is not None
    _beside(monkeypatch, lambda: log_compaction.run_log(t._store, t._spec, planned))
    if write == "upsert":
        done = t.upsert(_rows(["k1", "k3"], 4))  # an update and a new key, in the one group
        expected = {**live, "k1": 4, "k2": 1, "k3": 4}
    else:
        done = t.delete(pa.table({"id": ["k2"], "day": ["d1"]}))
        expected = {**live, "k1": 2}
    monkeypatch.undo()
    assert done.instant > planned and _retries(caplog) == 0
    merged = [f for f in data_files(t._store, "day=d1") if f.instant == planned]
    assert len(merged) == 1 and merged[0].merges_from
    (mine,) = [f for f in data_files(t._store, "day=d1") if f.instant == done.instant]
    assert mine.kind == "log"
    _reads_the_same(t, expected)
    _reads_the_same(t, {**live, "k1": 2, "k2": 1}, as_of=planned)
    after = t.upsert(_rows(["k1"], 5))
    _reads_the_same(t, {**expected, "k1": 5})
    _reads_the_same(t, expected, as_of=done.instant)
    assert after.instant > done.instant and t.check().healthy


def test_on_version_9_a_compaction_planned_while_a_write_is_written_makes_it_write_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """hudi-rs slices a version 9 table's logs by completion time: a write pending at a
    compaction's plan reads on the compaction's slice there, which no view before the
    compaction has. So on version 9 such a compaction keeps no version for the write, and
    the write runs again, younger than the compaction; both readers agree."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path, table_version=9)
    t.upsert(_rows(["k1", "k2"], 1))
    t.upsert(_rows(["k1"], 2))
    planned: list[str] = []
    _beside(monkeypatch, lambda: planned.append(compaction.schedule(t._store, t._spec)))
    done = t.upsert(_rows(["k2", "k3"], 3))
    assert _retries(caplog) == 1 and done.instant > planned[0]
    compaction.run(t._store, t._spec, planned[0])
    _reads_the_same(t, {"k1": 2, "k2": 3, "k3": 3})
    _reads_the_same(t, {"k1": 2, "k2": 1}, as_of=planned[0])
    assert t.check().healthy


def test_an_index_compaction_completed_while_a_write_is_written_leaves_its_delta_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An index compaction planned while a write is written restates the partition's
    instants before that write only (the oldest pending): the write's delta stays after
    the new base, and its commit goes through without writing again; a clean after both
    keeps the delta the base does not restate."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path)
    t.upsert(_rows(["k1"], 1))
    t.upsert(_rows(["k2"], 1))
    other = Table.open(t.uri)
    done: list[Any] = []
    _beside(monkeypatch, lambda: done.append(other.compact_index(min_files=2)))
    result = t.upsert(_rows(["k3"], 2))
    assert done[0].instant is not None and result.instant < done[0].instant
    assert _retries(caplog) == 0
    names = sorted(f.name for f in index_files(t._store, "day=d1"))
    base = next(n for n in names if ".base." in n)
    assert base == f"{done[0].instant}.base.u{result.instant}.parquet"
    assert f"{result.instant}.delta.parquet" in names
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == ["k1", "k2", "k3"]
    assert t.check().healthy  # k3's index entry is there
    other.upsert(_rows(["k4"], 3))
    t.clean(retain=1)
    left = sorted(f.name for f in index_files(t._store, "day=d1"))
    assert base in left and f"{result.instant}.delta.parquet" in left  # still read
    assert len(left) == 3  # the deltas the base restates went
    again = Table.open(t.uri)
    again.upsert(_rows(["k3", "k5"], 4))  # k3 known: an update, no second row
    assert sorted(r["id"] for r in again.to_arrow().to_pylist()) == ["k1", "k2", "k3", "k4", "k5"]
    assert again.check().healthy
    for table in (again, other):
        table.close()


def test_a_writers_caches_do_not_miss_keys_of_an_older_instant_completed_after_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer's instant, begun before this writer's and completed after it (ids out
    of completion order), placed a new key this writer's caches do not hold: its next write
    knows the key all the same (the caches match the set of completed writes)."""
    # Lanes as two writers' that disagree: the other fills the bucket this one's caches
    # count (with lanes, it learns this one's from its commits and fills bucket 1).
    monkeypatch.setattr(Lanes, "choose", lambda self, live, now=None: ALONE)
    t = _table(tmp_path)
    t.upsert(_rows(["k1"], 1))
    t.upsert(_rows(["k8"], 1, "d2"))  # this writer's caches hold d2 now
    other = Table.open(t.uri)
    mine: list[Any] = []
    _beside(monkeypatch, lambda: mine.append(t.upsert(_rows(["k1"], 2))))
    # Begins, then this writer commits; then it fills d2's bucket 0 (4 keys).
    theirs = other.upsert(_rows(["k9", "k10", "k11"], 1, "d2"))
    monkeypatch.undo()
    assert theirs.instant < mine[0].instant  # older, completed later
    done = t.upsert(_rows(["k9", "k12"], 3, "d2"))
    assert (done.keys_inserted, done.keys_updated) == (1, 1)
    rows = {r["id"]: (r["v"], r["_bucket"]) for r in t.to_arrow().to_pylist()}
    # Caches that missed k9-k11 would count bucket 0 at one key and put k12 there (5 keys).
    assert rows == {
        "k1": (2, 0),
        "k8": (1, 0),
        "k9": (3, 0),
        "k10": (1, 0),
        "k11": (1, 0),
        "k12": (3, 1),
    }
    assert t.check().healthy


def test_a_writer_paused_past_its_heartbeat_that_nobody_settled_commits(
    tmp_path: Path,
) -> None:
    """Alone on the table, a writer paused past its heartbeat (SIGSTOP) again and again is
    not refused for the lapse itself: nobody decided its instant rolled back, so its commit
    point decides. (Refusing every lapse made the last writer of the S3 model, paused by
    every fault, run out of its conflict retries.) A settler that comes after it committed
    finds it committed."""
    t = _table(tmp_path, heartbeat_expiry_seconds=0.5)
    paused = Transaction.begin(t._store, t._spec, "commit", "upsert", hold=False)
    assert paused.heartbeat is not None
    paused.heartbeat._stop.set()  # SIGSTOP: no beat
    time.sleep(0.6)
    assert paused.heartbeat.lapsed() and not heartbeat.is_alive(t._store, paused.id)
    paused.commit()
    assert paused.id in {i.id for i in t.snapshot().timeline.completed()}
    t.upsert(_rows(["k1"], 1))  # begins: nothing of the committed instant is settled
    assert paused.id in {i.id for i in t.snapshot().timeline.completed()}
    assert t.check().healthy


@pytest.mark.parametrize("taker", ["archival", "adoption check"])
def test_a_commit_paused_past_its_lease_stays_fenced_whoever_took_the_lease_over(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    taker: str,
) -> None:
    """A write paused past its commit lease after its checks (SIGSTOP), while another took
    the lease over without settling the write's instant and released it (an archival), then
    a compaction of the group it logged to, planned before it began, completed. The lease
    that was taken over names the write: whoever takes the lease next settles it, so the
    write, waking, is refused and runs again onto the new slice. (Before, only a taker that
    saw the write's own expired lease settled it: the compaction completed without the
    write's log, the write woke and committed it on the slice the compaction restated,
    where no reader reads it; the writers model lost an acknowledged update so in CI,
    seed 143056.)"""
    from dynbucket.format.timeline import archive
    from dynbucket.format.timeline.actions import Action

    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path, commit_lease_seconds=0.2)
    for v in range(3):
        t.upsert(_rows(["k1", "k2"], v))
    planned = compaction.schedule(t._store, t._spec)
    assert planned is not None

    def took_over() -> None:
        if taker == "archival":
            archive.archive(t._store, True, keep_min=1, keep_max=1, lease_seconds=0.2)
        else:  # a bare take and release of the lease (what adoption's lock does)
            with WriterLock(t._store, 0.2):
                pass

    real, paused = Transaction._decide, []

    def pause(self: Transaction, body: dict[str, Any]) -> Any:
        if not paused and self.instant.action == Action.COMMIT:
            paused.append(self.id)
            assert self.lock is not None
            self.lock._stop.set()  # SIGSTOP: the lease is no longer renewed
            time.sleep(0.3)
            took_over()
            compaction.run(t._store, t._spec, planned)
        return real(self, body)

    monkeypatch.setattr(Transaction, "_decide", pause)
    done = t.upsert(_rows(["k1"], 7))
    _reads_the_same(t, {"k1": 7, "k2": 2})
    assert paused and done.instant != paused[0] and done.written_again == 1
    assert _logs_of(t, done.instant) == [(planned, 1)]
    assert paused[0] not in {i.id for i in t.snapshot().timeline.instants()}
    assert t.check().healthy


def test_a_writer_beginning_while_another_is_between_writes_takes_a_lane_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The other writer's first write begins when this one has no pending instant: it
    learns this one's lane from its commit, completed within the expiry, and takes lane 1
    of 2 (bucket 1, not the room left in bucket 0); so the two fill their own buckets when
    they next write beside each other, and neither writes again."""
    caplog.set_level(logging.INFO, "dynbucket.write.writer")
    t = _table(tmp_path)
    t.upsert(_rows(["b1", "b2", "b3"], 1))
    other = Table.open(t.uri)
    other.upsert(_rows(["a1", "a2", "a3"], 1))
    buckets = {r["id"]: r["_bucket"] for r in t.to_arrow().to_pylist()}
    assert buckets == {"b1": 0, "b2": 0, "b3": 0, "a1": 1, "a2": 1, "a3": 1}
    _beside(monkeypatch, lambda: other.upsert(_rows(["a4", "a5"], 2)))
    t.upsert(_rows(["b4", "b5"], 2))
    assert _retries(caplog) == 0
    buckets = {r["id"]: r["_bucket"] for r in t.to_arrow().to_pylist()}
    assert {k: buckets[k] for k in ("a4", "a5", "b4", "b5")} == {"a4": 1, "a5": 3, "b4": 0, "b5": 2}
    assert max(r["keys"] for r in t.stats().to_pylist()) == 4
    assert t.check().healthy
