"""The Spark stage that tags rows with buckets by calling the assigner actors.

Runs inside ``mapInArrow`` in Spark's Python workers (docs/data-path.md explains why this
path rather than RayDP's ``from_spark``/``to_spark``). Only the two columns the assigner
reads travel to the actor; its answer (bucket, new-key flag) is attached to the batch here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dynbucket.actors.link import RayLink
from dynbucket.base import columns
from dynbucket.base.keyhash import slot_of
from dynbucket.format.records.incoming import annotate
from dynbucket.format.records.incoming import refuse_known as refuse_known_keys
from dynbucket.format.table.spec import TableSpec
from dynbucket.write.batches import ROWS_PER_CALL, joined
from dynbucket.write.moves import one_per_key, with_move_outs

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

#: A ``mapInArrow`` function: a task's Arrow batches in, batches out. Stage functions also
#: take a dict that they add the seconds of their stages to (one per task).
ArrowFn = Callable[..., Iterator[pa.RecordBatch]]


def tagged_schema(schema: StructType, moves: bool = False) -> StructType:
    """A Spark schema plus the two columns the assign stage appends (and, for a global
    index, ``moves``: where a key moves from)."""
    from pyspark.sql.types import BooleanType, IntegerType, StringType, StructField, StructType

    extra = [
        StructField(columns.FROM_PARTITION, StringType(), nullable=True),
        StructField(columns.FROM_BUCKET, IntegerType(), nullable=False),
    ]
    return StructType(
        [
            *schema.fields,
            StructField(columns.BUCKET, IntegerType(), nullable=False),
            StructField(columns.IS_NEW, BooleanType(), nullable=False),
            *(extra if moves else []),
        ]
    )


def assign_fn(
    link: RayLink,
    actor_names: Sequence[str],
    checkpoint: int,
    prepare: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None,
    method: str = "assign",
    refuse_known: Sequence[str] = (),
    rows_per_call: int = ROWS_PER_CALL,
    global_spec: TableSpec | None = None,
) -> ArrowFn:
    """A ``mapInArrow`` function tagging each row with ``_bucket`` and ``_is_new``.

    A task holds rows of any slots, where Spark read them: each call's rows are split by
    slot (``pmod(hash, N)``) and sent to each slot's actor at once, so correctness never
    depends on Spark's partitioning, and no shuffle routes rows to slots.

    Args:
        link: where the actors live.
        actor_names: the slot actors' names, slot ``i`` at position ``i``.
        checkpoint: the open instant's checkpoint id.
        prepare: checks each batch and adds ``_partition`` (raising on bad records).
        method: ``assign`` (upserts) or ``locate`` (deletes: unknown keys get bucket -1).
        refuse_known: for inserts, the key fields to name when a key already exists (then
            the task fails with ``InvalidInputError``).
        rows_per_call: Spark's Arrow batches are joined up to this many rows per actor
            call (a call costs about a millisecond of Ray overhead whatever its size).
        global_spec: a global index's table: the task's rows (all of each key's records:
            the write shuffled them by key hash) are checked, then kept one per key
            (``moves.one_per_key``) before any is sent; each moving key gets its delete
            where it was (``moves.with_move_outs``).
    """
    names = list(actor_names)
    sent_columns = [columns.PARTITION, columns.HASH]
    if global_spec is not None:
        sent_columns.append(columns.OP)

    def tag(
        batches: Iterable[pa.RecordBatch], seconds: dict[str, float] | None = None
    ) -> Iterator[pa.RecordBatch]:
        import ray

        handles = [link.actor(name) for name in names]
        times = seconds if seconds is not None else {}

        def checked(batch: pa.RecordBatch) -> pa.RecordBatch:
            start = time.perf_counter()
            if prepare is not None:
                batch = prepare(batch)
            times["check"] = times.get("check", 0.0) + time.perf_counter() - start
            return batch

        def send(batch: pa.RecordBatch) -> tuple[list[pa.RecordBatch], list[Any]]:
            if global_spec is None:
                batch = checked(batch)
            hashes = batch.column(columns.HASH).to_numpy(zero_copy_only=False)
            slots = slot_of(hashes, len(handles))
            present = np.unique(slots)
            per_slot = (
                [batch]
                if len(present) == 1
                else [batch.take(pa.array(np.flatnonzero(slots == s))) for s in present]
            )
            refs = [
                getattr(handles[int(s)], method).remote(checkpoint, rows.select(sent_columns))
                for s, rows in zip(present, per_slot, strict=True)
            ]
            return per_slot, refs

        def receive(per_slot: list[pa.RecordBatch], refs: list[Any]) -> Iterator[pa.RecordBatch]:
            start = time.perf_counter()
            answers = ray.get(refs)  # the part of the actors' work not overlapped
            times["tag"] = times.get("tag", 0.0) + time.perf_counter() - start
            for rows, answer in zip(per_slot, answers, strict=True):
                tagged = rows.append_column(
                    columns.BUCKET, answer.column(columns.BUCKET)
                ).append_column(columns.IS_NEW, answer.column(columns.IS_NEW))
                if refuse_known:
                    refuse_known_keys(tagged, refuse_known)
                if global_spec is None:
                    yield tagged
                    continue
                where = answer.column(columns.PARTITION)
                tagged = tagged.set_column(
                    tagged.schema.get_field_index(columns.PARTITION), columns.PARTITION, where
                )
                for name in (columns.FROM_PARTITION, columns.FROM_BUCKET):
                    tagged = tagged.append_column(name, answer.column(name))
                yield from with_move_outs(pa.Table.from_batches([tagged])).to_batches()

        # 1. Join Spark's batches into calls of about ``rows_per_call`` rows.
        # 2. Send each call before taking the answer of the one before, so the actor
        #    works while this task checks the next rows.
        if global_spec is not None:  # every record of a task's keys is here: one per key
            whole = [checked(b) for b in batches]
            if not whole:
                return
            deletes = method == "locate"
            table = one_per_key(global_spec, pa.Table.from_batches(whole), deletes)
            batches = table.combine_chunks().to_batches()
        in_flight: tuple[list[pa.RecordBatch], list[Any]] | None = None
        for batch in joined(batches, rows_per_call):
            sent = send(batch)
            if in_flight is not None:
                yield from receive(*in_flight)
            in_flight = sent
        if in_flight is not None:
            yield from receive(*in_flight)

    return tag


def record_check(
    spec: TableSpec, deletes: bool, insert: bool = False, kept: Sequence[str] = ()
) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """Stage A's check of each batch: keys, ordering values, partition paths, ``_op`` (the
    same checks as an in-process write; a bad record fails the task with its error)."""

    def check(batch: pa.RecordBatch) -> pa.RecordBatch:
        table = pa.Table.from_batches([batch])
        table = annotate(spec, table, deletes=deletes, with_hash=False, insert=insert, kept=kept)
        batches = table.combine_chunks().to_batches()
        return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)

    return check
