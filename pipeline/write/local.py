"""Writes of Arrow data in this process, without Spark or Ray.

The table's bucket scheme on its in-process side (``schemes.scheme_for``: the slot actor's
own plain class, one slot by default, ``slots`` of them when a write asks; or the layouts),
the same record checks, instant skeleton and file-group writer as the Spark path: for small
writes, scripts, ``dynbucket ingest`` of small inputs and tests. The slots' caches live as
long as the writer and are emptied when another writer committed in between
(``caches.CacheMatch``, the Spark writer's rule too).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import pyarrow as pa

from dynbucket.base.errors import ConfigError
from dynbucket.format.file_group.writer import write_file_groups
from dynbucket.format.records.incoming import kept_fields, prepare
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.context import Operation, TableRef, WriteContext
from dynbucket.format.table.schemas import WriteSchema
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.lanes import Lanes
from dynbucket.write.caches import CacheMatch
from dynbucket.write.instant import InstantWrite, data_write, logs_ready_for
from dynbucket.write.results import Laps, WriteResult
from dynbucket.write.retry import RetryPolicy, after_conflict, files_gone
from dynbucket.write.schemes import InProcessSlots, scheme_for

log = logging.getLogger(__name__)
#: A write runs again when a file it read went missing (a service beside it cleaned it).
FILE_RETRIES = RetryPolicy({FileNotFoundError: 1})


class LocalWriter:
    """In-process writer of one table."""

    def __init__(self, store: TableStore, spec: TableSpec) -> None:
        self.store = store
        self.spec = spec
        self.table = TableRef.of(store, spec)
        self.caches = CacheMatch()
        self.lanes = Lanes(spec.options.heartbeat_expiry_seconds)
        """This writer's lane beside other writers (``format/timeline/lanes.py``)."""
        self.scheme = scheme_for(self.table, self.caches, None)
        self.compact: Callable[[], object] | None = None
        """Compacts every slice with logs (the table's), before a write changes its schema
        (``logs_ready_for``)."""

    def write(
        self, data: pa.Table, operation: str | Operation, slots: int = 1, partial: bool = False
    ) -> WriteResult:
        """One instant: ``upsert`` / ``insert`` rows, or ``delete`` keys, through ``slots``
        assigner slots (``partial``: an upsert whose records lack fields, whose values a
        known key keeps).

        Bad input raises before anything is written; a failure later rolls the instant back.
        A file the write read that a service beside it removed (a clean of another process,
        say) makes the write run again, once more at most, on a fresh view of the table.

        Raises:
            CommitFailedError: a file the write read went missing on every attempt.
        """
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ConfigError(f"assigner_slots={slots!r}: must be an integer >= 1 (or None)")
        op = Operation.of(operation)
        laps = Laps()
        schema = WriteSchema.of(self.store, self.spec, None if op.deletes else data.schema)
        spec = schema.spec
        kept = kept_fields(spec, data.column_names, partial)
        rows = prepare(spec, data, deletes=op.deletes, insert=op.refuses_known, kept=kept)
        logs_ready_for(schema, self.compact)
        laps.lap("prepare")

        retries = FILE_RETRIES.with_conflicts(spec.options)

        def again(error: BaseException) -> None:
            if after_conflict(error, retries.retried):
                # The attempt's checkpoint was aborted: the caches are as committed, and
                # the next attempt's follow the table (CacheMatch), as the Spark writer's.
                return
            log.warning("a file this write read is gone (%s); writing again", error)
            if isinstance(self.scheme, InProcessSlots):
                self.scheme.reset()  # what a slot bootstrapped may be of the old view
            self.caches.emptied(None)

        try:
            done = retries.run(lambda: self._write(rows, op, slots, laps, kept, schema), again)
            return retries.told(done)
        except FileNotFoundError as e:
            raise files_gone(op.value, e) from e

    def _write(
        self,
        rows: pa.Table,
        op: Operation,
        slots: int,
        laps: Laps,
        kept: tuple[str, ...],
        schema: WriteSchema,
    ) -> WriteResult:
        spec = schema.spec
        begin = data_write(self.store, spec, op.value, self.lanes)
        with InstantWrite(begin, op.value, laps=laps, schema=schema) as w:
            w.open(self.scheme.assigners(slots, w.last_write, w.latest))
            rows = self.scheme.tag(w, rows, op)
            laps.lap("assign")
            ctx = WriteContext(TableRef.of(self.store, spec), w.id, w.visible, op, kept=kept)
            written = write_file_groups(ctx, rows, threads=os.cpu_count() or 1)
            written.seconds.update(check=laps.laps["prepare"], tag=laps.laps["assign"])
            laps.lap("write")
            result = w.commit(written, kept=kept)
        if w.committed:  # else the caches are as they were
            self.caches.committed(w.caches_match)
        return result
