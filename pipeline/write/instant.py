"""One write instant, the same for every engine: the skeleton both writers run.

1. Begin the transaction: the writer lease, rollback of instants a dead writer left, the
   latest completed instant (the commit's precondition), a new instant.
2. A stream's micro-batch that is already on the timeline is not written again.
3. The assigners (one in-process core, or a fleet of slot actors) open the instant as their
   checkpoint.
4. The engine tags rows with buckets and writes file groups and index entries
   (``write_files``).
5. Commit (checking lease and timeline), then the assigners' snapshot (the proposal's
   checkpoint flow). Any failure rolls the instant back and aborts the checkpoint in the
   assigners, so that no mapping of it stays cached (I8).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from dynbucket.actors.assigner import NO_CHECKPOINT
from dynbucket.pipeline.format.file_groups import GroupWrites
from dynbucket.pipeline.format.timeline import Timeline
from dynbucket.pipeline.format.transaction import Transaction
from dynbucket.pipeline.write.results import Laps, WriteResult

OPERATIONS = ("upsert", "insert", "delete")


class Assigners(Protocol):
    """The checkpoint flow of the assigner(s) of a write."""

    def begin(self, checkpoint: int, latest_successful: int) -> None: ...

    def snapshot(self, checkpoint: int, latest_successful: int) -> Any: ...

    def abort(self, checkpoint: int) -> int: ...

    def buckets_created(self) -> int: ...


@dataclasses.dataclass(frozen=True)
class StreamBatch:
    """A micro-batch of a stream: committed at most once per (stream, batch id)."""

    stream: str
    batch_id: int


@dataclasses.dataclass
class Job:
    """What an engine brings to an instant."""

    operation: str
    assigners_for: Callable[[str | None], Assigners]
    """The assigners to use, given the instant the write is based on (cached ones go stale
    when another writer committed since)."""
    write_files: Callable[[Transaction, Assigners, Laps], GroupWrites]
    """Tags and writes the rows; returns what it wrote."""
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Extra commit metadata (e.g. the slot count)."""


def write_instant(
    txn_begin: Callable[[], Transaction], job: Job, stream: StreamBatch | None = None,
    laps: Laps | None = None,
) -> WriteResult:  # fmt: skip
    """Runs one instant of ``job`` (the numbered steps of the module doc)."""
    laps = laps or Laps()
    # 1.
    txn = txn_begin()
    # 2.
    if stream is not None and committed(txn.timeline, stream):
        txn.abort()
        return WriteResult(instant="", operation=f"{job.operation} (batch {stream.batch_id} "
                           "already committed)", rows_written=0)  # fmt: skip
    checkpoint = txn.instant.checkpoint
    assigners: Assigners | None = None
    try:
        # 3.
        assigners = job.assigners_for(txn.based_on)
        assigners.begin(checkpoint, int(txn.based_on) if txn.based_on else NO_CHECKPOINT)
        before = assigners.buckets_created()
        # 4.
        written = job.write_files(txn, assigners, laps)
        for f in written.files:
            txn.add(f)
        data = [f for f in written.files if f.kind in ("base", "delta")]
        result = WriteResult(
            instant=txn.id, operation=job.operation, rows_written=sum(f.rows for f in data),
            buckets_created=assigners.buckets_created() - before, files_written=len(data),
            **written.counts(),
        )  # fmt: skip
        # 5.
        extra: dict[str, Any] = {"stats": result.as_dict(), **job.metadata}
        if stream is not None:
            extra["stream"] = {"id": stream.stream, "batch": stream.batch_id}
        txn.commit(extra)
        laps.lap("commit")
    except BaseException:
        txn.abort()
        if assigners is not None:
            assigners.abort(checkpoint)
        raise
    assigners.snapshot(checkpoint, checkpoint)
    return dataclasses.replace(result, seconds=laps.laps)


def committed(timeline: Timeline, stream: StreamBatch) -> bool:
    """Whether a commit of this stream at or after this batch id is on the timeline."""
    for instant in reversed(timeline.completed("commit")):
        recorded = timeline.metadata(instant).get("stream")
        if recorded and recorded.get("id") == stream.stream:
            return bool(recorded["batch"] >= stream.batch_id)
    return False
