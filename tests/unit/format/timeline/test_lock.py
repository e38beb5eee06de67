"""One writer per table (I9): a live lease refuses a second writer; a dead one's expires;
writers racing for an expired lease never both win."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from dynbucket.base.errors import ConcurrentWriteError
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import META_DIR
from dynbucket.format.timeline.lock import LEASE_PREFIX, TICKET_PREFIX, Lease, WriterLock


def test_second_writer_is_refused_naming_the_holder(tmp_path: Path) -> None:
    store = TableStore.at(str(tmp_path))
    with WriterLock(store, lease_seconds=30) as first:
        with pytest.raises(
            ConcurrentWriteError, match=f"writer {first.owner} .*one writer per table"
        ):
            WriterLock(store, lease_seconds=30).acquire()
        first.verify()
    second = WriterLock(store, lease_seconds=30)
    second.acquire()  # released: free again
    second.release()


def test_heartbeat_keeps_a_live_lease(tmp_path: Path) -> None:
    store = TableStore.at(str(tmp_path))
    # A lease long enough that a loaded machine's slow flush does not stall a renewal.
    with WriterLock(store, lease_seconds=1.0) as holder:
        time.sleep(2.5)  # two and a half lease periods: renewed by the heartbeat
        holder.verify()
        with pytest.raises(ConcurrentWriteError):
            WriterLock(store, lease_seconds=1.0).acquire()


def test_a_dead_writers_lease_expires_and_it_cannot_commit(tmp_path: Path) -> None:
    store = TableStore.at(str(tmp_path))
    dead = WriterLock(store, lease_seconds=0.2)
    dead.acquire()
    dead._stop.set()  # its heartbeat stops, as if the process died
    time.sleep(0.4)
    successor = WriterLock(store, lease_seconds=30)
    successor.acquire()  # breaks the expired lease
    with pytest.raises(ConcurrentWriteError, match="lost the lease"):
        dead.verify()
    dead.release()  # must not remove the successor's lease
    successor.verify()
    successor.release()


def test_an_instant_owed_a_settle_is_named_by_every_lease_until_a_taker_settles_it(
    tmp_path: Path,
) -> None:
    """A holder committing instant c expires; a taker that settles nothing (an archival)
    takes the lease, stalls past it, and the next one releases: each lease after names c,
    until a taker says it settled c. A lease file of a version before ``settling`` reads."""
    store = TableStore.at(str(tmp_path))
    committing = WriterLock(store, lease_seconds=0.2)
    committing.acquire(instant="c")
    committing._stop.set()  # paused past its checks
    time.sleep(0.3)
    archival = WriterLock(store, lease_seconds=0.2)
    archival.acquire()
    assert archival.superseded == ("c",)
    archival._stop.set()  # stalls too, holding it
    time.sleep(0.3)
    with WriterLock(store, lease_seconds=30) as bare:  # takes over, releases
        assert bare.superseded == ("c",)
    settler = WriterLock(store, lease_seconds=30)
    settler.acquire(instant="d")
    assert settler.superseded == ("c",)
    settler.settled(("c",))
    assert _newest_lease(tmp_path)["settling"] == []
    settler.release()
    with WriterLock(store, lease_seconds=30) as after:
        assert after.superseded == ()
    old = {k: v for k, v in _newest_lease(tmp_path).items() if k != "settling"}
    (tmp_path / META_DIR / _lease_files(tmp_path)[-1]).write_text(json.dumps(old))
    with WriterLock(store, lease_seconds=30) as reads_old:
        assert reads_old.generation is not None and reads_old.superseded == ()


def _newest_lease(tmp_path: Path) -> dict[str, Any]:
    return dict(json.loads((tmp_path / META_DIR / _lease_files(tmp_path)[-1]).read_text()))


def test_a_released_lease_is_taken_at_once_by_the_next_generation(tmp_path: Path) -> None:
    store = TableStore.at(str(tmp_path))
    with WriterLock(store, lease_seconds=30) as first:
        assert first.generation == 1
    with WriterLock(store, lease_seconds=30) as second:
        assert second.generation == 2
    assert _lease_files(tmp_path) == [f"{LEASE_PREFIX}{2:020d}"]  # older generations go


def test_an_empty_lease_file_is_a_dead_writers_and_expires(tmp_path: Path) -> None:
    """A writer killed while creating its lease (on a store without atomic creation), or a
    damaged lease file: refused with when it expires, then taken like any expired lease."""
    store = TableStore.at(str(tmp_path))
    empty = _meta(tmp_path) / f"{LEASE_PREFIX}{7:020d}"
    empty.parent.mkdir(parents=True)
    empty.write_bytes(b"")
    with pytest.raises(ConcurrentWriteError, match=r"unreadable.*expires at .* \(in 30s"):
        WriterLock(store, lease_seconds=30).acquire()
    old = time.time() - 31
    os.utime(empty, (old, old))
    with WriterLock(store, lease_seconds=30) as taker:
        assert taker.generation == 8
    assert _lease_files(tmp_path) == [f"{LEASE_PREFIX}{8:020d}"]


def _racer(root: str, barrier: Any, results: Any, trials: int) -> None:
    store = TableStore.at(root)
    for trial in range(trials):
        barrier.wait()  # the dead writer's expired lease is in place
        lock = WriterLock(store, lease_seconds=30)
        try:
            lock.acquire()
            outcome = "held"
        except ConcurrentWriteError:
            outcome = "refused"
        except Exception as e:  # anything else is what the test looks for
            outcome = f"raw {type(e).__name__}: {e}"
        barrier.wait()  # every racer has tried
        if outcome == "held":
            try:
                lock.verify()
            except ConcurrentWriteError:
                outcome = "held, then lost"
        results.put((trial, outcome))
        barrier.wait()  # every holder has verified
        lock.release()
        barrier.wait()  # released: the test looks at the files


def test_three_writers_breaking_one_expired_lease_exactly_one_wins(tmp_path: Path) -> None:
    """3 processes at once, 120 times: one holder each time, no raw error, and no file but
    the lease left behind."""
    trials, racers = 120, 3
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(racers + 1), ctx.Queue()
    procs = [
        ctx.Process(target=_racer, args=(str(tmp_path), barrier, results, trials))
        for _ in range(racers)
    ]
    for p in procs:
        p.start()
    store = TableStore.at(str(tmp_path))
    outcomes: dict[int, list[str]] = {}
    leftovers = []
    try:
        for trial in range(trials):
            _dead_writer(store, tmp_path)
            barrier.wait()
            barrier.wait()
            barrier.wait()
            outcomes[trial] = sorted(results.get(timeout=60)[1] for _ in range(racers))
            barrier.wait()
            files = sorted(p.name for p in _meta(tmp_path).iterdir() if p.is_file())
            if len(files) != 1 or not files[0].startswith(LEASE_PREFIX):
                leftovers.append((trial, files))
    finally:
        for p in procs:
            p.join(timeout=60)
    raw = [o for found in outcomes.values() for o in found if o.startswith("raw")]
    assert raw == []
    assert leftovers == []
    assert {t: o for t, o in outcomes.items() if o != ["held", "refused", "refused"]} == {}


def _dead_writer(store: TableStore, root: Path) -> None:
    """A writer that took the next generation and died: its lease has expired."""
    newest = max((int(n[len(LEASE_PREFIX) :]) for n in _lease_files(root)), default=0)
    lease = Lease("dead", "host", 1, time.time() - 1)
    store.write_atomic(
        f"{store.path(META_DIR)}/{LEASE_PREFIX}{newest + 1:020d}",
        json.dumps(asdict(lease)).encode(),
    )


def _meta(root: Path) -> Path:
    return root / META_DIR


def _lease_files(root: Path) -> list[str]:
    return sorted(p.name for p in _meta(root).glob(f"{LEASE_PREFIX}*"))


def test_the_writer_waiting_longest_takes_the_lease_next(tmp_path: Path) -> None:
    """Three writers queue behind a holder in turn: they take the lease in the order they
    began to wait (by chance alone, one time in six)."""
    store = TableStore.at(str(tmp_path))
    holder = WriterLock(store, lease_seconds=30)
    holder.acquire()
    order: list[str] = []

    def wait_and_take(name: str) -> None:
        lock = WriterLock(store, lease_seconds=30, wait_seconds=60)
        lock.acquire()
        order.append(name)
        time.sleep(0.3)
        lock.release()

    threads = []
    for name in ("a", "b", "c"):
        threads.append(threading.Thread(target=wait_and_take, args=(name,)))
        threads[-1].start()
        deadline = time.monotonic() + 10
        while len(_tickets(tmp_path)) < len(threads) and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(_tickets(tmp_path)) == 3
    holder.release()
    for t in threads:
        t.join(60)
    assert order == ["a", "b", "c"]
    assert _tickets(tmp_path) == []  # each writer took its ticket away


def test_a_free_lease_waits_for_a_live_ticket_and_not_for_a_dead_one(tmp_path: Path) -> None:
    """A writer that finds a free lease and another writer's fresh ticket takes its turn
    (refused at once when it may not wait); a ticket left by a waiter that died holds the
    lease back for at most a lease (and a second of file-time grain), then goes."""
    store = TableStore.at(str(tmp_path))
    with WriterLock(store, lease_seconds=1.0):
        pass  # a holder that released
    ticket = _meta(tmp_path) / f"{TICKET_PREFIX}{time.time_ns():020d}.0123456789ab"
    ticket.write_bytes(b"")
    with pytest.raises(ConcurrentWriteError, match="waited longer"):
        WriterLock(store, lease_seconds=1.0).acquire()
    lock = WriterLock(store, lease_seconds=1.0, wait_seconds=10)
    lock.acquire()  # the ticket's waiter never renews it: it lapses
    assert lock.waited >= 1.0
    lock.release()
    ticket.write_bytes(b"")
    old = time.time() - 60
    os.utime(ticket, (old, old))
    lock.acquire()  # a long-dead ticket: taken at once and removed
    assert not ticket.exists()
    lock.release()


def _tickets(root: Path) -> list[str]:
    return sorted(p.name for p in _meta(root).glob(f"{TICKET_PREFIX}*"))
