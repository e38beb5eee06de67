"""Names of the columns dynbucket adds to records, files and reads, and the bucket id range.

The assigner reads and adds the first four (shared with the Spark stages); the format adds
the others. A table's own fields may not use any of these names.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PARTITION = "_partition"
"""Partition path of the row (hive style, ``field=value/...``); "" for unpartitioned."""
HASH = "_hash"
"""64-bit hash of the row's record key (Spark's ``xxhash64`` of the key fields)."""
BUCKET = "_bucket"
"""Bucket id the assigner chose (int32)."""
IS_NEW = "_is_new"
"""Whether the key is not yet committed in the record-level index (bool)."""

INSTANT = "_instant"
"""The instant that last wrote the row (in data files and reads)."""
OP = "_op"
"""What a delta-file row does: :data:`UPSERT` or :data:`DELETE` (int8)."""
FILE_ID = "_file_id"
"""The row's file group (in index files and reads)."""
SEQ = "_seq"
"""Position of a record in its batch or commit order, while merging."""
IS_DELETE = "_is_delete"
"""Whether an incoming record deletes its key (bool): what its delete marker says
(``_hoodie_is_deleted``, or the table's delete field), from fitting to stage A."""

FROM_PARTITION = "_from_partition"
"""Global index: the partition a record's key moves out of (null: no move)."""
FROM_BUCKET = "_from_bucket"
"""Global index: the bucket a record's key moves out of (int32): -1 no move,
:data:`MOVE_OUT` on the delete row a move writes where the key was."""
MOVE_OUT = -2

RESERVED = frozenset(
    {HASH, INSTANT, OP, PARTITION, BUCKET, FILE_ID, IS_NEW, SEQ, IS_DELETE}
    | {FROM_PARTITION, FROM_BUCKET}
)

#: ``_op`` values in delta files.
UPSERT, DELETE = 0, 1

#: The largest bucket id: the assigner's cache keeps bucket ids in 16 bits, one value of
#: which marks a slot in use (``actors.kernels.RESERVED``).
MAX_BUCKET_ID = 0xFFFD


def partition_codes(column: pa.Array | pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    """A ``_partition`` column as (its distinct paths, each row's index into them): the one
    way every stage groups rows by partition (a batch holds few partitions; a dictionary
    column is taken as it is)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    return column.dictionary.to_pylist(), column.indices.to_numpy(zero_copy_only=False)
