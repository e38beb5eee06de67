"""A table service killed with SIGKILL in the middle: a compaction while it finishes (its
base files and the carried logs written, the lease held), a log compaction before it
completes (its merged logs written), a clean after it removed some files, an archival
after its record and before the removal. The next writer goes on (the
lease runs out), the next run completes what was left, and nothing is lost or doubled;
both readers read the model and ``dynbucket check`` finds the table healthy."""

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

from dynbucket.format.health.check import check
from dynbucket.format.services import clean, rollback
from dynbucket.format.services.log_compaction import LogCompaction
from dynbucket.format.services.service import Scope, run_now
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.options import TableOptions
from dynbucket.format.timeline import archive
from dynbucket.format.timeline.plans import left_pending
from dynbucket.format.timeline.timeline import Timeline, document_of
from dynbucket.format.timeline.transaction import Transaction
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads
from tests.hudi_tables import unzipped

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
OPTIONS = TableOptions(
    compaction_async=False,
    clean_automatic=False,
    archive_automatic=False,
    index_compaction_automatic=False,
    metadata_compaction_automatic=False,
    cleaner_commits_retained=2,
    keep_min_commits=4,
    keep_max_commits=6,
    lock_lease_seconds=1.0,
    commit_lease_seconds=1.0,
    heartbeat_expiry_seconds=1.0,
)

CHILD = r"""
import dataclasses, sys, time
import pyarrow as pa
from dynbucket.table import Table
from dynbucket.format.services import clean, compaction, log_compaction
from dynbucket.format.timeline import archive, transaction
from dynbucket.format.timeline.timeline import Timeline

def stall(*args, **kwargs):
    print("AT", flush=True)
    time.sleep(3600)

service = sys.argv[2]
t = Table.open(sys.argv[1])
if service == "compaction":
    scheduled = compaction.schedule(t._store, t._spec, 1)
    written = compaction.execute(t._store, t._spec, scheduled)
    # A write while it runs, of known keys in two groups: its logs are carried when it
    # finishes (a new key would go to a bucket of this writer's lane, not compacted).
    ids = ["a", "b0"]
    t.upsert(pa.table({"id": ids, "day": [f"d{sum(map(ord, i)) % 2}" for i in ids],
                       "v": [50, 50]}))
    transaction.Transaction.commit = stall  # base files and carried logs are written
    compaction.finish(t._store, t._spec, scheduled, written)
elif service == "logcompaction":
    # Logs merged whatever their size against the base (these bases are small).
    options = dataclasses.replace(t._spec.options, compaction_log_size_ratio=1e6)
    spec = dataclasses.replace(t._spec, options=options)
    scheduled = log_compaction.schedule_log(t._store, spec, 2)
    transaction.Transaction.commit = stall  # the merged logs are written
    log_compaction.run_log(t._store, spec, scheduled)
elif service == "clean":
    real = clean._remove
    def some(store, files):
        if real(store, files):
            stall()  # data files are gone, the clean not completed
        return []
    clean._remove = some
    clean.clean(t._store, t._spec)
else:
    Timeline.forget_archived = stall  # the record is written, no instant removed yet
    o = t._spec.options
    archive.archive(t._store, True, o.keep_min_commits, o.keep_max_commits, 1.0)
"""


def _rows(ids: list[str], v: int) -> pa.Table:
    """Rows of ``ids``; each key's partition is one of two, always the same for it."""
    days = [f"d{sum(map(ord, i)) % 2}" for i in ids]
    return pa.table({"id": ids, "day": days, "v": [v] * len(ids)}, schema=SCHEMA)


def _live(t: Table) -> dict[str, int]:
    rows = t.to_arrow(meta_columns=False)
    return dict(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist(), strict=True))


def _written(tmp_path: Path, writes: int, version: int = 6) -> tuple[Table, dict[str, int]]:
    """A table of ``writes`` upserts with the services off, and what it holds."""
    options = dataclasses.replace(OPTIONS, table_version=version)
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=options)
    model: dict[str, int] = {}
    for i in range(writes):
        ids = [f"k{i}", "a", f"b{i % 3}"]
        t.upsert(_rows(ids, i))
        model.update(dict.fromkeys(ids, i))
    return t, model


@pytest.mark.sample(1)
@pytest.mark.parametrize("service", ["compaction", "logcompaction", "clean", "archive"])
def test_a_service_killed_midway_loses_nothing(tmp_path: Path, service: str) -> None:
    _killed_midway(tmp_path, service, 6)


def test_a_clean_killed_after_removing_files_of_a_version_9_table_leaves_none_listed(
    tmp_path: Path,
) -> None:
    """The clean's executor killed after its data files went; the next one completes the
    clean, finding them gone: the metadata table's listing drops them still (it named none
    of them, and `check` found files listed that were not stored: the writers model on a
    version 9 table on S3, 2026-12-02)."""
    _killed_midway(tmp_path, "clean", 9)


def test_rollback_completes_a_clean_killed_after_removing_files(tmp_path: Path) -> None:
    """The clean's executor killed after its data files went, on a version 9 table, and no
    writer writes again: `dynbucket rollback` completes the clean (its files cannot come
    back), so the metadata table drops them and Hudi's readers read the table (before,
    they failed on the listed files until another writer's services ran: the writers
    model, 24 writes a writer, 2026-12-02)."""
    _killed_midway(tmp_path, "clean", 9, by_rollback=True)


def _killed_midway(tmp_path: Path, service: str, version: int, by_rollback: bool = False) -> None:
    t, model = _written(tmp_path, 8, version)
    if service == "clean":  # slices below the horizon: the clean has files to remove
        assert t.compact().instant is not None
        for i in range(3):
            t.upsert(_rows(["a", f"c{i}"], 20 + i))
            model.update({"a": 20 + i, f"c{i}": 20 + i})
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, t.uri, service], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().split() == ["AT"]
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()
    if service == "compaction":
        model.update(a=50, b0=50)
        (pending,) = Timeline(t._store, True).pending()
        carried = [p for p in Path(t.uri).rglob(f".*_{pending.id}.log.*")]
        assert len(carried) == 2  # the late write's logs (two groups), onto the new slices
    # What readers see is the model, whatever the service had done.
    reader = Table.open(t.uri)
    assert _live(reader) == model
    time.sleep(1.1)  # the killed service's lease (if it held one) runs out
    if by_rollback:
        assert reader.rollback() == []  # a clean is not rolled back: it is completed
        assert Timeline(reader._store, True).pending() == []
        assert _live(reader) == model
        check_hudi_reads(reader)
        assert reader.check().healthy
        return
    # The next writer goes on; the next run completes what was left pending.
    reader.upsert(_rows(["a", "z"], 100))
    model.update(a=100, z=100)
    if service == "compaction":
        assert reader.compact().instant is not None
    elif service == "logcompaction":
        (left,) = left_pending(Timeline(reader._store, True), "logcompaction")
        merged = [p for p in Path(t.uri).rglob(f".*-{left.id}-2*")]
        assert len(merged) == 2  # both groups' merged logs, not visible
        assert run_now(LogCompaction(), reader._store, reader._spec, Scope()).instant is None
        assert left.id in [i.id for i in Timeline(reader._store, True).completed()]
    elif service == "clean":
        (left,) = left_pending(Timeline(reader._store, True), "clean")
        assert clean.execute_clean(reader._store, reader._spec, left.id).instant == left.id
    else:
        for i in range(3):
            reader.upsert(_rows([f"m{i}"], i))
            model[f"m{i}"] = i
        assert archive.archive(reader._store, True, 4, 6, 1.0).archived > 0
    assert Timeline(reader._store, True).pending() == []
    assert _live(reader) == model
    check_hudi_reads(reader)
    assert reader.check().healthy


#: Services on, as a user gets them, on a short timeline (archival from 6 instants).
SERVICES_ON = TableOptions(
    cleaner_commits_retained=2,
    clean_max_commits=2,
    keep_min_commits=4,
    keep_max_commits=6,
    index_compaction_min_files=2,
    compaction_delta_commits=2,
    lock_lease_seconds=1.0,
)

SCHEDULING_CHILD = r"""
import dataclasses, sys, time
from dynbucket.table import Table
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.services import clean, compaction, index_compaction, log_compaction
from dynbucket.format.timeline import transaction
from dynbucket.format.timeline.timeline import Timeline

def stall(*args, **kwargs):
    print("AT", flush=True)
    time.sleep(3600)

t = Table.open(sys.argv[1])
service, when = sys.argv[2], sys.argv[3]
# Logs merged whatever their size against the base (these bases are small).
spec = dataclasses.replace(
    t._spec, options=dataclasses.replace(t._spec.options, compaction_log_size_ratio=1e6)
)
if when == "planning":  # under the lease, its plan being made: no instant created yet
    transaction.Transaction.record_plan = stall
elif when == "scheduling":  # the instant is requested, its plan not yet recorded
    Timeline.start = stall
else:  # scheduled, its executor killed before it wrote anything
    RecordLevelIndex.compact = RecordLevelIndex.merge_deltas = stall
    compaction.execute = log_compaction.run_log = clean.execute_clean = stall
if service == "compaction":
    compaction.run(t._store, spec, compaction.schedule(t._store, spec, 1))
elif service == "logcompaction":
    log_compaction.run_log(t._store, spec, log_compaction.schedule_log(t._store, spec, 1))
elif service == "clean":
    clean.execute_clean(t._store, spec, clean.schedule_clean(t._store, spec))
elif service == "metadata-compaction":  # every record-index group with a log is due
    from dynbucket.format.metadata import compaction as metadata
    from dynbucket.format.services import metadata_compaction as service_module

    metadata.MAX_DELTAS, metadata.LOG_RATIO = 1, 0.0
    if when == "executing":
        metadata.execute = stall
    scheduled = service_module.schedule_metadata_compaction(t._store, spec)
    service_module.execute_metadata_compaction(t._store, spec, scheduled)
else:
    scheduled = index_compaction.schedule_index_compaction(t._store, spec, 2)
    index_compaction.execute_index_compaction(t._store, spec, scheduled)
"""


def _kill_in(t: Table, service: str, when: str) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", SCHEDULING_CHILD, t.uri, service, when],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().split() == ["AT"]
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()
    time.sleep(1.1)  # the killed scheduler's lease runs out


@pytest.mark.sample(1)
@pytest.mark.parametrize(
    ("service", "when"),
    [
        ("compaction", "planning"),
        ("compaction", "scheduling"),
        ("logcompaction", "scheduling"),
        ("clean", "scheduling"),
        ("index-compaction", "scheduling"),
        # Executors killed after scheduling, then a stream of updates only (no new keys:
        # no index file, so no index compaction is ever due again).
        ("index-compaction", "executing"),
        ("clean", "executing"),
        # A version 9 table's metadata compaction, its executor killed before its bases.
        ("metadata-compaction", "executing"),
    ],
)
def test_a_service_killed_while_scheduled_or_executed_holds_nothing_back(
    tmp_path: Path, service: str, when: str
) -> None:
    """A service killed while it planned leaves nothing (its instant is written with its
    plan, or not at all). One killed between its request and its plan left an instant no
    executor can run
    (a clean without ``earliest-retained`` failed every later clean and stopped archival
    for good); one killed while it executed must be finished by the next write's services
    even when none of its kind is due again. ``check`` says so meanwhile."""
    t, model = _written(tmp_path, 6, 9 if service == "metadata-compaction" else 6)
    t.wait_for_services()
    t.close()
    before = Timeline(t._store, True).instants()
    _kill_in(t, service, when)
    if when == "planning":  # a schedule writes its instant with its plan, or nothing
        assert Timeline(t._store, True).instants() == before
        assert Table.open(t.uri).check().healthy
        return
    (left,) = Timeline(t._store, True).pending()
    assert left.action == service
    found = Table.open(t.uri).check()
    if when == "scheduling":
        assert not found.healthy and "left pending by a writer that died" in str(found)
        if service == "clean":  # `dynbucket rollback` settles it
            assert rollback.rollback(t._store, t._spec) == [left.id]
    writer = Table.open(t.uri)
    writer._spec = dataclasses.replace(writer._spec, options=SERVICES_ON)  # services on
    for i in range(40):  # updates of known keys only
        ids = ["a", f"k{i % 6}"]
        writer.upsert(_rows(ids, 100 + i))
        model.update(dict.fromkeys(ids, 100 + i))
    writer.wait_for_services()
    timeline = Timeline(writer._store, True)
    assert [i for i in timeline.pending() if i.id <= left.id] == []
    assert len(timeline.instants()) <= SERVICES_ON.keep_max_commits + 3  # archival goes on
    assert _live(writer) == model
    report = writer.check()
    assert report.healthy, str(report)
    writer.close()


STOPPED_CLEAN = r"""
import sys, time
from dynbucket.table import Table
from dynbucket.format.services import clean
from dynbucket.format.timeline import transaction

def stall(*args, **kwargs):
    print("AT", flush=True)
    time.sleep(3600)

t = Table.open(sys.argv[1])
transaction.Transaction.commit = stall  # every file it removes is gone, nothing recorded
clean.clean(t._store, t._spec)
"""


def test_a_clean_killed_before_it_completed_names_the_groups_a_replace_commit_replaced(
    tmp_path: Path,
) -> None:
    """An adopted version 9 table whose Hudi writer replaced file groups (an insert
    overwrite): a clean below the replace commit removes the replaced groups' files, and
    its executor is killed before it completes. The next one, finding them gone, names
    them still: the metadata table lists none of them (it named only what it removed
    itself, and `check` found files listed that were not stored)."""
    root = unzipped("sample_table/mor/avro/v9_txns_simple_meta", tmp_path)
    services_off = {
        "hoodie.datasource.compaction.async.enable": False,
        "hoodie.log.compaction.enable": False,
        "hoodie.clean.automatic": False,
        "hoodie.archive.automatic": False,
        "index.compaction.automatic": False,
        "metadata.compaction.automatic": False,
        "cleaner.commits-retained": 1,
        "lock.lease-seconds": 1.0,
        "lock.commit-lease-seconds": 1.0,
    }
    t = Table.adopt(str(root), options=services_off)
    names = t._spec.schema.names
    rows = t.to_arrow(columns=names).select(names)
    for i in range(3):
        t.upsert(rows.slice(i % rows.num_rows, 1))
    replaced = _replaced_files(root)
    assert replaced and all(p.exists() for p in replaced)
    child = subprocess.Popen(
        [sys.executable, "-c", STOPPED_CLEAN, t.uri], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().split() == ["AT"]
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()
    assert not any(p.exists() for p in replaced)  # the killed executor removed them
    time.sleep(1.1)  # its lease runs out
    (left,) = left_pending(Timeline(t._store, True), "clean")
    assert clean.execute_clean(t._store, t._spec, left.id).instant == left.id
    found = check(TableStore.at(str(root)))
    assert found.healthy, [f.problem for f in found.findings]
    check_hudi_reads(t)
    t.close()


def _replaced_files(root: Path) -> list[Path]:
    """The data files of the groups the table's completed replace commits replaced."""
    out = []
    for done in (root / ".hoodie" / "timeline").glob("*_*.replacecommit"):
        doc = document_of(done.read_bytes())
        for partition, ids in (doc.get("partitionToReplaceFileIds") or {}).items():
            folder = root / partition
            out += [
                p for p in folder.iterdir() if any(p.name.lstrip(".").startswith(i) for i in ids)
            ]
    return out


def test_a_clean_drops_the_names_a_clean_resumed_by_an_earlier_version_left_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version 9 table as a clean of an earlier version left it: killed after removing
    its files, then completed by another executor that named only what it removed itself
    (none), so the listing names files that are not stored (`check`'s finding). The next
    clean names them again, since no retained view reads them: the listing drops them."""
    t, model = _written(tmp_path, 8, 9)
    assert t.compact().instant is not None
    for i in range(3):
        t.upsert(_rows(["a", f"c{i}"], 20 + i))
        model.update({"a": 20 + i, f"c{i}": 20 + i})
    real = Transaction.commit

    def naming_none(self: Transaction, metadata: dict[str, Any] | None = None) -> Any:
        return real(self, {**(metadata or {}), "removed": []})

    # The earlier version's resumed clean: the files gone, none of them named.
    monkeypatch.setattr(clean, "_gone", lambda *args: [], raising=False)
    monkeypatch.setattr(Transaction, "commit", naming_none)
    assert clean.clean(t._store, t._spec).instant is not None
    stale = [f.problem for f in check(t._store).findings]
    assert len(stale) == 2 and all(
        "listed in the metadata table but not stored" in p for p in stale
    )
    monkeypatch.undo()
    # Later writes move the horizon; the next clean drops the names.
    for i in range(3):
        t.upsert(_rows(["a", f"e{i}"], 40 + i))
        model.update({"a": 40 + i, f"e{i}": 40 + i})
    assert clean.clean(t._store, t._spec).instant is not None
    found = check(t._store)
    assert found.healthy, [f.problem for f in found.findings]
    assert _live(t) == model
    check_hudi_reads(t)
