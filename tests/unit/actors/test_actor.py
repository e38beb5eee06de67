"""The actor shell over a slot core, in process (no Ray): Arrow in, the core's answer out,
with exact bucket ids; a global index's slot routes rows where their keys are."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dynbucket.actors.actor import AssignerActor
from dynbucket.actors.assigner import BucketAssigner, EmptySource
from dynbucket.actors.global_assigner import GlobalBucketAssigner
from dynbucket.base import columns
from dynbucket.base.errors import ConfigError
from dynbucket.base.options import DynamicBucketIndex


def batch(partitions: list[str], hashes: list[int], ops: list[int] | None = None) -> pa.Table:
    data = {columns.PARTITION: partitions, columns.HASH: pa.array(hashes, pa.int64())}
    if ops is not None:
        data[columns.OP] = pa.array(ops, pa.int8())
    return pa.table(data)


def committed(actor: AssignerActor, checkpoint: int, rows: pa.Table) -> pa.RecordBatch:
    actor.begin(checkpoint, checkpoint - 1)
    out = actor.assign(checkpoint, rows)
    placed = out.to_pydict()
    new_keys: dict[str, dict[int, int]] = {}
    rows = zip(
        placed[columns.PARTITION], placed[columns.BUCKET], placed[columns.IS_NEW], strict=True
    )
    for p, b, n in rows:
        if n:
            new_keys.setdefault(p, {}).setdefault(b, 0)
            new_keys[p][b] += 1
    actor.snapshot(checkpoint, checkpoint, new_keys)
    return out


def test_a_partition_scoped_slot_answers_buckets_and_new_keys_only() -> None:
    actor = AssignerActor(0, 1, DynamicBucketIndex(max_keys_per_bucket=2), EmptySource)
    out = committed(actor, 1, batch(["a", "a", "a", "b"], [1, 2, 3, 1]))
    assert out.schema.names == [columns.PARTITION, columns.HASH, columns.BUCKET, columns.IS_NEW]
    assert out.column(columns.BUCKET).to_pylist() == [0, 0, 1, 0]
    assert out.column(columns.IS_NEW).to_pylist() == [True] * 4
    # An ``_op`` column rides along; this slot finds deletes by locate, not by it.
    actor.begin(2, 1)
    again = actor.assign(2, batch(["a", "a"], [3, 4], [columns.DELETE, columns.UPSERT]))
    assert again.column(columns.BUCKET).to_pylist() == [1, 1]
    assert again.column(columns.IS_NEW).to_pylist() == [False, True]
    found = actor.locate(2, batch(["a", "b"], [2, 9]))
    assert found.column(columns.BUCKET).to_pylist() == [0, -1]
    assert found.column(columns.IS_NEW).to_pylist() == [False, False]
    assert columns.FROM_PARTITION not in found.schema.names


def test_a_global_slot_routes_moves_and_deletes_where_their_keys_are() -> None:
    options = DynamicBucketIndex(max_keys_per_bucket=2, global_index=True)
    actor = AssignerActor(0, 1, options, EmptySource, GlobalBucketAssigner)
    committed(actor, 1, batch(["a", "a", "a"], [1, 2, 3]))
    actor.begin(2, 1)
    # Key 1 moves to b; key 3 is deleted naming z (it lives in a); key 7 is new in b.
    out = actor.assign(
        2, batch(["b", "z", "b"], [1, 3, 7], [columns.UPSERT, columns.DELETE, columns.UPSERT])
    ).to_pydict()
    assert out[columns.PARTITION] == ["b", "a", "b"]
    assert out[columns.BUCKET] == [0, 1, 0]
    assert out[columns.IS_NEW] == [True, False, True]
    assert out[columns.FROM_PARTITION] == ["a", None, None]
    assert out[columns.FROM_BUCKET] == [0, -1, -1]
    found = actor.locate(2, batch(["q", "q"], [2, 99])).to_pydict()
    assert found[columns.PARTITION] == ["a", "q"]
    assert found[columns.BUCKET] == [0, -1]
    assert np.array_equal(found[columns.IS_NEW], [False, False])


@pytest.mark.parametrize(
    ("core", "global_index"), [(BucketAssigner, True), (GlobalBucketAssigner, False)]
)
def test_a_core_refuses_the_options_of_another_scheme(
    core: type[BucketAssigner], global_index: bool
) -> None:
    """The shell takes the core it is given; a core given the other scope's options would
    place keys by the wrong rule, so it refuses them, naming the option and the fix."""
    options = DynamicBucketIndex(max_keys_per_bucket=2, global_index=global_index)
    with pytest.raises(ConfigError, match=r"dynamic-bucket.global-index=.*write/schemes.SIDES"):
        AssignerActor(0, 1, options, EmptySource, core)
