"""A global index's part of stage A, around the slots' answer (``actors/global_assigner.py``).

Before the slots: one record per key across partitions (:func:`one_per_key`), since a
slot gives each key one location per instant and the newest record decides where the key
ends. After them: each record whose key moves gets a twin, the delete it writes where the
key was (:func:`with_move_outs`); the shuffle by (partition, bucket) takes each to its own
file group, and both groups settle the move alike (``file_group/settle.settle_moves``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.columns import (
    BUCKET,
    DELETE,
    FROM_BUCKET,
    FROM_PARTITION,
    IS_NEW,
    MOVE_OUT,
    OP,
    PARTITION,
)
from dynbucket.format.records.incoming import dedupe
from dynbucket.format.table.spec import TableSpec


def one_per_key(spec: TableSpec, rows: pa.Table, deletes: bool) -> pa.Table:
    """``rows`` of a global index's table with one record per key whatever its partition
    value (the largest ordering value, ties to the last; a delete write's first)."""
    if rows.num_rows <= 1:
        return rows
    return dedupe(spec, rows, deletes=deletes, by_partition=False)


def with_move_outs(tagged: pa.Table) -> pa.Table:
    """Tagged rows plus, for each upsert whose key moves (``_from_bucket`` >= 0), a delete
    of its key in the file group it leaves (``_from_bucket`` = ``MOVE_OUT`` there)."""
    if FROM_BUCKET not in tagged.column_names:
        return tagged
    moving = pc.and_(
        pc.greater_equal(tagged.column(FROM_BUCKET), 0), pc.not_equal(tagged.column(OP), DELETE)
    )
    n = int(pc.sum(moving).as_py() or 0)
    if n == 0:
        return tagged
    outs = tagged.filter(moving)
    replaced = {
        PARTITION: outs.column(FROM_PARTITION),
        BUCKET: outs.column(FROM_BUCKET),
        OP: pa.array(np.full(n, DELETE, np.int8)),
        IS_NEW: pa.array(np.zeros(n, np.bool_)),
        FROM_BUCKET: pa.array(np.full(n, MOVE_OUT, np.int32)),
    }
    for name, column in replaced.items():
        i = outs.schema.get_field_index(name)
        outs = outs.set_column(i, outs.schema.field(i), column.cast(outs.schema.field(i).type))
    return pa.concat_tables([tagged, outs])
