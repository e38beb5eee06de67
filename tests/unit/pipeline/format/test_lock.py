"""One writer per table (I9): a live lease refuses a second writer; a dead one's expires."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dynbucket.actors.errors import ConcurrentWriteError
from dynbucket.pipeline.format.lock import WriterLock
from dynbucket.pipeline.format.storage import TableStore


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
    with WriterLock(store, lease_seconds=0.3) as holder:
        time.sleep(1.0)  # three lease periods: renewed by the heartbeat
        holder.verify()
        with pytest.raises(ConcurrentWriteError):
            WriterLock(store, lease_seconds=0.3).acquire()


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
