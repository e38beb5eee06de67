"""Compaction spread over service processes: a large plan's groups run as parallel tasks
(here real spawned processes), and the result is the one the driver's threads give; a
driver script that spawns service processes is not run again in them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket.base import beside
from dynbucket.bench.crash import alive, children_of
from dynbucket.format.services import compaction, runner
from dynbucket.format.table.options import TableOptions
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
MANUAL = TableOptions(
    compaction_async=False,
    clean_automatic=False,
    archive_automatic=False,
    index_compaction_automatic=False,
)


def test_a_large_compaction_runs_as_shares_in_the_service_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "SPREAD_BYTES", 0)  # every plan counts as large
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=MANUAL)
    days = ["d0", "d1", "d2", "d3", "d4"]
    for v in range(3):
        ids = [f"k{i}" for i in range(40)]
        t.upsert(pa.table({"id": ids, "day": [days[i % 5] for i in range(40)], "v": [v] * 40}))
    before = t.to_arrow(meta_columns=False).sort_by("id")
    beside.shutdown_service_processes()
    try:
        result = t.compact()
        assert beside._PROCESSES is not None  # the shares ran there
    finally:
        beside.shutdown_service_processes()
    assert result.instant is not None and result.files_written == 5  # a base file per group
    assert all(not r.slice.logs for r in t.snapshot().slices())
    assert t.to_arrow(meta_columns=False).sort_by("id").equals(before)
    check_hudi_reads(t)
    assert t.check().healthy


DRIVER = """
import sys
import pyarrow as pa
from dynbucket.table import Table

with open(sys.argv[2], "a") as marker:  # top-level code: a script without a main guard
    marker.write("ran\\n")
schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
t = Table.create(sys.argv[1], schema, "id", "day")
ids = [f"k{i}" for i in range(20_000)]
t.upsert(pa.table({"id": ids, "day": ["d1"] * len(ids), "v": [0] * len(ids)}, schema=schema))
for w in range(1, 7):  # small logs: due for a log compaction, in a service process
    t.upsert(pa.table({"id": [f"k{w}"], "day": ["d1"], "v": [w]}, schema=schema))
t.close()
"""


def test_a_driver_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    """Service processes are spawned: they must not run the user's script again."""
    script, marker = tmp_path / "driver.py", tmp_path / "marker"
    script.write_text(DRIVER)
    table = tmp_path / "t"
    done = subprocess.run(
        [sys.executable, str(script), str(table), str(marker)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert marker.read_text() == "ran\n"
    t = Table.open(str(table))
    assert t._timeline.completed("logcompaction")  # it ran, in a service process
    assert t.to_arrow(meta_columns=False).num_rows == 20_000


IN_A_POOL = r"""
import multiprocessing, sys
import pyarrow as pa
from dynbucket.table import Table

def write(path: str) -> None:
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
    t = Table.create(path, schema, "id", "day")
    ids = [f"k{i}" for i in range(20_000)]
    t.upsert(pa.table({"id": ids, "day": ["d1"] * len(ids), "v": [0] * len(ids)}, schema=schema))
    for w in range(1, 7):  # small logs: due for a log compaction
        t.upsert(pa.table({"id": [f"k{w}"], "day": ["d1"], "v": [w]}, schema=schema))
    t.close()

if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(1) as pool:  # daemonic workers
        pool.apply(write, (sys.argv[1],))
"""


def test_a_writer_in_a_pool_worker_runs_its_services(tmp_path: Path) -> None:
    """A ``multiprocessing.Pool`` worker is daemonic: it may not start the service
    processes. Its services run in threads of its own (they failed to start, every write
    again: the table was never compacted)."""
    script, table = tmp_path / "pool.py", tmp_path / "t"
    script.write_text(IN_A_POOL)
    done = subprocess.run([sys.executable, str(script), str(table)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    t = Table.open(str(table))
    assert t._timeline.completed("logcompaction")
    assert t.to_arrow(meta_columns=False).num_rows == 20_000
    assert t.check().healthy


STARTER = r"""
import os, sys, time
from dynbucket.base import beside
print(beside.submit_service(os.getpid).result(), flush=True)
time.sleep(3600)
"""


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_service_processes_end_with_the_process_that_started_them(how: signal.Signals) -> None:
    """A writer killed by SIGKILL (an OOM kill) left its service processes, and the
    resource tracker, alive for good: a stream restarted after each kill gathered them."""
    starter = subprocess.Popen([sys.executable, "-c", STARTER], stdout=subprocess.PIPE, text=True)
    assert starter.stdout is not None
    service = int(starter.stdout.readline())
    left = children_of(starter.pid)  # the service processes and multiprocessing's tracker
    assert service in left and all(alive(p) for p in left)
    os.kill(starter.pid, how)
    starter.wait()
    starter.stdout.close()
    deadline = time.monotonic() + 10
    while any(alive(p) for p in left) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in left if alive(p)] == []


IN_A_CHILD = r"""
import multiprocessing, os, sys
from dynbucket.base import beside

def writer() -> None:
    print(beside.submit_service(os.getpid).result(), flush=True)

if __name__ == "__main__":
    child = multiprocessing.get_context(sys.argv[1]).Process(target=writer)
    child.start()
    child.join(30)
    print("ended" if child.exitcode == 0 else f"alive={child.is_alive()}", flush=True)
    if child.is_alive():
        child.kill()
"""


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_a_writer_in_a_multiprocessing_child_ends_once_it_returns(
    tmp_path: Path, start: str
) -> None:
    """A writer run as a ``multiprocessing`` child that had started service processes
    never ended: the child's end joins its children before the pool is told to stop."""
    script = tmp_path / "parent.py"
    script.write_text(IN_A_CHILD)
    done = subprocess.run(
        [sys.executable, str(script), start], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "ended", done.stdout


#: Compaction due every 2 writes, beside them; no other service.
COMPACT_SOON = TableOptions(
    compaction_delta_commits=2,
    log_compaction_enable=False,
    clean_automatic=False,
    archive_automatic=False,
    index_compaction_automatic=False,
)


def _slow_compactions(monkeypatch: pytest.MonkeyPatch, first_only: bool) -> list[str]:
    """Compactions executed (their instants, in turn), each (or the first) a second
    longer, so that another call comes while it runs."""
    executed: list[str] = []
    real = compaction.execute_groups

    def slow(store, spec, instant, groups, threads=1, done=None, writing=()):  # type: ignore[no-untyped-def]
        executed.append(instant)
        if len(executed) == 1 or not first_only:
            time.sleep(1.0)
        return real(store, spec, instant, groups, threads, done, writing)

    monkeypatch.setattr(compaction, "execute_groups", slow)
    return executed


def _two_writers_a_compaction_running(tmp_path: Path) -> tuple[Table, Table, list[str], str]:
    """Two handles of one new table (two writers); the first's three writes of 20 keys
    made a compaction due, which runs beside its writes now: (a, b, the keys, its instant)."""
    a = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=COMPACT_SOON)
    b = Table.open(str(tmp_path / "t"))
    ids = [f"k{i}" for i in range(20)]
    for v in range(3):
        started = a.upsert(pa.table({"id": ids, "day": ["d0"] * 20, "v": [v] * 20}))
    running = [s.split()[1] for s in started.services if "beside the writes" in s]
    assert running
    return a, b, ids, running[0]


def test_compact_waits_for_the_compaction_running_beside_the_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Table.compact`` while the runner's thread executes a compaction of the same
    table: the pending plan is executed once (the user's call waits for it, then plans
    what is left), not a second time beside the first."""
    executed = _slow_compactions(monkeypatch, first_only=True)  # compact() comes meanwhile
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=COMPACT_SOON)
    ids = [f"k{i}" for i in range(20)]
    for v in range(3):
        result = t.upsert(pa.table({"id": ids, "day": ["d0"] * 20, "v": [v] * 20}))
    assert [s for s in result.services if "beside the writes" in s]  # running now
    assert t.compact().instant is None  # it compacted everything; nothing left to plan
    assert len(executed) == len(set(executed)) == 1
    assert t._timeline.completed("compaction")[-1].id == executed[0]
    t.close()


def test_a_writer_leaves_a_service_another_live_writer_executes_and_runs_a_dead_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers of one table (two handles, each its own runner): the compaction one
    runs beside its writes beats its heartbeat, so the other, finding it pending when a
    compaction is due, does not execute it a second time; a compaction whose executor
    died (scheduled, never executed: nobody beats it) is executed by the next writer."""
    executed = _slow_compactions(monkeypatch, first_only=False)  # b writes meanwhile
    a, b, ids, running = _two_writers_a_compaction_running(tmp_path)
    for v in range(3, 5):  # compaction is due for b too, the plan of a's still pending
        b.upsert(pa.table({"id": ids, "day": ["d0"] * 20, "v": [v] * 20}))
    a.wait_for_services()
    b.wait_for_services()
    assert executed.count(running) == 1, executed
    assert running in [i.id for i in a._timeline.completed("compaction")]

    # A compaction scheduled by a writer that died before executing it: nobody beats it.
    left = compaction.schedule(a.store, a.spec, 1)
    assert left is not None and left not in executed
    b.upsert(pa.table({"id": ids, "day": ["d0"] * 20, "v": [9] * 20}))
    b.wait_for_services()
    assert executed.count(left) == 1
    assert left in [i.id for i in b._timeline.completed("compaction")]
    assert b.to_arrow(meta_columns=False).column("v").to_pylist() == [9] * 20
    check_hudi_reads(b)
    a.close()
    b.close()


def test_a_service_runs_when_its_executors_heartbeat_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that refuses the executor's heartbeat (a flaky network) does not keep the
    service from running: the compaction planned beside the writes completes."""
    from dynbucket.format.timeline import heartbeat
    from dynbucket.format.timeline.timeline import Timeline

    real = heartbeat.Heartbeat._beat_once

    def refused(self: heartbeat.Heartbeat) -> None:  # a compaction's; a write's beats
        pending = Timeline(self.store, True).pending()
        if any(i.id == self.instant and i.action == "compaction" for i in pending):
            raise OSError("the network cut the heartbeat's write")
        real(self)

    monkeypatch.setattr(heartbeat.Heartbeat, "_beat_once", refused)
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=COMPACT_SOON)
    ids = [f"k{i}" for i in range(20)]
    for v in range(3):
        result = t.upsert(pa.table({"id": ids, "day": ["d0"] * 20, "v": [v] * 20}))
    running = [s.split()[1] for s in result.services if "beside the writes" in s]
    assert running
    t.wait_for_services()
    assert running[0] in [i.id for i in t._timeline.completed("compaction")]
    t.close()


def test_a_compaction_whose_finish_lost_the_lease_is_finished_by_its_executor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction's finish refused (another writer held the lease: ``SINGLE_WRITER``)
    keeps what its execution wrote and its heartbeat: the other writer's writes meanwhile
    do not execute it again, and its executor finishes it at ``wait_for_services`` (racing
    processes relied on executing it twice before; one kept refusing is left to the next
    writer at the last try, and that writer executes it)."""
    from dynbucket.base.errors import ConcurrentWriteError

    executed = _slow_compactions(monkeypatch, first_only=False)
    refusals = [2]  # the finishes refused, in turn
    real = compaction.finish

    def refused(store, spec, instant, written):  # type: ignore[no-untyped-def]
        if refusals[0] > 0:
            refusals[0] -= 1
            raise ConcurrentWriteError("the table's lease is held by another writer")
        return real(store, spec, instant, written)

    monkeypatch.setattr(compaction, "finish", refused)
    a, b, ids, running = _two_writers_a_compaction_running(tmp_path)
    while not a._runner.done("compaction"):  # type: ignore[union-attr]
        time.sleep(0.05)
    a.upsert(pa.table({"id": ids, "day": ["d0"] * 20, "v": [3] * 20}))  # collected: refused
    assert refusals == [1] and "compaction" in a._runner._unfinished  # type: ignore[union-attr]
    for v in range(4, 6):  # due for b too: it leaves the executed one to a
        b.upsert(pa.table({"id": ids, "day": ["d0"] * 20, "v": [v] * 20}))
    b.wait_for_services()
    a.wait_for_services()  # refused once more, then finished
    assert refusals == [0]
    assert executed.count(running) == 1, executed
    assert running in [i.id for i in a._timeline.completed("compaction")]
    assert a._timeline.pending() == []
    assert a.to_arrow(meta_columns=False).column("v").to_pylist() == [5] * 20
    a.close()
    b.close()
