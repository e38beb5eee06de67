"""Writes of Arrow data in this process, without Spark or Ray.

The table's bucket scheme on its in-process side (``schemes.local_scheme``: the slot actor's
own plain class, one slot by default, ``slots`` of them when a write asks; or the layouts),
the same record checks, instant skeleton and file-group writer as the Spark path: for small
writes, scripts, ``dynbucket ingest`` of small inputs and tests. The slots' caches live as
long as the writer and are emptied when another writer committed in between
(``caches.CacheMatch``, the Spark writer's rule too).
"""

from __future__ import annotations

import os

import pyarrow as pa

from dynbucket.base.errors import ConfigError
from dynbucket.format.file_group.writer import GroupWrites, write_file_groups
from dynbucket.format.records.incoming import kept_fields, prepare
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.context import Operation, TableRef, WriteContext
from dynbucket.format.table.schemas import WriteSchema
from dynbucket.format.table.spec import TableSpec
from dynbucket.write.instant import InstantWrite, logs_ready_for
from dynbucket.write.results import Laps, WriteResult
from dynbucket.write.schemes import local_scheme
from dynbucket.write.writer import Writer


class LocalWriter(Writer):
    """In-process writer of one table: the skeleton of ``writer.py``, the scheme's
    in-process side (``schemes.local_scheme``) and the file-group writer in this process."""

    def __init__(self, store: TableStore, spec: TableSpec) -> None:
        super().__init__(store, spec)
        self.table = TableRef.of(store, spec)
        self.scheme = local_scheme(self.table, self.caches)

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

        def body(w: InstantWrite) -> tuple[GroupWrites, None]:
            w.open(self.scheme.assigners(slots, w.last_write, w.latest))
            tagged = self.scheme.tag(w, rows, op)
            laps.lap("assign")
            ctx = WriteContext(TableRef.of(self.store, spec), w.id, w.visible, op, kept=kept)
            written = write_file_groups(ctx, tagged, threads=os.cpu_count() or 1)
            written.seconds.update(check=laps.laps["prepare"], tag=laps.laps["assign"])
            laps.lap("write")
            return written, None

        return self._retrying(op, lambda: self._instant(op, schema, laps, kept, body))

    def _reset(self, error: BaseException) -> None:
        self.scheme.reset()  # what a slot bootstrapped may be of the old view
        self.caches.emptied(None)
