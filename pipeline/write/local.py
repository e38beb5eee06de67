"""Writes of Arrow data in this process, without Spark or Ray.

The slot actor's own plain class (one slot by default; ``slots`` of them when a write asks,
each row going to slot ``pmod(key hash, slots)`` as Spark routes it, so that a write gives
the buckets a Spark write with as many slots gives), the same record checks, instant
skeleton and file-group writer as the Spark path: for small writes, scripts, ``dynbucket
ingest`` of small inputs and tests. Its caches live as long as the writer and are emptied
when another writer committed in between (``caches.CacheMatch``, the Spark writer's rule
too); a new slot count starts new slots (each bootstraps from the index).
"""

from __future__ import annotations

import functools
import logging
import os

import pyarrow as pa

from dynbucket.actors.actor import AssignerActor
from dynbucket.actors.assigner import BucketAssigner, NewKeys
from dynbucket.base.columns import BUCKET, HASH, IS_NEW
from dynbucket.base.errors import ConfigError
from dynbucket.format.buckets.layouts import BucketLayouts
from dynbucket.format.file_group.writer import write_file_groups
from dynbucket.format.records.incoming import prepare, refuse_known
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.context import Operation, TableRef, WriteContext
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.transaction import Transaction
from dynbucket.write.caches import CacheMatch
from dynbucket.write.index_source import RLIIndexSource
from dynbucket.write.instant import InstantWrite, NoAssigners
from dynbucket.write.locate_stage import with_buckets
from dynbucket.write.results import Laps, WriteResult
from dynbucket.write.retry import RetryPolicy, files_gone

log = logging.getLogger(__name__)
#: A write runs again when a file it read went missing (a service beside it cleaned it).
FILE_RETRIES = RetryPolicy({FileNotFoundError: 1})


class LocalWriter:
    """In-process writer of one table."""

    def __init__(self, store: TableStore, spec: TableSpec) -> None:
        self.store = store
        self.spec = spec
        self.table = TableRef.of(store, spec)
        self._slots: list[AssignerActor] = []
        self.caches = CacheMatch()

    def write(self, data: pa.Table, operation: str | Operation, slots: int = 1) -> WriteResult:
        """One instant: ``upsert`` / ``insert`` rows, or ``delete`` keys, through ``slots``
        assigner slots.

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
        rows = prepare(self.spec, data, deletes=op.deletes)
        laps.lap("prepare")

        def again(error: BaseException) -> None:
            log.warning("a file this write read is gone (%s); writing again", error)
            for slot in self._slots:  # what a slot bootstrapped may be of the old view
                slot.reset()
            self.caches.emptied(None)

        try:
            return FILE_RETRIES.run(lambda: self._write(rows, op, slots, laps), again)
        except FileNotFoundError as e:
            raise files_gone(op.value, e) from e

    def _write(self, rows: pa.Table, op: Operation, slots: int, laps: Laps) -> WriteResult:
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
                fleet = self._slots_for(w.last_write, slots)
                w.open(_Cores([slot.core for slot in fleet]))
                # The slot actor's own plain class tags the rows: the same code as in Ray.
                tagged = [
                    getattr(fleet[i], op.assigner_call)(w.checkpoint, part)
                    for i, part in _by_slot(rows, len(fleet))
                ]
                rows = pa.Table.from_batches(tagged)
                if op.refuses_known:
                    refuse_known(rows, self.spec.record_key)
            laps.lap("assign")
            ctx = WriteContext(self.table, w.id, w.visible, op)
            written = write_file_groups(ctx, rows, threads=os.cpu_count() or 1)
            written.seconds.update(check=laps.laps["prepare"], tag=laps.laps["assign"])
            laps.lap("write")
            result = w.commit(written)
        self.caches.committed(result.instant)
        return result

    def _slots_for(self, last_write: str | None, slots: int) -> list[AssignerActor]:
        """The in-process slots (new ones for a new count), their caches emptied when
        another writer committed since this writer's last write (``CacheMatch``)."""
        if len(self._slots) != slots:
            source = functools.partial(RLIIndexSource, self.table)
            opts = self.spec.dynamic_options
            self._slots = [AssignerActor(i, slots, opts, source) for i in range(slots)]
            self.caches.emptied(last_write)
        elif not self.caches.holds(last_write):
            for slot in self._slots:
                slot.reset()
            self.caches.emptied(last_write)
        return self._slots


class _Cores:
    """The checkpoint flow of several in-process slots, as one (``instant.Assigners``)."""

    def __init__(self, cores: list[BucketAssigner]) -> None:
        self.cores = cores

    def begin(self, checkpoint: int, latest_successful: int) -> None:
        for core in self.cores:
            core.begin(checkpoint, latest_successful)

    def snapshot(
        self, checkpoint: int, latest_successful: int, new_keys: NewKeys | None = None
    ) -> list[str]:
        return [
            p for core in self.cores for p in core.snapshot(checkpoint, latest_successful, new_keys)
        ]

    def abort(self, checkpoint: int) -> int:
        return sum(core.abort(checkpoint) for core in self.cores)


def _by_slot(rows: pa.Table, slots: int) -> list[tuple[int, pa.Table]]:
    """The rows of each slot that has any: slot ``pmod(key hash, slots)``, Spark's routing
    (``routing.py``), each slot's rows in their order."""
    if slots == 1:
        return [(0, rows)]
    slot_of = rows.column(HASH).to_numpy() % slots  # numpy's % of a positive divisor: pmod
    parts = [(i, rows.filter(pa.array(slot_of == i))) for i in range(slots)]
    return [(i, part) for i, part in parts if part.num_rows] or [(0, rows)]


def _tagged_schema(schema: pa.Schema) -> pa.Schema:
    return schema.append(pa.field(BUCKET, pa.int32())).append(pa.field(IS_NEW, pa.bool_()))
