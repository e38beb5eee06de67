"""One instant of a writer: lease, instant, files, and an atomic commit that checks what it read.

1. Take the table's writer lease (I9).
2. Roll back instants a crashed writer left pending (their files are removed, I5).
3. Note the latest completed instant: the commit's precondition.
4. Request and start a new instant; write files named with it.
5. Commit: the lease is still ours and the timeline still ends at the noted instant
   ("expected X, found Y"); then one atomic publish of the metadata. Any failure rolls the
   instant back, so nothing of it is ever read.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from dynbucket.actors.errors import CommitFailedError, ConcurrentWriteError
from dynbucket.pipeline.format.layout import RLI_DIR
from dynbucket.pipeline.format.lock import WriterLock
from dynbucket.pipeline.format.storage import TableStore
from dynbucket.pipeline.format.timeline import META_DIR, Instant, Timeline

log = logging.getLogger(__name__)


@dataclass
class WrittenFile:
    """A file an instant wrote, for its commit metadata."""

    partition: str
    path: str
    kind: str  # base | delta | index-base | index-delta
    rows: int
    size: int
    file_id: str = ""
    bucket: int = -1

    def as_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "path": self.path, "kind": self.kind,
                "rows": self.rows, "bytes": self.size, "file_id": self.file_id,
                "bucket": self.bucket}  # fmt: skip


@dataclass
class Transaction:
    """An open instant; commit or abort it (``with`` aborts when the block raises)."""

    store: TableStore
    timeline: Timeline
    lock: WriterLock
    instant: Instant
    based_on: str | None
    operation: str
    files: list[WrittenFile] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    done: bool = False

    @classmethod
    def begin(
        cls,
        store: TableStore,
        action: str,
        operation: str,
        lease_seconds: float,
        lock: WriterLock | None = None,
    ) -> Transaction:
        lock = lock or WriterLock(store, lease_seconds)
        lock.acquire()
        try:
            timeline = Timeline(store)
            for pending in timeline.pending():
                rollback_instant(store, timeline, pending)
            completed = timeline.completed()
            based_on = completed[-1].id if completed else None
            instant = timeline.request(action)
            instant = timeline.start(instant, {"operation": operation, "based-on": based_on})
            return cls(store, timeline, lock, instant, based_on, operation)
        except BaseException:
            lock.release()
            raise

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if not self.done:
            self.abort()

    @property
    def id(self) -> str:
        return self.instant.id

    def add(self, written: WrittenFile) -> None:
        self.files.append(written)

    def commit(self, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Publishes the instant atomically; returns its metadata."""
        if self.done:
            raise CommitFailedError(f"instant {self.instant.id} is already finished")
        try:
            self.lock.verify()
            completed = self.timeline.completed()
            found = completed[-1].id if completed else None
            if found != self.based_on:
                raise ConcurrentWriteError(
                    f"commit of {self.instant.id} expected the latest completed instant to be "
                    f"{self.based_on}, found {found}: another writer committed in between"
                )
            body = {
                "operation": self.operation,
                "based-on": self.based_on,
                "files": [f.as_dict() for f in self.files],
                "seconds": round(time.perf_counter() - self.started, 3),
                **(metadata or {}),
            }
            self.timeline.complete(self.instant, body)
        except BaseException as e:
            self.abort()
            if isinstance(e, CommitFailedError | ConcurrentWriteError):
                raise
            raise CommitFailedError(f"commit of instant {self.instant.id} failed: {e}") from e
        self.done = True
        self.lock.release()
        return body

    def abort(self) -> None:
        """Rolls back everything this instant wrote and releases the lease."""
        if self.done:
            return
        self.done = True
        try:
            rollback_instant(self.store, self.timeline, self.instant)
        finally:
            self.lock.release()


def rollback_instant(store: TableStore, timeline: Timeline, instant: Instant) -> list[str]:
    """Removes every data and index file of a pending instant, then its timeline entries."""
    if instant.completed:
        raise CommitFailedError(f"instant {instant.id} is completed; it cannot be rolled back")
    removed = []
    token = re.compile(rf"(^|_){instant.id}[._]")
    meta = store.path(META_DIR)
    index_dir = store.path(RLI_DIR)
    for info in store.walk(store.root):
        inside_meta = info.path.startswith(meta + "/")
        if inside_meta and not info.path.startswith(index_dir + "/"):
            continue
        if token.search(info.base_name.lstrip(".")):
            store.delete(info.path)
            removed.append(info.path)
    timeline.discard(instant)
    log.info("rolled back instant %s: %d file(s) removed", instant.id, len(removed))
    return removed
