"""Writes of Arrow data in this process, without Spark or Ray.

The same assigner core the actors run (one slot, here), the same record checks, instant
skeleton and file-group writer as the Spark path: for small writes, scripts and tests. Its
cache lives as long as the writer and is dropped when another writer committed in between.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.actors.assigner import BucketAssigner
from dynbucket.base.columns import BUCKET, HASH, IS_NEW, PARTITION
from dynbucket.base.errors import InvalidInputError
from dynbucket.format.buckets.layouts import BucketLayouts
from dynbucket.format.file_group.writer import write_file_groups
from dynbucket.format.records.incoming import insert_conflict, prepare
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.transaction import Transaction
from dynbucket.write.index_source import RLIIndexSource
from dynbucket.write.instant import OPERATIONS, InstantWrite, NoAssigners
from dynbucket.write.locate_stage import with_buckets
from dynbucket.write.results import Laps, WriteResult


class LocalWriter:
    """In-process writer of one table."""

    def __init__(self, store: TableStore, spec: TableSpec) -> None:
        self.store = store
        self.spec = spec
        self._assigner: BucketAssigner | None = None
        self._seen: str | None = None  # latest instant the cache is known to match

    def write(self, data: pa.Table, operation: str) -> WriteResult:
        """One instant: ``upsert`` / ``insert`` rows, or ``delete`` keys.

        Bad input raises before anything is written; a failure later rolls the instant back.
        """
        if operation not in OPERATIONS:
            raise InvalidInputError(f"operation={operation!r}: must be one of {OPERATIONS}")
        laps = Laps()
        rows = prepare(self.spec, data, deletes=operation == "delete")
        laps.lap("prepare")
        begin = functools.partial(Transaction.begin, self.store, self.spec, "commit", operation)
        with InstantWrite(begin, operation, laps=laps) as w:
            if self.spec.stateless:
                w.open(NoAssigners())
                layouts = BucketLayouts.load(
                    self.store, self.spec.bucket_options, self.spec.record_key, w.visible()
                )
                rows = pa.Table.from_batches(
                    [with_buckets(layouts, b) for b in rows.combine_chunks().to_batches()],
                    schema=_tagged_schema(rows.schema),
                )
            else:
                assigner = self._assigner_for(w.based_on)
                w.open(assigner)
                rows = _tag(assigner, w.checkpoint, rows, operation, self.spec.record_key)
            laps.lap("assign")
            written = write_file_groups(
                self.store,
                self.spec,
                w.id,
                rows,
                w.visible(),
                deletes=operation == "delete",
                threads=os.cpu_count() or 1,
                refuse_known=self.spec.stateless and operation == "insert",
            )
            written.seconds.update(check=laps.laps["prepare"], tag=laps.laps["assign"])
            laps.lap("write")
            result = w.commit(written)
        self._seen = result.instant
        return result

    def _assigner_for(self, based_on: str | None) -> BucketAssigner:
        """The cached assigner, unless another writer committed since our last write."""
        if self._assigner is None or based_on != self._seen:
            source = RLIIndexSource(self.store.uri, self.spec, self.store.fs)
            self._assigner = BucketAssigner(0, 1, self.spec.bucket_options, source)
        return self._assigner


def _tagged_schema(schema: pa.Schema) -> pa.Schema:
    return schema.append(pa.field(BUCKET, pa.int32())).append(pa.field(IS_NEW, pa.bool_()))


def _tag(
    assigner: BucketAssigner,
    checkpoint: int,
    rows: pa.Table,
    operation: str,
    key_fields: tuple[str, ...],
) -> pa.Table:
    """The rows with ``_bucket`` and ``_is_new`` from the assigner."""
    encoded = pc.dictionary_encode(rows.column(PARTITION)).combine_chunks()
    names = encoded.dictionary.to_pylist()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    hashes = rows.column(HASH).to_numpy()
    if operation == "delete":
        buckets = assigner.locate(names, codes, hashes)
        is_new = np.zeros(len(buckets), np.bool_)
    else:
        buckets, is_new = assigner.assign(checkpoint, names, codes, hashes)
        if operation == "insert" and not is_new.all():
            known = rows.filter(pa.array(~is_new)).select(list(key_fields))
            raise insert_conflict(int((~is_new).sum()), known.slice(0, 3).to_pylist())
    return rows.append_column(BUCKET, pa.array(buckets, pa.int32())).append_column(
        IS_NEW, pa.array(is_new)
    )
