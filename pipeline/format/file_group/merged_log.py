"""A log compaction's file: a slice's logs merged into one log, without its base file.

A compaction rewrites a slice's base file, so its cost is the group's size; a stream whose
every micro-batch touches every group would need every group rewritten every few writes,
and that work grows with the table. A log compaction (Hudi's ``logcompaction`` action)
reads only the slice's logs and writes their net effect as one log of its own instant:

1. Read each log's records, upserts and deletes, with their meta fields (rows keep the
   commit time that wrote them).
2. Fold them, oldest first, into one record per key (``merge.fold_logs``): the upsert that
   wins, or a delete.
3. Write one log file on the slice, after the logs it merges (a larger version): a delete
   block of the deleted keys and of the keys deleted and written again, then a Parquet
   data block of the upserts, both of the log compaction's instant. The logs it merges
   may follow older logs (a run of the newest logs, ``compaction.merge_run``): a key those
   hold, then deleted and written again in the run, must lose what they hold, so the
   merged log says the delete too, and readers apply its two blocks in order
   (``merge.read_deltas``). Its name says the first instant it restates (``hudi/files.py``).
   Its blocks do not name the instants they restate (Hudi's ``COMPACTED_BLOCK_TIMES``
   header): hudi-rs 0.5 then skips the merged blocks themselves once the logs they restate
   are cleaned (seen in ``tests/unit/format/services/test_log_compaction.py``'s clean).

Reading the slice with the merged log in place of the logs it merges gives what reading
them one by one gives; a reader that reads the merged logs too (hudi-rs reads every
block) reads each record twice, the same record, and gets the same rows.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dynbucket.base.columns import DELETE, OP
from dynbucket.format.file_group import adopted
from dynbucket.format.file_group.merge import KEY, fold_logs, merge_columns, read_deltas
from dynbucket.format.file_group.slices import DataFile
from dynbucket.format.file_group.stale import remember_largest
from dynbucket.format.file_group.writer import delete_ordering, log_block_options
from dynbucket.format.hudi import files as names
from dynbucket.format.hudi import log_file
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.transaction import WrittenFile


def mergeable(spec: TableSpec) -> bool:
    """Whether a slice's logs can be merged into one log: a delete record must be able to
    say its commit order (``writer.delete_ordering``; other tables' logs hold no deletes,
    but their writes rewrite base files, so they have few logs)."""
    return spec.options.merge_on_read and delete_ordering(spec) is not None


def write_merged_log(
    store: TableStore,
    spec: TableSpec,
    partition: str,
    file_id: str,
    name: str,
    logs: Sequence[DataFile],
    base_file: str = "",
) -> WrittenFile:
    """Writes ``logs`` (one slice's, oldest first) merged into the log file ``name`` of
    ``partition`` (its writer instant: the log compaction's; ``base_file``: the name of the
    slice's base file); returns it as written."""
    parsed = names.parse(name)
    if parsed is None or parsed.kind != "log":
        raise ValueError(f"{name!r} is not a log file name")
    instant = parsed.instant
    columns = merge_columns(spec, [*spec.schema.names, *spec.meta_fields])
    deltas = read_deltas(store, spec, logs, columns)  # 1.
    folded = fold_logs(spec, deltas)  # 2.
    deleted = pc.equal(folded.column(OP), DELETE)
    upserts = folded.filter(pc.invert(deleted))
    # A key deleted in the run and written again after: deleted, then upserted (the
    # delete wipes what the logs before the run say of it; the run's own upsert follows).
    ever_deleted = pa.concat_arrays(
        [d.filter(pc.equal(d.column(OP), DELETE)).column(KEY).combine_chunks() for d in deltas]
    )
    again = pc.is_in(upserts.column(KEY), value_set=ever_deleted)
    deletes = pa.concat_arrays(
        [
            folded.filter(deleted).column(KEY).combine_chunks(),
            upserts.filter(again).column(KEY).combine_chunks(),
        ]
    )
    path = store.path(partition, name)
    blocks = []  # 3. The deletes first: a reader applies a log's blocks in order.
    ordering = delete_ordering(spec)
    if len(deletes) and ordering is not None:
        keys = deletes.to_pylist()
        blocks.append(log_file.delete_block(keys, [partition] * len(keys), ordering, instant))
    if upserts.num_rows:
        buffer = io.BytesIO()
        rows = upserts.select(spec.file_schema().names).cast(spec.file_schema())
        pq.write_table(rows, buffer, **log_block_options(spec))
        remember_largest(path, spec, pq.ParquetFile(pa.BufferReader(buffer.getbuffer())).metadata)
        schema = spec.avro_schema(meta_fields=True)
        blocks.append(log_file.data_block(buffer.getbuffer(), instant, schema))
    size = store.write_file(path, blocks)
    return WrittenFile(
        partition,
        path,
        "log",
        upserts.num_rows + int(pc.sum(deleted).as_py() or 0),
        size,
        file_id,
        adopted.load(store).bucket_of(file_id),
        prev_commit=parsed.base_instant,
        base_file=base_file,
        log_version=parsed.version,
    )
