"""The Spark stage that writes tagged rows: one task per set of file groups.

After the shuffle by (partition, bucket), a task holds every row of each of its file groups.
Per group it keeps one record per key, resolves the group's file id (existing groups from the
committed file listing; new buckets get the deterministic id of (table, instant, partition,
bucket)), writes one file atomically, and collects the index entries of new keys, which it
writes as one index file per partition named after its Spark partition. A retried or
speculative attempt therefore writes the same names with the same rows (I4).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from pyspark.sql.pandas.types import from_arrow_schema

from dynbucket.pipeline.layout import data_files, file_id_for, file_slices
from dynbucket.pipeline.local_writer import file_groups
from dynbucket.pipeline.records import dedupe, write_group
from dynbucket.pipeline.rli import RecordLevelIndex, entries_for
from dynbucket.pipeline.spec import BUCKET, IS_NEW, TableSpec
from dynbucket.pipeline.storage import TableStore

ArrowFn = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]

#: One row per file a task wrote, plus its counts.
WRITTEN_ARROW = pa.schema([
    ("partition", pa.string(), False), ("path", pa.string(), False),
    ("kind", pa.string(), False), ("rows", pa.int64(), False), ("bytes", pa.int64(), False),
    ("file_id", pa.string(), False), ("bucket", pa.int32(), False),
    ("inserted", pa.int64(), False), ("updated", pa.int64(), False),
    ("deleted", pa.int64(), False), ("not_found", pa.int64(), False),
])  # fmt: skip
WRITTEN = from_arrow_schema(WRITTEN_ARROW)


def write_fn(
    uri: str,
    filesystem: pafs.FileSystem | None,
    spec: TableSpec,
    instant: str,
    visible: frozenset[str],
    deletes: bool,
) -> ArrowFn:
    """A ``mapInArrow`` function writing the file groups of its task."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        collected = [b for b in batches if b.num_rows]
        if not collected:
            return
        task = TaskContext.get()
        part = f"p{task.partitionId() if task is not None else 0}"
        store = TableStore.at(uri, filesystem)
        rows = pa.Table.from_batches(collected)
        unknown = pc.less(rows.column(BUCKET), 0)
        not_found = int(pc.sum(unknown).as_py() or 0)
        rows = rows.filter(pc.invert(unknown))
        existing: dict[str, dict[int, str]] = {}
        entries: dict[str, list[pa.Table]] = defaultdict(list)
        out: list[dict[str, Any]] = []
        for partition, bucket, group in file_groups(rows):
            if partition not in existing:
                slices = file_slices(data_files(store, partition), visible)
                existing[partition] = {s.bucket: s.file_id for s in slices}
            group = dedupe(spec, group, deletes=deletes)
            known_id = existing[partition].get(bucket)
            file_id = known_id or file_id_for(spec.table_id, instant, partition, bucket)
            written = write_group(store, spec, instant, partition, file_id, group,
                                  new_group=known_id is None)  # fmt: skip
            is_new = group.column(IS_NEW)
            inserted = int(pc.sum(is_new).as_py() or 0)
            if inserted:
                new = group.filter(is_new)
                entries[partition].append(entries_for(new, spec, bucket, file_id, instant))
            out.append({
                "partition": partition, "path": written.path, "kind": written.kind,
                "rows": written.rows, "bytes": written.size, "file_id": file_id,
                "bucket": bucket, "inserted": inserted,
                "updated": 0 if deletes else group.num_rows - inserted,
                "deleted": group.num_rows if deletes else 0, "not_found": 0,
            })  # fmt: skip
        index = RecordLevelIndex(store, spec)
        for partition, parts in entries.items():
            table = pa.concat_tables(parts)
            f = index.write(partition, instant, table, part=part)
            out.append({
                "partition": partition, "path": f.path, "kind": "index-delta",
                "rows": table.num_rows, "bytes": f.size, "file_id": "", "bucket": -1,
                "inserted": 0, "updated": 0, "deleted": 0, "not_found": 0,
            })  # fmt: skip
        if not_found:
            out.append({
                "partition": "", "path": "", "kind": "none", "rows": 0, "bytes": 0,
                "file_id": "", "bucket": -1, "inserted": 0, "updated": 0, "deleted": 0,
                "not_found": not_found,
            })  # fmt: skip
        yield pa.RecordBatch.from_pylist(out, schema=WRITTEN_ARROW)

    return write
