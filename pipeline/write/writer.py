"""The one write skeleton, for every engine: retries by cause, the instant (begin, a
stream's batch committed once, commit) and what the assigners' caches match after it.

A writer brings what differs: how rows come in and are checked (``local.py``: Arrow in
this process; ``spark.py``: Spark DataFrames, written by the driver or by Spark tasks) and
the body of an instant (tag the rows, write the file groups). :class:`Writer` does the rest
once:

1. ``_retrying``: the write runs again per cause (``retry.py``): after a conflict with
   another writer's commit (the caches then follow the table: ``caches.CacheMatch``);
   after a file it read went missing (a service beside it cleaned it) and for the causes
   the writer's ``retries`` add, with nothing of the old view kept (``_reset``).
2. ``_instant``: begins the instant (beside other writers the lease is held only to begin,
   in the writer's lane), skips a stream's batch that is committed already, runs the
   body, commits what it wrote, and tells the caches what they match.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from dynbucket.format.file_group.writer import GroupWrites
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.context import Operation
from dynbucket.format.table.schemas import WriteSchema
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.lanes import Lanes
from dynbucket.write.caches import CacheMatch
from dynbucket.write.instant import InstantWrite, StreamBatch, data_write
from dynbucket.write.results import Laps, WriteResult
from dynbucket.write.retry import RetryPolicy, after_conflict, files_gone

log = logging.getLogger(__name__)

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
