"""Each instant's outcome is decided once, by an exclusive create: committed or rolled back.

A writer lease says who may write; it cannot stop a writer that passed its lease check and
then stalled (a GC pause, SIGSTOP, a suspended VM) from publishing its commit later, after
its lease lapsed and the next writer rolled its instant back: the commit would name files
that are gone. So the commit point is not the publish of the completed instant but the
exclusive create of the instant's outcome file, ``.hoodie/.dynbucket/outcomes/<id>``:

* the committer creates it holding the completed instant's document (:func:`decide_commit`);
* a writer that finds another's instant pending creates it saying "rolled back"
  (:func:`decide_rollback`) before it removes anything.

Exactly one of them creates it (locally a hard link, on S3 a conditional put: the same
primitive as the lease). The loser learns the outcome from the file: a stalled committer
finds its instant rolled back and fails with nothing shown; a writer that came to roll
back finds it committed and publishes it with the document the file holds (the same bytes
the committer publishes, so either order of the two publishes gives one file).

A commit outcome is removed once the completed instant is published (it is only needed
while the instant is decided but not yet visible); a rollback outcome stays, so that the
stalled writer stays fenced however long its pause (one small file per instant rolled back).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from dynbucket.base.errors import CommitStateUnknownError, ConcurrentWriteError
from dynbucket.format.metadata import partitions as metadata_partitions
from dynbucket.format.metadata import writer as metadata_writer
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import OUTCOME_DIR
from dynbucket.format.timeline.timeline import Instant, Timeline

COMMITTED = "committed"
ROLLED_BACK = "rolled-back"
#: Reads of an outcome that vanishes in between (its commit was published and it removed).
_TRIES = 5


@dataclass(frozen=True)
class Outcome:
    """What was decided for an instant, by which writer (``document``: a commit's)."""

    state: str
    writer: str
    document: dict[str, Any] | None = None


def path_of(store: TableStore, instant: str) -> str:
    return store.path(OUTCOME_DIR, instant)


def decide_commit(store: TableStore, instant: str, document: dict[str, Any], writer: str) -> None:
    """Makes ``instant`` committed (its completed document recorded), unless another writer
    already decided to roll it back.

    A create that gets no answer (a flaky network) may have been applied: what is there is
    read back, and the create made again only when nothing is.

    Raises:
        ConcurrentWriteError: the instant was rolled back (this writer's lease lapsed while
            it stalled); none of its changes are committed.
        CommitStateUnknownError: neither the create nor a read of its outcome got an
            answer; the instant stays pending, for the next writer to settle.
    """
    body = _encode(Outcome(COMMITTED, writer, document))
    path = path_of(store, instant)
    for attempt in range(_TRIES):
        try:
            if store.create_exclusive(path, body):
                return
        except OSError as e:  # no answer: the create may have been applied, or not
            try:
                found = read(store, instant)
            except OSError:
                found = None
                if attempt == _TRIES - 1:
                    raise _unknown(store, instant, e) from e
            if found is None:
                if attempt == _TRIES - 1:
                    raise _unknown(store, instant, e) from e
                continue  # not applied: nobody decided yet, ask again
        else:
            found = read(store, instant)
        break
    if found is not None and found.state == COMMITTED and found.writer == writer:
        return  # our own decision (an earlier attempt of this call, its answer lost)
    by = found.writer if found is not None else "another writer"
    raise ConcurrentWriteError(
        f"instant {instant} of {store.uri} was rolled back by writer {by} while this writer "
        "stalled past its lease (lock.lease-seconds); none of its changes are committed: "
        "write them again"
    )


def _unknown(store: TableStore, instant: str, error: BaseException) -> CommitStateUnknownError:
    return CommitStateUnknownError(
        f"commit of instant {instant} of {store.uri}: its commit request got no answer and "
        f"what it left cannot be read ({error}); it may or may not have committed. Read the "
        "table (Table.history(), or its rows) to learn which once the storage answers; the "
        "next writer settles the instant either way. Writing the same records again is safe"
    )


def decide_rollback(store: TableStore, instant: str, writer: str) -> Outcome | None:
    """Decides a pending instant of another writer: rolled back, unless its writer already
    committed it. Returns the outcome (None: it turned out published already: nothing to
    do). On ``ROLLED_BACK`` the caller removes its files; on ``COMMITTED`` it publishes the
    outcome's document."""
    path = path_of(store, instant)
    for _ in range(_TRIES):
        mine = Outcome(ROLLED_BACK, writer)
        if store.create_exclusive(path, _encode(mine)):
            return mine
        found = read(store, instant)
        if found is not None:
            return found
    # Created and removed each time we looked: its writer keeps publishing it.
    return None


def read(store: TableStore, instant: str) -> Outcome | None:
    """The instant's recorded outcome (None: none, or removed after its publish)."""
    try:
        doc = json.loads(store.read_bytes(path_of(store, instant)))
    except FileNotFoundError:
        return None
    return Outcome(doc["outcome"], doc["writer"], doc.get("document"))


def forget(store: TableStore, instant: str) -> None:
    """Removes a commit outcome once its instant is published."""
    store.delete(path_of(store, instant))


def _encode(outcome: Outcome) -> bytes:
    doc = {"outcome": outcome.state, "writer": outcome.writer, "document": outcome.document}
    return json.dumps(doc, sort_keys=True, default=str).encode()


#: Attempts of a committed instant's publish before the writer leaves it to the next one.
_PUBLISH_TRIES = 3


def publish(
    store: TableStore,
    timeline: Timeline,
    instant: Instant,
    body: dict[str, Any],
    index_entries: Mapping[str, pa.Table] | None = None,
) -> None:
    """Publishes a committed instant (a few attempts), then forgets its outcome. A table
    with Hudi's metadata table records the instant's files there first (``metadata/``;
    ``index_entries``: what its index files hold, by path, where the committing process
    still has it).

    A publisher paused before its publish (past its lease, or a detached executor) may
    wake after another published the instant and archival took it off the active
    timeline: a completed file published again there would sit below the archive's floor,
    where Hudi's readers take the active timeline to begin (every archived instant above
    it then reads as uncommitted). So an archived instant is not published, and one that
    archival took while it was being published is removed again."""
    if instant.id <= timeline.archived().floor:
        forget(store, instant.id)
        return
    for attempt in range(_PUBLISH_TRIES):
        try:
            if metadata_partitions.enabled(store):
                metadata_writer.record(
                    store,
                    instant.id,
                    body,
                    lambda: any(i.id != instant.id for i in timeline.pending()),
                    index_entries or {},
                )
            timeline.complete(instant, body)
            break
        except OSError:
            if attempt == _PUBLISH_TRIES - 1:
                raise
            time.sleep(0.1 * (attempt + 1))
    forget(store, instant.id)
    if instant.id <= timeline.archived().floor:
        timeline.forget_archived(instant)
