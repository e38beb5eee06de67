"""Writes of Arrow data in this process, without Spark or Ray.

The same assigner core the actors run (one slot, here), the same record checks and the same
file writers as the Spark stages: for small writes, scripts and tests. Its cache lives as long
as the writer and is dropped when another writer committed in between.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.actors.assigner import NO_CHECKPOINT, BucketAssigner
from dynbucket.pipeline.errors import InvalidInputError
from dynbucket.pipeline.index_source import RLIIndexSource
from dynbucket.pipeline.layout import file_id_for
from dynbucket.pipeline.reader import Snapshot
from dynbucket.pipeline.records import insert_conflict, prepare, write_group
from dynbucket.pipeline.results import Laps, WriteResult
from dynbucket.pipeline.rli import RecordLevelIndex, entries_for
from dynbucket.pipeline.spec import BUCKET, HASH, IS_NEW, OP, PARTITION, TableSpec
from dynbucket.pipeline.storage import TableStore
from dynbucket.pipeline.transaction import Transaction, WrittenFile

OPERATIONS = ("upsert", "insert", "delete")


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
        clock = Laps()
        rows = prepare(self.spec, data, deletes=operation == "delete")
        clock.lap("prepare")
        txn = Transaction.begin(
            self.store, "commit", operation, self.spec.options.lock_lease_seconds
        )
        assigner = self._assigner_for(txn.based_on)
        checkpoint = txn.instant.checkpoint
        try:
            assigner.begin(checkpoint, int(txn.based_on) if txn.based_on else NO_CHECKPOINT)
            before = assigner.stats().buckets_created
            rows = self._tag(assigner, checkpoint, rows, operation)
            clock.lap("assign")
            counts = self._write_files(txn, rows)
            clock.lap("write")
            result = WriteResult(
                instant=txn.id, operation=operation, rows_written=rows.num_rows,
                buckets_created=assigner.stats().buckets_created - before,
                files_written=len(txn.files), **counts,
            )  # fmt: skip
            txn.commit({"stats": result.as_dict()})
            clock.lap("commit")
        except BaseException:
            txn.abort()
            assigner.abort(checkpoint)
            raise
        assigner.snapshot(checkpoint, checkpoint)
        self._seen = txn.id
        return dataclasses.replace(result, seconds=clock.laps)

    # --- steps ---------------------------------------------------------------------------

    def _assigner_for(self, based_on: str | None) -> BucketAssigner:
        """The cached assigner, unless another writer committed since our last write."""
        if self._assigner is None or based_on != self._seen:
            source = RLIIndexSource(self.store.uri, self.spec, self.store.fs)
            self._assigner = BucketAssigner(0, 1, self.spec.index, source)
        return self._assigner

    def _tag(
        self, assigner: BucketAssigner, checkpoint: int, rows: pa.Table, operation: str
    ) -> pa.Table:
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
                known = rows.filter(pa.array(~is_new)).select(list(self.spec.record_key))
                raise insert_conflict(int((~is_new).sum()), known.slice(0, 3).to_pylist())
        return rows.append_column(BUCKET, pa.array(buckets, pa.int32())).append_column(
            IS_NEW, pa.array(is_new)
        )

    def _write_files(self, txn: Transaction, rows: pa.Table) -> dict[str, int]:
        missing = pc.less(rows.column(BUCKET), 0)
        not_found = int(pc.sum(missing).as_py() or 0)
        rows = rows.filter(pc.invert(missing))
        snapshot = Snapshot(self.store, self.spec, txn.based_on) if txn.based_on else None
        index = RecordLevelIndex(self.store, self.spec)
        entries: dict[str, list[pa.Table]] = defaultdict(list)
        for partition, bucket, group in file_groups(rows):
            existing = snapshot.bucket_files(partition).get(bucket) if snapshot else None
            file_id = (
                existing.file_id
                if existing
                else file_id_for(self.spec.table_id, txn.id, partition, bucket)
            )
            txn.add(
                write_group(
                    self.store,
                    self.spec,
                    txn.id,
                    partition,
                    file_id,
                    group,
                    new_group=existing is None,
                )
            )
            new = group.filter(group.column(IS_NEW))
            if new.num_rows:
                entries[partition].append(entries_for(new, self.spec, bucket, file_id, txn.id))
        for partition, parts in entries.items():
            written = index.write(partition, txn.id, pa.concat_tables(parts))
            txn.add(
                WrittenFile(
                    partition,
                    written.path,
                    "index-delta",
                    sum(p.num_rows for p in parts),
                    written.size,
                )
            )
        is_new = rows.column(IS_NEW)
        deletes = pc.equal(rows.column(OP), 1)
        return {
            "keys_inserted": int(pc.sum(is_new).as_py() or 0),
            "keys_updated": int(
                pc.sum(pc.and_(pc.invert(is_new), pc.invert(deletes))).as_py() or 0
            ),
            "keys_deleted": int(pc.sum(deletes).as_py() or 0),
            "keys_not_found": not_found,
        }


def file_groups(rows: pa.Table) -> list[tuple[str, int, pa.Table]]:
    """(partition, bucket, rows) of each file group the rows go to."""
    if rows.num_rows == 0:
        return []
    rows = rows.take(pc.sort_indices(rows, [(PARTITION, "ascending"), (BUCKET, "ascending")]))
    parts = pc.dictionary_encode(rows.column(PARTITION)).combine_chunks().indices.to_numpy()
    buckets = rows.column(BUCKET).to_numpy()
    starts = np.flatnonzero(np.r_[True, (parts[1:] != parts[:-1]) | (buckets[1:] != buckets[:-1])])
    ends = np.r_[starts[1:], rows.num_rows]
    names = rows.column(PARTITION)
    return [
        (names[int(a)].as_py(), int(buckets[a]), rows.slice(int(a), int(b - a)))
        for a, b in zip(starts, ends, strict=True)
    ]
