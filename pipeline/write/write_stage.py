"""The Spark stage that writes tagged rows: one task per set of file groups.

After the shuffle by (partition, bucket), a task holds every row of each of its file groups
and hands them to the one file-group writer; its index files are named after its Spark
partition, so a retried or speculative attempt writes the same names with the same rows
(I4). What it wrote travels back to the driver as rows of :data:`WRITTEN_ARROW`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from dynbucket.base.errors import DynBucketError, InvalidInputError, from_wire, to_wire
from dynbucket.format.file_group.writer import GroupWrites, write_file_groups
from dynbucket.format.table.context import WriteContext
from dynbucket.format.timeline.transaction import WrittenFile
from dynbucket.write.assign_stage import ArrowFn

#: One row per file a task wrote (a ``WrittenFile``), one row (kind ``counts``) of what
#: happened to keys, and one (kind ``gone``) per partition of the hashes of keys records
#: marked as deletes took out (``GroupWrites.gone``: int64 bytes).
WRITTEN_ARROW = pa.schema(
    [
        ("partition", pa.string(), False),
        ("path", pa.string(), False),
        ("kind", pa.string(), False),
        ("rows", pa.int64(), False),
        ("size", pa.int64(), False),
        ("file_id", pa.string(), False),
        ("bucket", pa.int32(), False),
        ("inserts", pa.int64(), False),
        ("updates", pa.int64(), False),
        ("stale", pa.int64(), False),
        ("deletes", pa.int64(), False),
        ("prev_commit", pa.string()),
        ("base_file", pa.string(), False),
        ("log_version", pa.int32()),
        ("slice_logs", pa.int32()),
        ("base_bytes", pa.int64(), False),
        ("log_bytes", pa.int64(), False),
        ("not_found", pa.int64(), False),
        ("stages", pa.string()),
        ("hashes", pa.binary()),
    ]
)


def written_schema() -> Any:
    """:data:`WRITTEN_ARROW` as Spark's schema (Spark's modules load with the first Spark
    write, not with the package)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(WRITTEN_ARROW)


_COUNTS, _GONE = "counts", "gone"


def write_fn(ctx: WriteContext) -> ArrowFn:
    """A ``mapInArrow`` function writing the file groups of its task (of the write ``ctx``,
    shipped to the task whole)."""

    def write(
        batches: Iterable[pa.RecordBatch], seconds: dict[str, float] | None = None
    ) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        collected = [b for b in batches if b.num_rows]
        if not collected:
            return
        task = TaskContext.get()
        tag = f"p{task.partitionId() if task is not None else 0}"
        written = write_file_groups(ctx, pa.Table.from_batches(collected), tag)
        written.add_seconds(seconds or {})
        yield to_rows(written)

    return write


def to_rows(written: GroupWrites) -> pa.RecordBatch:
    """A task's writes as rows of :data:`WRITTEN_ARROW`."""
    rows: list[dict[str, Any]] = [
        # An index file's entries stay in the task (the row holds the file, not its rows).
        {
            **dataclasses.asdict(dataclasses.replace(f, entries=None)),
            "not_found": 0,
            "stages": None,
            "hashes": None,
        }
        for f in written.files
    ]
    for partition, hashes in written.gone_keys().items():
        rows.append(
            {
                **_EMPTY,
                "partition": partition,
                "kind": _GONE,
                "hashes": hashes.astype("<i8").tobytes(),
            }
        )
    rows.append(
        {
            **_EMPTY,
            "kind": _COUNTS,
            "rows": written.keys_moved,  # a counts row's rows: the keys a global index moved
            "inserts": written.keys_inserted,
            "updates": written.keys_updated,
            "stale": written.keys_stale,
            "deletes": written.keys_deleted,
            "not_found": written.keys_not_found,
            "stages": json.dumps(written.seconds),
        }
    )
    return pa.RecordBatch.from_pylist(rows, schema=WRITTEN_ARROW)


#: A row of :data:`WRITTEN_ARROW` that is no file.
_EMPTY: dict[str, Any] = {
    "partition": "",
    "path": "",
    "rows": 0,
    "size": 0,
    "file_id": "",
    "bucket": -1,
    "inserts": 0,
    "updates": 0,
    "stale": 0,
    "deletes": 0,
    "prev_commit": None,
    "base_file": "",
    "log_version": None,
    "slice_logs": None,
    "base_bytes": 0,
    "log_bytes": 0,
    "not_found": 0,
    "stages": None,
    "hashes": None,
}


def from_rows(rows: Sequence[Any]) -> GroupWrites:
    """Every task's writes (collected rows of :data:`WRITTEN_ARROW`) as one :class:`GroupWrites`."""
    out = GroupWrites()
    for r in rows:
        fields = r.asDict() if hasattr(r, "asDict") else dict(r)
        not_found = fields.pop("not_found")
        stages = fields.pop("stages")
        hashes = fields.pop("hashes")
        if fields["kind"] == _GONE:
            out.add_gone(fields["partition"], np.frombuffer(hashes, "<i8").astype(np.int64))
        elif fields["kind"] == _COUNTS:
            out.keys_inserted += fields["inserts"]
            out.keys_updated += fields["updates"]
            out.keys_stale += fields["stale"]
            out.keys_deleted += fields["deletes"]
            out.keys_not_found += not_found
            out.keys_moved += fields["rows"]
            out.add_seconds(json.loads(stages or "{}"))
        else:
            out.files.append(WrittenFile(**fields))
    return out


def carry_errors(fn: ArrowFn, inputs: InputErrors | None = None) -> ArrowFn:
    """``fn``, with a dynbucket error it raises carried to the driver whole (class and
    fields; Spark passes only the text of a task's failure). An input error (a bad
    record: ``InvalidInputError``) with ``inputs`` is told to the driver without failing
    the task: the same records fail the same way on every attempt, so Spark's retries
    would only delay the error (4 attempts, seconds) and print each attempt's trace."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            yield from fn(batches)
        except InvalidInputError as e:
            if inputs is None:
                raise RuntimeError(to_wire(e)) from e
            inputs.found(e)
        except DynBucketError as e:
            raise RuntimeError(to_wire(e)) from e

    return run


class _Texts:
    """A Spark accumulator's parameter: lists of texts, concatenated (duck-typed, so that
    this module loads without pyspark)."""

    def zero(self, value: list[str]) -> list[str]:
        return []

    def addInPlace(self, first: list[str], second: list[str]) -> list[str]:  # noqa: N802
        return first + second


class InputErrors:
    """The input errors a write's Spark tasks found (an accumulator: each task's are
    merged on the driver as it succeeds); :meth:`raise_any` raises the first as itself."""

    def __init__(self, spark: Any) -> None:
        self._texts = spark.sparkContext.accumulator([], _Texts())

    def found(self, error: InvalidInputError) -> None:
        """In a task: tells the driver of ``error``."""
        self._texts.add([to_wire(error)])

    def raise_any(self) -> None:
        """On the driver, after the job: raises the first input error a task found."""
        texts = self._texts.value
        if texts:
            error = from_wire(texts[0])
            raise error if error is not None else InvalidInputError(texts[0])
