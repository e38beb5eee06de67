"""A writer stalled past its lease (SIGSTOP: a GC pause, a suspended VM) never commits over
a newer writer, locally and on S3, each time in a real paused process:

* paused after its lease check and the timeline's ("expected X, found X"), before its
  commit point: the newer writer takes the lease and rolls its instant back; resumed, it
  is refused (``ConcurrentWriteError``) and nothing of it shows;
* paused after its commit point, before its publish: the newer writer publishes it first
  and builds on it; resumed, it returns its result, and its rows are there.

Either way every read works afterwards and hudi-rs reads what dynbucket reads.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pytest

from dynbucket.format.table.options import TableOptions
from dynbucket.format.timeline import outcome
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads
from tests.s3 import S3Server

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
LEASE_SECONDS = 2.0

CHILD = r"""
import os, signal, sys
import pyarrow as pa
from dynbucket.format.timeline import outcome
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.table import Table

paused = []

def pause():  # once: a write run again after a conflict goes through
    if not paused:
        paused.append(1)
        print("PAUSED", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)

if sys.argv[2] == "before":
    decide = outcome.decide_commit
    def checked_then_paused(*args, **kwargs):
        pause()  # its lease and the timeline were checked; its commit point is next
        return decide(*args, **kwargs)
    outcome.decide_commit = checked_then_paused
else:
    complete = Timeline.complete
    def paused_then_published(self, instant, document):
        pause()  # committed (its outcome decided), its completed file not yet published
        return complete(self, instant, document)
    Timeline.complete = paused_then_published
t = Table.open(sys.argv[1])
try:
    r = t.upsert(pa.table({"id": ["a", "s1", "s2"], "day": ["d1"] * 3, "v": [100, 1, 2]}))
    print("OK", r.instant, r.keys_inserted, flush=True)
except Exception as e:
    print("REFUSED", type(e).__name__, e, flush=True)
"""


def _location(where: str, tmp_path: Path, s3_server: S3Server | None) -> str:
    return s3_server.uri() if s3_server is not None else str(tmp_path / "t")


OCC, ONE = "OPTIMISTIC_CONCURRENCY_CONTROL", "SINGLE_WRITER"


@pytest.mark.sample(3)
@pytest.mark.parametrize(
    ("where", "point", "mode"),
    [(w, p, ONE) for w in ("local", "s3") for p in ("before", "after")]
    + [("local", "before", OCC), ("local", "after", OCC)],
)
def test_a_writer_stalled_past_its_lease_never_commits_over_a_newer_one(
    tmp_path: Path, point: str, where: str, mode: str, request: pytest.FixtureRequest
) -> None:
    """``SINGLE_WRITER``: paused holding the table's lease. ``OPTIMISTIC_CONCURRENCY_CONTROL``:
    paused holding the commit lease (its checks done); refused when it wakes, its write is
    written again as a new instant."""
    s3 = request.getfixturevalue("s3_server") if where == "s3" else None
    t = Table.create(
        _location(where, tmp_path, s3),
        SCHEMA,
        "id",
        "day",
        options=TableOptions(
            write_concurrency_mode=mode,
            lock_lease_seconds=LEASE_SECONDS,
            commit_lease_seconds=LEASE_SECONDS,
        ),
    )
    t.upsert(pa.table({"id": ["a", "b"], "day": ["d1", "d1"], "v": [1, 2]}))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, t.uri, point],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line == "PAUSED", child.communicate(timeout=30)[1][-2000:]
        deadline = time.monotonic() + 10
        while psutil.Process(child.pid).status() != psutil.STATUS_STOPPED:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        (stalled,) = [i.id for i in t._timeline.pending()]
        time.sleep(LEASE_SECONDS + 0.3)  # its lease lapses: its heartbeat stopped with it
        newer = Table.open(t.uri).upsert(pa.table({"id": ["c"], "day": ["d1"], "v": [3]}))
        os.kill(child.pid, signal.SIGCONT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    live = {r["id"]: r["v"] for r in t.to_arrow(meta_columns=False).to_pylist()}
    if point == "before" and mode == OCC:
        assert out.startswith("OK") and out.split()[1] > newer.instant, (out, err[-2000:])
        assert live == {"a": 100, "b": 2, "c": 3, "s1": 1, "s2": 2}
        assert outcome.read(t._store, stalled).state == outcome.ROLLED_BACK
        assert stalled not in [i.id for i in t._timeline.completed()]
    elif point == "before":
        assert out.startswith("REFUSED ConcurrentWriteError"), (out, err[-2000:])
        assert f"instant {stalled} of {t.uri} was rolled back by writer" in out
        assert live == {"a": 1, "b": 2, "c": 3}
        assert outcome.read(t._store, stalled).state == outcome.ROLLED_BACK
        assert stalled not in [i.id for i in t._timeline.completed()]
    else:
        assert out.split()[:2] == ["OK", stalled], (out, err[-2000:])
        assert live == {"a": 100, "b": 2, "c": 3, "s1": 1, "s2": 2}
        assert newer.instant > stalled and stalled in [i.id for i in t._timeline.completed()]
        assert outcome.read(t._store, stalled) is None
    t.wait_for_services()  # services beside the writes finish first
    assert t._timeline.pending() == []
    report = t.check()
    assert report.healthy, [str(f) for f in report.findings]
    check_hudi_reads(t)
