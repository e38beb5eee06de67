"""The Spark stage that writes tagged rows: one task per set of file groups.

After the shuffle by (partition, bucket) (or in the slot's own task, when one shuffle
suffices), a task holds every row of each of its file groups and hands them to the one
file-group writer; its index files are named after its Spark partition, so a retried or
speculative attempt writes the same names with the same rows (I4). What it wrote travels
back to the driver as rows of :data:`WRITTEN`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql.pandas.types import from_arrow_schema

from dynbucket.actors.errors import DynBucketError, to_wire
from dynbucket.pipeline.format.file_groups import GroupWrites, write_file_groups
from dynbucket.pipeline.format.storage import TableStore
from dynbucket.pipeline.format.table_spec import TableSpec
from dynbucket.pipeline.format.transaction import WrittenFile

ArrowFn = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]

#: One row per file a task wrote, and one row (kind ``counts``) of what happened to keys.
WRITTEN_ARROW = pa.schema([
    ("partition", pa.string(), False), ("path", pa.string(), False),
    ("kind", pa.string(), False), ("rows", pa.int64(), False), ("bytes", pa.int64(), False),
    ("file_id", pa.string(), False), ("bucket", pa.int32(), False),
    ("inserted", pa.int64(), False), ("updated", pa.int64(), False),
    ("deleted", pa.int64(), False), ("not_found", pa.int64(), False),
])  # fmt: skip
WRITTEN = from_arrow_schema(WRITTEN_ARROW)
_COUNTS = "counts"


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
        written = write_file_groups(store, spec, instant, rows, visible, deletes, part)
        yield to_rows(written)

    return write


def to_rows(written: GroupWrites) -> pa.RecordBatch:
    """A task's writes as rows of :data:`WRITTEN`."""
    rows: list[dict[str, Any]] = [
        {"partition": f.partition, "path": f.path, "kind": f.kind, "rows": f.rows,
         "bytes": f.size, "file_id": f.file_id, "bucket": f.bucket}
        for f in written.files
    ]  # fmt: skip
    rows.append({"partition": "", "path": "", "kind": _COUNTS, "rows": 0, "bytes": 0,
                 "file_id": "", "bucket": -1, "inserted": written.keys_inserted,
                 "updated": written.keys_updated, "deleted": written.keys_deleted,
                 "not_found": written.keys_not_found})  # fmt: skip
    zeros = {"inserted": 0, "updated": 0, "deleted": 0, "not_found": 0}
    return pa.RecordBatch.from_pylist([{**zeros, **r} for r in rows], schema=WRITTEN_ARROW)


def from_rows(rows: Sequence[Any]) -> GroupWrites:
    """Every task's writes (collected rows of :data:`WRITTEN`) as one :class:`GroupWrites`."""
    out = GroupWrites()
    for r in rows:
        if r["kind"] == _COUNTS:
            out.keys_inserted += r["inserted"]
            out.keys_updated += r["updated"]
            out.keys_deleted += r["deleted"]
            out.keys_not_found += r["not_found"]
        else:
            out.files.append(WrittenFile(r["partition"], r["path"], r["kind"], r["rows"],
                                         r["bytes"], r["file_id"], r["bucket"]))  # fmt: skip
    return out


def carry_errors(fn: ArrowFn) -> ArrowFn:
    """``fn``, with a dynbucket error it raises carried to the driver whole (class and
    fields; Spark passes only the text of a task's failure)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            yield from fn(batches)
        except DynBucketError as e:
            raise RuntimeError(to_wire(e)) from e

    return run
