"""Writes of Arrow data in this process, without Spark or Ray.

The slot actor's own plain class (one slot, here, in process), the same record checks,
instant skeleton and file-group writer as the Spark path: for small writes, scripts and
tests. Its caches live as long as the writer and are emptied when another writer committed
in between (``caches.CacheMatch``, the Spark writer's rule too).
"""

from __future__ import annotations

import functools
import os

import pyarrow as pa

from dynbucket.actors.actor import AssignerActor
from dynbucket.base.columns import BUCKET, IS_NEW
from dynbucket.format.buckets.layouts import BucketLayouts
from dynbucket.format.file_group.context import Operation, TableRef, WriteContext
from dynbucket.format.file_group.writer import write_file_groups
from dynbucket.format.records.incoming import prepare, refuse_known
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.transaction import Transaction
from dynbucket.write.caches import CacheMatch
from dynbucket.write.index_source import RLIIndexSource
from dynbucket.write.instant import InstantWrite, NoAssigners
from dynbucket.write.locate_stage import with_buckets
from dynbucket.write.results import Laps, WriteResult


class LocalWriter:
    """In-process writer of one table."""

    def __init__(self, store: TableStore, spec: TableSpec) -> None:
        self.store = store
        self.spec = spec
        self.table = TableRef.of(store, spec)
        self._slot: AssignerActor | None = None
        self.caches = CacheMatch()

    def write(self, data: pa.Table, operation: str | Operation) -> WriteResult:
        """One instant: ``upsert`` / ``insert`` rows, or ``delete`` keys.

        Bad input raises before anything is written; a failure later rolls the instant back.
        """
        op = Operation.of(operation)
        laps = Laps()
        rows = prepare(self.spec, data, deletes=op.deletes)
        laps.lap("prepare")
        begin = functools.partial(Transaction.begin, self.store, self.spec, "commit", op.value)
        with InstantWrite(begin, op.value, laps=laps) as w:
            if self.spec.stateless:
                w.open(NoAssigners())
                layouts = BucketLayouts.load(
                    self.store, self.spec.bucket_options, self.spec.record_key, w.visible
                )
                rows = pa.Table.from_batches(
                    [with_buckets(layouts, b) for b in rows.combine_chunks().to_batches()],
                    schema=_tagged_schema(rows.schema),
                )
            else:
                slot = self._slot_for(w.last_write)
                w.open(slot.core)
                # The slot actor's own plain class tags the rows: the same code as in Ray.
                tagged = getattr(slot, op.assigner_call)(w.checkpoint, rows)
                if op.refuses_known:
                    refuse_known(tagged, self.spec.record_key)
                rows = pa.Table.from_batches([tagged])
            laps.lap("assign")
            ctx = WriteContext(self.table, w.id, w.visible, op)
            written = write_file_groups(ctx, rows, threads=os.cpu_count() or 1)
            written.seconds.update(check=laps.laps["prepare"], tag=laps.laps["assign"])
            laps.lap("write")
            result = w.commit(written)
        self.caches.committed(result.instant)
        return result

    def _slot_for(self, last_write: str | None) -> AssignerActor:
        """The in-process slot (one slot, in process), its caches emptied when another
        writer committed since this writer's last write (``CacheMatch``)."""
        if self._slot is None:
            source = functools.partial(RLIIndexSource, self.table)
            self._slot = AssignerActor(0, 1, self.spec.dynamic_options, source)
            self.caches.emptied(last_write)
        elif not self.caches.holds(last_write):
            self._slot.reset()
            self.caches.emptied(last_write)
        return self._slot


def _tagged_schema(schema: pa.Schema) -> pa.Schema:
    return schema.append(pa.field(BUCKET, pa.int32())).append(pa.field(IS_NEW, pa.bool_()))
