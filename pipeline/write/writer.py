"""The one write skeleton, for every engine: retries by cause, the instant (begin, a
stream's batch committed once, commit) and what the assigners' caches match after it.

A writer brings what differs: how rows come in and are checked (``local.py``: Arrow in
this process; ``spark.py``: Spark DataFrames, written by the driver or by Spark tasks) and
the body of an instant (tag the rows, write the file groups). :class:`Writer` does the rest
once:

1. ``_retrying``: the write runs again per cause (:class:`RetryPolicy`: a budget per
   cause) after a conflict with another writer's commit (the caches then follow the
   table: :class:`CacheMatch`); after a file it read went missing (a service beside it
   cleaned it) and for the causes the writer's ``retries`` add, with nothing of the old
   view kept (``_reset``).
2. ``_instant``: begins the instant (beside other writers the lease is held only to begin,
   in the writer's lane), skips a stream's batch that is committed already, runs the
   body, commits what it wrote, and tells the caches what they match.

**Retries by cause.** A Spark write runs again when an assigner actor restarted in the
middle of it (with a new fleet, twice at most). Causes that are unrelated must not share
one attempt counter (one would use up the other's attempts, or end the loop with no attempt
left for the last), so each cause counts only its own retries, whatever the order they
come in.

**When caches may be trusted** (:class:`CacheMatch`, one rule for every writer).

An assigner's caches (one in-process core, or a fleet of slot actors) hold the buckets of
the keys as of the last data write the writer committed. With several writers, whose
instants complete out of id order, "the last data write" is the whole set of completed
data writes (``Transaction.caches_match``), and caches that missed another writer's
keys placed beside a commit match nothing. A write may use them as they are
only when the latest completed data write (``commit`` action) is that one; when another
writer (or another handle of the table) wrote in between, the caches catch up
(``BucketAssigner.catch_up``: each cached partition reads only the index deltas it has not
seen, the keys they insert and delete and every slot's counts; the processes stay), and a
partition whose missed deltas an index compaction restated loads again at its next touch.
Table services, whoever runs them (compaction, also beside the
writes; cleaning; index compaction; archival, which takes the oldest data writes off the
set; rollback of what was never committed), move no key, so they never break a match.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from dynbucket.base.errors import CommitFailedError, ConcurrentWriteError
from dynbucket.format.file_group.writer import GroupWrites
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.context import Operation
from dynbucket.format.table.options import TableOptions
from dynbucket.format.table.schemas import WriteSchema
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.caches_token import caches_hold
from dynbucket.format.timeline.lanes import Lanes
from dynbucket.write.instant import InstantWrite, StreamBatch, data_write
from dynbucket.write.results import Laps, WriteResult

log = logging.getLogger(__name__)

T = TypeVar("T")


class RetryPolicy:
    """Runs an attempt until it succeeds, retrying each cause up to its budget.

    Args:
        budgets: exception class -> retries it may cause (an error of no listed class, or
            of a class whose budget is spent, propagates).
    """

    def __init__(self, budgets: Mapping[type[BaseException], int]) -> None:
        if any(n < 0 for n in budgets.values()):
            raise ValueError(f"retry budgets must be >= 0, got {dict(budgets)}")
        self.budgets = dict(budgets)
        self.retried = 0
        """Retries of the cause being retried, this one included (read in ``before_retry``)."""
        self.conflicts = 0
        """Attempts that conflicted with another writer's commit (written again)."""
        self.lost = 0.0
        """Seconds the conflicting attempts took, the wait before each next one included."""

    def run(self, attempt: Callable[[], T], before_retry: Callable[[BaseException], None]) -> T:
        """``attempt()`` until it returns; ``before_retry(error)`` runs before each retry."""
        left = dict(self.budgets)
        while True:
            began = time.perf_counter()
            try:
                return attempt()
            except tuple(left) as e:
                cause = next(c for c in left if isinstance(e, c))
                if left[cause] == 0:
                    raise
                left[cause] -= 1
                self.retried = self.budgets[cause] - left[cause]
                before_retry(e)
                if isinstance(e, ConcurrentWriteError):
                    self.conflicts += 1
                    self.lost += time.perf_counter() - began

    def told(self, result: WriteResult) -> WriteResult:
        """``result`` saying how often the write ran again after a conflict, and the
        seconds the attempts that ran again took (``WriteResult.seconds['again']``)."""
        if not self.conflicts:
            return result
        seconds = {**result.seconds, "again": round(self.lost, 4)}
        return dataclasses.replace(result, written_again=self.conflicts, seconds=seconds)

    def with_conflicts(self, options: TableOptions) -> RetryPolicy:
        """A fresh policy of this one's budgets (its counters are one write's), and with
        several writers a budget for commits that conflicted with another writer's
        (``concurrency.conflict-retries``)."""
        if not options.optimistic:
            return RetryPolicy(self.budgets)
        return RetryPolicy({**self.budgets, ConcurrentWriteError: options.conflict_retries})


def after_conflict(error: BaseException, retried: int = 1) -> bool:
    """Before a write runs again: whether ``error`` was a conflict with another writer;
    then it waits a random moment, longer after each of its conflicts (up to 2 s), so that
    writers that keep meeting spread out and a slow one gets its turn."""
    if not isinstance(error, ConcurrentWriteError):
        return False
    log.info("writing again after a conflict with another writer: %s", error)
    time.sleep(random.uniform(0.0, min(2.0, 0.05 * 2**retried)))
    return True


def files_gone(operation: str, error: FileNotFoundError) -> CommitFailedError:
    """The error of a write whose read file went missing on every attempt (a service
    beside it cleaned it each time)."""
    return CommitFailedError(
        f"{operation}: a file it read went missing on every attempt ({error}); nothing "
        "was written. Write again; if it fails the same way, run `dynbucket check`"
    )


#: What caches that miss another writer's keys match: no instant.
_NOTHING = "caches missing another writer's keys"


class CacheMatch:
    """The data write a writer's caches match (None: the empty table)."""

    def __init__(self) -> None:
        self.instant: str | None = None

    def holds(self, last_write: str | None) -> bool:
        """Whether a write whose latest completed data write is ``last_write`` may use the
        caches as they are."""
        return caches_hold(self.instant, last_write)

    def emptied(self, last_write: str | None) -> None:
        """The caches were emptied (empty caches match any committed state) or caught up
        with the table as of ``last_write``."""
        self.instant = last_write

    def committed(self, match: str | None) -> None:
        """This writer committed an instant (its caches took its mappings); ``match``: what
        they match now (``Transaction.caches_match``: the instant; with several writers the
        set of data writes, None when they miss keys another writer placed beside it)."""
        self.instant = _NOTHING if match is None else match


#: What an instant's body returns: the files it wrote, and what its commit records besides.
Body = Callable[[InstantWrite], tuple[GroupWrites, dict[str, Any] | None]]


class Writer:
    """A table's writer: the skeleton every engine shares (module doc).

    Args:
        store, spec: the table.
    """

    retries = RetryPolicy({FileNotFoundError: 1})
    """Retries per cause besides conflicts (a file the write read went missing: once)."""

    def __init__(self, store: TableStore, spec: TableSpec) -> None:
        self.store = store
        self.spec = spec
        self.caches = CacheMatch()
        self.lanes = Lanes(spec.options.heartbeat_expiry_seconds)
        """This writer's lane beside other writers (``format/timeline/lanes.py``)."""
        self.compact: Callable[[], object] | None = None
        """Compacts every slice with logs (the table's), before a write changes its schema
        (``instant.logs_ready_for``)."""

    def _reset(self, error: BaseException) -> None:
        """Drops what this writer keeps of the table's view before a write runs again for
        ``error`` (not a conflict: the caches follow the table then)."""

    def _retrying(self, op: Operation, attempt: Callable[[], WriteResult]) -> WriteResult:
        """1. ``attempt()`` until it commits, run again per cause; the result says how
        often it ran again after a conflict."""
        retries = self.retries.with_conflicts(self.spec.options)

        def again(error: BaseException) -> None:
            if after_conflict(error, retries.retried):
                return  # the attempt's checkpoint was aborted: the caches are as committed
            if isinstance(error, FileNotFoundError):
                log.warning("a file this write read is gone (%s); writing again", error)
            self._reset(error)

        try:
            return retries.told(retries.run(attempt, again))
        except FileNotFoundError as e:
            raise files_gone(op.value, e) from e

    def _instant(
        self,
        op: Operation,
        schema: WriteSchema,
        laps: Laps,
        kept: tuple[str, ...],
        body: Body,
        stream: StreamBatch | None = None,
    ) -> WriteResult:
        """2. One instant of ``op`` whose files ``body`` writes (``kept``: a partial
        upsert's fields it took from the table, which a commit beside others checks)."""
        begin = data_write(self.store, schema.spec, op.value, self.lanes)
        with InstantWrite(begin, op.value, stream, laps, schema) as w:
            if w.skipped:
                return w.skipped_result()
            written, metadata = body(w)
            result = w.commit(written, metadata, kept)
        if w.committed:  # else the caches are as they were
            self.caches.committed(w.caches_match)
        return result
