"""One write instant, the same for every engine: the skeleton both writers run.

    with InstantWrite(begin, "upsert") as w:      # 1-2
        w.open(assigners)                         # 3
        written = ...tag and write file groups... # 4 (the engine's part)
        result = w.commit(written)                # 5

1. Begin the transaction: the writer lease, rollback of instants a dead writer left, the
   latest completed instant (the commit's precondition), a new instant; the table's schema
   is still the one the records were fitted to, and a change the records make is recorded
   (``schemas.WriteSchema``).
2. A stream's micro-batch that is already on the timeline is not written again
   (``w.skipped``).
3. The assigners (one in-process core, or a fleet of slot actors) open the instant as their
   checkpoint.
4. The engine tags rows with buckets and writes file groups and index entries.
5. Commit (checking lease and timeline), then the assigners' snapshot (the proposal's
   checkpoint flow); a write that wrote nothing ends its instant instead, unless
   ``hoodie.allow.empty.commit`` keeps one (``committed`` says which). Leaving the block
   by an exception rolls the instant back and aborts the checkpoint in the assigners, so
   that no mapping of it stays cached (I8).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from types import TracebackType
from typing import Any

from dynbucket.actors.assigner import NO_CHECKPOINT
from dynbucket.actors.checkpoints import Assigners
from dynbucket.base.errors import ConcurrentWriteError
from dynbucket.format.file_group.writer import GroupWrites
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.schemas import WriteSchema
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.lanes import Lanes
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.format.timeline.transaction import Transaction, WrittenFile
from dynbucket.write.results import Laps, WriteResult


def logs_ready_for(schema: WriteSchema, compact: Callable[[], object] | None) -> None:
    """Before a write that changes a merge-on-read table's schema: ``compact`` (the table's
    compaction of every slice with logs), so that no slice holds a log of an older schema
    beside the write's. Hudi's readers take a log block lacking a field of the table's
    schema (or holding an older type of one) for a partial update: hudi-rs filled the gap
    from a losing record of the key, or could not read the table at all. Bases of an older
    schema read right (older rows read the new field as null, a promoted type cast)."""
    if compact is not None and schema.evolves and schema.spec.options.merge_on_read:
        compact()


def data_write(
    store: TableStore, spec: TableSpec, operation: str, lanes: Lanes | None
) -> Callable[[], Transaction]:
    """How a writer begins the instant of a data write (``InstantWrite``'s ``begin``):
    beside other writers (the lease held only to begin), in the writer's ``lanes``."""
    return functools.partial(
        Transaction.begin, store, spec, Action.COMMIT, operation, hold=False, lanes=lanes
    )


@dataclasses.dataclass(frozen=True)
class StreamBatch:
    """A micro-batch of a stream: committed at most once per (stream, batch id)."""

    stream: str
    batch_id: int


class InstantWrite:
    """One write instant (the numbered steps of the module doc); a context manager."""

    def __init__(
        self,
        begin: Callable[[], Transaction],
        operation: str,
        stream: StreamBatch | None = None,
        laps: Laps | None = None,
        schema: WriteSchema | None = None,
    ) -> None:
        self._begin = begin
        self.schema = schema
        self.operation = operation
        self.stream = stream
        self.laps = laps or Laps()
        self.skipped = False
        self.caches_match: str | None = None
        """After the commit: what the assigners' caches match (``CacheMatch.committed``)."""
        self.committed = False
        """Whether an instant was committed (a write of nothing commits none)."""
        self._assigners: Assigners | None = None
        self._done = False

    def __enter__(self) -> InstantWrite:
        # 1. The instant's facts, read once: what the engine's stages are given.
        self.txn = self._begin()
        self.id: str = self.txn.id
        self.checkpoint = int(self.id)
        self.based_on: str | None = self.txn.based_on
        self.visible: frozenset[str] = self.txn.visible
        """The completed instants this write reads (the files it builds on)."""
        self.last_write: str | None = self.txn.last_write
        """What the assigners' caches must match: the latest completed data write (with
        several writers, the set of them: ``Transaction.caches_match``)."""
        # 2.
        if self.stream is not None and committed(self.txn.timeline, self.stream):
            self.skipped = self._done = True
            self.txn.abort()
            return self
        if self.schema is not None:  # the schema its records were fitted to, and its change
            try:
                self.schema.begun(self.txn.store, self.id, self.visible)
            except BaseException:
                self.txn.abort()
                raise
        return self

    def skipped_result(self) -> WriteResult:
        batch = self.stream.batch_id if self.stream else None
        return WriteResult(
            instant="",
            operation=f"{self.operation} (batch {batch} already committed)",
            rows_written=0,
        )

    @property
    def latest(self) -> int:
        """The assigners' latest successful checkpoint: the latest data write this write
        builds on. Not the latest instant of any action: a compaction or clean completed
        since moved no key, and taken as the latest it differed from the checkpoint whose
        snapshot counted every slot's keys, so every slot of a fleet dropped every partition
        at every write once services ran between writes (``BucketAssigner.begin``)."""
        written = self.txn.data_write
        return int(written) if written else NO_CHECKPOINT

    def open(self, assigners: Assigners) -> None:
        """3. The assigners open this instant as their checkpoint."""
        self._assigners = assigners
        assigners.begin(self.checkpoint, self.latest, self.txn.lanes)

    def commit(
        self,
        written: GroupWrites,
        metadata: dict[str, Any] | None = None,
        kept: tuple[str, ...] = (),
    ) -> WriteResult:
        """5. Commits what the engine wrote; returns the write's result (``kept``: a partial
        upsert's fields it took from the table, which a commit beside other writers checks:
        ``conflicts`` step 7)."""
        assert self._assigners is not None, "open() the assigners first"
        if self._nothing_to_commit(written):
            return self._end_empty(written)
        for f in written.files:
            self.txn.add(f)
        data = [f for f in written.files if f.kind in ("base", "log")]
        # A bucket a write created is a file group it wrote first.
        created = sum(1 for f in data if f.kind == "base" and f.prev_commit is None)
        result = WriteResult(
            instant=self.id,
            operation=self.operation,
            rows_written=sum(f.rows for f in data),
            buckets_created=created,
            files_written=len(data),
            keys_inserted=written.keys_inserted,
            keys_updated=written.keys_updated,
            keys_stale=written.keys_stale,
            keys_deleted=written.keys_deleted,
            keys_not_found=written.keys_not_found,
            keys_moved=written.keys_moved,
        )
        stats = {k: v for k, v in result.as_dict().items() if k != "services"}
        extra: dict[str, Any] = {"stats": stats, **(metadata or {})}
        if kept:
            extra["partial-fields"] = list(kept)
        if self.stream is not None:
            extra["stream"] = {"id": self.stream.stream, "batch": self.stream.batch_id}
        if written.gone:  # noted before the commit point, as a delete write's keys are
            self._assigners.leave(self.checkpoint, written.gone_keys())
        self.txn.commit(extra)
        self._done = self.committed = True
        self.laps.lap("commit")
        self._assigners.snapshot(self.checkpoint, self.checkpoint, new_keys(data))
        self.laps.lap("snapshot")
        stages = {k: round(v, 4) for k, v in sorted(written.seconds.items())}
        self.caches_match = self.txn.caches_match()
        seconds = dict(self.laps.laps)
        if self.txn.lock is not None and self.txn.lock.waited:
            seconds["lease"] = round(self.txn.lock.waited, 4)
        return dataclasses.replace(
            result, seconds=seconds, stages=stages, written=tuple(written.files)
        )

    def _nothing_to_commit(self, written: GroupWrites) -> bool:
        evolves = self.schema is not None and self.schema.evolves
        return not (written.files or evolves or self.txn.spec.options.allow_empty_commit)

    def _end_empty(self, written: GroupWrites) -> WriteResult:
        """Ends an instant that wrote nothing: its timeline entries go, the assigners drop
        its checkpoint (their caches are as before it)."""
        assert self._assigners is not None
        self._done = True
        self.txn.cancel()
        self._assigners.abort(self.checkpoint)
        self.laps.lap("commit")
        missing, stale = written.keys_not_found, written.keys_stale
        found = f"{missing:,} key(s) not found, " if missing else ""
        found += f"{stale:,} stale (older than the table's), " if stale else ""
        return WriteResult(
            instant="",
            operation=f"{self.operation}: {found}nothing written, no instant committed",
            rows_written=0,
            keys_stale=stale,
            keys_not_found=written.keys_not_found,
            seconds=self.laps.laps,
        )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._done:
            return
        fenced = exc is not None and not isinstance(exc, ConcurrentWriteError) and self.txn.fenced()
        self.txn.abort()
        if self._assigners is not None:
            self._assigners.abort(self.checkpoint)
        if fenced:
            raise ConcurrentWriteError(
                f"instant {self.id} of {self.txn.store.uri} was rolled back by another writer "
                f"while this one stalled past its heartbeat; its write failed after ({exc}); "
                "none of it is committed"
            ) from exc


def new_keys(data: list[WrittenFile]) -> dict[str, dict[int, int]]:
    """Live keys each data file's bucket gained (its index entries: inserts less
    tombstones), per partition and bucket: what every slot adds to its committed counts."""
    out: dict[str, dict[int, int]] = {}
    for f in data:
        if (f.inserts or f.deletes) and f.bucket >= 0:
            buckets = out.setdefault(f.partition, {})
            buckets[f.bucket] = buckets.get(f.bucket, 0) + f.inserts - f.deletes
    return out


def committed(timeline: Timeline, stream: StreamBatch) -> bool:
    """Whether a commit of this stream at or after this batch id is on the timeline (or
    was archived off it)."""
    for instant in reversed(timeline.completed(Action.COMMIT)):
        recorded = timeline.metadata(instant).get("stream")
        if recorded and recorded.get("id") == stream.stream:
            return bool(recorded["batch"] >= stream.batch_id)
    archived = timeline.archived().streams.get(stream.stream)
    return archived is not None and archived >= stream.batch_id
