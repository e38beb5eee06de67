"""The assigner slot as a Ray actor: a thin shell over :class:`BucketAssigner`.

Concurrency rule: one call at a time. The actor is a synchronous Ray actor with
``max_concurrency=1``, so calls (from any number of Spark tasks and the driver) run one after
another in arrival order and the core needs no locks. Ray restarts a crashed actor
(``max_restarts=-1``); it comes back empty, bootstraps again from the record-level index,
and refuses ``assign`` for the instant it lost (``AssignerRestartedError``) until the driver
begins a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from dynbucket.actors import kernels
from dynbucket.actors.allocator import ALONE, Lane
from dynbucket.actors.assigner import Answer, BucketAssigner, IndexSource, NewKeys
from dynbucket.base import columns
from dynbucket.base.errors import InvalidInputError
from dynbucket.base.options import DynamicBucketIndex


class AssignerActor:
    """One assigner slot. Made remote by :func:`assigner_actor_class`."""

    def __init__(
        self,
        slot: int,
        num_slots: int,
        options: DynamicBucketIndex,
        source_factory: Callable[[], IndexSource],
        core: type[BucketAssigner] = BucketAssigner,
    ) -> None:
        """``core``: the plain assigner the table's bucket scheme places keys with
        (:class:`GlobalBucketAssigner` for a global index), chosen by the write layer's
        registry of schemes (``write/schemes.SIDES``): the shell adapts any of them."""
        kernels.warm_up()
        self._core = core(slot, num_slots, options, source_factory())

    @property
    def core(self) -> BucketAssigner:
        """The plain assigner this shell adapts (its checkpoint flow, in process)."""
        return self._core

    def begin(self, checkpoint: int, latest_successful: int, lanes: Lane = ALONE) -> None:
        self._core.begin(checkpoint, latest_successful, lanes)

    def assign(self, checkpoint: int, batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
        """The batch's rows with ``_bucket`` (int32) and ``_is_new`` (bool) appended.

        The batch needs ``_partition`` (string or dictionary of strings) and ``_hash``
        (int64); other columns ride along untouched. A global index's slot also reads
        ``_op`` when the batch has it (a delete goes where its key is), sets ``_partition``
        to where each row goes, and appends ``_from_partition`` and ``_from_bucket``
        (:func:`_answered`).
        """
        if isinstance(batch, pa.Table):
            batch = _one_batch(batch)
        names, codes = _partition_codes(batch)
        hashes = _column(batch, columns.HASH).to_numpy(zero_copy_only=False)
        ops = None
        if columns.OP in batch.schema.names:
            ops = _column(batch, columns.OP).to_numpy(zero_copy_only=False)
        return _answered(batch, self._core.place(checkpoint, names, codes, hashes, ops))

    def locate(self, checkpoint: int, batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
        """The batch's rows with ``_bucket`` (-1 for keys the table does not know) and
        ``_is_new`` (false): the keys ``checkpoint`` deletes (``BucketAssigner.locate``)."""
        if isinstance(batch, pa.Table):
            batch = _one_batch(batch)
        names, codes = _partition_codes(batch)
        hashes = _column(batch, columns.HASH).to_numpy(zero_copy_only=False)
        return _answered(batch, self._core.find(checkpoint, names, codes, hashes))

    def leave(self, checkpoint: int, batch: pa.RecordBatch | pa.Table) -> None:
        """Notes keys (``_partition``, ``_hash``) ``checkpoint`` takes out of their
        partitions (``BucketAssigner.leave``)."""
        if isinstance(batch, pa.Table):
            batch = _one_batch(batch)
        names, codes = _partition_codes(batch)
        hashes = _column(batch, columns.HASH).to_numpy(zero_copy_only=False)
        self._core.leave(checkpoint, names, codes, hashes)

    def snapshot(
        self, checkpoint: int, latest_successful: int, new_keys: NewKeys | None = None
    ) -> list[str]:
        return self._core.snapshot(checkpoint, latest_successful, new_keys)

    def abort(self, checkpoint: int) -> int:
        return self._core.abort(checkpoint)

    def reset(self) -> int:
        return self._core.reset()

    def catch_up(self, latest_successful: int) -> int:
        return self._core.catch_up(latest_successful)

    def stats(self) -> dict[str, Any]:
        return self._core.stats().as_dict()

    def ping(self) -> int:
        """The slot number; a cheap liveness check."""
        return self._core.slot


def _answered(batch: pa.RecordBatch, answer: Answer) -> pa.RecordBatch:
    """``batch`` with ``_bucket`` and ``_is_new`` appended; with ``answer.moves`` (a global
    index's slot) also ``_partition`` set to where each row goes (a delete: where its key
    is) and ``_from_partition`` / ``_from_bucket`` (null / -1 unless the key moves out of
    there)."""
    out = batch.append_column(columns.BUCKET, pa.array(answer.buckets, pa.int32())).append_column(
        columns.IS_NEW, pa.array(answer.is_new, pa.bool_())
    )
    if answer.moves is None:
        return out
    names, where, from_part, from_bucket = answer.moves
    path = np.array(names + [None], dtype=object)
    given = out.column(out.schema.get_field_index(columns.PARTITION)).cast(pa.string())
    found = where >= 0
    target = pa.array(
        np.where(found, path[where], given.to_numpy(zero_copy_only=False)), pa.string()
    )
    out = out.set_column(out.schema.get_field_index(columns.PARTITION), columns.PARTITION, target)
    return out.append_column(
        columns.FROM_PARTITION, pa.array(path[from_part], pa.string())
    ).append_column(columns.FROM_BUCKET, pa.array(from_bucket, pa.int32()))


def assigner_actor_class(**options: Any) -> Any:
    """``ray.remote`` over :class:`AssignerActor` with dynbucket's actor options."""
    import ray

    return ray.remote(AssignerActor).options(
        max_restarts=-1, max_task_retries=0, max_concurrency=1, **options
    )


def _column(batch: pa.RecordBatch, name: str) -> pa.Array:
    index = batch.schema.get_field_index(name)
    if index < 0:
        raise InvalidInputError(
            f"assigner batch has no column {name!r} (columns: {batch.schema.names}); add it "
            "before calling the assigner"
        )
    column = batch.column(index)
    if column.null_count:
        raise InvalidInputError(f"assigner batch column {name!r} holds nulls; it must not")
    return column


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    batches = table.combine_chunks().to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


def _partition_codes(batch: pa.RecordBatch) -> tuple[list[str], np.ndarray]:
    return columns.partition_codes(_column(batch, columns.PARTITION))
